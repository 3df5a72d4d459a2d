package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// modeKind sets the eswitch mode (DESIGN.md step 5). It refuses while a VF
// is bound to a host driver: the kernel does not check, the firmware fails
// with "bad resource state".
//
//	devlink dev eswitch set $dev mode switchdev
type modeKind struct{}

type modeRecord struct {
	Devlink eswitch.Devlink `json:"devlink"`
	Prior   string          `json:"prior"`
}

func (modeKind) Name() string { return "eswitch.mode" }
func (modeKind) DependsOn() []string {
	return []string{numVFsKind{}.Name(), unbindKind{}.Name()}
}

func (k modeKind) step(e *Env, d eswitch.Devlink, pfs []eswitch.PF, mode string) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + d.String(),
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.k.EswitchMode(d)
			if err != nil {
				return teardown.Change{}, err
			}
			// With VFs in place a mode change re-creates their host side
			// (representors, LAG): disruptive.
			vfs := 0
			for _, pf := range pfs {
				n, err := e.pci.NumVFs(pf.Dev)
				if err != nil && cur != mode {
					// Fail closed: unknown VFs may be running domains'.
					return teardown.Change{}, fmt.Errorf("eswitch %s -> %s on %s: cannot tell whether VFs exist (a mode change with VFs is disruptive): %w", cur, mode, d, err)
				}
				vfs += n
			}
			// With VFs, its undo makes their host side again, bare: a
			// rollback then does again what it carried.
			rb := teardown.RollbackUndo
			if cur != mode && vfs > 0 {
				rb = teardown.RollbackUndoRedo
			}
			return teardown.Change{Needed: cur != mode, Summary: fmt.Sprintf("%s: eswitch %s -> %s", d, cur, mode), Revert: fmt.Sprintf("%s: eswitch %s -> %s", d, mode, cur), Disruptive: cur != mode && vfs > 0,
				Rollback: rb, Record: modeRecord{Devlink: d, Prior: cur}}, nil
		},
		Apply: func(ctx context.Context) error {
			for _, pf := range pfs {
				vfs, err := e.pci.VFs(pf.Dev)
				if err != nil {
					return err
				}
				for _, vf := range vfs {
					drv, err := e.pci.Driver(vf.Addr)
					if err != nil {
						return fmt.Errorf("set eswitch mode on %s: %w (a bound VF blocks the change)", d, err)
					}
					if drv != "" {
						return fmt.Errorf("set eswitch mode on %s: VF %s is bound to %s; unbind every VF first", d, vf.Addr, drv)
					}
				}
			}
			if err := e.setModeWaiting(ctx, d, mode); err != nil {
				return fmt.Errorf("set eswitch mode on %s: %w", d, err)
			}
			return nil
		},
	}
}

func (modeKind) Undo(ctx context.Context, e *Env, r modeRecord) (string, error) {
	cur, err := e.k.EswitchMode(r.Devlink)
	if err != nil {
		if gone(err) {
			return "", nil
		}
		return "", err
	}
	if cur == r.Prior {
		return "", nil
	}
	if err := e.setModeWaiting(ctx, r.Devlink, r.Prior); err != nil {
		if nodes := rateNodesOn(e.k, r.Devlink); len(nodes) > 0 {
			// The kernel refuses any mode change while rate nodes exist
			// (EBUSY "Rate node(s) exists."); vflag's own went before this
			// undo, these are not its to delete.
			return "", fmt.Errorf("set eswitch mode on %s: devlink rate node(s) %s exist and vflag did not make them; the kernel keeps the eswitch in %s while they do: delete them (devlink port function rate del %s/NAME) and run down again: %w",
				r.Devlink, strings.Join(nodes, ", "), cur, r.Devlink, err)
		}
		return "", fmt.Errorf("set eswitch mode on %s: %w", r.Devlink, err)
	}
	return fmt.Sprintf("%s: eswitch %s -> %s", r.Devlink, cur, r.Prior), nil
}

func (e *Env) modeOf(pf eswitch.PF) string { return eswitch.ModeOf(e.k, pf) }

// eswitchBusyWait bounds setModeWaiting (Env.BusyWait overrides it).
const eswitchBusyWait = 15 * time.Second

