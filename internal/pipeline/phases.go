package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/libvirtx"
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
// that runs it, the groups it is for, the kinds it changes, and its step
// constructor. The batches a phase returns run in order.
type phase struct {
	num    string
	name   string
	stage  Stage
	groups groups
	kinds  []string // what it changes; none for a barrier
	build  func(run *groupRun, ctx context.Context) ([]batch, error)
}

// Phases is the order of `vflag up`, as one table (see doc.go for why).
var phases = []phase{
	{"1", "sriov_drivers_autoprobe=0", StagePre, allGroups, []string{autoprobeKind{}.Name()}, (*groupRun).autoprobe},
	{"1", "devlink flow_steering_mode (legacy mode only)", StagePre, allGroups, []string{paramKind{}.Name()}, (*groupRun).params},
	{"2", "VFs on both PFs, in parallel", StagePre, allGroups, []string{numVFsKind{}.Name()}, (*groupRun).numVFs},
	{"3", "VF MACs through the PF", StagePre, allGroups, []string{vfMACKind{}.Name()}, (*groupRun).vfMACs},
	{"4", "unbind every VF", StagePre, allGroups, []string{unbindKind{}.Name()}, (*groupRun).unbind},
	{"5", "PFs up (legacy: no bond does it)", StagePre, legacyGroups, []string{linkUpKind{}.Name()}, (*groupRun).legacyPFsUp},
	{"5", "MTU on the PFs (legacy)", StagePre, legacyGroups, []string{mtuKind{}.Name()}, (*groupRun).legacyMTU},
	{"5", "VF policy through the PF (legacy): vlan/qos, trust, spoofchk, link state, rates", StagePre, legacyGroups, vfPolicyKindNames(), (*groupRun).vfPolicy},
	{"5", "eswitch switchdev on both PFs", StagePre, switchdevGroups, []string{modeKind{}.Name()}, (*groupRun).switchdev},
	{"5", "hw-tc-offload on the PFs", StagePre, switchdevGroups, []string{tcOffloadKind{}.Name()}, (*groupRun).tcOffload},
	{"6", "bond, after switchdev", StageAll, switchdevGroups, []string{bondKind{}.Name()}, (*groupRun).bond},
	{"6", "enslave the PFs while down", StageAll, switchdevGroups, []string{enslaveKind{}.Name()}, (*groupRun).enslave},
	{"6", "bond and PFs up", StageAll, switchdevGroups, []string{linkUpKind{}.Name()}, (*groupRun).bondUp},
	{"6", "MTU on the bond (its PFs follow it)", StageAll, switchdevGroups, []string{mtuKind{}.Name()}, (*groupRun).bondMTU},
	{"7", "wait for hardware LAG", StageAll, switchdevGroups, nil, (*groupRun).waitLAG},
	{"8", "host drivers, strictly after LAG", StageAll, allGroups, []string{bindKind{}.Name()}, (*groupRun).bind},
	{"8", "MTU on the host's VF netdevs (legacy)", StageAll, legacyGroups, []string{mtuKind{}.Name()}, (*groupRun).vfMTU},
	{"9", "representors up", StageAll, switchdevGroups, []string{repsUpKind{}.Name()}, (*groupRun).repsUp},
	{"9", "MTU on the representors", StageAll, switchdevGroups, []string{mtuKind{}.Name()}, (*groupRun).repsMTU},
	{"9", "devlink rate nodes (rate_groups)", StageAll, switchdevGroups, []string{rateNodeKind{}.Name()}, (*groupRun).rateNodes},
	{"9", "devlink rate leaves of the VF ports", StageAll, switchdevGroups, []string{rateLeafKind{}.Name()}, (*groupRun).rateLeaves},
	{"10", "OVS other_config tc-policy (before hw-offload), max-idle", StageAll, switchdevGroups, []string{ovsConfigKind{}.Name()}, (*groupRun).ovsConfig},
	{"10", "OVS bridge, one transaction", StageAll, switchdevGroups, []string{ovsBridgeKind{}.Name()}, (*groupRun).ovsBridge},
	{"10", "the bond and its PFs on the bond's shared tc block (hw-offload)", StageAll, switchdevGroups, []string{tcBlockKind{}.Name()}, (*groupRun).sharedBlock},
	{"11", "libvirt attachments, one domain at a time", StageAll, allGroups, []string{attachKind{}.Name()}, (*groupRun).attach},
	{"11", "libvirt hostdev network: the group's VF pool", StageAll, allGroups, []string{networkKind{}.Name()}, (*groupRun).network},
	{"12", "verify", StageAll, allGroups, nil, (*groupRun).verify},
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

// forward runs the phases of DESIGN.md section 2 for every group, in
// order; spans[i] is the range of r's results that group i produced.
func (e *Env) forward(ctx context.Context, r *teardown.Runner, gs []Group) ([][2]int, map[string]*groupRun, error) {
	var spans [][2]int
	runs := map[string]*groupRun{}
	for _, g := range gs {
		start := len(r.Results())
		run := &groupRun{e: e, g: g, dry: r.DryRun, r: r}
		if !r.DryRun {
			run.plan = e.planned[g.Name]
		}
		runs[g.Name] = run
		err := e.forwardGroup(ctx, r, run)
		spans = append(spans, [2]int{start, len(r.Results())})
		if err != nil {
			return spans, runs, fmt.Errorf("group %s: %w", g.Name, err)
		}
	}
	return spans, runs, nil
}

func (e *Env) forwardGroup(ctx context.Context, r *teardown.Runner, run *groupRun) error {
	g := run.g
	for _, p := range phases {
		if e.Stage == StagePre && p.stage != StagePre || !p.groups.has(g) {
			continue
		}
		batches, err := p.build(run, ctx)
		if err != nil {
			return fmt.Errorf("step %s (%s): %w", p.num, p.name, err)
		}
		for _, b := range batches {
			if err := r.Do(ctx, b...); err != nil {
				return err
			}
		}
	}
	return nil
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

func (run *groupRun) autoprobe(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, pf := range run.owners() {
		s = append(s, autoprobeKind{}.step(run.e, pf))
	}
	return one(s...), nil
}

// params: flow_steering_mode as the config sets it; left empty, a
// switchdev group defaults to smfs (SW steering, the one hardware offload
// of OVS flows needs at scale) where the driver has the param and the
// eswitch is still legacy (paramKind.step's byDefault).
func (run *groupRun) params(context.Context) ([]batch, error) {
	value, byDefault := run.g.FlowSteeringMode, false
	if value == "" {
		if !run.g.Switchdev() {
			return nil, nil
		}
		value, byDefault = DefaultFlowSteeringMode, true
	}
	var s []teardown.Step
	for _, d := range devlinks(run.g.PFs) {
		s = append(s, paramKind{}.step(run.e, d, "flow_steering_mode", value, byDefault))
	}
	return one(s...), nil
}

// DefaultFlowSteeringMode is a switchdev group's flow_steering_mode when
// the config leaves it empty.
const DefaultFlowSteeringMode = "smfs"

func (run *groupRun) numVFs(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, pf := range run.owners() {
		s = append(s, numVFsKind{}.step(run.e, pf, run.g.NumVFs))
		if !run.dry {
			continue
		}
		// The step's Check reads the same count (no write comes between in
		// a plan): a change from a non-zero count makes every VF again.
		cur, err := run.e.pci.NumVFs(pf.Dev)
		if err != nil {
			return nil, fmt.Errorf("read sriov_numvfs of %s: %w", pf.Dev, err)
		}
		if cur != 0 && cur != run.g.NumVFs {
			if run.remade == nil {
				run.remade = map[sriov.Device]bool{}
			}
			run.remade[pf.Dev] = true
		}
	}
	return one(s...), nil
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

func (run *groupRun) vfMACs(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, v := range run.g.VFs {
		if v.MAC == "" {
			continue
		}
		pf := run.g.PFs[v.PF]
		if run.fresh(pf) {
			// A VF made again has the zero MAC.
			s = append(s, predicted(vfMACKind{}.Name(), vfMACKind{}.id(pf.Netdev, v.VF),
				fmt.Sprintf("%s vf %d: mac 00:00:00:00:00:00 -> %s (after the VFs are made again)", pf.Netdev, v.VF, v.MAC)))
			continue
		}
		s = append(s, vfMACKind{}.step(run.e, pf, v.VF, v.MAC))
	}
	return one(s...), nil
}

// unbind: every VF, except that a VF already on its configured host driver
// may stay bound where unbinding serves nothing: a legacy group, or a
// switchdev group whose eswitch and LAG are already in place.
func (run *groupRun) unbind(context.Context) ([]batch, error) {
	vfs, err := run.namedVFs()
	if err != nil {
		return nil, err
	}
	want := map[sriov.Addr]string{}
	for _, v := range run.g.VFs {
		if a, ok := vfs[VFKey{v.PF, v.VF}]; ok && v.Driver != "" {
			want[a] = v.Driver
		}
	}
	settled := !run.g.Switchdev() || run.e.lagSettled(run.g)
	run.settled = settled
	// Once settled, a VF on vfio-pci stays too: libvirt bound it for a
	// domain (managed passthrough); unbinding it would pull the device from
	// a running guest, and the kernel's vfio remove blocks until the guest
	// lets go (seen on the real kernel, e2e disrupt.sh: up hung). Before the
	// LAG is in place (a mode change with VFs) the disruption gate refuses
	// while domains run.
	keep := func(vf sriov.Addr, driver string) bool {
		return settled && (want[vf] == driver || driver == "vfio-pci")
	}
	var s []teardown.Step
	for _, pf := range run.owners() {
		if run.fresh(pf) {
			// Made again with autoprobe off (phase 1): no VF is bound.
			s = append(s, unchanged(unbindKind{}.Name(), unbindKind{}.Name()+"/"+string(pf.Dev),
				fmt.Sprintf("%s: unbind 0 VFs from host drivers (the VFs are made again unbound)", pf.Dev)))
			continue
		}
		var restored map[sriov.Addr]string
		if run.dry {
			wanted := map[string]bool{}
			for _, v := range run.g.VFs {
				if v.Driver != "" {
					wanted[bindKind{}.id(run.g.PFs[v.PF], v.VF)] = true
				}
			}
			if restored, err = prunedBinds(run.r.Journal, pf, wanted); err != nil {
				return nil, err
			}
		}
		s = append(s, unbindKind{}.step(run.e, pf, keep, restored))
	}
	return one(s...), nil
}

// lagSettled tells whether a switchdev group's eswitches, bond and LAG are
// already in place, so that VFs bound after LAG need not be unbound again.
// A bond whose mode changes is not: its slaves are released and the LAG
// activates again, which firmware refuses while a VF is bound.
func (e *Env) lagSettled(g Group) bool {
	if c, err := e.bondReform(g); err != nil || c >= costReform {
		return false
	}
	for _, pf := range g.PFs {
		if e.modeOf(pf) != eswitch.ModeSwitchdev {
			return false
		}
		l, err := e.k.Link(pf.Netdev)
		if err != nil || l.Master != g.Bond.Name {
			return false
		}
	}
	st, err := eswitch.ReadLAG(e.fs, g.PFs[0].Addr)
	return err == nil && st.State != eswitch.LAGInactive
}

// legacyPFsUp: no bond brings a legacy group's PFs up, and libvirt refuses
// to start a domain with a VF whose PF is down.
func (run *groupRun) legacyPFsUp(context.Context) ([]batch, error) {
	pfs := netdevs(run.g.PFs)
	return one(linkUpKind{}.step(run.e, strings.Join(pfs, "+"), pfs...)), nil
}

func (run *groupRun) switchdev(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, d := range devlinks(run.g.PFs) {
		s = append(s, modeKind{}.step(run.e, d, run.g.PFs, eswitch.ModeSwitchdev))
	}
	return one(s...), nil
}

func (run *groupRun) tcOffload(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, pf := range run.g.PFs {
		s = append(s, tcOffloadKind{}.step(run.e, pf))
	}
	return one(s...), nil
}

func (run *groupRun) bond(context.Context) ([]batch, error) {
	if run.dry {
		c, err := run.e.bondReform(run.g)
		if err != nil {
			return nil, err
		}
		run.bondCost = c
	}
	return one(bondKind{}.step(run.e, run.g)), nil
}

// enslave one PF at a time: the bonding driver serialises them anyway. A
// plan of a bond re-form predicts the enslave its release makes needed.
func (run *groupRun) enslave(context.Context) ([]batch, error) {
	var out []batch
	for _, pf := range run.g.PFs {
		s := enslaveKind{}.step(run.e, pf, run.g.Bond.Name)
		if run.dry && run.bondCost >= costReform {
			s = predicted(s.Kind, s.ID, fmt.Sprintf("enslave %s to %s again (after the mode change)", pf.Netdev, run.g.Bond.Name))
		}
		out = append(out, batch{s})
	}
	return out, nil
}

func (run *groupRun) bondUp(context.Context) ([]batch, error) {
	names := append([]string{run.g.Bond.Name}, netdevs(run.g.PFs)...)
	s := linkUpKind{}.step(run.e, run.g.Bond.Name, names...)
	if run.dry && run.bondCost >= costDown {
		s = predicted(s.Kind, s.ID, fmt.Sprintf("set up: %s (again, after the option change)", strings.Join(names, " ")))
	}
	return one(s), nil
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
				e.log.Warn("hardware LAG state is not visible (no mlx5 debugfs): unverified", "group", run.g.Name, "pf", pf0.Addr)
				return "hardware LAG unverified (no mlx5 debugfs)", nil
			}
			return fmt.Sprintf("hardware LAG %s (type %s, port_sel_mode %s)", st.State, OrDash(st.Type), OrDash(st.PortSelMode)), nil
		}}), nil
}

