package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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

func (linkUpKind) Undo(ctx context.Context, e *Env, r linkUpRecord) (string, error) {
	return e.undoLinkUp(ctx, r)
}
func (repsUpKind) Undo(ctx context.Context, e *Env, r linkUpRecord) (string, error) {
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

func (e *Env) undoLinkUp(ctx context.Context, r linkUpRecord) (string, error) {
	// In one call where the kernel allows it; an interface already gone is
	// skipped, as one SetLinkUp per name would.
	for names := r.Names; len(names) > 0; {
		n, err := eswitch.SetLinksUp(e.k, names, false)
		if err == nil {
			break
		}
		if !gone(err) {
			return "", err
		}
		names = names[n+1:]
	}
	return "set down: " + abbreviate(r.Names, 6), nil
}

// legacyPFsUp: no bond brings a legacy group's PFs up, and libvirt refuses
// to start a domain with a VF whose PF is down.
func (run *groupRun) legacyPFsUp(context.Context) ([]batch, error) {
	pfs := netdevs(run.g.PFs)
	return one(linkUpKind{}.step(run.e, strings.Join(pfs, "+"), pfs...)), nil
}

func (run *groupRun) bondUp(context.Context) ([]batch, error) {
	names := append([]string{run.g.Bond.Name}, netdevs(run.g.PFs)...)
	s := linkUpKind{}.step(run.e, run.g.Bond.Name, names...)
	if run.dry && run.bondCost >= costDown {
		s = predicted(s.Kind, s.ID, fmt.Sprintf("set up: %s (again, after the option change)", strings.Join(names, " ")))
	}
	return one(s), nil
}

// repsUp maps every VF of every owning PF to its representor (by devlink
// port, then phys_port_name + switch id; waiting for them in a real run)
// and sets them up.
func (run *groupRun) repsUp(ctx context.Context) ([]batch, error) {
	e, g := run.e, run.g
	n := g.NumVFs
	if p := run.plan; p != nil && p.repsAll && !run.r.Wrote() {
		run.reps, run.repsAll = p.reps, true // the plan pass mapped them; nothing changed since
		return run.repsUpSteps(), nil
	}
	run.reps = map[VFKey]string{}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, i := range g.Owners {
		pf := g.PFs[i]
		var reps map[int]string
		var err error
		if run.dry {
			reps, err = eswitch.RepresentorsOf(e.k, e.fs, pf, n)
		} else {
			reps, err = eswitch.WaitRepresentors(wctx, e.k, e.fs, pf, n, e.Poll)
			if err == nil {
				reps = e.settleReps(wctx, pf, n, reps)
			}
		}
		if err != nil {
			return nil, err
		}
		for vf, name := range reps {
			if vf < n {
				run.reps[VFKey{i, vf}] = name
			}
		}
	}
	run.repsAll = len(run.reps) == n*len(g.Owners)
	return run.repsUpSteps(), nil
}

func (run *groupRun) repsUpSteps() []batch {
	e, g, n := run.e, run.g, run.g.NumVFs
	var s []teardown.Step
	for _, i := range g.Owners {
		pf := g.PFs[i]
		if !run.repsKnown(i) { // a plan on a host that is not in switchdev yet, or whose VFs are made again
			s = append(s, predicted(repsUpKind{}.Name(), repsUpKind{}.id(pf),
				fmt.Sprintf("map %d representors of %s and set them up (%s)", n, pf.Netdev, run.repsWhy(i))))
			continue
		}
		var names []string
		for vf := 0; vf < n; vf++ {
			names = append(names, run.reps[VFKey{i, vf}])
		}
		s = append(s, repsUpKind{}.step(e, pf, names))
	}
	return one(s...)
}

// repsKnown tells whether the representors of owning PF i are mapped and
// stay: not in a plan whose numvfs change makes them again.
func (run *groupRun) repsKnown(i int) bool {
	return run.repsAll && !run.fresh(run.g.PFs[i])
}

// repsWhy says why a plan predicts the representors of owning PF i.
func (run *groupRun) repsWhy(i int) string {
	if run.fresh(run.g.PFs[i]) {
		return "after the VFs are made again"
	}
	return "after switchdev"
}

// repsSettleBound bounds the wait for udev to process new representors.
const repsSettleBound = 10 * time.Second

// settleReps waits, within repsSettleBound and never failing, until udev
// has processed each of pf's representors (/run/udev/data/n<ifindex>),
// reading their names again meanwhile: vflag's udev rule renames a new
// representor (<uplink>_<vf>) an instant after switchdev makes it, and a
// name read before that is gone when its step runs ("link eth2: not
// found", seen in e2e boot.sh). Where udev keeps no database, reps as
// they are.
func (e *Env) settleReps(ctx context.Context, pf eswitch.PF, n int, reps map[int]string) map[int]string {
	if _, err := e.fs.ReadDir("/run/udev/data"); err != nil {
		return reps
	}
	poll := e.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	deadline := time.Now().Add(repsSettleBound)
	for {
		if e.udevProcessed(reps) || !time.Now().Before(deadline) {
			return reps
		}
		select {
		case <-ctx.Done():
			return reps
		case <-time.After(poll):
		}
		if r, err := eswitch.RepresentorsOf(e.k, e.fs, pf, n); err == nil {
			reps = r
		}
	}
}

// udevProcessed: every netdev of names exists and udev has processed it.
func (e *Env) udevProcessed(names map[int]string) bool {
	for _, name := range names {
		l, err := e.k.Link(name)
		if err != nil {
			return false
		}
		if _, err := e.fs.ReadFile(fmt.Sprintf("/run/udev/data/n%d", l.Index)); err != nil {
			return false
		}
	}
	return true
}

// MootUndo is the runner's Moot (teardown.Runner): a PF's representors set
// up by vflag (reps.up) vanish when the undo of its eswitch mode returns the
// PF to legacy later in the same call, so setting them down first, one
// netlink request each, is moot. It holds when every representor of the
// record that still exists is a port of the devlink device whose
// eswitch.mode entry goes back to legacy.
func (e *Env) MootUndo() func(en teardown.Entry, later []teardown.Entry) (by, said string) {
	var ports map[string]eswitch.Devlink // netdev -> its devlink device, read once
	return func(en teardown.Entry, later []teardown.Entry) (string, string) {
		if en.Kind != (repsUpKind{}).Name() {
			return "", ""
		}
		var r linkUpRecord
		if json.Unmarshal(en.Record, &r) != nil || len(r.Names) == 0 {
			return "", ""
		}
		toLegacy := map[eswitch.Devlink]string{}
		for _, l := range later {
			var m modeRecord
			if l.Kind == (modeKind{}).Name() && json.Unmarshal(l.Record, &m) == nil && m.Prior == eswitch.ModeLegacy {
				toLegacy[m.Devlink] = l.ID
			}
		}
		if len(toLegacy) == 0 {
			return "", ""
		}
		if ports == nil {
			ps, err := e.k.Ports()
			if err != nil {
				return "", "" // undo them one by one
			}
			ports = map[string]eswitch.Devlink{}
			for _, p := range ps {
				if p.Netdev != "" {
					ports[p.Netdev] = p.Devlink
				}
			}
		}
		by := ""
		for _, n := range r.Names {
			d, ok := ports[n]
			if !ok {
				if _, err := e.k.Link(n); errors.Is(err, eswitch.ErrLinkNotFound) {
					continue // gone already
				}
				return "", ""
			}
			id, ok := toLegacy[d]
			if !ok || (by != "" && id != by) {
				return "", ""
			}
			by = id
		}
		if by == "" {
			return "", "" // none left: the undo is cheap
		}
		return by, "representors removed by the eswitch's return to legacy (" + by + "): " + abbreviate(r.Names, 6)
	}
}
