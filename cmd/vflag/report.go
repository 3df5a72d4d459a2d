package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/teardown"
)

// stepResult is one step in a command's report.
type stepResult struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Phase   string `json:"phase"`
	Summary string `json:"summary"`
	Changed bool   `json:"changed"`
	// Action of a change: add (vflag never made it), change (vflag made it
	// and it differs now: config change or drift), remove (vflag made it and
	// the config no longer wants it; and every undo of down).
	Action string `json:"action,omitempty"`
	// Disruptive: it breaks the hardware LAG and the VFs of running
	// domains; Domains are the running domains it would break.
	Disruptive bool     `json:"disruptive,omitempty"`
	Domains    []string `json:"domains,omitempty"`
	DurationMS float64  `json:"duration_ms"`
	Error      string   `json:"error,omitempty"`
}

// report is what up, plan and down print: text or JSON, with a changed field
// for automation (Ansible's changed_when).
type report struct {
	Command string       `json:"command"`
	Version string       `json:"version"`
	Changed bool         `json:"changed"`
	Changes int          `json:"changes"`
	Steps   []stepResult `json:"steps"`
	Error   string       `json:"error,omitempty"`
}

func (a *app) report(command string, events []teardown.Event, runErr error) error {
	rep := report{Command: command, Version: version, Steps: []stepResult{}}
	for _, ev := range events {
		sr := stepResult{Kind: ev.Kind, ID: ev.ID, Phase: ev.Phase, Summary: ev.Summary, Changed: ev.Changed,
			DurationMS: float64(ev.Duration.Microseconds()) / 1000, Disruptive: ev.Disruptive, Domains: ev.Domains}
		switch {
		case !ev.Changed:
		case ev.Phase == teardown.PhaseUndo:
			sr.Action = "remove"
		case a.journalIDs[ev.ID]:
			sr.Action = "change"
		default:
			sr.Action = "add"
		}
		if ev.Err != nil {
			sr.Error = ev.Err.Error()
		}
		if ev.Changed && ev.Err == nil {
			rep.Changes++
		}
		rep.Steps = append(rep.Steps, sr)
	}
	rep.Changed = rep.Changes > 0
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	if a.v.GetString("output") == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writeReportText(a.stdout, rep)
	}
	switch {
	case runErr != nil && a.v.GetString("output") == "json":
		fmt.Fprintln(a.stderr, "vflag:", runErr)
		return exitError{code: 1}
	case runErr != nil:
		return runErr
	case rep.Changed && a.v.GetBool("detailed-exit-codes"):
		return exitError{code: 2}
	}
	return nil
}

// failed reports an error before any step ran: with -o json a report
// whose error is set (automation reads stdout), else the error alone.
func (a *app) failed(command string, err error) error {
	if a.v.GetString("output") == "json" {
		return a.report(command, nil, err)
	}
	return err
}

func writeReportText(w io.Writer, rep report) {
	verb := map[string]string{"up": "changed", "plan": "would change", "down": "undid"}[rep.Command]
	if rep.Changes == 0 && rep.Error == "" {
		what := map[string]string{"up": "host already converged, no write made", "plan": "host already converged, up would change nothing",
			"down": "nothing to undo"}[rep.Command]
		fmt.Fprintf(w, "vflag %s: no changes (%s)\n", rep.Command, what)
		return
	}
	applied, undone := 0, 0
	for _, st := range rep.Steps {
		switch {
		case !st.Changed || st.Error != "":
		case st.Action == "remove":
			undone++
		default:
			applied++
		}
	}
	if rep.Command == "up" && rep.Error != "" && undone > 0 && applied > 0 {
		// A failed or interrupted run that rolled back: not "changed N".
		fmt.Fprintf(w, "vflag up: failed: applied %d step(s), then undid %d (rollback of this run, and removals)\n", applied, undone)
	} else {
		fmt.Fprintf(w, "vflag %s: %s %d step(s)\n", rep.Command, verb, rep.Changes)
	}
	for _, s := range rep.Steps {
		force := s.Kind == pipeline.KindForce
		if !s.Changed && s.Error == "" && !force {
			continue
		}
		mark := map[string]string{"add": "+", "change": "~", "remove": "-"}[s.Action]
		if s.Error != "" || force {
			mark = "!"
		} else if mark == "" {
			mark = "+"
		}
		summary := s.Summary // an undo says what it did ("sriov_numvfs 4 -> 0")
		if s.Disruptive {
			summary += "  [disruptive"
			if len(s.Domains) > 0 {
				summary += ": breaks running " + strings.Join(s.Domains, ", ")
			}
			summary += "]"
		}
		line := fmt.Sprintf("  %s %-44s %s", mark, s.ID, summary)
		if s.DurationMS > 0 && rep.Command != "plan" {
			line += fmt.Sprintf("  (%s)", time.Duration(s.DurationMS*float64(time.Millisecond)).Round(time.Millisecond/10))
		}
		if s.Error != "" {
			line += "  error: " + s.Error
		}
		fmt.Fprintln(w, line)
	}
}

// printProgress writes one line per finished step on a terminal.
func printProgress(w io.Writer, ev teardown.Event) {
	if ev.DryRun || (!ev.Changed && ev.Err == nil) {
		return
	}
	status := "ok"
	if ev.Err != nil {
		status = "FAILED: " + ev.Err.Error()
	}
	fmt.Fprintf(w, "[%s] %s %s (%s) %s\n", ev.Phase, ev.ID, strings.TrimSpace(ev.Summary), ev.Duration.Round(time.Millisecond/10), status)
}
