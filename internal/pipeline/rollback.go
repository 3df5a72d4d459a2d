package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/teardown"
)

// settledRecord is what the journal keeps of the last run that ended
// (teardown.Journal.Settled): the config it converged the host to and its
// stage. A later run's rollback does again from it what undoing cannot put
// back (redo). A run of the pre stage (a boot's vflag-pre.service) made
// only the pre stage's objects: its record keeps alongside, as Full, the
// config of the last run of every stage that ended before it, which made
// what outlived the boot (OVS's rows, libvirt's definitions).
type settledRecord struct {
	Stage  Stage          `json:"stage"`
	Config *config.Config `json:"config"`
	// Full is, in a pre stage's record, the config of the last run of
	// every stage that ended before it (nil when none did, or in records
	// written before it was kept).
	Full *config.Config `json:"full,omitempty"`
}

// readSettled decodes a settled record; an absent stage (a record written
// before the stage was kept) is StageAll.
func readSettled(raw json.RawMessage) (settledRecord, error) {
	var s settledRecord
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, err
	}
	if s.Config == nil {
		return s, errors.New("it holds no config")
	}
	if s.Stage == "" {
		s.Stage = StageAll
	}
	return s, nil
}

// full is the config of the last run of every stage that ended, as of
// this record: its own, or the one a pre stage's record keeps.
func (s settledRecord) full() *config.Config {
	if s.Stage == StagePre {
		return s.Full
	}
	return s.Config
}

// ended ends a run that succeeded or left the host degraded (every step
// stayed): its changes can no longer be rolled back, and the journal keeps
// its config for a later run's rollback. A run that wrote nothing leaves
// the journal as it is (a converged re-run writes nothing), unless the
// journal has nothing to redo from yet (written by a vflag before it kept
// one). A plan or a failed run returns err as it is.
func (e *Env) ended(r *teardown.Runner, err error) error {
	if r.DryRun || r.Journal == nil || err != nil && !errors.Is(err, teardown.ErrDegraded) {
		return err
	}
	j := r.Journal
	if !r.Wrote() && !j.Open() && (j.Settled() != nil || len(j.Entries()) == 0) {
		return err
	}
	rec := settledRecord{Stage: e.Stage, Config: e.cfg}
	if e.Stage == StagePre {
		if raw := j.Settled(); raw != nil {
			if before, rerr := readSettled(raw); rerr == nil {
				rec.Full = before.full()
			}
		}
	}
	raw, merr := json.Marshal(rec)
	if merr == nil {
		merr = j.Settle(raw)
	}
	if merr != nil {
		return errors.Join(err, fmt.Errorf("journal %s: end the run (its changes stay open: a later failed run's rollback would undo them too): %w", j.Path(), merr))
	}
	return err
}

// redoEnv is the Env that does cfg's steps of stage again for a
// rollback's redo: e's host, poll and progress, forced (nothing refused).
func (e *Env) redoEnv(cfg *config.Config, stage Stage) *Env {
	env := New(cfg, e.h, e.log)
	env.Stage = stage
	env.Poll, env.OFPortWait, env.Holding, env.Force, env.Progress = e.Poll, e.OFPortWait, e.Holding, true, e.Progress
	return env
}

// redoRunner is the runner of a redo of r's rollback: its changes open
// nothing and are reported as r's undo events ("restore: ...").
func (e *Env) redoRunner(env *Env, r *teardown.Runner, pr *teardown.Runner, skip map[string]bool) *teardown.Runner {
	rr := &teardown.Runner{Journal: r.Journal, Undo: env.Undoers(), Log: r.Log, Moot: env.MootUndo(), Shared: sharedThing, Together: slowTogether,
		NoOpen: true, NoRollback: true, Skip: skip, DependsOn: dependencies(), Converged: map[string]string{},
		Planned: pr.NeededChanges()}
	for _, ev := range pr.Results() {
		if !ev.Changed && ev.Err == nil && ev.Phase == teardown.PhaseSkip {
			rr.Converged[ev.ID] = ev.Summary
		}
	}
	rr.OnEvent = func(ev teardown.Event) {
		if !ev.Changed && ev.Err == nil {
			return
		}
		if ev.Phase == teardown.PhaseApply {
			ev.Phase, ev.Summary = teardown.PhaseUndo, "restore: "+ev.Summary
		}
		r.Note(ev)
	}
	return rr
}