func (run *groupRun) bind(context.Context) ([]batch, error) {
	vfs, err := run.namedVFs()
	if err != nil {
		return nil, err
	}
	var s []teardown.Step
	for _, v := range run.g.VFs {
		if v.Driver == "" {
			continue
		}
		pf := run.g.PFs[v.PF]
		a, ok := vfs[VFKey{v.PF, v.VF}]
		switch {
		case ok && run.dry && (!run.settled || run.fresh(pf)):
			// The unbind phase unbinds it first (the eswitch, bond or LAG
			// changes), or the numvfs change makes it again unbound:
			// binding it again is a change.
			why := "after the LAG re-forms"
			if run.fresh(pf) {
				why = "after the VFs are made again"
			}
			s = append(s, predicted(bindKind{}.Name(), bindKind{}.id(pf, v.VF),
				fmt.Sprintf("%s: bind to %s again (%s)", a, v.Driver, why)))
		case ok:
			s = append(s, bindKind{}.step(run.e, pf, v.VF, a, v.Driver))
		case run.dry:
			s = append(s, predicted(bindKind{}.Name(), bindKind{}.id(pf, v.VF),
				fmt.Sprintf("VF %d of %s: bind to %s (after VF creation and LAG)", v.VF, pf.Netdev, v.Driver)))
		default:
			return nil, fmt.Errorf("VF %d of %s does not exist", v.VF, pf.Netdev)
		}
	}
	return one(s...), nil
}

