package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/vflag/vflag/teardown"
)

// The groups run side by side (teardown.Runner.Lanes): each group's phases
// in their order, no group waiting for another's hardware. What they share
// is kept consistent here:
//   - the Open_vSwitch row: the phases that read and set its other_config
//     (tc-policy and max-idle, the bridge's transaction with hw-offload,
//     whose record keeps the value it found) run one group at a time, and
//     no bridge sets hw-offload before the group that sets tc-policy set it
//     (tc-policy is read only while hw-offload is off);
//   - a domain: one attachment at a time per domain (domainLock);
//   - on undo, the entries that share one of these (sharedThing) are
//     undone one at a time, in reverse journal order, across the groups
//     (Runner.Shared), and the groups start their eswitch mode changes
//     together (slowTogether, Runner.Together).
const (
	phaseOVSConfig = "OVS other_config tc-policy (before hw-offload), max-idle"
	phaseOVSBridge = "OVS bridge, one transaction"
)

// sharedPhases are the phases that run one group at a time.
var sharedPhases = map[string]bool{phaseOVSConfig: true, phaseOVSBridge: true}

// lanes is what one forward pass's groups share.
type lanes struct {
	ovs sync.Mutex // sharedPhases
	// tcPolicy is closed once the group that sets tc-policy (tcOwner) is
	// past phaseOVSConfig or stopped; nil when no group sets it.
	tcPolicy chan struct{}
	tcOwner  string
	tcOnce   sync.Once
}

// newLanes is the shared state of a forward pass over gs.
func (e *Env) newLanes(gs []Group) *lanes {
	l := &lanes{}
	for _, g := range gs {
		if g.Switchdev() && g.OVS.TCPolicy != "" {
			l.tcPolicy, l.tcOwner = make(chan struct{}), g.Name
			break
		}
	}
	return l
}

// tcPolicyDone opens the gate of tc-policy when group is its owner.
func (l *lanes) tcPolicyDone(group string) {
	if l.tcPolicy != nil && group == l.tcOwner {
		l.tcOnce.Do(func() { close(l.tcPolicy) })
	}
}

// before waits for what the phase p of group needs of the other groups and
// takes what it must hold alone; the returned func releases it.
func (l *lanes) before(ctx context.Context, p phase, group string) (func(), error) {
	if p.name == phaseOVSBridge && l.tcPolicy != nil && group != l.tcOwner {
		select {
		case <-l.tcPolicy:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for group %s to set OVS tc-policy before hw-offload: %w", l.tcOwner, ctx.Err())
		}
	}
	if !sharedPhases[p.name] {
		return func() {}, nil
	}
	l.ovs.Lock()
	return l.ovs.Unlock, nil
}

// forward runs the phases of DESIGN.md section 2 for every group, the
// groups side by side (each group's phases in order; a failure in one stops
// the others and rolls back the run's changes in every group); spans[i] is
// the range of r's results that group i produced (they come group by group,
// in the order of gs), runs the groups' runs by name. plan is the plan
// pass's runs (nil for the plan pass itself and for stage pre): each group's
// run starts from what its plan found (groupRun.plan).
func (e *Env) forward(ctx context.Context, r *teardown.Runner, gs []Group, plan map[string]*groupRun) (spans [][2]int, runs map[string]*groupRun, err error) {
	runs = map[string]*groupRun{}
	names := make([]string, len(gs))
	list := make([]*groupRun, len(gs))
	for i, g := range gs {
		names[i] = g.Name
		list[i] = &groupRun{e: e, g: g, dry: r.DryRun, r: r, plan: plan[g.Name]}
		runs[g.Name] = list[i]
	}
	start := len(r.Results())
	l := e.newLanes(gs)
	err = r.Lanes(ctx, names, func(ctx context.Context, i int) error {
		defer l.tcPolicyDone(names[i])
		e.log.Debug("group starts", "group", names[i])
		if err := e.forwardGroup(ctx, r, list[i], l); err != nil {
			return fmt.Errorf("group %s: %w", names[i], err)
		}
		return nil
	})
	return groupSpans(r.Results()[start:], start, names), runs, err
}

