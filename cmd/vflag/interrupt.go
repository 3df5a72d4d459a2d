package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interrupts turns SIGINT and SIGTERM into cancellations and says at once,
// on stderr, what each does (a long step such as an eswitch mode change
// takes seconds, and silence reads as a hang):
//
//   - the first cancels the run: up finishes its current step, then rolls
//     this run back (with --no-rollback: leaves it in the journal); down
//     stops after its current undo step;
//   - the second cancels the rollback: it stops after its current undo
//     step, and what is left stays in the journal for up (resume; the
//     rollback of a later up that fails finishes it) or down;
//   - later ones only say that vflag is already stopping.
//
// Tests run commands in-process without it (app.intr nil).
type interrupts struct {
	w                   io.Writer
	run, abort          context.Context
	cancelRun, cancelAb context.CancelFunc

	mu    sync.Mutex
	first string // what the first interrupt does for the running command
	n     int
}

// watchInterrupts starts the handler; stop releases the signals.
func watchInterrupts(w io.Writer) (*interrupts, func()) {
	in := &interrupts{w: w}
	in.run, in.cancelRun = context.WithCancel(context.Background())
	in.abort, in.cancelAb = context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				in.got(s)
			case <-done:
				return
			}
		}
	}()
	return in, func() { signal.Stop(sigs); close(done); in.cancelRun(); in.cancelAb() }
}

// expect sets what the first interrupt does for the running command.
func (in *interrupts) expect(what string) {
	if in == nil {
		return
	}
	in.mu.Lock()
	in.first = what
	in.mu.Unlock()
}

func (in *interrupts) got(s os.Signal) {
	in.mu.Lock()
	in.n++
	n, first := in.n, in.first
	in.mu.Unlock()
	name := "interrupt"
	if s == syscall.SIGTERM {
		name = "terminate"
	}
	switch {
	case n == 1:
		if first == "" {
			first = "stopping"
		}
		fmt.Fprintf(in.w, "\nvflag: %s: %s\n", name, first)
		in.cancelRun()
	case n == 2:
		fmt.Fprintf(in.w, "\nvflag: second %s: stopping after the current undo step; what is left stays in the journal (vflag up resumes, and the rollback of a later up that fails finishes this one; vflag down cleans up)\n", name)
		in.cancelAb()
	default:
		fmt.Fprintf(in.w, "\nvflag: %s: already stopping after the current step\n", name)
	}
}

// Notes of the first interrupt, per command.
const (
	interruptUp = "finishing the current step, then rolling back this run's changes " +
		"(interrupt again to stop the rollback after its current undo step; up --no-rollback keeps them instead)"
	interruptUpNoRollback = "finishing the current step; this run's changes stay in the journal (--no-rollback): " +
		"vflag up resumes, vflag down cleans up"
	interruptDown = "stopping after the current undo step; the journal keeps the rest for another vflag down"
)
