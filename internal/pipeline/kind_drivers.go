package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// unbindKind unbinds every VF of a PF from its host driver (DESIGN.md step
// 4): firmware fails the mode change and LAG activation while a VF is bound.
//
//	echo $vf > /sys/bus/pci/devices/$vf/driver/unbind
type unbindKind struct{}

// bindKind binds a VF to the host driver the config names, strictly after
// the LAG is active (DESIGN.md step 8: QPs made before LAG activation cannot
// use the other port).
//
//	echo $drv > /sys/bus/pci/devices/$vf/driver_override; echo $vf > /sys/bus/pci/drivers/$drv/bind
type bindKind struct{}

// driversRecord is the record of both kinds: each VF's driver before.
type driversRecord struct {
	Drivers map[sriov.Addr]string `json:"drivers"` // VF -> driver before
	// Overrides are the VFs' driver_override values before ("" unset, the
	// only value in journals written before it was recorded): undo puts
	// them back, as binding overwrites driver_override.
	Overrides map[sriov.Addr]string `json:"overrides,omitempty"`
}

func (unbindKind) Name() string        { return "sriov.unbind" }
func (unbindKind) DependsOn() []string { return []string{numVFsKind{}.Name()} }
func (bindKind) Name() string          { return "sriov.bind" }
func (bindKind) DependsOn() []string {
	return []string{numVFsKind{}.Name(), unbindKind{}.Name(), bondKind{}.Name()}
}

func (unbindKind) Undo(ctx context.Context, e *Env, r driversRecord) (string, error) {
	return e.undoDrivers(ctx, r)
}
func (bindKind) Undo(ctx context.Context, e *Env, r driversRecord) (string, error) {
	return e.undoDrivers(ctx, r)
}

// priorOverrides reads the driver_override of each VF of drivers.
func (e *Env) priorOverrides(drivers map[sriov.Addr]string) (map[sriov.Addr]string, error) {
	var out map[sriov.Addr]string
	for a := range drivers {
		ov, err := e.pci.DriverOverride(a)
		if err != nil {
			return nil, err
		}
		if ov != "" {
			if out == nil {
				out = map[sriov.Addr]string{}
			}
			out[a] = ov
		}
	}
	return out, nil
}

