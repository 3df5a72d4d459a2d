package pipeline

import (
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/teardown"
)

// TestPlanPredictsRemadeVFs: a numvfs change from a non-zero count makes
// every VF again, and with them goes what they carried; the plan predicts
// each step up then re-does (the same ids, as many), in a legacy group
// (VF MACs, VLAN, trust, host drivers, the VF netdevs' mtu) and in a
// switchdev group (VF MACs, host driver, representors and their mtu, rate
// leaves, the bridge's ports), both ways (4 -> 8, 8 -> 4). The bridge step
// that changes ports does not say "converged"; the numvfs step says the
// old representors' ports leave the bridge first.
func TestPlanPredictsRemadeVFs(t *testing.T) {
	d := startDaemons(t)
	on := true
	leg := legacyBed.with(groupMTU(9000), vfSet(0, 0, func(v *config.VFConfig) { v.Trust, v.VLAN = &on, 5 }))
	sw := exampleBed(t).with(groupMTU(9000), rateGroups(config.RateGroup{Name: "tenant1", TxMax: 1000}),
		vfSet(0, 0, func(v *config.VFConfig) { v.TxMax, v.TxShare, v.RateGroup = 100, 10, "tenant1" }),
		vfSet(1, 0, func(v *config.VFConfig) { v.TxMax = 300 }))
	for _, tc := range []struct {
		name string
		four bedConfig
		want []string // among the changes of every transition
	}{
		{"legacy", leg, []string{"sriov.vfmac/ens1f0np0/0", "sriov.vftrust/ens1f0np0/0", "sriov.vfvlan/ens1f0np0/0", "sriov.bind/ens1f0np0/vf0", "link.mtu/vfs/ens1f0np0"}},
		{"switchdev", sw, []string{"sriov.vfmac/ens1f0np0/0", "sriov.bind/ens1f1np1/vf1", "reps.up/ens1f0np0", "link.mtu/reps/ens1f1np1",
			"devlink.rate-leaf/ens1f0np0/0", "devlink.rate-leaf/ens1f1np1/0", "ovs.bridge/br-lag"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eight := tc.four.with(numVFs(8))
			b := newConvergeBed(t, &d, eight)
			b.up(eight, false)
			for _, step := range []struct {
				name string
				cfg  bedConfig
			}{{"8 -> 4", tc.four}, {"4 -> 8", eight}} {
				plan := changed(b.up(step.cfg, true))
				evs := b.up(step.cfg, false)
				up := changed(evs)
				if !slices.Equal(plan, up) {
					t.Errorf("%s: plan predicts %d change(s), up made %d:\n%s", step.name, len(plan), len(up), testbed.DiffText(strings.Join(plan, "\n"), strings.Join(up, "\n")))
				}
				for _, id := range tc.want {
					if !slices.Contains(up, id) {
						t.Errorf("%s: up did not change %s (changed %v)", step.name, id, up)
					}
				}
				if ev, ok := eventOf(evs, "ovs.bridge/br-lag"); ok && ev.Changed && strings.Contains(ev.Summary, "converged") {
					t.Errorf("%s: the bridge step changed the bridge but says %q", step.name, ev.Summary)
				}
				// The old representors' ports leave the bridge in the numvfs
				// step, before its write (repPortsLeave), and it says so.
				if ev, ok := eventOf(evs, "sriov.numvfs/pci/0000:61:00.0"); tc.name == "switchdev" && (!ok || !strings.Contains(ev.Summary, "(first, its VFs' representors leave bridge br-lag)")) {
					t.Errorf("%s: the numvfs step says %q, want the representors leaving the bridge first", step.name, ev.Summary)
				}
			}
			b.down()
		})
	}
}

// TestUndoSummaries: what undoing a change says reads from the value it set
// back to the one it found: the plan of a prune (nothing is undone yet) and
// down alike ("mac 52:54:00:20:00:01 -> 00:00:00:00:00:00", not the
// forward summary after "revert: ").
func TestUndoSummaries(t *testing.T) {
	d := startDaemons(t)
	b := newConvergeBed(t, &d, legacyBed)
	b.up(legacyBed, false)
	const want = "ens1f0np0 vf 1: mac 52:54:00:20:00:01 -> 00:00:00:00:00:00"
	noMAC := legacyBed.with(vfSet(0, 1, func(v *config.VFConfig) { v.MAC = "" }))
	down := func() []teardown.Event {
		e := New(nil, b.h, nil)
		r := &teardown.Runner{Journal: b.journal, Undo: e.Undoers()}
		if err := r.Down(t.Context()); err != nil {
			t.Fatal(err)
		}
		return r.Results()
	}
	for _, tc := range []struct {
		name string
		run  func() []teardown.Event
	}{
		{"plan of the prune", func() []teardown.Event { return b.up(noMAC, true) }},
		{"down", down},
	} {
		evs := tc.run()
		ev, ok := eventOf(evs, "sriov.vfmac/ens1f0np0/1")
		if !ok || ev.Phase != teardown.PhaseUndo {
			t.Fatalf("%s: no undo of sriov.vfmac/ens1f0np0/1 in %v", tc.name, evs)
		}
		if ev.Summary != want {
			t.Errorf("%s: undo says %q, want %q", tc.name, ev.Summary, want)
		}
	}
}

// TestPlanDroppedDriver: a host driver dropped from the config is given
// back by the prune of its bind before the forward pass (the VF's driver
// from before vflag bound it: none here), so the unbind phase has nothing
// left to do: plan predicts the prune alone, as up does it.
func TestPlanDroppedDriver(t *testing.T) {
	d := startDaemons(t)
	b := newConvergeBed(t, &d, legacyBed)
	b.up(legacyBed, false)
	noDriver := legacyBed.with(vfSet(0, 0, func(v *config.VFConfig) { v.Driver = "" }))
	plan := changed(b.up(noDriver, true))
	up := changed(b.up(noDriver, false))
	if !slices.Equal(plan, up) || !slices.Equal(up, []string{"sriov.bind/ens1f0np0/vf0"}) {
		t.Errorf("plan %v, up %v; want both [sriov.bind/ens1f0np0/vf0] (its prune)", plan, up)
	}
	b.down()
}
