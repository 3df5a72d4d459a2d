package teardown

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/vflag/vflag/internal/atomicfile"
)

// Entry states.
const (
	// StatePending: the prior state is captured, Apply may have started
	// (and may have half-happened).
	StatePending = "pending"
	// StateApplied: Apply returned successfully.
	StateApplied = "applied"
)

// Entry is one journaled change.
type Entry struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Summary is the Check's human text from when the entry was created.
	Summary string `json:"summary,omitempty"`
	// Revert is the Check's text of undoing it (Change.Revert), "" in
	// journals written before it was recorded.
	Revert string `json:"revert,omitempty"`
	// Record is the Check's record from when the entry was created: the
	// target and the prior state from before vflag touched the host.
	Record json.RawMessage `json:"record"`
	// State is StatePending or StateApplied.
	State string `json:"state"`
	// Run identifies the run that last applied (or is applying) the entry.
	Run string `json:"run"`
	// Batch numbers, within Run, the Do call that journaled the entry (from
	// 1; 0 in journals written before batches were recorded). The steps of
	// one Do call are independent, so their undos may run concurrently.
	Batch int `json:"batch,omitempty"`
	// Group is the step's Step.Group ("" in journals written before the
	// groups ran side by side): a down undoes different groups' entries
	// side by side only when every entry has one.
	Group string `json:"group,omitempty"`
	// Time of the entry's last state change.
	Time time.Time `json:"time"`
	// Open is set while the run that changed (or removed) the entry has
	// not ended: what that run's rollback needs to put the host and the
	// entry back as they were before it. A run that succeeds ends its
	// changes (Journal.Settle clears it); its rollback does too. Absent
	// in journals written before it was recorded (their entries are
	// ended).
	Open *Open `json:"open,omitempty"`
}

// Open is what a rollback needs of an entry that a run which has not ended
// changed, created or removed. The first such run keeps it: a later run
// that changes the entry again before any run ended leaves it as it is,
// so a rollback returns to the state before the first run that did not end
// (a run that failed with --no-rollback, was killed, or whose rollback
// was cut short).
type Open struct {
	// Run is the run that opened it.
	Run string `json:"run"`
	// Before is the entry as it was before that run (its Open unset); nil
	// when the run created the entry.
	Before *Entry `json:"before,omitempty"`
	// Capture is what the run found before its change, as the kind's Check
	// records it, for an entry that existed before the run: the rollback
	// undoes the change from it (not from Record, the first capture, which
	// is the state before vflag ever touched the object). Unset when the
	// run had no capture taken before its first write, or when the kind's
	// undo of a capture would remove the object rather than put back what
	// it found (Change.Rollback): Redo does the object again instead.
	Capture json.RawMessage `json:"capture,omitempty"`
	// Revert is what undoing this run's change does, as its Check said
	// (Change.Revert): a rollback's report line for it, where the entry's
	// own Revert says what undoing vflag's first change does.
	Revert string `json:"revert,omitempty"`
	// Redo: the rollback puts the object back by doing it again (Runner.Redo,
	// from the config of the last run that ended), after the undos: an entry
	// without Capture, one the run removed, and one whose change destroyed
	// more than its own object (a numvfs change made every VF again: what
	// the old VFs carried).
	Redo bool `json:"redo,omitempty"`
	// Removed: the run removed the object (a prune). The entry stays until
	// the run ends, so that a rollback can do it again; up does not see it
	// (Entries) and down undoes it again (an undo is repeatable).
	Removed bool `json:"removed,omitempty"`
	// Undone: the rollback undid the change from Capture already; its Redo
	// is left (it leaves this object as it is). A later run that changes
	// the object again makes the capture's undo due again.
	Undone bool `json:"undone,omitempty"`
}

const (
	journalName    = "journal.json"
	journalVersion = 1
)

// journalFile is the on-disk format of journal.json.
type journalFile struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
	// Settled is the caller's record of the last run that ended (Settle):
	// the pipeline keeps there the config that run converged to, from which
	// a later rollback does again what it cannot undo (Runner.Redo). Absent
	// in journals written before it was recorded.
	Settled json.RawMessage `json:"settled,omitempty"`
}

