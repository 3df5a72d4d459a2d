package ovs_test

import (
	"slices"
	"testing"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

// A tunnel port: made with its type and options in the bridge's one
// transaction, converged when they match, its options updated in place
// when the remote or key changes (ports of a VLAN group become those of a
// tunnel group: the bond leaves), and Status shows them.
func TestTunnelPortOptions(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	opts := map[string]string{"remote_ip": "192.0.2.12", "local_ip": "192.0.2.11", "key": "5000", "dst_port": "4789"}
	spec := lagSpec()
	spec.Ports = append(spec.Ports[1:], ovs.PortSpec{Name: "vx5000r0", Type: "vxlan", Options: opts, Tag: 10})
	if _, ch, err := c.Ensure(ctx, spec); err != nil || !slices.Contains(ch.AddPorts, "vx5000r0") {
		t.Fatalf("ensure: %+v %v", ch, err)
	}
	if ch, err := c.Plan(ctx, spec); err != nil || !ch.Empty() {
		t.Fatalf("plan after ensure: %+v %v, want converged", ch, err)
	}
	moved := map[string]string{"remote_ip": "192.0.2.13", "local_ip": "192.0.2.11", "key": "5001", "dst_port": "4789"}
	spec.Ports[len(spec.Ports)-1].Options = moved
	ch, err := c.Plan(ctx, spec)
	if err != nil || !slices.Equal(ch.SetOptions, []string{"vx5000r0"}) || len(ch.AddPorts)+len(ch.RemovePorts) != 0 {
		t.Fatalf("plan of new options: %+v %v", ch, err)
	}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, spec.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Ports {
		if p.Name == "vx5000r0" && (p.Type != "vxlan" || p.Options["remote_ip"] != "192.0.2.13" || p.Options["key"] != "5001" || p.Tag != 10) {
			t.Fatalf("status %+v", p)
		}
		if p.Name == "bond0" {
			t.Fatalf("bond0 is a port: %+v", st.Ports)
		}
	}
	if ch, err := c.Plan(ctx, spec); err != nil || !ch.Empty() {
		t.Fatalf("plan after the update: %+v %v, want converged", ch, err)
	}
}
