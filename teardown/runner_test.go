package teardown

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func entryIDs(es []Entry) []string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

func journalExists(t *testing.T, dir string) bool {
	t.Helper()
	endRun(t, dir)
	_, err := os.Stat(filepath.Join(dir, journalName))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// reopen reads the journal from disk as a new process would.
func reopen(t *testing.T, dir string) []Entry {
	t.Helper()
	endRun(t, dir)
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatalf("OpenJournal: %v", err)
	}
	return j.Entries()
}

func phases(evs []Event) []string {
	var ps []string
	for _, e := range evs {
		ps = append(ps, e.Phase+" "+e.ID)
	}
	return ps
}

func TestUpThenDownRestoresBaseline(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	var seen []Event
	r := newRunner(t, h, dir)
	r.OnEvent = func(e Event) { seen = append(seen, e) }

	if err := up(ctx, r, h); err != nil {
		t.Fatalf("up: %v", err)
	}
	diffDump(t, "after up", convergedDump(), h.Dump())

	es := reopen(t, dir)
	if d := cmp.Diff(neededIDs, entryIDs(es), cmpSortBatches()); d != "" {
		t.Errorf("journal ids (-want +got):\n%s", d)
	}
	for _, e := range es {
		if e.State != StateApplied || e.Run == "" || e.Time.IsZero() || e.Summary == "" {
			t.Errorf("entry %+v: want applied, with run, time and summary", e)
		}
	}
	if got := r.Results(); !cmp.Equal(got, seen, cmpEvents()) {
		t.Errorf("OnEvent saw %v, Results %v", phases(seen), phases(got))
	}
	for _, e := range r.Results() {
		want := PhaseApply
		if e.ID == skipID {
			want = PhaseSkip
		}
		if e.Phase != want || e.Changed != (want == PhaseApply) || e.Err != nil || e.DryRun {
			t.Errorf("event %+v: want phase %s", e, want)
		}
	}

	// Down from a fresh process, from the journal alone.
	d := newRunner(t, h, dir)
	if err := d.Down(ctx); err != nil {
		t.Fatalf("down: %v", err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())
	if journalExists(t, dir) {
		t.Error("journal file still there after a complete down")
	}
	// Undo ran in exact reverse of the journal, batch by batch; the entries
	// of one batch (one Do call, applied concurrently) are undone
	// concurrently, in any order.
	want := entryIDs(es)
	slices.Reverse(want)
	if d := cmp.Diff(want, h.undos, cmpSortBatches()); d != "" {
		t.Errorf("undone entries (-want +got):\n%s", d)
	}
	batchOfID := map[string]int{}
	for i, e := range slices.Backward(es) {
		batchOfID[e.ID] = len(es) - i
		if i+1 < len(es) && sameBatch(e, es[i+1]) {
			batchOfID[e.ID] = batchOfID[es[i+1].ID]
		}
	}
	for i := 1; i < len(h.undos); i++ {
		if batchOfID[h.undos[i]] < batchOfID[h.undos[i-1]] {
			t.Errorf("undo order: %s (batch %d) after %s (batch %d): batches must be undone in reverse", h.undos[i], batchOfID[h.undos[i]], h.undos[i-1], batchOfID[h.undos[i-1]])
		}
	}
	for _, e := range d.Results() {
		if e.Phase != PhaseUndo || e.Err != nil || !e.Changed {
			t.Errorf("down event %+v", e)
		}
	}

	// Down again: nothing to do, success, no undo.
	d2 := newRunner(t, h, dir)
	if err := d2.Down(ctx); err != nil {
		t.Fatalf("second down: %v", err)
	}
	if n := len(h.undos); n != len(want) {
		t.Errorf("second down undid again: %d undos", n)
	}
	if len(d2.Results()) != 0 {
		t.Errorf("second down events: %v", phases(d2.Results()))
	}
	diffDump(t, "after second down", baselineDump(), h.Dump())
}

// cmpSortBatches ignores the order of the two concurrent steps of a batch:
// it only compares the sets (the order inside a batch is argument order,
// checked in TestConcurrentSteps).
func cmpSortBatches() cmp.Option {
	return cmp.Transformer("sorted", func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		return out
	})
}

func cmpEvents() cmp.Option {
	return cmp.Comparer(func(a, b Event) bool {
		return a.Kind == b.Kind && a.ID == b.ID && a.Phase == b.Phase && a.Changed == b.Changed && a.DryRun == b.DryRun && errors.Is(a.Err, b.Err)
	})
}

