package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/validate"
)

// TestUnverifiedLAGIsNoSuccessOnMLX5 (issue 36, rule 8): where an mlx5
// PF's lag/ state is not in debugfs, the LAG is not counted as working: up
// ends degraded (exit 1, nothing rolled back) saying why and what to do,
// validate fails its lag check and status counts the problem. With
// accept_unverified_lag: true the same host converges, and validate skips
// the check (never a pass). netdevsim (e2e) keeps "unverified" as a skip.
func TestUnverifiedLAGIsNoSuccessOnMLX5(t *testing.T) {
	d := startDaemons(t)
	for _, tc := range []struct {
		name, sim, nic string
		why, fix       string
	}{
		{name: "debugfs not mounted", sim: "  debugfs: off\n",
			why: "debugfs is not mounted on /sys/kernel/debug", fix: "mount -t debugfs none /sys/kernel/debug"},
		{name: "no lag state", nic: "      lag_debugfs: off\n",
			why: "mlx5_core set up no LAG state for 0000:61:00.0 (/sys/kernel/debug/mlx5/0000:61:00.0/lag is missing)", fix: "kernel >= 5.19"},
	} {
		cfg := strings.Replace(exampleConfig, "sim:\n", "sim:\n"+tc.sim, 1)
		cfg = strings.Replace(cfg, "      total_vfs: 8\n", "      total_vfs: 8\n"+tc.nic, 1)
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, d, cfg)
			out, errs, code := b.vflag("up")
			if code != 1 {
				t.Fatalf("up: exit %d, want 1 (degraded)\n%s\n%s", code, out, errs)
			}
			for _, want := range []string{"hardware LAG unverified: " + tc.why, tc.fix, "accept_unverified_lag: true"} {
				if !strings.Contains(out+errs, want) {
					t.Errorf("up does not say %q:\n%s\n%s", want, out, errs)
				}
			}
			if !strings.Contains(b.simDump(), "bond0 bond master=") {
				t.Fatalf("a degraded up rolled back:\n%s", b.simDump())
			}
			rep := b.validateJSON(1)
			if c, ok := checksBy(rep, validate.Fail)["lag"]; !ok || !strings.Contains(c.Detail, tc.why) || !strings.Contains(c.Detail, tc.fix) {
				t.Fatalf("validate's lag check: %+v", rep)
			}
			if ps, _ := b.statusProblems(exitProblems, "lag0"); !strings.Contains(strings.Join(ps, "\n"), "lag: hardware LAG unverified") {
				t.Fatalf("status problems: %q", ps)
			}
			// Accepted: converges; validate skips the check.
			b.point(strings.Replace(cfg, "lag_timeout: 30s\n", "lag_timeout: 30s\naccept_unverified_lag: true\n", 1))
			b.mustVflag(0, "up")
			rep = b.validateJSON(1)
			if c, ok := checksBy(rep, validate.Skip)["lag"]; !ok || !strings.Contains(c.Detail, "accepted by accept_unverified_lag") {
				t.Fatalf("validate's lag check with accept_unverified_lag: %+v", rep)
			}
			b.mustVflag(0, "down")
		})
	}
}
