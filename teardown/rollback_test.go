package teardown

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// changedPipeline is the fake pipeline of a second config: the VF MACs and
// hw-offload differ from the first (h.pipeline()); everything else is the
// same.
func (h *fakeHost) changedPipeline() [][]Step {
	p := h.pipeline()
	p[2] = []Step{h.step(kindMulti, "vf.mac", map[string]string{"pf0.vf0.mac": "cc", "pf1.vf0.mac": "dd"})}
	p[5] = []Step{h.step(kindSet, "ovs.hw-offload", map[string]string{"ovs.hw-offload": "offload2"})}
	return p
}

// upWith runs the batches with r, stopping at the first error; a success
// ends the run (Settle), as pipeline.Up does.
func upWith(ctx context.Context, r *Runner, batches [][]Step, settle bool) error {
	for _, b := range batches {
		if err := r.Do(ctx, b...); err != nil {
			return errors.Join(err, r.Journal.Flush())
		}
	}
	if settle {
		if err := r.Journal.Settle(nil); err != nil {
			return err
		}
	}
	return r.Journal.Flush()
}

// redoFrom is a Runner.Redo for r that does the request's objects again
// from the batches (the config of the last run that ended), on a NoOpen
// runner, and records what it was asked.
func redoFrom(t *testing.T, h *fakeHost, r *Runner, batches [][]Step, asked *[]RedoRequest) func(ctx context.Context, req RedoRequest) error {
	return func(ctx context.Context, req RedoRequest) error {
		*asked = append(*asked, req)
		rr := &Runner{Journal: r.Journal, Undo: h.undoers(), Log: testLogger(t), NoOpen: true, NoRollback: true, Skip: req.Remade}
		want := map[string]bool{}
		for _, id := range req.IDs() {
			want[id] = true
		}
		for _, b := range batches {
			var do []Step
			for _, s := range b {
				if want[s.ID] {
					do = append(do, s)
				}
			}
			if err := rr.Do(ctx, do...); err != nil {
				return Cause(err)
			}
		}
		return nil
	}
}

// planPrior is what a plan pass (DryRun) of batches finds before a run:
// the forward runner's Prior.
func planPrior(t *testing.T, h *fakeHost, dir string, batches [][]Step) map[string]Capture {
	t.Helper()
	j := openTestJournal(t, dir)
	pr := &Runner{Journal: j, DryRun: true, Log: testLogger(t)}
	for _, b := range batches {
		if err := pr.Do(t.Context(), b...); err != nil {
			t.Fatal(err)
		}
	}
	return pr.Captured()
}

// TestRollbackToBeforeTheRun: on a converged host, a run of a second
// config that fails at each step rolls back to the converged host (the
// state before that run), not to the baseline from before the first up
// (the entries' first captures); the journal is as before the run; down
// still gives the baseline.
func TestRollbackToBeforeTheRun(t *testing.T) {
	ctx := t.Context()
	for _, id := range []string{"kv.multi/vf.mac", "kv.set/ovs.hw-offload"} { // the steps the second config changes
		t.Run(id, func(t *testing.T) {
			h, dir := newHost(), t.TempDir()
			if err := up(ctx, newRunner(t, h, dir), h); err != nil {
				t.Fatal(err)
			}
			before, entries := h.Dump(), reopen(t, dir)
			r := newRunner(t, h, dir)
			r.FailAt = id
			// The captures a plan pass takes before the run: hw-offload's
			// Check comes after the MACs' write, which (DependsOn unset)
			// may have changed what it reads.
			r.Prior = planPrior(t, h, dir, h.changedPipeline())
			err := upWith(ctx, r, h.changedPipeline(), true)
			if !errors.Is(err, ErrInjected) || !errors.Is(err, ErrRolledBack) {
				t.Fatalf("up: %v, want the injected failure, rolled back", err)
			}
			diffDump(t, "after the rollback (want the state before the run)", before, h.Dump())
			after := reopen(t, dir)
			if len(after) != len(entries) {
				t.Fatalf("journal after the rollback: %v, want %v", entryIDs(after), entryIDs(entries))
			}
			for i := range entries {
				a, b := after[i], entries[i]
				if a.ID != b.ID || !bytes.Equal(a.Record, b.Record) || a.Run != b.Run || a.State != b.State || a.Open != nil {
					t.Errorf("entry %d after the rollback: %+v, want as before the run: %+v", i, a, b)
				}
			}
			if err := newRunner(t, h, dir).Down(ctx); err != nil {
				t.Fatal(err)
			}
			diffDump(t, "after down", baselineDump(), h.Dump())
		})
	}
}

