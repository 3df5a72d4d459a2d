package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/testbed"
)

// crashRun runs vflag in a process of its own (the test binary running
// main) with --sim-crash-after n: the process kills itself with SIGKILL
// right after its nth write to the simulated kernel, OVSDB or libvirt, so
// nothing of the run's deferred code or journal write-behind runs after it
// (n < 0: it only counts). It returns whether the process was killed, and
// the writes it made ("N what", the log's lines).
func (b *bed) crashRun(n int, args ...string) (killed bool, writes []string, stderr string) {
	b.t.Helper()
	log := filepath.Join(b.simDir, host.WriteLog)
	if err := os.Remove(log); err != nil && !errors.Is(err, os.ErrNotExist) {
		b.t.Fatal(err)
	}
	all := append([]string{"--config", b.config, "--sim", b.simDir, "--state-dir", b.state, "--sim-crash-after", strconv.Itoa(n)}, args...)
	cmd := exec.Command(os.Args[0], all...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed = true
		}
	}
	if raw, rerr := os.ReadFile(log); rerr == nil {
		writes = strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(writes) == 1 && writes[0] == "" {
			writes = nil
		}
	}
	if !killed && err != nil && n < 0 {
		b.t.Fatalf("vflag %s (counting writes): %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return killed, writes, errb.String()
}

// crashTransition is one transition of the convergence table: from a host
// converged to from (nil: the clean host) to the config to.
type crashTransition struct{ from, to *variant }

func (c crashTransition) String() string {
	if c.from == nil {
		return "(clean) -> " + c.to.name
	}
	return c.from.name + " -> " + c.to.name
}

// crashBed is a bed at the transition's start: the baseline taken before
// any up, then converged to from.
func crashBed(t *testing.T, d daemons, c crashTransition) (b *bed, baseline string) {
	t.Helper()
	b = newBed(t, d, "")
	first := c.to
	if c.from != nil {
		first = c.from
	}
	b.useConfig(first.config(d))
	b.initSim()
	baseline = b.fullDump()
	if c.from != nil {
		b.mustVflag(0, "up")
	}
	b.useConfig(c.to.config(d))
	return b, baseline
}

// lastWrite is what the run wrote last before it was killed.
func lastWrite(writes []string) string {
	if len(writes) == 0 {
		return "(none)"
	}
	return writes[len(writes)-1]
}

// TestCrashTransitions is the crash property (docs/pipeline.md, crash
// safety) over the convergence table of TestConvergeTransitions (variants):
// for each transition (from the clean host to every config, from base to
// every config and back) a run killed by SIGKILL right after its Nth write
// to the kernel, OVSDB or libvirt (crashRun) leaves a host that
//
//   - up converges to the config (exit 0, the same host an uninterrupted
//     up of the transition gives), and down then returns to the baseline;
//   - down, on its own, returns to the baseline from before the first up;
//
// and a down killed after its Nth write, from the host the transition
// converged to, leaves a host that down returns to the baseline.
//
// make test samples (transition, N, which of the three) at random within
// a budget (VFLAG_CRASH_BUDGET, default 15s; seed logged,
// VFLAG_CRASH_SEED replays the sequence); VFLAG_CRASH_FULL=1 runs every
// transition at every N, each way (hours); VFLAG_CRASH_ONLY="base -> vlan"
// runs that one transition at every N, each way, and nothing else.
func TestCrashTransitions(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	d.startOVN(t) // the OVN variants
	d.virt.DefineDomain(t, "vm2")
	rng := rand.New(rand.NewPCG(testbed.Seed(t, "VFLAG_CRASH_SEED"), 0))
	full := os.Getenv("VFLAG_CRASH_FULL") == "1"
	budget := 15 * time.Second
	if s := os.Getenv("VFLAG_CRASH_BUDGET"); s != "" {
		var err error
		if budget, err = time.ParseDuration(s); err != nil {
			t.Fatalf("VFLAG_CRASH_BUDGET: %v", err)
		}
	}
	vs := variants()
	var ts []crashTransition
	for i := range vs {
		ts = append(ts, crashTransition{nil, &vs[i]})
	}
	for i := range vs[1:] {
		ts = append(ts, crashTransition{&vs[0], &vs[i+1]}, crashTransition{&vs[i+1], &vs[0]})
	}
	if only := os.Getenv("VFLAG_CRASH_ONLY"); only != "" {
		ts = slices.DeleteFunc(ts, func(c crashTransition) bool { return c.String() != only })
		if len(ts) == 0 {
			t.Fatalf("VFLAG_CRASH_ONLY=%q: no such transition (\"(clean) -> vlan\", \"base -> vlan\", \"vlan -> base\")", only)
		}
		full = true
	}

	// measured: per transition, the host an uninterrupted up gives and the
	// writes of that up and of the down after it.
	type measure struct {
		want       string
		upW, downW int
		ups        []string // the up's writes, "N what"
	}
	measured := map[string]measure{}
	measureOf := func(c crashTransition) measure {
		if m, ok := measured[c.String()]; ok {
			return m
		}
		b, baseline := crashBed(t, d, c)
		_, up, errs := b.crashRun(-1, "up")
		if len(up) == 0 {
			t.Fatalf("%s: up made no write:\n%s", c, errs)
		}
		m := measure{want: b.fullDump(), upW: len(up), ups: up}
		_, down, _ := b.crashRun(-1, "down")
		m.downW = len(down)
		if got := b.fullDump(); got != baseline {
			t.Fatalf("%s: down after an uninterrupted up does not give the baseline:\n%s", c, testbed.LineDiff(baseline, got, 10))
		}
		measured[c.String()] = m
		return m
	}

	samples, failures := 0, 0
	// check runs one crash case: way "up" (crashed up, then up, then
	// down), "down" (crashed up, then down) or "crashed-down" (up, down
	// crashed, then down).
	check := func(c crashTransition, way string, n int) {
		m := measureOf(c)
		samples++
		b, baseline := crashBed(t, d, c)
		failed := false
		failf := func(format string, args ...any) {
			failures++
			failed = true
			t.Errorf("%s, %s, crash after write %d: %s", c, way, n, fmt.Sprintf(format, args...))
		}
		// The daemons are shared by the cases: after a failure one that
		// leaves them changed ends the test (later cases would fail for it).
		defer func() {
			if !failed {
				return
			}
			b.vflag("down")
			if got := b.fullDump(); got != baseline {
				t.Fatalf("after the failed case down does not give the baseline, the daemons stay changed:\n%s", testbed.LineDiff(baseline, got, 10))
			}
		}()
		if way == "crashed-down" {
			b.mustVflag(0, "up")
			killed, writes, errs := b.crashRun(n, "down")
			if !killed {
				failf("down was not killed (%d writes):\n%s", len(writes), errs)
				return
			}
			if _, errs, code := b.vflag("down"); code != 0 {
				failf("(killed after %q) down: exit %d:\n%s", lastWrite(writes), code, errs)
			} else if got := b.fullDump(); got != baseline {
				failf("(killed after %q) down does not give the baseline:\n%s", lastWrite(writes), testbed.LineDiff(baseline, got, 10))
			}
			return
		}
		killed, writes, errs := b.crashRun(n, "up")
		if !killed {
			failf("up was not killed (%d writes):\n%s", len(writes), errs)
			return
		}
		after := lastWrite(writes)
		if way == "up" {
			if _, errs, code := b.vflag("up"); code != 0 {
				failf("(killed after %q) up: exit %d, want 0:\n%s", after, code, errs)
				return
			}
			if got := b.fullDump(); got != m.want {
				failf("(killed after %q) up does not give the host an uninterrupted up gives:\n%s", after, testbed.LineDiff(m.want, got, 10))
				return
			}
		}
		if _, errs, code := b.vflag("down"); code != 0 {
			failf("(killed after %q) down: exit %d:\n%s", after, code, errs)
		} else if got := b.fullDump(); got != baseline {
			failf("(killed after %q) down does not give the baseline:\n%s", after, testbed.LineDiff(baseline, got, 10))
		}
	}

	if full {
		for _, c := range ts {
			m := measureOf(c)
			for n := 1; n <= m.upW; n++ {
				check(c, "up", n)
				check(c, "down", n)
			}
			for n := 1; n <= m.downW; n++ {
				check(c, "crashed-down", n)
			}
		}
		t.Logf("%d crash cases, %d failed", samples, failures)
		return
	}
	// Always: a crash right after each write of an up that creates a
	// kernel object ("kernel: Add...": the bond, the tunnel's VLAN
	// interface, its address and routes, rate nodes), before whatever the
	// run writes next (a link's alias, its journal entry's applied mark);
	// for the links both ways out.
	for _, to := range []string{"tunnel-vxlan", "rates"} {
		i := slices.IndexFunc(vs, func(v variant) bool { return v.name == to })
		c := crashTransition{nil, &vs[i]}
		for _, w := range measureOf(c).ups {
			num, what, _ := strings.Cut(w, " ")
			if !strings.HasPrefix(what, "kernel: Add") {
				continue
			}
			n, _ := strconv.Atoi(num)
			t.Logf("%s, up, crash after write %d (%s)", c, n, what)
			check(c, "up", n)
			if what == "kernel: AddBond" || what == "kernel: AddVLAN" {
				t.Logf("%s, down, crash after write %d (%s)", c, n, what)
				check(c, "down", n)
			}
		}
	}
	start := time.Now()
	for time.Since(start) < budget && failures < 3 {
		c := ts[rng.IntN(len(ts))]
		way := []string{"up", "down", "crashed-down"}[rng.IntN(3)]
		m := measureOf(c)
		w := m.upW
		if way == "crashed-down" {
			w = m.downW
		}
		if w == 0 {
			continue
		}
		// After the last write too: the journal's end of the run is not
		// written yet.
		n := 1 + rng.IntN(w)
		t.Logf("%s, %s, crash after write %d of %d", c, way, n, w)
		check(c, way, n)
	}
	t.Logf("%d crash cases in %s (budget %s), %d failed", samples, time.Since(start).Round(time.Second), budget, failures)
}
