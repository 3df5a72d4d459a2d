package teardown

import (
	"context"
	"encoding/json"
	"time"
)

// Change is what a step's Check found.
type Change struct {
	// Needed tells that the host differs from the target: Apply would write.
	Needed bool
	// Summary is human text: "eswitch pci/0000:61:00.0: legacy -> switchdev".
	Summary string
	// Revert is the human text of undoing the change, from the value the
	// change sets back to the one it found: "eswitch pci/0000:61:00.0:
	// switchdev -> legacy". A report shows it for an undo that does not say
	// what it did (a plan's prune, a failed undo, one that found nothing to
	// do); without it, "revert: " and Summary.
	Revert string
	// Record is JSON-marshalable: the target and the prior state, all that
	// the kind's Undoer needs without the config.
	Record any
	// Disruptive: the change breaks what runs on the host (it re-forms the
	// bond, changes numvfs or the eswitch mode: the hardware LAG goes down
	// and VFs in running domains are lost). The pipeline refuses it while
	// domains hold the group's VFs.
	Disruptive bool
	// Merge, when set and the journal already holds this step's entry
	// (a resume, drift, or objects the step covers now that it did not
	// when it first applied, e.g. representors made again with more VFs),
	// makes the record to keep from the journaled one: the first capture
	// of each prior value stays, the prior of what is new is added. Unset,
	// the journaled record stays as it is.
	Merge func(journaled json.RawMessage) (any, error)
	// Rollback tells how a rollback puts back what Check found for a step
	// whose entry the journal holds already (an object vflag made in an
	// earlier run that this run changes): see Rollback's values.
	Rollback Rollback
	// Contained: applying the change leaves everything the kinds that
	// depend on this step's kind look at as it was (a bond's link
	// monitoring interval). A run whose writes are all contained keeps the
	// checks its plan pass made of those kinds' steps (Runner.Converged,
	// Planned) instead of making them again.
	Contained bool
}

// Rollback is how a rollback puts back the state a change found, when the
// journal already held the step's entry (Runner.Redo does objects again).
type Rollback int

const (
	// RollbackUndo: the kind's undo of this change's Record puts back what
	// Check found (a prior value: a MAC, an MTU, an eswitch mode).
	RollbackUndo Rollback = iota
	// RollbackRedo: the undo of this Record would remove the object rather
	// than put back what Check found (a bond whose options change: its
	// undo deletes the bond; a bridge whose ports are retagged): the
	// rollback does the object again instead (Runner.Redo).
	RollbackRedo
	// RollbackUndoRedo: the undo of this Record puts its own object back,
	// but the change destroyed more than that object (a numvfs change from
	// a non-zero count makes every VF again; an eswitch mode change with
	// VFs makes their representors again): the rollback undoes it, then
	// does again what the destroyed objects carried (Runner.Redo).
	RollbackUndoRedo
)

// Step is one idempotent change to the host. See the package documentation
// for the contract.
type Step struct {
	// Kind selects the Undoer on down: "eswitch.mode".
	Kind string
	// ID is stable across runs: "eswitch.mode/pci/0000:61:00.0".
	ID string
	// Check reads the host only.
	Check func(ctx context.Context) (Change, error)
	// Apply converges the host to the target; it is idempotent.
	Apply func(ctx context.Context) error
	// Wait makes the step a barrier instead of a change (Check and Apply
	// nil): it waits for or verifies a state the earlier steps produced (the
	// hardware LAG, the final verification). A barrier is never journaled and
	// never a change; its failure fails the run like a failed Apply (this
	// run is rolled back). A plan (DryRun) does not run it. It returns a
	// summary of what it saw.
	Wait func(ctx context.Context) (string, error)
	// Degrade (a barrier only): its failure does not roll the run back; the
	// changes stay and the error wraps ErrDegraded (the final verification:
	// a host whose every step succeeded keeps its working VF-LAG).
	Degrade bool
	// Replannable: Check has no effect but the Change it returns (it sets
	// nothing Apply reads), so the forward pass may apply the Change a plan
	// pass just computed for this step instead of checking again, under
	// the rule of Runner.Converged (Runner.Planned).
	Replannable bool
	// Group names the independent line of work the step belongs to (a
	// pipeline group): its journal entry and events carry it, and a down
	// or rollback undoes the entries of different groups side by side
	// (Runner.Lanes, undoAll). "" is the one line of a run without groups.
	Group string
}

// Undoer restores the prior state kept in a journal record. "Already gone"
// (and "never happened") must be success. It returns what it did
// ("sriov_numvfs 4 -> 0"), which the runner reports instead of the entry's
// Revert (or "revert: " and the forward summary); "" keeps that.
type Undoer func(ctx context.Context, record json.RawMessage) (summary string, err error)

// Undoers maps a step Kind to its Undoer.
type Undoers map[string]Undoer

// Event phases.
const (
	PhaseApply = "apply"
	PhaseUndo  = "undo"
	PhaseSkip  = "skip"
	// PhaseWait reports a barrier step (Step.Wait).
	PhaseWait = "wait"
)

// Event reports one step the Runner applied, skipped or undid (or, with
// DryRun, would have).
type Event struct {
	Kind    string
	ID      string
	Summary string
	// Changed: the host was (or, with DryRun, would be) changed.
	Changed bool
	DryRun  bool
	// Phase is PhaseApply, PhaseUndo or PhaseSkip. A failed Check is
	// reported as PhaseApply with Err set and Changed false.
	Phase string
	// Duration of the Apply or Undo call (of the Check for a skip).
	Duration time.Duration
	// Err is the step's error, nil on success.
	Err error
	// Disruptive repeats Change.Disruptive for a change (or planned change).
	Disruptive bool
	// Domains are the running domains a disruptive change would break
	// (set by the caller that knows them, for reports).
	Domains []string
	// Holders say who holds each VF the change would break, one line per
	// holder ("VF 0000:61:00.2 is held by pid 4242 (dpdk-testpmd) through
	// /dev/vfio/12"), for reports; set by the same caller.
	Holders []string
	// Group is the step's (Step.Group) or the undone entry's (Entry.Group).
	Group string
}
