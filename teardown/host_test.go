package teardown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeHost is an in-memory host: key/value state with two rules that make
// the order of changes observable, like the real ones (DESIGN.md §2):
//   - a bond may exist only while both PFs are in switchdev (so the eswitch
//     cannot go back to legacy before the bond is deleted);
//   - pfN.numvfs cannot change while eswitch.pfN is switchdev.
type fakeHost struct {
	mu      sync.Mutex
	kv      map[string]string
	applies map[string]int // Apply calls, by step id
	undos   []string       // step ids in undo order

	// Failure injection, by step id; set before running.
	failCheck map[string]bool // Check returns an error
	failApply map[string]bool // Apply returns an error, writes nothing
	halfApply map[string]bool // Apply writes its first key, then fails
	failUndo  map[string]bool // the Undoer returns an error
}

func baseline() map[string]string {
	return map[string]string{
		"legacy.flow_steering": "dmfs",
		"pf0.numvfs":           "0",
		"pf1.numvfs":           "0",
		"eswitch.pf0":          "legacy",
		"eswitch.pf1":          "legacy",
		"ovs.hw-offload":       "false",
		"module.bonding":       "loaded",
		"other.untouched":      "yes",
	}
}

func newHost() *fakeHost {
	return &fakeHost{
		kv:        baseline(),
		applies:   map[string]int{},
		failCheck: map[string]bool{},
		failApply: map[string]bool{},
		halfApply: map[string]bool{},
		failUndo:  map[string]bool{},
	}
}

// Dump prints the whole state, one sorted "key=value" line per key.
func (h *fakeHost) Dump() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h.kv)) {
		fmt.Fprintf(&b, "%s=%s\n", k, h.kv[k])
	}
	return b.String()
}

// set changes the state behind the steps' back (drift, test setup).
func (h *fakeHost) set(k, v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kv[k] = v
}

func (h *fakeHost) appliesOf(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.applies[id]
}

func (h *fakeHost) totalApplies() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.applies {
		n += c
	}
	return n
}

// write sets (v != nil) or deletes key k, enforcing the host's rules. The
// caller holds h.mu.
func (h *fakeHost) write(k string, v *string) error {
	if pf, ok := strings.CutSuffix(k, ".numvfs"); ok && h.kv["eswitch."+pf] == "switchdev" {
		return fmt.Errorf("write %s: device busy: eswitch %s in switchdev", k, pf)
	}
	old, had := h.kv[k]
	if v == nil {
		delete(h.kv, k)
	} else {
		h.kv[k] = *v
	}
	if pf, ok := strings.CutPrefix(k, "eswitch."); ok && h.kv[k] != "switchdev" {
		// A PF's representors (keys pfN.rep*) vanish with switchdev.
		for rk := range h.kv {
			if strings.HasPrefix(rk, pf+".rep") {
				delete(h.kv, rk)
			}
		}
	}
	if _, bond := h.kv["bond0"]; bond && (h.kv["eswitch.pf0"] != "switchdev" || h.kv["eswitch.pf1"] != "switchdev") {
		if had {
			h.kv[k] = old
		} else {
			delete(h.kv, k)
		}
		return fmt.Errorf("write %s: bond0 needs both PFs in switchdev", k)
	}
	return nil
}

// kvRecord is the fake steps' journal record: target and prior state.
type kvRecord struct {
	ID    string             `json:"id"`
	Want  map[string]string  `json:"want"`
	Prior map[string]*string `json:"prior"` // nil: the key was absent
}

const (
	kindSet   = "kv.set"
	kindMulti = "kv.multi"
)

// step makes a step that converges keys to want.
func (h *fakeHost) step(kind, name string, want map[string]string) Step {
	id := kind + "/" + name
	keys := slices.Sorted(maps.Keys(want))
	return Step{
		Kind: kind,
		ID:   id,
		Check: func(ctx context.Context) (Change, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.failCheck[id] {
				return Change{}, errors.New("injected check failure")
			}
			rec := kvRecord{ID: id, Want: want, Prior: map[string]*string{}}
			var diffs []string
			for _, k := range keys {
				cur, ok := h.kv[k]
				if ok {
					rec.Prior[k] = &cur
				} else {
					rec.Prior[k] = nil
				}
				if !ok || cur != want[k] {
					diffs = append(diffs, fmt.Sprintf("%s: %q -> %q", k, cur, want[k]))
				}
			}
			return Change{Needed: len(diffs) > 0, Summary: strings.Join(diffs, ", "), Record: rec}, nil
		},
		Apply: func(ctx context.Context) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.applies[id]++
			if h.failApply[id] {
				return errors.New("injected apply failure")
			}
			for _, k := range keys {
				if cur, ok := h.kv[k]; ok && cur == want[k] {
					continue
				}
				v := want[k]
				if err := h.write(k, &v); err != nil {
					return err
				}
				if h.halfApply[id] {
					return errors.New("injected failure half-way through apply")
				}
			}
			return nil
		},
	}
}

// undo is the Undoer of both fake kinds.
func (h *fakeHost) undo(ctx context.Context, raw json.RawMessage) (string, error) {
	var rec kvRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "", fmt.Errorf("decode record: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failUndo[rec.ID] {
		return "", errors.New("injected undo failure")
	}
	h.undos = append(h.undos, rec.ID)
	keys := slices.Sorted(maps.Keys(rec.Prior))
	slices.Reverse(keys)
	for _, k := range keys {
		cur, ok := h.kv[k]
		p := rec.Prior[k]
		if (p == nil && !ok) || (p != nil && ok && cur == *p) {
			continue // already there, or already gone
		}
		if err := h.write(k, p); err != nil {
			return "", err
		}
	}
	return "", nil
}

