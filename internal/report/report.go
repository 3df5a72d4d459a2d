package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/teardown"
)

// Step is one step in a command's report.
type Step struct {
	// Group is the config group the step belongs to ("" for what belongs
	// to none: a prune of an entry journaled before entries named theirs).
	Group   string `json:"group,omitempty"`
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
	// domains; Domains are the running domains it would break, Holders
	// who holds each VF it would break ("VF 0000:61:00.2 is held by pid
	// 4242 (dpdk-testpmd) through /dev/vfio/12"): a disruptive change, or
	// a bind or unbind that takes a held VF from its driver.
	Disruptive bool     `json:"disruptive,omitempty"`
	Domains    []string `json:"domains,omitempty"`
	Holders    []string `json:"holders,omitempty"`
	DurationMS float64  `json:"duration_ms"`
	Error      string   `json:"error,omitempty"`
}

// Report is what up, plan and down print: text or JSON, with a changed field
// for automation (Ansible's changed_when).
type Report struct {
	Command string `json:"command"`
	Version string `json:"version"`
	Changed bool   `json:"changed"`
	Changes int    `json:"changes"`
	Steps   []Step `json:"steps"`
	Error   string `json:"error,omitempty"`
	// Interrupted: the run was stopped by an interrupt (Ctrl-C, SIGTERM).
	Interrupted bool `json:"interrupted,omitempty"`
}

// Build turns a run's events into its report. journalIDs are the journal's
// entries before the run (a change's add versus change); runErr is the
// run's error, nil when it succeeded.
func Build(command, version string, events []teardown.Event, journalIDs map[string]bool, runErr error) Report {
	rep := Report{Command: command, Version: version, Steps: []Step{}, Interrupted: errors.Is(runErr, context.Canceled)}
	for _, ev := range events {
		sr := Step{Group: ev.Group, Kind: ev.Kind, ID: ev.ID, Phase: ev.Phase, Summary: ev.Summary, Changed: ev.Changed,
			DurationMS: float64(ev.Duration.Microseconds()) / 1000, Disruptive: ev.Disruptive, Domains: ev.Domains, Holders: ev.Holders}
		switch {
		case !ev.Changed:
		case ev.Phase == teardown.PhaseUndo:
			sr.Action = "remove"
		case journalIDs[ev.ID]:
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
	return rep
}

// ChangedIDs are the ids of the steps that changed (or would change) the
// host, sorted.
func (rep Report) ChangedIDs() []string {
	var ids []string
	for _, s := range rep.Steps {
		if s.Changed {
			ids = append(ids, s.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// WriteJSON prints the report as one indented JSON document.
func (rep Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteText prints the report for people: a summary line, then one line
// per step that changed, failed or was forced.
func (rep Report) WriteText(w io.Writer) {
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
	if rep.Command == "up" && rep.Error != "" && (undone > 0 || rep.Interrupted) {
		// A failed or interrupted run that rolled back: not "changed N"
		// (what the run changed was undone; the error says how far).
		what := "failed"
		if rep.Interrupted {
			what = "interrupted"
		}
		fmt.Fprintf(w, "vflag up: %s: applied %d step(s), then undid %d (rollback of this run, and removals)\n", what, applied, undone)
	} else {
		fmt.Fprintf(w, "vflag %s: %s %d step(s)\n", rep.Command, verb, rep.Changes)
	}
	for _, s := range rep.Steps {
		if line, ok := rep.stepLine(s); ok {
			fmt.Fprintln(w, line)
		}
	}
}

// stepLine is one step's line of the text report; ok is false for a step
// that is not shown (unchanged, no error, not a --force note).
func (rep Report) stepLine(s Step) (string, bool) {
	force := s.Kind == pipeline.KindForce
	if !s.Changed && s.Error == "" && !force {
		return "", false
	}
	mark := map[string]string{"add": "+", "change": "~", "remove": "-"}[s.Action]
	if s.Error != "" || force {
		mark = "!"
	} else if mark == "" {
		mark = "+"
	}
	summary := s.Summary // an undo says what it did ("sriov_numvfs 4 -> 0")
	switch {
	case s.Disruptive && len(s.Holders) > 0:
		summary += "  [disruptive; in use: " + strings.Join(s.Holders, "; ") + "]"
	case s.Disruptive && len(s.Domains) > 0:
		summary += "  [disruptive: breaks running " + strings.Join(s.Domains, ", ") + "]"
	case s.Disruptive:
		summary += "  [disruptive]"
	case len(s.Holders) > 0:
		summary += "  [takes VFs from their driver; in use: " + strings.Join(s.Holders, "; ") + "]"
	}
	line := fmt.Sprintf("  %s %-44s %s", mark, s.ID, summary)
	if s.DurationMS > 0 && rep.Command != "plan" {
		line += fmt.Sprintf("  (%s)", time.Duration(s.DurationMS*float64(time.Millisecond)).Round(time.Millisecond/10))
	}
	if s.Error != "" {
		line += "  error: " + s.Error
	}
	return line, true
}

// Progress writes one line per finished step on a terminal.
func Progress(w io.Writer, ev teardown.Event) {
	if ev.DryRun || (!ev.Changed && ev.Err == nil) {
		return
	}
	status := "ok"
	if ev.Err != nil {
		status = "FAILED: " + ev.Err.Error()
	}
	group := "" // the groups run side by side: each line names its own
	if ev.Group != "" {
		group = ev.Group + ": "
	}
	fmt.Fprintf(w, "[%s] %s%s %s (%s) %s\n", ev.Phase, group, ev.ID, strings.TrimSpace(ev.Summary), ev.Duration.Round(time.Millisecond/10), status)
}

// ProgressTo is Progress on w, for a runner's OnEvent.
func ProgressTo(w io.Writer) func(teardown.Event) {
	return func(ev teardown.Event) { Progress(w, ev) }
}

// OrDash is s, or "-" when empty: an absent value in what vflag prints.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