// redoPlan plans, with env, each group of env's config that inGroup
// selects (nil: every group): the groups whose plan names a step of want,
// with their plans, and the ids of want the plans name.
func (e *Env) redoPlan(ctx context.Context, env *Env, pr *teardown.Runner, want map[string]bool, inGroup func(string) bool) (affected []Group, plans map[string]*groupRun, found map[string]bool, err error) {
	plans, found = map[string]*groupRun{}, map[string]bool{}
	cfg := env.cfg
	for i := range cfg.Groups {
		if inGroup != nil && !inGroup(cfg.Groups[i].Name) {
			continue
		}
		g, errs := ResolveGroup(e.k, e.fs, &cfg.Groups[i])
		if len(errs) > 0 {
			return nil, nil, nil, fmt.Errorf("group %s of the config from before: %w", cfg.Groups[i].Name, errs[0])
		}
		start := len(pr.Results())
		_, runs, err := env.forward(ctx, pr, []Group{g}, nil)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("plan the config from before: %w", err)
		}
		hit := false
		for _, ev := range pr.Results()[start:] {
			if want[ev.ID] {
				hit, found[ev.ID] = true, true
			}
		}
		if hit {
			affected = append(affected, g)
		}
		plans[g.Name] = runs[g.Name]
	}
	return affected, plans, found, nil
}

// redo does again, for r's rollback, the objects that undoing could not
// put back (teardown.RedoRequest): the settled config's forward pass over
// the groups whose steps those are, every step of them checked and
// changed where it differs, except the objects whose undo made others
// again (req.Remade: their own object is back). It goes the way up goes (a
// bond re-formed only with the VFs unbound, bound again after the LAG), so
// in those groups the host ends as that config left it. Its changes are
// reported as r's undo events ("restore: ..."). Nothing is pruned and
// nothing refused: this is the way back to what the host was.
//
// After a pre stage (the settled record's stage is pre: a boot's first
// run) that config's pass is the pre stage's, which makes none of the
// later steps: those objects are as the boot left them, and redoOutside
// puts them back.
func (e *Env) redo(ctx context.Context, r *teardown.Runner, req teardown.RedoRequest) error {
	raw := r.Journal.Settled()
	if raw == nil {
		if len(req.Remade) == len(req.Entries) && !slices.ContainsFunc(r.Journal.Entries(), func(en teardown.Entry) bool { return en.Open == nil }) {
			// Only changes undone already whose undo made objects again
			// (VFs, representors), and no entry of a run that ended: vflag
			// set nothing on them before this run that it could do again.
			return nil
		}
		return errors.New("the journal keeps no config of a run that ended to do them again from (it was written by a vflag before that was kept): run up with the config from before, or down")
	}
	s, err := readSettled(raw)
	if err != nil {
		return fmt.Errorf("the journal's config of the last run that ended cannot be read (%v): run up with the config from before, or down", err)
	}
	env := e.redoEnv(s.Config, s.Stage)
	want := map[string]bool{}
	groupOf := map[string]string{}
	for i, id := range req.IDs() {
		want[id] = true
		groupOf[id] = req.Entries[i].Group
	}
	// Which groups: a plan of each names its steps (it reads only).
	pr := &teardown.Runner{Journal: r.Journal, DryRun: true, Log: r.Log}
	affected, plans, found, err := e.redoPlan(ctx, env, pr, want, nil)
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range req.IDs() {
		if !found[id] && !req.Remade[id] {
			missing = append(missing, id)
		}
	}
	var outside map[string]bool // the groups of the missing ids ("": any)
	if len(missing) > 0 {
		if s.Stage != StagePre {
			return fmt.Errorf("the config of the last run that ended does not make %s", strings.Join(missing, ", "))
		}
		// Steps after the pre stage: their groups' pre stage is done
		// again too (a VF the run bound goes back unbound while the LAG
		// is not in place), then redoOutside.
		outside = map[string]bool{}
		for _, id := range missing {
			outside[groupOf[id]] = true
		}
		for _, g := range env.cfg.Groups {
			if (outside[g.Name] || outside[""]) && !slices.ContainsFunc(affected, func(a Group) bool { return a.Name == g.Name }) {
				if p := plans[g.Name]; p != nil {
					affected = append(affected, p.g)
				}
			}
		}
	}
	_, _, err = env.forward(ctx, e.redoRunner(env, r, pr, req.Remade), affected, plans)
	if errors.Is(err, teardown.ErrDegraded) {
		e.log.Warn("rollback: the objects done again do not all verify", "err", err)
		err = nil
	}
	if err = teardown.Cause(err); err != nil || len(missing) == 0 {
		return err
	}
	return e.redoOutside(ctx, r, s, missing, outside)
}