func (h *fakeHost) undoers() Undoers {
	return Undoers{kindSet: h.undo, kindMulti: h.undo}
}

// pipeline is the fake `vflag up`: batches run in order, the steps of one
// batch concurrently.
func (h *fakeHost) pipeline() [][]Step {
	one := func(k, v string) map[string]string { return map[string]string{k: v} }
	return [][]Step{
		{h.step(kindSet, "legacy.flow_steering", one("legacy.flow_steering", "smfs"))},
		{h.step(kindSet, "pf0.numvfs", one("pf0.numvfs", "4")), h.step(kindSet, "pf1.numvfs", one("pf1.numvfs", "4"))},
		{h.step(kindMulti, "vf.mac", map[string]string{"pf0.vf0.mac": "aa", "pf1.vf0.mac": "bb"})},
		{h.step(kindSet, "eswitch.pf0", one("eswitch.pf0", "switchdev")), h.step(kindSet, "eswitch.pf1", one("eswitch.pf1", "switchdev"))},
		{h.step(kindSet, "bond0", one("bond0", "pf0+pf1"))},
		{h.step(kindSet, "ovs.hw-offload", one("ovs.hw-offload", "true"))},
		{h.step(kindSet, "module.bonding", one("module.bonding", "loaded"))}, // always converged
	}
}

// The fake pipeline's step ids.
var (
	neededIDs = []string{
		"kv.set/legacy.flow_steering",
		"kv.set/pf0.numvfs", "kv.set/pf1.numvfs",
		"kv.multi/vf.mac",
		"kv.set/eswitch.pf0", "kv.set/eswitch.pf1",
		"kv.set/bond0",
		"kv.set/ovs.hw-offload",
	}
	skipID = "kv.set/module.bonding"
)

// batchOf returns the index of the batch holding step id.
func batchOf(t *testing.T, h *fakeHost, id string) int {
	t.Helper()
	for i, b := range h.pipeline() {
		for _, s := range b {
			if s.ID == id {
				return i
			}
		}
	}
	t.Fatalf("no step %s", id)
	return -1
}

// convergedDump is the state after a complete up.
func convergedDump() string {
	h := newHost()
	for k, v := range map[string]string{
		"legacy.flow_steering": "smfs", "pf0.numvfs": "4", "pf1.numvfs": "4",
		"pf0.vf0.mac": "aa", "pf1.vf0.mac": "bb", "eswitch.pf0": "switchdev",
		"eswitch.pf1": "switchdev", "bond0": "pf0+pf1", "ovs.hw-offload": "true",
	} {
		h.kv[k] = v
	}
	return h.Dump()
}

func baselineDump() string { return newHost().Dump() }

// up runs the whole fake pipeline with r, stopping at the first error.
func up(ctx context.Context, r *Runner, h *fakeHost) error {
	for _, batch := range h.pipeline() {
		if err := r.Do(ctx, batch...); err != nil {
			return errors.Join(err, r.Journal.Flush())
		}
	}
	// As pipeline.Up: a run that succeeded ends (its rollback can no
	// longer happen); as apply.Up: what was written behind is on disk when
	// the run ends.
	return errors.Join(r.Journal.Settle(nil), r.Journal.Flush())
}

// upOpen is up without the run's end: the run's changes stay open, as
// those of a run that failed without rollback or was killed.
func upOpen(ctx context.Context, r *Runner, h *fakeHost) error {
	for _, batch := range h.pipeline() {
		if err := r.Do(ctx, batch...); err != nil {
			return errors.Join(err, r.Journal.Flush())
		}
	}
	return r.Journal.Flush()
}

// newRunner opens the journal in dir as a new process would.
func newRunner(t *testing.T, h *fakeHost, dir string) *Runner {
	t.Helper()
	endRun(t, dir) // the previous process on dir ended
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatalf("OpenJournal: %v", err)
	}
	endRunWith(t, dir, j)
	return &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t)}
}

// liveJournals holds, by state directory, the journals a test's runners
// write through: reopen ends their run first (Flush), as a process's end
// does (apply.Up), before it reads the file as the next process would.
var liveJournals sync.Map

// openTestJournal opens dir's journal as a new process would: the previous
// process on dir ended (its journal flushed), and this one is flushed at
// the test's end, before its TempDir is removed.
func openTestJournal(t *testing.T, dir string) *Journal {
	t.Helper()
	endRun(t, dir)
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatalf("OpenJournal: %v", err)
	}
	endRunWith(t, dir, j)
	return j
}

// endRunWith registers j as dir's journal in use, flushed by reopen and at
// the test's end (before its TempDir is removed).
func endRunWith(t *testing.T, dir string, j *Journal) {
	liveJournals.Store(dir, j)
	t.Cleanup(func() {
		if err := j.Flush(); err != nil {
			t.Errorf("flush at the test's end: %v", err)
		}
		liveJournals.CompareAndDelete(dir, j)
	})
}

// endRun flushes dir's journal in use, if any: what a process does before
// it ends.
func endRun(t *testing.T, dir string) {
	t.Helper()
	if j, ok := liveJournals.Load(dir); ok {
		if err := j.(*Journal).Flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
}

func diffDump(t *testing.T, what, want, got string) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s: host state mismatch (-want +got):\n%s", what, d)
	}
}
