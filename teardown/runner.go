package teardown

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
)

var (
	// ErrStopped is returned by Do when Runner.StopAfter steps have been
	// applied: the run stops as if killed between steps, without rollback.
	ErrStopped = errors.New("stopped by StopAfter (simulated kill between steps)")
	// ErrInjected is the failure Runner.FailAt injects after a real Apply.
	ErrInjected = errors.New("injected failure (FailAt)")
	// ErrRolledBack marks an error after which Do already rolled back this
	// run (successfully or not): the caller must not roll back again.
	ErrRolledBack = errors.New("rolled back")
	// ErrDegraded marks the failure of a Degrade barrier: every change
	// stayed (no rollback), the host is degraded.
	ErrDegraded = errors.New("degraded")
)

// Runner applies steps through the journal, rolls back on failure and
// undoes the journal on down. Set its fields before the first call; do not
// copy it after. One Runner is one run.
type Runner struct {
	Journal *Journal
	Undo    Undoers
	// DryRun plans: Check only, nothing journaled, nothing applied (and for
	// Rollback and Down: nothing undone, the undo events are reported).
	DryRun bool
	// NoRollback: on failure leave this run's changes (the journal keeps
	// them for a resumed up or a down).
	NoRollback bool
	// StopAfter (test/e2e hook): if > 0, once that many steps have been
	// applied in this run, Do returns ErrStopped without rollback; steps of
	// the same Do call beyond the count stay journaled as pending but are
	// not applied (a kill between journaling and applying).
	StopAfter int
	// FailAt (test hook): Apply of the step with this ID returns ErrInjected
	// after the real Apply (the change happened, the step "failed").
	FailAt string
	Log    *slog.Logger
	// OnEvent reports progress; may be nil. Calls are serialized.
	OnEvent func(Event)
	// Converged are steps (id -> summary) a plan pass just found converged
	// on this host: Do skips them without checking again (the host cannot
	// have changed under one lock) until this run writes something they
	// depend on. With DependsOn nil that is any write; with it, a write of
	// the step's own kind or of a kind it depends on, directly or through
	// others (a VLAN change, an OVS transaction, leaves the libvirt and
	// devlink steps after it unread).
	Converged map[string]string
	// DependsOn maps a kind to the kinds whose change forces it to be
	// checked again (DESIGN.md section 2a).
	DependsOn map[string][]string
	// Planned are the changes (id -> Change, its Record included) a plan
	// pass just found needed for Replannable steps (that runner's
	// NeededChanges): Do applies such a change without checking again, as
	// long as this run wrote nothing the step depends on (the rule of
	// Converged). A VLAN change's bridge step so reads OVSDB once in the
	// plan pass instead of again in the forward pass.
	Planned map[string]Change
	// Moot, when set, tells of an entry about to be undone whether the
	// undo of a later one (among later: the entries this call undoes after
	// it) takes its change away: a PF's representors, set up, vanish when
	// the PF returns to legacy. It returns that entry's ID and what its
	// undo does to e (the report's summary), or "". The moot entry is not
	// undone on its own: it leaves the journal in the same write as that
	// entry, or is undone on its own after all if that entry's undo fails.
	Moot func(e Entry, later []Entry) (by, said string)
	// Shared, when set, names what an entry's undo shares with other
	// groups' entries ("" for nothing): the Open_vSwitch row's
	// other_config, one domain's XML. When the groups' entries are undone
	// side by side (undoAll), the undos of the entries that share one thing
	// run one at a time, in reverse journal order; entries that share
	// different things (two domains, a domain and the OVS row) do not wait
	// for each other.
	Shared func(Entry) string
	// Together, when set, tells the entries whose undos the groups start
	// together when their entries are undone side by side (undoAll): in
	// each lane that has such entries, the batch holding the first one met
	// waits until every such lane reached its own or stopped. For the slow
	// hardware steps (an eswitch's return to legacy): the lane that gets
	// there first would otherwise run its step's kernel work (a hundred
	// representors unregistered under RTNL) while the others still run
	// their short netlink steps, and slow them down; started together,
	// each lane's steps before run undisturbed. (The run's end is set by
	// the last lane to get there, as without.)
	Together func(Entry) bool
	// Abort, when set, bounds the rollback after a failure (a second
	// Ctrl-C): once it is done the rollback stops after its current undo
	// batch and the rest stays in the journal for up or down. Unset, the
	// rollback runs to its end whatever the run's context says.
	Abort context.Context
	// Prior are what a plan pass (DryRun) found before this run wrote
	// anything, for each change it found needed (that runner's
	// Captured): when this run changes an object whose entry the journal
	// holds already, its entry keeps that capture (Open.Capture), and a
	// rollback undoes the change from it rather than from the entry's
	// first capture. Without one (no plan pass, or a step the plan could
	// not read), the forward Check's record serves while this run has
	// written nothing the step depends on; after that, Redo puts the
	// object back.
	Prior map[string]Capture
	// Redo, when set, does again what a rollback could not put back by
	// undoing (RedoRequest), after the undos. Unset, those objects stay as
	// the run left them and the rollback says so.
	Redo func(ctx context.Context, req RedoRequest) error
	// NoOpen: this runner's changes open nothing (Entry.Open): no rollback
	// will take them. A rollback's redo (Redo: what it does belongs to the
	// state before the run rolled back), the qemu hook (its release undoes
	// its journal). The entries it applies again keep their Open.
	NoOpen bool
	// Skip are steps Do leaves as they are without checking them (a
	// rollback's redo: the objects the rollback put back from captures).
	Skip map[string]bool
	// Only, when set, are the steps Do checks and applies: it leaves every
	// other step as it is without checking it and passes every other
	// barrier (a rollback's redo of some of a group's objects, from
	// another config than the group's other steps).
	Only map[string]bool

	mu       sync.Mutex         // guards run, applies, results, held
	held     int                // Lanes running: a failure waits for the other lanes (no rollback yet)
	heldFail bool               // a failure was held meanwhile: Lanes rolls back
	run      string             // this run's id, stored in the entries it journals
	applies  int                // Apply calls started in this run (StopAfter)
	batches  int                // Do calls that journaled something (Entry.Batch)
	wrote    bool               // this run applied or undid something
	written  map[string]bool    // the kinds this run applied or undid (changes that were not Contained)
	needed   map[string]Change  // DryRun: Replannable steps' needed changes (NeededChanges)
	prior    map[string]Capture // DryRun: every needed change's capture (Captured)
	// redoLater: entries this rollback undid and removed whose change
	// destroyed more than its own object (RollbackUndoRedo): Redo gets them.
	redoLater []Entry
	results   []Event
	evMu      sync.Mutex // serializes OnEvent
}

