package validaterun

import (
	"context"
	"fmt"
	"strings"

	"github.com/vflag/vflag/internal/apply"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/teardown"
)

// DriftName prefixes the name of the check that fails for each change
// `vflag plan` would make: "drift/<step id>" ("drift/ovs.bridge/br-lag").
// DriftPlanName is the check that fails when the plan itself fails (before
// any step: a preflight refusal), so up could not converge the host.
const (
	DriftName     = "drift"
	DriftPlanName = "drift/plan"
)

// Drift is what `vflag plan` would change on a host for a config: the
// plan pass (preflight, the dry-run forward pass, the prune of what the
// journal records and the config no longer wants) run once for every
// group. validate fails a check for each change, status names each as a
// problem: the comparison plan makes (each kind's desired state against
// the host) is the one source of truth for drift, so nothing plan would
// change is healthy in status or passes validate.
type Drift struct {
	// byGroup are the plan's changes (and steps whose check failed) by
	// group name; "" holds those of no group of the config (a dropped
	// group's leftovers, entries of journals without groups).
	byGroup map[string][]teardown.Event
	// err: the plan failed before its steps (preflight), or could not run;
	// runErr: it failed after them (a refusal up would make too).
	err, runErr error
	// recorded are the groups the journal holds entries of; anyGroupless:
	// it holds entries of no group (an older journal), whose group is
	// unknown.
	recorded     map[string]bool
	anyGroupless bool
}

// PlanDrift runs the plan pass of cfg on h with the journal in stateDir
// (vflag plan, without its report). It writes nothing and takes no lock.
func PlanDrift(ctx context.Context, cfg *config.Config, h *host.Host, stateDir string) *Drift {
	d := &Drift{byGroup: map[string][]teardown.Event{}, recorded: map[string]bool{}}
	if cfg == nil || len(cfg.Groups) == 0 {
		return d
	}
	j, err := teardown.OpenJournal(stateDir)
	if err != nil {
		// status's journal problem says why; validate fails the plan.
		d.err = err
		return d
	}
	for _, en := range j.Entries() {
		if en.Group == "" {
			d.anyGroupless = true
		}
		d.recorded[en.Group] = true
	}
	e := pipeline.New(cfg, h, nil)
	res := apply.Up(ctx, e, 0, apply.Options{StateDir: stateDir, DryRun: true})
	if res.Err != nil && !res.Ran {
		d.err = res.Err
		return d
	}
	names := map[string]bool{}
	for _, g := range cfg.Groups {
		names[g.Name] = true
	}
	for _, ev := range res.Events {
		if !ev.Changed && ev.Err == nil {
			continue
		}
		g := ev.Group
		if !names[g] {
			g = ""
		}
		d.byGroup[g] = append(d.byGroup[g], ev)
	}
	d.runErr = res.Err
	return d
}

// Changes are the changes plan would make to group's objects, with those
// that belong to no group of the config.
func (d *Drift) Changes(group string) []teardown.Event {
	if d == nil {
		return nil
	}
	return append(append([]teardown.Event(nil), d.byGroup[group]...), d.byGroup[""]...)
}

// NotUp says that group was never brought up or was brought down: the
// journal holds nothing of it and plan would change it. A group plan
// would not change is as the config says, recorded or not; one whose plan
// fails is not called not up (its problems say what up would refuse).
func (d *Drift) NotUp(group string) bool {
	if d == nil || d.anyGroupless || d.recorded[group] {
		return false
	}
	return d.err == nil && d.runErr == nil && len(d.byGroup[group]) > 0
}

// Checks are the failed checks of group: one per change plan would make
// ("drift/<step id>", the plan's own line as the detail), or one for a
// plan that fails before its steps. None when plan would change nothing.
func (d *Drift) Checks(group string) []validate.Check {
	if d == nil {
		return nil
	}
	if d.err != nil {
		return []validate.Check{planFailed(d.err)}
	}
	var out []validate.Check
	for _, ev := range d.Changes(group) {
		c := validate.Check{Name: DriftName + "/" + ev.ID, Verdict: validate.Fail}
		switch {
		case ev.Err != nil:
			c.Detail = fmt.Sprintf("vflag plan cannot check it: %v", ev.Err)
		case ev.Phase == teardown.PhaseUndo:
			c.Detail = fmt.Sprintf("the config no longer wants it; vflag up removes it: %s", ev.Summary)
		default:
			c.Detail = fmt.Sprintf("the host differs from the config; vflag up changes it: %s", ev.Summary)
		}
		out = append(out, c)
	}
	if d.runErr != nil {
		out = append(out, planFailed(d.runErr))
	}
	return out
}

// planFailed is the drift/plan check of a plan that fails: its error on
// one line.
func planFailed(err error) validate.Check {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return validate.Check{Name: DriftPlanName, Verdict: validate.Fail,
		Detail: fmt.Sprintf("vflag plan fails, so up cannot converge the host: %s", strings.Join(lines, "; "))}
}
