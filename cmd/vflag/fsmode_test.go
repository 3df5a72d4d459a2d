package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// TestFlowSteeringModeInSwitchdev (issue 36, rule 7): since 6.17 mlx5
// refuses every flow_steering_mode value while the eswitch is in
// switchdev (fs_core.c mlx5_fs_mode_validate; before, dmfs passed). A
// config that changes it on a converged host fails on 6.17 with what to
// do, and leaves the host as it was; on 6.1 the same change to dmfs goes
// through.
func TestFlowSteeringModeInSwitchdev(t *testing.T) {
	d := startDaemons(t)
	for _, tc := range []struct {
		kernel string
		code   int
	}{{"6.17", 1}, {"6.1", 0}} {
		t.Run(tc.kernel, func(t *testing.T) {
			cfg := strings.Replace(exampleConfig, "sim:\n", "sim:\n  kernel: \""+tc.kernel+"\"\n", 1)
			b := newBed(t, d, cfg)
			b.upJSON(2)
			b.point(strings.Replace(cfg, "flow_steering_mode: smfs", "flow_steering_mode: dmfs", 1))
			base := b.dump()
			_, errs, code := b.vflag("up")
			if code != tc.code {
				t.Fatalf("up with flow_steering_mode dmfs: exit %d, want %d\n%s", code, tc.code, errs)
			}
			if tc.code == 1 {
				for _, want := range []string{"mlx5 changes it only while the eswitch is legacy", "`vflag down`, then `vflag up` sets it before switchdev",
					"Changing fs mode is not supported when eswitch offloads enabled."} {
					if !strings.Contains(errs, want) {
						t.Errorf("up does not say %q:\n%s", want, errs)
					}
				}
				if got := b.dump(); got != base {
					t.Errorf("a refused change left the host changed:\n%s", testbed.DiffText(base, got))
				}
			}
			if tc.code == 0 && !strings.Contains(b.simDump(), "flow_steering_mode=dmfs") {
				t.Errorf("flow_steering_mode not set:\n%s", b.simDump())
			}
			b.mustVflag(0, "down")
		})
	}
}
