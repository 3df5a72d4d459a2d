package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vflag/vflag/internal/holders"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// Up converges the host to the config from whatever state it is in
// (DESIGN.md section 2a):
//
//  1. a plan pass (no write) builds every step the config implies and
//     checks it against the host;
//  2. what vflag made earlier (the journal) and the config no longer
//     implies is pruned, in reverse journal order: a dropped group,
//     attachment or host driver, a renamed bridge;
//  3. a disruptive change (numvfs, eswitch mode, a bond re-form, or the
//     prune of one), or a bind or unbind that takes VFs from their driver,
//     is refused, before any write, while something holds VFs it would
//     break (holders.go: the kernel's answer, with libvirt's domain names);
//  4. the forward pass applies what differs;
//  5. the late prunes run: a removed setting that an object the forward
//     pass keeps still refers to goes only after that object stopped
//     referring to it (pruneLate).
//
// With r.DryRun (plan) it reports 2 and 4 and annotates 3. Stage pre (boot)
// runs the forward pass of its phases only: no prune, no domain runs yet.
//
// A run that fails after its first write is rolled back to the state the
// host had before it (teardown.Runner's rollback): the changes are undone
// from what the plan pass found, and what an undo cannot put back (a bond's
// options, the bridge's tags, what a numvfs change destroyed, what the
// prune removed) is done again from the config of the last run that ended
// (redo). A run that succeeds (or leaves the host degraded) ends: the
// journal keeps its config for that (ended).
func (e *Env) Up(ctx context.Context, r *teardown.Runner, gs []Group) error {
	if r.Shared == nil {
		r.Shared = sharedThing
	}
	if r.Together == nil {
		r.Together = slowTogether
	}
	if !r.DryRun {
		r.Redo = func(ctx context.Context, req teardown.RedoRequest) error { return e.redo(ctx, r, req) }
	}
	if e.Stage == StagePre {
		_, _, err := e.forward(ctx, r, gs, nil)
		return e.ended(r, err)
	}
	pr := &teardown.Runner{Journal: r.Journal, DryRun: true, Log: r.Log}
	spans, plan, err := e.forward(ctx, pr, gs, nil)
	if err != nil {
		if r.DryRun {
			for _, ev := range pr.Results() {
				r.Note(ev)
			}
		}
		return err
	}
	planned := pr.Results()
	desired := map[string]bool{}
	for _, ev := range planned {
		desired[ev.ID] = true
	}
	prune, keep, err := e.pruneList(r.Journal, desired, gs)
	if err != nil {
		return err
	}
	refusals, poolRefusals, err := e.disruptionRefusals(r, gs, spans, planned, prune)
	if err != nil {
		return err
	}
	refusals = append(refusals, poolRefusals...)

	early, late := splitLatePrunes(prune)
	if r.DryRun {
		if err := r.Prune(ctx, early); err != nil {
			return err
		}
		for _, ev := range planned {
			r.Note(ev)
		}
		if err := r.Prune(ctx, late); err != nil {
			return err
		}
		// A pool whose network goes while a domain holds one of its ports
		// has no step to mark: plan refuses it as up does.
		if len(poolRefusals) > 0 {
			return fmt.Errorf("up would refuse: %s; %s and run up again", strings.Join(poolRefusals, "; "), stopHolders)
		}
		return nil
	}
	if len(refusals) > 0 {
		return fmt.Errorf("refusing a disruptive change while the VFs it touches are in use (it destroys or rebinds them; a numvfs, eswitch mode or bond change also breaks the hardware LAG, and mlx5 fails LAG activation while a VF is bound): %s; %s and run up again; changes that are not disruptive can go alone: revert the disruptive part of the config", strings.Join(refusals, "; "), stopHolders)
	}
	// What the plan pass found before any write: a rollback undoes each
	// change of an object vflag made earlier from it.
	r.Prior = pr.Captured()
	if err := e.pruneAll(ctx, r, early, keep); err != nil {
		return r.Fail(ctx, fmt.Errorf("remove what the config no longer wants: %w", err))
	}
	// What the plan pass found converged is not checked again until the
	// forward pass writes a kind it depends on (the kinds' DependsOn: a
	// VLAN change, one OVS transaction, re-reads the OVS steps after it and
	// no libvirt or devlink step).
	r.Converged = map[string]string{}
	r.DependsOn = dependencies()
	for _, ev := range planned {
		if len(early) > 0 {
			break // the prune wrote: check everything again
		}
		if !ev.Changed && ev.Err == nil && ev.Phase == teardown.PhaseSkip {
			r.Converged[ev.ID] = ev.Summary
		}
	}
	// Likewise a needed change of a Replannable step (the bridge's one
	// OVSDB transaction) is applied as the plan pass computed it.
	if len(early) == 0 {
		r.Planned = pr.NeededChanges()
	}
	if _, _, err = e.forward(ctx, r, gs, plan); err != nil {
		return e.ended(r, err)
	}
	if err := r.Prune(ctx, late); err != nil {
		return r.Fail(ctx, fmt.Errorf("remove what the config no longer wants (after the changes that referred to it): %w", err))
	}
	return e.ended(r, nil)
}