// repsUp maps every VF of every owning PF to its representor (by devlink
// port, then phys_port_name + switch id; waiting for them in a real run)
// and sets them up.
func (run *groupRun) repsUp(ctx context.Context) ([]batch, error) {
	e, g := run.e, run.g
	n := g.NumVFs
	if p := run.plan; p != nil && p.repsAll && !run.r.Wrote() {
		run.reps, run.repsAll = p.reps, true // the plan pass mapped them; nothing changed since
		return run.repsUpSteps(), nil
	}
	run.reps = map[VFKey]string{}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, i := range g.Owners {
		pf := g.PFs[i]
		var reps map[int]string
		var err error
		if run.dry {
			reps, err = eswitch.RepresentorsOf(e.k, e.fs, pf, n)
		} else {
			reps, err = eswitch.WaitRepresentors(wctx, e.k, e.fs, pf, n, e.Poll)
		}
		if err != nil {
			return nil, err
		}
		for vf, name := range reps {
			if vf < n {
				run.reps[VFKey{i, vf}] = name
			}
		}
	}
	run.repsAll = len(run.reps) == n*len(g.Owners)
	return run.repsUpSteps(), nil
}

func (run *groupRun) repsUpSteps() []batch {
	e, g, n := run.e, run.g, run.g.NumVFs
	var s []teardown.Step
	for _, i := range g.Owners {
		pf := g.PFs[i]
		if !run.repsKnown(i) { // a plan on a host that is not in switchdev yet, or whose VFs are made again
			s = append(s, predicted(repsUpKind{}.Name(), repsUpKind{}.id(pf),
				fmt.Sprintf("map %d representors of %s and set them up (%s)", n, pf.Netdev, run.repsWhy(i))))
			continue
		}
		var names []string
		for vf := 0; vf < n; vf++ {
			names = append(names, run.reps[VFKey{i, vf}])
		}
		s = append(s, repsUpKind{}.step(e, pf, names))
	}
	return one(s...)
}

