package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
)

// TestTunnelLayout: a group with a VXLAN tunnel on a fresh host. The plan
// lists exactly the step ids up changes, the underlay (VLAN interface,
// address, route) before the bridge; the bond is no port of the bridge,
// the tunnel ports carry their options; a second up changes nothing; a
// changed remote is one bridge change (options in place); the eswitch's
// encap mode, none before, is basic; down gives the baseline (encap mode
// none again).
func TestTunnelLayout(t *testing.T) {
	d := startDaemons(t)
	bc := exampleBed(t).with(withTunnel)
	b := newConvergeBed(t, &d, bc)
	pf0 := eswitch.Devlink{Bus: "pci", Device: "0000:61:00.0"}
	if err := b.sim.SetEncapMode(pf0, eswitch.EncapNone); err != nil {
		t.Fatal(err)
	}
	baseline := b.state()
	plan := changed(b.up(bc, true))
	evs := b.up(bc, false)
	if got := changed(evs); !slices.Equal(plan, got) {
		t.Fatalf("plan ids %v\nup ids   %v", plan, got)
	}
	order := map[string]int{}
	for i, ev := range evs {
		kind, _, _ := strings.Cut(ev.ID, "/")
		if _, ok := order[kind]; !ok {
			order[kind] = i
		}
	}
	for _, pair := range [][2]string{{"eswitch.encap", "eswitch.mode"}, {bondKind{}.Name(), "tunnel.vlan"}, {"tunnel.vlan", "tunnel.addr"}, {"tunnel.addr", "tunnel.route"}, {"tunnel.route", "ovs.bridge"}} {
		a, ok1 := order[pair[0]]
		z, ok2 := order[pair[1]]
		if !ok1 || !ok2 || a > z {
			t.Errorf("%s (event %d, %v) does not come before %s (event %d, %v)", pair[0], a, ok1, pair[1], z, ok2)
		}
	}
	if m, err := b.sim.EncapMode(pf0); err != nil || m != eswitch.EncapBasic {
		t.Fatalf("encap mode after up: %q %v, want basic", m, err)
	}
	st := b.state()
	if miss := missingLines(st, tunnelLines); len(miss) > 0 {
		t.Fatalf("the state lacks\n%s\nstate:\n%s", strings.Join(miss, "\n"), st)
	}
	if strings.Contains(st, `port "bond0"`) || strings.Contains(st, "ingress_block") {
		t.Fatalf("the bond is still a bridge port or on a shared block:\n%s", st)
	}
	if again := changed(b.up(bc, false)); len(again) != 0 {
		t.Fatalf("a second up changed %v", again)
	}
	moved := bc.with(func(c *config.Config) { c.Groups[0].Tunnel.Remotes[0] = "192.0.2.13" })
	if got := changed(b.up(moved, false)); !slices.Equal(got, []string{"ovs.bridge/br-lag"}) {
		t.Fatalf("a new remote changed %v, want the bridge alone", got)
	}
	if st := b.state(); !strings.Contains(st, `remote_ip="192.0.2.13"`) {
		t.Fatalf("remote not updated:\n%s", st)
	}
	// The address moves from the VLAN interface to the bond and back: the
	// group's own devices do not count as "another device".
	onBond := moved.with(func(c *config.Config) { c.Groups[0].Tunnel.UnderlayVLAN = 0 })
	b.up(onBond, false)
	if st := b.state(); !strings.Contains(st, "  bond0 addrs 192.0.2.11/24") || strings.Contains(st, "bond0.30") {
		t.Fatalf("the address did not move to the bond:\n%s", st)
	}
	b.up(moved, false)
	if miss := missingLines(b.state(), tunnelLines[:3]); len(miss) > 0 {
		t.Fatalf("back on VLAN 30, the state lacks %v", miss)
	}
	b.down()
	if got := b.state(); got != baseline {
		t.Fatalf("down does not give the baseline:\n%s", testbed.DiffText(baseline, got))
	}
}