// redoStep marks a fake step's changes RollbackRedo (its undo would remove
// the object) or RollbackUndoRedo.
func redoStep(s Step, how Rollback) Step {
	check := s.Check
	s.Check = func(ctx context.Context) (Change, error) {
		ch, err := check(ctx)
		ch.Rollback = how
		return ch, err
	}
	return s
}

// TestRollbackRedo: a change whose undo cannot put back what it found
// (RollbackRedo) is put back by Redo from the first config, after the
// undos; one that destroyed more than its object (RollbackUndoRedo) is
// undone from its capture, and Redo gets it as restored. Without Redo the
// rollback says what it left. The journal is as before the run once Redo
// succeeded.
func TestRollbackRedo(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	first := h.pipeline()
	if err := up(ctx, newRunner(t, h, dir), h); err != nil {
		t.Fatal(err)
	}
	before, entries := h.Dump(), reopen(t, dir)

	second := h.changedPipeline()
	second[2][0] = redoStep(second[2][0], RollbackRedo)     // vf.mac: done again
	second[5][0] = redoStep(second[5][0], RollbackUndoRedo) // hw-offload: undone, then its group done again
	second = append(second, []Step{h.step(kindSet, "late", map[string]string{"late": "x"})})
	h.failApply["kv.set/late"] = true
	r := newRunner(t, h, dir)
	var asked []RedoRequest
	r.Redo = redoFrom(t, h, r, first, &asked)
	r.Prior = planPrior(t, h, dir, second)
	if err := upWith(ctx, r, second, true); !errors.Is(err, ErrRolledBack) || !strings.Contains(err.Error(), "2 undone, 1 done again") {
		t.Fatalf("up: %v, want a rollback with two undos (late, hw-offload) and one redo (vf.mac)", err)
	}
	if len(asked) != 1 || !slices.Equal(asked[0].IDs(), []string{"kv.multi/vf.mac", "kv.set/ovs.hw-offload"}) ||
		!asked[0].Remade["kv.set/ovs.hw-offload"] || asked[0].Remade["kv.multi/vf.mac"] {
		t.Fatalf("Redo asked %+v, want vf.mac to do again and hw-offload restored", asked)
	}
	diffDump(t, "after the rollback", before, h.Dump())
	after := reopen(t, dir)
	for i := range entries {
		if !bytes.Equal(after[i].Record, entries[i].Record) || after[i].Open != nil {
			t.Errorf("entry %s after the rollback: %+v, want as before the run", entries[i].ID, after[i])
		}
	}

	// Without Redo: the rollback says what it could not put back, and
	// keeps it open for a later rollback.
	r = newRunner(t, h, dir)
	if err := upWith(ctx, r, second, true); err == nil || !strings.Contains(err.Error(), "not put back") || !strings.Contains(err.Error(), "kv.multi/vf.mac") {
		t.Fatalf("up without Redo: %v, want the rollback to name what it could not put back", err)
	}
	open := 0
	for _, e := range reopen(t, dir) {
		if e.Open != nil {
			open++
		}
	}
	if open == 0 {
		t.Error("nothing left open for a later rollback")
	}
	// A later run's rollback finishes it.
	r = newRunner(t, h, dir)
	r.Redo = redoFrom(t, h, r, first, &asked)
	r.FailAt = "kv.set/legacy.flow_steering"
	h.set("legacy.flow_steering", "dmfs") // drift, so that the run writes
	drifted := h.Dump()
	if err := upWith(ctx, r, first, true); !errors.Is(err, ErrRolledBack) {
		t.Fatalf("later up: %v", err)
	}
	want := strings.Replace(before, "legacy.flow_steering=smfs", "legacy.flow_steering=dmfs", 1)
	if drifted == want {
		t.Fatal("the drift did not change the host")
	}
	diffDump(t, "after a later run's rollback", want, h.Dump())
	if err := newRunner(t, h, dir).Down(ctx); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())
}

