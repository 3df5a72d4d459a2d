package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// kind is one kind of change, declared once, in its own file: its journal
// name, what it depends on, and its undo from the journal record R alone.
// Its step constructor lives beside it. A kind without an Undo method does
// not satisfy kind[R], so it cannot be added to Kinds: it does not compile.
type kind[R any] interface {
	// Name is the journal vocabulary ("eswitch.mode"): renaming one breaks
	// down for journals written by an older vflag.
	Name() string
	// DependsOn names the kinds whose change forces this kind to be
	// checked again (DESIGN.md section 2a): after a write of one of them,
	// or of one they depend on, the forward pass checks a step of this kind
	// again instead of taking the plan pass's "converged"
	// (teardown.Runner.DependsOn). Missing one leaves a step unchecked
	// after a change that broke it: declare too many rather than too few.
	DependsOn() []string
	// Undo restores the prior state kept in r; "already gone" is success.
	// It returns what it did for the report ("" when it has nothing to
	// add to the entry's revert summary), with or without an error.
	Undo(ctx context.Context, e *Env, r R) (string, error)
}

// Kind is a declared kind, as the registry keeps it.
type Kind struct {
	Name      string
	DependsOn []string
	undo      func(ctx context.Context, e *Env, raw json.RawMessage) (string, error)
}

// dependencies is every kind's DependsOn, for teardown.Runner.DependsOn.
func dependencies() map[string][]string {
	out := make(map[string][]string, len(Kinds))
	for _, k := range Kinds {
		out[k.Name] = k.DependsOn
	}
	return out
}

func declare[R any](k kind[R]) Kind {
	return Kind{Name: k.Name(), DependsOn: k.DependsOn(), undo: func(ctx context.Context, e *Env, raw json.RawMessage) (string, error) {
		r, err := decode[R](raw)
		if err != nil {
			return "", err
		}
		return k.Undo(ctx, e, r)
	}}
}

// Kinds is every kind of change, in pipeline order. The undo registry
// (Env.Undoers) is built from this list.
var Kinds = []Kind{
	declare[autoprobeRecord](autoprobeKind{}),
	declare[paramRecord](paramKind{}),
	declare[numVFsRecord](numVFsKind{}),
	declare[vfMACRecord](vfMACKind{}),
	declare[driversRecord](unbindKind{}),
	declare[encapRecord](encapKind{}),
	declare[modeRecord](modeKind{}),
	declare[featureRecord](tcOffloadKind{}),
	declare[bondRecord](bondKind{}),
	declare[enslaveRecord](enslaveKind{}),
	declare[linkUpRecord](linkUpKind{}),
	declare[mtuRecord](mtuKind{}),
	declare[vfPolicyRecord](vfVlan),
	declare[vfPolicyRecord](vfTrust),
	declare[vfPolicyRecord](vfSpoofchk),
	declare[vfPolicyRecord](vfLinkState),
	declare[vfPolicyRecord](vfRate),
	declare[driversRecord](bindKind{}),
	declare[linkUpRecord](repsUpKind{}),
	declare[ovsConfigRecord](ovsConfigKind{}),
	declare[rateNodeRecord](rateNodeKind{}),
	declare[rateLeafRecord](rateLeafKind{}),
	declare[tunnelVLANRecord](tunnelVLANKind{}),
	declare[tunnelAddrRecord](tunnelAddrKind{}),
	declare[tunnelRouteRecord](tunnelRouteKind{}),
	declare[ovsRecord](ovsBridgeKind{}),
	declare[tcBlockRecord](tcBlockKind{}),
	declare[ovnSSLRecord](ovnSSLKind{}),
	declare[ovnIDRecord](ovnIDKind{}),
	declare[ovnBindRecord](ovnBindKind{}),
	declare[attachRecord](attachKind{}),
	declare[networkRecord](networkKind{}),
	declare[ovsPortRecord](ovsPortKind{}),
	declare[hwOffloadRecord](hwOffloadKind{}),
}

// Undoers is the undo registry for a teardown.Runner: one Undoer per kind.
func (e *Env) Undoers() teardown.Undoers {
	u := teardown.Undoers{}
	for _, k := range Kinds {
		undo := k.undo
		u[k.Name] = func(ctx context.Context, raw json.RawMessage) (string, error) { return undo(ctx, e, raw) }
	}
	return u
}

// Kind names, for the code that reads journals (hook, down's preflight).
const (
	KindNumVFs    = "sriov.numvfs"
	KindOVSBridge = "ovs.bridge"
	KindAttach    = "libvirt.attach"
	KindNetwork   = "libvirt.network"
	// KindForce marks a report note, not a journaled kind: a disruptive
	// change let through by --force without knowing who holds its VFs.
	KindForce = "force"
)

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("decode journal record: %w", err)
	}
	return v, nil
}

// Decode reads a journal record of a known kind (see the *Record types' users).
func Decode[T any](raw json.RawMessage) (T, error) { return decode[T](raw) }

// gone tells whether an error means the object is already absent.
func gone(err error) bool {
	return errors.Is(err, eswitch.ErrLinkNotFound) || errors.Is(err, fs.ErrNotExist)
}

// predicted is a plan's step for a change whose target does not exist
// before earlier steps run (VFs, representors): Check says it will be
// needed. In a real run the target exists and the kind's own step is used.
func predicted(kind, id, summary string) teardown.Step {
	return teardown.Step{Kind: kind, ID: id,
		Check: func(context.Context) (teardown.Change, error) {
			return teardown.Change{Needed: true, Summary: summary}, nil
		},
		Apply: func(context.Context) error { return fmt.Errorf("%s: planned only: its target does not exist yet", id) },
	}
}

// unchanged is a plan's step for a target that an earlier step of the
// run makes again in a state that needs nothing from this kind (the VFs a
// numvfs change makes again come unbound): Check says so without reading
// the host as it is before that step.
func unchanged(kind, id, summary string) teardown.Step {
	return teardown.Step{Kind: kind, ID: id,
		Check: func(context.Context) (teardown.Change, error) {
			return teardown.Change{Summary: summary}, nil
		},
		Apply: func(context.Context) error { return fmt.Errorf("%s: planned only", id) },
	}
}

func sortedAddrs(m map[sriov.Addr]string) []sriov.Addr {
	out := make([]sriov.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// orDash is s, or "-" when empty (step summaries; renderers have
// report.OrDash).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func abbreviate(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, " ")
	}
	return strings.Join(items[:n], " ") + fmt.Sprintf(" ... +%d", len(items)-n)
}

func validDevice(d sriov.Device) error {
	if _, err := sriov.ParseDevice(string(d)); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}
