package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// mtuKind sets the group's MTU on a list of interfaces, in order: the bond
// then its PFs (the kernel gives the bond's MTU to its slaves,
// bond_change_mtu, and an enslaved port takes the bond's, bond_enslave; so
// the bond's MTU is the one that lasts, and it is set after the enslave),
// the representors of a PF, or a legacy group's PFs. Its record keeps each
// interface's MTU before the first change; the undo restores them in the
// same order (the bond first: its slaves follow it).
//
//	ip link set $if mtu $mtu
type mtuKind struct{}

type mtuRecord struct {
	MTU   int        `json:"mtu"`
	Prior []priorMTU `json:"prior"` // every interface of the step, in order
}

type priorMTU struct {
	Name string `json:"name"`
	MTU  int    `json:"mtu"`
}

func (mtuKind) Name() string { return "link.mtu" }

// DependsOn: a re-formed bond, new VFs or representors need it again.
func (mtuKind) DependsOn() []string {
	return []string{enslaveKind{}.Name(), numVFsKind{}.Name(), repsUpKind{}.Name()}
}

func (k mtuKind) step(e *Env, id string, mtu int, names []string) teardown.Step {
	// differ lists the interfaces whose MTU is not mtu, with the record of
	// every interface's MTU now; in a plan, one that an earlier step would
	// create counts as differing.
	differ := func() ([]string, mtuRecord, error) {
		var out []string
		r := mtuRecord{MTU: mtu}
		for _, n := range names {
			l, err := e.k.Link(n)
			if errors.Is(err, eswitch.ErrLinkNotFound) {
				out = append(out, n)
				continue
			}
			if err != nil {
				return nil, r, err
			}
			r.Prior = append(r.Prior, priorMTU{Name: n, MTU: l.MTU})
			if l.MTU != mtu {
				out = append(out, fmt.Sprintf("%s %d", n, l.MTU))
			}
		}
		return out, r, nil
	}
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + id,
		Check: func(context.Context) (teardown.Change, error) {
			d, r, err := differ()
			if err != nil {
				return teardown.Change{}, err
			}
			var back []string
			for _, p := range r.Prior {
				if p.MTU != mtu {
					back = append(back, fmt.Sprintf("%s %d", p.Name, p.MTU))
				}
			}
			return teardown.Change{Needed: len(d) > 0, Record: r,
				Summary: fmt.Sprintf("mtu %d: %s", mtu, abbreviate(d, 6)),
				Revert:  fmt.Sprintf("mtu %d -> back: %s", mtu, abbreviate(back, 6)),
				Merge:   func(old json.RawMessage) (any, error) { return mergeMTURecords(old, r) }}, nil
		},
		Apply: func(context.Context) error {
			for _, n := range names {
				l, err := e.k.Link(n)
				if err != nil {
					return err
				}
				if l.MTU == mtu { // a bond's slaves follow it
					continue
				}
				if err := e.k.SetLinkMTU(n, mtu); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func (mtuKind) Undo(ctx context.Context, e *Env, r mtuRecord) (string, error) {
	var did []string
	for _, p := range r.Prior {
		l, err := e.k.Link(p.Name)
		if gone(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		if l.MTU == p.MTU || p.MTU == 0 {
			continue
		}
		if err := e.k.SetLinkMTU(p.Name, p.MTU); err != nil && !gone(err) {
			return "", err
		}
		did = append(did, fmt.Sprintf("%s %d", p.Name, p.MTU))
	}
	if len(did) == 0 {
		return "", nil
	}
	return "mtu back: " + strings.Join(did, ", "), nil
}

// bondMTU: the bond's MTU, then (already following it) its PFs.
// With a tunnel or ovn, the bond's MTU is the underlay's (underlay_mtu).
func (run *groupRun) bondMTU(context.Context) ([]batch, error) {
	g := run.g
	mtu := g.MTU
	if u := g.Underlay(); u != nil {
		mtu = u.MTU
	}
	if mtu == 0 {
		return nil, nil
	}
	names := append([]string{g.Bond.Name}, netdevs(g.PFs)...)
	return one(mtuKind{}.step(run.e, g.Bond.Name, mtu, names)), nil
}

// legacyMTU: a legacy group's PFs.
func (run *groupRun) legacyMTU(context.Context) ([]batch, error) {
	g := run.g
	if g.MTU == 0 {
		return nil, nil
	}
	pfs := netdevs(g.PFs)
	return one(mtuKind{}.step(run.e, strings.Join(pfs, "+"), g.MTU, pfs)), nil
}

// vfMTU: a legacy group's VFs bound to a host netdev driver get the
// group's mtu on their netdev (found through sysfs, virtfnN/net/), after
// the bind; one step per owning PF. A VF with no netdev (vfio-pci,
// unbound) is left alone. In a plan, a VF not yet on its driver is
// predicted.
func (run *groupRun) vfMTU(context.Context) ([]batch, error) {
	g := run.g
	if g.MTU == 0 {
		return nil, nil
	}
	vfs, err := run.namedVFs()
	if err != nil {
		return nil, err
	}
	names := map[int][]string{}
	pending := map[int]bool{}
	var order []int
	for _, v := range g.VFs {
		if v.Driver == "" || v.Driver == "vfio-pci" || v.PF < 0 || v.PF >= len(g.PFs) {
			continue
		}
		if _, ok := names[v.PF]; !ok {
			order = append(order, v.PF)
			names[v.PF] = nil
		}
		a, ok := vfs[VFKey{v.PF, v.VF}]
		if !ok || run.fresh(g.PFs[v.PF]) { // not made yet, or made again unbound
			pending[v.PF] = true
			continue
		}
		if drv, err := run.e.pci.Driver(a); err != nil {
			return nil, err
		} else if drv != v.Driver {
			pending[v.PF] = true
			continue
		}
		nd, err := run.e.pci.Netdevs(a)
		if err != nil {
			return nil, err
		}
		names[v.PF] = append(names[v.PF], nd...)
	}
	var s []teardown.Step
	for _, i := range order {
		pf := g.PFs[i]
		id := "vfs/" + pf.Netdev
		switch {
		case pending[i] && run.dry:
			s = append(s, predicted(mtuKind{}.Name(), mtuKind{}.Name()+"/"+id,
				fmt.Sprintf("mtu %d on the host netdevs of the VFs of %s (after the bind)", g.MTU, pf.Netdev)))
		case len(names[i]) > 0:
			s = append(s, mtuKind{}.step(run.e, id, g.MTU, names[i]))
		}
	}
	return one(s...), nil
}

// repsMTU: each owning PF's representors, once they are mapped (repsUp).
func (run *groupRun) repsMTU(context.Context) ([]batch, error) {
	g := run.g
	if g.MTU == 0 {
		return nil, nil
	}
	var s []teardown.Step
	for _, i := range g.Owners {
		pf := g.PFs[i]
		id := "reps/" + pf.Netdev
		if !run.repsKnown(i) {
			s = append(s, predicted(mtuKind{}.Name(), mtuKind{}.Name()+"/"+id,
				fmt.Sprintf("mtu %d on the %d representors of %s (%s)", g.MTU, g.NumVFs, pf.Netdev, run.repsWhy(i))))
			continue
		}
		var names []string
		for vf := 0; vf < g.NumVFs; vf++ {
			names = append(names, run.reps[VFKey{i, vf}])
		}
		s = append(s, mtuKind{}.step(run.e, id, g.MTU, names))
	}
	return one(s...), nil
}

// mergeMTURecords keeps the journaled prior of each interface and adds the
// prior of those it lacks: representors made again by a numvfs change come
// back at the kernel's MTU, and down must set them back to it too (it used
// to leave the new ones at the group's mtu).
func mergeMTURecords(journaled json.RawMessage, now mtuRecord) (mtuRecord, error) {
	old, err := decode[mtuRecord](journaled)
	if err != nil {
		return mtuRecord{}, err
	}
	have := map[string]bool{}
	for _, p := range old.Prior {
		have[p.Name] = true
	}
	for _, p := range now.Prior {
		if !have[p.Name] {
			old.Prior = append(old.Prior, p)
		}
	}
	old.MTU = now.MTU
	return old, nil
}
