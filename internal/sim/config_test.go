package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// The Spec is the `sim:` section of vflag's configuration.
func TestSpecFromYAML(t *testing.T) {
	const doc = `
nics:
  - name: cx6
    total_vfs: 16
    switch_id: 0123456789ABCDEF
    pfs:
      - {pci: "0000:61:00.0", netdev: p0, mac: "b8:ce:f6:00:00:01"}
      - {pci: "0000:61:00.1", netdev: p1}
latency:
  vf_create: 5ms
  mode_change: 1s
  lag_activation: 2s
mirror_netns: /run/netns/sim
`
	var got Spec
	if err := yaml.Unmarshal([]byte(doc), &got); err != nil {
		t.Fatal(err)
	}
	want := Spec{
		NICs: []NICSpec{{
			Name: "cx6", TotalVFs: 16, SwitchID: "0123456789ABCDEF",
			PFs: []PFSpec{{PCI: "0000:61:00.0", Netdev: "p0", MAC: "b8:ce:f6:00:00:01"}, {PCI: "0000:61:00.1", Netdev: "p1"}},
		}},
		Latency:     Latency{VFCreate: 5 * time.Millisecond, ModeChange: time.Second, LAGActivation: 2 * time.Second},
		MirrorNetns: "/run/netns/sim",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	norm, err := validate(&got)
	if err != nil {
		t.Fatal(err)
	}
	if n := norm.NICs[0]; n.SwitchID != "0123456789abcdef" || n.Driver != "mlx5_core" {
		t.Fatalf("normalized %+v", n)
	}
}

// TestDecodeSpecRefusesUnitlessLatency: every latency of the sim section
// needs a unit; a bare number is refused naming its path, not read as ns.
func TestDecodeSpecRefusesUnitlessLatency(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want string
	}{
		{"vf_create", `invalid config:
  sim.latency.vf_create: "2" is a duration without a unit: write "2s" (units ms, s, m, h)`},
		{"mode_change", `invalid config:
  sim.latency.mode_change: "2" is a duration without a unit: write "2s" (units ms, s, m, h)`},
		{"lag_activation", `invalid config:
  sim.latency.lag_activation: "2" is a duration without a unit: write "2s" (units ms, s, m, h)`},
	} {
		raw := map[string]any{
			"nics":    []any{map[string]any{"pfs": []any{map[string]any{"pci": "0000:61:00.0", "netdev": "p0"}}}},
			"latency": map[string]any{tt.key: 2},
		}
		_, err := DecodeSpec(raw)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: error:\n%v\nwant:\n%s", tt.key, err, tt.want)
		}
		raw["latency"] = map[string]any{tt.key: "2ms"}
		if s, err := DecodeSpec(raw); err != nil {
			t.Errorf("%s: 2ms rejected: %v", tt.key, err)
		} else if got := s.Latency.VFCreate + s.Latency.ModeChange + s.Latency.LAGActivation; got != 2*time.Millisecond {
			t.Errorf("%s: 2ms read as %v", tt.key, got)
		}
	}
}
