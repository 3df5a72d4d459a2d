package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// stepEnv is an Env on a fresh bed (the example config, with or without
// the daemons) with the config's first group, resolved.
type stepEnv struct {
	*Env
	bed *bed
	g   *config.Group
	pfs []eswitch.PF
}

func newStepEnv(t *testing.T, d *daemons) *stepEnv {
	t.Helper()
	b := newBed(t, d, exampleBed(t))
	se := &stepEnv{Env: New(b.cfg, b.h, slog.New(slog.DiscardHandler)), bed: b, g: &b.cfg.Groups[0]}
	g, errs := ResolveGroup(b.h.Kernel, b.h.FS, se.g)
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	se.pfs = g.PFs
	return se
}

func (se *stepEnv) group() Group {
	return Group{Group: se.g, PFs: se.pfs, Owners: Owners(se.pfs)}
}

// apply runs steps' Apply directly: the prerequisites of the step under test.
func (se *stepEnv) apply(t *testing.T, steps ...teardown.Step) {
	t.Helper()
	for _, s := range steps {
		if err := s.Apply(context.Background()); err != nil {
			t.Fatalf("prerequisite %s: %v", s.ID, err)
		}
	}
}

// vfAddr waits for the n VFs of PF pf and returns VF vf's address.
func (se *stepEnv) vfAddr(t *testing.T, pf, n, vf int) sriov.Addr {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vfs, err := se.pci.WaitVFs(ctx, se.pfs[pf].Addr, n)
	if err != nil {
		t.Fatal(err)
	}
	return vfs[vf].Addr
}

// stepCase is one case of TestEachStepAppliesIdempotentlyAndUndoes: setup
// makes the prerequisites on a fresh stepEnv and returns the step under
// test.
type stepCase struct {
	name  string
	setup func(t *testing.T, se *stepEnv) teardown.Step
	real  bool // needs the real OVS / libvirt daemons
}

// stepCases are a case for every step kind.
func stepCases() []stepCase {
	return []stepCase{
		{name: autoprobeKind{}.Name(), setup: func(t *testing.T, se *stepEnv) teardown.Step { return autoprobeKind{}.step(se.Env, se.pfs[0]) }},
		{name: paramKind{}.Name(), setup: func(t *testing.T, se *stepEnv) teardown.Step {
			return paramKind{}.step(se.Env, se.pfs[0].Devlink, "flow_steering_mode", "smfs", false)
		}},
		{name: numVFsKind{}.Name(), setup: func(t *testing.T, se *stepEnv) teardown.Step { return numVFsKind{}.step(se.Env, se.pfs[1], 3, nil) }},
		{name: vfMACKind{}.Name(), setup: onTwoVFs(func(se *stepEnv) teardown.Step { return vfMACKind{}.step(se.Env, se.pfs[0], 1, "52:54:00:aa:bb:cc") })},
		{name: vfVlan.Name(), setup: onTwoVFs(vfPolicyStep(vfVlan, 1, eswitch.VFPolicy{Vlan: 100, Qos: 3}))},
		{name: vfTrust.Name(), setup: onTwoVFs(vfPolicyStep(vfTrust, 1, eswitch.VFPolicy{Trust: true}))},
		{name: vfSpoofchk.Name(), setup: onTwoVFs(vfPolicyStep(vfSpoofchk, 0, eswitch.VFPolicy{Spoofchk: true}))},
		{name: vfLinkState.Name(), setup: onTwoVFs(vfPolicyStep(vfLinkState, 0, eswitch.VFPolicy{LinkState: eswitch.VFLinkDisable}))},
		{name: vfRate.Name(), setup: onTwoVFs(vfPolicyStep(vfRate, 1, eswitch.VFPolicy{MinTxRate: 100, MaxTxRate: 1000}))},
		// autoprobe on: the VFs get mlx5_core
		{name: unbindKind{}.Name(), setup: onTwoVFs(unbindAll)},
		{name: modeKind{}.Name(), setup: setupSwitchdevOnePF},
		{name: tcOffloadKind{}.Name(), setup: setupTCOffloadTurnedOff},
		{name: bondKind{}.Name(), setup: func(t *testing.T, se *stepEnv) teardown.Step { return bondKind{}.step(se.Env, se.group()) }},
		{name: enslaveKind{}.Name(), setup: setupEnslaveCompletingBond},
		{name: linkUpKind{}.Name(), setup: setupBondUp},
		{name: bindKind{}.Name(), setup: setupBind},
		{name: bindKind{}.Name() + " over an admin's driver_override", setup: setupBindOverOverride},
		{name: unbindKind{}.Name() + " with an admin's driver_override", setup: setupUnbindWithOverride},
		{name: repsUpKind{}.Name(), setup: setupRepsUp},
		{name: rateNodeKind{}.Name(), setup: setupRateNode},
		{name: rateLeafKind{}.Name(), setup: setupRateLeafFromAdminsNode},
		{name: ovsBridgeKind{}.Name(), real: true, setup: setupBridge},
		{name: ovsBridgeKind{}.Name() + " with mtu_request and trunks", real: true, setup: setupBridgeMTUTrunks},
		{name: ovsConfigKind{}.Name() + " tc-policy", real: true, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			return ovsConfigKind{}.step(se.Env, OVSKeyTCPolicy, "skip_sw", newRowRead(se.Env, otherConfigColumn))
		}},
		{name: ovsConfigKind{}.Name() + " max-idle over a prior value", real: true, setup: setupMaxIdleOverPrior},
		{name: attachKind{}.Name(), real: true, setup: setupAttach},
	}
}