func TestConvergedRerunWritesNothing(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	if err := up(ctx, newRunner(t, h, dir), h); err != nil {
		t.Fatalf("up: %v", err)
	}
	path := filepath.Join(dir, journalName)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	applies := h.totalApplies()

	r := newRunner(t, h, dir)
	if err := up(ctx, r, h); err != nil {
		t.Fatalf("second up: %v", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.ModTime().Equal(old) {
		t.Errorf("journal mtime changed on a converged re-run: %v", st.ModTime())
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("journal content changed on a converged re-run:\n%s\n---\n%s", before, after)
	}
	if n := h.totalApplies(); n != applies {
		t.Errorf("converged re-run called Apply %d times", n-applies)
	}
	for _, e := range r.Results() {
		if e.Phase != PhaseSkip || e.Changed {
			t.Errorf("converged re-run event %+v, want skip", e)
		}
	}
	if len(r.Results()) != len(neededIDs)+1 {
		t.Errorf("events: %v", phases(r.Results()))
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".journal.json.tmp-*")); len(tmp) != 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

func TestDryRun(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	r := newRunner(t, h, dir)
	r.DryRun = true
	if err := up(ctx, r, h); err != nil {
		t.Fatalf("dry-run up: %v", err)
	}
	diffDump(t, "after dry run", baselineDump(), h.Dump())
	if journalExists(t, dir) || h.totalApplies() != 0 {
		t.Fatal("dry run wrote the journal or applied")
	}
	for _, e := range r.Results() {
		if !e.DryRun || e.Changed != (e.ID != skipID) || e.Phase != map[bool]string{true: PhaseApply, false: PhaseSkip}[e.Changed] {
			t.Errorf("dry-run event %+v", e)
		}
	}
	// A dry run without a journal plans too.
	if err := (&Runner{DryRun: true}).Do(ctx, h.pipeline()[0]...); err != nil {
		t.Errorf("dry run without journal: %v", err)
	}

	// Dry-run down lists the undos and changes nothing.
	if err := up(ctx, newRunner(t, h, dir), h); err != nil {
		t.Fatal(err)
	}
	entries := reopen(t, dir)
	d := newRunner(t, h, dir)
	d.DryRun = true
	if err := d.Down(ctx); err != nil {
		t.Fatalf("dry-run down: %v", err)
	}
	diffDump(t, "after dry-run down", convergedDump(), h.Dump())
	if d := cmp.Diff(entries, reopen(t, dir)); d != "" {
		t.Errorf("dry-run down changed the journal:\n%s", d)
	}
	if len(d.Results()) != len(entries) || len(h.undos) != 0 {
		t.Errorf("dry-run down: events %v, undos %v", phases(d.Results()), h.undos)
	}
}

// failure modes for the table below.
const (
	failAt    = "FailAt: the real apply happened, then the step fails"
	failApply = "apply error"
	failCheck = "check error"
)

func TestFailureAtEachStep(t *testing.T) {
	type tc struct{ id, mode string }
	var cases []tc
	for _, id := range neededIDs {
		cases = append(cases, tc{id, failAt}, tc{id, failApply}, tc{id, failCheck})
	}
	cases = append(cases, tc{skipID, failCheck})

	for _, c := range cases {
		for _, noRollback := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s/norollback=%v", c.id, c.mode, noRollback), func(t *testing.T) {
				ctx := t.Context()
				h, dir := newHost(), t.TempDir()
				r := newRunner(t, h, dir)
				r.NoRollback = noRollback
				switch c.mode {
				case failAt:
					r.FailAt = c.id
				case failApply:
					h.failApply[c.id] = true
				case failCheck:
					h.failCheck[c.id] = true
				}
				err := up(ctx, r, h)
				if err == nil {
					t.Fatal("up succeeded")
				}
				if !strings.Contains(err.Error(), "step "+c.id+": ") {
					t.Errorf("error does not name the step: %v", err)
				}
				if c.mode == failAt && !errors.Is(err, ErrInjected) {
					t.Errorf("error does not wrap ErrInjected: %v", err)
				}

				if !noRollback {
					if !strings.Contains(err.Error(), "rolled back") {
						t.Errorf("error does not report the rollback: %v", err)
					}
					diffDump(t, "after rollback", baselineDump(), h.Dump())
					if journalExists(t, dir) {
						t.Errorf("journal left after a complete rollback: %v", entryIDs(reopen(t, dir)))
					}
					return
				}

				if !strings.Contains(err.Error(), "no rollback") {
					t.Errorf("error does not say there was no rollback: %v", err)
				}
				// The journal holds every step up to the failing batch
				// (the failing one pending), from disk.
				b := batchOf(t, h, c.id)
				var want []string
				for i, batch := range h.pipeline() {
					for _, s := range batch {
						if slices.Contains(neededIDs, s.ID) && (i < b || (i == b && c.mode != failCheck)) {
							want = append(want, s.ID)
						}
					}
				}
				es := reopen(t, dir)
				if d := cmp.Diff(want, entryIDs(es), cmpSortBatches()); d != "" {
					t.Errorf("journal ids (-want +got):\n%s", d)
				}
				for _, e := range es {
					wantState := StateApplied
					if e.ID == c.id {
						wantState = StatePending
					}
					if e.State != wantState {
						t.Errorf("entry %s: state %s, want %s", e.ID, e.State, wantState)
					}
				}
				h.failApply, h.failCheck = map[string]bool{}, map[string]bool{}
				if err := newRunner(t, h, dir).Down(ctx); err != nil {
					t.Fatalf("down: %v", err)
				}
				diffDump(t, "after down", baselineDump(), h.Dump())
				if journalExists(t, dir) {
					t.Error("journal left after down")
				}
			})
		}
	}
}

func TestStopAfterThenResumeOrDown(t *testing.T) {
	for k := 1; k <= len(neededIDs); k++ {
		// stop runs up with StopAfter=k and returns the journal at the stop.
		stop := func(t *testing.T) (*fakeHost, string, []Entry) {
			t.Helper()
			h, dir := newHost(), t.TempDir()
			r := newRunner(t, h, dir)
			r.StopAfter = k
			// Even after the last applied step, Do reports the stop.
			if err := up(t.Context(), r, h); !errors.Is(err, ErrStopped) {
				t.Fatalf("up: %v, want ErrStopped", err)
			}
			if n := h.totalApplies(); n != k {
				t.Fatalf("applied %d steps, want %d", n, k)
			}
			// Do refuses to go on once stopped.
			if err := r.Do(t.Context(), h.pipeline()[len(h.pipeline())-2]...); !errors.Is(err, ErrStopped) {
				t.Fatalf("Do after stop: %v", err)
			}
			es := reopen(t, dir)
			applied := 0
			for _, e := range es {
				if e.State == StateApplied {
					applied++
				}
			}
			if applied != k {
				t.Fatalf("journal has %d applied entries, want %d: %+v", applied, k, es)
			}
			return h, dir, es
		}

		t.Run(fmt.Sprintf("k=%d/resume", k), func(t *testing.T) {
			h, dir, atStop := stop(t)
			r := newRunner(t, h, dir)
			if err := up(t.Context(), r, h); err != nil {
				t.Fatalf("resumed up: %v", err)
			}
			diffDump(t, "after resume", convergedDump(), h.Dump())
			for _, id := range neededIDs {
				if n := h.appliesOf(id); n != 1 {
					t.Errorf("step %s applied %d times over both runs, want 1", id, n)
				}
			}
			es := reopen(t, dir)
			if d := cmp.Diff(neededIDs, entryIDs(es), cmpSortBatches()); d != "" {
				t.Errorf("journal ids (-want +got):\n%s", d)
			}
			byID := map[string]Entry{}
			for _, e := range es {
				byID[e.ID] = e
				if e.State != StateApplied {
					t.Errorf("entry %s: %s after resume", e.ID, e.State)
				}
			}
			for _, e := range atStop {
				if got := byID[e.ID]; !bytes.Equal(got.Record, e.Record) {
					t.Errorf("entry %s: record changed on resume:\n%s\n%s", e.ID, e.Record, got.Record)
				}
			}
			if err := newRunner(t, h, dir).Down(t.Context()); err != nil {
				t.Fatalf("down: %v", err)
			}
			diffDump(t, "after down", baselineDump(), h.Dump())
		})

		t.Run(fmt.Sprintf("k=%d/down", k), func(t *testing.T) {
			h, dir, _ := stop(t)
			if err := newRunner(t, h, dir).Down(t.Context()); err != nil {
				t.Fatalf("down: %v", err)
			}
			diffDump(t, "after down", baselineDump(), h.Dump())
			if journalExists(t, dir) {
				t.Error("journal left after down")
			}
		})
	}
}

