package pipeline

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/vflag/vflag/internal/holders"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// The disruption gate: before a change destroys VFs (numvfs, down) or
// rebinds them (an unbind or a bind of the drivers' steps, the unbind before
// an eswitch mode change), who holds them.
//
// The kernel answers first (internal/holders): a process holding a
// vfio-bound VF's group or cdev open (pid, command), a host netdev that is
// up, addressed or enslaved. libvirt, where the config or a journaled
// attachment names one, is asked too: it names the domain a holding QEMU
// runs (and a running domain whose live XML has the VF). A libvirt that
// cannot be asked (libvirtd not installed or not running) leaves the
// kernel's answer to decide. Only a kernel view that cannot be read is
// refused as unknown, with --force to go ahead.

// heldBy answers who holds each of vfs: the kernel's answer, with the
// domain names of libvirt at each of uris (Env.Holding instead, in tests).
// The error is the kernel's view that could not be read (with what libvirt
// said, when it could not be asked either): the set then holds what
// libvirt alone answered.
func (e *Env) heldBy(vfs []string, uris ...string) (holders.Set, error) {
	if len(vfs) == 0 {
		return holders.Set{}, nil
	}
	held, kerr := holders.Kernel{FS: e.pci.FS, Links: e.k}.Read(vfs)
	if held == nil {
		held = holders.Set{}
	}
	var virtErrs []error
	for _, uri := range uris {
		doms, err := e.holdingAt(uri, vfs)
		if err != nil {
			virtErrs = append(virtErrs, err)
			continue
		}
		held.Merge(doms)
	}
	if kerr != nil {
		return held, errors.Join(append([]error{fmt.Errorf("the kernel's view of who holds the VFs cannot be read: %w", kerr)}, virtErrs...)...)
	}
	for _, err := range virtErrs {
		e.log.Info("libvirt not asked which domains hold the VFs: the kernel's answer decides (holders without domain names)", "err", err)
	}
	return held, nil
}

// holdingAt asks the libvirt at uri (the host's own connection for its URI,
// a short-lived one for another, e.g. a journaled attachment's) which
// running domain holds each VF; e.Holding answers instead where set.
func (e *Env) holdingAt(uri string, vfs []string) (map[string]string, error) {
	if e.Holding != nil {
		return e.Holding(vfs)
	}
	c, done, err := e.virtAt(uri)
	if err != nil {
		return nil, fmt.Errorf("ask libvirt %s which domains hold VFs: %w", uri, err)
	}
	defer done()
	return c.HoldingDomains(vfs)
}

// stopHolders is what a refusal asks the user to do.
const stopHolders = "stop what holds them (shut the domains down or move them, end the processes, take the netdevs down or give them back)"