// onTwoVFs is a setup that makes 2 VFs on pf 0 before the step.
func onTwoVFs(step func(se *stepEnv) teardown.Step) func(t *testing.T, se *stepEnv) teardown.Step {
	return func(t *testing.T, se *stepEnv) teardown.Step {
		se.apply(t, numVFsKind{}.step(se.Env, se.pfs[0], 2, nil))
		return step(se)
	}
}

// vfPolicyStep is the step of a VF policy kind for pf 0's VF vf.
func vfPolicyStep(k vfPolicyKind, vf int, p eswitch.VFPolicy) func(se *stepEnv) teardown.Step {
	return func(se *stepEnv) teardown.Step { return k.step(se.Env, se.pfs[0], vf, p, false, false) }
}

// unbindAll unbinds every VF of pf 0 (none is kept on its driver).
func unbindAll(se *stepEnv) teardown.Step {
	return unbindKind{}.step(se.Env, se.pfs[0], func(sriov.Addr, string) bool { return false }, nil)
}

// toSwitchdev applies the steps that put both PFs in switchdev with the
// group's VFs (autoprobe off).
func toSwitchdev(t *testing.T, se *stepEnv) {
	se.apply(t, autoprobeKind{}.step(se.Env, se.pfs[0]), autoprobeKind{}.step(se.Env, se.pfs[1]),
		numVFsKind{}.step(se.Env, se.pfs[0], se.g.NumVFs, nil), numVFsKind{}.step(se.Env, se.pfs[1], se.g.NumVFs, nil),
		modeKind{}.step(se.Env, se.pfs[0].Devlink, se.pfs, eswitch.ModeSwitchdev), modeKind{}.step(se.Env, se.pfs[1].Devlink, se.pfs, eswitch.ModeSwitchdev))
}

// representors runs the group's representors phase: the run, with the
// representors it found.
func representors(t *testing.T, se *stepEnv) *groupRun {
	run := &groupRun{e: se.Env, g: se.group()}
	if _, err := run.repsUp(context.Background()); err != nil || !run.repsAll {
		t.Fatalf("representors: %v %v", run.repsAll, err)
	}
	return run
}