// A step whose Apply wrote part of its change and then failed leaves a
// pending entry; it is undone (by rollback, or by down), and a resumed up
// keeps the prior state captured before the half-apply.
func TestHalfAppliedPendingEntry(t *testing.T) {
	const id = "kv.multi/vf.mac"
	halfUp := func(t *testing.T, noRollback bool) (*fakeHost, string, error) {
		h, dir := newHost(), t.TempDir()
		h.halfApply[id] = true
		r := newRunner(t, h, dir)
		r.NoRollback = noRollback
		err := up(t.Context(), r, h)
		if err == nil {
			t.Fatal("up succeeded")
		}
		return h, dir, err
	}

	t.Run("rollback", func(t *testing.T) {
		h, dir, _ := halfUp(t, false)
		diffDump(t, "after rollback", baselineDump(), h.Dump())
		if journalExists(t, dir) {
			t.Error("journal left")
		}
	})

	t.Run("down", func(t *testing.T) {
		h, dir, _ := halfUp(t, true)
		if !strings.Contains(h.Dump(), "pf0.vf0.mac=aa") || strings.Contains(h.Dump(), "pf1.vf0.mac") {
			t.Fatalf("apply did not half-happen:\n%s", h.Dump())
		}
		es := reopen(t, dir)
		if last := es[len(es)-1]; last.ID != id || last.State != StatePending {
			t.Fatalf("last entry %+v, want %s pending", last, id)
		}
		if err := newRunner(t, h, dir).Down(t.Context()); err != nil {
			t.Fatalf("down: %v", err)
		}
		diffDump(t, "after down", baselineDump(), h.Dump())
	})

	t.Run("resume keeps the first capture", func(t *testing.T) {
		h, dir, _ := halfUp(t, true)
		orig := reopen(t, dir)[len(reopen(t, dir))-1]
		h.halfApply = map[string]bool{}
		if err := up(t.Context(), newRunner(t, h, dir), h); err != nil {
			t.Fatalf("resumed up: %v", err)
		}
		var got Entry
		for _, e := range reopen(t, dir) {
			if e.ID == id {
				got = e
			}
		}
		if !bytes.Equal(got.Record, orig.Record) || got.State != StateApplied {
			t.Errorf("entry after resume %+v; want applied with original record %s", got, orig.Record)
		}
		var rec kvRecord
		if err := json.Unmarshal(got.Record, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Prior["pf0.vf0.mac"] != nil {
			t.Errorf("record's prior state is the half-applied one: %s", got.Record)
		}
		if err := newRunner(t, h, dir).Down(t.Context()); err != nil {
			t.Fatalf("down: %v", err)
		}
		diffDump(t, "after down", baselineDump(), h.Dump())
	})
}

// A run killed after Apply finished but before the entry was marked applied
// leaves a pending entry whose change is complete: the next run's Check
// finds nothing to do, and the entry becomes applied with its record.
func TestPendingEntryCompletedIsMarkedApplied(t *testing.T) {
	ctx := t.Context()
	const id = "kv.set/bond0"
	h, dir := newHost(), t.TempDir()
	r := newRunner(t, h, dir)
	r.NoRollback, r.FailAt = true, id
	if err := up(ctx, r, h); !errors.Is(err, ErrInjected) {
		t.Fatalf("up: %v", err)
	}
	before := reopen(t, dir)
	r2 := newRunner(t, h, dir)
	if err := up(ctx, r2, h); err != nil {
		t.Fatalf("second up: %v", err)
	}
	if n := h.appliesOf(id); n != 1 {
		t.Errorf("bond applied %d times", n)
	}
	after := reopen(t, dir)
	for i, e := range before {
		a := after[i]
		if a.ID != e.ID || !bytes.Equal(a.Record, e.Record) || a.Run != e.Run || a.State != StateApplied {
			t.Errorf("entry %d: before %+v, after %+v", i, e, a)
		}
	}
	for _, e := range r2.Results() {
		if e.ID == id && e.Phase != PhaseSkip {
			t.Errorf("bond event %+v, want skip", e)
		}
	}
	if err := newRunner(t, h, dir).Down(ctx); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())
}

