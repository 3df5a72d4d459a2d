package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/validate"
)

// TestLAGOfAnotherType (issue 36, rule 2): an active LAG of type
// multipath (an IPv4 multipath route over both PFs) or multiport_eswitch
// (devlink param esw_multiport) is not the VF-LAG the bond asked for:
// up's LAG wait fails with the reason and the fix, validate fails its lag
// check and status counts it. With the cause removed, down and up
// converge.
func TestLAGOfAnotherType(t *testing.T) {
	d := startDaemons(t)
	for _, tc := range []struct {
		name       string
		cause, fix func(h *sim.Host) error
		why        []string
	}{
		{"multipath",
			func(h *sim.Host) error { return h.SetMultipathRoute("cx6lx", true) },
			func(h *sim.Host) error { return h.SetMultipathRoute("cx6lx", false) },
			[]string{"multipath LAG (lag/type multipath), not the bond's", "delete that route"}},
		{"multiport eswitch",
			func(h *sim.Host) error {
				return h.SetParam(eswitch.Devlink{Bus: "pci", Device: "0000:61:00.0"}, "esw_multiport", "true")
			},
			func(h *sim.Host) error {
				return h.SetParam(eswitch.Devlink{Bus: "pci", Device: "0000:61:00.0"}, "esw_multiport", "false")
			},
			[]string{"multiport eswitch (lag/type multiport_eswitch", "devlink dev param set pci/0000:61:00.0 name esw_multiport value false cmode runtime"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, d, "")
			b.upJSON(2)
			// The bond loses a slave (its LAG goes), and the other LAG
			// takes the NIC before vflag enslaves it again.
			b.withSim(func(h *sim.Host) error {
				if err := h.SetLinkUp("ens1f1np1", false); err != nil {
					return err
				}
				if err := h.SetMaster("ens1f1np1", ""); err != nil {
					return err
				}
				return tc.cause(h)
			})
			_, errs, code := b.vflag("up")
			if code != 1 {
				t.Fatalf("up: exit %d, want 1\n%s", code, errs)
			}
			for _, want := range append([]string{"hardware LAG on 0000:61:00.0 is active but not the bond's"}, tc.why...) {
				if !strings.Contains(errs, want) {
					t.Errorf("up does not say %q:\n%s", want, errs)
				}
			}
			rep := b.validateJSON(1)
			c, ok := checksBy(rep, validate.Fail)["lag"]
			if !ok || !strings.Contains(c.Detail, tc.why[0]) {
				t.Fatalf("validate's lag check: %+v", rep)
			}
			if ps, _ := b.statusProblems(exitProblems, "lag0"); !strings.Contains(strings.Join(ps, "\n"), tc.why[0]) {
				t.Fatalf("status problems: %q", ps)
			}
			b.withSim(tc.fix)
			b.mustVflag(0, "down")
			b.upJSON(2)
			b.validateJSON(0)
			b.mustVflag(0, "down")
		})
	}
}
