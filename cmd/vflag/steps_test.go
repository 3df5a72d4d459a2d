package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// stepEnv is an env on a fresh simulated host with the example config's
// first group, resolved.
type stepEnv struct {
	*env
	host *sim.Host
	g    *Group
	pfs  []eswitch.PF
}

func newStepEnv(t *testing.T, d *daemons) *stepEnv {
	t.Helper()
	cfg := exampleConfig
	if d != nil {
		b := newBed(t, *d, "")
		cfg = mustRead(t, b.config)
	}
	c := parseConfigText(t, cfg)
	h, err := sim.Open(t.TempDir(), c.Sim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	e := newEnv(c, h, h.FS(), slog.New(slog.DiscardHandler))
	t.Cleanup(e.close)
	se := &stepEnv{env: e, host: h, g: &c.Groups[0]}
	for _, ref := range se.g.PFs {
		pf, err := eswitch.ResolvePF(h, h.FS(), ref)
		if err != nil {
			t.Fatal(err)
		}
		se.pfs = append(se.pfs, pf)
	}
	return se
}

// dump is the simulated kernel's state. A VF netdev whose VF has no MAC set
// gets a random one from the driver at each probe (as mlx5 does): masked.
func (se *stepEnv) groupHost() groupHost {
	return groupHost{g: se.g, pfs: se.pfs, owners: vfOwners(se.pfs)}
}

func (se *stepEnv) dump() string {
	kernel, _, _ := strings.Cut(se.host.Dump(), "dmesg:\n")
	lines := strings.Split(kernel, "\n")
	for i, l := range lines {
		if vfNetdevRE.MatchString(l) {
			lines[i] = macRE.ReplaceAllString(l, "mac=<random>")
		}
	}
	return strings.Join(lines, "\n")
}

var vfNetdevRE = regexp.MustCompile(`^\s+eth\d+ vf `)

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

// TestEachStepAppliesIdempotentlyAndUndoes visits every step kind on the
// simulated host: Check says a change is needed, Apply makes it, Check then
// says none is needed (idempotence), the undoer returns the host to the
// state before Apply, and a second undo is a harmless no-op.
func TestEachStepAppliesIdempotentlyAndUndoes(t *testing.T) {
	d := startDaemons(t)
	type tc struct {
		name  string
		setup func(t *testing.T, se *stepEnv) teardown.Step
		real  bool // needs the real OVS / libvirt daemons
	}
	switchdev := func(t *testing.T, se *stepEnv) {
		se.apply(t, se.autoprobeStep(se.pfs[0]), se.autoprobeStep(se.pfs[1]),
			se.numVFsStep(se.pfs[0], se.g.NumVFs), se.numVFsStep(se.pfs[1], se.g.NumVFs),
			se.modeStep(se.pfs[0].Devlink, se.pfs, eswitch.ModeSwitchdev), se.modeStep(se.pfs[1].Devlink, se.pfs, eswitch.ModeSwitchdev))
	}
	reps := func(t *testing.T, se *stepEnv) map[[2]int]string {
		r, complete, err := se.representors(context.Background(), se.groupHost(), true)
		if err != nil || !complete {
			t.Fatalf("representors: %v %v", complete, err)
		}
		return r
	}
	tests := []tc{
		{name: kindAutoprobe, setup: func(t *testing.T, se *stepEnv) teardown.Step { return se.autoprobeStep(se.pfs[0]) }},
		{name: kindParam, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			return se.paramStep(se.pfs[0].Devlink, "flow_steering_mode", "smfs")
		}},
		{name: kindNumVFs, setup: func(t *testing.T, se *stepEnv) teardown.Step { return se.numVFsStep(se.pfs[1], 3) }},
		{name: kindVFMAC, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			se.apply(t, se.numVFsStep(se.pfs[0], 2))
			return se.vfMACStep(se.pfs[0], 1, "52:54:00:aa:bb:cc")
		}},
		{name: kindUnbind, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			se.apply(t, se.numVFsStep(se.pfs[0], 2)) // autoprobe on: VFs get mlx5_core
			return se.unbindStep(se.pfs[0], func(sriov.Addr, string) bool { return false })
		}},
		{name: kindMode, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			se.apply(t, se.autoprobeStep(se.pfs[0]), se.numVFsStep(se.pfs[0], 2))
			return se.modeStep(se.pfs[0].Devlink, se.pfs[:1], eswitch.ModeSwitchdev)
		}},
		{name: kindTCOffload, setup: func(t *testing.T, se *stepEnv) teardown.Step { return se.tcOffloadStep(se.pfs[1]) }},
		{name: kindBond, setup: func(t *testing.T, se *stepEnv) teardown.Step { return se.bondStep(se.g) }},
		{name: kindEnslave, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			switchdev(t, se)
			se.apply(t, se.bondStep(se.g), se.enslaveStep(se.pfs[0], se.g.Bond.Name))
			return se.enslaveStep(se.pfs[1], se.g.Bond.Name) // completes the bond: LAG activates
		}},
		{name: kindLinkUp, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			se.apply(t, se.bondStep(se.g))
			return se.linkUpStep(se.g.Bond.Name, se.g.Bond.Name, se.pfs[0].Netdev)
		}},
		{name: kindBind, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			se.apply(t, se.autoprobeStep(se.pfs[1]), se.numVFsStep(se.pfs[1], 2))
			return se.bindStep(se.vfAddr(t, 1, 2, 1), "vfio-pci")
		}},
		{name: kindBind + " over an admin's driver_override", setup: func(t *testing.T, se *stepEnv) teardown.Step {
			se.apply(t, se.autoprobeStep(se.pfs[1]), se.numVFsStep(se.pfs[1], 2))
			vf := se.vfAddr(t, 1, 2, 1)
			if err := se.pci.SetDriverOverride(vf, "mlx5_core"); err != nil {
				t.Fatal(err)
			}
			return se.bindStep(vf, "vfio-pci") // undo must put mlx5_core back, not clear it
		}},
		{name: kindUnbind + " with an admin's driver_override", setup: func(t *testing.T, se *stepEnv) teardown.Step {
			se.apply(t, se.numVFsStep(se.pfs[0], 2))
			if err := se.pci.SetDriverOverride(se.vfAddr(t, 0, 2, 0), "mlx5_core"); err != nil {
				t.Fatal(err)
			}
			return se.unbindStep(se.pfs[0], func(sriov.Addr, string) bool { return false })
		}},
		{name: kindRepsUp, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			switchdev(t, se)
			r := reps(t, se)
			return se.linkUpStep("reps/"+se.pfs[0].Netdev, r[[2]int{0, 0}], r[[2]int{0, 3}])
		}},
		{name: kindOVS, real: true, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			switchdev(t, se)
			se.apply(t, se.bondStep(se.g))
			return se.ovsStep(se.bridgeSpec(se.groupHost(), reps(t, se)))
		}},
		{name: kindAttach, real: true, setup: func(t *testing.T, se *stepEnv) teardown.Step {
			se.apply(t, se.autoprobeStep(se.pfs[0]), se.numVFsStep(se.pfs[0], 2))
			return se.attachStep(libvirtx.Attachment{Domain: "vm1", PCI: string(se.vfAddr(t, 0, 2, 1)), MAC: "52:54:00:aa:bb:01", Owner: se.g.Name})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var se *stepEnv
			if tt.real {
				se = newStepEnv(t, &d)
			} else {
				se = newStepEnv(t, nil)
			}
			ctx := context.Background()
			step := tt.setup(t, se)
			world := func() string {
				s := se.dump()
				if tt.real {
					s += d.ovs.Dump() + normalizeXML(d.virt.DomainXML(t, "vm1"))
				}
				return s
			}
			before := world()
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
			applied := world()
			if applied == before {
				t.Fatal("apply changed nothing")
			}
			if ch2, err := step.Check(ctx); err != nil || ch2.Needed {
				t.Fatalf("check after apply: needed=%v (%s) err=%v", ch2.Needed, ch2.Summary, err)
			}
			if err := step.Apply(ctx); err != nil {
				t.Fatalf("second apply: %v", err)
			}
			if got := world(); got != applied {
				t.Fatalf("second apply changed the host:\n%s", diffText(applied, got))
			}
			undo := se.undoers()[step.Kind]
			if err := undo(ctx, record); err != nil {
				t.Fatalf("undo: %v", err)
			}
			if got := world(); got != before {
				t.Fatalf("undo did not restore the prior state:\n%s", diffText(before, got))
			}
			if err := undo(ctx, record); err != nil {
				t.Fatalf("second undo: %v", err)
			}
			if got := world(); got != before {
				t.Fatalf("second undo changed the host:\n%s", diffText(before, got))
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