// silent wraps an error so that errors.Is finds it while it adds no text.
type silent struct{ err error }

func (s silent) Error() string { return "" }
func (s silent) Unwrap() error { return s.err }

// Note records an event for something the caller reports without a step,
// e.g. a plan line for a step that cannot be checked before earlier steps ran.
func (r *Runner) Note(ev Event) { r.emit(ev) }

// NeededChanges are the needed changes this runner's checks found for
// Replannable steps (id -> Change): what a forward pass takes as Planned.
func (r *Runner) NeededChanges() map[string]Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Change, len(r.needed))
	for id, ch := range r.needed {
		out[id] = ch
	}
	return out
}

// Capture is what a plan pass's Check found before a needed change: its
// record (Change.Record) and how a rollback puts it back.
type Capture struct {
	Record   json.RawMessage
	Rollback Rollback
}

// Captured are the captures this (DryRun) runner's checks took of the
// needed changes that have a record (id -> capture): what a forward pass
// takes as Prior.
func (r *Runner) Captured() map[string]Capture {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.prior)
}

// Results returns what this run did (or, with DryRun, would do), in order.
func (r *Runner) Results() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.results...)
}

func (r *Runner) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (r *Runner) emit(ev Event) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.mu.Lock()
	r.results = append(r.results, ev)
	r.mu.Unlock()
	if r.OnEvent != nil {
		r.OnEvent(ev)
	}
}

// runID returns this run's id, making it on first use.
func (r *Runner) runID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.run == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		r.run = fmt.Sprintf("%s-%d-%s", time.Now().UTC().Format("20060102T150405Z"), os.Getpid(), hex.EncodeToString(b[:]))
	}
	return r.run
}

// nextBatch numbers a Do call's journal write.
func (r *Runner) nextBatch() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches++
	return r.batches
}

// currentRun returns this run's id, "" before the first Do.
func (r *Runner) currentRun() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.run
}

// Wrote tells whether this run applied or undid anything yet.
func (r *Runner) Wrote() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrote
}

// WroteOnly tells whether this run applied or undid something, all of it
// of the kinds named.
func (r *Runner) WroteOnly(kinds ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.wrote {
		return false
	}
	for k := range r.written {
		if !slices.Contains(kinds, k) {
			return false
		}
	}
	return true
}

// WroteContainedOnly tells whether this run applied something, all of it
// Contained changes.
func (r *Runner) WroteContainedOnly() bool { return r.WroteOnly() }

// markWrote notes a write of kind; a contained one makes nothing stale.
func (r *Runner) markWrote(kind string, contained bool) {
	r.mu.Lock()
	r.wrote = true
	if r.written == nil {
		r.written = map[string]bool{}
	}
	if !contained {
		r.written[kind] = true
	}
	r.mu.Unlock()
}

// stale tells whether a step of kind a plan pass found converged must be
// checked again: this run wrote that kind, or one it depends on (closed
// over DependsOn), or anything at all when DependsOn is nil.
func (r *Runner) stale(kind string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.wrote {
		return false
	}
	if r.DependsOn == nil {
		return true
	}
	seen := map[string]bool{}
	todo := []string{kind}
	for len(todo) > 0 {
		k := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[k] {
			continue
		}
		seen[k] = true
		if r.written[k] {
			return true
		}
		todo = append(todo, r.DependsOn[k]...)
	}
	return false
}

// takeApplySlot reserves one Apply under StopAfter; false means the run is
// stopped.
func (r *Runner) takeApplySlot() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.StopAfter > 0 && r.applies >= r.StopAfter {
		return false
	}
	r.applies++
	return true
}

func (r *Runner) stopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.StopAfter > 0 && r.applies >= r.StopAfter
}

// checked is one step's Check outcome in a Do call.
type checked struct {
	change Change
	record json.RawMessage
	dur    time.Duration
	err    error
	// pre: the Check ran before this run wrote anything the step depends
	// on (Runner.stale), so its record is a capture of the state before
	// the run.
	pre bool
}