// Journal is the write-ahead journal in <stateDir>/journal.json. Its methods
// are safe for concurrent use. Every mutation that journals a change is
// durable before it returns; an entry's removal and its mark as applied are
// written behind (see updateBehind) and are on disk once Flush returns.
// Only the holder of the state directory's Lock should mutate it.
type Journal struct {
	mu      sync.Mutex // guards entries, settled, gen, behind and behindErr
	dir     string
	path    string
	entries []Entry
	settled json.RawMessage
	// gen counts the changes of entries; diskGen is the change
	// journal.json holds. writeMu serializes the file's writes (taken
	// after mu when both are held) and guards diskGen.
	gen     uint64
	writeMu sync.Mutex
	diskGen uint64
	// behind is open while a write-behind goroutine runs; behindErr is its
	// last failure, until a later write succeeds.
	behind    chan struct{}
	behindErr error
}

// OpenJournal loads <stateDir>/journal.json. A missing file (or state
// directory) is an empty journal; an unreadable or corrupt one is an error
// naming the file. Temp files left by an interrupted write are ignored.
func OpenJournal(stateDir string) (*Journal, error) {
	if stateDir == "" {
		return nil, errors.New("open journal: empty state directory")
	}
	j := &Journal{dir: stateDir, path: filepath.Join(stateDir, journalName)}
	data, err := os.ReadFile(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	jf, err := decodeJournal(data)
	if err != nil {
		return nil, fmt.Errorf("journal %s is corrupt (refusing to treat it as empty: it records host changes to undo): %w", j.path, err)
	}
	j.entries, j.settled = jf.Entries, jf.Settled
	return j, nil
}

func decodeJournal(data []byte) (journalFile, error) {
	jf, err := decodeJournalFile(data)
	if err != nil {
		return journalFile{}, err
	}
	if len(jf.Settled) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, jf.Settled); err != nil {
			return journalFile{}, fmt.Errorf("settled: %w", err)
		}
		jf.Settled = buf.Bytes()
	}
	return jf, nil
}

func decodeJournalFile(data []byte) (journalFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var jf journalFile
	if err := dec.Decode(&jf); err != nil {
		return jf, err
	}
	if dec.More() {
		return jf, errors.New("trailing data after the journal object")
	}
	if jf.Version != journalVersion {
		return jf, fmt.Errorf("unsupported journal version %d (want %d)", jf.Version, journalVersion)
	}
	seen := make(map[string]bool, len(jf.Entries))
	for i := range jf.Entries {
		e := &jf.Entries[i]
		switch {
		case e.Kind == "" || e.ID == "":
			return jf, fmt.Errorf("entry %d: empty kind or id", i)
		case e.State != StatePending && e.State != StateApplied:
			return jf, fmt.Errorf("entry %s: unknown state %q", e.ID, e.State)
		case len(e.Record) == 0:
			return jf, fmt.Errorf("entry %s: no record", e.ID)
		case seen[e.ID]:
			return jf, fmt.Errorf("entry %s: duplicate id", e.ID)
		}
		seen[e.ID] = true
		if err := compactRecords(e); err != nil {
			return jf, err
		}
	}
	return jf, nil
}

// compactRecords compacts the JSON an entry holds (its record, and what
// its Open keeps) and checks what its Open says.
func compactRecords(e *Entry) error {
	compact := func(what string, raw json.RawMessage) (json.RawMessage, error) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, fmt.Errorf("entry %s: %s: %w", e.ID, what, err)
		}
		return buf.Bytes(), nil
	}
	var err error
	if e.Record, err = compact("record", e.Record); err != nil {
		return err
	}
	o := e.Open
	if o == nil {
		return nil
	}
	if len(o.Capture) > 0 {
		if o.Capture, err = compact("open capture", o.Capture); err != nil {
			return err
		}
	}
	if b := o.Before; b != nil {
		switch {
		case b.Open != nil:
			return fmt.Errorf("entry %s: open: the entry before the run is open itself", e.ID)
		case b.Kind == "" || b.ID == "":
			return fmt.Errorf("entry %s: open: the entry before the run has an empty kind or id", e.ID)
		case len(b.Record) == 0:
			return fmt.Errorf("entry %s: open: the entry before the run has no record", e.ID)
		}
		if b.Record, err = compact("open before record", b.Record); err != nil {
			return err
		}
	}
	if o.Undone && o.Before == nil {
		return fmt.Errorf("entry %s: open: undone, but no entry before the run", e.ID)
	}
	return nil
}

