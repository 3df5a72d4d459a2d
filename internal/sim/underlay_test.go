package sim

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vflag/vflag/eswitch"
)

// TestUnderlayRules: underlay.go's rules, each with its errno.
func TestUnderlayRules(t *testing.T) {
	x := newTH(t, testSpec())
	h := x.h
	base := h.Dump()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	errno := func(err error, want syscall.Errno) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	must(h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100}))
	errno(h.AddVLAN("bond0.30", "bond9", 30, ""), syscall.ENODEV)
	errno(h.AddVLAN("bond0.30", "bond0", 4095, ""), syscall.ERANGE)
	must(h.AddVLAN("bond0.30", "bond0", 30, "vflag:lag0"))
	errno(h.AddVLAN("v2", "bond0", 30, ""), syscall.EEXIST)
	if p, id, err := h.VLAN("bond0.30"); err != nil || p != "bond0" || id != 30 {
		t.Fatalf("VLAN: %s %d %v", p, id, err)
	}
	errno(h.SetLinkMTU("bond0.30", 1600), syscall.ERANGE) // above the bond's 1500
	must(h.SetLinkMTU("bond0", 9000))
	must(h.SetLinkMTU("bond0.30", 9000))
	must(h.SetLinkMTU("bond0", 1600))
	if l, _ := h.Link("bond0.30"); l.MTU != 1600 || l.Kind != "vlan" {
		t.Fatalf("the VLAN interface after its parent's MTU went down: %+v", l)
	}
	errno(h.AddRoute(eswitch.Route{Dst: "198.51.100.0/24", Gw: "192.0.2.254", Dev: "bond0.30"}), syscall.ENETUNREACH)
	must(h.AddAddr("bond0.30", "192.0.2.11/24"))
	errno(h.AddAddr("bond0.30", "192.0.2.11/24"), syscall.EEXIST)
	must(h.AddAddr("p0", "192.0.2.11/24")) // the kernel lets another device hold it
	must(h.DelAddr("p0", "192.0.2.11/24"))
	errno(h.DelAddr("p0", "192.0.2.11/24"), syscall.EADDRNOTAVAIL)
	r := eswitch.Route{Dst: "198.51.100.0/24", Gw: "192.0.2.254", Dev: "bond0.30"}
	must(h.AddRoute(r))
	errno(h.AddRoute(r), syscall.EEXIST)
	must(h.SetNeigh("bond0.30", "192.0.2.12", eswitch.NeighReachable))
	if s, _ := h.Neigh("bond0.30", "192.0.2.12"); s != eswitch.NeighReachable {
		t.Fatalf("neigh %q", s)
	}
	if a, _ := h.Addrs("bond0.30"); !slices.Equal(a, []string{"192.0.2.11/24"}) {
		t.Fatalf("addrs %v", a)
	}
	if d := h.Dump(); !strings.Contains(d, "underlay:\n  bond0.30 vlan 30 on bond0\n  bond0.30 addrs 192.0.2.11/24\n  route 198.51.100.0/24 via 192.0.2.254 dev bond0.30\n  neigh bond0.30 192.0.2.12 REACHABLE\n") {
		t.Fatalf("dump:\n%s", d)
	}
	// The VLAN interface, its routes and neighbours go with the bond.
	must(h.DeleteLink("bond0"))
	if _, err := h.Link("bond0.30"); !errors.Is(err, eswitch.ErrLinkNotFound) {
		t.Fatalf("bond0.30 outlived its parent: %v", err)
	}
	errno(h.DelRoute(r), syscall.ESRCH)
	before, _, _ := strings.Cut(base, "dmesg:")
	after, _, _ := strings.Cut(h.Dump(), "dmesg:")
	if before != after {
		t.Fatalf("not back to the baseline:\n%s\nvs\n%s", before, after)
	}
}

// TestEncapModeRules: the eswitch's encap mode is basic by default, stored
// in legacy, refused in switchdev while a flower rule is in the eswitch's
// hardware, and none of netdevsim's.
func TestEncapModeRules(t *testing.T) {
	x := newTH(t, testSpec())
	d := eswitch.Devlink{Bus: "pci", Device: pf0}
	if m, err := x.h.EncapMode(d); err != nil || m != eswitch.EncapBasic {
		t.Fatalf("default: %q %v", m, err)
	}
	x.ok(x.h.SetEncapMode(d, eswitch.EncapNone))
	checkErrno(t, x.h.SetEncapMode(d, "full"), syscall.EOPNOTSUPP, "Operation not supported")
	x.vfs(pf0, "2")
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	x.settle()
	if m, _ := x.h.EncapMode(d); m != eswitch.EncapNone {
		t.Fatalf("the legacy setting did not stay: %q", m)
	}
	if !strings.Contains(x.h.Dump(), "encap_mode=none") {
		t.Fatal("the dump does not show encap_mode=none")
	}
	rep := x.reps(pf0)[0]
	x.ok(x.h.SetIngressBlock(rep, 0))
	x.ok(x.h.AddFlower(rep, 1, false, false))
	checkErrno(t, x.h.SetEncapMode(d, eswitch.EncapBasic), syscall.EOPNOTSUPP, "Can't set encapsulation when flows are configured")
	x.ok(x.h.DelIngress(rep))
	x.ok(x.h.SetEncapMode(d, eswitch.EncapBasic))
}

// TestSwitchPeersAnswer: the hosts behind the simulated switch (the spec's
// switch_peers) resolve on a netdev that is up, reaches the switch through
// the bond's PFs and has an address in their prefix; not while it is down,
// not off-link, not for an address the switch does not answer for, and an
// entry set by hand (ip neigh) wins.
func TestSwitchPeersAnswer(t *testing.T) {
	spec := testSpec()
	spec.SwitchPeers = []string{"192.0.2.12", "192.0.2.254"}
	x := newTH(t, spec)
	h := x.h
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100}))
	must(h.SetMaster("p0", "bond0"))
	must(h.SetMaster("p1", "bond0"))
	must(h.AddVLAN("bond0.30", "bond0", 30, ""))
	must(h.AddAddr("bond0.30", "192.0.2.11/24"))
	neigh := func(ip, want string) {
		t.Helper()
		if s, err := h.Neigh("bond0.30", ip); err != nil || s != want {
			t.Errorf("neigh %s: %q %v, want %q", ip, s, err, want)
		}
	}
	neigh("192.0.2.12", "") // all down
	for _, l := range []string{"p0", "p1", "bond0", "bond0.30"} {
		must(h.SetLinkUp(l, true))
	}
	neigh("192.0.2.12", eswitch.NeighReachable)
	neigh("192.0.2.254", eswitch.NeighReachable)
	neigh("192.0.2.13", "")   // not behind the switch
	neigh("198.51.100.7", "") // off-link: its route's gateway is asked
	must(h.SetNeigh("bond0.30", "192.0.2.12", "FAILED"))
	neigh("192.0.2.12", "FAILED")
	must(h.SetNeigh("bond0.30", "192.0.2.12", ""))
	must(h.SetLinkUp("bond0.30", false))
	neigh("192.0.2.12", "")
	if _, err := validate(&Spec{NICs: spec.NICs, SwitchPeers: []string{"192.0.2.300"}}); err == nil || !strings.Contains(err.Error(), "switch_peers[0]") {
		t.Errorf("a bad peer address: %v", err)
	}
}