// repsKnown tells whether the representors of owning PF i are mapped and
// stay: not in a plan whose numvfs change makes them again.
func (run *groupRun) repsKnown(i int) bool {
	return run.repsAll && !run.fresh(run.g.PFs[i])
}

// repsWhy says why a plan predicts the representors of owning PF i.
func (run *groupRun) repsWhy(i int) string {
	if run.fresh(run.g.PFs[i]) {
		return "after the VFs are made again"
	}
	return "after switchdev"
}

func (run *groupRun) ovsBridge(context.Context) ([]batch, error) {
	g := run.g
	if !run.repsAll || run.anyFresh() {
		// Representors made again are new netdevs: the bridge's ports change.
		return one(predicted(ovsBridgeKind{}.Name(), ovsBridgeKind{}.id(g.OVS.Bridge),
			fmt.Sprintf("bridge %s: bond %s and %d representors, hw-offload=%v (one transaction)", g.OVS.Bridge, g.Bond.Name, g.NumVFs*len(g.Owners), *g.OVS.HWOffload))), nil
	}
	if err := run.readPoolPorts(); err != nil {
		return nil, err
	}
	spec := run.bridgeSpec()
	spec.PlanMoves = run.dry // a renamed bridge's ports: the prune before the forward pass frees them
	return one(ovsBridgeKind{}.step(run.e, spec, func(bs ovs.BridgeStatus) { run.bridgeSeen = &bs })), nil
}