// encodeJournal is journal.json's content for these entries and settled
// record, as decodeJournal reads it.
func encodeJournal(entries []Entry, settled json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "->" in summaries readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(journalFile{Version: journalVersion, Entries: entries, Settled: settled}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Path is the journal file's path.
func (j *Journal) Path() string { return j.path }

// Entries returns a copy of the journal's entries in the order they were
// first journaled, those a run that has not ended removed included
// (Open.Removed: down undoes them again, and they are still vflag's).
func (j *Journal) Entries() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return cloneEntries(j.entries)
}

// Live returns the entries of objects vflag made and has not removed:
// Entries without those a run that has not ended removed (what up
// compares with the config).
func (j *Journal) Live() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Entry
	for _, e := range j.entries {
		if e.Open == nil || !e.Open.Removed {
			out = append(out, cloneEntry(e))
		}
	}
	return out
}

// all returns a copy of every entry (Entries).
func (j *Journal) all() []Entry { return j.Entries() }

// Open tells whether some entry is open: a run that has not ended changed
// it (the journal of a failed --no-rollback run, a killed one, or one whose
// rollback was cut short).
func (j *Journal) Open() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.ContainsFunc(j.entries, func(e Entry) bool { return e.Open != nil })
}

// Settled is the record the last Settle kept (nil when none: no run ended
// since the journal began, or it was written before this was recorded).
func (j *Journal) Settled() json.RawMessage {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.settled)
}

// Settle ends the changes of the runs that have not ended (a run that
// succeeded: its rollback can no longer happen): every Open is cleared, the
// entries of objects they removed leave the journal, and settled, when not
// nil, becomes the journal's Settled record. Nothing open and the same
// record: no write.
func (j *Journal) Settle(settled json.RawMessage) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	next := cloneEntries(j.entries)
	changed := false
	kept := next[:0]
	for _, e := range next {
		if e.Open != nil {
			changed = true
			if e.Open.Removed {
				continue
			}
			e.Open = nil
		}
		kept = append(kept, e)
	}
	next = kept
	nextSettled := j.settled
	if settled != nil && !bytes.Equal(settled, j.settled) {
		nextSettled, changed = slices.Clone(settled), true
	}
	if !changed {
		return nil
	}
	return j.commit(next, nextSettled)
}

func cloneEntries(in []Entry) []Entry {
	if in == nil {
		return nil
	}
	out := make([]Entry, len(in))
	for i, e := range in {
		out[i] = cloneEntry(e)
	}
	return out
}

// cloneEntry copies e with what it holds by reference (record, Open).
func cloneEntry(e Entry) Entry {
	e.Record = slices.Clone(e.Record)
	if e.Open != nil {
		o := *e.Open
		o.Capture = slices.Clone(o.Capture)
		if o.Before != nil {
			b := cloneEntry(*o.Before)
			o.Before = &b
		}
		e.Open = &o
	}
	return e
}

// update applies fn to a copy of the entries; when fn reports a change, the
// result is persisted durably and only then becomes the journal's state
// (with the changes written behind before it: the file holds all of them).
func (j *Journal) update(fn func(entries []Entry) ([]Entry, bool, error)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	next, changed, err := fn(cloneEntries(j.entries))
	if err != nil || !changed {
		return err
	}
	return j.commit(next, j.settled)
}

// commit persists entries and settled durably and makes them the
// journal's state. j.mu is held.
func (j *Journal) commit(next []Entry, settled json.RawMessage) error {
	j.writeMu.Lock()
	err := j.persist(next, settled, true)
	if err == nil {
		j.gen++
		j.diskGen = j.gen
	}
	j.writeMu.Unlock()
	if err != nil {
		return err
	}
	j.entries, j.settled = next, settled
	j.behindErr = nil
	return nil
}

// updateBehind applies fn to a copy of the entries; when fn reports a
// change, the result becomes the journal's state at once and a goroutine
// writes it behind (atomicfile.ReplaceFile: no fsync of the directory), so
// the caller's next host change runs beside the write. It is for a change
// whose loss in a crash is harmless (an entry's removal, its mark as
// applied): the file then holds the journal from before, whole. The file
// is only ever replaced by a newer state; Flush waits for the write and
// reports a failed one.
func (j *Journal) updateBehind(fn func(entries []Entry) ([]Entry, bool)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	next, changed := fn(cloneEntries(j.entries))
	if !changed {
		return
	}
	j.entries = next
	j.gen++
	if j.behind == nil {
		j.behind = make(chan struct{})
		go j.writeBehind(j.behind)
	}
}

