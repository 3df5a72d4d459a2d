package pipeline

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/teardown"
)

// try runs preflight and up for the config with ctx, the runner tuned by
// tune (FailAt, OnEvent), and returns the events and up's error.
func (b *convergeBed) try(ctx context.Context, bc bedConfig, tune func(*teardown.Runner)) ([]teardown.Event, error) {
	b.t.Helper()
	e := New(b.config(bc), b.h, slog.New(slog.DiscardHandler))
	e.Poll = 5 * time.Millisecond
	gs, err := e.Preflight(ctx)
	if err != nil {
		b.t.Fatalf("preflight: %v", err)
	}
	r := &teardown.Runner{Journal: b.journal, Undo: e.Undoers(), Moot: e.MootUndo()}
	if tune != nil {
		tune(r)
	}
	err = e.Up(ctx, r, gs)
	return r.Results(), errors.Join(err, b.journal.Flush())
}

// rollbackRand is the random stream of one transition under seed.
func rollbackRand(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// changeIDs are the ids of the planned events that change the host (the
// forward changes and the removals, each a step FailAt can hit), in order.
func changeIDs(evs []teardown.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Changed && ev.Phase != teardown.PhaseWait && !slices.Contains(out, ev.ID) {
			out = append(out, ev.ID)
		}
	}
	return out
}