// Do checks the steps and applies those the host needs. The steps of one
// call are independent: they are checked and applied concurrently, and their
// pending entries are journaled in one write before any of them applies. On
// a failure Do waits for the other steps of the call and, unless NoRollback,
// rolls back this run's entries in reverse. See the package documentation.
func (r *Runner) Do(ctx context.Context, steps ...Step) error {
	if len(steps) == 0 {
		return nil
	}
	if err := validateSteps(steps); err != nil {
		return err
	}
	if steps[0].Wait != nil {
		return r.barrier(ctx, steps[0])
	}
	if r.Journal == nil && !r.DryRun {
		return errors.New("run steps: runner has no journal")
	}
	run := r.runID()
	if r.stopped() {
		return fmt.Errorf("before %s: %w", steps[0].ID, ErrStopped)
	}
	if err := ctx.Err(); err != nil {
		return r.fail(ctx, fmt.Errorf("interrupted before %s: %w", steps[0].ID, err))
	}
	outs := r.checkSteps(ctx, steps)
	checkErrs := r.reportChecks(steps, outs)
	if r.DryRun {
		return errors.Join(checkErrs...)
	}
	if len(checkErrs) > 0 {
		return r.fail(ctx, errors.Join(checkErrs...))
	}
	if err := r.journalPending(steps, outs, run); err != nil {
		return r.fail(ctx, fmt.Errorf("journal %s before applying %s: %w", r.Journal.Path(), steps[0].ID, err))
	}
	for i, s := range steps {
		if o := outs[i]; !o.change.Needed {
			r.log().Debug("skip", "step", s.Kind, "id", s.ID, "summary", o.change.Summary)
			r.emit(Event{Kind: s.Kind, ID: s.ID, Group: s.Group, Summary: o.change.Summary, Phase: PhaseSkip, Duration: o.dur})
		}
	}
	if err := r.applySteps(ctx, steps, outs); err != nil {
		return r.fail(ctx, err)
	}
	if r.stopped() {
		r.log().Warn("stopped (StopAfter)", "applied", r.StopAfter, "journal", r.Journal.Path())
		return fmt.Errorf("after %d applied step(s): %w; journal %s kept for a resumed up or down", r.StopAfter, ErrStopped, r.Journal.Path())
	}
	return nil
}

// checkSteps runs the steps' Checks concurrently (a step a plan pass just
// found converged is not checked again until this run writes what it
// depends on: stale) and, for a
// needed change, refuses a kind without undoer and encodes its record.
func (r *Runner) checkSteps(ctx context.Context, steps []Step) []checked {
	log := r.log()
	outs := make([]checked, len(steps))
	parallel(len(steps), func(i int) {
		s := steps[i]
		if r.Skip[s.ID] || r.Only != nil && !r.Only[s.ID] {
			outs[i] = checked{change: Change{Summary: s.ID + ": left as the rollback put it back"}}
			return
		}
		if sum, ok := r.Converged[s.ID]; ok && !r.DryRun && !r.stale(s.Kind) {
			outs[i] = checked{change: Change{Summary: sum}}
			return
		}
		var ch Change
		var err error
		pre := !r.stale(s.Kind)
		start := time.Now()
		if pch, ok := r.Planned[s.ID]; ok && s.Replannable && !r.DryRun && !r.stale(s.Kind) {
			ch = pch
		} else {
			ch, err = safeCall(log, s, "check", func() (Change, error) { return s.Check(ctx) })
		}
		outs[i] = checked{change: ch, dur: time.Since(start), pre: pre}
		if err != nil {
			outs[i].err = fmt.Errorf("step %s: check: %w", s.ID, err)
			return
		}
		if !ch.Needed {
			return
		}
		if r.DryRun && s.Replannable {
			r.mu.Lock()
			if r.needed == nil {
				r.needed = map[string]Change{}
			}
			r.needed[s.ID] = ch
			r.mu.Unlock()
		}
		if !r.DryRun {
			if _, ok := r.Undo[s.Kind]; !ok {
				outs[i].err = fmt.Errorf("step %s: no undoer for kind %q: refusing a change that down could not undo", s.ID, s.Kind)
				return
			}
		}
		rec, err := json.Marshal(ch.Record)
		if err != nil {
			outs[i].err = fmt.Errorf("step %s: check: record: %w", s.ID, err)
			return
		}
		outs[i].record = rec
		if r.DryRun && ch.Record != nil {
			r.mu.Lock()
			if r.prior == nil {
				r.prior = map[string]Capture{}
			}
			r.prior[s.ID] = Capture{Record: rec, Rollback: ch.Rollback}
			r.mu.Unlock()
		}
	})
	return outs
}

// reportChecks emits, in step order, each failed check and (DryRun) each
// plan line, and returns the check errors.
func (r *Runner) reportChecks(steps []Step, outs []checked) []error {
	log := r.log()
	var checkErrs []error
	for i, s := range steps {
		o := outs[i]
		switch {
		case o.err != nil:
			checkErrs = append(checkErrs, o.err)
			log.Error("check failed", "step", s.Kind, "id", s.ID, "err", o.err)
			r.emit(Event{Kind: s.Kind, ID: s.ID, Group: s.Group, Summary: o.change.Summary, DryRun: r.DryRun, Phase: PhaseApply, Duration: o.dur, Err: o.err})
		case r.DryRun:
			phase := PhaseSkip
			if o.change.Needed {
				phase = PhaseApply
			}
			log.Info("plan", "step", s.Kind, "id", s.ID, "needed", o.change.Needed, "summary", o.change.Summary)
			r.emit(Event{Kind: s.Kind, ID: s.ID, Group: s.Group, Summary: o.change.Summary, Changed: o.change.Needed, DryRun: true, Phase: phase, Duration: o.dur, Disruptive: o.change.Needed && o.change.Disruptive})
		}
	}
	return checkErrs
}