// disruptionRefusals is stage 3 of Up: what holds the VFs each disruptive
// change (planned, the plan pass's events, spans[gi] those of group gi),
// each bind or unbind that takes VFs from their driver, and each disruptive
// prune would break. It annotates the planned events with those holders
// and returns one refusal line per breakage. Fail closed: a change whose
// VFs or their holders cannot be read is refused, unless --force (noted
// in the report and the log).
func (e *Env) disruptionRefusals(r *teardown.Runner, gs []Group, spans [][2]int, planned []teardown.Event, prune []teardown.Entry) (refusals, pools []string, err error) {
	for gi, g := range gs {
		more, err := e.groupRefusal(r, g, planned[spans[gi][0]:spans[gi][1]])
		if err != nil {
			return nil, nil, err
		}
		refusals = append(refusals, more...)
	}
	more, pools, err := e.pruneRefusals(r, prune)
	if err != nil {
		return nil, nil, err
	}
	return append(refusals, more...), pools, nil
}

// groupRefusal sets, on the disruptive changes among a group's planned
// events, what holds the group's VFs, and returns the refusal line when
// anything does. A group without a disruptive change has its binds and
// unbinds checked instead (rebindRefusals): a disruptive change takes every
// VF of the group, they with it.
func (e *Env) groupRefusal(r *teardown.Runner, g Group, planned []teardown.Event) ([]string, error) {
	var ids []string
	for i := range planned {
		if planned[i].Changed && planned[i].Disruptive {
			ids = append(ids, planned[i].ID)
		}
	}
	if len(ids) == 0 {
		return e.rebindRefusals(r, g, planned)
	}
	vfs, err := e.groupVFs(g)
	held := holders.Set{}
	if err == nil {
		held, err = e.heldBy(vfs, e.h.Libvirt)
	}
	if err != nil && len(held) == 0 {
		if err := e.unshown(r, strings.Join(ids, ","), err); err != nil {
			return nil, err
		}
	}
	for i := range planned {
		if planned[i].Changed && planned[i].Disruptive {
			planned[i].Domains, planned[i].Holders = held.Domains(), held.Lines()
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	return []string{fmt.Sprintf("group %s: %s would break: %s", g.Name, strings.Join(ids, ", "), strings.Join(held.Lines(), "; "))}, nil
}

// pruneRefusals returns the refusal lines for the prunes that break what
// holds VFs: a disruptive kind's removal while something holds the VFs,
// and (pools) a VF pool whose network left the config or was renamed
// while a domain holds one of its ports (libvirt would drop the ports, the
// domains keep the VFs).
func (e *Env) pruneRefusals(r *teardown.Runner, prune []teardown.Entry) (refusals, pools []string, err error) {
	var pruneIDs []string
	for _, en := range prune {
		if disruptivePrune[en.Kind] {
			pruneIDs = append(pruneIDs, en.ID)
		}
	}
	prunedVFs, err := e.prunedVFs(prune)
	held := holders.Set{}
	if err == nil {
		held, err = e.heldBy(prunedVFs, e.h.Libvirt)
	}
	if err != nil && len(held) == 0 {
		if err := e.unshown(r, "removing "+strings.Join(pruneIDs, ","), err); err != nil {
			return nil, nil, err
		}
	}
	if len(held) > 0 {
		refusals = append(refusals, fmt.Sprintf("removing %s would break: %s", strings.Join(pruneIDs, ", "), strings.Join(held.Lines(), "; ")))
	}
	for _, en := range prune {
		if en.Kind != KindNetwork {
			continue
		}
		ports, err := e.networkPorts(en)
		if err != nil {
			if err := e.unshown(r, "removing "+en.ID, err); err != nil {
				return nil, nil, err
			}
			continue
		}
		if len(ports) > 0 {
			pools = append(pools, fmt.Sprintf("removing %s would break running domain(s): %s", en.ID, portHolders(ports)))
		}
	}
	return refusals, pools, nil
}

// unshown handles a change (what) whose VFs or their holders cannot be
// read: refused, unless --force, which notes it and goes ahead.
func (e *Env) unshown(r *teardown.Runner, what string, err error) error {
	if !e.Force {
		return fmt.Errorf("refusing %s: cannot tell whether something holds the VFs it breaks: %w; fix that (or %s and run up --force to go ahead unchecked)", what, err, stopHolders)
	}
	e.log.Warn("--force: change not checked against what holds its VFs", "change", what, "err", err)
	r.Note(teardown.Event{Kind: KindForce, ID: KindForce + "/" + what, Phase: teardown.PhaseSkip, DryRun: r.DryRun,
		Summary: fmt.Sprintf("--force: %s goes ahead without knowing whether something holds its VFs (%v)", what, err)})
	return nil
}

// pruneLate are the kinds whose removal must follow the forward pass,
// because an object the forward pass keeps may still refer to what they
// set until it changes: a group MTU dropped from the config is still the
// mtu_request of the bond's and the representors' OVS interfaces, and
// ovs-vswitchd sets that MTU again on a link whose MTU changes under it
// (netdev_linux_set_mtu on its next reconfigure). So the OVS column is
// cleared first (forward pass) and the link MTU undone after it; undone
// before, the links end at the old MTU with the columns cleared.
var pruneLate = map[string]bool{mtuKind{}.Name(): true}

// splitLatePrunes keeps the journal order within each part.
func splitLatePrunes(prune []teardown.Entry) (early, late []teardown.Entry) {
	for _, en := range prune {
		if pruneLate[en.Kind] {
			late = append(late, en)
		} else {
			early = append(early, en)
		}
	}
	return early, late
}

// disruptivePrune are the kinds whose removal breaks the VFs of running domains.
var disruptivePrune = map[string]bool{KindNumVFs: true, modeKind{}.Name(): true, bondKind{}.Name(): true, enslaveKind{}.Name(): true}

// pruneList is every journal entry of a known kind whose id the config no
// longer implies, in journal order. keep maps a renamed bridge's entry to
// the entry that replaces it (its prior hw-offload, kept for down while a
// bridge of vflag's still wants hw-offload).
func (e *Env) pruneList(j *teardown.Journal, desired map[string]bool, gs []Group) ([]teardown.Entry, map[string]teardown.Entry, error) {
	known := map[string]bool{}
	for _, k := range Kinds {
		known[k.Name] = true
	}
	wantsOffload := map[string]bool{} // OVSDB endpoint -> a group wants hw-offload
	for _, g := range gs {
		if g.Switchdev() && *g.OVS.HWOffload {
			wantsOffload[e.h.OVSDB] = true
		}
	}
	var out []teardown.Entry
	keep := map[string]teardown.Entry{}
	// Entries, not Live: one that a run which has not ended (a killed
	// one) removed is removed again, since the kill may have cut its undo
	// short (a domain's interface detached, vflag's claim on it not yet);
	// an undo is repeatable.
	for _, en := range j.Entries() {
		if desired[en.ID] || !known[en.Kind] {
			continue
		}
		if en.Kind == (hwOffloadKind{}).Name() {
			r, err := decode[hwOffloadRecord](en.Record)
			if err == nil && wantsOffload[r.Endpoint] {
				continue // still wanted: down restores it
			}
		}
		if en.Kind == KindOVSBridge {
			r, err := decode[ovsRecord](en.Record)
			if err == nil && r.Bridge.HWOffloadSet && wantsOffload[r.Endpoint] {
				rec, err := recordJSON(hwOffloadRecord{Endpoint: r.Endpoint, Prior: r.Bridge.PriorHWOffload})
				if err != nil {
					return nil, nil, err
				}
				keep[en.ID] = teardown.Entry{Kind: hwOffloadKind{}.Name(), ID: hwOffloadKind{}.id(r.Endpoint), Summary: "hw-offload prior kept for down",
					Record: rec, State: teardown.StateApplied, Run: en.Run, Batch: en.Batch, Time: en.Time}
			}
		}
		out = append(out, en)
	}
	return out, keep, nil
}

// pruneAll removes the entries: those with a replacement first become it
// (their rows go without touching hw-offload), the others are undone.
func (e *Env) pruneAll(ctx context.Context, r *teardown.Runner, prune []teardown.Entry, keep map[string]teardown.Entry) error {
	var undo []teardown.Entry
	for _, en := range prune {
		rep, ok := keep[en.ID]
		if !ok {
			undo = append(undo, en)
			continue
		}
		rec, err := decode[ovsRecord](en.Record)
		if err != nil {
			return fmt.Errorf("journal entry %s: %w", en.ID, err)
		}
		if err := r.Replace(en.ID, rep); err != nil {
			return err
		}
		start := time.Now()
		err = e.removeOwned(ctx, rec)
		if err == nil && r.FailAt != "" && r.FailAt == en.ID {
			err = teardown.ErrInjected // after the real removal, as Runner.FailAt
		}
		r.Note(teardown.Event{Kind: en.Kind, ID: en.ID, Phase: teardown.PhaseUndo, Changed: err == nil, Duration: time.Since(start), Err: err,
			Summary: fmt.Sprintf("remove bridge %s's rows of %s (the config renamed it); hw-offload stays", rec.Bridge.Bridge, rec.Bridge.Owner)})
		if err != nil {
			return err
		}
	}
	return r.Prune(ctx, undo)
}

// groupVFs are the VFs of a group's owning PFs, as the host shows them. A
// PF whose VFs cannot be listed is an error: the change cannot be shown safe.
func (e *Env) groupVFs(g Group) ([]string, error) {
	var out []string
	for _, i := range g.Owners {
		list, err := e.pci.VFs(g.PFs[i].Dev)
		if err != nil {
			return nil, err
		}
		for _, v := range list {
			out = append(out, string(v.Addr))
		}
	}
	return out, nil
}

// prunedVFs are the VFs that removing the disruptive entries would break. A
// PF that is gone holds none; one whose VFs cannot be listed is an error.
func (e *Env) prunedVFs(prune []teardown.Entry) ([]string, error) {
	devs := map[sriov.Device]bool{}
	for _, en := range prune {
		switch en.Kind {
		case KindNumVFs:
			r, err := decode[numVFsRecord](en.Record)
			if err != nil {
				return nil, fmt.Errorf("journal entry %s: %w", en.ID, err)
			}
			if validDevice(r.PF) == nil {
				devs[r.PF] = true
			}
		case modeKind{}.Name():
			r, err := decode[modeRecord](en.Record)
			if err != nil {
				return nil, fmt.Errorf("journal entry %s: %w", en.ID, err)
			}
			if r.Devlink.Bus == "pci" {
				if a, err := sriov.ParseAddr(r.Devlink.Device); err == nil {
					devs[sriov.PCIDevice(a)] = true
				}
			}
		}
	}
	var out []string
	for d := range devs {
		if !e.pci.Exists(d) {
			continue // gone with its VFs
		}
		list, err := e.pci.VFs(d)
		if err != nil {
			return nil, err
		}
		for _, v := range list {
			out = append(out, string(v.Addr))
		}
	}
	sort.Strings(out)
	return out, nil
}

// removeOwned removes a group's rows from a bridge without touching hw-offload.
func (e *Env) removeOwned(ctx context.Context, r ovsRecord) error {
	c, done, err := e.ovsAt(ctx, r.Endpoint)
	if err != nil {
		return err
	}
	defer done()
	return c.RemoveOwned(ctx, r.Bridge.Owner, r.Bridge.Bridge)
}
