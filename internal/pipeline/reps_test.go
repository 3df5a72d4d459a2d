package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/teardown"
)

// TestDownRepresentorsLeaveWithEswitch: down does not set a PF's
// representors down one by one when the PF's eswitch goes back to legacy
// in the same down (they vanish with it); where vflag found the eswitch in
// switchdev already (no eswitch.mode entry) it sets them down. Either way
// down gives the host from before.
func TestDownRepresentorsLeaveWithEswitch(t *testing.T) {
	d := startDaemons(t)
	for _, tc := range []struct {
		name          string
		switchdevOnPF string // set to switchdev before up, by someone else
		want          map[string]string
	}{
		{name: "vflag made both switchdev", want: map[string]string{
			"reps.up/ens1f0np0": "representors removed by the eswitch's return to legacy (eswitch.mode/pci/0000:61:00.0): ",
			"reps.up/ens1f1np1": "representors removed by the eswitch's return to legacy (eswitch.mode/pci/0000:61:00.1): ",
		}},
		{name: "PF 1 was switchdev before", switchdevOnPF: "0000:61:00.1", want: map[string]string{
			"reps.up/ens1f0np0": "representors removed by the eswitch's return to legacy (eswitch.mode/pci/0000:61:00.0): ",
			"reps.up/ens1f1np1": "set down: ",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// flow_steering_mode can be set in legacy only: not on a PF
			// in switchdev already.
			bc := exampleBed(t).with(func(c *config.Config) { c.Groups[0].FlowSteeringMode = "" })
			b := newConvergeBed(t, &d, bc)
			if tc.switchdevOnPF != "" {
				if err := b.sim.SetEswitchMode(eswitch.Devlink{Bus: "pci", Device: tc.switchdevOnPF}, eswitch.ModeSwitchdev); err != nil {
					t.Fatal(err)
				}
			}
			before := b.state()
			b.up(bc, false)
			e := New(nil, b.h, nil)
			r := &teardown.Runner{Journal: b.journal, Undo: e.Undoers(), Moot: e.MootUndo()}
			if err := r.Down(context.Background()); err != nil {
				t.Fatalf("down: %v", err)
			}
			got := map[string]string{}
			for _, ev := range r.Results() {
				if ev.Kind == "reps.up" {
					if ev.Err != nil {
						t.Errorf("%s: %v", ev.ID, ev.Err)
					}
					prefix, _, _ := strings.Cut(ev.Summary, ": eth")
					got[ev.ID] = prefix + ": "
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reps.up undo events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, b.state()); diff != "" {
				t.Errorf("host after down differs from before up (-before +after):\n%s", diff)
			}
			if n := len(b.journal.Entries()); n != 0 {
				t.Errorf("journal keeps %d entries", n)
			}
		})
	}
}

// TestNumVFsSaysRepresentorsLeaveOnlyInSwitchdev: a numvfs change that
// makes the VFs again says their representors leave the bridge first only
// when the PF is in switchdev now (one someone set back to legacy has
// none).
func TestNumVFsSaysRepresentorsLeaveOnlyInSwitchdev(t *testing.T) {
	d := startDaemons(t)
	const leave = "representors leave bridge"
	eight, four := exampleBed(t).with(numVFs(8)), exampleBed(t).with(numVFs(4))
	for _, tc := range []struct {
		name      string
		legacyPF0 bool
		want      bool
	}{{"PF in switchdev", false, true}, {"PF set back to legacy", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newConvergeBed(t, &d, eight)
			b.up(eight, false)
			if tc.legacyPF0 {
				if err := b.sim.SetEswitchMode(eswitch.Devlink{Bus: "pci", Device: "0000:61:00.0"}, eswitch.ModeLegacy); err != nil {
					t.Fatal(err)
				}
			}
			ev, ok := eventOf(b.up(four, true), "sriov.numvfs/pci/0000:61:00.0")
			if !ok || strings.Contains(ev.Summary, leave) != tc.want {
				t.Errorf("plan of numvfs 8 -> 4 says %q, want %q in it: %v", ev.Summary, leave, tc.want)
			}
		})
	}
}