// Drift after a complete up: the re-run applies again but keeps the original
// prior state for down; a failure later in that run rolls back only this
// run's change, to what this run found, and earlier runs' entries stay as
// they were for down.
func TestDriftKeepsOriginalRecordAndRollbackSparesEarlierRuns(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	r1 := newRunner(t, h, dir)
	if err := up(ctx, r1, h); err != nil {
		t.Fatal(err)
	}
	first := reopen(t, dir)

	h.set("ovs.hw-offload", "weird")
	r2 := newRunner(t, h, dir)
	if err := up(ctx, r2, h); err != nil {
		t.Fatalf("re-up after drift: %v", err)
	}
	second := reopen(t, dir)
	if d := cmp.Diff(entryIDs(first), entryIDs(second)); d != "" {
		t.Errorf("drift moved entries (-want +got):\n%s", d)
	}
	for i := range first {
		if !bytes.Equal(first[i].Record, second[i].Record) {
			t.Errorf("entry %s: record changed by drift re-run: %s", first[i].ID, second[i].Record)
		}
		if changed := first[i].Run != second[i].Run; changed != (first[i].ID == "kv.set/ovs.hw-offload") {
			t.Errorf("entry %s: run %q -> %q", first[i].ID, first[i].Run, second[i].Run)
		}
	}

	// Drift again; this time a later step fails: the re-applied entry is
	// rolled back to what this run found (the drifted value, from its own
	// capture, not the entry's first capture from before vflag), and the
	// journal is as before the run; the rest stays.
	h.set("bond0", "pf0")
	beforeRun := h.Dump()
	h.failCheck[skipID] = true
	r3 := newRunner(t, h, dir)
	err := up(ctx, r3, h)
	if err == nil || !strings.Contains(err.Error(), "rolled back 1 change") {
		t.Fatalf("up: %v, want a rollback of 1 change", err)
	}
	third := reopen(t, dir)
	if d := cmp.Diff(entryIDs(second), entryIDs(third)); d != "" {
		t.Errorf("journal after rollback (-want +got):\n%s", d)
	}
	for i := range second {
		if !bytes.Equal(second[i].Record, third[i].Record) || second[i].Run != third[i].Run || third[i].Open != nil {
			t.Errorf("entry %s after the rollback: %+v, want it as before the run: %+v", second[i].ID, third[i], second[i])
		}
	}
	diffDump(t, "after rollback (the host as before the run: bond0 as drifted)", beforeRun, h.Dump())
	h.failCheck = map[string]bool{}
	if err := newRunner(t, h, dir).Down(ctx); err != nil {
		t.Fatalf("down: %v", err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())
}

func TestDownBestEffort(t *testing.T) {
	setup := func(t *testing.T) (*fakeHost, string) {
		h, dir := newHost(), t.TempDir()
		if err := up(t.Context(), newRunner(t, h, dir), h); err != nil {
			t.Fatal(err)
		}
		return h, dir
	}
	tests := []struct {
		name    string
		prepare func(h *fakeHost, r *Runner)
		kept    string
		errHas  []string
		stuck   string // the line of the dump that stays changed
	}{{
		name:    "undoer fails",
		prepare: func(h *fakeHost, r *Runner) { h.failUndo["kv.set/ovs.hw-offload"] = true },
		kept:    "kv.set/ovs.hw-offload",
		errHas:  []string{"undo kv.set/ovs.hw-offload: ", "injected undo failure"},
		stuck:   "ovs.hw-offload=true",
	}, {
		name:    "unknown kind",
		prepare: func(h *fakeHost, r *Runner) { delete(r.Undo, kindMulti) },
		kept:    "kv.multi/vf.mac",
		errHas:  []string{"undo kv.multi/vf.mac: ", `no undoer for kind "kv.multi"`},
		stuck:   "pf0.vf0.mac=aa",
	}, {
		name: "undoer panics",
		prepare: func(h *fakeHost, r *Runner) {
			r.Undo[kindMulti] = func(context.Context, json.RawMessage) (string, error) { panic("boom") }
		},
		kept:   "kv.multi/vf.mac",
		errHas: []string{"undo kv.multi/vf.mac: ", "panic in undo: boom"},
		stuck:  "pf1.vf0.mac=bb",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, dir := setup(t)
			r := newRunner(t, h, dir)
			tt.prepare(h, r)
			err := r.Down(t.Context())
			if err == nil {
				t.Fatal("down succeeded")
			}
			for _, s := range tt.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if got := entryIDs(reopen(t, dir)); !slices.Equal(got, []string{tt.kept}) {
				t.Errorf("journal after failed down: %v, want [%s]", got, tt.kept)
			}
			if !strings.Contains(h.Dump(), tt.stuck) {
				t.Errorf("state lacks %q:\n%s", tt.stuck, h.Dump())
			}
			failed := 0
			for _, e := range r.Results() {
				if e.Err != nil {
					failed++
				}
			}
			if failed != 1 || len(r.Results()) != len(neededIDs) {
				t.Errorf("events: %d, failed %d", len(r.Results()), failed)
			}

			// A later down, with the problem gone, finishes the job.
			h.failUndo = map[string]bool{}
			if err := newRunner(t, h, dir).Down(t.Context()); err != nil {
				t.Fatalf("second down: %v", err)
			}
			diffDump(t, "after second down", baselineDump(), h.Dump())
			if journalExists(t, dir) {
				t.Error("journal left")
			}
		})
	}
}

func TestDownEmptyJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never-created")
	r := newRunner(t, newHost(), dir)
	if err := r.Down(t.Context()); err != nil {
		t.Fatalf("down on a missing journal: %v", err)
	}
	if err := r.Rollback(t.Context()); err != nil {
		t.Fatalf("rollback before any Do: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("down created the state directory: %v", err)
	}
}

func TestDownStopsOnCancel(t *testing.T) {
	h, dir := newHost(), t.TempDir()
	if err := up(t.Context(), newRunner(t, h, dir), h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := newRunner(t, h, dir)
	r.OnEvent = func(Event) { cancel() } // cancelled after the first undo
	err := r.Down(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("down: %v, want context.Canceled", err)
	}
	if n := len(reopen(t, dir)); n != len(neededIDs)-1 {
		t.Errorf("%d entries left, want %d", n, len(neededIDs)-1)
	}
	if err := newRunner(t, h, dir).Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())
}

