package pipeline

import (
	"context"
	"fmt"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// autoprobeKind: sriov_drivers_autoprobe=0 so new VFs get no host driver
// that must be unbound again (DESIGN.md step 1).
//
//	echo 0 > /sys/bus/pci/devices/$pf/sriov_drivers_autoprobe
type autoprobeKind struct{}

type autoprobeRecord struct {
	PF    sriov.Device `json:"pf"`
	Prior bool         `json:"prior"`
}

func (autoprobeKind) Name() string        { return "sriov.autoprobe" }
func (autoprobeKind) DependsOn() []string { return nil }

func (k autoprobeKind) step(e *Env, pf eswitch.PF) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + string(pf.Dev),
		Check: func(context.Context) (teardown.Change, error) {
			if !e.pci.HasPCIVFs(pf.Dev) {
				return teardown.Change{Summary: fmt.Sprintf("%s: no PCI VFs, no autoprobe", pf.Dev)}, nil
			}
			on, err := e.pci.Autoprobe(pf.Dev)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: on, Summary: fmt.Sprintf("%s: sriov_drivers_autoprobe 1 -> 0", pf.Dev),
				Revert: fmt.Sprintf("%s: sriov_drivers_autoprobe 0 -> 1", pf.Dev),
				Record: autoprobeRecord{PF: pf.Dev, Prior: on}}, nil
		},
		Apply: func(context.Context) error { return e.pci.SetAutoprobe(pf.Dev, false) },
	}
}

func (autoprobeKind) Undo(ctx context.Context, e *Env, r autoprobeRecord) (string, error) {
	if _, err := sriov.ParseDevice(string(r.PF)); err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	if err := e.pci.SetAutoprobe(r.PF, r.Prior); err != nil && !gone(err) {
		return "", err
	}
	return fmt.Sprintf("%s: sriov_drivers_autoprobe -> %d", r.PF, b2i(r.Prior)), nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (run *groupRun) autoprobe(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, pf := range run.owners() {
		s = append(s, autoprobeKind{}.step(run.e, pf))
	}
	return one(s...), nil
}