// TestTunnelPreflight: the local address on another device, and an MTU
// chain that the host's bond MTU breaks, are refused before any write,
// naming the field.
func TestTunnelPreflight(t *testing.T) {
	d := startDaemons(t)
	bc := exampleBed(t).with(withTunnel)
	b := newBed(t, &d, bc)
	u := b.sim
	if err := u.AddAddr("lo", "192.0.2.11/32"); err != nil {
		t.Fatal(err)
	}
	before := b.sim.Dump()
	noMTU := bc.with(func(c *config.Config) { c.Groups[0].Tunnel.UnderlayMTU = 0 })
	e := New(b.config(noMTU), b.h, slog.New(slog.DiscardHandler))
	_, err := e.Preflight(context.Background())
	for _, want := range []string{
		`groups[0].tunnel.local: "192.0.2.11/24" is already on lo`,
		`groups[0].tunnel.underlay_mtu: "0" the MTU chain does not fit: the MTU of ens1f0np0 (the bond takes it) is 1500, but the representors' 1500 plus 54 bytes of tunnel headers and an inner VLAN tag (vfs[1] is tagged on the default segment) need 1554`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("preflight: %v\nwant %s", err, want)
		}
	}
	if got := b.sim.Dump(); got != before {
		t.Fatalf("preflight wrote:\n%s", testbed.DiffText(before, got))
	}
	if err := u.DelAddr("lo", "192.0.2.11/32"); err != nil {
		t.Fatal(err)
	}
	e = New(b.config(bc), b.h, slog.New(slog.DiscardHandler))
	if _, err := e.Preflight(context.Background()); err != nil {
		t.Fatalf("preflight of the fitting config: %v", err)
	}
	// Every tagged VF on a segment of its own: no inner VLAN tag, 50 bytes.
	untagged := noMTU.with(func(c *config.Config) { c.Groups[0].VFs[1].VNI, c.Groups[0].VFs[2].VNI = 5100, 5200 })
	e = New(b.config(untagged), b.h, slog.New(slog.DiscardHandler))
	_, err = e.Preflight(context.Background())
	if want := "is 1500, but the representors' 1500 plus 50 bytes of tunnel headers need 1550 "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("preflight without an inner VLAN tag: %v\nwant %s", err, want)
	}
}

// TestTunnelPlanSummary: on a fresh host the plan's bridge line describes
// the tunnel layout up builds (the tunnel ports and the representors, the
// bond outside the bridge), not the VLAN layout's bond port.
func TestTunnelPlanSummary(t *testing.T) {
	d := startDaemons(t)
	bc := exampleBed(t).with(withTunnel)
	b := newConvergeBed(t, &d, bc)
	var summary string
	for _, ev := range b.up(bc, true) {
		if ev.ID == "ovs.bridge/br-lag" {
			summary = ev.Summary
		}
	}
	ports := len(b.cfg.Groups[0].TunnelPorts())
	if summary == "" || strings.Contains(summary, "bond bond0 and") || !strings.Contains(summary, fmt.Sprintf("%d tunnel port(s)", ports)) {
		t.Fatalf("plan's bridge line %q, want the %d tunnel port(s) and no bond port", summary, ports)
	}
}

// TestTunnelVLANMTUFollowsTheBond: the underlay's MTU lowered, the bond's
// step lowers the VLAN interface's with it (the kernel's rule, which the
// simulated host models), so the plan names no change of the VLAN
// interface and up makes none; raised, the VLAN interface is raised by its
// own step, in the plan and in up alike.
func TestTunnelVLANMTUFollowsTheBond(t *testing.T) {
	d := startDaemons(t)
	at := func(mtu int) bedConfig {
		return exampleBed(t).with(withTunnel, func(c *config.Config) { c.Groups[0].Tunnel.UnderlayMTU = mtu })
	}
	b := newConvergeBed(t, &d, at(9100))
	b.up(at(9100), false)
	for _, tc := range []struct {
		mtu      int
		vlanStep bool
	}{{9060, false}, {9100, true}} {
		plan := changed(b.up(at(tc.mtu), true))
		up := changed(b.up(at(tc.mtu), false))
		if !slices.Equal(plan, up) {
			t.Errorf("underlay_mtu %d: plan %v, up %v", tc.mtu, plan, up)
		}
		if got := slices.Contains(up, "tunnel.vlan/bond0.30"); got != tc.vlanStep {
			t.Errorf("underlay_mtu %d: tunnel.vlan/bond0.30 changed %v, want %v (changes %v)", tc.mtu, got, tc.vlanStep, up)
		}
		if l, err := b.h.Kernel.Link("bond0.30"); err != nil || l.MTU != tc.mtu {
			t.Errorf("underlay_mtu %d: bond0.30 %+v %v", tc.mtu, l, err)
		}
	}
}
