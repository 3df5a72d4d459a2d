package teardown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// laneHost is a host of named values; each change and undo takes lat and
// is logged in order. With meet set, each lane's first change waits there
// for the other lanes' first changes.
type laneHost struct {
	mu   sync.Mutex
	v    map[string]string
	log  []string
	lat  time.Duration
	meet *meeting
}

// meeting is where each lane's first change (a key's first byte names its
// lane) waits, at most 5 s, until every lane's first change has begun:
// lanes that run one after the other never meet, and the first lane's wait
// runs out (missed).
type meeting struct {
	mu     sync.Mutex
	lanes  int
	seen   map[byte]bool
	all    chan struct{}
	missed []string
}

func newMeeting(lanes int) *meeting {
	return &meeting{lanes: lanes, seen: map[byte]bool{}, all: make(chan struct{})}
}

func (m *meeting) arrive(k string) {
	m.mu.Lock()
	first := !m.seen[k[0]]
	m.seen[k[0]] = true
	if first && len(m.seen) == m.lanes {
		close(m.all)
	}
	m.mu.Unlock()
	if !first {
		return
	}
	select {
	case <-m.all:
	case <-time.After(5 * time.Second):
		m.mu.Lock()
		m.missed = append(m.missed, k)
		m.mu.Unlock()
	}
}

func (h *laneHost) set(k, v string) {
	if h.meet != nil {
		h.meet.arrive(k)
	}
	time.Sleep(h.lat)
	h.mu.Lock()
	defer h.mu.Unlock()
	if v == "" {
		delete(h.v, k)
	} else {
		h.v[k] = v
	}
	h.log = append(h.log, k+"="+v)
}

func (h *laneHost) step(group, k string) Step {
	return Step{Kind: "val", ID: "val/" + k, Group: group,
		Check: func(context.Context) (Change, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return Change{Needed: h.v[k] != "on", Summary: k, Record: map[string]string{"k": k}}, nil
		},
		Apply: func(context.Context) error { h.set(k, "on"); return nil }}
}

func (h *laneHost) undoers() Undoers {
	return Undoers{"val": func(_ context.Context, rec json.RawMessage) (string, error) {
		var r map[string]string
		if err := json.Unmarshal(rec, &r); err != nil {
			return "", err
		}
		h.set(r["k"], "")
		return "", nil
	}}
}

// lanesUp runs n steps per group, one Do each, the groups as lanes.
func lanesUp(ctx context.Context, r *Runner, h *laneHost, groups []string, n int) error {
	return r.Lanes(ctx, groups, func(ctx context.Context, i int) error {
		for s := range n {
			if err := r.Do(ctx, h.step(groups[i], fmt.Sprintf("%s.%d", groups[i], s))); err != nil {
				return fmt.Errorf("group %s: %w", groups[i], err)
			}
		}
		return nil
	})
}

// TestLanesRunSideBySide: the two groups' first changes are under way at
// once (they meet); the events come out group by group; down undoes them
// side by side (they meet again), each group in reverse. (How long they
// take against one lane is make bench's several-NICs row.)
func TestLanesRunSideBySide(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	h := &laneHost{v: map[string]string{}, lat: 10 * time.Millisecond, meet: newMeeting(2)}
	r := &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t)}
	if err := lanesUp(context.Background(), r, h, []string{"a", "b"}, 4); err != nil {
		t.Fatal(err)
	}
	if m := h.meet.missed; len(m) > 0 {
		t.Errorf("up: the change of %v waited 5 s for the other lane's first change: the lanes did not run side by side", m)
	}
	var groups []string
	for _, ev := range r.Results() {
		groups = append(groups, ev.Group)
	}
	if want := []string{"a", "a", "a", "a", "b", "b", "b", "b"}; !slices.Equal(groups, want) {
		t.Errorf("events' groups %v, want %v", groups, want)
	}
	h.log, h.meet = nil, newMeeting(2)
	dr := &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t)}
	if err := dr.Down(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := h.meet.missed; len(m) > 0 {
		t.Errorf("down: the undo of %v waited 5 s for the other lane's first undo: not side by side", m)
	}
	checkReverse(t, h.log, "a")
	checkReverse(t, h.log, "b")
	if len(h.v) != 0 {
		t.Errorf("after down: %v", h.v)
	}
}

// checkReverse: the group's undos in the log come last step first.
func checkReverse(t *testing.T, log []string, g string) {
	t.Helper()
	var mine []string
	for _, l := range log {
		if l[0] == g[0] {
			mine = append(mine, l)
		}
	}
	want := []string{g + ".3=", g + ".2=", g + ".1=", g + ".0="}
	if !slices.Equal(mine, want) {
		t.Errorf("group %s undone as %v, want %v", g, mine, want)
	}
}

