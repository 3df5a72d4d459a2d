package teardown

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJournalMissingIsEmpty(t *testing.T) {
	for name, dir := range map[string]string{
		"missing file":      t.TempDir(),
		"missing state dir": filepath.Join(t.TempDir(), "nope"),
	} {
		j, err := OpenJournal(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if es := j.Entries(); len(es) != 0 {
			t.Errorf("%s: entries %v", name, es)
		}
		if j.Path() != filepath.Join(dir, "journal.json") {
			t.Errorf("%s: path %s", name, j.Path())
		}
	}
	if _, err := OpenJournal(""); err == nil {
		t.Error("OpenJournal(\"\") succeeded")
	}
}

func TestJournalLeftoverTempFileIgnored(t *testing.T) {
	ctx := t.Context()
	h, dir := newHost(), t.TempDir()
	if err := newRunner(t, h, dir).Do(ctx, h.pipeline()[0]...); err != nil {
		t.Fatal(err)
	}
	want := reopen(t, dir)

	// A crash between writing the temp file and the rename leaves the temp
	// file (possibly truncated) next to the intact journal.
	leftover := filepath.Join(dir, ".journal.json.tmp-12345")
	if err := os.WriteFile(leftover, []byte(`{"version":1,"entr`), 0o600); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, reopen(t, dir)); d != "" {
		t.Errorf("journal with a leftover temp file (-want +got):\n%s", d)
	}
	// And the journal keeps working: down empties it.
	if err := newRunner(t, h, dir).Down(ctx); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after down", baselineDump(), h.Dump())

	// A temp file alone (crash during the very first write): empty journal.
	if journalExists(t, dir) {
		t.Fatal("journal left")
	}
	if es := reopen(t, dir); len(es) != 0 {
		t.Errorf("entries %v", es)
	}
}

func TestJournalCorruptIsAnError(t *testing.T) {
	entry := `{"kind":"kv.set","id":"kv.set/a","record":{"x":1},"state":"applied","run":"r","time":"2026-11-22T10:00:00Z"}`
	tests := map[string]string{
		"empty file":        ``,
		"garbage":           `not json`,
		"truncated":         `{"version":1,"entries":[` + entry[:40],
		"trailing data":     `{"version":1,"entries":[]} {}`,
		"no version":        `{"entries":[` + entry + `]}`,
		"future version":    `{"version":2,"entries":[` + entry + `]}`,
		"duplicate id":      `{"version":1,"entries":[` + entry + `,` + entry + `]}`,
		"unknown state":     `{"version":1,"entries":[` + strings.Replace(entry, `"applied"`, `"done"`, 1) + `]}`,
		"no record":         `{"version":1,"entries":[` + strings.Replace(entry, `"record":{"x":1},`, ``, 1) + `]}`,
		"no kind":           `{"version":1,"entries":[` + strings.Replace(entry, `"kind":"kv.set",`, ``, 1) + `]}`,
		"entries not array": `{"version":1,"entries":{}}`,
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "journal.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := OpenJournal(dir)
			if err == nil {
				t.Fatalf("corrupt journal opened: %v", j.Entries())
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("error does not name the corrupt file: %v", err)
			}
		})
	}

	// The same entry, well-formed, opens; its record is compacted.
	dir := t.TempDir()
	content := "{\n \"version\": 1,\n \"entries\": [" + strings.Replace(entry, `{"x":1}`, `{ "x" : 1 }`, 1) + "]}\n"
	if err := os.WriteFile(filepath.Join(dir, "journal.json"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	es := reopen(t, dir)
	if len(es) != 1 || string(es[0].Record) != `{"x":1}` || es[0].State != StateApplied {
		t.Errorf("entries %+v", es)
	}
}

func TestJournalUnreadable(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "journal.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := OpenJournal(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "journal.json")) {
		t.Fatalf("OpenJournal on a directory: %v", err)
	}
}