// testHookBehind, when set by a test, runs in writeBehind between taking
// the state to write and waiting for the file.
var testHookBehind func()

// writeBehind writes the newest state until the file holds it, or a write
// fails (behindErr; Flush tries once more), then closes done. A state older
// than the file's (a durable write went first) is not written.
func (j *Journal) writeBehind(done chan struct{}) {
	for {
		j.mu.Lock()
		gen, entries, settled := j.gen, j.entries, j.settled
		j.mu.Unlock()
		if testHookBehind != nil {
			testHookBehind()
		}
		var err error
		j.writeMu.Lock()
		if j.diskGen < gen {
			if err = j.persist(entries, settled, false); err == nil {
				j.diskGen = gen
			}
		}
		j.writeMu.Unlock()
		j.mu.Lock()
		j.behindErr = err
		if err != nil || j.gen == gen {
			j.behind = nil
			j.mu.Unlock()
			close(done)
			return
		}
		j.mu.Unlock()
	}
}

// Flush waits until the changes written behind are in journal.json (not
// made durable: the next durable write does that) and returns a write's
// failure; a failed write behind is tried once more here. Call it before
// the run ends and the state directory's lock is released.
func (j *Journal) Flush() error {
	for {
		j.mu.Lock()
		done := j.behind
		if done == nil {
			break
		}
		j.mu.Unlock()
		<-done
	}
	defer j.mu.Unlock()
	if j.behindErr == nil {
		return nil
	}
	j.writeMu.Lock()
	err := j.persist(j.entries, j.settled, false)
	if err == nil {
		j.diskGen = j.gen
	}
	j.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("journal %s: changes in memory not written: %w (a later run finds the entries from before: undo is repeatable, a pending entry is treated as applied)", j.path, err)
	}
	j.behindErr = nil
	return nil
}

// remove deletes the entries with these ids (absent ones are skipped), in
// one write, written behind. The write is not made durable on its own: an
// undone entry that a crash brings back is undone again by the next down
// (undo is repeatable and tolerant of what is gone), and the next journaling
// of a change (always durable) makes the removal durable too. A removal
// costs one fsync instead of two, beside the next undo.
func (j *Journal) remove(ids ...string) {
	j.updateBehind(func(es []Entry) ([]Entry, bool) {
		changed := false
		for _, id := range ids {
			if i := indexOf(es, id); i >= 0 {
				es = slices.Delete(es, i, i+1)
				changed = true
			}
		}
		return es, changed
	})
}

// Replace puts e in place of the entry with this id, keeping its position
// (a prune that must keep part of what an entry records, e.g. the prior
// hw-offload of a bridge the config renamed). It is an error when absent.
// A run's prune uses Runner.Replace, which keeps the entry replaced for
// the run's rollback.
func (j *Journal) Replace(id string, e Entry) error {
	return j.replace(id, func(Entry) Entry { return e })
}

// replace puts with(old) in place of the entry with this id, keeping its
// position: an error when absent, or when another entry has the new id.
func (j *Journal) replace(id string, with func(old Entry) Entry) error {
	return j.update(func(es []Entry) ([]Entry, bool, error) {
		i := indexOf(es, id)
		if i < 0 {
			return nil, false, fmt.Errorf("journal: no entry %s to replace", id)
		}
		e := with(es[i])
		if k := indexOf(es, e.ID); k >= 0 && k != i {
			return nil, false, fmt.Errorf("journal: entry %s exists already", e.ID)
		}
		es[i] = e
		return es, true, nil
	})
}

// markRemoved marks the entries with these ids removed by run (a prune,
// before its undos: write-ahead, durably), keeping each as it was before the
// run (Open.Before) for the run's rollback. An entry already open keeps
// what it has.
func (j *Journal) markRemoved(run string, ids []string) error {
	return j.update(func(es []Entry) ([]Entry, bool, error) {
		changed := false
		for _, id := range ids {
			i := indexOf(es, id)
			if i < 0 {
				continue
			}
			if es[i].Open == nil {
				before := cloneEntry(es[i])
				es[i].Open = &Open{Run: run, Before: &before}
			}
			es[i].Open.Removed = true
			es[i].Open.Redo = es[i].Open.Before != nil
			changed = true
		}
		return es, changed, nil
	})
}