// redoOutside does again, after a pre stage's redo, the objects of ids
// (steps after the pre stage, of the groups in groups; "" any) as the last
// run of every stage that ended made them (settledRecord.Full; a record
// without one: the pre stage's config), those steps alone. A boot kept
// what lives outside the kernel (OVS's rows, libvirt's definitions) as
// that run left it, and took the kernel's objects away: the steps whose
// object's target is gone (a plan of that config cannot read it: the bond
// the run made and its rollback removed, a VF's driver that waits for the
// LAG) are not done again, as the host before the run had none of them.
func (e *Env) redoOutside(ctx context.Context, r *teardown.Runner, s settledRecord, ids []string, groups map[string]bool) error {
	cfg, from := s.Full, "the last run of every stage that ended"
	if cfg == nil {
		cfg, from = s.Config, "the last run that ended (a boot's pre stage)"
	}
	env := e.redoEnv(cfg, StageAll)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	pr := &teardown.Runner{Journal: r.Journal, DryRun: true, Log: r.Log}
	affected, _, found, err := e.redoPlan(ctx, env, pr, want, func(name string) bool { return groups[name] || groups[""] })
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the config of %s does not make %s", from, strings.Join(missing, ", "))
	}
	captured := pr.Captured()
	only := map[string]bool{}
	for _, id := range ids {
		if _, ok := captured[id]; ok {
			only[id] = true
		}
	}
	if len(only) == 0 {
		return nil
	}
	rr := e.redoRunner(env, r, pr, nil)
	rr.Only = only
	_, _, err = env.forward(ctx, rr, affected, nil)
	if errors.Is(err, teardown.ErrDegraded) {
		return nil
	}
	return teardown.Cause(err)
}

// undoRemoves are the kinds whose undo takes away the object its record
// names, whatever the change found: a change of one that vflag made
// earlier (an attachment's MAC, a pool's VFs) is put back by a rollback
// doing it again (teardown.RollbackRedo), not by that undo.
var undoRemoves = map[string]bool{KindAttach: true, KindNetwork: true}

// rollbackHow marks the steps of undoRemoves kinds for redo.
func rollbackHow(s teardown.Step) teardown.Step {
	if !undoRemoves[s.Kind] || s.Check == nil {
		return s
	}
	check := s.Check
	s.Check = func(ctx context.Context) (teardown.Change, error) {
		ch, err := check(ctx)
		if ch.Rollback == teardown.RollbackUndo {
			ch.Rollback = teardown.RollbackRedo
		}
		return ch, err
	}
	return s
}
