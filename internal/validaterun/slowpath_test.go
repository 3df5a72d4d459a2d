package validaterun

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/validate"
)

// simLAG is a simulated ConnectX with both ports in switchdev, 2 VFs each,
// bonded in bond0, and the VF representors.
func simLAG(t *testing.T) (*host.Host, []string) {
	t.Helper()
	spec := map[string]any{"nics": []any{map[string]any{"total_vfs": 2, "pfs": []any{
		map[string]any{"pci": "0000:61:00.0", "netdev": "p0"}, map[string]any{"pci": "0000:61:00.1", "netdev": "p1"}}}}}
	h, err := host.Open(host.Options{SimDir: t.TempDir(), SimSpec: spec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	k := h.Kernel
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, pci := range []string{"0000:61:00.0", "0000:61:00.1"} {
		must(h.FS.WriteFile("/sys/bus/pci/devices/"+pci+"/sriov_drivers_autoprobe", []byte("0")))
		must(h.FS.WriteFile("/sys/bus/pci/devices/"+pci+"/sriov_numvfs", []byte("2")))
		must(k.SetEswitchMode(eswitch.Devlink{Bus: "pci", Device: pci}, eswitch.ModeSwitchdev))
	}
	must(k.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100, LacpRate: "fast"}))
	for _, n := range []string{"p0", "p1"} {
		must(k.SetMaster(n, "bond0"))
	}
	for _, n := range []string{"bond0", "p0", "p1"} {
		must(k.SetLinkUp(n, true))
	}
	ports, err := k.Ports()
	must(err)
	var reps []string
	for _, p := range ports {
		if p.Flavour == "pcivf" && p.Netdev != "" {
			reps = append(reps, p.Netdev)
			must(k.SetLinkUp(p.Netdev, true))
		}
	}
	if len(reps) != 4 {
		t.Fatalf("representors %v, want 4", reps)
	}
	return h, reps
}

// TestSlowPathProbeOnSim: validate --traffic's slow-path probe on the
// simulated host, whose representors count what the traffic run carries
// through them (sim.Host.TrafficReps): with ovs-vswitchd's rules in the
// representors' hardware the software counters stay still and the vport
// counters move (pass); without rules every packet crosses the
// representors (fail naming them); hw-offload off in the config: n/a.
func TestSlowPathProbeOnSim(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name   string
		rules  bool
		hwOff  bool
		skipHW bool
		want   validate.Verdict
		detail []string
	}{
		{name: "rules in hardware", rules: true, want: validate.Pass, detail: []string{"software counters stayed still", "vport counters of 4 moved", "sw +0 hw +"}},
		{name: "no rules: the slow path", want: validate.Fail, detail: []string{"crossed 4 representor(s) in software, not in the NIC", "packets in software (ethtool -S rx/tx_packets)"}},
		{name: "skip_hw rules: tc software", rules: true, skipHW: true, want: validate.Fail, detail: []string{"in software, not in the NIC"}},
		{name: "hw-offload not wanted", hwOff: true, want: validate.NA, detail: []string{"hw-offload is not wanted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, reps := simLAG(t)
			if tt.rules {
				tc, err := eswitch.AsTC(h.Kernel)
				if err != nil {
					t.Fatal(err)
				}
				for _, rep := range reps {
					if err := tc.SetIngressBlock(rep, 0); err != nil {
						t.Fatal(err)
					}
					if err := h.Kernel.(*sim.Host).AddFlower(rep, 1, tt.skipHW, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			hw := &on
			if tt.hwOff {
				hw = &off
			}
			g := &config.Group{Bond: config.Bond{Name: "bond0"}, OVS: config.OVSConfig{Bridge: "br-lag", HWOffload: hw}}
			r := &run{o: Options{Duration: 500 * time.Millisecond, Interval: 50 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}, h: h}
			out := r.trafficChecks(context.Background(), trafficTarget{bond: "bond0", probe: r.slowPathProbe(g, reps, nil)})
			got := map[string]validate.Check{}
			for _, c := range out {
				got[c.Name] = c
			}
			if c := got["traffic"]; c.Verdict != validate.Pass {
				t.Fatalf("traffic %s: %s", c.Verdict, c.Detail)
			}
			c, ok := got[validate.SlowPathName]
			if !ok {
				t.Fatalf("no %s check after the traffic run: %+v", validate.SlowPathName, out)
			}
			t.Logf("%s %s: %s", c.Name, c.Verdict, c.Detail)
			if c.Verdict != tt.want {
				t.Errorf("%s %s, want %s: %s", c.Name, c.Verdict, tt.want, c.Detail)
			}
			for _, w := range tt.detail {
				if !strings.Contains(c.Detail, w) {
					t.Errorf("detail lacks %q:\n%s", w, c.Detail)
				}
			}
		})
	}
}