// bridgeSpec is the group's bridge: the bond plus every representor, with
// the VLAN columns of its VF; with the group's mtu, every interface's
// mtu_request.
func (run *groupRun) bridgeSpec() ovs.BridgeSpec {
	g := run.g
	spec := ovs.BridgeSpec{Owner: g.Name, Bridge: g.OVS.Bridge, DatapathType: g.OVS.DatapathType, HWOffload: *g.OVS.HWOffload}
	spec.Ports = append(spec.Ports, ovs.PortSpec{Name: g.Bond.Name, MTURequest: g.MTU})
	for _, pf := range g.Owners {
		for vf := 0; vf < g.NumVFs; vf++ {
			k := VFKey{pf, vf}
			ps := RepPortSpec(g.Group, k, run.reps[k])
			if pg, held := run.poolPorts[k]; held {
				ps = PoolPortSpec(g.Group, k, run.reps[k], pg)
			}
			spec.Ports = append(spec.Ports, ps)
		}
	}
	return spec
}

// readPoolPorts finds, for a switchdev group with a network, the pool's
// VFs that a domain's port holds and the portgroup of each: their
// representors' OVS ports carry that portgroup's VLAN (the network hook
// sets it when libvirt makes the port), which up keeps.
func (run *groupRun) readPoolPorts() error {
	g := run.g
	run.poolPorts = nil
	if g.Network == nil || !g.Switchdev() {
		return nil
	}
	vfs, err := run.namedVFs()
	if err != nil {
		return err
	}
	byPCI := map[string]VFKey{}
	for _, k := range g.Pool() {
		if a, ok := vfs[k]; ok {
			byPCI[string(a)] = k
		}
	}
	if len(byPCI) == 0 {
		return nil
	}
	c, err := run.e.h.Virt()
	if err != nil {
		return fmt.Errorf("libvirt network %s (the VLANs of its ports' representors): %w", g.NetworkName(), err)
	}
	st, err := c.Network(g.NetworkName())
	if err != nil {
		return fmt.Errorf("libvirt network %s (the VLANs of its ports' representors): %w", g.NetworkName(), err)
	}
	if !st.Owned {
		return nil // a foreign network of that name: the network step refuses it
	}
	run.poolPorts = map[VFKey]string{}
	for _, p := range st.Ports {
		if k, ok := byPCI[p.PCI]; ok {
			run.poolPorts[k] = p.Portgroup
		}
	}
	return nil
}