// groupSpans are the ranges of evs (from index start of the results) that
// each group produced, in the order of names.
func groupSpans(evs []teardown.Event, start int, names []string) [][2]int {
	spans := make([][2]int, len(names))
	at := start
	for i, n := range names {
		lo := at
		for at-start < len(evs) && evs[at-start].Group == n {
			at++
		}
		spans[i] = [2]int{lo, at}
	}
	return spans
}

func (e *Env) forwardGroup(ctx context.Context, r *teardown.Runner, run *groupRun, l *lanes) error {
	g := run.g
	for _, p := range phases {
		if e.Stage == StagePre && p.stage != StagePre || !p.groups.has(g) {
			continue
		}
		if err := e.runPhase(ctx, r, run, l, p); err != nil {
			return err
		}
		if p.name == phaseOVSConfig {
			l.tcPolicyDone(g.Name)
		}
	}
	return nil
}

// runPhase builds one phase's batches for a group and runs them.
func (e *Env) runPhase(ctx context.Context, r *teardown.Runner, run *groupRun, l *lanes, p phase) error {
	release, err := l.before(ctx, p, run.g.Name)
	if err != nil {
		return err
	}
	defer release()
	batches, err := p.build(run, ctx)
	if err != nil {
		return fmt.Errorf("step %s (%s): %w", p.num, p.name, err)
	}
	for _, b := range batches {
		for i := range b {
			b[i] = rollbackHow(b[i])
			b[i].Group = run.g.Name
		}
		if err := r.Do(ctx, b...); err != nil {
			return err
		}
	}
	return nil
}

// domainLock serializes the changes of one domain made by groups that run
// side by side (its XML and vflag's metadata in it are read, then written).
func (e *Env) domainLock(domain string) *sync.Mutex {
	e.domMu.Lock()
	defer e.domMu.Unlock()
	if e.domLocks == nil {
		e.domLocks = map[string]*sync.Mutex{}
	}
	m, ok := e.domLocks[domain]
	if !ok {
		m = &sync.Mutex{}
		e.domLocks[domain] = m
	}
	return m
}

// sharedThing is what an entry's undo shares with other groups' entries
// (teardown.Runner.Shared): the Open_vSwitch row's other_config and
// hw-offload for the OVS kinds, one domain's XML for an attachment; ""
// for the rest. The undos that share one thing run one at a time in
// reverse journal order across the groups; the rest run side by side.
func sharedThing(en teardown.Entry) string {
	switch en.Kind {
	case ovsBridgeKind{}.Name(), ovsConfigKind{}.Name(), hwOffloadKind{}.Name():
		return "the Open_vSwitch row"
	case attachKind{}.Name():
		r, err := decode[attachRecord](en.Record)
		if err != nil || r.Attachment.Domain == "" {
			// Its undo fails or finds no domain: it shares with nothing.
			return ""
		}
		return "domain " + r.URI + " " + r.Attachment.Domain
	}
	return ""
}

// SharedThing is what an entry's undo shares with other groups' entries
// (a Runner's Shared).
func (e *Env) SharedThing(en teardown.Entry) string { return sharedThing(en) }

// slowTogether tells the entries whose undos the groups start together
// (teardown.Runner.Together): an eswitch's mode change, the slow step of
// a down (seconds), whose kernel work (the representors unregistered under
// RTNL) would otherwise slow down another card's bond and link steps.
func slowTogether(en teardown.Entry) bool { return en.Kind == modeKind{}.Name() }

// SlowTogether tells the entries whose undos the groups start together (a
// Runner's Together).
func (e *Env) SlowTogether(en teardown.Entry) bool { return slowTogether(en) }