// refuseHeld refuses to verb (remove) the VFs while something holds one;
// a kernel view that cannot be read is refused too, unless --force.
func (e *Env) refuseHeld(vfs []string, verb string, uris []string) error {
	held, err := e.heldBy(vfs, uris...)
	if len(held) > 0 {
		return fmt.Errorf("refusing to %s VFs in use: %s; %s first", verb, strings.Join(held.Lines(), "; "), stopHolders)
	}
	if err != nil && e.Force {
		e.log.Warn("--force: VFs removed without knowing whether something holds one", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("refusing to %s VFs: cannot tell whether something holds one: %w; fix that (or %s and use --force)", verb, err, stopHolders)
	}
	return nil
}

// DownPreflight refuses while something holds a VF that down would remove
// (a journaled numvfs) or take from its driver (a journaled bind or unbind
// whose VF has another driver now). haveConfig tells whether the config
// (and its libvirt URI) is known.
func (e *Env) DownPreflight(j *teardown.Journal, haveConfig bool) error {
	vfs, uris, err := e.downVFs(j)
	if err != nil {
		return err
	}
	// Every libvirt that may name the domains: the config's, and each one
	// an attachment was made through.
	if haveConfig {
		uris[e.h.Libvirt] = true
	}
	ask := make([]string, 0, len(uris))
	for uri := range uris {
		ask = append(ask, uri)
	}
	sort.Strings(ask)
	return e.refuseHeld(vfs, "remove", ask)
}

// downVFs are the VFs down would destroy or rebind, sorted, and the
// libvirt URIs of the journaled attachments.
func (e *Env) downVFs(j *teardown.Journal) ([]string, map[string]bool, error) {
	vfs := map[string]bool{}
	uris := map[string]bool{}
	for _, en := range j.Entries() {
		switch en.Kind {
		case numVFsKind{}.Name():
			r, err := decode[numVFsRecord](en.Record)
			if err != nil {
				return nil, nil, err
			}
			if err := validDevice(r.PF); err != nil {
				return nil, nil, err
			}
			if !e.pci.Exists(r.PF) {
				continue // the PF is gone: nothing to hold
			}
			list, err := e.pci.VFs(r.PF)
			if err != nil {
				return nil, nil, fmt.Errorf("refusing to remove VFs: %w", err)
			}
			for _, v := range list {
				vfs[string(v.Addr)] = true
			}
		case bindKind{}.Name(), unbindKind{}.Name():
			r, err := decode[driversRecord](en.Record)
			if err != nil {
				return nil, nil, err
			}
			moved, err := e.rebound(r.Drivers)
			if err != nil {
				return nil, nil, fmt.Errorf("refusing to rebind VFs: %w", err)
			}
			for _, a := range moved {
				vfs[string(a)] = true
			}
		case attachKind{}.Name():
			r, err := decode[attachRecord](en.Record)
			if err != nil {
				return nil, nil, err
			}
			uris[r.URI] = true
		}
	}
	out := make([]string, 0, len(vfs))
	for vf := range vfs {
		out = append(out, vf)
	}
	sort.Strings(out)
	return out, uris, nil
}

// rebound are the VFs of prior (VF -> driver before) that undoDrivers would
// take from the driver they have now: bound, to another driver than before.
func (e *Env) rebound(prior map[sriov.Addr]string) ([]sriov.Addr, error) {
	var out []sriov.Addr
	for _, a := range sortedAddrs(prior) {
		if _, err := sriov.ParseAddr(string(a)); err != nil || !e.pci.Exists(a) {
			// Gone; or not an address (the undo says so): never a path
			// outside /sys/bus/pci/devices.
			continue
		}
		cur, err := e.pci.Driver(a)
		if err != nil {
			return nil, err
		}
		if cur != "" && cur != prior[a] {
			out = append(out, a)
		}
	}
	return out, nil
}

// noteRebinds records, from a drivers step's check, the VFs it would take
// from their driver (none: forgotten); rebindRefusals reads them.
func (e *Env) noteRebinds(id string, vfs []sriov.Addr) {
	e.rebindMu.Lock()
	defer e.rebindMu.Unlock()
	if len(vfs) == 0 {
		delete(e.rebinds, id)
		return
	}
	if e.rebinds == nil {
		e.rebinds = map[string][]string{}
	}
	out := make([]string, len(vfs))
	for i, a := range vfs {
		out[i] = string(a)
	}
	e.rebinds[id] = out
}

func (e *Env) rebindsOf(id string) []string {
	e.rebindMu.Lock()
	defer e.rebindMu.Unlock()
	return e.rebinds[id]
}

// rebindRefusals sets, on a group's planned binds and unbinds that would
// take VFs from their driver, the holders of those VFs, and returns one
// refusal line per held one.
func (e *Env) rebindRefusals(r *teardown.Runner, g Group, planned []teardown.Event) ([]string, error) {
	var out []string
	for i := range planned {
		ev := &planned[i]
		vfs := e.rebindsOf(ev.ID)
		if !ev.Changed || len(vfs) == 0 {
			continue
		}
		held, err := e.heldBy(vfs, e.h.Libvirt)
		if err != nil && len(held) == 0 {
			if err := e.unshown(r, ev.ID, err); err != nil {
				return nil, err
			}
		}
		if len(held) == 0 {
			continue
		}
		ev.Domains, ev.Holders = held.Domains(), held.Lines()
		out = append(out, fmt.Sprintf("group %s: %s would take from its driver: %s", g.Name, ev.ID, strings.Join(held.Lines(), "; ")))
	}
	return out, nil
}