// Cancelling the context (Ctrl-C) during an apply still rolls back.
func TestRollbackSurvivesCancel(t *testing.T) {
	h, dir := newHost(), t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	pipe := h.pipeline()
	bond := pipe[4][0]
	apply := bond.Apply
	pipe[4][0].Apply = func(c context.Context) error {
		if err := apply(c); err != nil {
			return err
		}
		cancel()
		return c.Err()
	}
	r := newRunner(t, h, dir)
	var err error
	for _, b := range pipe {
		if err = r.Do(ctx, b...); err != nil {
			break
		}
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "rolled back 7 change") {
		t.Fatalf("up: %v", err)
	}
	diffDump(t, "after rollback", baselineDump(), h.Dump())
}

func TestRollbackAfterDo(t *testing.T) {
	h, dir := newHost(), t.TempDir()
	r1 := newRunner(t, h, dir)
	if err := r1.Do(t.Context(), h.pipeline()[0]...); err != nil {
		t.Fatal(err)
	}
	if err := r1.Journal.Settle(nil); err != nil { // r1's run ended
		t.Fatal(err)
	}
	// A later run applies the rest, then its final verification fails
	// outside Do: Rollback undoes that run only.
	r2 := newRunner(t, h, dir)
	if err := upOpen(t.Context(), r2, h); err != nil {
		t.Fatal(err)
	}
	if err := r2.Rollback(t.Context()); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if got := entryIDs(reopen(t, dir)); !slices.Equal(got, []string{"kv.set/legacy.flow_steering"}) {
		t.Errorf("journal after rollback: %v", got)
	}
	want := newHost()
	want.kv["legacy.flow_steering"] = "smfs"
	diffDump(t, "after rollback", want.Dump(), h.Dump())
	for _, e := range r2.Results()[len(r2.Results())-(len(neededIDs)-1):] {
		if e.Phase != PhaseUndo {
			t.Errorf("rollback event %+v", e)
		}
	}
}

func TestDoRefusesUndoableOrInvalidSteps(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	r := newRunner(t, h, dir)
	delete(r.Undo, kindMulti)
	err := up(ctx, r, h)
	if err == nil || !strings.Contains(err.Error(), `no undoer for kind "kv.multi"`) {
		t.Fatalf("up: %v", err)
	}
	if h.appliesOf("kv.multi/vf.mac") != 0 {
		t.Error("applied a step without an undoer")
	}
	diffDump(t, "after rollback", baselineDump(), h.Dump())

	s := h.pipeline()[0][0]
	for name, steps := range map[string][]Step{
		"empty id":  {{Kind: "k", Check: s.Check, Apply: s.Apply}},
		"nil apply": {{Kind: "k", ID: "k/x", Check: s.Check}},
		"duplicate": {s, s},
	} {
		if err := r.Do(ctx, steps...); err == nil {
			t.Errorf("%s: Do accepted invalid steps", name)
		}
	}
	if err := (&Runner{}).Do(ctx, s); err == nil {
		t.Error("Do without a journal succeeded")
	}
	if journalExists(t, dir) {
		t.Error("invalid steps were journaled")
	}
}

func TestPanicInApplyRollsBack(t *testing.T) {
	h, dir := newHost(), t.TempDir()
	pipe := h.pipeline()
	apply := pipe[2][0].Apply
	pipe[2][0].Apply = func(ctx context.Context) error { _ = apply(ctx); panic("boom") }
	r := newRunner(t, h, dir)
	var err error
	for _, b := range pipe {
		if err = r.Do(t.Context(), b...); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "panic in apply: boom") {
		t.Fatalf("up: %v", err)
	}
	diffDump(t, "after rollback", baselineDump(), h.Dump())
}

// The steps of one Do call are checked and applied concurrently, and all
// their pending entries are on disk before any of them applies.
func TestConcurrentSteps(t *testing.T) {
	const n = 6
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()

	// barrier fails unless all n callers are inside it at the same time.
	barrier := func() func() error {
		var wg sync.WaitGroup
		wg.Add(n)
		all := make(chan struct{})
		go func() { wg.Wait(); close(all) }()
		return func() error {
			wg.Done()
			select {
			case <-all:
				return nil
			case <-time.After(10 * time.Second):
				return errors.New("steps did not run concurrently")
			}
		}
	}
	inCheck, inApply := barrier(), barrier()
	var pendingSeen atomic.Int32
	var steps []Step
	for i := range n {
		s := h.step(kindSet, fmt.Sprintf("pf%d.vf.trust", i), map[string]string{fmt.Sprintf("pf%d.vf.trust", i): "on"})
		check, apply := s.Check, s.Apply
		s.Check = func(ctx context.Context) (Change, error) {
			if err := inCheck(); err != nil {
				return Change{}, err
			}
			return check(ctx)
		}
		s.Apply = func(ctx context.Context) error {
			j, err := OpenJournal(dir) // from disk
			if err != nil {
				return err
			}
			es := j.Entries()
			pending := 0
			for _, e := range es {
				if e.State == StatePending {
					pending++
				}
			}
			if pending == n {
				pendingSeen.Add(1)
			}
			if err := inApply(); err != nil {
				return err
			}
			return apply(ctx)
		}
		steps = append(steps, s)
	}
	r := newRunner(t, h, dir)
	if err := r.Do(ctx, steps...); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got := pendingSeen.Load(); got != n {
		t.Errorf("%d of %d applies saw all %d entries pending on disk", got, n, n)
	}
	var wantIDs []string
	for _, s := range steps {
		wantIDs = append(wantIDs, s.ID)
	}
	if d := cmp.Diff(wantIDs, entryIDs(reopen(t, dir))); d != "" {
		t.Errorf("journal order is not argument order (-want +got):\n%s", d)
	}
	if len(r.Results()) != n {
		t.Errorf("events: %v", phases(r.Results()))
	}

	// One concurrent step fails: the others finish, then all roll back.
	h2, dir2 := newHost(), t.TempDir()
	var batch []Step
	for i := range n {
		batch = append(batch, h2.step(kindSet, fmt.Sprintf("k%d", i), map[string]string{fmt.Sprintf("k%d", i): "v"}))
	}
	h2.failApply["kv.set/k3"] = true
	r2 := newRunner(t, h2, dir2)
	err := r2.Do(ctx, batch...)
	if err == nil || !strings.Contains(err.Error(), "step kv.set/k3: apply") || !strings.Contains(err.Error(), fmt.Sprintf("rolled back %d change", n)) {
		t.Fatalf("Do: %v", err)
	}
	diffDump(t, "after rollback", baselineDump(), h2.Dump())
}