// step unbinds every VF of a PF, except those keep allows to stay (a VF
// already on its configured driver once the eswitch and the LAG are in
// place). restored (a plan's) are the drivers the prune before the forward
// pass gives VFs back: the unbind sees those, not the ones they have now.
func (k unbindKind) step(e *Env, pf eswitch.PF, keep func(vf sriov.Addr, driver string) bool, restored map[sriov.Addr]string) teardown.Step {
	bound := func() (map[sriov.Addr]string, error) {
		vfs, err := e.pci.VFs(pf.Dev)
		if err != nil {
			return nil, err
		}
		out := map[sriov.Addr]string{}
		for _, vf := range vfs {
			d, err := e.pci.Driver(vf.Addr)
			if err != nil {
				return nil, err
			}
			if r, ok := restored[vf.Addr]; ok {
				d = r
			}
			if d != "" && !keep(vf.Addr, d) {
				out[vf.Addr] = d
			}
		}
		return out, nil
	}
	id := k.Name() + "/" + string(pf.Dev)
	return teardown.Step{
		Kind: k.Name(), ID: id,
		Check: func(context.Context) (teardown.Change, error) {
			b, err := bound()
			if err != nil {
				return teardown.Change{}, err
			}
			e.noteRebinds(id, sortedAddrs(b)) // the gate asks who holds them (holders.go)
			ov, err := e.priorOverrides(b)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: len(b) > 0, Summary: fmt.Sprintf("%s: unbind %d VFs from host drivers", pf.Dev, len(b)),
				Record: driversRecord{Drivers: b, Overrides: ov}}, nil
		},
		Apply: func(context.Context) error {
			b, err := bound()
			if err != nil {
				return err
			}
			for _, a := range sortedAddrs(b) {
				if err := e.pci.Unbind(a); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// prunedBinds are, for a plan, the drivers that the prune before up's
// forward pass gives back to the VFs of pf: the journaled binds of pf's VFs
// whose ids the config no longer implies (wanted) are undone, each VF back
// on the driver it had before vflag bound it.
func prunedBinds(j *teardown.Journal, pf eswitch.PF, wanted map[string]bool) (map[sriov.Addr]string, error) {
	if j == nil {
		return nil, nil
	}
	prefix := bindKind{}.Name() + "/" + pf.Netdev + "/"
	var out map[sriov.Addr]string
	for _, en := range j.Live() {
		if en.Kind != (bindKind{}).Name() || !strings.HasPrefix(en.ID, prefix) || wanted[en.ID] {
			continue
		}
		r, err := decode[driversRecord](en.Record)
		if err != nil {
			return nil, fmt.Errorf("journal entry %s: %w", en.ID, err)
		}
		for a, d := range r.Drivers {
			if out == nil {
				out = map[sriov.Addr]string{}
			}
			out[a] = d
		}
	}
	return out, nil
}

// bindID names the bind step by logical coordinates, so a plan (before the
// VF exists) and up give it the same id.
func (k bindKind) id(pf eswitch.PF, vf int) string {
	return fmt.Sprintf("%s/%s/vf%d", k.Name(), pf.Netdev, vf)
}

func (k bindKind) step(e *Env, pf eswitch.PF, vf int, addr sriov.Addr, driver string) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.id(pf, vf),
		Check: func(context.Context) (teardown.Change, error) {
			cur, rec, err := e.driverNow(addr)
			if err != nil {
				return teardown.Change{}, err
			}
			if cur != "" && cur != driver { // the bind takes it from cur: the gate asks who holds it
				e.noteRebinds(k.id(pf, vf), []sriov.Addr{addr})
			} else {
				e.noteRebinds(k.id(pf, vf), nil)
			}
			return teardown.Change{Needed: cur != driver, Summary: fmt.Sprintf("%s: bind to %s (now %s)", addr, driver, orDash(cur)),
				Record: rec}, nil
		},
		Apply: func(context.Context) error { return e.pci.Bind(addr, driver) },
	}
}

// rebind is a plan's bind step for a VF that the unbind phase unbinds
// first (the eswitch, bond or LAG changes): binding it is a change
// whatever its driver now, and the driver and driver_override it has now
// are the plan's capture, from which a rollback puts them back (the VF
// as the run found it: unbound after a boot's pre stage).
func (k bindKind) rebind(e *Env, pf eswitch.PF, vf int, addr sriov.Addr, driver string) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.id(pf, vf),
		Check: func(context.Context) (teardown.Change, error) {
			_, rec, err := e.driverNow(addr)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: true, Summary: fmt.Sprintf("%s: bind to %s again (after the LAG re-forms)", addr, driver),
				Record: rec}, nil
		},
		Apply: func(context.Context) error {
			return fmt.Errorf("%s: planned only: up binds the VF after the unbind phase", k.id(pf, vf))
		},
	}
}

// driverNow is the driver VF addr has now and the record from which its
// undo puts that driver and its driver_override back.
func (e *Env) driverNow(addr sriov.Addr) (string, driversRecord, error) {
	cur, err := e.pci.Driver(addr)
	if err != nil {
		return "", driversRecord{}, err
	}
	prior := map[sriov.Addr]string{addr: cur}
	ov, err := e.priorOverrides(prior)
	if err != nil {
		return "", driversRecord{}, err
	}
	return cur, driversRecord{Drivers: prior, Overrides: ov}, nil
}

