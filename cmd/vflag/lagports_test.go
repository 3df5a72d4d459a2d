package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/validate"
)

// TestUpDegradedWhenASlaveCarriesNoVFTraffic (issue 36, rule 3): behind
// switch ports without LACP, an 802.3ad bond of the PFs comes up and the
// LAG reads active, but each port is its own aggregator and only the
// active one's carries VF traffic (mlx5's lag/mapping lists port 1 only).
// up waits lag_timeout for LACP to settle, then ends degraded (exit 1,
// nothing rolled back) naming the idle port and why; validate fails
// lag/ports. Once the switch answers LACP, up converges.
func TestUpDegradedWhenASlaveCarriesNoVFTraffic(t *testing.T) {
	d := startDaemons(t)
	cfg := strings.Replace(exampleConfig, "      total_vfs: 8\n", "      total_vfs: 8\n      switch_lacp: off\n", 1)
	cfg = strings.Replace(cfg, "lag_timeout: 30s\n", "lag_timeout: 1s\n", 1)
	b := newBed(t, d, cfg)
	out, errs, code := b.vflag("up")
	if code != 1 {
		t.Fatalf("up: exit %d, want 1 (degraded)\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"host degraded", "no rollback",
		"ens1f1np1 (port 2) is up but carries no VF traffic: no LACP partner answers", "(lag/mapping: 1)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("up does not say %q:\n%s", want, errs)
		}
	}
	if !strings.Contains(b.simDump(), "lag state=active") {
		t.Fatalf("the LAG is not active (or up rolled back):\n%s", b.simDump())
	}
	rep := b.validateJSON(1)
	if c, ok := checksBy(rep, validate.Fail)[validate.LAGPortsName]; !ok || !strings.Contains(c.Detail, "ens1f1np1 (port 2) is up but carries no VF traffic") {
		t.Fatalf("validate's %s: %+v", validate.LAGPortsName, rep)
	}
	b.withSim(func(h *sim.Host) error { return h.SetSwitchLACP("cx6lx", true) })
	b.mustVflag(0, "up")
	if c := checksBy(b.validateJSON(0), validate.Pass)[validate.LAGPortsName]; !strings.Contains(c.Detail, "lag/mapping: 1 2") {
		t.Fatalf("validate's %s once LACP answers: %q", validate.LAGPortsName, c.Detail)
	}
	b.mustVflag(0, "down")
}
