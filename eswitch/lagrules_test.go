package eswitch_test

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/sriov"
)

// TestExplainUnverified: why the LAG state cannot be read, per cause, and
// whether the PF is an mlx5 one (where that is a problem, not a pass).
func TestExplainUnverified(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     func(s *sim.Spec)
		pf0      string
		mlx5     bool
		why, fix string
	}{
		{"debugfs not mounted", func(s *sim.Spec) { s.Debugfs = "off" }, nic0PF0, true, "debugfs is not mounted", "mount -t debugfs none /sys/kernel/debug"},
		{"no lag state", func(s *sim.Spec) { s.NICs[0].LAGDebugfs = "off" }, nic0PF0, true, "mlx5_core set up no LAG state for " + nic0PF0, "kernel >= 5.19"},
		{"no lag state, 127 VFs in the firmware", func(s *sim.Spec) { s.NICs[0].LAGDebugfs = "off"; s.NICs[0].TotalVFs = 127 }, nic0PF0, true,
			"its sriov_totalvfs is 127", "mstconfig -d " + nic0PF0 + " -y set NUM_OF_VFS=64"},
		{"another driver", func(s *sim.Spec) { s.NICs[0].Driver = "ice"; s.NICs[0].LAGDebugfs = "off" }, nic0PF0, false, "not driven by mlx5_core", ""},
		{"no PCI address (netdevsim)", func(s *sim.Spec) {}, "", false, "not a PCI function", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := twoNICSpec()
			tc.spec(s)
			h, err := sim.Open(t.TempDir(), s)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if tc.pf0 != "" {
				if st, err := eswitch.ReadLAG(h.FS(), sriov.Addr(tc.pf0)); err != nil || st.State != eswitch.LAGUnverified {
					t.Fatalf("ReadLAG: %+v %v, want unverified", st, err)
				}
			}
			u := eswitch.ExplainUnverified(h.FS(), sriov.Addr(tc.pf0))
			if u.MLX5 != tc.mlx5 || !strings.Contains(u.Why, tc.why) || !strings.Contains(u.Fix, tc.fix) || (tc.fix == "") != (u.Fix == "") {
				t.Fatalf("%+v, want mlx5=%v why ~%q fix ~%q", u, tc.mlx5, tc.why, tc.fix)
			}
		})
	}
}
