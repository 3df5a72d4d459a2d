package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/status"
	"github.com/vflag/vflag/internal/validate"
)

// TestSharedBlockDrift: up puts the bond and both PFs on the bond's
// shared tc block, where a rule (as ovs-vswitchd adds one) is in both
// PFs' hardware. A PF that loses its qdisc (an OVS restart, tc qdisc del)
// is seen by validate, status, doctor and the metrics; plan shows the
// repair as one change; up makes it, and the block's rule is in both
// PFs' hardware again.
func TestSharedBlockDrift(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.upJSON(2)
	defer b.mustVflag(0, "down")
	b.withSim(func(h *sim.Host) error { return h.AddFlower("bond0", 1, false, false) })

	sb := func() status.GroupStatus {
		t.Helper()
		hs := b.statusJSON()
		if len(hs.Groups) != 1 || hs.Groups[0].SharedBlock == nil {
			t.Fatalf("status has no shared block: %+v", hs)
		}
		return hs.Groups[0]
	}
	g := sb()
	if s := g.SharedBlock; !s.OK || s.Rules != 1 || s.InHW != 1 || s.AllPFs != 1 || len(s.Members) != 3 {
		t.Fatalf("after up: shared block %+v, want ok with 1 rule in both PFs' hardware", s)
	}
	if c := checksBy(b.validateJSON(0), validate.Pass)[validate.SharedBlockName]; !strings.Contains(c.Detail, "bond0, ens1f0np0, ens1f1np1 on ingress_block") {
		t.Errorf("validate after up: %q", c.Detail)
	}

	b.withSim(func(h *sim.Host) error { return h.DelIngress("ens1f1np1") })
	g = sb()
	if s := g.SharedBlock; s.OK || s.AllPFs != 0 || s.InHW != 1 {
		t.Errorf("PF off the block: %+v, want not ok, the rule in one PF only", s)
	}
	if !strings.Contains(strings.Join(g.Problems, "\n"), "tc/shared-block: not on bond0's ingress_block") {
		t.Errorf("status problems %q lack the shared block", g.Problems)
	}
	if text := b.mustVflag(exitProblems, "status"); !strings.Contains(text, "tc shared block not on bond0's ingress_block") {
		t.Errorf("status text lacks the shared block:\n%s", text)
	}
	metrics := b.mustVflag(exitProblems, "status", "-o", "prometheus")
	for _, w := range []string{
		`vflag_shared_block_ok{group="lag0",bond="bond0"} 0`,
		`vflag_shared_block_member{group="lag0",bond="bond0",netdev="ens1f1np1"} 0`,
		`vflag_shared_block_member{group="lag0",bond="bond0",netdev="ens1f0np0"} 1`,
		`vflag_shared_block_rules{group="lag0",bond="bond0",where="hw_all_pfs"} 0`,
	} {
		if !strings.Contains(metrics, w+"\n") {
			t.Errorf("metrics lack %s", w)
		}
	}
	if out := b.mustVflag(0, "doctor"); !strings.Contains(out, "tc/shared-block") || !strings.Contains(out, "ens1f1np1 (no ingress qdisc)") {
		t.Errorf("doctor does not report the PF off the block:\n%s", out)
	}
	f := checksBy(b.validateJSON(1, "--allow-skip"), validate.Fail)
	b.dropDrift(f) // the PF's binding, which plan shows
	if len(f) != 1 || f[validate.SharedBlockName].Name == "" {
		t.Errorf("validate: failed %v, want only %s", names(f), validate.SharedBlockName)
	}
	plan := b.mustVflag(2, "plan", "--detailed-exit-codes")
	if !strings.Contains(plan, "tc.ingress-block/ens1f1np1") || strings.Contains(plan, "tc.ingress-block/ens1f0np0") {
		t.Errorf("plan does not show exactly the PF's repair:\n%s", plan)
	}
	rep := b.upJSON(2)
	if rep.Changes != 1 {
		t.Errorf("up made %d changes, want 1 (the binding):\n%+v", rep.Changes, rep.Steps)
	}
	if s := sb().SharedBlock; !s.OK || s.AllPFs != 1 {
		t.Errorf("after the repair: %+v, want ok with the rule in both PFs' hardware", s)
	}
	b.validateJSON(0)
	b.upJSON(0)

	// The offload check asks the real ovs-vswitchd, whose bridge here has
	// the userspace datapath (the build machines have no openvswitch
	// module): tc offload does not apply (n/a, not failing the run), which
	// it says instead of judging flows that never go to tc; status counts
	// the group's flows.
	vrep := b.validateJSON(0, "--offload")
	if c := checksBy(vrep, validate.NA)[validate.OffloadName]; !strings.Contains(c.Detail, "datapath_type netdev") {
		t.Errorf("validate --offload: %+v", vrep)
	}
	if g := sb(); g.Flows == nil {
		t.Errorf("status has no flow counts (ovs-vswitchd's control socket not read)")
	}
	if m := b.mustVflag(0, "status", "-o", "prometheus"); !strings.Contains(m, `vflag_ovs_flows{group="lag0",bridge="br-lag",where="hardware"} 0`) {
		t.Errorf("metrics lack vflag_ovs_flows")
	}
}

// TestSharedBlockBondOff: an ovs-vswitchd restart can leave the PFs on the
// bond's block, holding its rules in hardware, and the bond off it. The
// kernel binds no bond to such a block (EOPNOTSUPP, as Debian's 7.2 shows
// in e2e offload-sid): plan says the PFs leave and rejoin, up does so, and
// the bond and both PFs are on a block that starts empty again.
func TestSharedBlockBondOff(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.upJSON(2)
	defer b.mustVflag(0, "down")
	b.withSim(func(h *sim.Host) error {
		if err := h.AddFlower("bond0", 1, false, false); err != nil {
			return err
		}
		return h.DelIngress("bond0")
	})
	plan := b.mustVflag(2, "plan", "--detailed-exit-codes")
	if !strings.Contains(plan, "tc.ingress-block/bond0") || !strings.Contains(plan, "the PFs leave and rejoin") || strings.Contains(plan, "tc.ingress-block/ens1f0np0") {
		t.Errorf("plan does not show the bond's rebinding:\n%s", plan)
	}
	rep := b.upJSON(2)
	if rep.Changes != 1 {
		t.Errorf("up made %d changes, want 1 (the bond's binding):\n%+v", rep.Changes, rep.Steps)
	}
	hs := b.statusJSON()
	if s := hs.Groups[0].SharedBlock; s == nil || !s.OK || len(s.Members) != 3 || s.Rules != 0 {
		t.Errorf("after the repair: %+v, want the bond and both PFs on an empty block", s)
	}
	b.upJSON(0)
}
