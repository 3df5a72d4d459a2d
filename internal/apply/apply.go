package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/teardown"
)

// Options are the settings of one run.
type Options struct {
	StateDir string
	// LockWait bounds the wait for another vflag's lock (0: fail at once).
	LockWait time.Duration
	// DryRun: plan (no lock, no write).
	DryRun bool
	// NoRollback: on failure keep what this run changed (up --no-rollback).
	NoRollback bool
	// StopAfter and FailAt are up's testing hooks (teardown.Runner).
	StopAfter int
	FailAt    string
	// Abort, when set, cancels a rollback (a second interrupt); not for plan.
	Abort context.Context
	// BeforeSteps, when set, is called right before the first step;
	// AfterSteps right after the last (before up's boot-gate notes).
	BeforeSteps, AfterSteps func()
	// OnEvent, when set, sees each finished step.
	OnEvent func(teardown.Event)
	Log     *slog.Logger
	// Stderr gets the notes of up: each domain started after the boot gate
	// opened.
	Stderr io.Writer
}

// Result is a run's outcome.
type Result struct {
	// Ran: the steps ran (else Err came before any step: no report of
	// steps, the error alone).
	Ran bool
	// Events are the steps' events, in order.
	Events []teardown.Event
	// JournalIDs are the journal's entries before the run.
	JournalIDs map[string]bool
	// Stopped: StopAfter stopped the run between steps (as if killed).
	Stopped bool
	// Err is the run's error; a degraded host's says so.
	Err error
}

// Lock takes the state directory's lock, waiting at most o.LockWait while
// another vflag holds it (logging whom it waits for); release drops it.
func Lock(ctx context.Context, o Options) (release func(), err error) {
	bound := o.LockWait
	if bound < 0 {
		return nil, fmt.Errorf("--lock-wait: %s is negative", bound)
	}
	l, err := teardown.WaitLock(ctx, o.StateDir, bound, func(holder string) {
		o.log().Warn("waiting for another vflag to finish", "holder", holder, "bound", bound)
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Release() }, nil
}

// Recorded is how many entries the journal in stateDir holds (what up
// made and down has not undone). Take the Lock first.
func Recorded(stateDir string) (int, error) {
	j, err := teardown.OpenJournal(stateDir)
	if err != nil {
		return 0, err
	}
	return len(j.Entries()), nil
}

func (o Options) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

func (o Options) afterSteps() {
	if o.AfterSteps != nil {
		o.AfterSteps()
	}
}

func (o Options) runner(j *teardown.Journal, e *pipeline.Env) *teardown.Runner {
	r := &teardown.Runner{Journal: j, Undo: e.Undoers(), DryRun: o.DryRun, Log: o.Log,
		NoRollback: o.NoRollback, StopAfter: o.StopAfter, FailAt: o.FailAt, OnEvent: o.OnEvent, Moot: e.MootUndo(), Shared: e.SharedThing, Together: e.SlowTogether}
	if !o.DryRun {
		r.Abort = o.Abort
	}
	if o.BeforeSteps != nil {
		o.BeforeSteps()
	}
	return r
}

// Up converges the host of e (e.Stage, e.Force set) to its config; with
// o.DryRun it only plans. pfWait bounds the wait for the PFs.
func Up(ctx context.Context, e *pipeline.Env, pfWait time.Duration, o Options) Result {
	if !o.DryRun {
		if err := e.WaitPFs(ctx, pfWait); err != nil {
			return Result{Err: err}
		}
		release, err := Lock(ctx, o)
		if err != nil {
			return Result{Err: err}
		}
		defer release()
	}
	j, err := teardown.OpenJournal(o.StateDir)
	if err != nil {
		return Result{Err: err}
	}
	e.UseJournal(j)
	e.Recorded = j.Entries()
	groups, err := e.Preflight(ctx)
	if err != nil {
		return Result{Err: err}
	}
	res := Result{Ran: true, JournalIDs: map[string]bool{}}
	for _, en := range j.Entries() {
		res.JournalIDs[en.ID] = true
	}
	r := o.runner(j, e)
	runErr := e.Up(ctx, r, groups)
	// The applied marks and rollback's removals are written behind: on
	// disk before the lock is released.
	if err := j.Flush(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	o.afterSteps()
	res.Events = r.Results()
	if errors.Is(runErr, teardown.ErrDegraded) {
		runErr = fmt.Errorf("host degraded: every step succeeded and stays (no rollback), but %w", runErr)
	}
	if runErr != nil && errors.Is(runErr, teardown.ErrStopped) {
		res.Stopped = true
		return res
	}
	if !o.DryRun && e.Stage == pipeline.StageAll && (runErr == nil || errors.Is(runErr, teardown.ErrDegraded)) {
		o.markReady(e)
	}
	res.Err = runErr
	return res
}

// markReady records that the VF-LAG is up in this boot and starts the
// autostarted domains the qemu hook deferred until now (internal/bootgate).
// A domain that does not start is logged with libvirt's reason; it does not
// fail up, whose work is done.
func (o Options) markReady(e *pipeline.Env) {
	res, err := bootgate.New(o.StateDir).ReadyAndStart(func() (bootgate.Starter, error) { return e.Host().Virt() })
	if err != nil {
		o.log().Warn("boot readiness", "err", err)
	}
	for _, r := range res {
		switch {
		case r.Err != nil:
			o.log().Warn("autostart deferred at boot: domain did not start", "step", "libvirt.start", "domain", r.Domain, "err", r.Err)
		case r.Started && o.Stderr != nil:
			fmt.Fprintf(o.Stderr, "vflag: started domain %s (the hook deferred its autostart until the VF-LAG was up)\n", r.Domain)
		}
	}
}

// Down undoes, in reverse, what the journal records, on the host of e
// (e.Force set). haveConfig: the config was read (its groups narrow the
// preflight's checks).
func Down(ctx context.Context, e *pipeline.Env, haveConfig bool, o Options) Result {
	release, err := Lock(ctx, o)
	if err != nil {
		return Result{Err: err}
	}
	defer release()
	// From here on the hook refuses domains holding VFs until the next up.
	if err := bootgate.New(o.StateDir).Unready(); err != nil {
		return Result{Err: err}
	}
	j, err := teardown.OpenJournal(o.StateDir)
	if err != nil {
		return Result{Err: err}
	}
	e.UseJournal(j)
	if err := e.DownPreflight(j, haveConfig); err != nil {
		return Result{Err: err}
	}
	r := o.runner(j, e)
	downErr := r.Down(ctx)
	o.afterSteps()
	return Result{Ran: true, Events: r.Results(), Err: downErr}
}