// undoDrivers rebinds VFs to the drivers they had (an empty prior driver
// means unbound) and puts their driver_override back.
func (e *Env) undoDrivers(ctx context.Context, r driversRecord) (string, error) {
	var errs []error
	n := 0
	for _, a := range sortedAddrs(r.Drivers) {
		if !e.pci.Exists(a) {
			continue // the VF is gone
		}
		n++
		if prior := r.Drivers[a]; prior == "" {
			if err := e.pci.Unbind(a); err != nil {
				errs = append(errs, err)
			}
		} else if err := e.pci.Bind(a, prior); err != nil {
			errs = append(errs, err)
		}
		if err := e.pci.SetDriverOverride(a, r.Overrides[a]); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	var said string
	if n == 0 {
		said = fmt.Sprintf("%d VF(s) gone: nothing to rebind", len(r.Drivers))
	} else if len(r.Drivers) == 1 {
		for a, d := range r.Drivers {
			said = fmt.Sprintf("%s: driver -> %s", a, orDash(d))
		}
	} else {
		said = fmt.Sprintf("%d VF(s) back to their prior drivers", n)
	}
	return said, errors.Join(errs...)
}

// unbind: every VF, except that a VF already on its configured host driver
// may stay bound where unbinding serves nothing: a legacy group, or a
// switchdev group whose eswitch and LAG are already in place.
func (run *groupRun) unbind(context.Context) ([]batch, error) {
	vfs, err := run.namedVFs()
	if err != nil {
		return nil, err
	}
	want := map[sriov.Addr]string{}
	for _, v := range run.g.VFs {
		if a, ok := vfs[VFKey{v.PF, v.VF}]; ok && v.Driver != "" {
			want[a] = v.Driver
		}
	}
	settled := !run.g.Switchdev() || run.e.lagSettled(run.g)
	run.settled = settled
	// Once settled, a VF on vfio-pci stays too: libvirt bound it for a
	// domain (managed passthrough); unbinding it would pull the device from
	// a running guest, and the kernel's vfio remove blocks until the guest
	// lets go (seen on the real kernel, e2e disrupt.sh: up hung). Before the
	// LAG is in place (a mode change with VFs) the disruption gate refuses
	// while domains run.
	keep := func(vf sriov.Addr, driver string) bool {
		return settled && (want[vf] == driver || driver == "vfio-pci")
	}
	var s []teardown.Step
	for _, pf := range run.owners() {
		if run.fresh(pf) {
			// Made again with autoprobe off (phase 1): no VF is bound.
			s = append(s, unchanged(unbindKind{}.Name(), unbindKind{}.Name()+"/"+string(pf.Dev),
				fmt.Sprintf("%s: unbind 0 VFs from host drivers (the VFs are made again unbound)", pf.Dev)))
			continue
		}
		var restored map[sriov.Addr]string
		if run.dry {
			wanted := map[string]bool{}
			for _, v := range run.g.VFs {
				if v.Driver != "" {
					wanted[bindKind{}.id(run.g.PFs[v.PF], v.VF)] = true
				}
			}
			if restored, err = prunedBinds(run.r.Journal, pf, wanted); err != nil {
				return nil, err
			}
		}
		s = append(s, unbindKind{}.step(run.e, pf, keep, restored))
	}
	return one(s...), nil
}

// lagSettled tells whether a switchdev group's eswitches, bond and LAG are
// already in place, so that VFs bound after LAG need not be unbound again.
// A bond whose mode changes is not: its slaves are released and the LAG
// activates again, which firmware refuses while a VF is bound.
func (e *Env) lagSettled(g Group) bool {
	if c, err := e.bondReform(g); err != nil || c >= costReform {
		return false
	}
	for _, pf := range g.PFs {
		if e.modeOf(pf) != eswitch.ModeSwitchdev {
			return false
		}
		l, err := e.k.Link(pf.Netdev)
		if err != nil || l.Master != g.Bond.Name {
			return false
		}
	}
	st, err := eswitch.ReadLAG(e.fs, g.PFs[0].Addr)
	return err == nil && st.State != eswitch.LAGInactive
}

func (run *groupRun) bind(context.Context) ([]batch, error) {
	vfs, err := run.namedVFs()
	if err != nil {
		return nil, err
	}
	var s []teardown.Step
	for _, v := range run.g.VFs {
		if v.Driver == "" {
			continue
		}
		pf := run.g.PFs[v.PF]
		a, ok := vfs[VFKey{v.PF, v.VF}]
		switch {
		case ok && run.dry && (!run.settled || run.fresh(pf)):
			// The unbind phase unbinds it first (the eswitch, bond or LAG
			// changes), or the numvfs change makes it again unbound:
			// binding it again is a change.
			if run.fresh(pf) {
				s = append(s, predicted(bindKind{}.Name(), bindKind{}.id(pf, v.VF),
					fmt.Sprintf("%s: bind to %s again (after the VFs are made again)", a, v.Driver)))
				break
			}
			s = append(s, bindKind{}.rebind(run.e, pf, v.VF, a, v.Driver))
		case ok:
			s = append(s, bindKind{}.step(run.e, pf, v.VF, a, v.Driver))
		case run.dry:
			s = append(s, predicted(bindKind{}.Name(), bindKind{}.id(pf, v.VF),
				fmt.Sprintf("VF %d of %s: bind to %s (after VF creation and LAG)", v.VF, pf.Netdev, v.Driver)))
		default:
			return nil, fmt.Errorf("VF %d of %s does not exist", v.VF, pf.Netdev)
		}
	}
	return one(s...), nil
}
