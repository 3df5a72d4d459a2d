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
	// Time of the entry's last state change.
	Time time.Time `json:"time"`
}

const (
	journalName    = "journal.json"
	journalVersion = 1
)

// journalFile is the on-disk format of journal.json.
type journalFile struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Journal is the write-ahead journal in <stateDir>/journal.json. Its methods
// are safe for concurrent use. Every mutation that journals a change is
// durable before it returns; an entry's removal and its mark as applied are
// written behind (see updateBehind) and are on disk once Flush returns.
// Only the holder of the state directory's Lock should mutate it.
type Journal struct {
	mu      sync.Mutex // guards entries, gen, behind and behindErr
	dir     string
	path    string
	entries []Entry
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
	entries, err := decodeJournal(data)
	if err != nil {
		return nil, fmt.Errorf("journal %s is corrupt (refusing to treat it as empty: it records host changes to undo): %w", j.path, err)
	}
	j.entries = entries
	return j, nil
}

func decodeJournal(data []byte) ([]Entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var jf journalFile
	if err := dec.Decode(&jf); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the journal object")
	}
	if jf.Version != journalVersion {
		return nil, fmt.Errorf("unsupported journal version %d (want %d)", jf.Version, journalVersion)
	}
	seen := make(map[string]bool, len(jf.Entries))
	for i := range jf.Entries {
		e := &jf.Entries[i]
		switch {
		case e.Kind == "" || e.ID == "":
			return nil, fmt.Errorf("entry %d: empty kind or id", i)
		case e.State != StatePending && e.State != StateApplied:
			return nil, fmt.Errorf("entry %s: unknown state %q", e.ID, e.State)
		case len(e.Record) == 0:
			return nil, fmt.Errorf("entry %s: no record", e.ID)
		case seen[e.ID]:
			return nil, fmt.Errorf("entry %s: duplicate id", e.ID)
		}
		seen[e.ID] = true
		var buf bytes.Buffer
		if err := json.Compact(&buf, e.Record); err != nil {
			return nil, fmt.Errorf("entry %s: record: %w", e.ID, err)
		}
		e.Record = buf.Bytes()
	}
	return jf.Entries, nil
}

// encodeJournal is journal.json's content for these entries, as
// decodeJournal reads it.
func encodeJournal(entries []Entry) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "->" in summaries readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(journalFile{Version: journalVersion, Entries: entries}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Path is the journal file's path.
func (j *Journal) Path() string { return j.path }

// Entries returns a copy of the journal's entries in the order they were
// first journaled.
func (j *Journal) Entries() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return cloneEntries(j.entries)
}

func cloneEntries(in []Entry) []Entry {
	if in == nil {
		return nil
	}
	out := make([]Entry, len(in))
	for i, e := range in {
		e.Record = slices.Clone(e.Record)
		out[i] = e
	}
	return out
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
	j.writeMu.Lock()
	err = j.persist(next, true)
	if err == nil {
		j.gen++
		j.diskGen = j.gen
	}
	j.writeMu.Unlock()
	if err != nil {
		return err
	}
	j.entries = next
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
		gen, entries := j.gen, j.entries
		j.mu.Unlock()
		if testHookBehind != nil {
			testHookBehind()
		}
		var err error
		j.writeMu.Lock()
		if j.diskGen < gen {
			if err = j.persist(entries, false); err == nil {
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
	err := j.persist(j.entries, false)
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
func (j *Journal) Replace(id string, e Entry) error {
	return j.update(func(es []Entry) ([]Entry, bool, error) {
		i := indexOf(es, id)
		if i < 0 {
			return nil, false, fmt.Errorf("journal: no entry %s to replace", id)
		}
		if k := indexOf(es, e.ID); k >= 0 && k != i {
			return nil, false, fmt.Errorf("journal: entry %s exists already", e.ID)
		}
		es[i] = e
		return es, true, nil
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

// persist writes entries (atomicfile.WriteFile: temp file in the same
// directory, fsync, rename over journal.json, fsync the directory; without
// that last fsync unless durable). No entries removes the file.
func (j *Journal) persist(entries []Entry, durable bool) error {
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
	data, err := encodeJournal(entries)
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
