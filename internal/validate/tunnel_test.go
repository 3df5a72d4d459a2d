package validate

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
)

// TestTunnelChecks: on a simulated underlay (bond0.30 with the local
// address, a route to a remote behind a gateway, neighbours), each
// tunnel check passes, then fails for its cause with its fix: the
// neighbour deleted, the route gone, the MTU chain broken, the address
// moved, a port's key changed.
func TestTunnelChecks(t *testing.T) {
	h, err := sim.Open(t.TempDir(), &sim.Spec{NICs: []sim.NICSpec{{Name: "nic0",
		PFs: []sim.PFSpec{{PCI: "0000:61:00.0", Netdev: "p0"}, {PCI: "0000:61:00.1", Netdev: "p1"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100}))
	must(h.SetLinkMTU("bond0", 9100))
	must(h.AddVLAN("bond0.30", "bond0", 30, "vflag:lag0"))
	must(h.AddAddr("bond0.30", "192.0.2.11/24"))
	route := eswitch.Route{Dst: "198.51.100.0/24", Gw: "192.0.2.254", Dev: "bond0.30"}
	must(h.AddRoute(route))
	must(h.SetNeigh("bond0.30", "192.0.2.12", eswitch.NeighReachable))
	must(h.SetNeigh("bond0.30", "192.0.2.254", eswitch.NeighStale))
	opts := map[string]string{"remote_ip": "192.0.2.12", "local_ip": "192.0.2.11", "key": "5000", "dst_port": "4789"}
	tg := Target{Bridge: "br-lag", Tunnel: &TunnelWant{Type: "vxlan", Dev: "bond0.30", Local: "192.0.2.11/24",
		Remotes: []string{"192.0.2.12", "198.51.100.7"}, RepMTU: 9000, Overhead: 50,
		Ports: []TunnelPortWant{{Name: "vx5000r0", Type: "vxlan", Options: opts}}}}
	facts := Facts{Bridge: &Bridge{Exists: true, Ports: map[string]BridgePort{"vx5000r0": {OFPort: 3, Type: "vxlan", Options: opts}}}}
	verdicts := func() map[string]Check {
		out := map[string]Check{}
		for _, c := range tunnelChecks(h, tg, facts) {
			out[c.Name] = c
		}
		return out
	}
	names := []string{"tunnel/underlay", "tunnel/route/192.0.2.12", "tunnel/neigh/192.0.2.12", "tunnel/route/198.51.100.7", "tunnel/neigh/198.51.100.7", "tunnel/mtu", "tunnel/port/vx5000r0"}
	got := verdicts()
	for _, n := range names {
		if c, ok := got[n]; !ok || c.Verdict != Pass {
			t.Errorf("%s: %+v, want pass", n, c)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	expectFail := func(name, detail string) {
		t.Helper()
		c := verdicts()[name]
		if c.Verdict != Fail || !strings.Contains(c.Detail, detail) {
			t.Fatalf("%s: %s %q, want fail with %q", name, c.Verdict, c.Detail, detail)
		}
	}
	must(h.SetNeigh("bond0.30", "192.0.2.12", "")) // ip neigh del
	expectFail("tunnel/neigh/192.0.2.12", "unresolved (-): mlx5 offloads no encap rule until it resolves")
	must(h.SetNeigh("bond0.30", "192.0.2.254", eswitch.NeighFailed))
	expectFail("tunnel/neigh/198.51.100.7", "the neighbour 192.0.2.254 of remote 198.51.100.7 on bond0.30 is unresolved (FAILED)")
	must(h.DelRoute(route))
	expectFail("tunnel/route/198.51.100.7", "no route to 198.51.100.7 through bond0.30")
	must(h.SetLinkMTU("bond0", 9000)) // the VLAN interface follows it down
	expectFail("tunnel/mtu", "bond0.30 has MTU 9000, but the representors' 9000 plus 50 bytes of tunnel headers need 9050")
	// A tagged port on the default segment: 4 bytes more, and why.
	must(h.SetLinkMTU("bond0", 9052))
	must(h.SetLinkMTU("bond0.30", 9052))
	if c := verdicts()["tunnel/mtu"]; c.Verdict != Pass {
		t.Fatalf("tunnel/mtu at 9052 without an inner tag: %+v", c)
	}
	tg.Tunnel.Overhead, tg.Tunnel.InnerVLAN = 54, " and an inner VLAN tag (vfs[1] is tagged on the default segment)"
	expectFail("tunnel/mtu", "bond0.30 has MTU 9052, but the representors' 9000 plus 54 bytes of tunnel headers and an inner VLAN tag (vfs[1] is tagged on the default segment) need 9054")
	tg.Tunnel.Overhead, tg.Tunnel.InnerVLAN = 50, ""
	must(h.DelAddr("bond0.30", "192.0.2.11/24"))
	expectFail("tunnel/underlay", "is not on bond0.30")
	// The untagged segment's port trunks untagged frames only: OVS's
	// default (every VLAN) carries another segment's frames into it.
	tg.Tunnel.Ports[0].VLANMode, tg.Tunnel.Ports[0].Trunks = "trunk", []int{0}
	expectFail("tunnel/port/vx5000r0", "tunnel port vx5000r0 has untagged, want untagged vlan_mode trunk trunks [0]: it carries another segment's frames")
	facts.Bridge.Ports["vx5000r0"] = BridgePort{OFPort: 3, Type: "vxlan", Options: opts, VLANMode: "trunk", Trunks: []int{0}}
	if c := verdicts()["tunnel/port/vx5000r0"]; c.Verdict != Pass {
		t.Fatalf("tunnel/port with its trunks: %+v", c)
	}
	facts.Bridge.Ports["vx5000r0"] = BridgePort{OFPort: 3, Type: "vxlan", Options: map[string]string{"key": "1"}}
	expectFail("tunnel/port/vx5000r0", "want vxlan")
}
