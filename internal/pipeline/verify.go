package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/teardown"
)

// verify is step 12, a barrier: LAG active, every representor in the bridge
// with an ofport, hw-offload on, every attachment in its domain.
func (run *groupRun) verify(context.Context) ([]batch, error) {
	return one(teardown.Step{Kind: "verify", ID: "verify/" + run.g.Name, Degrade: true,
		Wait: func(ctx context.Context) (string, error) {
			// A run that wrote nothing verifies the bridge as the plan
			// pass read it (ofports included), milliseconds before; so
			// does a run whose only writes were contained (a bond's
			// miimon) or the bridge step rewriting columns of the ports
			// it kept (a VLAN change: every port keeps its ofport; verify
			// still waits until ovs-vswitchd applied it).
			var seen *ovs.BridgeStatus
			if p := run.plan; p != nil && (!run.r.Wrote() || run.r.WroteContainedOnly() ||
				run.bridgeColumnsOnly && run.r.WroteOnly(ovsBridgeKind{}.Name())) {
				seen = p.bridgeSeen
			}
			if err := run.e.verify(ctx, run.g, run.wantPorts(), seen, run.boundList()); err != nil {
				return "", err
			}
			return "group " + run.g.Name + " verified", nil
		}}), nil
}

// Verify checks a group as up left it (its representors mapped again).
func (e *Env) Verify(ctx context.Context, g Group) error {
	run := &groupRun{e: e, g: g, dry: true}
	if g.Switchdev() {
		if _, err := run.repsUp(ctx); err != nil {
			return fmt.Errorf("verify: representors of group %s: %w", g.Name, err)
		}
	}
	return e.verify(ctx, g, run.wantPorts(), nil, run.boundList())
}

// boundList are the group's bound representors (OVN), in no order.
func (run *groupRun) boundList() []ovnBinding {
	var out []ovnBinding
	for _, b := range run.ovnBindings() {
		out = append(out, b)
	}
	return out
}

// wantPorts are the ports the group's bridge must hold (the bridge step's
// spec: the bond, tunnel ports, every representor mapped), nil outside
// switchdev.
func (run *groupRun) wantPorts() []string {
	if !run.g.Switchdev() {
		return nil
	}
	spec := run.bridgeSpec()
	out := make([]string, 0, len(spec.Ports))
	for _, p := range spec.Ports {
		if p.Name != "" {
			out = append(out, p.Name)
		}
	}
	return out
}

// verify is Verify; want are the ports the bridge must hold, each with an
// ofport (a name that is no port of it, say one another bridge holds, is a
// problem: checking only the group's own ports there would pass a bridge
// that lost every representor). seen, when set, is the bridge as read in
// this run with nothing written since, used when every port of the group
// in it has an ofport (else the wait reads again).
//
// bound are the group's representors bound to OVN logical ports: each must
// get ovn-controller's ovn-installed within the group's install_timeout.
func (e *Env) verify(ctx context.Context, g Group, want []string, seen *ovs.BridgeStatus, bound []ovnBinding) error {
	var problems []string
	if g.Switchdev() {
		st, err := eswitch.ReadLAG(e.fs, g.PFs[0].Addr)
		if err != nil {
			return err
		}
		switch st.State {
		case eswitch.LAGActive:
			if why := eswitch.LAGTypeProblem(st, g.PFs[0].Addr); why != "" {
				problems = append(problems, why)
				break
			}
			problems = append(problems, e.waitSlavesCarry(ctx, g)...)
		case eswitch.LAGInactive:
			problems = append(problems, "hardware LAG is inactive")
		case eswitch.LAGUnverified:
			// An mlx5 PF shows its LAG state: not seeing it is no success.
			if u := eswitch.ExplainUnverified(e.fs, g.PFs[0].Addr); u.MLX5 && !e.cfg.AcceptUnverifiedLAG {
				problems = append(problems, "hardware LAG unverified: "+u.String()+" (a host without debugfs may set accept_unverified_lag: true)")
			}
		}
		c, err := e.h.OVS(ctx)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, e.OFPortWait)
		err = c.WaitApplied(wctx)
		cancel()
		if err != nil {
			return fmt.Errorf("verify: ovs-vswitchd did not apply the configuration: %w", err)
		}
		var bs ovs.BridgeStatus
		if seen != nil && seen.Exists && allOFPorts(*seen, g.Name) {
			bs = *seen
		} else if bs, err = e.waitOFPorts(ctx, c, g); err != nil {
			return err
		}
		problems = append(problems, portProblems(bs, g, want)...)
		if *g.OVS.HWOffload && bs.HWOffload != "true" {
			problems = append(problems, "hw-offload is "+orDash(bs.HWOffload))
		}
		problems = append(problems, e.waitOVNInstalled(ctx, c, g, bound)...)
	}
	domains := map[string]libvirtx.DomainState{} // each domain's XML is read once
	for _, a := range g.Attachments {
		d, ok := domains[a.Domain]
		if !ok {
			c, err := e.h.Virt()
			if err != nil {
				return err
			}
			if d, err = c.Domain(a.Domain); err != nil {
				return err
			}
			domains[a.Domain] = d
		}
		found := false
		for _, i := range d.Interfaces {
			found = found || i.Owned && e.VFIs(g, a.PF, a.VF, i.PCI)
		}
		if !found {
			problems = append(problems, fmt.Sprintf("domain %s lacks VF %d of %s", a.Domain, a.VF, g.PFs[a.PF].Netdev))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("verify: %s", strings.Join(problems, "; "))
	}
	return nil
}