// TestLanesFailureRollsBackEveryLane: a failure in one group's middle step
// stops the other group and rolls back both, once, each in reverse.
func TestLanesFailureRollsBackEveryLane(t *testing.T) {
	j := openTestJournal(t, t.TempDir())
	h := &laneHost{v: map[string]string{}, lat: 10 * time.Millisecond}
	r := &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t), FailAt: "val/b.2"}
	err := lanesUp(context.Background(), r, h, []string{"a", "b"}, 4)
	if !errors.Is(err, ErrInjected) || !errors.Is(err, ErrRolledBack) {
		t.Fatalf("err = %v, want the injected failure, rolled back", err)
	}
	if len(h.v) != 0 {
		t.Errorf("after the rollback: %v, want nothing", h.v)
	}
	if len(j.Entries()) != 0 {
		t.Errorf("journal after the rollback: %v", entryIDs(j.Entries()))
	}
}

// TestSharedUndoneInJournalOrder: entries that share one thing are undone
// one at a time, in reverse journal order, across the lanes.
func TestSharedUndoneInJournalOrder(t *testing.T) {
	h := &laneHost{v: map[string]string{}, lat: 5 * time.Millisecond}
	// a.0, then b.0 .. b.3, then a.1 .. a.3: all serial.
	j := journaled(t, h, []string{"a.0", "b.0", "b.1", "b.2", "b.3", "a.1", "a.2", "a.3"})
	ctx := context.Background()
	dr := &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t), Shared: func(Entry) string { return "one" }}
	if err := dr.Down(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.3=", "a.2=", "a.1=", "b.3=", "b.2=", "b.1=", "b.0=", "a.0="}
	if !slices.Equal(h.log, want) {
		t.Errorf("undone as %v, want %v", h.log, want)
	}
}

// TestSharedThingsApart: entries that share different things do not wait
// for each other. Lane a's entry (thing x) came first in the journal, lane
// b's (thing y) after it; each lane's undo waits (meeting) for the other's
// to begin. Chained in one line across things, a's undo would wait for b's
// to end and b's would wait for a's to begin: the meeting is missed.
func TestSharedThingsApart(t *testing.T) {
	h := &laneHost{v: map[string]string{}}
	j := journaled(t, h, []string{"a.0", "b.0"})
	ctx := context.Background()
	h.meet = newMeeting(2)
	thing := map[string]string{"val/a.0": "x", "val/b.0": "y"}
	dr := &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t), Shared: func(e Entry) string { return thing[e.ID] }}
	if err := dr.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if len(h.meet.missed) > 0 {
		t.Errorf("undos of %v waited for the other lane's: entries sharing different things were chained", h.meet.missed)
	}
	if len(h.v) != 0 {
		t.Errorf("left after down: %v", h.v)
	}
}

// TestTogetherStartsSlowStepsTogether: a lane that reaches its Together
// entry first waits there until the other lane reached its own, so lane
// a's "mode" undo runs after lane b's three short undos before b's own
// "mode" (pre3, pre2, pre1); undone as it comes, a's would end before
// b's pre1 does.
func TestTogetherStartsSlowStepsTogether(t *testing.T) {
	h := &laneHost{v: map[string]string{}, lat: 5 * time.Millisecond}
	j := journaled(t, h, []string{"a.mode", "b.mode", "a.pre", "b.pre1", "b.pre2", "b.pre3"})
	ctx := context.Background()
	dr := &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t),
		Together: func(e Entry) bool { return strings.HasSuffix(e.ID, ".mode") }}
	if err := dr.Down(ctx); err != nil {
		t.Fatal(err)
	}
	at := func(k string) int { return slices.Index(h.log, k+"=") }
	if at("a.mode") < at("b.pre1") {
		t.Errorf("undone as %v: a.mode before b.pre1, want the two modes after every pre", h.log)
	}
	if len(h.v) != 0 {
		t.Errorf("left after down: %v", h.v)
	}
}

// TestTogetherWithSharedNoDeadlock: lane a waits at its Together entry
// for lane b, and lane b waits (Shared) for the undo of an entry that lane
// a undoes after its Together one. A lane waiting for another's undo
// counts as arrived, so the down ends.
func TestTogetherWithSharedNoDeadlock(t *testing.T) {
	h := &laneHost{v: map[string]string{}}
	j := journaled(t, h, []string{"b.mode", "b.x", "a.y", "a.mode"})
	ctx := context.Background()
	dr := &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t),
		Together: func(e Entry) bool { return strings.HasSuffix(e.ID, ".mode") },
		Shared: func(e Entry) string {
			if strings.HasSuffix(e.ID, ".x") || strings.HasSuffix(e.ID, ".y") {
				return "one"
			}
			return ""
		}}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := dr.Down(dctx); err != nil {
		t.Fatalf("down: %v (undone %v)", err, h.log)
	}
	want := []string{"a.mode=", "a.y=", "b.x=", "b.mode="}
	if !slices.Equal(h.log, want) {
		t.Errorf("undone as %v, want %v", h.log, want)
	}
}

// journaled is a journal of h's steps for keys, each its own Do call, the
// lane a key's first byte; h's log starts empty after.
func journaled(t *testing.T, h *laneHost, keys []string) *Journal {
	t.Helper()
	j := openTestJournal(t, t.TempDir())
	r := &Runner{Journal: j, Undo: h.undoers(), Log: testLogger(t)}
	for _, k := range keys {
		if err := r.Do(context.Background(), h.step(k[:1], k)); err != nil {
			t.Fatal(err)
		}
	}
	h.log = nil
	return j
}
