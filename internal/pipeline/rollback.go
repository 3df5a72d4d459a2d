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
// back (redo).
type settledRecord struct {
	Stage  Stage          `json:"stage"`
	Config *config.Config `json:"config"`
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
	rec, merr := json.Marshal(settledRecord{Stage: e.Stage, Config: e.cfg})
	if merr == nil {
		merr = j.Settle(rec)
	}
	if merr != nil {
		return errors.Join(err, fmt.Errorf("journal %s: end the run (its changes stay open: a later failed run's rollback would undo them too): %w", j.Path(), merr))
	}
	return err
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
	var s settledRecord
	if err := json.Unmarshal(raw, &s); err != nil || s.Config == nil {
		return fmt.Errorf("the journal's config of the last run that ended cannot be read (%v): run up with the config from before, or down", err)
	}
	env := New(s.Config, e.h, e.log)
	env.Stage = s.Stage
	if env.Stage == "" {
		env.Stage = StageAll
	}
	env.Poll, env.OFPortWait, env.Holding, env.Force, env.Progress = e.Poll, e.OFPortWait, e.Holding, true, e.Progress
	want := map[string]bool{}
	for _, id := range req.IDs() {
		want[id] = true
	}
	// Which groups: a plan of each names its steps (it reads only).
	pr := &teardown.Runner{Journal: r.Journal, DryRun: true, Log: r.Log}
	var affected []Group
	plans := map[string]*groupRun{}
	found := map[string]bool{}

	for i := range s.Config.Groups {
		g, errs := ResolveGroup(e.k, e.fs, &s.Config.Groups[i])
		if len(errs) > 0 {
			return fmt.Errorf("group %s of the config from before: %w", s.Config.Groups[i].Name, errs[0])
		}
		start := len(pr.Results())
		_, runs, err := env.forward(ctx, pr, []Group{g}, nil)
		if err != nil {
			return fmt.Errorf("plan the config from before: %w", err)
		}
		hit := false
		for _, ev := range pr.Results()[start:] {
			if want[ev.ID] {
				hit, found[ev.ID] = true, true
			}
		}
		if hit {
			affected = append(affected, g)
			plans[g.Name] = runs[g.Name]
		}
	}
	var missing []string
	for _, id := range req.IDs() {
		if !found[id] && !req.Remade[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the config of the last run that ended does not make %s", strings.Join(missing, ", "))
	}
	rr := &teardown.Runner{Journal: r.Journal, Undo: env.Undoers(), Log: r.Log, Moot: env.MootUndo(), Shared: sharedThing, Together: slowTogether,
		NoOpen: true, NoRollback: true, Skip: req.Remade, DependsOn: dependencies(), Converged: map[string]string{},
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
	_, _, err := env.forward(ctx, rr, affected, plans)
	if errors.Is(err, teardown.ErrDegraded) {
		e.log.Warn("rollback: the objects done again do not all verify", "err", err)
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