// TestPruneThenRollback: a prune keeps the entries it undid, marked
// removed (up does not see them: Live), until the run ends; a failure
// after it has Redo do them again and puts the entries back; a prune's
// own undo fails under FailAt after the real undo.
func TestPruneThenRollback(t *testing.T) {
	ctx := t.Context()
	for _, failAt := range []string{"kv.set/ovs.hw-offload", "kv.set/late"} {
		t.Run(failAt, func(t *testing.T) {
			h, dir := newHost(), t.TempDir()
			first := h.pipeline()
			if err := up(ctx, newRunner(t, h, dir), h); err != nil {
				t.Fatal(err)
			}
			before, entries := h.Dump(), reopen(t, dir)
			r := newRunner(t, h, dir)
			var asked []RedoRequest
			r.Redo = redoFrom(t, h, r, first, &asked)
			r.FailAt = failAt
			var pruned []Entry
			for _, e := range r.Journal.Entries() {
				if e.ID == "kv.set/ovs.hw-offload" {
					pruned = append(pruned, e)
				}
			}
			err := r.Prune(ctx, pruned)
			if failAt == "kv.set/late" {
				if err != nil {
					t.Fatal(err)
				}
				if live := entryIDs(r.Journal.Live()); slices.Contains(live, "kv.set/ovs.hw-offload") {
					t.Errorf("Live after the prune: %v, want the removed entry left out", live)
				}
				if h.Dump() == before {
					t.Fatal("the prune changed nothing")
				}
				h.failApply["kv.set/late"] = true
				err = r.Do(ctx, h.step(kindSet, "late", map[string]string{"late": "x"}))
			} else {
				err = r.Fail(ctx, err)
			}
			if !errors.Is(err, ErrInjected) && !strings.Contains(err.Error(), "injected") || !errors.Is(err, ErrRolledBack) {
				t.Fatalf("run: %v, want a failure, rolled back", err)
			}
			if len(asked) != 1 || !slices.Equal(asked[0].IDs(), []string{"kv.set/ovs.hw-offload"}) {
				t.Fatalf("Redo asked %+v, want the removed entry", asked)
			}
			endRun(t, dir)
			diffDump(t, "after the rollback", before, h.Dump())
			after := reopen(t, dir)
			if len(after) != len(entries) {
				t.Fatalf("journal after the rollback: %v", entryIDs(after))
			}
			for i := range entries {
				if after[i].ID != entries[i].ID || !bytes.Equal(after[i].Record, entries[i].Record) || after[i].Open != nil {
					t.Errorf("entry %s after the rollback: %+v", entries[i].ID, after[i])
				}
			}
		})
	}
}

// TestOpenRunsRolledBackTogether: a run that failed with NoRollback keeps
// its changes open; a later run that fails rolls back to the state before
// the first of them (a rollback cut short by a second interrupt the same:
// what is left stays open and the next rollback finishes it). Settle ends
// them: a run that succeeds is never rolled back by a later one.
func TestOpenRunsRolledBackTogether(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	if err := up(ctx, newRunner(t, h, dir), h); err != nil {
		t.Fatal(err)
	}
	before := h.Dump()
	changed := h.changedPipeline()

	// X: fails after the MACs, keeps them (--no-rollback).
	x := newRunner(t, h, dir)
	x.NoRollback, x.FailAt = true, "kv.multi/vf.mac"
	if err := upWith(ctx, x, changed, true); err == nil || errors.Is(err, ErrRolledBack) {
		t.Fatalf("X: %v, want a failure kept", err)
	}
	if h.Dump() == before {
		t.Fatal("X left nothing")
	}
	// Y: its rollback is cut short after its first undo (a second
	// interrupt): what is left stays open.
	y := newRunner(t, h, dir)
	abort, stop := context.WithCancel(ctx)
	y.Abort, y.FailAt = abort, "kv.set/ovs.hw-offload"
	y.OnEvent = func(ev Event) {
		if ev.Phase == PhaseUndo {
			stop()
		}
	}
	if err := upWith(ctx, y, changed, true); err == nil || !strings.Contains(err.Error(), "second interrupt") {
		t.Fatalf("Y: %v, want its rollback stopped", err)
	}
	if !y.Journal.Open() {
		t.Fatal("nothing left open after a rollback cut short")
	}
	// Z: fails at its first change; its rollback finishes the others.
	z := newRunner(t, h, dir)
	h.set("legacy.flow_steering", "dmfs") // so that z writes
	z.FailAt = "kv.set/legacy.flow_steering"
	if err := upWith(ctx, z, changed, true); !errors.Is(err, ErrRolledBack) || !strings.Contains(err.Error(), "earlier runs") {
		t.Fatalf("Z: %v, want a rollback of earlier runs too", err)
	}
	want := strings.Replace(before, "legacy.flow_steering=smfs", "legacy.flow_steering=dmfs", 1)
	diffDump(t, "after Z's rollback (the state before X, with Z's own drift)", want, h.Dump())
	if z.Journal.Open() {
		t.Error("entries left open after a complete rollback")
	}

	// A run that succeeds ends: a later failed run rolls back itself only.
	if err := upWith(ctx, newRunner(t, h, dir), changed, true); err != nil {
		t.Fatal(err)
	}
	ended := h.Dump()
	w := newRunner(t, h, dir)
	h.set("legacy.flow_steering", "dmfs")
	w.FailAt = "kv.set/legacy.flow_steering"
	if err := upWith(ctx, w, changed, true); !errors.Is(err, ErrRolledBack) {
		t.Fatal(err)
	}
	diffDump(t, "after a rollback past a run that ended", strings.Replace(ended, "legacy.flow_steering=smfs", "legacy.flow_steering=dmfs", 1), h.Dump())
	if err := newRunner(t, h, dir).Down(ctx); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())
}