// TestRollbackRestoresRun is the property of issue 35 over the state
// table's transitions (stateCases: base to each config and each config
// back to base, and three other pairs at random; VFLAG_ROLLBACK_FULL=1:
// every pair): on a host converged to the first config, a failure
// injected at each step that up of the second applies (Runner.FailAt,
// after the step's real Apply) must leave the host, once rolled back,
// exactly as before that run (the same canonical state); then an
// interrupt at a random moment of the run (a cancel after a random number
// of the run's events, seed logged) must do the same; so must a run that
// fails after one that failed with --no-rollback at a random step and one
// whose rollback a second interrupt cut short (the host returns to the
// state before the first of them). down at the end still gives the
// baseline from before the first up.
func TestRollbackRestoresRun(t *testing.T) {
	d := startDaemons(t)
	cases := stateCases(exampleBed(t).with(slowVFs))
	seed := testbed.Seed(t, "VFLAG_ROLLBACK_SEED") // each transition draws from its own stream (rollbackRand): one replays alone too
	full := os.Getenv("VFLAG_ROLLBACK_FULL") == "1"
	type transition struct{ from, to stateCase }
	var ts, others []transition
	for i, c := range cases {
		for j, x := range cases {
			switch {
			case i == j:
			case i == 0 || j == 0:
				ts = append(ts, transition{c, x})
			default:
				others = append(others, transition{c, x})
			}
		}
	}
	// Base to each config and back, and a few of the others at random
	// (VFLAG_ROLLBACK_FULL=1: every pair).
	if !full {
		r := rollbackRand(seed, "pairs")
		r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
		others = others[:3]
	}
	ts = append(ts, others...)
	for _, tr := range ts {
		name := tr.from.name + " -> " + tr.to.name
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			b := newConvergeBed(t, &d, tr.from.cfg)
			baseline := b.state()
			b.up(tr.from.cfg, false)
			before := b.state()
			steps := changeIDs(b.up(tr.to.cfg, true))
			if len(steps) == 0 {
				t.Fatalf("%s: the plan applies nothing", name)
			}
			// back puts the host where the run found it when a rollback did not.
			back := func() {
				t.Helper()
				b.up(tr.from.cfg, false)
				if got := b.state(); got != before {
					t.Fatalf("%s: up of %s does not even give the state before the run again:\n%s", name, tr.from.name, testbed.LineDiff(before, got, 12))
				}
			}
			for i, id := range steps {
				_, err := b.try(context.Background(), tr.to.cfg, func(r *teardown.Runner) { r.FailAt = id })
				if !errors.Is(err, teardown.ErrInjected) {
					t.Errorf("%s, failure at step %d/%d %s: up returned %v, want the injected failure", name, i+1, len(steps), id, err)
				}
				if got := b.state(); got != before {
					t.Errorf("%s, failure at step %d/%d %s: after the rollback the host differs from before the run:\n%s", name, i+1, len(steps), id, testbed.LineDiff(before, got, 12))
					back()
				}
			}
			// An interrupt after a random number of the run's events
			// (VFLAG_ROLLBACK_FULL=1: after each).
			events := len(b.up(tr.to.cfg, true))
			ks := []int{1 + rollbackRand(seed, name).IntN(events)}
			if full {
				ks = ks[:0]
				for k := 1; k <= events; k++ {
					ks = append(ks, k)
				}
			}
			for _, k := range ks {
				ctx, cancel := context.WithCancel(context.Background())
				seen := 0
				_, err := b.try(ctx, tr.to.cfg, func(r *teardown.Runner) {
					r.OnEvent = func(teardown.Event) {
						if seen++; seen == k {
							cancel()
						}
					}
				})
				cancel()
				if err == nil {
					t.Logf("%s, interrupt after event %d: the run had ended (nothing to roll back)", name, k)
					back()
				} else if got := b.state(); got != before {
					t.Errorf("%s, interrupt after event %d of ~%d: after the rollback the host differs from before the run (%v):\n%s", name, k, events, err, testbed.LineDiff(before, got, 12))
					back()
				}
			}
			// A run that failed without rollback (--no-rollback), and one
			// whose rollback a second interrupt cut short after its first
			// undo: a later run that fails (at its last change) returns the
			// host to the state before the first of them.
			rng := rollbackRand(seed, name+"/kept")
			kept := steps[rng.IntN(len(steps))]
			if _, err := b.try(context.Background(), tr.to.cfg, func(r *teardown.Runner) { r.NoRollback, r.FailAt = true, kept }); !errors.Is(err, teardown.ErrInjected) {
				t.Errorf("%s, --no-rollback failure at %s: %v", name, kept, err)
			}
			if later := changeIDs(b.up(tr.to.cfg, true)); len(later) > 0 {
				abort, stop := context.WithCancel(context.Background())
				_, err := b.try(context.Background(), tr.to.cfg, func(r *teardown.Runner) {
					r.FailAt, r.Abort = later[len(later)-1], abort
					r.OnEvent = func(ev teardown.Event) {
						if ev.Phase == teardown.PhaseUndo {
							stop()
						}
					}
				})
				stop()
				if err == nil || !strings.Contains(err.Error(), "second interrupt") {
					t.Errorf("%s, a run after the one kept at %s: %v, want its rollback cut short", name, kept, err)
				}
				if later = changeIDs(b.up(tr.to.cfg, true)); len(later) > 0 {
					_, err := b.try(context.Background(), tr.to.cfg, func(r *teardown.Runner) { r.FailAt = later[len(later)-1] })
					if !errors.Is(err, teardown.ErrInjected) {
						t.Errorf("%s, the last of the later runs: %v", name, err)
					}
					if got := b.state(); got != before {
						t.Errorf("%s, after a run kept at %s, one whose rollback was cut short and one that failed at %s (%v): the host differs from before the first:\n%s", name, kept, later[len(later)-1], err, testbed.LineDiff(before, got, 12))
						back()
					}
				} else {
					// The cut rollback undid nothing the config wants: a
					// later up resumes (and ends them).
					b.up(tr.to.cfg, false)
					back()
				}
			} else {
				// It failed at its last change: a later up resumes (and ends it).
				b.up(tr.to.cfg, false)
				back()
			}
			b.down()
			if got := b.state(); got != baseline {
				t.Errorf("%s: down after the rollbacks does not give the baseline:\n%s", name, testbed.LineDiff(baseline, got, 12))
			}
		})
	}
}

// slowVFs makes the simulated VFs appear 15 ms apart (the example's 2 ms):
// a numvfs undo that returned before the VFs it made again were all there
// left the rollback's redo (MACs, drivers, representors and their ports)
// to a PF still making them, which 2 ms hid except on a loaded machine.
func slowVFs(c *config.Config) {
	lat, ok := c.Sim["latency"].(map[string]any)
	if !ok {
		lat = map[string]any{}
		c.Sim["latency"] = lat
	}
	lat["vf_create"] = "15ms"
}
