package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/testbed"
)

// planSteps are the ids of the steps a plan (-o json) says up changes, in
// order: its forward changes and its removals, each a step FailAt can hit.
func planSteps(t *testing.T, out string) []string {
	t.Helper()
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decode plan: %v\n%s", err, out)
	}
	var ids []string
	for _, s := range rep.Steps {
		if s.Changed && !slices.Contains(ids, s.ID) {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// TestRollbackTransitions is issue 35's property over the convergence
// table of TestConvergeTransitions (variants): for every variant, the
// transitions from base to it and back, on a host converged to the first
// config: up of the second with a failure injected (--fail-at) at a step
// of the run, after the step's real change, must leave the host exactly as
// before the run (the whole canonical dump: kernel, OVSDB, both domains'
// XML); down then gives the baseline from before the first up. The step is
// chosen at random among the run's changes (seed logged;
// VFLAG_ROLLBACK_SEED replays it); VFLAG_ROLLBACK_FULL=1 tries every step.
func TestRollbackTransitions(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	d.startOVN(t) // the OVN variants
	d.virt.DefineDomain(t, "vm2")
	rng := rand.New(rand.NewPCG(testbed.Seed(t, "VFLAG_ROLLBACK_SEED"), 0))
	full := os.Getenv("VFLAG_ROLLBACK_FULL") == "1"
	vs := variants()
	base := vs[0]
	type transition struct{ from, to variant }
	var ts []transition
	for _, v := range vs[1:] {
		ts = append(ts, transition{base, v}, transition{v, base})
	}
	for _, tr := range ts {
		name := tr.from.name + " -> " + tr.to.name
		b := newBed(t, d, "")
		b.useConfig(tr.from.config(d))
		b.initSim()
		baseline := b.fullDump()
		b.mustVflag(2, "up", "--detailed-exit-codes")
		before := b.fullDump()
		b.useConfig(tr.to.config(d))
		steps := planSteps(t, b.mustVflag(2, "plan", "-o", "json", "--detailed-exit-codes"))
		try := steps
		if !full && len(steps) > 0 {
			try = []string{steps[rng.IntN(len(steps))]}
		}
		for _, id := range try {
			_, errs, code := b.vflag("up", "--fail-at", id)
			if code != 1 || !strings.Contains(errs, "injected failure") {
				t.Errorf("%s, failure at %s (of %d changes): exit %d, want 1 with the injected failure:\n%s", name, id, len(steps), code, errs)
			}
			if got := b.fullDump(); got != before {
				t.Errorf("%s, failure at %s (of %d changes): after the rollback the host differs from before the run:\n%s\n%s", name, id, len(steps), testbed.LineDiff(before, got, 10), errs)
				b.useConfig(tr.from.config(d))
				b.mustVflagAny(0, 2)("up", "--detailed-exit-codes")
				b.useConfig(tr.to.config(d))
			}
		}
		b.mustVflag(0, "down")
		if got := b.fullDump(); got != baseline {
			t.Errorf("%s: down after the rollback does not give the baseline:\n%s", name, testbed.LineDiff(baseline, got, 10))
		}
	}
}

// TestTransientDomainRefusedBeforeAnyWrite: an attachment to a transient
// domain (running, not defined), which the attach step refuses, is refused
// by preflight (issue 35: fail early), naming the field, before any write:
// on a fresh host its attach step would come after every other step.
func TestTransientDomainRefusedBeforeAnyWrite(t *testing.T) {
	d := startDaemons(t)
	d.virt.DefineDomain(t, "vmt")
	d.virt.StartDomain(t, "vmt")
	if _, err := d.virt.Virsh("undefine", "vmt"); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(exampleConfig, "{domain: vm1, pf: 1, vf: 0, live: true}", "{domain: vmt, pf: 1, vf: 0, live: false}", 1)
	b := newBed(t, d, cfg)
	b.initSim()
	base := b.dump()
	_, errs, code := b.vflag("up")
	if code != 1 || !strings.Contains(errs, `groups[0].attachments[1].domain: "vmt" is a transient domain`) {
		t.Fatalf("up: exit %d, want 1 with preflight naming the transient domain:\n%s", code, errs)
	}
	if got := b.dump(); got != base {
		t.Fatalf("the refused up changed the host:\n%s", testbed.LineDiff(base, got, 10))
	}
	if entries := b.journalEntries(); len(entries) != 0 {
		t.Fatalf("journal written: %v", entries)
	}
}

// TestOldJournalRollsBack: a journal written before issue 35 (the
// v0.1.0-9c24c2d fixture: no config of a run that ended, no open entry)
// stays usable by up. A failed change undoes what it can from the plan
// pass's captures; what only the config from before can do again (the
// bridge's retag) it names, left as the run made it, until an up of that
// config (which also records it). From then on a failed change returns the
// host to the state before the run. down still gives the baseline.
func TestOldJournalRollsBack(t *testing.T) {
	d := startDaemons(t)
	const name = "v0.1.0-9c24c2d-full-switchdev"
	raw, err := os.ReadFile(filepath.Join(journalFixtureDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(journalFixtureDir, name+".config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("@OVSDB@", d.ovs.Endpoint(), "@LIBVIRT@", d.virt.URI(), "@NETNS@", d.ovs.Netns())
	cfg := fill.Replace(string(tmpl))
	changed := strings.Replace(cfg, `mac: "52:54:00:10:00:01", vlan: 100,`, `mac: "52:54:00:10:00:01", vlan: 300,`, 1)
	if changed == cfg {
		t.Fatal("the fixture's config has no VF 1 VLAN to change")
	}
	b := newBed(t, d, "")
	b.useConfig(cfg)
	b.initSim()
	baseline := b.dump()
	b.mustVflag(2, "up", "--detailed-exit-codes")
	journal := filepath.Join(b.state, "journal.json")
	if err := os.WriteFile(journal, []byte(fill.Replace(string(raw))), 0o600); err != nil {
		t.Fatal(err)
	}
	before := b.dump()

	// The old journal keeps no config to do the bridge again from.
	b.useConfig(changed)
	_, errs, code := b.vflag("up", "--fail-at", "ovs.bridge/br-lag")
	if code != 1 || !strings.Contains(errs, "ovs.bridge/br-lag") || !strings.Contains(errs, "the journal keeps no config of a run that ended") {
		t.Fatalf("failed up on the old journal: exit %d, want 1 naming the bridge it could not put back:\n%s", code, errs)
	}
	b.useConfig(cfg)
	b.mustVflagAny(0, 2)("up", "--detailed-exit-codes")
	if got := b.dump(); got != before {
		t.Fatalf("up of the config from before does not give the host from before:\n%s", testbed.LineDiff(before, got, 10))
	}
	if j, _ := os.ReadFile(journal); !strings.Contains(string(j), `"settled"`) {
		t.Fatal("the up did not record its config in the journal")
	}

	// Now a failed change returns the host to the state before the run.
	b.useConfig(changed)
	if _, errs, code := b.vflag("up", "--fail-at", "ovs.bridge/br-lag"); code != 1 || !strings.Contains(errs, "the host is as before the run") {
		t.Fatalf("failed up: exit %d, want 1 and a complete rollback:\n%s", code, errs)
	}
	if got := b.dump(); got != before {
		t.Fatalf("after the rollback the host differs from before the run:\n%s", testbed.LineDiff(before, got, 10))
	}
	b.mustVflag(0, "down")
	if got := b.dump(); got != baseline {
		t.Fatalf("down does not give the baseline:\n%s", testbed.LineDiff(baseline, got, 10))
	}
}

// TestIssue35Reports: the runs of issue 35's report, on a converged host
// whose libvirtd refuses a VF pool of the simulated addresses (they are no
// SR-IOV VFs to it): a VLAN change with a pool, and a numvfs change with
// a pool, each fail at the pool; the host ends as before the run (the
// bridge with its ports and tags, hw-offload, 4 VFs), and the journal
// holds the same entries; down then gives the baseline. (Were the pool refused in preflight, the host
// would be as before all the same.)
func TestIssue35Reports(t *testing.T) {
	d := startDaemons(t)
	d.virt.DefineDomain(t, "vm2") // fullDump shows it
	for _, tc := range []struct{ name, from, to string }{
		{"vlan", `{pf: 0, vf: 0, mac: "52:54:00:10:00:00", vlan: 100}`, `{pf: 0, vf: 0, mac: "52:54:00:10:00:00", vlan: 300}`},
		{"numvfs", "numvfs: 4 ", "numvfs: 6 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, d, "")
			b.initSim()
			baseline := b.fullDump()
			b.mustVflag(2, "up", "--detailed-exit-codes")
			before, entries := b.fullDump(), b.journalEntries()
			cfg := strings.Replace(networkConfig(t, "    network: {name: pool0}\n"), tc.from, tc.to, 1)
			if !strings.Contains(cfg, tc.to) {
				t.Fatalf("the example config has no %q", tc.from)
			}
			b.point(cfg)
			out, errs, code := b.vflag("up")
			t.Logf("vflag up (%s and a pool):\n%s%s", tc.name, out, errs)
			if code != 1 {
				t.Fatalf("up: exit %d, want 1", code)
			}
			if got := b.fullDump(); got != before {
				t.Fatalf("the failed up left the host otherwise than before it:\n%s", testbed.LineDiff(before, got, 12))
			}
			if got := b.journalEntries(); len(got) != len(entries) {
				t.Fatalf("journal: %d entries, %d before the run", len(got), len(entries))
			}
			// down after the rollback gives the baseline (and the next
			// case starts from it: the daemons are shared).
			b.point(exampleConfig)
			b.mustVflag(0, "down")
			if got := b.fullDump(); got != baseline {
				t.Fatalf("down after the rollback does not give the baseline:\n%s", testbed.LineDiff(baseline, got, 12))
			}
		})
	}
}
