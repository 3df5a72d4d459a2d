package pipeline

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/suggest"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// PFWaitError is the end of a bounded wait for PFs that never appeared.
type PFWaitError struct {
	Bound   time.Duration
	Missing []string // "groups[0].pfs[1] \"ens1f1\": <why>"
}

func (e *PFWaitError) Error() string {
	return fmt.Sprintf("PFs did not appear within pf_wait %s: %s; is the NIC's driver loaded (mlx5_core, openibd) and the port present? "+
		"(udev names them; raise pf_wait for a slow probe)", e.Bound, strings.Join(e.Missing, "; "))
}

// WaitPFs waits, at most bound, until every PF reference of the config
// resolves on the host (the netdev name or PCI address exists and is a
// PF). At boot the NIC's PFs appear when its driver probes, seconds after
// udev starts (mlx5, or openibd reloading it), and vflag-pre.service may
// start before that. It returns at once when they are all there, and a
// *PFWaitError naming each missing one when the bound passes; a bound of 0
// checks once. A reference to a netdev that exists and is not a PF (a bond,
// a representor, a VF, a virtual link) ends the wait at once with
// HostErrors naming it: it will not turn into a PF. Poll sets the interval (default 200 ms). Preflight then
// checks the PFs in full.
func (e *Env) WaitPFs(ctx context.Context, bound time.Duration) error {
	poll := e.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	start := time.Now()
	deadline := start.Add(bound)
	logged := false
	var wrongSince time.Time
	for {
		absent, wrong := e.missingPFs()
		missing := describe(absent, nil)
		switch {
		case len(wrong) > 0:
			// A netdev that exists and can never be a PF (a bond, a
			// representor, a VF, a virtual link) is a config error, not a
			// PF still to come, once it has looked so for wrongFor: at
			// boot a PF udev was renaming was seen for an instant without
			// its device link ("a virtual interface").
			if wrongSince.IsZero() {
				wrongSince = time.Now()
			}
			if time.Since(wrongSince) >= wrongFor || !time.Now().Before(deadline) {
				return wrong
			}
			for _, w := range wrong {
				missing = append(missing, w.Error())
			}
		case len(missing) == 0:
			wrongSince = time.Time{}
			// At boot udev may still be renaming a PF that just appeared
			// (eth0 -> its persistent name): a name resolved now would be
			// gone at the next step. Wait, within the same bound, until
			// udev has processed each PF's netdev; never fail on it.
			unsettled := e.udevUnsettled()
			if len(unsettled) == 0 || !time.Now().Before(deadline) {
				if logged {
					e.log.Warn("PFs appeared", "after", time.Since(start).Round(time.Millisecond))
				}
				return nil
			}
			missing = unsettled
		default:
			wrongSince = time.Time{}
			// Not at boot: once udev has settled and the NIC's other
			// ports are there, a name that is absent will not come.
			if !e.Boot && e.settledWithout(absent) {
				var errs HostErrors
				for i, line := range describe(absent, e.hintPFs(absent)) {
					a := absent[i]
					_, why, _ := strings.Cut(line, ": ")
					errs.add(fmt.Sprintf("groups[%d].pfs[%d]", a.group, a.index), a.ref,
						"%s; udev has settled and the NIC's other ports are there, so it will not appear (at boot vflag waits pf_wait for it)", why)
				}
				return errs
			}
		}
		if !logged {
			// At once, not when the bound has passed: what is missing,
			// what the host has instead, and for how long up waits.
			e.log.Warn(fmt.Sprintf("waiting for PFs to appear, at most pf_wait %s", bound), "missing", strings.Join(describe(absent, e.hintPFs(absent)), "; "))
			logged = true
		}
		if !time.Now().Before(deadline) {
			if len(absent) > 0 {
				missing = describe(absent, e.hintPFs(absent))
			}
			return &PFWaitError{Bound: bound, Missing: missing}
		}
		t := time.NewTimer(min(poll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for PFs (%s): %w", strings.Join(missing, "; "), ctx.Err())
		case <-t.C:
		}
	}
}

// settledWithout tells whether each absent PF reference's group has a PF
// that resolved, udev has settled (no event queued: no /run/udev/queue;
// each of the group's PFs processed) and every PCI function of those PFs'
// slots bound to their driver has its netdev: the NIC has probed, and the
// absent name is not one of its ports. A group none of whose PFs resolved
// (the driver not loaded yet) is still waited for.
func (e *Env) settledWithout(absent []absentPF) bool {
	if sysfs.Exists(e.fs, "/run/udev/queue") {
		return false
	}
	if len(e.udevUnsettled()) > 0 {
		return false
	}
	for _, a := range absent {
		g, _ := ResolveGroup(e.k, e.fs, &e.cfg.Groups[a.group])
		if len(g.PFs) == 0 {
			return false
		}
		for _, pf := range g.PFs {
			if pf.Addr == "" {
				return false
			}
			driver := e.netdevDriver(pf.Netdev)
			for fn := 0; fn < 8; fn++ {
				sib := sriov.Addr(fmt.Sprintf("%s.%d", pf.Addr.Slot(), fn))
				drv, err := e.pci.Driver(sib)
				if err != nil || drv == "" || drv != driver {
					continue
				}
				if nd, err := e.pci.Netdevs(sib); err != nil || len(nd) == 0 {
					return false // a port of the NIC still without its netdev
				}
			}
		}
	}
	return true
}

// wrongFor is how long a PF reference must name a netdev that is no PF
// before the wait gives up on it.
const wrongFor = time.Second

// udevUnsettled lists the PF netdevs udev has not processed yet (no
// /run/udev/data/n<ifindex>: udev writes it after its rules, the rename
// included); none where udev keeps no database (/run/udev/data).
func (e *Env) udevUnsettled() []string {
	names, err := e.fs.ReadDir("/run/udev/data")
	if err != nil {
		return nil
	}
	done := map[string]bool{}
	for _, n := range names {
		done[n] = true
	}
	var out []string
	for gi := range e.cfg.Groups {
		g, _ := ResolveGroup(e.k, e.fs, &e.cfg.Groups[gi])
		for _, pf := range g.PFs {
			l, err := e.k.Link(pf.Netdev)
			if err != nil {
				out = append(out, pf.Netdev+": "+err.Error())
				continue
			}
			if !done[fmt.Sprintf("n%d", l.Index)] {
				out = append(out, pf.Netdev+": udev has not processed it yet (its name may still change)")
			}
		}
	}
	return out
}

// absentPF is a PF reference of the config that does not resolve.
type absentPF struct {
	group, index int
	ref          string
	err          error
}

// describe says what is missing, each with its hint ("" none).
func describe(absent []absentPF, hints []string) []string {
	var out []string
	for i, a := range absent {
		s := fmt.Sprintf("groups[%d].pfs[%d] %q: %v", a.group, a.index, a.ref, a.err)
		if i < len(hints) && hints[i] != "" {
			s += " (" + hints[i] + ")"
		}
		out = append(out, s)
	}
	return out
}

// hintPFs says, for each absent PF reference, which ports of the group's
// PF driver the host has (the driver of the group's PFs that do resolve;
// without one, every physical port with its driver) and the nearest of
// them: "mlx5_core netdevs here: ens1f0np0, ens1f1np1; did you mean
// ens1f1np1?"; for a PCI address, their PCI functions.
func (e *Env) hintPFs(absent []absentPF) []string {
	names, err := e.fs.ReadDir("/sys/class/net")
	if err != nil {
		return nil
	}
	type port struct{ driver, pci string }
	ports := map[string]port{} // physical port netdev -> its driver and PCI function
	for _, n := range names {
		if eswitch.ValidIfName(n) == nil && e.notAPort(n) == "" {
			if drv := e.netdevDriver(n); drv != "" {
				dev, _ := e.fs.Readlink("/sys/class/net/" + n + "/device")
				ports[n] = port{driver: drv, pci: path.Base(dev)}
			}
		}
	}
	out := make([]string, len(absent))
	for i, a := range absent {
		byPCI := eswitch.ValidIfName(a.ref) != nil || strings.Contains(a.ref, ":")
		driver := ""
		if g, _ := ResolveGroup(e.k, e.fs, &e.cfg.Groups[a.group]); len(g.PFs) > 0 {
			driver = e.netdevDriver(g.PFs[0].Netdev)
		}
		what, here, candidates := driver+" netdevs", []string{}, []string{}
		switch {
		case byPCI && driver == "":
			what = "PCI functions of physical ports"
		case byPCI:
			what = driver + " PCI functions"
		case driver == "":
			what = "physical ports"
		}
		for _, n := range slices.Sorted(maps.Keys(ports)) {
			p := ports[n]
			if driver != "" && p.driver != driver {
				continue
			}
			name, other := n, p.pci
			if byPCI {
				name, other = p.pci, n
			}
			if driver == "" {
				other += ", " + p.driver
			}
			here = append(here, name+" ("+other+")")
			candidates = append(candidates, name)
		}
		if len(here) == 0 {
			here = []string{"none"}
		}
		out[i] = what + " here: " + strings.Join(here, ", ")
		if meant, ok := suggest.Nearest(a.ref, candidates); ok {
			out[i] += "; did you mean " + meant + "?"
		}
	}
	return out
}

// netdevDriver is the driver of a netdev's device, "" when it has none.
func (e *Env) netdevDriver(netdev string) string {
	drv, err := e.fs.Readlink("/sys/class/net/" + netdev + "/device/driver")
	if err != nil {
		return ""
	}
	return path.Base(drv)
}

// missingPFs lists the PF references that do not resolve now, and as
// errors those that name a netdev that exists and is no PF.
func (e *Env) missingPFs() ([]absentPF, HostErrors) {
	var out []absentPF
	var wrong HostErrors
	for gi := range e.cfg.Groups {
		_, errs := ResolveGroup(e.k, e.fs, &e.cfg.Groups[gi])
		for _, pe := range errs {
			if what := e.notAPort(pe.Ref); what != "" {
				wrong = append(wrong, config.FieldError{Path: fmt.Sprintf("groups[%d].pfs[%d]", gi, pe.Index), Value: pe.Ref,
					Msg: fmt.Sprintf("is %s, not a physical port (PF) of an SR-IOV NIC", what)})
				continue
			}
			out = append(out, absentPF{group: gi, index: pe.Index, ref: pe.Ref, err: pe.Err})
		}
	}
	return out, wrong
}
