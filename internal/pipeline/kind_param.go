package pipeline

import (
	"context"
	"errors"
	"fmt"
	"syscall"

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

// step sets the param to value. With byDefault (the config leaves it
// empty: vflag's default), the value applies only while the eswitch is
// legacy at the time of the step, so that the default alone never makes up
// cycle an eswitch already in switchdev; and a driver refusing it
// (EOPNOTSUPP: no SW steering cap) is a warning, not an error.
func (k paramKind) step(e *Env, d eswitch.Devlink, name, value string, byDefault bool) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + d.String() + "/" + name,
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.k.Param(d, name)
			if err == nil && byDefault {
				if m, merr := e.k.EswitchMode(d); merr != nil || m != eswitch.ModeLegacy {
					return teardown.Change{Summary: fmt.Sprintf("%s: %s %s left alone (default %s applies only in legacy mode; eswitch %s)", d, name, cur, value, orDash(m))}, nil
				}
			}
			if errors.Is(err, eswitch.ErrNotSupported) {
				return teardown.Change{Summary: fmt.Sprintf("%s: no devlink param %s, left alone", d, name)}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: cur != value, Summary: fmt.Sprintf("%s: %s %s -> %s", d, name, cur, value), Revert: fmt.Sprintf("%s: %s %s -> %s", d, name, value, cur),
				Record: paramRecord{Devlink: d, Name: name, Prior: cur}}, nil
		},
		Apply: func(context.Context) error {
			err := e.k.SetParam(d, name, value)
			if err != nil && byDefault && errors.Is(err, syscall.EOPNOTSUPP) {
				e.log.Warn("the driver refuses the default flow_steering_mode; left as it is", "devlink", d.String(), "value", value, "err", err)
				return nil
			}
			if err != nil && e.refusedInSwitchdev(d, name, err) {
				return fmt.Errorf("set %s %s on %s: %s: `vflag down`, then `vflag up` sets it before switchdev (or leave flow_steering_mode as it is): %w", name, value, d, fsModeInSwitchdev, err)
			}
			return err
		},
	}
}

func (paramKind) Undo(ctx context.Context, e *Env, r paramRecord) (string, error) {
	cur, err := e.k.Param(r.Devlink, r.Name)
	if errors.Is(err, eswitch.ErrNotSupported) || gone(err) || cur == r.Prior {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if err := e.k.SetParam(r.Devlink, r.Name, r.Prior); err != nil {
		if e.refusedInSwitchdev(r.Devlink, r.Name, err) {
			return "", fmt.Errorf("restore %s %s -> %s on %s: %s, and the eswitch is still in switchdev (its own undo did not happen: see above); fix that and run down again: %w", r.Name, cur, r.Prior, r.Devlink, fsModeInSwitchdev, err)
		}
		return "", err
	}
	return fmt.Sprintf("%s: %s %s -> %s", r.Devlink, r.Name, cur, r.Prior), nil
}

// params: flow_steering_mode as the config sets it; left empty, a
// switchdev group defaults to smfs (SW steering, the one hardware offload
// of OVS flows needs at scale) where the driver has the param and the
// eswitch is still legacy (paramKind.step's byDefault).
func (run *groupRun) params(context.Context) ([]batch, error) {
	value, byDefault := run.g.FlowSteeringMode, false
	if value == "" {
		if !run.g.Switchdev() {
			return nil, nil
		}
		value, byDefault = DefaultFlowSteeringMode, true
	}
	var s []teardown.Step
	for _, d := range devlinks(run.g.PFs) {
		s = append(s, paramKind{}.step(run.e, d, "flow_steering_mode", value, byDefault))
	}
	return one(s...), nil
}

// refusedInSwitchdev: mlx5 refused flow_steering_mode because the eswitch
// is in switchdev.
func (e *Env) refusedInSwitchdev(d eswitch.Devlink, name string, err error) bool {
	if name != "flow_steering_mode" || !errors.Is(err, syscall.EOPNOTSUPP) {
		return false
	}
	m, merr := e.k.EswitchMode(d)
	return merr == nil && m == eswitch.ModeSwitchdev
}

// fsModeInSwitchdev is mlx5's rule for flow_steering_mode (fs_core.c
// mlx5_fs_mode_validate).
const fsModeInSwitchdev = "mlx5 changes it only while the eswitch is legacy (EOPNOTSUPP in switchdev: for smfs always, and for every value since 6.17)"

// DefaultFlowSteeringMode is a switchdev group's flow_steering_mode when
// the config leaves it empty.
const DefaultFlowSteeringMode = "smfs"
