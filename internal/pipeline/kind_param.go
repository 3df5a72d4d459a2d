package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// paramKind sets a devlink runtime parameter (flow_steering_mode) while
// the eswitch is legacy (DESIGN.md step 1).
//
//	devlink dev param set $dev name flow_steering_mode value smfs cmode runtime
type paramKind struct{}

type paramRecord struct {
	Devlink eswitch.Devlink `json:"devlink"`
	Name    string          `json:"name"`
	Prior   string          `json:"prior"`
}

func (paramKind) Name() string        { return "devlink.param" }
func (paramKind) DependsOn() []string { return nil }

func (k paramKind) step(e *Env, d eswitch.Devlink, name, value string) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + d.String() + "/" + name,
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.k.Param(d, name)
			if errors.Is(err, eswitch.ErrNotSupported) {
				return teardown.Change{Summary: fmt.Sprintf("%s: no devlink param %s, left alone", d, name)}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: cur != value, Summary: fmt.Sprintf("%s: %s %s -> %s", d, name, cur, value),
				Record: paramRecord{Devlink: d, Name: name, Prior: cur}}, nil
		},
		Apply: func(context.Context) error { return e.k.SetParam(d, name, value) },
	}
}

func (paramKind) Undo(ctx context.Context, e *Env, r paramRecord) error {
	cur, err := e.k.Param(r.Devlink, r.Name)
	if errors.Is(err, eswitch.ErrNotSupported) || gone(err) || cur == r.Prior {
		return nil
	}
	if err != nil {
		return err
	}
	if err := e.k.SetParam(r.Devlink, r.Name, r.Prior); err != nil {
		return err
	}
	teardown.SayUndone(ctx, "%s: %s %s -> %s", r.Devlink, r.Name, cur, r.Prior)
	return nil
}