func TestStopAfterInsideConcurrentBatch(t *testing.T) {
	h, dir := newHost(), t.TempDir()
	var batch []Step
	for i := range 4 {
		batch = append(batch, h.step(kindSet, fmt.Sprintf("k%d", i), map[string]string{fmt.Sprintf("k%d", i): "v"}))
	}
	r := newRunner(t, h, dir)
	r.StopAfter = 2
	if err := r.Do(t.Context(), batch...); !errors.Is(err, ErrStopped) {
		t.Fatalf("Do: %v", err)
	}
	if n := h.totalApplies(); n != 2 {
		t.Errorf("applied %d, want 2", n)
	}
	states := map[string]int{}
	for _, e := range reopen(t, dir) {
		states[e.State]++
	}
	if states[StateApplied] != 2 || states[StatePending] != 2 {
		t.Errorf("journal states %v", states)
	}
	r2 := newRunner(t, h, dir)
	if err := r2.Do(t.Context(), batch...); err != nil {
		t.Fatal(err)
	}
	if n := h.totalApplies(); n != 4 {
		t.Errorf("applied %d in all, want 4", n)
	}
	if err := newRunner(t, h, dir).Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())
}

// TestUndoSummaryReadsBackwards: an undo that does not say what it did (a
// plan's prune, a failed undo, one with nothing to do) is reported with the
// change's Revert, from the value the change set back to the one it found,
// not the forward summary; an entry without one (an older journal) keeps
// "revert: " and the forward summary.
func TestUndoSummaryReadsBackwards(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	step := func(id, revert string) Step {
		return Step{Kind: "k", ID: id,
			Check: func(context.Context) (Change, error) {
				return Change{Needed: true, Summary: "mac 00:00:00:00:00:00 -> 52:54:00:10:00:04", Revert: revert, Record: struct{}{}}, nil
			},
			Apply: func(context.Context) error { return nil }}
	}
	undo := Undoers{"k": func(context.Context, json.RawMessage) (string, error) { return "", nil }}
	r := &Runner{Journal: j, Undo: undo}
	if err := r.Do(t.Context(), step("k/new", "mac 52:54:00:10:00:04 -> 00:00:00:00:00:00"), step("k/old", "")); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		j := openTestJournal(t, dir) // what Revert a reopened journal keeps
		r := &Runner{Journal: j, Undo: undo, DryRun: dry}
		if err := r.Down(t.Context()); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, ev := range r.Results() {
			got[ev.ID] = ev.Summary
		}
		want := map[string]string{"k/new": "mac 52:54:00:10:00:04 -> 00:00:00:00:00:00", "k/old": "revert: mac 00:00:00:00:00:00 -> 52:54:00:10:00:04"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("dry %v: undo summaries (-want +got):\n%s", dry, d)
		}
	}
}

// TestConvergedRecheckFollowsDependsOn: once the forward pass wrote a kind,
// a step the plan pass found converged is checked again when its kind is
// that one or depends on it (through others too), and taken as converged
// otherwise; without DependsOn, any write makes every step checked again.
// A Contained write (a's change leaves what b and d look at as it was)
// makes nothing checked again, and the runner says so (WroteContainedOnly).
func TestConvergedRecheckFollowsDependsOn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deps      map[string][]string
		contained bool
		want      map[string]int32 // checks in the forward pass, by kind
	}{
		{"by dependency", map[string][]string{"b": {"a"}, "c": nil, "d": {"b"}}, false, map[string]int32{"b": 1, "c": 0, "d": 1}},
		{"nil: any write", nil, false, map[string]int32{"b": 1, "c": 1, "d": 1}},
		{"contained write", map[string][]string{"b": {"a"}, "c": nil, "d": {"b"}}, true, map[string]int32{"b": 0, "c": 0, "d": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			j := openTestJournal(t, dir)
			endRunWith(t, dir, j)
			undo := func(context.Context, json.RawMessage) (string, error) { return "", nil }
			r := &Runner{Journal: j, Undo: Undoers{"a": undo, "b": undo, "c": undo, "d": undo}, Log: testLogger(t), DependsOn: tc.deps}
			checks := map[string]*atomic.Int32{}
			step := func(kind string, needed bool) Step {
				n := &atomic.Int32{}
				checks[kind] = n
				return Step{Kind: kind, ID: kind + "/1",
					Check: func(context.Context) (Change, error) {
						n.Add(1)
						return Change{Needed: needed, Summary: kind, Record: struct{}{}, Contained: needed && tc.contained}, nil
					},
					Apply: func(context.Context) error { return nil }}
			}
			a, b, c, d := step("a", true), step("b", false), step("c", false), step("d", false)
			r.Converged = map[string]string{"b/1": "b", "c/1": "c", "d/1": "d"}
			for _, s := range []Step{a, b, c, d} {
				if err := r.Do(t.Context(), s); err != nil {
					t.Fatal(err)
				}
			}
			for k, want := range tc.want {
				if got := checks[k].Load(); got != want {
					t.Errorf("kind %s checked %d times after a's write, want %d", k, got, want)
				}
			}
			if !r.Wrote() || r.WroteContainedOnly() != tc.contained {
				t.Errorf("after a's write: Wrote %v, WroteContainedOnly %v; want true, %v", r.Wrote(), r.WroteContainedOnly(), tc.contained)
			}
		})
	}
}