// TestSettle: Settle ends every open entry (a removed one leaves the
// journal), keeps the settled record, and writes nothing when nothing is
// open and the record is the same.
func TestSettle(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	r := newRunner(t, h, dir)
	if err := upWith(ctx, r, h.pipeline(), false); err != nil {
		t.Fatal(err)
	}
	if !r.Journal.Open() {
		t.Fatal("a run that has not ended left nothing open")
	}
	if err := r.Prune(ctx, r.Journal.Entries()[:1]); err != nil {
		t.Fatal(err)
	}
	if err := r.Journal.Settle(json.RawMessage(`{"config":1}`)); err != nil {
		t.Fatal(err)
	}
	j := reopenJournal(t, dir)
	if j.Open() || len(j.Entries()) != len(neededIDs)-1 || string(j.Settled()) != `{"config":1}` {
		t.Fatalf("after Settle: open %v, %d entries, settled %s", j.Open(), len(j.Entries()), j.Settled())
	}
	path := filepath.Join(dir, journalName)
	st, _ := os.Stat(path)
	time.Sleep(10 * time.Millisecond)
	if err := j.Settle(json.RawMessage(`{"config":1}`)); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(path); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("Settle with nothing to end wrote the journal")
	}
}

func reopenJournal(t *testing.T, dir string) *Journal {
	t.Helper()
	return openTestJournal(t, dir)
}

// TestRedoBringsBackRemoved: an entry a prune removed whose object a
// rollback's redo (a NoOpen runner) made again is live again, even when
// that rollback was cut short before it ended the entry: a later run that
// ends keeps it (down still undoes the object), and does not drop it as
// removed.
func TestRedoBringsBackRemoved(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	if err := up(ctx, newRunner(t, h, dir), h); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, h, dir)
	var hw Entry
	for _, e := range r.Journal.Entries() {
		if e.ID == "kv.set/ovs.hw-offload" {
			hw = e
		}
	}
	if err := r.Prune(ctx, []Entry{hw}); err != nil {
		t.Fatal(err)
	}
	rr := &Runner{Journal: r.Journal, Undo: h.undoers(), Log: testLogger(t), NoOpen: true, NoRollback: true}
	if err := rr.Do(ctx, h.pipeline()[5]...); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(entryIDs(r.Journal.Live()), hw.ID) {
		t.Fatalf("Live after the redo: %v, want %s back", entryIDs(r.Journal.Live()), hw.ID)
	}
	if err := r.Journal.Settle(nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(entryIDs(reopen(t, dir)), hw.ID) {
		t.Fatal("the run's end dropped the entry of an object that is there")
	}
	if err := newRunner(t, h, dir).Down(ctx); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())
}