// PoolPortSpec is the OVS port of the representor rep of pool VF k while a
// domain's port in portgroup pg holds it: the portgroup's VLAN (the default
// portgroup's when pg is "" or unknown), else as RepPortSpec.
func PoolPortSpec(g *config.Group, k VFKey, rep, pg string) ovs.PortSpec {
	ps := RepPortSpec(g, k, rep)
	if g.Network == nil {
		return ps
	}
	var chosen *config.Portgroup
	for i, p := range g.Network.Portgroups {
		if p.Name == pg && pg != "" {
			chosen = &g.Network.Portgroups[i]
			break
		}
		if p.Default && chosen == nil {
			chosen = &g.Network.Portgroups[i]
		}
	}
	if chosen != nil {
		ps.Tag, ps.VLANMode, ps.Trunks = chosen.VLAN, chosen.VLANMode, slices.Clone(chosen.Trunks)
	}
	return ps
}

// RepPortSpec is the OVS port of the representor rep of VF k: its VF's
// tag, vlan_mode and trunks, and the group's mtu as mtu_request. The
// bridge step and the qemu hook build it alike.
func RepPortSpec(g *config.Group, k VFKey, rep string) ovs.PortSpec {
	ps := ovs.PortSpec{Name: rep, MTURequest: g.MTU}
	for _, v := range g.VFs {
		if v.PF == k.PF && v.VF == k.VF {
			ps.Tag, ps.VLANMode, ps.Trunks = v.VLAN, v.VLANMode, v.Trunks
		}
	}
	return ps
}

// attach: one domain at a time (libvirt serialises them anyway).
func (run *groupRun) attach(context.Context) ([]batch, error) {
	vfs, err := run.namedVFs()
	if err != nil {
		return nil, err
	}
	g := run.g
	var out []batch
	for _, a := range g.Attachments {
		pf := g.PFs[a.PF]
		id := attachKind{}.id(a.Domain, pf, a.VF)
		mac := a.MAC
		if mac == "" {
			mac = g.VFMAC(a.PF, a.VF)
		}
		pci, ok := vfs[VFKey{a.PF, a.VF}]
		switch {
		case ok:
			att := libvirtx.Attachment{Domain: a.Domain, PCI: string(pci), MAC: mac, Live: a.Live, Owner: g.Name}
			out = append(out, batch{attachKind{}.step(run.e, id, att)})
		case run.dry:
			out = append(out, batch{predicted(attachKind{}.Name(), id,
				fmt.Sprintf("domain %s: attach VF %d of %s mac %s (after VF creation)", a.Domain, a.VF, pf.Netdev, mac))})
		default:
			return nil, fmt.Errorf("attachment of pf %d vf %d: the VF does not exist", a.PF, a.VF)
		}
	}
	return out, nil
}
