package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// groups selects the groups a phase runs for.
type groups int

const (
	allGroups groups = iota
	switchdevGroups
	legacyGroups
)

func (w groups) has(g Group) bool {
	switch w {
	case switchdevGroups:
		return g.Switchdev()
	case legacyGroups:
		return !g.Switchdev()
	}
	return true
}

// batch is one Runner.Do call: independent steps, checked and applied
// concurrently and journaled in one write; or one barrier (Step.Wait).
type batch []teardown.Step

// phase is one row of the pipeline: DESIGN.md section 2's number, the stage
// that runs it, the groups it is for, and its step constructor (the kinds
// it changes are those of the steps it builds; a step of a kind without an
// undoer is refused when it runs). The batches a phase returns run in order.
type phase struct {
	num    string
	name   string
	stage  Stage
	groups groups
	build  func(run *groupRun, ctx context.Context) ([]batch, error)
}

// phases is the order of `vflag up`, as one table (see doc.go for why).
var phases = []phase{
	{"1", "sriov_drivers_autoprobe=0", StagePre, allGroups, (*groupRun).autoprobe},
	{"1", "devlink flow_steering_mode (legacy mode only)", StagePre, allGroups, (*groupRun).params},
	{"2", "VFs on both PFs, in parallel", StagePre, allGroups, (*groupRun).numVFs},
	{"3", "VF MACs through the PF", StagePre, allGroups, (*groupRun).vfMACs},
	{"4", "unbind every VF", StagePre, allGroups, (*groupRun).unbind},
	{"5", "PFs up (legacy: no bond does it)", StagePre, legacyGroups, (*groupRun).legacyPFsUp},
	{"5", "MTU on the PFs (legacy)", StagePre, legacyGroups, (*groupRun).legacyMTU},
	{"5", "VF policy through the PF (legacy): vlan/qos, trust, spoofchk, link state, rates", StagePre, legacyGroups, (*groupRun).vfPolicy},
	{"5", "eswitch encap-mode basic (tunnel groups; before switchdev, where mlx5 refuses it while flows are offloaded)", StagePre, switchdevGroups, (*groupRun).encapMode},
	{"5", "eswitch switchdev on both PFs", StagePre, switchdevGroups, (*groupRun).switchdev},
	{"5", "hw-tc-offload on the PFs", StagePre, switchdevGroups, (*groupRun).tcOffload},
	{"6", "bond, after switchdev", StageAll, switchdevGroups, (*groupRun).bond},
	{"6", "enslave the PFs while down", StageAll, switchdevGroups, (*groupRun).enslave},
	{"6", "bond and PFs up", StageAll, switchdevGroups, (*groupRun).bondUp},
	{"6", "MTU on the bond (its PFs follow it)", StageAll, switchdevGroups, (*groupRun).bondMTU},
	{"6", "tunnel underlay: VLAN interface, local address, routes (before the tunnel ports)", StageAll, switchdevGroups, (*groupRun).underlay},
	{"7", "wait for hardware LAG", StageAll, switchdevGroups, (*groupRun).waitLAG},
	{"8", "host drivers, strictly after LAG", StageAll, allGroups, (*groupRun).bind},
	{"8", "MTU on the host's VF netdevs (legacy)", StageAll, legacyGroups, (*groupRun).vfMTU},
	{"9", "representors up", StageAll, switchdevGroups, (*groupRun).repsUp},
	{"9", "MTU on the representors", StageAll, switchdevGroups, (*groupRun).repsMTU},
	{"9", "devlink rate nodes (rate_groups)", StageAll, switchdevGroups, (*groupRun).rateNodes},
	{"9", "devlink rate leaves of the VF ports", StageAll, switchdevGroups, (*groupRun).rateLeaves},
	{"10", "OVS other_config tc-policy (before hw-offload), max-idle", StageAll, switchdevGroups, (*groupRun).ovsConfig},
	{"10", "OVS bridge, one transaction", StageAll, switchdevGroups, (*groupRun).ovsBridge},
	{"10", "the bond and its PFs on the bond's shared tc block (hw-offload)", StageAll, switchdevGroups, (*groupRun).sharedBlock},
	{"10", "OVN chassis: Open_vSwitch external_ids (system-id, ovn-remote, ovn-encap-*, ovn-bridge), after the integration bridge", StageAll, switchdevGroups, (*groupRun).ovnChassis},
	{"11", "libvirt attachments, one domain at a time", StageAll, allGroups, (*groupRun).attach},
	{"11", "libvirt hostdev network: the group's VF pool", StageAll, allGroups, (*groupRun).network},
	{"12", "verify", StageAll, allGroups, (*groupRun).verify},
}

