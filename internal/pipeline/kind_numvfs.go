package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// numVFsKind creates the VFs and waits until they exist (DESIGN.md step
// 2): every virtfn link for a device with PCI VFs. A device without PCI
// VFs (netdevsim) creates them inside the sriov_numvfs write, and its
// netdev reports no VF info (the kernel lists VFs over netlink for PCI
// parents only). Changing a non-zero count writes 0 first (EBUSY otherwise).
//
//	echo $n > /sys/bus/pci/devices/$pf/sriov_numvfs
type numVFsKind struct{}

type numVFsRecord struct {
	PF    sriov.Device `json:"pf"`
	Prior int          `json:"prior"`
}

func (numVFsKind) Name() string        { return KindNumVFs }
func (numVFsKind) DependsOn() []string { return []string{autoprobeKind{}.Name()} }

// portsLeave is what a numvfs write that makes the VFs again does first
// in a switchdev group: the ports of the representors of the VFs it
// destroys leave the bridge (repPortsLeave).
type portsLeave struct {
	bridge string
	do     func(context.Context)
}

// step sets the PF's VF count to n; leave, when set, runs before a write
// that makes the VFs again (a count that changes from non-zero).
func (k numVFsKind) step(e *Env, pf eswitch.PF, n int, leave *portsLeave) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + string(pf.Dev),
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.pci.NumVFs(pf.Dev)
			if err != nil {
				return teardown.Change{}, err
			}
			present := cur
			if e.pci.HasPCIVFs(pf.Dev) {
				if present, err = e.pci.CountVFs(pf.Dev); err != nil {
					return teardown.Change{}, err
				}
			}
			summary := fmt.Sprintf("%s: sriov_numvfs %d -> %d", pf.Dev, cur, n)
			if leave != nil && cur != 0 && cur != n && e.modeOf(pf) == eswitch.ModeSwitchdev {
				// Only a PF in switchdev has representors to leave.
				summary += fmt.Sprintf(" (first, its VFs' representors leave bridge %s)", leave.bridge)
			}
			if cur == n && present != n {
				summary = fmt.Sprintf("%s: wait for %d VFs (%d present)", pf.Dev, n, present)
			}
			// Changing a non-zero count destroys every VF (and breaks the LAG):
			// disruptive. Creating them from none is not. Its undo makes the
			// VFs again, bare: a rollback then does again what the old ones
			// carried (MACs, policy, drivers, representors and their ports).
			remake := cur != n && cur != 0
			rb := teardown.RollbackUndo
			if remake {
				rb = teardown.RollbackUndoRedo
			}
			return teardown.Change{Needed: cur != n || present != n, Summary: summary, Disruptive: remake, Rollback: rb,
				Revert: fmt.Sprintf("%s: sriov_numvfs %d -> %d", pf.Dev, n, cur),
				Record: numVFsRecord{PF: pf.Dev, Prior: cur}}, nil
		},
		Apply: func(ctx context.Context) error {
			if cur, err := e.pci.NumVFs(pf.Dev); err == nil && cur != 0 && cur != n && leave != nil {
				leave.do(ctx)
			}
			if err := e.pci.SetNumVFs(pf.Dev, n); err != nil {
				return err
			}
			return e.waitVFs(ctx, pf.Dev, n)
		},
	}
}

