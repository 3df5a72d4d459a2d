package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/vflag/vflag/eswitch"
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

func (k numVFsKind) step(e *Env, pf eswitch.PF, n int) teardown.Step {
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
			if cur == n && present != n {
				summary = fmt.Sprintf("%s: wait for %d VFs (%d present)", pf.Dev, n, present)
			}
			// Changing a non-zero count destroys every VF (and breaks the LAG):
			// disruptive. Creating them from none is not.
			return teardown.Change{Needed: cur != n || present != n, Summary: summary, Disruptive: cur != n && cur != 0,
				Revert: fmt.Sprintf("%s: sriov_numvfs %d -> %d", pf.Dev, n, cur),
				Record: numVFsRecord{PF: pf.Dev, Prior: cur}}, nil
		},
		Apply: func(ctx context.Context) error {
			if err := e.pci.SetNumVFs(pf.Dev, n); err != nil {
				return err
			}
			if !e.pci.HasPCIVFs(pf.Dev) {
				return nil
			}
			ctx, cancel := context.WithTimeout(ctx, e.cfg.VFTimeout)
			defer cancel()
			key, start := "vfs/"+string(pf.Dev), time.Now()
			_, err := e.pci.WaitVFsReport(ctx, pf.Dev, n, func(have int) {
				e.progress(key, "%s", vfCreationLine(string(pf.Dev), have, n, time.Since(start)))
			})
			e.progress(key, "")
			return err
		},
	}
}

func (numVFsKind) Undo(ctx context.Context, e *Env, r numVFsRecord) (string, error) {
	if _, err := sriov.ParseDevice(string(r.PF)); err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	if !e.pci.Exists(r.PF) {
		return "", nil
	}
	cur, _ := e.pci.NumVFs(r.PF)
	if err := e.pci.SetNumVFs(r.PF, r.Prior); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: sriov_numvfs %d -> %d", r.PF, cur, r.Prior), nil
}

func (run *groupRun) numVFs(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, pf := range run.owners() {
		s = append(s, numVFsKind{}.step(run.e, pf, run.g.NumVFs))
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
			if run.remade == nil {
				run.remade = map[sriov.Device]bool{}
			}
			run.remade[pf.Dev] = true
		}
	}
	return one(s...), nil
}