// journalPending writes, in one journal write if any, a pending entry for
// each step to apply and marks applied a pending entry whose change is
// already there.
func (r *Runner) journalPending(steps []Step, outs []checked, run string) error {
	now := time.Now().UTC()
	batch := r.nextBatch()
	return r.Journal.update(func(es []Entry) ([]Entry, bool, error) {
		changed := false
		for i, s := range steps {
			o := outs[i]
			at := indexOf(es, s.ID)
			if !o.change.Needed {
				// A previous run was killed after (or during) an Apply that
				// completed: the change is there, the original record stays.
				if at >= 0 && es[at].State == StatePending {
					es[at].State = StateApplied
					es[at].Time = now
					changed = true
				}
				continue
			}
			if at < 0 {
				e := Entry{Kind: s.Kind, ID: s.ID, Group: s.Group, Summary: o.change.Summary, Revert: o.change.Revert, Record: o.record, State: StatePending, Run: run, Batch: batch, Time: now}
				if !r.NoOpen {
					e.Open = &Open{Run: run, Redo: o.change.Rollback == RollbackUndoRedo}
				}
				es = append(es, e)
				changed = true
				continue
			}
			r.open(&es[at], s, o, run)
			if err := repend(&es[at], s, o, run, batch, now); err != nil {
				return nil, false, err
			}
			changed = true
		}
		return es, changed, nil
	})
}

// open marks an entry that this run is about to change again: the first
// run that has not ended keeps, with the entry as it was, what it found
// before its change (the plan pass's capture, else this Check's record
// while this run had written nothing the step depends on) and whether a
// rollback must do the object again (Open). An entry that run removed is
// back.
func (r *Runner) open(e *Entry, s Step, o checked, run string) {
	if e.Open != nil {
		// Changed again: what a rollback had put back from the capture is
		// changed again; what it had removed is back (a redo's too).
		e.Open.Removed, e.Open.Undone = false, false
		return
	}
	if r.NoOpen {
		return
	}
	before := cloneEntry(*e)
	op := &Open{Run: run, Before: &before, Revert: o.change.Revert}
	c, ok := r.Prior[s.ID]
	if !ok && o.pre {
		c, ok = Capture{Record: o.record, Rollback: o.change.Rollback}, true
	}
	switch {
	case !ok || c.Rollback == RollbackRedo:
		op.Redo = true
	case c.Rollback == RollbackUndoRedo:
		op.Capture, op.Redo = c.Record, true
	default:
		op.Capture = c.Record
	}
	e.Open = op
}

