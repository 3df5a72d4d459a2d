package hook

import (
	"context"
	"fmt"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pathsafe"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// preparer is the hook's view of the host for one prepare/start event.
type preparer struct {
	o Options
	e *pipeline.Env
	h *host.Host
	r *teardown.Runner
	// What index found: the PFs whose VFs are vflag's.
	cfgPFs     []pfCandidate
	journalPFs []sriov.Device
	bridges    []pipeline.BridgeRef
	// The domain's devices looked up so far (managed).
	vfs   map[sriov.Addr]managedVF
	notVF map[sriov.Addr]bool
	// The domain's name and UUID (its XML's): an OVN port's vm-uuid.
	domain, uuid string
	// poolLSP is the logical port of each VF the domain takes from a pool
	// of a group with ovn, from its metadata (poolPorts), by PCI address.
	poolLSP map[sriov.Addr]poolPort
}

func prepare(ctx context.Context, o Options, d libvirtx.HookDomain, dir string, nameErr error) error {
	if err := pathsafe.CheckDir(o.StateDir); err != nil {
		// The main journal is read below, as root.
		return fmt.Errorf("refusing to start domain %q: %w", d.Name, err)
	}
	cfg, cfgErr := o.Config()
	j, jErr := teardown.OpenJournal(o.StateDir)
	if cfg == nil && (jErr != nil || len(j.Entries()) == 0) {
		if cfgErr != nil {
			// Possibly not vflag's domain at all: warn, never fail it.
			fmt.Fprintf(o.Stderr, "vflag hook: %v; VFs not checked\n", cfgErr)
		}
		return nil
	}
	h, err := o.Host(cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	p := &preparer{o: o, e: pipeline.New(cfg, h, o.Log), h: h, vfs: map[sriov.Addr]managedVF{}, notVF: map[sriov.Addr]bool{},
		domain: d.Name, uuid: d.UUID}
	p.index(cfg, j, jErr)
	if len(p.cfgPFs) == 0 && len(p.journalPFs) == 0 {
		return nil
	}
	tasks, err := libvirtx.PlanHook(d, func(pci string) bool { _, ok := p.managed(pci); return ok })
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	if len(tasks) == 0 {
		return nil
	}
	// A VF the config gives to the host is refused for that, at once: not
	// deferred at boot to be refused later.
	var conflicts []string
	for _, t := range tasks {
		m := p.vfs[sriov.Addr(t.Device.PCI)]
		if err := hostConflict(m); err != nil {
			conflicts = append(conflicts, fmt.Sprintf("%s: %v", m, err))
		}
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("refusing to start domain %s: VF not ready: %s (see `vflag status`)", d.Name, strings.Join(conflicts, "; "))
	}
	if err := p.poolPorts(cfg, d, tasks); err != nil { // ovnpool.go
		return err
	}
	if err := p.refuseHeld(d.Name, tasks); err != nil { // held.go
		return err
	}
	if err := refuseReserved(ctx, o, d, tasks); err != nil { // migrate.go
		return err
	}
	if nameErr != nil {
		// Its changes could not be journaled, nor released: it must not
		// take vflag's VFs.
		return fmt.Errorf("refusing to start %v: vflag cannot keep the state of its VFs under that name; rename the domain", nameErr)
	}
	if err := gate(o, d.Name); err != nil {
		return err
	}
	dj, err := openDomain(ctx, o, d.Name, dir)
	if err != nil {
		return fmt.Errorf("refusing to start domain %s: %w", d.Name, err)
	}
	defer dj.close(o.Log)
	p.r = o.runner(dj.j, p.e)
	var problems []string
	for _, t := range tasks {
		m := p.vfs[sriov.Addr(t.Device.PCI)]
		if err := p.prepareVF(ctx, m, t); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", m, err))
		}
	}
	// No rollback: libvirt runs "release end" after an aborted start, which
	// undoes what the domain's journal holds.
	if len(problems) > 0 {
		return fmt.Errorf("refusing to start domain %s: VF not ready: %s (see `vflag status`)", d.Name, strings.Join(problems, "; "))
	}
	return nil
}

// do runs one change through the domain's journal. The runner's
// "no rollback" note is dropped (teardown.Cause): release undoes the
// domain's journal.
func (p *preparer) do(ctx context.Context, s teardown.Step) error {
	return teardown.Cause(p.r.Do(ctx, s))
}

func (p *preparer) modeOf(pf eswitch.PF) string { return eswitch.ModeOf(p.h.Kernel, pf) }

// hostConflict refuses a VF the config gives to a host driver.
func hostConflict(m managedVF) error {
	if d := m.vfConfig().Driver; d != "" {
		return fmt.Errorf("the config gives it to the host (driver %s): a domain must not take it; give the domain another VF or drop the driver from the config and run `vflag up`", d)
	}
	return nil
}

// prepareVF makes one VF's host side ready: the PF up, then, in
// switchdev, the representor found and set up, the VF's MAC, and the
// representor's port in the bridge (its read runs beside the MAC's
// journaled write), then, for a VF an attachment with ovn_port gives to
// the domain, the port's OVN binding (ovnBind).
func (p *preparer) prepareVF(ctx context.Context, m managedVF, t libvirtx.HookTask) error {
	k := p.h.Kernel
	if err := hostConflict(m); err != nil {
		return err
	}
	// PF up (direct, not journaled: release leaves it up, the PF serves
	// other VFs): libvirt refuses a VF whose PF is down, and no traffic flows.
	l, err := k.Link(m.PF.Netdev)
	if err != nil {
		return fmt.Errorf("PF %s: %w", m.PF.Netdev, err)
	}
	if !l.AdminUp {
		if err := k.SetLinkUp(m.PF.Netdev, true); err != nil {
			return fmt.Errorf("set PF %s up: %w", m.PF.Netdev, err)
		}
	}
	switchdev := m.Group != nil && m.Group.Switchdev()
	if m.Group == nil {
		switchdev = p.modeOf(m.PF) == eswitch.ModeSwitchdev
	}
	var rep string
	var reads *portReads
	if switchdev {
		if rep, err = p.representorUp(m); err != nil {
			return err
		}
		reads = p.startPortReads(ctx, m, rep)
		defer reads.wait() // done before the host closes
	}
	// VF MAC through the PF.
	if t.MAC != "" {
		if err := p.do(ctx, p.e.VFMACStep(m.PF, m.VF, t.MAC)); err != nil {
			return err
		}
	}
	if !switchdev {
		return nil
	}
	// The port as the bridge step makes it (RepPortSpec); a VF known from
	// the journal only: its name alone.
	want := ovs.PortSpec{Name: rep}
	if key, ok := m.key(); ok {
		want = pipeline.RepPortSpec(m.Group, key, rep)
		if t.Device.HasStandbyVLAN {
			// A teaming pair's VF carries its standby's VLAN: the pair's,
			// which came with the domain (a migrated domain's VF of this
			// host may have other settings, or none, in the config).
			sb := t.Device.StandbyVLAN
			want.Tag, want.VLANMode, want.Trunks = sb.VLAN, sb.VLANMode, sb.Trunks
		}
	}
	if err := p.ensurePort(ctx, m, want, reads); err != nil {
		return err
	}
	return p.ovnBind(ctx, m, rep)
}

// ovnBind binds the representor rep of m's VF to its logical port in a
// group with ovn, where an attachment with ovn_port gives the VF to this
// domain, or where the domain took it from the group's pool and names
// its logical port in its metadata (poolPorts, bindPool): the Interface's iface-id, attached-mac (the config's MAC of the
// VF), vm-uuid (the domain's UUID, from its XML) and iface-status=active,
// as up's bridge step sets them (pipeline.OVNBindFor), through the domain's
// journal: release puts back what was there before, and a binding up made
// already is no change (nothing journaled, nothing released).
func (p *preparer) ovnBind(ctx context.Context, m managedVF, rep string) error {
	k, ok := m.key()
	if !ok || m.Group.OVN == nil {
		return nil
	}
	want, ok := pipeline.OVNBindFor(m.Group, k, p.domain, p.uuid)
	if !ok {
		return p.bindPool(ctx, m, rep)
	}
	return p.do(ctx, p.e.OVNBindStep(p.h.OVSDB, rep, want))
}

// representorUp finds the representor of m's VF on its PF, in switchdev,
// and sets it up (direct, like the PF).
func (p *preparer) representorUp(m managedVF) (string, error) {
	k := p.h.Kernel
	if mode := p.modeOf(m.PF); mode != eswitch.ModeSwitchdev {
		return "", fmt.Errorf("eswitch of %s is %s, not switchdev", m.PF.Netdev, report.OrDash(mode))
	}
	rep, err := representorOf(p.h, m.PF, m.VF)
	if err != nil {
		return "", err
	}
	rl, err := k.Link(rep)
	if err != nil {
		return "", fmt.Errorf("representor %s: %w", rep, err)
	}
	if !rl.AdminUp {
		if err := k.SetLinkUp(rep, true); err != nil {
			return "", fmt.Errorf("set representor %s up: %w", rep, err)
		}
	}
	return rep, nil
}