func TestJournalPersistence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	j := openTestJournal(t, dir)
	add := func(id string) error {
		return j.update(func(es []Entry) ([]Entry, bool, error) {
			return append(es, Entry{Kind: "k", ID: id, Record: []byte(`{"a":"b"}`), State: StatePending, Run: "r"}), true, nil
		})
	}
	for _, id := range []string{"k/1", "k/2", "k/3"} {
		if err := add(id); err != nil {
			t.Fatal(err)
		}
	}
	j.markApplied("k/2")
	j.remove("k/1")
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	got := reopen(t, dir)
	if d := cmp.Diff(j.Entries(), got); d != "" {
		t.Errorf("disk differs from memory (-mem +disk):\n%s", d)
	}
	if d := cmp.Diff([]string{"k/2", "k/3"}, entryIDs(got)); d != "" {
		t.Errorf("ids:\n%s", d)
	}
	if got[0].State != StateApplied || got[1].State != StatePending {
		t.Errorf("states %+v", got)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v", st.Mode().Perm())
	}
	fst, err := os.Stat(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fst.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v", fst.Mode().Perm())
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	hidden, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(names) != 1 || len(hidden) != 0 {
		t.Errorf("state dir holds %v %v, want only journal.json", names, hidden)
	}

	// Entries is a copy.
	es := j.Entries()
	es[0].Record[0] = 'X'
	es[0].State = "mangled"
	if j.Entries()[0].State != StateApplied || j.Entries()[0].Record[0] != '{' {
		t.Error("Entries exposes the journal's memory")
	}

	// A failed write leaves memory as it was (never ahead of the disk).
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	if os.Geteuid() != 0 { // root ignores directory permissions
		if err := add("k/4"); err == nil {
			t.Error("write into a read-only directory succeeded")
		}
		if n := len(j.Entries()); n != 2 {
			t.Errorf("memory has %d entries after a failed write", n)
		}
	}
	_ = os.Chmod(dir, 0o700)

	// Emptying the journal removes the file; removing again is a no-op.
	for _, id := range []string{"k/2", "k/3", "k/3"} {
		j.remove(id)
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(j.Path()); !os.IsNotExist(err) {
		t.Errorf("empty journal file still there: %v", err)
	}
}

// TestWriteBehindNeverGoesBack: removals written behind race durable
// writes; a reader of journal.json sees the journal only move forward
// (removals and the durable counter never undone), and after Flush the file
// is the journal in memory.
func TestWriteBehindNeverGoesBack(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	const n = 60
	counter := func(v int) Entry {
		return Entry{Kind: "ctr", ID: "ctr/0", Record: []byte(strconv.Itoa(v)), State: StateApplied, Run: "r"}
	}
	if err := j.update(func(es []Entry) ([]Entry, bool, error) {
		es = append(es, counter(0))
		for i := range n {
			es = append(es, Entry{Kind: "k", ID: fmt.Sprintf("k/%03d", i), Record: []byte(`{}`), State: StateApplied, Run: "r"})
		}
		return es, true, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Widen the window between the state a write behind takes and its
	// write, where a durable write may go first.
	testHookBehind = func() { time.Sleep(200 * time.Microsecond) }
	t.Cleanup(func() { testHookBehind = nil })

	// progress reads the file: the durable counter and how many of the
	// k entries are removed (they go in order).
	progress := func() (ctr, removed int, ok bool) {
		data, err := os.ReadFile(j.Path())
		if err != nil {
			return 0, 0, false // between the remove and nothing (not reached: ctr stays)
		}
		jf, err := decodeJournal(data)
		if err != nil {
			t.Errorf("torn journal: %v", err)
			return 0, 0, false
		}
		removed = n
		for _, e := range jf.Entries {
			switch e.Kind {
			case "ctr":
				ctr, _ = strconv.Atoi(string(e.Record))
			case "k":
				if i, _ := strconv.Atoi(strings.TrimPrefix(e.ID, "k/")); i < removed {
					removed = i
				}
			}
		}
		return ctr, removed, true
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the reader
		defer wg.Done()
		lastCtr, lastRemoved := 0, 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctr, removed, ok := progress()
			if !ok {
				continue
			}
			if ctr < lastCtr || removed < lastRemoved {
				t.Errorf("journal.json went back: counter %d -> %d, removed %d -> %d", lastCtr, ctr, lastRemoved, removed)
				return
			}
			lastCtr, lastRemoved = ctr, removed
		}
	}()
	wg.Add(1)
	go func() { // durable writes beside the removals
		defer wg.Done()
		for v := 1; v <= n; v++ {
			if err := j.Replace("ctr/0", counter(v)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range n {
		j.remove(fmt.Sprintf("k/%03d", i))
		time.Sleep(100 * time.Microsecond)
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(j.Entries(), reopen(t, dir)); d != "" {
		t.Errorf("after Flush, disk differs from memory (-mem +disk):\n%s", d)
	}
	if ctr, removed, _ := progress(); ctr != n || removed != n {
		t.Errorf("after Flush: counter %d, removed %d; want %d, %d", ctr, removed, n, n)
	}
}

// TestDownSaysWhenTheJournalIsNotWritten: the state directory turns
// unwritable during a down; the undos run, and Down fails naming the
// journal, whose file keeps the entries (undone again by the next down).
// Once the directory is back, Flush writes what is in memory.
func TestDownSaysWhenTheJournalIsNotWritten(t *testing.T) {
	ctx := t.Context()
	h := newHost()
	base := t.TempDir()
	dir := filepath.Join(base, "state")
	if err := up(ctx, newRunner(t, h, dir), h); err != nil {
		t.Fatal(err)
	}
	before := len(reopen(t, dir))
	r := newRunner(t, h, dir)
	moved := filepath.Join(base, "moved")
	undo := r.Undo[kindSet]
	broke := false
	r.Undo[kindSet] = func(ctx context.Context, rec json.RawMessage) (string, error) {
		if !broke { // the first undo takes the directory away: a file in its place
			broke = true
			if err := os.Rename(dir, moved); err != nil {
				return "", err
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				return "", err
			}
		}
		return undo(ctx, rec)
	}
	err := r.Down(ctx)
	if err == nil || !strings.Contains(err.Error(), "undone, but journal "+filepath.Join(dir, "journal.json")) {
		t.Fatalf("down with the state directory gone: %v", err)
	}
	if h.Dump() != newHost().Dump() {
		t.Errorf("host not restored:\n%s", h.Dump())
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	onDisk, err := OpenJournal(dir) // not reopen: that would flush r's journal
	if err != nil {
		t.Fatal(err)
	}
	if got := len(onDisk.Entries()); got != before {
		t.Errorf("journal.json holds %d entries after the failed writes, want the %d from before", got, before)
	}
	if err := r.Journal.Flush(); err != nil {
		t.Fatalf("flush with the directory back: %v", err)
	}
	if journalExists(t, dir) {
		t.Errorf("journal still there after a flush of the empty journal: %v", reopen(t, dir))
	}
}