func setupSwitchdevOnePF(t *testing.T, se *stepEnv) teardown.Step {
	se.apply(t, autoprobeKind{}.step(se.Env, se.pfs[0]), numVFsKind{}.step(se.Env, se.pfs[0], 2, nil))
	return modeKind{}.step(se.Env, se.pfs[0].Devlink, se.pfs[:1], eswitch.ModeSwitchdev)
}

// setupTCOffloadTurnedOff: the step runs after switchdev, which turns the
// feature on: an operator turned it off.
func setupTCOffloadTurnedOff(t *testing.T, se *stepEnv) teardown.Step {
	toSwitchdev(t, se)
	if err := se.bed.sim.SetFeature(se.pfs[1].Netdev, "hw-tc-offload", false); err != nil {
		t.Fatal(err)
	}
	return tcOffloadKind{}.step(se.Env, se.pfs[1])
}

// setupEnslaveCompletingBond: the second PF completes the bond (the LAG
// activates).
func setupEnslaveCompletingBond(t *testing.T, se *stepEnv) teardown.Step {
	toSwitchdev(t, se)
	se.apply(t, bondKind{}.step(se.Env, se.group()), enslaveKind{}.step(se.Env, se.pfs[0], se.g.Bond.Name))
	return enslaveKind{}.step(se.Env, se.pfs[1], se.g.Bond.Name)
}

func setupBondUp(t *testing.T, se *stepEnv) teardown.Step {
	se.apply(t, bondKind{}.step(se.Env, se.group()))
	return linkUpKind{}.step(se.Env, se.g.Bond.Name, se.g.Bond.Name, se.pfs[0].Netdev)
}

func setupBind(t *testing.T, se *stepEnv) teardown.Step {
	se.apply(t, autoprobeKind{}.step(se.Env, se.pfs[1]), numVFsKind{}.step(se.Env, se.pfs[1], 2, nil))
	return bindKind{}.step(se.Env, se.pfs[1], 1, se.vfAddr(t, 1, 2, 1), "vfio-pci")
}

// setupBindOverOverride: undo must put the admin's mlx5_core back, not
// clear it.
func setupBindOverOverride(t *testing.T, se *stepEnv) teardown.Step {
	se.apply(t, autoprobeKind{}.step(se.Env, se.pfs[1]), numVFsKind{}.step(se.Env, se.pfs[1], 2, nil))
	vf := se.vfAddr(t, 1, 2, 1)
	if err := se.pci.SetDriverOverride(vf, "mlx5_core"); err != nil {
		t.Fatal(err)
	}
	return bindKind{}.step(se.Env, se.pfs[1], 1, vf, "vfio-pci")
}

func setupUnbindWithOverride(t *testing.T, se *stepEnv) teardown.Step {
	se.apply(t, numVFsKind{}.step(se.Env, se.pfs[0], 2, nil))
	if err := se.pci.SetDriverOverride(se.vfAddr(t, 0, 2, 0), "mlx5_core"); err != nil {
		t.Fatal(err)
	}
	return unbindAll(se)
}

func setupRepsUp(t *testing.T, se *stepEnv) teardown.Step {
	toSwitchdev(t, se)
	r := representors(t, se).reps
	return repsUpKind{}.step(se.Env, se.pfs[0], []string{r[VFKey{0, 0}], r[VFKey{0, 3}]})
}

func setupRateNode(t *testing.T, se *stepEnv) teardown.Step {
	toSwitchdev(t, se)
	return rateNodeKind{}.step(se.Env, func(string) bool { return true }, se.pfs[0].Devlink, "tenant1", 1000, 100)
}

