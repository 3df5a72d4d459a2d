package main

import (
	"bufio"
	"context"
	"fmt"

	"github.com/vflag/vflag/internal/status"
)

func (a *app) runStatus(ctx context.Context) error {
	tree := a.v.GetBool("status-tree")
	if out := a.v.GetString("output"); tree && out != "text" {
		return fmt.Errorf("--tree is a picture for the terminal: not with -o %s", out)
	}
	cfg, err := a.loadConfig(false)
	if err != nil {
		return err
	}
	a.warm = warmFor(cfg, true)
	h, err := a.openHost(cfg, cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	// systemd's answer about the boot units comes beside the host's reads.
	boot := make(chan []string, 1)
	go func() { boot <- status.FailedBootUnits(ctx, a.v.GetString("sim") != "") }()
	st := status.Gather(ctx, cfg, h, a.stateDir())
	st.Version = version
	status.AddBootProblems(&st, <-boot)
	status.AddJournalProblem(&st, a.stateDir())
	// One write for the whole output, not one per line (a line per VF).
	out := bufio.NewWriterSize(a.stdout, 64<<10)
	var err2 error
	switch a.v.GetString("output") {
	case "json":
		err2 = writeJSON(out, st)
	case "prometheus":
		err2 = status.WritePrometheus(out, st)
	default:
		if tree {
			status.WriteTree(out, st)
		} else {
			status.WriteText(out, st)
		}
	}
	if ferr := out.Flush(); err2 == nil {
		err2 = ferr
	}
	if err2 != nil {
		return err2
	}
	notUp := false
	for _, g := range st.Groups {
		switch {
		case g.NotUp && len(g.Problems) == 1:
			notUp = true
		case len(g.Problems) > 0:
			return exitError{code: exitProblems}
		}
	}
	if notUp {
		return exitError{code: exitNotUp}
	}
	return nil
}

// exitProblems is status's exit code when a group has a problem (its
// output is complete). No other command uses it: 1 is an error, 2 a change
// (--detailed-exit-codes), 3 up's test-only stop between steps.
const exitProblems = 4

// exitNotUp is status's exit code when no group has a problem but a group
// is not up (never brought up, or brought down: "not up: run vflag up"),
// distinct from a host that drifted from its config (exitProblems).
const exitNotUp = 5
