package teardown

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Lanes runs fn once per lane (names[i]: a group's name, its steps'
// Step.Group), all concurrently, each lane's Do calls in its own order.
// While they run, a failed Do does not roll back: the first failure
// cancels the other lanes' context, Lanes waits for every lane, and then
// rolls this run back once, in reverse journal order across every lane
// (unless NoRollback, or a lane was stopped by StopAfter). A lane that ends
// degraded (ErrDegraded) does not stop the others. The events the lanes
// emitted are then put in lane order (each lane's in its own order), so a
// report reads group by group whatever order the work finished in.
//
// fn's ctx is done when ctx is or another lane failed; fn should wrap its
// error with the lane's name.
func (r *Runner) Lanes(ctx context.Context, names []string, fn func(ctx context.Context, i int) error) error {
	r.hold(1)
	start := len(r.Results())
	lctx, cancel := context.WithCancel(ctx)
	errs := make([]error, len(names))
	parallel(len(names), func(i int) {
		errs[i] = fn(lctx, i)
		if errs[i] != nil && !errors.Is(errs[i], ErrDegraded) {
			cancel()
		}
	})
	sibling := lctx.Err() != nil && ctx.Err() == nil
	cancel()
	heldFail := r.hold(-1)
	r.sortResults(start, names)
	var failed, degraded []error
	stopped := false
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrDegraded):
			degraded = append(degraded, err)
		case sibling && errors.Is(err, context.Canceled) && !errors.Is(err, ErrInjected):
			// Stopped because another lane failed: that failure says it.
		default:
			stopped = stopped || errors.Is(err, ErrStopped)
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 && sibling {
		failed = append(failed, errors.New("a lane was cancelled without a failure"))
	}
	switch {
	case len(failed) == 0:
		return errors.Join(degraded...)
	case stopped || r.DryRun || !heldFail:
		// No step failed (a lane's own error before its steps): as a run
		// of one lane, no rollback.
		return errors.Join(failed...)
	}
	return r.fail(ctx, errors.Join(failed...))
}

// hold counts running Lanes calls (fail rolls back only outside them);
// the last one out learns whether a failure was held meanwhile.
func (r *Runner) hold(d int) (heldFail bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == 0 {
		r.heldFail = false
	}
	r.held += d
	return r.heldFail
}

// holding tells whether Lanes are running, noting a failure held.
func (r *Runner) holding() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held > 0 {
		r.heldFail = true
	}
	return r.held > 0
}

// sortResults puts the events from start on in the order of their
// groups in names (stable: each group's in its own order; an event of no
// lane after them).
func (r *Runner) sortResults(start int, names []string) {
	rank := func(g string) int {
		if i := slices.Index(names, g); i >= 0 {
			return i
		}
		return len(names)
	}
	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if start > len(r.results) {
		return
	}
	slices.SortStableFunc(r.results[start:], func(a, b Event) int { return rank(a.Group) - rank(b.Group) })
}

// splitLanes splits a journal's entries by group, each lane in journal
// order, lanes in the order of their first entry; nil when any entry has
// no group (a journal written before groups ran side by side, or a run
// without groups): such a journal is undone as one line, as it was done.
func splitLanes(entries []Entry) [][]Entry {
	var order []string
	by := map[string][]Entry{}
	for _, e := range entries {
		if e.Group == "" {
			return nil
		}
		if _, ok := by[e.Group]; !ok {
			order = append(order, e.Group)
		}
		by[e.Group] = append(by[e.Group], e)
	}
	out := make([][]Entry, len(order))
	for i, g := range order {
		out[i] = by[g]
	}
	return out
}

// undoLanes undoes each lane's entries in reverse, the lanes side by side
// (two NICs return to legacy in one mode-change time), the Serial kinds'
// entries one at a time in reverse journal order across the lanes. The
// events are then put lane by lane, the lane whose entries came last first.
func (r *Runner) undoLanes(ctx context.Context, entries []Entry, lanes [][]Entry, mode undoMode) (int, error) {
	chain := newSerialChain(entries, r.Serial)
	start := len(r.Results())
	done := make([]int, len(lanes))
	errs := make([]error, len(lanes))
	parallel(len(lanes), func(i int) {
		done[i], errs[i] = r.undoLine(ctx, lanes[i], mode, chain)
	})
	names := make([]string, len(lanes))
	for i, l := range lanes {
		names[len(lanes)-1-i] = l[0].Group
	}
	r.sortResults(start, names)
	n := 0
	for _, d := range done {
		n += d
	}
	return n, errors.Join(errs...)
}

// serialChain orders the undos of the Serial kinds' entries across lanes:
// each waits until the next such entry in the journal (a later one, of any
// lane) was undone, or its lane gave up on it. Waits go only to later
// entries, so the latest pending one always proceeds.
type serialChain struct {
	next map[string]string        // entry id -> the id of the next serial entry in the journal
	done map[string]chan struct{} // closed once the entry's undo is over
	once map[string]*sync.Once
}

func newSerialChain(entries []Entry, serial map[string]bool) *serialChain {
	c := &serialChain{next: map[string]string{}, done: map[string]chan struct{}{}, once: map[string]*sync.Once{}}
	last := ""
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if !serial[e.Kind] {
			continue
		}
		c.done[e.ID], c.once[e.ID] = make(chan struct{}), &sync.Once{}
		if last != "" {
			c.next[e.ID] = last
		}
		last = e.ID
	}
	return c
}

// wait blocks until the serial entries after those of batch (not in it)
// were undone.
func (c *serialChain) wait(ctx context.Context, batch []Entry) error {
	if c == nil {
		return nil
	}
	in := map[string]bool{}
	for _, e := range batch {
		in[e.ID] = true
	}
	for _, e := range batch {
		nx, ok := c.next[e.ID]
		if !ok || in[nx] {
			continue
		}
		select {
		case <-c.done[nx]:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the undo of %s (shared with another group): %w", nx, ctx.Err())
		}
	}
	return nil
}

// release marks the entries' undos over (done or given up).
func (c *serialChain) release(entries []Entry) {
	if c == nil {
		return
	}
	for _, e := range entries {
		if o, ok := c.once[e.ID]; ok {
			o.Do(func() { close(c.done[e.ID]) })
		}
	}
}
