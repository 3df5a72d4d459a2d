package report

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/teardown"
)

func TestBuild(t *testing.T) {
	events := []teardown.Event{
		{Kind: "sriov.numvfs", ID: "sriov.numvfs/a", Phase: teardown.PhaseApply, Summary: "0 -> 4", Changed: true, Duration: 1500 * time.Microsecond},
		{Kind: "bond.create", ID: "bond.create/b", Phase: teardown.PhaseApply, Summary: "bond0", Changed: true},
		{Kind: "ovs.bridge", ID: "ovs.bridge/c", Phase: teardown.PhaseApply, Summary: "br0"},
		{Kind: "libvirt.attach", ID: "libvirt.attach/d", Phase: teardown.PhaseUndo, Summary: "detach", Changed: true},
		{Kind: "reps.up", ID: "reps.up/e", Phase: teardown.PhaseApply, Summary: "up", Changed: true, Err: errors.New("boom")},
	}
	rep := Build("up", "1.2", events, map[string]bool{"bond.create/b": true}, errors.New("run failed"))
	tests := []struct {
		id, action, err string
	}{
		{"sriov.numvfs/a", "add", ""},
		{"bond.create/b", "change", ""},
		{"ovs.bridge/c", "", ""},
		{"libvirt.attach/d", "remove", ""},
		{"reps.up/e", "add", "boom"},
	}
	for i, tt := range tests {
		s := rep.Steps[i]
		if s.ID != tt.id || s.Action != tt.action || s.Error != tt.err {
			t.Errorf("step %d = %s %q %q, want %s %q %q", i, s.ID, s.Action, s.Error, tt.id, tt.action, tt.err)
		}
	}
	if rep.Changes != 3 || !rep.Changed || rep.Error != "run failed" || rep.Version != "1.2" {
		t.Errorf("report changes %d changed %v error %q version %q", rep.Changes, rep.Changed, rep.Error, rep.Version)
	}
	if got, want := strings.Join(rep.ChangedIDs(), " "), "bond.create/b libvirt.attach/d reps.up/e sriov.numvfs/a"; got != want {
		t.Errorf("ChangedIDs = %s, want %s", got, want)
	}
}

func TestWriteText(t *testing.T) {
	tests := []struct {
		name string
		rep  Report
		want string
	}{
		{"converged", Report{Command: "plan"}, "vflag plan: no changes (host already converged, up would change nothing)\n"},
		{"nothing to undo", Report{Command: "down"}, "vflag down: no changes (nothing to undo)\n"},
		{"changed", Report{Command: "up", Changes: 1, Steps: []Step{
			{ID: "a", Summary: "x", Changed: true, Action: "change", DurationMS: 1.5},
			{ID: "b", Summary: "y"},
			{ID: "c", Summary: "z", Changed: true, Action: "add", Disruptive: true, Domains: []string{"vm1"}},
			{ID: "d", Summary: "w", Changed: true, Action: "change", Disruptive: true, Domains: []string{"vm1"},
				Holders: []string{"VF 0000:61:00.2 is held by running domain vm1 (pid 7 qemu-system-x86 through /dev/vfio/3)", "VF 0000:61:00.3 is held by pid 8 (dpdk-testpmd) through /dev/vfio/4"}},
			{ID: "e", Summary: "v", Changed: true, Action: "change", Holders: []string{"VF 0000:61:00.4 is held by the host: netdev eth5 is up"}},
		}}, "vflag up: changed 1 step(s)\n" +
			"  ~ a                                            x  (1.5ms)\n" +
			"  + c                                            z  [disruptive: breaks running vm1]\n" +
			"  ~ d                                            w  [disruptive; in use: VF 0000:61:00.2 is held by running domain vm1 (pid 7 qemu-system-x86 through /dev/vfio/3); VF 0000:61:00.3 is held by pid 8 (dpdk-testpmd) through /dev/vfio/4]\n" +
			"  ~ e                                            v  [takes VFs from their driver; in use: VF 0000:61:00.4 is held by the host: netdev eth5 is up]\n"},
		{"rolled back", Report{Command: "up", Error: "e", Steps: []Step{
			{ID: "a", Changed: true, Action: "add"}, {ID: "a", Changed: true, Action: "remove"},
		}}, "vflag up: failed: applied 1 step(s), then undid 1 (rollback of this run, and removals)\n" +
			"  + a                                            \n  - a                                            \n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			tt.rep.WriteText(&b)
			if b.String() != tt.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tt.want)
			}
		})
	}
}