// waitSlavesCarry waits, at most lag_timeout (LACP settles in seconds at
// lacp_rate fast, up to a minute and a half at slow), until every PF that
// is an up slave of the bond carries VF traffic in the active LAG
// (eswitch.LAGIdleSlaves); it returns a problem line per PF that still
// does not. An up slave that carries nothing is a LAG that does not
// spread and does not survive the loss of the other port's link.
func (e *Env) waitSlavesCarry(ctx context.Context, g Group) []string {
	wctx, cancel := context.WithTimeout(ctx, e.cfg.LAGTimeout)
	defer cancel()
	poll := e.Poll
	if poll <= 0 {
		poll = 10 * time.Millisecond
	}
	for {
		var out []string
		if b, err := eswitch.ReadBond(e.fs, g.Bond.Name); err == nil {
			idle, mapping, err := eswitch.LAGIdleSlaves(e.k, e.fs, g.PFs, b, eswitch.ReadLACP(e.fs, b))
			for _, s := range idle {
				out = append(out, fmt.Sprintf("%s (lag/mapping: %s)", s, mapping))
			}
			if err != nil {
				out = nil // the LAG went inactive meanwhile: the next verify says so
			}
		}
		if len(out) == 0 {
			return nil
		}
		select {
		case <-wctx.Done():
			return out
		case <-time.After(poll):
		}
	}
}

// waitOFPorts waits, with a bound, until every port of the group's on its
// bridge has an ofport: ovs-vswitchd assigns them asynchronously, and
// after a reboot only once the netdev appears.
func (e *Env) waitOFPorts(ctx context.Context, c *ovs.Client, g Group) (ovs.BridgeStatus, error) {
	wctx, cancel := context.WithTimeout(ctx, e.OFPortWait)
	defer cancel()
	key, start := "ofports/"+g.Name, time.Now()
	defer e.progress(key, "")
	return c.WaitOFPortsReport(wctx, g.OVS.Bridge, g.Name, func(pending, owned int) {
		e.progress(key, "%s: ofports %d/%d on %s (waiting %s of %s for ovs-vswitchd)", g.Name, owned-pending, owned, g.OVS.Bridge,
			time.Since(start).Round(100*time.Millisecond), e.OFPortWait)
	})
}

// VFIs tells whether pci is VF vf of the group's PF pf.
func (e *Env) VFIs(g Group, pf, vf int, pci string) bool {
	a, ok, err := e.VFAddr(g, VFKey{pf, vf})
	return err == nil && ok && string(a) == pci
}

// allOFPorts tells whether every port of owner's on the bridge has an ofport.
func allOFPorts(bs ovs.BridgeStatus, owner string) bool {
	for _, p := range bs.Ports {
		if p.Owner == owner && p.OFPort <= 0 {
			return false
		}
	}
	return true
}

// portProblems are the problems of the bridge bs of group g: the ports of
// want it does not hold (named together), and every port of want or of the
// group's without an ofport.
func portProblems(bs ovs.BridgeStatus, g Group, want []string) []string {
	var out, missing []string
	on := map[string]ovs.PortStatus{}
	for _, p := range bs.Ports {
		on[p.Name] = p
	}
	wanted := map[string]bool{}
	for _, name := range want {
		wanted[name] = true
		if _, ok := on[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		out = append(out, fmt.Sprintf("%d port(s) of the group are not ports of bridge %s: %s", len(missing), g.OVS.Bridge, strings.Join(missing, " ")))
	}
	for _, p := range bs.Ports {
		if (p.Owner == g.Name || wanted[p.Name]) && p.OFPort <= 0 {
			out = append(out, fmt.Sprintf("port %s has no ofport (%s)", p.Name, orDash(p.Error)))
		}
	}
	return out
}
