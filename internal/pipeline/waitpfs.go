package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vflag/vflag/internal/config"
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
		missing, wrong := e.missingPFs()
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
		}
		if !logged {
			e.log.Warn("waiting for PFs to appear", "missing", strings.Join(missing, "; "), "bound", bound)
			logged = true
		}
		if !time.Now().Before(deadline) {
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

// missingPFs lists the PF references that do not resolve now, and as
// errors those that name a netdev that exists and is no PF.
func (e *Env) missingPFs() ([]string, HostErrors) {
	var out []string
	var wrong HostErrors
	for gi := range e.cfg.Groups {
		_, errs := ResolveGroup(e.k, e.fs, &e.cfg.Groups[gi])
		for _, pe := range errs {
			if what := e.notAPort(pe.Ref); what != "" {
				wrong = append(wrong, config.FieldError{Path: fmt.Sprintf("groups[%d].pfs[%d]", gi, pe.Index), Value: pe.Ref,
					Msg: fmt.Sprintf("is %s, not a physical port (PF) of an SR-IOV NIC", what)})
				continue
			}
			out = append(out, fmt.Sprintf("groups[%d].pfs[%d] %q: %v", gi, pe.Index, pe.Ref, pe.Err))
		}
	}
	return out, wrong
}