// repend makes an existing journal entry pending again for this run (a
// resume or a drift), keeping the first capture of the prior state merged
// with the prior of what the step covers anew.
func repend(e *Entry, s Step, o checked, run string, batch int, now time.Time) error {
	if e.Kind != s.Kind {
		return fmt.Errorf("step %s: journal entry has kind %q, step has kind %q", s.ID, e.Kind, s.Kind)
	}
	if o.change.Merge != nil {
		v, err := o.change.Merge(e.Record)
		if err != nil {
			return fmt.Errorf("step %s: merge its journal record: %w", s.ID, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("step %s: merge its journal record: %w", s.ID, err)
		}
		e.Record = b
	}
	e.State = StatePending
	if s.Group != "" {
		e.Group = s.Group
	}
	e.Run = run
	e.Batch = batch
	e.Time = now
	return nil
}

// applySteps applies the needed steps concurrently (within StopAfter),
// marking each applied in the journal, and returns their errors joined.
func (r *Runner) applySteps(ctx context.Context, steps []Step, outs []checked) error {
	log := r.log()
	applyErrs := make([]error, len(steps))
	parallel(len(steps), func(i int) {
		s, o := steps[i], outs[i]
		if !o.change.Needed || !r.takeApplySlot() {
			return
		}
		r.markWrote(s.Kind, o.change.Contained)
		attrs := []any{"step", s.Kind, "id", s.ID, "summary", o.change.Summary}
		if o.change.Contained {
			attrs = append(attrs, "contained", true) // later steps keep their plan-pass checks
		}
		log.Info("apply", attrs...)
		start := time.Now()
		actx, done := r.stepContext(ctx)
		_, err := safeCall(log, s, "apply", func() (struct{}, error) { return struct{}{}, s.Apply(actx) })
		done()
		if err == nil && r.FailAt != "" && r.FailAt == s.ID {
			err = ErrInjected
		}
		dur := time.Since(start)
		if err != nil {
			err = fmt.Errorf("step %s: apply: %w", s.ID, err)
		} else {
			r.Journal.markApplied(s.ID) // a failed write: the run's Flush says it
		}
		applyErrs[i] = err
		if err != nil {
			log.Error("apply failed", "step", s.Kind, "id", s.ID, "duration", dur, "err", err)
		} else {
			log.Info("applied", "step", s.Kind, "id", s.ID, "duration", dur)
		}
		r.emit(Event{Kind: s.Kind, ID: s.ID, Group: s.Group, Summary: o.change.Summary, Changed: true, Phase: PhaseApply, Duration: dur, Err: err, Disruptive: o.change.Disruptive})
	})
	return errors.Join(applyErrs...)
}

// stepContext is the context a step's Apply runs in. With Abort set (an
// interrupt handler: the run's context ends at the first interrupt) the
// step in progress is finished, as the first interrupt promises: its
// context carries ctx's values but ends only with Abort (the second
// interrupt). Without Abort it is ctx.
func (r *Runner) stepContext(ctx context.Context) (context.Context, func()) {
	if r.Abort == nil {
		return ctx, func() {}
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(r.Abort, cancel)
	return actx, func() { stop(); cancel() }
}

// barrier runs a Wait step: nothing is journaled; a failure fails the run
// (rollback of this run unless NoRollback). A plan skips it, and so does
// a runner whose Only leaves it out.
func (r *Runner) barrier(ctx context.Context, s Step) error {
	if r.DryRun || r.Only != nil && !r.Only[s.ID] {
		return nil
	}
	if r.stopped() {
		return fmt.Errorf("before %s: %w", s.ID, ErrStopped)
	}
	log := r.log()
	start := time.Now()
	summary, err := safeCall(log, s, "wait", func() (string, error) { return s.Wait(ctx) })
	dur := time.Since(start)
	if err != nil {
		err = fmt.Errorf("%s: %w", s.ID, err)
		log.Error("barrier failed", "step", s.Kind, "id", s.ID, "duration", dur, "err", err)
	} else {
		log.Info("barrier passed", "step", s.Kind, "id", s.ID, "duration", dur, "summary", summary)
	}
	r.emit(Event{Kind: s.Kind, ID: s.ID, Group: s.Group, Summary: summary, Phase: PhaseWait, Duration: dur, Err: err})
	if err != nil && s.Degrade && ctx.Err() == nil {
		return fmt.Errorf("%w%w", err, silent{ErrDegraded})
	}
	// A Degrade barrier cut short by the run's cancellation (an interrupt)
	// says nothing of the host: the run is rolled back like any other
	// interrupted one.
	if err != nil {
		return r.fail(ctx, err)
	}
	return nil
}

// Prune undoes the given journal entries (what the caller made earlier
// and no longer wants), in reverse journal order, removing each undone
// entry, best-effort as Down. With DryRun it reports the undo events only.
//
// Each entry stays in the journal, marked removed by this run, until the
// run ends (Journal.Settle): a rollback of the run does its object again
// (Open.Removed). A prune's failure is the caller's to roll back (Fail).
// FailAt fails a prune's undo of that id after the real undo.
func (r *Runner) Prune(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	if r.Journal == nil {
		return errors.New("prune: runner has no journal")
	}
	if !r.DryRun {
		ids := make([]string, len(entries))
		for i, e := range entries {
			ids[i] = e.ID
		}
		if err := r.Journal.markRemoved(r.runID(), ids); err != nil {
			return fmt.Errorf("journal %s before removing %s: %w", r.Journal.Path(), ids[0], err)
		}
	}
	_, err := r.undoAll(ctx, entries, undoPrune)
	return err
}

// Replace puts e in place of the journal's entry with this id, for this
// run (a prune that keeps part of what the entry records: the prior
// hw-offload of a bridge the config renamed): a rollback of the run puts
// the entry back and does its object again.
func (r *Runner) Replace(id string, e Entry) error {
	if r.Journal == nil {
		return errors.New("replace: runner has no journal")
	}
	return r.Journal.replaceOpen(r.runID(), id, e)
}

// Fail rolls the run back (unless NoRollback) after a failure of the
// caller's own between Do calls (a prune), as Do does after a step's:
// the error says what became of the run's changes.
func (r *Runner) Fail(ctx context.Context, cause error) error {
	if errors.Is(cause, ErrRolledBack) || errors.Is(cause, ErrStopped) {
		return cause
	}
	var k *keptError
	if errors.As(cause, &k) {
		return cause
	}
	return r.fail(ctx, cause)
}

// fail rolls back this run (unless NoRollback) and returns cause with what
// became of the run's changes. The rollback is not cut short by ctx's
// cancellation: an interrupted up still puts the host back.
func (r *Runner) fail(ctx context.Context, cause error) error {
	if r.Journal == nil || r.holding() {
		return cause // Lanes rolls back once every lane stopped
	}
	if r.NoRollback {
		r.log().Warn("failed; no rollback", "journal", r.Journal.Path(), "err", cause)
		return &keptError{cause: cause, journal: r.Journal.Path()}
	}
	r.log().Warn("failed; rolling back this run", "err", cause)
	rctx := context.WithoutCancel(ctx)
	if r.Abort != nil {
		rctx = r.Abort
	}
	rb, err := r.rollback(rctx)
	if err != nil && r.Abort != nil && r.Abort.Err() != nil {
		return fmt.Errorf("%w; rollback stopped by a second interrupt after %d undo(s): the rest stays in journal %s (a later up's rollback finishes it, vflag up resumes, vflag down cleans up): %w%w", cause, rb.undone, r.Journal.Path(), err, silent{ErrRolledBack})
	}
	if err != nil {
		return fmt.Errorf("%w; rollback failed (what it could not put back stays in journal %s: a later up's rollback tries again, down undoes it): %w%w", cause, r.Journal.Path(), err, silent{ErrRolledBack})
	}
	return fmt.Errorf("%w; rolled back %s%w", cause, rb, silent{ErrRolledBack})
}

// rolled is what a rollback did.
type rolled struct {
	undone  int // undos
	redone  int // objects done again (Redo)
	earlier int // of the changes, those of earlier runs that had not ended
}

func (rb rolled) String() string {
	s := fmt.Sprintf("%d change(s) of this run", rb.undone+rb.redone)
	if rb.earlier > 0 {
		s += fmt.Sprintf(" and of earlier runs that had not ended (%d)", rb.earlier)
	}
	if rb.redone > 0 {
		s += fmt.Sprintf(": %d undone, %d done again as the last completed run left them", rb.undone, rb.redone)
	}
	return s + "; the host is as before the run"
}

// Rollback puts the host back as it was before this run: see rollback.
func (r *Runner) Rollback(ctx context.Context) error {
	if r.Journal == nil {
		return errors.New("rollback: runner has no journal")
	}
	_, err := r.rollback(ctx)
	return err
}

// RedoRequest is what a rollback could not put back by undoing, for
// Runner.Redo: the objects of Entries are done again as the last run that
// ended left them (each entry as the run left it; Open.Before is the entry
// before the run, which the journal gets back once the redo succeeds).
// Those in Remade were put back from their captures already, but their
// undo made other objects again (RollbackUndoRedo: a numvfs undo makes
// every VF again), which the redo does again; their entries are there to
// say so, and the redo leaves their own objects as they are.
//
// A redo goes the way up goes (a bond re-formed only with its VFs unbound,
// bound again after the LAG): it may change again what the rollback put
// back from a capture, and leaves it as the last run that ended did (a
// drift that the failed run had repaired stays repaired there).
type RedoRequest struct {
	Entries []Entry
	Remade  map[string]bool
}

// IDs are the ids of the request's entries as they were before the run
// (an entry the run replaced had another: Runner.Replace): the ids of the
// steps that do their objects.
func (q RedoRequest) IDs() []string {
	out := make([]string, len(q.Entries))
	for i, e := range q.Entries {
		out[i] = e.ID
		if e.Open != nil && e.Open.Before != nil {
			out[i] = e.Open.Before.ID
		}
	}
	return out
}

// ids are the ids of the request's entries as the journal has them now.
func (q RedoRequest) ids() []string {
	out := make([]string, len(q.Entries))
	for i, e := range q.Entries {
		out[i] = e.ID
	}
	return out
}

// rollback puts the host back as it was before this run, or before the
// first earlier run that has not ended (Open): every open entry, in
// reverse journal order, best-effort.
//
//  1. Undo: an entry the run created is undone from its record and leaves
//     the journal; one it changed again and kept a capture of is undone
//     from that capture and becomes the entry it was before the run.
//  2. Redo: the objects an undo cannot put back (no capture, an undo that
//     would remove the object, one the run removed, what a numvfs change
//     destroyed) are done again by Redo, and their entries become what
//     they were before the run.
//
// An entry whose undo fails, or whose object Redo does not do again, stays
// open: a later rollback tries again, down undoes it from its record.
// rollback returns once journal.json holds what is left.
func (r *Runner) rollback(ctx context.Context) (rolled, error) {
	rb, err := r.putBack(ctx)
	if ferr := r.Journal.Flush(); ferr != nil {
		err = errors.Join(err, fmt.Errorf("rollback: %w", ferr))
	}
	return rb, err
}

// putBack is rollback's undo and redo, the journal written behind.
func (r *Runner) putBack(ctx context.Context) (rolled, error) {
	var rb rolled
	run := r.currentRun()
	var undo []Entry
	for _, e := range r.Journal.all() {
		o := e.Open
		if o == nil || o.Removed || o.Undone {
			continue
		}
		if o.Run != run {
			rb.earlier++
		}
		switch {
		case o.Before == nil:
			undo = append(undo, e)
		case o.Capture != nil:
			u := cloneEntry(e)
			u.Record = o.Capture
			undo = append(undo, u)
		}
	}
	n, err := r.undoAll(ctx, undo, undoRollback)
	rb.undone = n
	if err != nil {
		return rb, err
	}
	req := RedoRequest{Remade: map[string]bool{}}
	var drop []string
	for _, e := range r.Journal.all() {
		o := e.Open
		switch {
		case o == nil:
		case o.Before == nil && o.Removed:
			drop = append(drop, e.ID) // made and removed by runs that did not end: gone as before
		case o.Before != nil && (o.Removed || o.Undone || o.Capture == nil):
			if o.Undone {
				req.Remade[e.ID] = true
			}
			req.Entries = append(req.Entries, e)
		}
	}
	r.mu.Lock()
	for _, e := range r.redoLater {
		req.Remade[e.ID] = true
		req.Entries = append(req.Entries, e)
	}
	r.redoLater = nil
	r.mu.Unlock()
	r.Journal.remove(drop...)
	if len(req.Entries) == 0 {
		return rb, nil
	}
	if r.Redo == nil {
		return rb, fmt.Errorf("not put back (an undo would remove them, and nothing here does them again): %s", strings.Join(req.IDs(), ", "))
	}
	if err := r.Redo(ctx, req); err != nil {
		return rb, fmt.Errorf("do again what the undos could not put back (%s): %w", strings.Join(req.IDs(), ", "), err)
	}
	r.Journal.endOpen(req.ids())
	rb.redone = len(req.Entries) - len(req.Remade)
	return rb, nil
}

// Down undoes every journal entry in reverse order, best-effort: a failed
// undo (or an entry whose kind has no Undoer) keeps its entry for a later
// Down, and the others continue. The undone entries of a group (one Do
// call's) leave the journal in one write as soon as the group is done,
// written behind the next group's undo; Down returns once journal.json
// holds what is left. An empty or missing journal is success.
func (r *Runner) Down(ctx context.Context) error {
	if r.Journal == nil {
		return errors.New("down: runner has no journal")
	}
	_, err := r.undoAll(ctx, r.Journal.all(), undoDown)
	if ferr := r.Journal.Flush(); ferr != nil {
		err = errors.Join(err, fmt.Errorf("down: undone, but %w", ferr))
	}
	return err
}

// undoAll undoes entries in reverse order and returns how many were undone
// and the joined failures. Adjacent entries journaled by one Do call (same
// run and batch) were applied concurrently as independent steps, so they are
// undone concurrently too: both PFs return to legacy in one mode-change time,
// not two. Batches still run strictly in reverse order. A group's undone
// entries leave the journal in one write once the group is done.
//
// An entry that Moot names moot (a later undo in this call takes its change
// away) is not undone on its own: it leaves the journal with the entry that
// undoes it, or, if that undo fails, is undone on its own right after.
func (r *Runner) undoAll(ctx context.Context, entries []Entry, mode undoMode) (int, error) {
	lanes := splitLanes(entries)
	if len(lanes) < 2 {
		return r.undoLine(ctx, entries, mode, nil)
	}
	return r.undoLanes(ctx, entries, lanes, mode)
}

// undoLine is undoAll for one line of entries; sync, when set, orders
// the undos of the entries that share something (Shared) against the
// other lines', and starts the Together entries' undos with theirs.
func (r *Runner) undoLine(ctx context.Context, entries []Entry, mode undoMode, sync *lineSync) (int, error) {
	defer sync.end(entries)
	var errs []error
	done := 0
	// deferred: moot entries by the id of the entry whose undo takes them.
	deferred := map[string][]mootEntry{}
	for hi := len(entries) - 1; hi >= 0; {
		lo := hi
		for lo > 0 && sameBatch(entries[lo-1], entries[hi]) {
			lo--
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("undo stopped before %s, %d entr(ies) left in journal %s: %w", entries[hi].ID, hi+1, r.Journal.Path(), err))
			break
		}
		var group []Entry
		for _, e := range entries[lo : hi+1] {
			if r.Moot != nil {
				if by, said := r.Moot(e, entries[:lo]); by != "" {
					deferred[by] = append(deferred[by], mootEntry{e, said})
					continue
				}
			}
			group = append(group, e)
		}
		if err := sync.wait(ctx, entries[lo:hi+1]); err != nil {
			errs = append(errs, fmt.Errorf("undo stopped before %s, %d entr(ies) left in journal %s: %w", entries[hi].ID, hi+1, r.Journal.Path(), err))
			break
		}
		n, gerrs := r.undoGroup(ctx, group, deferred, mode)
		sync.release(entries[lo : hi+1])
		done += n
		errs = append(errs, gerrs...)
		hi = lo - 1
	}
	return done, errors.Join(errs...)
}

// undoMode is what an undo is part of, which decides what becomes of the
// undone entries.
type undoMode int

const (
	undoDown     undoMode = iota // they leave the journal
	undoPrune                    // they stay, marked removed (Prune)
	undoRollback                 // they go back to what they were before the run (Journal.rolledBack)
)

// mootEntry is an entry whose undo another entry's undo makes moot, with
// what that undo does to it (the report's summary).
type mootEntry struct {
	Entry
	said string
}

// undoConcurrently calls the undoers of a group's entries concurrently
// (none with DryRun) and returns each entry's event (its Duration set) and
// error.
func (r *Runner) undoConcurrently(ctx context.Context, group []Entry, mode undoMode) ([]Event, []error) {
	log := r.log()
	outs := make([]error, len(group))
	evs := make([]Event, len(group))
	parallel(len(group), func(k int) {
		// Reverse order inside the group too, for a sequential (single) group's log.
		i := len(group) - 1 - k
		e := group[i]
		summary := revertSummary(e)
		if mode == undoRollback && e.Open != nil && e.Open.Revert != "" {
			summary = e.Open.Revert // this run's change undone, not the entry's first
		}
		ev := Event{Kind: e.Kind, ID: e.ID, Group: e.Group, Summary: summary, Changed: true, DryRun: r.DryRun, Phase: PhaseUndo}
		defer func() { evs[i] = ev }()
		if r.DryRun {
			log.Info("plan undo", "step", e.Kind, "id", e.ID, "state", e.State)
			return
		}
		r.markWrote(e.Kind, false)
		undo, found := r.Undo[e.Kind]
		if !found {
			ev.Changed = false
			outs[i] = fmt.Errorf("undo %s: no undoer for kind %q (entry kept in journal %s)", e.ID, e.Kind, r.Journal.Path())
			return
		}
		start := time.Now()
		log.Debug("undo", "step", e.Kind, "id", e.ID)
		said, err := safeCall(log, Step{Kind: e.Kind, ID: e.ID}, "undo", func() (string, error) { return undo(ctx, e.Record) })
		if err == nil && mode == undoPrune && r.FailAt != "" && r.FailAt == e.ID {
			err = ErrInjected
		}
		ev.Duration = time.Since(start)
		if said != "" {
			ev.Summary = said
		}
		if err != nil {
			outs[i] = fmt.Errorf("undo %s: %w", e.ID, err)
		}
	})
	return evs, outs
}

// undoGroup undoes the entries of one group concurrently, then removes the
// undone ones (and the moot entries their undo took) from the journal in one
// write; a moot entry whose taker failed is undone on its own after.
func (r *Runner) undoGroup(ctx context.Context, group []Entry, deferred map[string][]mootEntry, mode undoMode) (int, []error) {
	if len(group) == 0 {
		return 0, nil
	}
	log := r.log()
	evs, outs := r.undoConcurrently(ctx, group, mode)
	if r.DryRun {
		for i := len(group) - 1; i >= 0; i-- {
			r.emit(evs[i])
			for _, m := range deferred[group[i].ID] {
				r.emit(Event{Kind: m.Kind, ID: m.ID, Group: m.Group, Summary: m.said, Changed: true, DryRun: true, Phase: PhaseUndo})
			}
		}
		return 0, nil
	}
	// One journal write for the group: its undone entries and the moot
	// entries they took.
	var ids []string
	var retry []mootEntry
	for i, e := range group {
		if outs[i] != nil {
			retry = append(retry, deferred[e.ID]...)
			continue
		}
		ids = append(ids, e.ID)
		for _, m := range deferred[e.ID] {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) > 0 {
		switch mode {
		case undoDown:
			r.Journal.remove(ids...) // a failed write: Down's Flush says it
		case undoRollback:
			later := r.Journal.rolledBack(ids)
			r.mu.Lock()
			r.redoLater = append(r.redoLater, later...)
			r.mu.Unlock()
		}
	}
	var errs []error
	done := 0
	for i := len(group) - 1; i >= 0; i-- {
		e, ev := group[i], evs[i]
		err := outs[i]
		if err != nil {
			log.Error("undo failed", "step", e.Kind, "id", e.ID, "state", e.State, "err", err)
			ev.Err = err
			errs = append(errs, err)
		} else {
			log.Info("undone", "step", e.Kind, "id", e.ID, "state", e.State, "duration", ev.Duration)
			done++
		}
		r.emit(ev)
		if outs[i] != nil {
			continue
		}
		for _, m := range deferred[e.ID] {
			log.Info("undone", "step", m.Kind, "id", m.ID, "state", m.State, "with", e.ID)
			done++
			ev := Event{Kind: m.Kind, ID: m.ID, Group: m.Group, Summary: m.said, Changed: true, Phase: PhaseUndo}
			if mode == undoPrune && r.FailAt != "" && r.FailAt == m.ID {
				ev.Err = fmt.Errorf("undo %s: %w", m.ID, ErrInjected)
				errs = append(errs, ev.Err)
			}
			r.emit(ev)
		}
	}
	// The taker failed: the moot entries' changes are still there.
	for _, m := range retry {
		n, merrs := r.undoGroup(ctx, []Entry{m.Entry}, nil, mode)
		done += n
		errs = append(errs, merrs...)
	}
	return done, errs
}

// revertSummary is the report's text of undoing e before its undoer says
// what it did: the entry's Revert, from the value the change set back to
// the one it found; for an entry without one (journaled before it was
// recorded, or a kind that keeps no such value), "revert: " and the
// forward summary.
func revertSummary(e Entry) string {
	if e.Revert != "" {
		return e.Revert
	}
	return "revert: " + e.Summary
}

// sameBatch tells whether two entries were journaled by the same Do call.
func sameBatch(a, b Entry) bool {
	return a.Batch > 0 && a.Batch == b.Batch && a.Run == b.Run
}

func validateSteps(steps []Step) error {
	seen := make(map[string]bool, len(steps))
	for i, s := range steps {
		switch {
		case s.Kind == "" || s.ID == "":
			return fmt.Errorf("run steps: step %d (%q): empty kind or id", i, s.ID)
		case s.Wait != nil && (s.Check != nil || s.Apply != nil || len(steps) > 1):
			return fmt.Errorf("run steps: step %s: a barrier (Wait) has no Check or Apply and runs alone", s.ID)
		case s.Wait == nil && (s.Check == nil || s.Apply == nil):
			return fmt.Errorf("run steps: step %s: nil Check or Apply", s.ID)
		case seen[s.ID]:
			return fmt.Errorf("run steps: step %s passed twice in one call", s.ID)
		}
		seen[s.ID] = true
	}
	return nil
}

// parallel runs fn(0..n-1) concurrently and waits; one call runs inline.
func parallel(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// safeCall turns a panic in a step's function into an error, so the run can
// still roll back.
func safeCall[T any](log *slog.Logger, s Step, what string, fn func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic", "step", s.Kind, "id", s.ID, "in", what, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic in %s: %v", what, p)
		}
	}()
	return fn()
}

// keptError is a failure whose run kept its changes (NoRollback).
type keptError struct {
	cause   error
	journal string
}

func (e *keptError) Error() string {
	return fmt.Sprintf("%v; no rollback: this run's changes stay in journal %s for a resumed up or a down", e.cause, e.journal)
}

func (e *keptError) Unwrap() error { return e.cause }

// Cause is the step's own failure beneath a NoRollback run's note on its
// journal, for a caller whose own undo takes the journal's place (the qemu
// hook: libvirt's "release end" undoes it); any other error is itself.
func Cause(err error) error {
	var k *keptError
	if errors.As(err, &k) {
		return k.cause
	}
	return err
}
