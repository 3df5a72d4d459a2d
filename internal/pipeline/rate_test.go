package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/teardown"
)

// rateState renders the simulated host's devlink rate objects that carry
// a setting, sorted: "node pci/0000:61:00.0/tenant1 max=1000 share=0",
// "leaf pci/0000:61:00.0/1 max=100 share=10 parent=tenant1".
func rateState(t *testing.T, ce *convergeEnv) string {
	t.Helper()
	rates, err := ce.sim.Rates()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rates {
		if r.Type == "leaf" && r.TxMax == 0 && r.TxShare == 0 && r.Parent == "" {
			continue
		}
		s := fmt.Sprintf("%s %s max=%d share=%d", r.Type, r, ToMbit(r.TxMax), ToMbit(r.TxShare))
		if r.Type == "leaf" {
			s += " parent=" + orDash(r.Parent)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func changedIDs(r *teardown.Runner) []string {
	var out []string
	for _, ev := range r.Results() {
		if ev.Changed {
			out = append(out, ev.Phase+" "+ev.ID)
		}
	}
	sort.Strings(out)
	return out
}

// withRates edits the example config: rate groups and per-VF limits.
func withRates(groups []config.RateGroup, vfs map[[2]int][3]any) func(*config.Config) {
	return func(c *config.Config) {
		g := &c.Groups[0]
		g.RateGroups = groups
		for i := range g.VFs {
			v := &g.VFs[i]
			if r, ok := vfs[[2]int{v.PF, v.VF}]; ok {
				v.TxMax, v.TxShare, v.RateGroup = r[0].(int), r[1].(int), r[2].(string)
			}
		}
		if err := c.Validate(); err != nil {
			panic(err)
		}
	}
}

// TestRateConverge walks a host through rate configs in order: each up
// reaches its state with exactly the listed changes (the plan lists the
// same), a second up changes nothing, removing a rate group prunes its
// nodes after the leaves left them, and down restores every leaf and
// deletes every node vflag made.
func TestRateConverge(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	const pf0, pf1 = "pci/0000:61:00.0", "pci/0000:61:00.1"
	two := []config.RateGroup{{Name: "tenant1", TxMax: 1000}, {Name: "tenant2", TxMax: 2000, TxShare: 100}}
	base := map[[2]int][3]any{{0, 0}: {100, 10, "tenant1"}, {0, 1}: {200, 0, "tenant1"}, {1, 0}: {300, 0, ""}}
	nodes := "node " + pf0 + "/tenant1 max=1000 share=0\nnode " + pf0 + "/tenant2 max=2000 share=100\n" +
		"node " + pf1 + "/tenant1 max=1000 share=0\nnode " + pf1 + "/tenant2 max=2000 share=100"
	steps := []struct {
		name    string
		edit    func(*config.Config)
		changed []string // "apply|undo id"; nil: nothing
		rates   string
	}{
		{"apply", withRates(two, base), []string{
			"apply devlink.rate-leaf/ens1f0np0/0", "apply devlink.rate-leaf/ens1f0np0/1", "apply devlink.rate-leaf/ens1f1np1/0",
			"apply devlink.rate-node/" + pf0 + "/tenant1", "apply devlink.rate-node/" + pf0 + "/tenant2",
			"apply devlink.rate-node/" + pf1 + "/tenant1", "apply devlink.rate-node/" + pf1 + "/tenant2"},
			"leaf " + pf0 + "/1 max=100 share=10 parent=tenant1\nleaf " + pf0 + "/2 max=200 share=0 parent=tenant1\nleaf " + pf1 + "/65537 max=300 share=0 parent=-\n" + nodes},
		{"again: converged", withRates(two, base), nil, ""},
		{"one VF's tx_max", withRates(two, map[[2]int][3]any{{0, 0}: {150, 10, "tenant1"}, {0, 1}: {200, 0, "tenant1"}, {1, 0}: {300, 0, ""}}),
			[]string{"apply devlink.rate-leaf/ens1f0np0/0"},
			"leaf " + pf0 + "/1 max=150 share=10 parent=tenant1\nleaf " + pf0 + "/2 max=200 share=0 parent=tenant1\nleaf " + pf1 + "/65537 max=300 share=0 parent=-\n" + nodes},
		{"a VF moves to another group, a group's tx_max", withRates([]config.RateGroup{{Name: "tenant1", TxMax: 1000}, {Name: "tenant2", TxMax: 2500, TxShare: 100}},
			map[[2]int][3]any{{0, 0}: {150, 10, "tenant2"}, {0, 1}: {200, 0, "tenant1"}, {1, 0}: {300, 0, ""}}),
			[]string{"apply devlink.rate-leaf/ens1f0np0/0", "apply devlink.rate-node/" + pf0 + "/tenant2", "apply devlink.rate-node/" + pf1 + "/tenant2"},
			"leaf " + pf0 + "/1 max=150 share=10 parent=tenant2\nleaf " + pf0 + "/2 max=200 share=0 parent=tenant1\nleaf " + pf1 + "/65537 max=300 share=0 parent=-\n" +
				strings.ReplaceAll(nodes, "max=2000", "max=2500")},
		{"rate group tenant1 removed: its leaf leaves it, the nodes go", withRates([]config.RateGroup{{Name: "tenant2", TxMax: 2500, TxShare: 100}},
			map[[2]int][3]any{{0, 0}: {150, 10, "tenant2"}, {0, 1}: {200, 0, ""}, {1, 0}: {300, 0, ""}}),
			[]string{"undo devlink.rate-node/" + pf0 + "/tenant1", "undo devlink.rate-node/" + pf1 + "/tenant1"},
			"leaf " + pf0 + "/1 max=150 share=10 parent=tenant2\nleaf " + pf0 + "/2 max=200 share=0 parent=-\nleaf " + pf1 + "/65537 max=300 share=0 parent=-\n" +
				"node " + pf0 + "/tenant2 max=2500 share=100\nnode " + pf1 + "/tenant2 max=2500 share=100"},
		{"every rate setting removed", withRates(nil, map[[2]int][3]any{{0, 0}: {0, 0, ""}, {0, 1}: {0, 0, ""}, {1, 0}: {0, 0, ""}}),
			[]string{"undo devlink.rate-leaf/ens1f0np0/0", "undo devlink.rate-leaf/ens1f0np0/1", "undo devlink.rate-leaf/ens1f1np1/0",
				"undo devlink.rate-node/" + pf0 + "/tenant2", "undo devlink.rate-node/" + pf1 + "/tenant2"}, ""},
		{"back again", withRates(two, base), nil, ""}, // changed and rates filled from the first step below
	}
	steps[len(steps)-1].changed, steps[len(steps)-1].rates = steps[0].changed, steps[0].rates
	if _, err := ce.run(false, nil); err != nil {
		t.Fatalf("up without rates: %v", err)
	}
	for i, s := range steps {
		if i == 1 {
			s.rates = steps[0].rates
		}
		plan, err := ce.run(true, s.edit)
		if err != nil {
			t.Fatalf("%s: plan: %v", s.name, err)
		}
		r, err := ce.run(false, s.edit)
		if err != nil {
			t.Fatalf("%s: up: %v", s.name, err)
		}
		got := changedIDs(r)
		if strings.Join(got, "\n") != strings.Join(s.changed, "\n") {
			t.Errorf("%s: changes\n%s\nwant\n%s", s.name, strings.Join(got, "\n"), strings.Join(s.changed, "\n"))
		}
		if p := changedIDs(plan); strings.Join(p, "\n") != strings.Join(got, "\n") {
			t.Errorf("%s: plan lists\n%s\nup did\n%s", s.name, strings.Join(p, "\n"), strings.Join(got, "\n"))
		}
		if got := rateState(t, ce); got != s.rates {
			t.Errorf("%s: rates\n%s\nwant\n%s", s.name, got, s.rates)
		}
		again, err := ce.run(false, s.edit)
		if err != nil {
			t.Fatalf("%s: second up: %v", s.name, err)
		}
		if c := changedIDs(again); len(c) > 0 {
			t.Errorf("%s: second up changed %v", s.name, c)
		}
	}
	ce.down(t)
	if got := rateState(t, ce); got != "" {
		t.Errorf("after down: rate objects left:\n%s", got)
	}
}

// TestRateNodeNotOurs: a node of a rate group's name that vflag did not
// make stops up before any write, naming it; vflag leaves it alone, and
// down does not delete it.
func TestRateNodeNotOurs(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	if _, err := ce.run(false, nil); err != nil {
		t.Fatalf("up: %v", err)
	}
	if err := ce.sim.AddRateNode(pf0Devlink, "tenant1", 0, Mbit(42)); err != nil {
		t.Fatal(err)
	}
	before := ce.sim.Dump()
	edit := withRates([]config.RateGroup{{Name: "tenant1", TxMax: 1000}}, map[[2]int][3]any{{0, 0}: {100, 0, "tenant1"}})
	_, err := ce.run(false, edit)
	if err == nil || !strings.Contains(err.Error(), "rate node pci/0000:61:00.0/tenant1 exists and vflag did not create it") {
		t.Fatalf("up over an operator's node: %v", err)
	}
	if got := ce.sim.Dump(); testbed.Kernel(got) != testbed.Kernel(before) {
		t.Errorf("up wrote before refusing")
	}
	// The kernel refuses the eswitch's way back to legacy while a rate node
	// exists: down says so, naming the node, and leaves it.
	err = ce.tryDown(t)
	if err == nil || !strings.Contains(err.Error(), "devlink rate node(s) tenant1 exist and vflag did not make them") {
		t.Fatalf("down with an operator's node: %v", err)
	}
	if got := rateState(t, ce); got != "node pci/0000:61:00.0/tenant1 max=42 share=0" {
		t.Errorf("down touched the operator's node: %q", got)
	}
	if err := ce.sim.DelRateNode(pf0Devlink, "tenant1"); err != nil {
		t.Fatal(err)
	}
	ce.down(t)
}

var pf0Devlink = eswitch.Devlink{Bus: "pci", Device: "0000:61:00.0"}

// down runs vflag down from the journal alone.
func (ce *convergeEnv) down(t *testing.T) {
	t.Helper()
	if err := ce.tryDown(t); err != nil {
		t.Fatalf("down: %v", err)
	}
}

func (ce *convergeEnv) tryDown(t *testing.T) error {
	t.Helper()
	j, err := teardown.OpenJournal(ce.journalDir)
	if err != nil {
		t.Fatal(err)
	}
	h := host.New(ce.sim, ce.sim.FS(), "", "")
	defer h.Close()
	e := New(nil, h, nil)
	r := &teardown.Runner{Journal: j, Undo: e.Undoers()}
	return r.Down(context.Background())
}

// TestNumVFsChangeKeepsRatesRight (issue 36, rule 6): on mlx5 in
// switchdev, numvfs going to 0 destroys every devlink rate node of the PF
// (6.x mlx5_eswitch_disable_sriov). A numvfs change of a group with rate
// groups makes vflag's nodes again (plan predicts it: TestPlanPredictsRemadeVFs);
// with a node that is not vflag's on the PF, up refuses the change before
// any write, naming it, and converges once it is gone.
func TestNumVFsChangeKeepsRatesRight(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	rates := withRates([]config.RateGroup{{Name: "tenant1", TxMax: 1000}}, map[[2]int][3]any{{0, 0}: {100, 0, "tenant1"}})
	if _, err := ce.run(false, rates); err != nil {
		t.Fatalf("up: %v", err)
	}
	fewer := func(c *config.Config) { rates(c); c.Groups[0].NumVFs = 2 }
	if err := ce.sim.AddRateNode(pf0Devlink, "ops", 0, Mbit(42)); err != nil {
		t.Fatal(err)
	}
	before := ce.sim.Dump()
	if _, err := ce.run(false, fewer); err == nil || !strings.Contains(err.Error(), "rate node(s) ops are not vflag's") {
		t.Fatalf("numvfs change over an operator's node: %v", err)
	}
	if got := ce.sim.Dump(); testbed.Kernel(got) != testbed.Kernel(before) {
		t.Errorf("up wrote before refusing:\n%s", testbed.DiffText(testbed.Kernel(before), testbed.Kernel(got)))
	}
	if err := ce.sim.DelRateNode(pf0Devlink, "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.run(false, fewer); err != nil {
		t.Fatalf("numvfs change: %v", err)
	}
	if got := rateState(t, ce); !strings.Contains(got, "node pci/0000:61:00.0/tenant1 max=1000") {
		t.Errorf("after the numvfs change: %q", got)
	}
	again, err := ce.run(false, fewer)
	if err != nil {
		t.Fatal(err)
	}
	if c := changedIDs(again); len(c) > 0 {
		t.Errorf("second up changed %v", c)
	}
	ce.down(t)
}
