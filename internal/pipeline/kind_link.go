package pipeline

import (
	"context"
	"errors"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// linkUpKind brings interfaces up: the bond and its PFs (DESIGN.md step
// 6), or a legacy group's PFs; its record lists those that were down.
//
//	ip link set $if up
type linkUpKind struct{}

// repsUpKind brings a PF's representors up (DESIGN.md step 9).
//
//	ip link set $rep up
type repsUpKind struct{}

type linkUpRecord struct {
	Names []string `json:"names"` // brought up by vflag (they were down)
}

func (linkUpKind) Name() string        { return "link.up" }
func (linkUpKind) DependsOn() []string { return []string{enslaveKind{}.Name()} }
func (repsUpKind) Name() string        { return "reps.up" }
func (repsUpKind) DependsOn() []string { return []string{modeKind{}.Name(), numVFsKind{}.Name()} }

func (linkUpKind) Undo(ctx context.Context, e *Env, r linkUpRecord) error {
	return e.undoLinkUp(ctx, r)
}
func (repsUpKind) Undo(ctx context.Context, e *Env, r linkUpRecord) error {
	return e.undoLinkUp(ctx, r)
}

func (k linkUpKind) step(e *Env, id string, names ...string) teardown.Step {
	return e.linkUpStep(k.Name(), k.Name()+"/"+id, names)
}

func (k repsUpKind) id(pf eswitch.PF) string { return k.Name() + "/" + pf.Netdev }

func (k repsUpKind) step(e *Env, pf eswitch.PF, names []string) teardown.Step {
	return e.linkUpStep(k.Name(), k.id(pf), names)
}

func (e *Env) linkUpStep(kind, id string, names []string) teardown.Step {
	// down lists the interfaces that are down; in a plan, one that an earlier
	// step would create counts as down.
	down := func() ([]string, error) {
		var out []string
		for _, n := range names {
			l, err := e.k.Link(n)
			if errors.Is(err, eswitch.ErrLinkNotFound) {
				out = append(out, n)
				continue
			}
			if err != nil {
				return nil, err
			}
			if !l.AdminUp {
				out = append(out, n)
			}
		}
		return out, nil
	}
	return teardown.Step{
		Kind: kind, ID: id,
		Check: func(context.Context) (teardown.Change, error) {
			d, err := down()
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: len(d) > 0, Summary: "set up: " + strings.Join(d, " "),
				Record: linkUpRecord{Names: d}}, nil
		},
		Apply: func(context.Context) error {
			d, err := down()
			if err != nil {
				return err
			}
			_, err = eswitch.SetLinksUp(e.k, d, true)
			return err
		},
	}
}

func (e *Env) undoLinkUp(ctx context.Context, r linkUpRecord) error {
	// In one call where the kernel allows it; an interface already gone is
	// skipped, as one SetLinkUp per name would.
	for names := r.Names; len(names) > 0; {
		n, err := eswitch.SetLinksUp(e.k, names, false)
		if err == nil {
			break
		}
		if !gone(err) {
			return err
		}
		names = names[n+1:]
	}
	teardown.SayUndone(ctx, "set down: %s", abbreviate(r.Names, 6))
	return nil
}
