package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/teardown"
)

// BondAlias marks a bond as vflag's, so teardown never removes one it did not make.
func BondAlias(group string) string { return "vflag:" + group }

// bondKind creates the bond, down and without slaves, marked with vflag's
// alias, only after both PFs are in switchdev (DESIGN.md step 6).
//
//	ip link add $bond type bond mode $mode miimon $ms ...; ip link set $bond alias vflag:$group
type bondKind struct{}

type bondRecord struct {
	Name  string `json:"name"`
	Alias string `json:"alias"`
}

func (bondKind) Name() string        { return "bond.create" }
func (bondKind) DependsOn() []string { return []string{modeKind{}.Name()} }

func (k bondKind) step(e *Env, g *config.Group) teardown.Step {
	spec := eswitch.BondSpec{Name: g.Bond.Name, Mode: g.Bond.Mode, Miimon: g.Bond.Miimon,
		LacpRate: g.Bond.LacpRate, XmitHashPolicy: g.Bond.XmitHashPolicy, Alias: BondAlias(g.Name)}
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + g.Bond.Name,
		Check: func(context.Context) (teardown.Change, error) {
			l, err := e.k.Link(spec.Name)
			if errors.Is(err, eswitch.ErrLinkNotFound) {
				return teardown.Change{Needed: true, Summary: fmt.Sprintf("create bond %s mode %s", spec.Name, spec.Mode),
					Record: bondRecord{Name: spec.Name, Alias: spec.Alias}}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			if l.Alias != spec.Alias {
				return teardown.Change{}, fmt.Errorf("bond %s: an interface of that name exists and was not created by vflag (alias %q); vflag leaves it alone", spec.Name, l.Alias)
			}
			return teardown.Change{Summary: "bond " + spec.Name + " exists"}, nil
		},
		Apply: func(context.Context) error {
			if l, err := e.k.Link(spec.Name); err == nil && l.Alias == spec.Alias {
				return nil // made by an earlier run of this group
			}
			return e.k.AddBond(spec)
		},
	}
}

func (bondKind) Undo(ctx context.Context, e *Env, r bondRecord) error {
	l, err := e.k.Link(r.Name)
	if gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.Alias != r.Alias {
		e.log.Warn("bond is no longer vflag's; left alone", "bond", r.Name, "alias", l.Alias)
		teardown.SayUndone(ctx, "bond %s is no longer vflag's (alias %q): left alone", r.Name, l.Alias)
		return nil
	}
	if err := e.k.DeleteLink(r.Name); err != nil && !gone(err) {
		return err
	}
	teardown.SayUndone(ctx, "delete bond %s", r.Name)
	return nil
}

// enslaveKind puts a PF into the bond; the port must be down while it is
// enslaved (DESIGN.md step 6).
//
//	ip link set $pf down; ip link set $pf master $bond
type enslaveKind struct{}

type enslaveRecord struct {
	Slave       string `json:"slave"`
	Bond        string `json:"bond"`
	PriorMaster string `json:"prior_master"`
	PriorUp     bool   `json:"prior_up"`
}

func (enslaveKind) Name() string        { return "bond.enslave" }
func (enslaveKind) DependsOn() []string { return []string{bondKind{}.Name()} }

func (k enslaveKind) step(e *Env, pf eswitch.PF, bond string) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + pf.Netdev,
		Check: func(context.Context) (teardown.Change, error) {
			l, err := e.k.Link(pf.Netdev)
			if err != nil {
				return teardown.Change{}, err
			}
			if l.Master != "" && l.Master != bond {
				return teardown.Change{}, fmt.Errorf("enslave %s to %s: it is already a slave of %s", pf.Netdev, bond, l.Master)
			}
			return teardown.Change{Needed: l.Master != bond, Summary: fmt.Sprintf("enslave %s to %s", pf.Netdev, bond),
				Record: enslaveRecord{Slave: pf.Netdev, Bond: bond, PriorMaster: l.Master, PriorUp: l.AdminUp}}, nil
		},
		Apply: func(context.Context) error {
			if l, err := e.k.Link(pf.Netdev); err == nil && l.Master == bond {
				return nil
			}
			if err := e.k.SetLinkUp(pf.Netdev, false); err != nil {
				return err
			}
			return e.k.SetMaster(pf.Netdev, bond)
		},
	}
}

func (enslaveKind) Undo(ctx context.Context, e *Env, r enslaveRecord) error {
	l, err := e.k.Link(r.Slave)
	if gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var did []string
	if l.Master == r.Bond {
		if err := e.k.SetMaster(r.Slave, r.PriorMaster); err != nil && !gone(err) {
			return err
		}
		did = append(did, "release "+r.Slave+" from "+r.Bond)
	}
	if l.AdminUp != r.PriorUp {
		if err := e.k.SetLinkUp(r.Slave, r.PriorUp); err != nil && !gone(err) {
			return err
		}
		did = append(did, r.Slave+" "+map[bool]string{true: "up", false: "down"}[r.PriorUp])
	}
	if len(did) > 0 {
		teardown.SayUndone(ctx, "%s", strings.Join(did, "; "))
	}
	return nil
}