// waitVFs waits, within vf_timeout, until the PF has its n VFs (the
// kernel makes them one by one after the sriov_numvfs write), showing the
// count as it grows. A PF without PCI VFs (netdevsim) has nothing to wait
// for.
func (e *Env) waitVFs(ctx context.Context, pf sriov.Device, n int) error {
	if !e.pci.HasPCIVFs(pf) {
		return nil
	}
	timeout := e.cfg.VFTimeout
	if timeout <= 0 { // down from the journal alone: no config, its default
		timeout = config.DefaultVFTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key, start := "vfs/"+string(pf), time.Now()
	_, err := e.pci.WaitVFsReport(ctx, pf, n, func(have int) {
		e.progress(key, "%s", vfCreationLine(string(pf), have, n, time.Since(start)))
	})
	e.progress(key, "")
	return err
}

func (numVFsKind) Undo(ctx context.Context, e *Env, r numVFsRecord) (string, error) {
	if _, err := sriov.ParseDevice(string(r.PF)); err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	if !e.pci.Exists(r.PF) {
		return "", nil
	}
	cur, _ := e.pci.NumVFs(r.PF)
	if cur != r.Prior && cur != 0 {
		// vflag's own rate nodes were undone before (made after the
		// VFs): any left are someone else's, and the write would destroy them.
		if nodes, err := e.doomedRateNodes(r.PF, nil); err != nil || len(nodes) > 0 {
			return "", rateNodesDoomed(r.PF, nodes, err)
		}
	}
	if err := e.pci.SetNumVFs(r.PF, r.Prior); err != nil {
		return "", err
	}
	// As the apply: the undo is done when the VFs are, so that a rollback
	// puts their MACs, drivers and representors' ports back on all of them.
	if err := e.waitVFs(ctx, r.PF, r.Prior); err != nil {
		return "", err
	}
	said := fmt.Sprintf("%s: sriov_numvfs %d -> %d", r.PF, cur, r.Prior)
	if cur != 0 && r.Prior != 0 && cur != r.Prior {
		// The kernel makes every VF again (0 first): what they carried
		// comes back only where vflag set it (a rollback does it again).
		said += " (VFs made again: MACs, policy and drivers vflag did not set on the old ones are not restored)"
	}
	return said, nil
}

func (run *groupRun) numVFs(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, pf := range run.owners() {
		var leave *portsLeave
		if run.g.Switchdev() {
			leave = &portsLeave{bridge: run.g.OVS.Bridge, do: func(ctx context.Context) { run.e.repPortsLeave(ctx, run.g, pf) }}
		}
		s = append(s, numVFsKind{}.step(run.e, pf, run.g.NumVFs, leave))
		if !run.dry {
			continue
		}
		// The step's Check reads the same count (no write comes between in
		// a plan): a change from a non-zero count makes every VF again.
		cur, err := run.e.pci.NumVFs(pf.Dev)
		if err != nil {
			return nil, fmt.Errorf("read sriov_numvfs of %s: %w", pf.Dev, err)
		}
		if cur != 0 && cur != run.g.NumVFs {
			// vflag's: the config's rate groups, and the nodes its journal
			// holds (a group's dropped node is pruned before the write).
			ours := func(node string) bool {
				return slices.ContainsFunc(run.g.RateGroups, func(rg config.RateGroup) bool { return rg.Name == node }) ||
					journaled(run.r.Journal, rateNodeKind{}.id(pf.Devlink, node))
			}
			if nodes, err := run.e.doomedRateNodes(pf.Dev, ours); err != nil || len(nodes) > 0 {
				return nil, rateNodesDoomed(pf.Dev, nodes, err)
			}
			if run.remade == nil {
				run.remade = map[sriov.Device]bool{}
			}
			run.remade[pf.Dev] = true
		}
	}
	return one(s...), nil
}

// doomedRateNodes lists the devlink rate nodes that a write of 0 to dev's
// sriov_numvfs would destroy and that ours (nil: none) does not claim:
// mlx5 destroys every rate node of the PF's devlink instance when its VFs
// go in switchdev (6.x eswitch.c mlx5_eswitch_disable_sriov:
// devl_rate_nodes_destroy). Other drivers (netdevsim) keep them.
func (e *Env) doomedRateNodes(dev sriov.Device, ours func(string) bool) ([]string, error) {
	a, ok := dev.PCI()
	if !ok {
		return nil, nil
	}
	if drv, err := e.pci.Driver(a); err != nil || drv != eswitch.LAGDriver {
		return nil, err
	}
	d := eswitch.Devlink{Bus: "pci", Device: string(a)}
	if mode, err := e.k.EswitchMode(d); err != nil || mode != eswitch.ModeSwitchdev {
		return nil, nil
	}
	rates, err := e.k.Rates()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rates {
		if r.Devlink == d && r.Type == eswitch.RateNode && (ours == nil || !ours(r.Name)) {
			out = append(out, r.Name)
		}
	}
	return out, nil
}

func rateNodesDoomed(dev sriov.Device, nodes []string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: cannot tell which devlink rate nodes a change of sriov_numvfs would destroy: %w", dev, err)
	}
	return fmt.Errorf("refusing to change sriov_numvfs of %s: in switchdev mlx5 destroys every devlink rate node of the PF when its VFs go, and rate node(s) %s are not vflag's; delete or keep them elsewhere first (devlink port function rate del %s/<name>)",
		dev, strings.Join(nodes, ", "), dev)
}

// repPortsLeave removes from the group's bridge the ports of pf's
// representors, before a numvfs write destroys their VFs (the bridge step
// after it would remove them anyway, as ports whose netdevs are gone). Done
// here, ovs-vswitchd deletes them while the kernel makes the new VFs instead
// of after: on the bench's bridge, ovs-vswitchd took ~1 s to apply the
// removal of 128 ports, which verify then waited for. Only ports carrying
// the group's owner mark go (ovs.Client.Undo). It is an overlap, not a
// change of its own: a failure is logged and left to the bridge step.
func (e *Env) repPortsLeave(ctx context.Context, g Group, pf eswitch.PF) {
	reps, err := eswitch.Representors(e.k, e.fs, pf)
	if err != nil || len(reps) == 0 {
		return
	}
	names := make([]string, 0, len(reps))
	for _, name := range reps {
		names = append(names, name)
	}
	sort.Strings(names)
	c, err := e.h.OVS(ctx)
	if err == nil {
		err = c.Undo(ctx, ovs.Record{Owner: g.Name, Bridge: g.OVS.Bridge, Ports: names})
	}
	if err != nil {
		e.log.Warn("representor ports of VFs about to be made again could not leave the bridge first; the bridge step removes them", "step", numVFsKind{}.Name(), "pf", pf.Netdev, "bridge", g.OVS.Bridge, "err", err)
		return
	}
	e.log.Debug("representor ports left the bridge ahead of the numvfs change", "step", numVFsKind{}.Name(), "pf", pf.Netdev, "bridge", g.OVS.Bridge, "ports", len(names))
}
