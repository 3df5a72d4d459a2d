package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// appliedIDs runs a full up on a fresh bed and returns the ids of the steps it applied, in order.
func appliedIDs(t *testing.T, d daemons) []string {
	b := newBed(t, d, "")
	b.initSim()
	rep := b.upJSON(2)
	var ids []string
	for _, s := range rep.Steps {
		if s.Changed {
			ids = append(ids, s.ID)
		}
	}
	b.mustVflag(0, "down")
	if len(ids) < 15 {
		t.Fatalf("only %d applied steps: %v", len(ids), ids)
	}
	return ids
}

// TestRollbackAtEveryStep injects a failure after each step's apply (the
// change half-happened) and checks that the run rolls itself back to the
// baseline, leaving an empty journal.
func TestRollbackAtEveryStep(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	for _, id := range appliedIDs(t, d) {
		t.Run(id, func(t *testing.T) {
			b := newBed(t, d, "")
			b.initSim()
			base := b.dump()
			out, errs, code := b.vflag("up", "--fail-at", id)
			if code != 1 {
				t.Fatalf("up with injected failure: exit %d\n%s\n%s", code, out, errs)
			}
			if !strings.Contains(errs, "injected failure") || !strings.Contains(errs, "rolled back") {
				t.Fatalf("error does not say what failed and that it rolled back:\n%s", errs)
			}
			if got := b.dump(); got != base {
				t.Fatalf("rollback did not return to baseline:\n%s", testbed.DiffText(base, got))
			}
			if entries := b.journalEntries(); len(entries) != 0 {
				t.Fatalf("journal not empty after rollback: %v", entries)
			}
		})
	}
}

// TestNoRollbackThenDown: with --no-rollback a failure leaves the changes
// and the journal; down then returns the host to its baseline.
func TestNoRollbackThenDown(t *testing.T) {
	d := startDaemons(t)
	ids := appliedIDs(t, d)
	for _, id := range []string{ids[len(ids)/2], ids[len(ids)-1]} {
		t.Run(id, func(t *testing.T) {
			b := newBed(t, d, "")
			b.initSim()
			base := b.dump()
			if _, _, code := b.vflag("up", "--no-rollback", "--fail-at", id); code != 1 {
				t.Fatalf("exit %d", code)
			}
			if b.dump() == base {
				t.Fatal("no-rollback run left the host at baseline")
			}
			if len(b.journalEntries()) == 0 {
				t.Fatal("no journal after a failed run")
			}
			b.mustVflag(0, "down")
			if got := b.dump(); got != base {
				t.Fatalf("down did not return to baseline:\n%s", testbed.DiffText(base, got))
			}
		})
	}
}

// TestResumeAfterKill stops up after k applied steps, as a kill between
// steps would, then checks both ways out: up resumes to the converged host
// (the same as an uninterrupted up), and down from the stopped state returns
// the baseline.
func TestResumeAfterKill(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	ids := appliedIDs(t, d)
	// The converged state of an uninterrupted run, for comparison.
	ref := newBed(t, d, "")
	ref.initSim()
	ref.upJSON(2)
	converged := canonical(ref.dump())
	ref.mustVflag(0, "down")

	for k := 1; k < len(ids); k++ {
		t.Run(strconv.Itoa(k), func(t *testing.T) {
			for _, way := range []string{"resume", "down"} {
				b := newBed(t, d, "")
				b.initSim()
				base := b.dump()
				if _, errs, code := b.vflag("up", "--stop-after", strconv.Itoa(k)); code != 3 {
					t.Fatalf("stop-after %d: exit %d\n%s", k, code, errs)
				}
				if way == "resume" {
					rep := b.upJSON(2)
					if rep.Error != "" {
						t.Fatalf("resume: %s", rep.Error)
					}
					if got := canonical(b.dump()); got != converged {
						t.Fatalf("resumed host differs from an uninterrupted up:\n%s", testbed.DiffText(converged, got))
					}
					b.upJSON(0) // converged: no change
				}
				b.mustVflag(0, "down")
				if got := b.dump(); got != base {
					t.Fatalf("%s then down: not at baseline:\n%s", way, testbed.DiffText(base, got))
				}
			}
		})
	}
}

func (b *bed) journalEntries() []json.RawMessage {
	b.t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.state, "journal.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		b.t.Fatal(err)
	}
	var j struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		b.t.Fatal(err)
	}
	return j.Entries
}