// replaceOpen puts e in place of the entry with this id (Replace), for run:
// the entry replaced is kept as the one before the run (a rollback puts
// it back and does its object again).
func (j *Journal) replaceOpen(run, id string, e Entry) error {
	return j.replace(id, func(old Entry) Entry {
		open := old.Open
		if open == nil {
			before := cloneEntry(old)
			open = &Open{Run: run, Before: &before}
		}
		if open.Before != nil {
			open.Redo = true
		}
		e = cloneEntry(e)
		e.Open = open
		return e
	})
}

// rolledBack ends the entries with these ids, which a rollback just undid
// (written behind, as remove): one the run created leaves the journal,
// one it changed again becomes the entry it was before the run; one whose
// object the rollback must still do again (Open.Redo) keeps its Open,
// marked Undone. It returns the created ones that must be done again (they
// left the journal).
func (j *Journal) rolledBack(ids []string) (later []Entry) {
	j.updateBehind(func(es []Entry) ([]Entry, bool) {
		changed := false
		for _, id := range ids {
			i := indexOf(es, id)
			if i < 0 || es[i].Open == nil {
				continue
			}
			o := es[i].Open
			switch {
			case o.Before == nil:
				if o.Redo {
					later = append(later, cloneEntry(es[i]))
				}
				es = slices.Delete(es, i, i+1)
			case o.Redo:
				before := cloneEntry(*o.Before)
				e := cloneEntry(*o.Before)
				e.Open = &Open{Run: o.Run, Before: &before, Capture: slices.Clone(o.Capture), Redo: true, Undone: true}
				es[i] = e
			default:
				es[i] = cloneEntry(*o.Before)
			}
			changed = true
		}
		return es, changed
	})
	return later
}

// endOpen makes the entries with these ids what they were before the run
// that opened them (Open.Before), once a rollback did their objects again
// (written behind, as remove). An entry whose id before the run another
// entry has now (it was replaced) keeps its place, ended.
func (j *Journal) endOpen(ids []string) {
	j.updateBehind(func(es []Entry) ([]Entry, bool) {
		changed := false
		for _, id := range ids {
			i := indexOf(es, id)
			if i < 0 || es[i].Open == nil {
				continue
			}
			changed = true
			b := es[i].Open.Before
			if b == nil || b.ID != id && indexOf(es, b.ID) >= 0 {
				es[i].Open = nil
				continue
			}
			es[i] = cloneEntry(*b)
		}
		return es, changed
	})
}

// markApplied sets the entry with this id to applied (no-op when absent or
// already applied), written behind. The write is not made durable on its
// own: an entry a crash leaves pending is undone (or re-checked by up) like
// an applied one, so the mark only has to be durable by the next journaling.
func (j *Journal) markApplied(id string) {
	j.updateBehind(func(es []Entry) ([]Entry, bool) {
		i := indexOf(es, id)
		if i < 0 || es[i].State == StateApplied {
			return es, false
		}
		es[i].State = StateApplied
		es[i].Time = time.Now().UTC()
		return es, true
	})
}

func indexOf(es []Entry, id string) int {
	return slices.IndexFunc(es, func(e Entry) bool { return e.ID == id })
}

// persist writes entries and settled (atomicfile.WriteFile: temp file in
// the same directory, fsync, rename over journal.json, fsync the
// directory; without that last fsync unless durable). No entries removes
// the file (and the settled record with it: nothing left to restore).
func (j *Journal) persist(entries []Entry, settled json.RawMessage, durable bool) error {
	if len(entries) == 0 {
		if err := os.Remove(j.path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("remove empty journal: %w", err)
		}
		if !durable {
			return nil
		}
		if err := atomicfile.SyncDir(j.dir); err != nil {
			return fmt.Errorf("remove empty journal: %w", err)
		}
		return nil
	}
	data, err := encodeJournal(entries, settled)
	if err != nil {
		return fmt.Errorf("encode journal %s: %w", j.path, err)
	}
	// The state directory is private: create it here, before WriteFile
	// would with its 0o755.
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	write := atomicfile.WriteFile
	if !durable {
		write = atomicfile.ReplaceFile
	}
	if err := write(j.path, data, 0o600); err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	return nil
}
