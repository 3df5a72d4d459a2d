package pipeline

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// encapKind sets the eswitch's encap mode to basic for a group with a
// tunnel (mlx5 offloads no encap or decap rule with none), before the
// eswitch goes to switchdev: there mlx5 refuses a change while a flow is
// offloaded. A driver without an encap mode (netdevsim) is left alone.
//
//	devlink dev eswitch set $dev encap-mode basic
type encapKind struct{}

type encapRecord struct {
	Devlink eswitch.Devlink `json:"devlink"`
	Prior   string          `json:"prior"`
}

func (encapKind) Name() string        { return "eswitch.encap" }
func (encapKind) DependsOn() []string { return []string{modeKind{}.Name()} }

func (run *groupRun) encapMode(context.Context) ([]batch, error) {
	if run.g.Underlay() == nil { // OVN's Geneve or VXLAN needs it as a tunnel's does
		return nil, nil
	}
	em, ok := run.e.k.(eswitch.EncapModer)
	if !ok {
		return nil, nil
	}
	var s []teardown.Step
	for _, d := range devlinks(run.g.PFs) {
		s = append(s, encapKind{}.step(em, d))
	}
	return one(s...), nil
}

func (k encapKind) step(em eswitch.EncapModer, d eswitch.Devlink) teardown.Step {
	return teardown.Step{Kind: k.Name(), ID: k.Name() + "/" + d.String(),
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := em.EncapMode(d)
			if errors.Is(err, eswitch.ErrNotSupported) {
				return teardown.Change{Summary: fmt.Sprintf("%s has no encap mode (left alone)", d)}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: cur != eswitch.EncapBasic, Record: encapRecord{Devlink: d, Prior: cur},
				Summary: fmt.Sprintf("%s encap-mode %s -> basic", d, cur)}, nil
		},
		Apply: func(context.Context) error {
			err := em.SetEncapMode(d, eswitch.EncapBasic)
			if errors.Is(err, syscall.EOPNOTSUPP) {
				return fmt.Errorf("%w (mlx5 changes the encap mode in switchdev only while no flow is offloaded: vflag down, then up)", err)
			}
			return err
		},
	}
}

// Undo puts the prior encap mode back where the driver lets it.
func (encapKind) Undo(_ context.Context, e *Env, r encapRecord) (string, error) {
	em, ok := e.k.(eswitch.EncapModer)
	if !ok || r.Prior == "" {
		return "", nil
	}
	if err := em.SetEncapMode(r.Devlink, r.Prior); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) {
			return fmt.Sprintf("%s encap-mode left at basic: %v", r.Devlink, err), nil
		}
		return "", err
	}
	return fmt.Sprintf("%s encap-mode -> %s", r.Devlink, r.Prior), nil
}