// setModeWaiting sets the eswitch mode, waiting at most BusyWait while
// mlx5 answers EBUSY "Can't change mode, E-Switch is busy": another
// eswitch operation in progress, or users of the eswitch such as offloaded
// tc rules (OVS's datapath flows on the representors, which ovs-vswitchd
// removes shortly after their ports go). Rate nodes (EBUSY "Rate node(s)
// exists.") do not go by themselves: no wait for those.
func (e *Env) setModeWaiting(ctx context.Context, d eswitch.Devlink, mode string) error {
	wait := e.BusyWait
	if wait <= 0 {
		wait = eswitchBusyWait
	}
	poll := max(e.Poll, 50*time.Millisecond)
	deadline := time.Now().Add(wait)
	for {
		err := e.k.SetEswitchMode(d, mode)
		if err == nil || !errors.Is(err, syscall.EBUSY) || len(rateNodesOn(e.k, d)) > 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the eswitch stayed busy for %s: mlx5 refuses a mode change while offloaded tc rules (OVS datapath flows on the representors or the uplink: tc -s filter show dev <rep> ingress) or another eswitch operation hold it; remove them (ovs-appctl dpctl/del-flows) and run again: %w", wait, err)
		}
		e.log.Info("eswitch busy, waiting", "devlink", d.String(), "mode", mode, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(poll):
		}
	}
}

// tcOffloadKind enables hw-tc-offload on a PF (the uplink representor)
// after switchdev (DESIGN.md step 5).
//
//	ethtool -K $pf hw-tc-offload on
type tcOffloadKind struct{}

type featureRecord struct {
	Netdev  string `json:"netdev"`
	Feature string `json:"feature"`
	Prior   bool   `json:"prior"`
}

const hwTCOffload = "hw-tc-offload"

func (tcOffloadKind) Name() string        { return "eswitch.tc-offload" }
func (tcOffloadKind) DependsOn() []string { return []string{modeKind{}.Name()} }

func (k tcOffloadKind) step(e *Env, pf eswitch.PF) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + pf.Netdev,
		Check: func(context.Context) (teardown.Change, error) {
			if e.modeOf(pf) != eswitch.ModeSwitchdev && e.switchdevEnablesTCOffload(pf) {
				// Only a plan gets here (up runs this after switchdev): mlx5
				// turns hw-tc-offload on for the uplink representor when it
				// enters switchdev; up checks again then.
				return teardown.Change{Summary: pf.Netdev + ": hw-tc-offload on after switchdev (mlx5's default)"}, nil
			}
			on, err := e.k.Feature(pf.Netdev, hwTCOffload)
			if errors.Is(err, eswitch.ErrNotSupported) {
				return teardown.Change{Summary: pf.Netdev + ": no hw-tc-offload feature, left alone"}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: !on, Summary: pf.Netdev + ": hw-tc-offload off -> on", Revert: pf.Netdev + ": hw-tc-offload on -> off",
				Record: featureRecord{Netdev: pf.Netdev, Feature: hwTCOffload, Prior: on}}, nil
		},
		Apply: func(context.Context) error { return e.k.SetFeature(pf.Netdev, hwTCOffload, true) },
	}
}

// switchdevEnablesTCOffload is the driver's rule for a plan: mlx5 turns the
// uplink's hw-tc-offload on when it enters switchdev; other drivers
// (netdevsim, measured on 6.1) keep the feature as it is.
func (e *Env) switchdevEnablesTCOffload(pf eswitch.PF) bool {
	if pf.Addr == "" {
		return false
	}
	drv, err := e.pci.Driver(pf.Addr)
	return err == nil && drv == "mlx5_core"
}

func (tcOffloadKind) Undo(ctx context.Context, e *Env, r featureRecord) (string, error) {
	if err := e.k.SetFeature(r.Netdev, r.Feature, r.Prior); err != nil && !gone(err) {
		return "", err
	}
	return fmt.Sprintf("%s: %s -> %s", r.Netdev, r.Feature, map[bool]string{true: "on", false: "off"}[r.Prior]), nil
}

func (run *groupRun) switchdev(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, d := range devlinks(run.g.PFs) {
		s = append(s, modeKind{}.step(run.e, d, run.g.PFs, eswitch.ModeSwitchdev))
	}
	return one(s...), nil
}

func (run *groupRun) tcOffload(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, pf := range run.g.PFs {
		s = append(s, tcOffloadKind{}.step(run.e, pf))
	}
	return one(s...), nil
}
