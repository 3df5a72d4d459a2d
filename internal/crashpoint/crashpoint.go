// Package crashpoint counts the writes a vflag process makes to the host
// (the simulated kernel, OVSDB, libvirt) and, when a test arms it, stops
// the process right after the Nth as a SIGKILL would: no deferred code, no
// journal flush, nothing more reaches the host or the disk. It is how the
// crash tests put a kill between any two writes of a run (docs/pipeline.md,
// crash safety). Only the simulated host arms it (internal/host); unarmed,
// Wrote costs one atomic load. It is a leaf: the standard library only.
package crashpoint

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
)

// counter is an armed process's count of writes.
type counter struct {
	mu    sync.Mutex
	n     int
	after int      // kill after this write (<= 0: never)
	log   *os.File // one line per write ("N what"); nil: none
}

var (
	armed atomic.Pointer[counter]
	// busy counts the writes under way (Begin, End); stopping: the kill
	// is coming, no write starts any more.
	busy     atomic.Int64
	stopping atomic.Bool
)

// Begin starts a write that must land whole or not at all (one simulated
// kernel request: the state and its namespace mirror), as a real kernel
// finishes a request whatever happens to the process that sent it; End
// ends it. A kill waits for the writes under way; a write that begins
// once the kill is coming never starts.
func Begin() {
	if armed.Load() == nil {
		return
	}
	busy.Add(1)
	if stopping.Load() {
		busy.Add(-1)
		select {}
	}
}

// End ends a write Begin started.
func End() {
	if armed.Load() == nil {
		return
	}
	busy.Add(-1)
}

// Arm starts counting: after the after-th write the process kills itself
// with SIGKILL (after <= 0: it only counts). With log set, each write is
// appended to that file as one line "N what" before the kill, so the test
// knows how many writes a run made and which one the process died after.
// Arming again replaces the count.
func Arm(after int, log string) error {
	c := &counter{after: after}
	if log != "" {
		f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("crashpoint: write log: %w", err)
		}
		c.log = f
	}
	armed.Store(c)
	return nil
}

// Armed tells whether the process counts its writes (a caller may then
// spend a little on naming them).
func Armed() bool { return armed.Load() != nil }

// Wrote counts one write to the host that has just been made (what names
// it: "kernel: ...", "ovsdb: ...", "libvirt: ..."), after its End when it
// was begun. On the armed count it does not return: the process is killed.
// Writes of other goroutines wait meanwhile, so none is counted after it.
func Wrote(what string) {
	c := armed.Load()
	if c == nil {
		return
	}
	c.mu.Lock()
	c.n++
	if c.log != nil {
		_, _ = fmt.Fprintf(c.log, "%d %s\n", c.n, what)
	}
	if c.after <= 0 || c.n < c.after {
		c.mu.Unlock()
		return
	}
	// The lock stays held: no other goroutine counts a write again, and
	// none begins one; those under way land whole first.
	stopping.Store(true)
	for busy.Load() > 0 {
		runtime.Gosched()
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
