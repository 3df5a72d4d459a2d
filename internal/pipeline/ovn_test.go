package pipeline

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
)

// withOVN makes the example group an OVN chassis: Geneve on VLAN 30 of
// the bond, the VFs without VLANs, vfs[0] bound.
func withOVN(c *config.Config) {
	g := &c.Groups[0]
	g.OVS.Bridge = "br-int"
	for i := range g.VFs {
		g.VFs[i].VLAN = 0
	}
	g.VFs[0].OVNPort = "lsp-vm1"
	g.MTU = 1500
	g.OVN = &config.OVN{Remote: "tcp:192.0.2.1:6642", EncapIP: "192.0.2.11/24", UnderlayVLAN: 30, UnderlayMTU: 1558, SystemID: "chassis-1"}
}

// TestOVNPreflight: before any write, the encap address on another
// device, an MTU chain the bond's MTU breaks (Geneve with OVN's option:
// 58 bytes), and a system_id that differs from the one of a host that is
// a chassis already are refused, each naming its field; a system-id that
// no chassis uses (ovs-ctl's) is not.
func TestOVNPreflight(t *testing.T) {
	d := startDaemons(t)
	bc := exampleBed(t).with(withOVN)
	b := newBed(t, &d, bc)
	if err := b.sim.AddAddr("lo", "192.0.2.11/32"); err != nil {
		t.Fatal(err)
	}
	d.ovs.MustVsctl("set", "Open_vSwitch", ".", "external_ids:system-id=ovs-made")
	before := b.sim.Dump()
	noMTU := bc.with(func(c *config.Config) { c.Groups[0].OVN.UnderlayMTU = 0 })
	e := New(b.config(noMTU), b.h, slog.New(slog.DiscardHandler))
	_, err := e.Preflight(context.Background())
	for _, want := range []string{
		`groups[0].ovn.encap_ip: "192.0.2.11/24" is already on lo`,
		`groups[0].ovn.underlay_mtu: "0" the MTU chain does not fit: the MTU of ens1f0np0 (the bond takes it) is 1500, but the representors' 1500 plus 58 bytes of tunnel headers need 1558 (set ovn.underlay_mtu to 1558 or more`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("preflight: %v\nwant %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "system_id") {
		t.Errorf("a system-id no chassis uses refused: %v", err)
	}
	if got := b.sim.Dump(); got != before {
		t.Fatalf("preflight wrote:\n%s", testbed.DiffText(before, got))
	}
	if err := b.sim.DelAddr("lo", "192.0.2.11/32"); err != nil {
		t.Fatal(err)
	}
	before, ovsBefore := b.sim.Dump(), d.ovs.Dump()
	d.ovs.MustVsctl("set", "Open_vSwitch", ".", "external_ids:ovn-remote=tcp:192.0.2.9:6642")
	e = New(b.config(bc), b.h, slog.New(slog.DiscardHandler))
	_, err = e.Preflight(context.Background())
	if want := `groups[0].ovn.system_id: "chassis-1" differs from the chassis name Open vSwitch has, ovs-made, and the host is an OVN chassis already`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("preflight: %v\nwant %s", err, want)
	}
	if got := b.sim.Dump(); got != before {
		t.Fatalf("preflight wrote:\n%s", testbed.DiffText(before, got))
	}
	if got := d.ovs.Dump(); !strings.Contains(got, `ovn-remote="tcp:192.0.2.9:6642", system-id="ovs-made"`) || strings.Contains(got, "chassis-1") {
		t.Fatalf("preflight wrote to OVSDB (before: %s):\n%s", ovsBefore, got)
	}
	keep := bc.with(func(c *config.Config) { c.Groups[0].OVN.SystemID = "" })
	e = New(b.config(keep), b.h, slog.New(slog.DiscardHandler))
	if _, err := e.Preflight(context.Background()); err != nil {
		t.Fatalf("preflight without system_id (keeps the chassis's): %v", err)
	}
}

// TestOVNBridgeSpecPool: up's bridge leaves the binding of a pool VF a
// domain's port holds to the qemu hook (Bind nil: the hook bound it to the
// logical port the domain names, journaled per domain), gives a free pool
// VF no binding (its keys removed), and binds a configured port as before.
func TestOVNBridgeSpecPool(t *testing.T) {
	cg := &config.Group{Name: "lag0", NumVFs: 3, VFs: []config.VFConfig{{PF: 0, VF: 0, OVNPort: "lsp-vm1"}},
		OVS:     config.OVSConfig{Bridge: "br-int", HWOffload: new(true)},
		Network: &config.Network{VFs: []config.NetworkVF{{PF: 0, VF: 1}, {PF: 0, VF: 2}}},
		OVN:     &config.OVN{Remote: "tcp:192.0.2.1:6642", EncapIP: "192.0.2.11/24"}}
	run := &groupRun{g: Group{Group: cg, Owners: []int{0}},
		reps:      map[VFKey]string{{0, 0}: "eth0", {0, 1}: "eth1", {0, 2}: "eth2"},
		poolPorts: map[VFKey]string{{0, 1}: ""}, domUUID: map[string]string{}}
	bind := map[string]map[string]string{}
	for _, ps := range run.bridgeSpec().Ports {
		bind[ps.Name] = ps.Bind
	}
	if b := bind["eth0"]; b["iface-id"] != "lsp-vm1" {
		t.Errorf("configured port eth0: Bind %v, want iface-id lsp-vm1", b)
	}
	if b, ok := bind["eth1"]; !ok || b != nil {
		t.Errorf("held pool port eth1: Bind %v (present %v), want nil (the hook's)", b, ok)
	}
	if b := bind["eth2"]; b == nil || len(b) != 0 {
		t.Errorf("free pool port eth2: Bind %v, want empty (no binding)", b)
	}
}