// TestPlannedChangeApplied: a plan pass's needed change of a Replannable
// step is applied in the forward pass without a second Check, its record
// journaled; a step that is not Replannable is checked again; and a write
// of a kind the step depends on makes it checked again.
func TestPlannedChangeApplied(t *testing.T) {
	for _, tc := range []struct {
		name      string
		writeDep  bool // a needed step of kind "dep" runs first in the forward pass
		wantCheck map[string]int32
	}{
		{"nothing written before", false, map[string]int32{"br": 1, "other": 2}},
		{"its dependency written before", true, map[string]int32{"br": 2, "other": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			j := openTestJournal(t, dir)
			endRunWith(t, dir, j)
			undo := func(context.Context, json.RawMessage) (string, error) { return "", nil }
			undoers := Undoers{"br": undo, "other": undo, "dep": undo}
			checks := map[string]*atomic.Int32{}
			applied := map[string]*atomic.Int32{}
			step := func(kind string, replannable bool) Step {
				n, a := &atomic.Int32{}, &atomic.Int32{}
				checks[kind], applied[kind] = n, a
				return Step{Kind: kind, ID: kind + "/1", Replannable: replannable,
					Check: func(context.Context) (Change, error) {
						n.Add(1)
						return Change{Needed: true, Summary: kind + " changes", Record: map[string]int32{"check": n.Load()}}, nil
					},
					Apply: func(context.Context) error { a.Add(1); return nil }}
			}
			br, other := step("br", true), step("other", false)
			deps := map[string][]string{"br": {"dep"}}

			plan := &Runner{Journal: j, DryRun: true, Undo: undoers, Log: testLogger(t), DependsOn: deps}
			if err := plan.Do(t.Context(), br, other); err != nil {
				t.Fatal(err)
			}
			needed := plan.NeededChanges()
			if _, ok := needed["br/1"]; !ok || len(needed) != 1 {
				t.Fatalf("NeededChanges = %v, want br/1 alone (other is not Replannable)", needed)
			}
			r := &Runner{Journal: j, Undo: undoers, Log: testLogger(t), DependsOn: deps, Planned: needed}
			if tc.writeDep {
				if err := r.Do(t.Context(), step("dep", false)); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Do(t.Context(), br, other); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.wantCheck {
				if got := checks[k].Load(); got != want {
					t.Errorf("kind %s checked %d times in plan and forward pass, want %d", k, got, want)
				}
				if got := applied[k].Load(); got != 1 {
					t.Errorf("kind %s applied %d times, want 1", k, got)
				}
			}
			var rec map[string]int32
			for _, en := range j.Entries() {
				if en.ID == "br/1" {
					if err := json.Unmarshal(en.Record, &rec); err != nil {
						t.Fatal(err)
					}
				}
			}
			if want := tc.wantCheck["br"]; rec["check"] != want {
				t.Errorf("journaled record of br is from check %d, want from check %d", rec["check"], want)
			}
		})
	}
}

// TestCauseBeneathNoRollback: a NoRollback run's failure says where its
// changes stay; Cause gives the step's own error, and leaves others alone.
func TestCauseBeneathNoRollback(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	endRunWith(t, dir, j)
	boom := errors.New("boom")
	r := &Runner{Journal: j, NoRollback: true, Log: testLogger(t), Undo: Undoers{"a": func(context.Context, json.RawMessage) (string, error) { return "", nil }}}
	err := r.Do(t.Context(), Step{Kind: "a", ID: "a/1",
		Check: func(context.Context) (Change, error) { return Change{Needed: true, Record: struct{}{}}, nil },
		Apply: func(context.Context) error { return boom }})
	if err == nil || !strings.Contains(err.Error(), "no rollback: this run's changes stay in journal") {
		t.Fatalf("err = %v, want the journal note", err)
	}
	c := Cause(err)
	if !errors.Is(c, boom) || strings.Contains(c.Error(), "no rollback") {
		t.Errorf("Cause = %v, want the step's failure alone", c)
	}
	if other := errors.New("x"); Cause(other) != other {
		t.Errorf("Cause changed an error that is not a run's")
	}
}

// TestUndoerSaysWhatItDid: down reports the summary an Undoer returns in
// place of the entry's revert, failed or not; "" keeps the revert.
func TestUndoerSaysWhatItDid(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	endRunWith(t, dir, j)
	type said struct {
		Said string `json:"said"`
		Fail bool   `json:"fail"`
	}
	undo := func(_ context.Context, raw json.RawMessage) (string, error) {
		var s said
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		if s.Fail {
			return s.Said, errors.New("half done")
		}
		return s.Said, nil
	}
	step := func(id string, rec said) Step {
		return Step{Kind: "k", ID: id,
			Check: func(context.Context) (Change, error) {
				return Change{Needed: true, Summary: "x 1 -> 2", Revert: "x 2 -> 1", Record: rec}, nil
			},
			Apply: func(context.Context) error { return nil }}
	}
	r := &Runner{Journal: j, Undo: Undoers{"k": undo}, Log: testLogger(t)}
	if err := r.Do(t.Context(), step("k/said", said{Said: "x 2 -> 1 (found 3)"}), step("k/quiet", said{}), step("k/failed", said{Said: "x: one of two back", Fail: true})); err != nil {
		t.Fatal(err)
	}
	r = &Runner{Journal: j, Undo: Undoers{"k": undo}, Log: testLogger(t)}
	if err := r.Down(t.Context()); err == nil {
		t.Fatal("down: no error from the failed undo")
	}
	got := map[string]string{}
	for _, ev := range r.Results() {
		got[ev.ID] = ev.Summary
	}
	want := map[string]string{"k/said": "x 2 -> 1 (found 3)", "k/quiet": "x 2 -> 1", "k/failed": "x: one of two back"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("undo summaries (-want +got):\n%s", d)
	}
}

// TestMootUndo: an entry that Moot names moot (a PF's representors, taken
// away by the PF's return to legacy) is not undone on its own; it leaves
// the journal with the entry that took it. If that undo fails, the moot
// entry is undone on its own after all, and only the failed entry stays.
func TestMootUndo(t *testing.T) {
	moot := func(e Entry, later []Entry) (string, string) {
		if e.ID != "kv.set/pf0.rep" {
			return "", ""
		}
		for _, l := range later {
			if l.ID == "kv.set/eswitch.pf0" {
				return l.ID, "representors removed with the eswitch"
			}
		}
		return "", ""
	}
	tests := []struct {
		name      string
		moot      bool
		failUndo  string
		wantUndos []string // the undoer's calls, in order
		wantKept  []string
		wantErr   bool
	}{
		{name: "no Moot: each entry undone", wantUndos: []string{"kv.set/pf0.rep", "kv.set/eswitch.pf0", "kv.set/pf0.numvfs"}},
		{name: "moot: taken by the eswitch's undo", moot: true, wantUndos: []string{"kv.set/eswitch.pf0", "kv.set/pf0.numvfs"}},
		{name: "moot, the eswitch's undo fails: undone on its own", moot: true, failUndo: "kv.set/eswitch.pf0",
			wantUndos: []string{"kv.set/pf0.rep", "kv.set/pf0.numvfs"}, wantKept: []string{"kv.set/pf0.numvfs", "kv.set/eswitch.pf0"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, dir := newHost(), t.TempDir()
			r := newRunner(t, h, dir)
			for _, s := range []Step{
				h.step(kindSet, "pf0.numvfs", map[string]string{"pf0.numvfs": "4"}),
				h.step(kindSet, "eswitch.pf0", map[string]string{"eswitch.pf0": "switchdev"}),
				h.step(kindSet, "pf0.rep", map[string]string{"pf0.rep0": "up"}),
			} {
				if err := r.Do(t.Context(), s); err != nil {
					t.Fatal(err)
				}
			}
			r = newRunner(t, h, dir)
			if tt.moot {
				r.Moot = moot
			}
			if tt.failUndo != "" {
				h.failUndo[tt.failUndo] = true
			}
			if tt.moot {
				// A plan of the down says what the down will do.
				dry := newRunner(t, h, dir)
				dry.Moot, dry.DryRun = moot, true
				if err := dry.Down(t.Context()); err != nil {
					t.Fatalf("planned down: %v", err)
				}
				var said []string
				for _, ev := range dry.Results() {
					said = append(said, ev.ID+": "+ev.Summary)
				}
				if !slices.Contains(said, "kv.set/pf0.rep: representors removed with the eswitch") || len(h.undos) != 0 || len(said) != 3 {
					t.Errorf("planned down: events %q, undone %q", said, h.undos)
				}
			}
			err := r.Down(t.Context())
			if (err != nil) != tt.wantErr {
				t.Fatalf("down: %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(h.undos, tt.wantUndos) {
				t.Errorf("undone %q, want %q", h.undos, tt.wantUndos)
			}
			if got := entryIDs(reopen(t, dir)); !slices.Equal(got, tt.wantKept) {
				t.Errorf("journal keeps %q, want %q", got, tt.wantKept)
			}
			if strings.Contains(h.Dump(), "pf0.rep0") {
				t.Errorf("the representor's key stayed:\n%s", h.Dump())
			}
			var repEv *Event
			for _, ev := range r.Results() {
				if ev.ID == "kv.set/pf0.rep" {
					repEv = &ev
				}
			}
			switch {
			case repEv == nil:
				t.Error("no event for the representors' entry")
			case repEv.Err != nil:
				t.Errorf("representors' event failed: %v", repEv.Err)
			case tt.moot && tt.failUndo == "" && repEv.Summary != "representors removed with the eswitch":
				t.Errorf("representors' event says %q", repEv.Summary)
			}
		})
	}
}

// TestOnlyAppliesItsStepsAlone: a runner with Only (a rollback's redo of
// some of a group's objects from another config) checks and applies those
// steps alone, leaves every other step as it is, and passes the barriers
// Only leaves out (a LAG wait whose bond is not there).
func TestOnlyAppliesItsStepsAlone(t *testing.T) {
	for _, tt := range []struct {
		name string
		only map[string]bool
		want []string // the fake host's keys changed
	}{
		{"one step", map[string]bool{"kv.set/legacy.flow_steering": true}, []string{"legacy.flow_steering"}},
		{"two steps of two batches", map[string]bool{"kv.set/pf1.numvfs": true, "kv.set/ovs.hw-offload": true}, []string{"ovs.hw-offload", "pf1.numvfs"}},
		{"unset: every step", nil, []string{"bond0", "eswitch.pf0", "eswitch.pf1", "legacy.flow_steering", "ovs.hw-offload", "pf0.numvfs", "pf0.vf0.mac", "pf1.numvfs", "pf1.vf0.mac"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost()
			before := maps.Clone(h.kv)
			r := newRunner(t, h, t.TempDir())
			r.Only, r.NoRollback = tt.only, true
			if err := up(context.Background(), r, h); err != nil {
				t.Fatalf("up: %v", err)
			}
			waited := false
			err := r.Do(context.Background(), Step{Kind: "lag.wait", ID: "lag.wait/lag0", Wait: func(context.Context) (string, error) {
				waited = true
				return "", errors.New("no LAG")
			}})
			if tt.only != nil && (err != nil || waited) {
				t.Errorf("a barrier Only leaves out: waited %v, err %v; want passed", waited, err)
			}
			if tt.only == nil && err == nil {
				t.Errorf("without Only the failing barrier passed")
			}
			h.mu.Lock()
			var got []string
			for k, v := range h.kv {
				if b, ok := before[k]; !ok || b != v {
					got = append(got, k)
				}
			}
			h.mu.Unlock()
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("keys set %v, want %v", got, tt.want)
			}
		})
	}
}
