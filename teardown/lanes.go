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
// (two NICs return to legacy in one mode-change time), the undos of entries
// that share one thing (Shared) one at a time in reverse journal order
// across the lanes. The events are then put lane by lane, the lane whose
// entries came last first.
func (r *Runner) undoLanes(ctx context.Context, entries []Entry, lanes [][]Entry, mode undoMode) (int, error) {
	chain := newSerialChain(entries, r.Shared)
	g := newGathering(lanes, r.Together)
	start := len(r.Results())
	done := make([]int, len(lanes))
	errs := make([]error, len(lanes))
	parallel(len(lanes), func(i int) {
		done[i], errs[i] = r.undoLine(ctx, lanes[i], mode, &lineSync{chain: chain, gather: g})
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

// lineSync is what one lane's undos (undoLine) share with the other
// lanes': the order of the entries that share something (chain) and the
// gathering of the Together entries (gather, nil when no lane has one).
type lineSync struct {
	chain   *serialChain
	gather  *gathering
	arrived bool
}

// wait blocks until batch may be undone: at the lane's first Together
// entry, until every lane that has one reached its own (or stopped); for
// entries that share something, until the later ones were undone.
func (s *lineSync) wait(ctx context.Context, batch []Entry) error {
	if s == nil {
		return nil
	}
	if s.gather != nil && !s.arrived && slices.ContainsFunc(batch, s.gather.together) {
		s.arrived = true
		if err := s.gather.arrive(ctx); err != nil {
			return err
		}
	}
	return s.chain.wait(ctx, batch, s.blocked)
}

// blocked is told that the lane waits for another lane's undo, and
// returns what to call when it resumes. Before the lane reached the
// gathering, it is counted there meanwhile: the lane it waits for may be
// waiting at the gathering, for it.
func (s *lineSync) blocked() (resumed func()) {
	if s.gather == nil || s.arrived {
		return func() {}
	}
	s.gather.add(-1)
	return func() { s.gather.add(1) }
}

// release marks the entries' undos over (done or given up).
func (s *lineSync) release(entries []Entry) {
	if s != nil {
		s.chain.release(entries)
	}
}

// end is release for a lane that stopped: its entries, and its place in
// the gathering if it had not reached it.
func (s *lineSync) end(entries []Entry) {
	if s == nil {
		return
	}
	s.chain.release(entries)
	if s.gather != nil && !s.arrived {
		s.arrived = true
		s.gather.add(-1)
	}
}

// gathering is where the lanes that have Together entries meet before
// undoing the first of them (Runner.Together).
type gathering struct {
	together func(Entry) bool
	mu       sync.Mutex
	left     int           // lanes yet to arrive or stop
	all      chan struct{} // closed when left reaches 0
}

// newGathering is the gathering of the lanes that have a together entry;
// nil when fewer than two have.
func newGathering(lanes [][]Entry, together func(Entry) bool) *gathering {
	if together == nil {
		return nil
	}
	n := 0
	for _, l := range lanes {
		if slices.ContainsFunc(l, together) {
			n++
		}
	}
	if n < 2 {
		return nil
	}
	return &gathering{together: together, left: n, all: make(chan struct{})}
}

// arrive counts the lane in and waits for the others.
func (g *gathering) arrive(ctx context.Context) error {
	g.add(-1)
	select {
	case <-g.all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the other groups to start their slow steps together: %w", ctx.Err())
	}
}

// add changes the count of lanes yet to arrive; at 0 the gathering is
// over for good.
func (g *gathering) add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.all:
		return
	default:
	}
	g.left += d
	if g.left == 0 {
		close(g.all)
	}
}

// serialChain orders the undos of the entries that share something
// (Runner.Shared) across lanes: each waits until the next entry in the
// journal (a later one, of any lane) that shares the same thing was undone,
// or its lane gave up on it. Waits go only to later entries, so the latest
// pending one of each thing always proceeds.
type serialChain struct {
	next map[string]string        // entry id -> the id of the next entry in the journal sharing its thing
	done map[string]chan struct{} // closed once the entry's undo is over
	once map[string]*sync.Once
}

func newSerialChain(entries []Entry, shared func(Entry) string) *serialChain {
	c := &serialChain{next: map[string]string{}, done: map[string]chan struct{}{}, once: map[string]*sync.Once{}}
	if shared == nil {
		return c
	}
	last := map[string]string{} // thing -> the latest entry id sharing it
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		thing := shared(e)
		if thing == "" {
			continue
		}
		c.done[e.ID], c.once[e.ID] = make(chan struct{}), &sync.Once{}
		if l, ok := last[thing]; ok {
			c.next[e.ID] = l
		}
		last[thing] = e.ID
	}
	return c
}

// wait blocks until the entries after those of batch (not in it) that
// share their things were undone.
func (c *serialChain) wait(ctx context.Context, batch []Entry, blocked func() (resumed func())) error {
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
			continue
		default:
		}
		resumed := blocked()
		select {
		case <-c.done[nx]:
			resumed()
		case <-ctx.Done():
			resumed()
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
