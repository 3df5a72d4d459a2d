package teardown

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkJournalStep times one step through the runner on a journal that
// already holds 40 entries (about a 2 x 64 VF-LAG run): the durable pending
// write (temp file, fsync, rename, fsync dir) before Apply and the applied
// mark after it (written behind: the next step's pending write waits for it).
func BenchmarkJournalStep(b *testing.B) {
	ctx := context.Background()
	j, err := OpenJournal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	// The applied marks are written behind: on disk before TempDir goes.
	b.Cleanup(func() {
		if err := j.Flush(); err != nil {
			b.Error(err)
		}
	})
	r := &Runner{Journal: j, Undo: Undoers{"bench": func(context.Context, json.RawMessage) (string, error) { return "", nil }}}
	step := func(id string) Step {
		return Step{Kind: "bench", ID: id,
			Check: func(context.Context) (Change, error) {
				return Change{Needed: true, Summary: "bench " + id, Record: map[string]string{"id": id, "prior": "x"}}, nil
			},
			Apply: func(context.Context) error { return nil }}
	}
	for i := range 40 {
		if err := r.Do(ctx, step(fmt.Sprintf("bench/%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	s := step("bench/hot")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Do(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
}