// setupRateLeafFromAdminsNode: the leaf is under an operator's node
// (admins): it leaves it for tenant1, and its undo puts it back.
func setupRateLeafFromAdminsNode(t *testing.T, se *stepEnv) teardown.Step {
	toSwitchdev(t, se)
	if err := se.bed.sim.AddRateNode(se.pfs[1].Devlink, "admins", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := se.bed.sim.AddRateNode(se.pfs[1].Devlink, "tenant1", 0, Mbit(1000)); err != nil {
		t.Fatal(err)
	}
	ports, err := se.bed.sim.Ports()
	if err != nil {
		t.Fatal(err)
	}
	port, ok := vfPort(ports, se.pfs[1], 2)
	if !ok {
		t.Fatal("no devlink port for pf 1 vf 2")
	}
	if err := se.bed.sim.SetRateLeafParent(se.pfs[1].Devlink, port, "admins"); err != nil {
		t.Fatal(err)
	}
	return rateLeafKind{}.step(se.Env, se.pfs[1], 2, port, leafRates{TxMax: Mbit(300), TxShare: Mbit(30), Parent: "tenant1"}, nil)
}

func setupBridge(t *testing.T, se *stepEnv) teardown.Step {
	toSwitchdev(t, se)
	se.apply(t, bondKind{}.step(se.Env, se.group()))
	return ovsBridgeKind{}.step(se.Env, representors(t, se).bridgeSpec(), nil, nil)
}

func setupBridgeMTUTrunks(t *testing.T, se *stepEnv) teardown.Step {
	toSwitchdev(t, se)
	se.apply(t, bondKind{}.step(se.Env, se.group()))
	se.g.MTU = 9000
	se.g.VFs = append(se.g.VFs, config.VFConfig{PF: 1, VF: 2, VLAN: 10, VLANMode: "native-untagged", Trunks: []int{30, 20}})
	return ovsBridgeKind{}.step(se.Env, representors(t, se).bridgeSpec(), nil, nil)
}

func setupMaxIdleOverPrior(t *testing.T, se *stepEnv) teardown.Step {
	se.bed.d.ovs.MustVsctl("set", "Open_vSwitch", ".", "other_config:max-idle=10000")
	t.Cleanup(func() { se.bed.d.ovs.MustVsctl("remove", "Open_vSwitch", ".", "other_config", "max-idle") })
	return ovsConfigKind{}.step(se.Env, OVSKeyMaxIdle, "2000", newRowRead(se.Env, otherConfigColumn))
}

func setupAttach(t *testing.T, se *stepEnv) teardown.Step {
	se.apply(t, autoprobeKind{}.step(se.Env, se.pfs[0]), numVFsKind{}.step(se.Env, se.pfs[0], 2, nil))
	return attachKind{}.step(se.Env, "attach-test", libvirtx.Attachment{Domain: "vm1", PCI: string(se.vfAddr(t, 0, 2, 1)), MAC: "52:54:00:aa:bb:01", Owner: se.g.Name})
}

// TestEachStepAppliesIdempotentlyAndUndoes visits every step kind on the
// simulated host: Check says a change is needed, Apply makes it, Check then
// says none is needed (idempotence), the undoer returns the host to the
// state before Apply, and a second undo is a harmless no-op.
func TestEachStepAppliesIdempotentlyAndUndoes(t *testing.T) {
	d := startDaemons(t)
	for _, tc := range stepCases() {
		t.Run(tc.name, func(t *testing.T) {
			var se *stepEnv
			if tc.real {
				se = newStepEnv(t, &d)
			} else {
				se = newStepEnv(t, nil)
			}
			checkStepContract(t, se, tc.setup(t, se))
		})
	}
}

// checkStepContract checks the step contract (teardown's doc.go) on step:
// a change is needed, Apply makes it, then none is needed and a second
// Apply changes nothing; the undo restores the world from before, and a
// second undo changes nothing.
func checkStepContract(t *testing.T, se *stepEnv, step teardown.Step) {
	t.Helper()
	ctx := context.Background()
	before := se.bed.world()
	ch, err := step.Check(ctx)
	if err != nil || !ch.Needed {
		t.Fatalf("check before apply: needed=%v err=%v", ch.Needed, err)
	}
	record, err := json.Marshal(ch.Record)
	if err != nil {
		t.Fatal(err)
	}
	if err := step.Apply(ctx); err != nil {
		t.Fatalf("apply: %v", err)
	}
	applied := se.bed.world()
	if applied == before {
		t.Fatal("apply changed nothing")
	}
	if ch2, err := step.Check(ctx); err != nil || ch2.Needed {
		t.Fatalf("check after apply: needed=%v (%s) err=%v", ch2.Needed, ch2.Summary, err)
	}
	if err := step.Apply(ctx); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if got := se.bed.world(); got != applied {
		t.Fatalf("second apply changed the host:\n%s", testbed.DiffText(applied, got))
	}
	undo := se.Undoers()[step.Kind]
	if _, err := undo(ctx, record); err != nil {
		t.Fatalf("undo: %v", err)
	}
	if got := se.bed.world(); got != before {
		t.Fatalf("undo did not restore the prior state:\n%s", testbed.DiffText(before, got))
	}
	if _, err := undo(ctx, record); err != nil {
		t.Fatalf("second undo: %v", err)
	}
	if got := se.bed.world(); got != before {
		t.Fatalf("second undo changed the host:\n%s", testbed.DiffText(before, got))
	}
}

// TestFlowSteeringDefault: left empty in the config, flow_steering_mode
// becomes smfs only while the eswitch is legacy; an eswitch already in
// switchdev is left as it is (the default never forces a mode cycle); an
// explicit value is enforced as before.
func TestFlowSteeringDefault(t *testing.T) {
	tests := []struct {
		name       string
		switchdev  bool   // the eswitch is in switchdev before the step
		prior      string // the param before ("" the simulator's default)
		cfg        string // the config's flow_steering_mode
		wantNeeded bool
		wantAfter  string
	}{
		{name: "default, legacy: smfs", prior: "dmfs", wantNeeded: true, wantAfter: "smfs"},
		{name: "default, legacy, already smfs", prior: "smfs", wantNeeded: false, wantAfter: "smfs"},
		{name: "default, switchdev: left alone", switchdev: true, prior: "dmfs", wantNeeded: false, wantAfter: "dmfs"},
		{name: "explicit dmfs, legacy", prior: "smfs", cfg: "dmfs", wantNeeded: true, wantAfter: "dmfs"},
		{name: "explicit smfs, legacy", prior: "dmfs", cfg: "smfs", wantNeeded: true, wantAfter: "smfs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			se := newStepEnv(t, nil)
			dl := se.pfs[0].Devlink
			if err := se.bed.sim.SetParam(dl, "flow_steering_mode", tt.prior); err != nil {
				t.Fatal(err)
			}
			if tt.switchdev {
				if err := se.bed.sim.SetEswitchMode(dl, eswitch.ModeSwitchdev); err != nil {
					t.Fatal(err)
				}
			}
			se.g.FlowSteeringMode = tt.cfg
			run := &groupRun{e: se.Env, g: se.group()}
			bs, err := run.params(context.Background())
			if err != nil || len(bs) != 1 || len(bs[0]) == 0 {
				t.Fatalf("params: %v %v", bs, err)
			}
			s := bs[0][0]
			ch, err := s.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if ch.Needed != tt.wantNeeded {
				t.Fatalf("%s: needed %v, want %v (%s)", s.ID, ch.Needed, tt.wantNeeded, ch.Summary)
			}
			if ch.Needed {
				if err := s.Apply(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := se.bed.sim.Param(dl, "flow_steering_mode"); err != nil || got != tt.wantAfter {
				t.Errorf("after: %q %v, want %q", got, err, tt.wantAfter)
			}
			if m, _ := se.bed.sim.EswitchMode(dl); (m == eswitch.ModeSwitchdev) != tt.switchdev {
				t.Errorf("eswitch %s: the step changed the mode", m)
			}
		})
	}
}