// groupRun is one group's pass through the phases.
type groupRun struct {
	e   *Env
	g   Group
	dry bool
	r   *teardown.Runner
	// plan is the plan pass's run of the group: until r writes anything,
	// what it found (VF addresses, representors) still holds.
	plan *groupRun

	vfs     map[VFKey]sriov.Addr // the VFs the config names, where they exist
	reps    map[VFKey]string
	repsAll bool // every representor of every owning PF found

	// settled: the unbind phase keeps VFs on their configured driver (the
	// eswitch, bond and LAG stay as they are).
	settled bool
	// bondCost is what converging the existing bond costs; a plan predicts
	// from it the re-enslave and the bond up that follow a re-form.
	bondCost bondCost
	// remade are, in a plan, the owning PFs' devices whose VFs the planned
	// numvfs change destroys and makes again (a count that changes from
	// non-zero: the kernel takes it to 0 first). What the old VFs carried
	// is gone with them: MAC, trust and the other VF policy, host driver,
	// representors (and their MTU and OVS ports), rate leaves. The steps
	// after it are planned against new VFs, not the host as it is now.
	remade map[sriov.Device]bool
	// poolPorts are the pool's VFs a domain's port holds, with the port's
	// portgroup (readPoolPorts).
	poolPorts map[VFKey]string
	// bridgeSeen is the bridge as the bridge step's check read it, ofports
	// included: verify of a run that wrote nothing takes it instead of
	// reading every port and interface again.
	bridgeSeen *ovs.BridgeStatus
	// bridgeColumnsOnly: the bridge step of this (forward) run wrote, and
	// only columns of ports it kept (columnsOnly): the ofports the plan
	// pass read still hold.
	bridgeColumnsOnly bool
	// domUUID are the UUIDs of the domains of the group's ovn_port
	// attachments (readDomainUUIDs): their bindings' vm-uuid.
	domUUID map[string]string
}

// fresh tells whether a plan's step for a VF of pf must assume new VFs:
// an earlier planned step of this run makes them again (remade).
func (run *groupRun) fresh(pf eswitch.PF) bool {
	return run.dry && run.remade[pf.Dev]
}

// anyFresh tells whether a plan makes the VFs of any owning PF again.
func (run *groupRun) anyFresh() bool {
	for _, pf := range run.owners() {
		if run.fresh(pf) {
			return true
		}
	}
	return false
}

// one is a single batch.
func one(steps ...teardown.Step) []batch {
	if len(steps) == 0 {
		return nil
	}
	return []batch{steps}
}

// owners are the PFs that own VFs (one per SR-IOV device).
func (run *groupRun) owners() []eswitch.PF {
	var out []eswitch.PF
	for _, i := range run.g.Owners {
		out = append(out, run.g.PFs[i])
	}
	return out
}

// namedVFs finds, once the VFs exist, the PCI address of every VF the
// config names (host drivers, attachments): one virtfn link each rather
// than every VF of every PF. In a plan they may not exist yet.
func (run *groupRun) namedVFs() (map[VFKey]sriov.Addr, error) {
	if run.vfs != nil {
		return run.vfs, nil
	}
	if p := run.plan; p != nil && p.vfs != nil && !run.r.Wrote() {
		run.vfs = p.vfs
		return run.vfs, nil
	}
	owner := map[int]bool{}
	for _, i := range run.g.Owners {
		owner[i] = true
	}
	var named []VFKey
	for _, v := range run.g.VFs {
		named = append(named, VFKey{v.PF, v.VF})
	}
	for _, a := range run.g.Attachments {
		named = append(named, VFKey{a.PF, a.VF})
	}
	for _, k := range run.g.PoolVFs() {
		named = append(named, VFKey(k))
	}
	out := map[VFKey]sriov.Addr{}
	for _, k := range named {
		if _, done := out[k]; done || !owner[k.PF] {
			continue
		}
		a, ok, err := run.e.VFAddr(run.g, k)
		if err != nil {
			return nil, err
		}
		if ok {
			out[k] = a
		}
	}
	run.vfs = out
	return out, nil
}

// waitLAG is a barrier: the LAG takes up to ~10 s to activate; VFs bound
// before it is active cannot use the other port.
func (run *groupRun) waitLAG(context.Context) ([]batch, error) {
	e, pf0 := run.e, run.g.PFs[0]
	return one(teardown.Step{Kind: "lag.wait", ID: "lag.wait/" + run.g.Name,
		Wait: func(ctx context.Context) (string, error) {
			lctx, cancel := context.WithTimeout(ctx, e.cfg.LAGTimeout)
			stop := e.ticking("lag/"+run.g.Name, func(el time.Duration) string {
				return fmt.Sprintf("%s: waiting for the hardware LAG on %s: %s of %s", run.g.Name, pf0.Addr, el.Round(100*time.Millisecond), e.cfg.LAGTimeout)
			})
			st, err := eswitch.WaitLAG(lctx, e.fs, pf0.Addr, e.Poll)
			stop()
			cancel()
			if err != nil {
				return "", fmt.Errorf("hardware LAG on %s did not activate within %s (check dmesg for \"Can't activate LAG offload\"): %w", pf0.Addr, e.cfg.LAGTimeout, err)
			}
			if st.State == eswitch.LAGUnverified {
				// On an mlx5 PF that is a problem verify reports (degraded),
				// unless the config accepts it; elsewhere there is no state.
				u := eswitch.ExplainUnverified(e.fs, pf0.Addr)
				e.log.Warn("hardware LAG state is not visible: unverified", "group", run.g.Name, "pf", pf0.Addr, "why", u.Why)
				switch {
				case !u.MLX5:
					return "hardware LAG unverified (no mlx5 debugfs)", nil
				case e.cfg.AcceptUnverifiedLAG:
					return "hardware LAG unverified, accepted by accept_unverified_lag: " + u.Why, nil
				}
				return "hardware LAG unverified: " + u.Why, nil
			}
			if why := eswitch.LAGTypeProblem(st, pf0.Addr); why != "" {
				return "", fmt.Errorf("hardware LAG on %s is active but not the bond's: %s", pf0.Addr, why)
			}
			return fmt.Sprintf("hardware LAG %s (type %s, port_sel_mode %s)", st.State, orDash(st.Type), orDash(st.PortSelMode)), nil
		}}), nil
}
