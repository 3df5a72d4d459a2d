package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/status"
	"github.com/vflag/vflag/internal/testbed"
)

// TestBadConfigsWriteNothing feeds the bad configs of the issue through the
// CLI and checks each is rejected naming its field, with zero writes: the
// simulated host, OVSDB, the domain and the state dir are untouched.
func TestBadConfigsWriteNothing(t *testing.T) {
	d := startDaemons(t)
	tests := []struct {
		name, from, to, field string
	}{
		{"bond mode outside 1/2/4", "mode: 802.3ad", "mode: balance-alb", "groups[0].bond.mode"},
		{"numvfs above totalvfs", "numvfs: 4 ", "numvfs: 9 ", "groups[0].numvfs"},
		{"numvfs above 64 with LAG", "numvfs: 4 ", "numvfs: 65 ", "groups[0].numvfs"},
		{"two PFs of different NICs", "pfs: [ens1f0np0, ens1f1np1]", "pfs: [ens1f0np0, ens2f0np0]", "groups[0].pfs"},
		{"interface name with a slash", "pfs: [ens1f0np0, ens1f1np1]", "pfs: [ens1f0np0, ../../ens1]", "groups[0].pfs[1]"},
		{"malformed MAC", `mac: "52:54:00:10:00:01"`, `mac: "52:54:00:10:00:0g"`, "groups[0].vfs[1].mac"},
		{"malformed PCI address", "pfs: [ens1f0np0, ens1f1np1]", `pfs: [ens1f0np0, "0000:61:00.8"]`, "groups[0].pfs[1]"},
		{"attachment to an unknown VF", "{domain: vm1, pf: 1, vf: 0, live: true}", "{domain: vm1, pf: 1, vf: 7, live: true}", "groups[0].attachments[1].vf"},
		{"unknown key", "lag_timeout: 30s", "lag_timout: 30s", "lag_timout"},
		{"attachment to a domain libvirt does not know", "{domain: vm1, pf: 1, vf: 0, live: true}", "{domain: vm9, pf: 1, vf: 0, live: true}", `groups[0].attachments[1].domain: "vm9" is not a domain of libvirt`},
		{"PF that does not exist", "pfs: [ens1f0np0, ens1f1np1]", "pfs: [ens1f0np0, ens9f1]", "groups[0].pfs[1]"},
	}
	// A second NIC so that "different NICs" names a real PF.
	twoNICs := strings.Replace(exampleConfig, "  latency:\n", `    - name: other
      pfs:
        - {pci: "0000:62:00.0", netdev: ens2f0np0}
        - {pci: "0000:62:00.1", netdev: ens2f1np1}
  latency:
`, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(twoNICs, tt.from) {
				t.Fatalf("example config lacks %q", tt.from)
			}
			good := newBed(t, d, twoNICs)
			good.initSim()
			base := good.dump()
			simState, _ := os.ReadFile(filepath.Join(good.simDir, "host.json"))
			bad := strings.Replace(twoNICs, tt.from, tt.to, 1)
			if err := os.WriteFile(good.config, []byte(badEndpoints(good, bad)), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"up", "plan"} {
				out, errs, code := good.vflag(cmd)
				if code != 1 {
					t.Fatalf("%s accepted the bad config: exit %d\n%s%s", cmd, code, out, errs)
				}
				if !strings.Contains(errs, tt.field) {
					t.Fatalf("%s: error does not name %s:\n%s", cmd, tt.field, errs)
				}
			}
			if got := good.dump(); got != base {
				t.Fatalf("a rejected config changed the host:\n%s", testbed.DiffText(base, got))
			}
			if now, _ := os.ReadFile(filepath.Join(good.simDir, "host.json")); string(now) != string(simState) {
				t.Fatal("a rejected config rewrote the simulated host's state")
			}
			if entries := good.journalEntries(); len(entries) != 0 {
				t.Fatalf("journal written: %v", entries)
			}
		})
	}
}

// badEndpoints points a config text at the bed's daemons, as newBed does.
func badEndpoints(b *bed, cfg string) string {
	return testbed.PointConfig(cfg, b.ovs.Endpoint(), b.virt.URI(), b.ovs.Netns())
}

// TestForeignObjectsSurvive: a bond, a bridge with its own port and a
// hw-offload value that exist before vflag are left as they were by down.
func TestForeignObjectsSurvive(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, strings.Replace(exampleConfig, "bridge: br-lag", "bridge: br-pre", 1))
	b.initSim()
	// A pre-existing bridge with a port of its own, and hw-offload=false set by the operator.
	d.ovs.MustVsctl("add-br", "br-pre", "--", "set", "bridge", "br-pre", "datapath_type=netdev")
	d.ovs.MustVsctl("add-port", "br-pre", "uplink-foreign")
	d.ovs.MustVsctl("set", "Open_vSwitch", ".", "other_config:hw-offload=false")
	// A pre-existing bond of the operator's, on other interfaces.
	h, err := sim.Open(b.simDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddBond(eswitch.BondSpec{Name: "bond-ops", Mode: "active-backup", Miimon: 100}); err != nil {
		t.Fatal(err)
	}
	h.Close()
	base := b.dump()

	b.upJSON(2)
	st := b.mustVflag(0, "status", "-o", "json")
	var hs status.HostStatus
	if err := json.Unmarshal([]byte(st), &hs); err != nil {
		t.Fatal(err)
	}
	if hs.Groups[0].HWOffload != "true" {
		t.Fatalf("hw-offload %q after up", hs.Groups[0].HWOffload)
	}
	b.mustVflag(0, "down")
	if got := b.dump(); got != base {
		t.Fatalf("down touched what vflag did not create:\n%s", testbed.DiffText(base, got))
	}
	for _, want := range []string{"uplink-foreign", "br-pre", `hw-offload="false"`} {
		if !strings.Contains(base, want) || !strings.Contains(b.dump(), want) {
			t.Errorf("%s missing from the dumps", want)
		}
	}
}

// TestBondNameTakenByForeignBond: a bond of the configured name that vflag
// did not create is refused before any write.
func TestBondNameTakenByForeignBond(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.initSim()
	h, err := sim.Open(b.simDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100, Alias: "ops-team"}); err != nil {
		t.Fatal(err)
	}
	h.Close()
	base := b.dump()
	_, errs, code := b.vflag("up")
	if code != 1 || !strings.Contains(errs, "groups[0].bond.name") || !strings.Contains(errs, "not created by vflag") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if got := b.dump(); got != base {
		t.Fatalf("refused run changed the host:\n%s", testbed.DiffText(base, got))
	}
}

// TestPlanWritesNothing: plan lists the steps up would take, and exits 2
// with --detailed-exit-codes; on a converged host it reports nothing to do.
func TestPlanWritesNothing(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.initSim()
	base := b.dump()
	out := b.mustVflag(2, "plan", "--detailed-exit-codes")
	for _, want := range []string{"sriov_numvfs 0 -> 4", "eswitch legacy -> switchdev", "create bond bond0", "enslave ens1f0np0 to bond0",
		"map 4 representors of ens1f0np0", "map 4 representors of ens1f1np1", "bridge br-lag", "attach VF 0 of ens1f0np0"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if got := b.dump(); got != base {
		t.Fatalf("plan changed the host:\n%s", testbed.DiffText(base, got))
	}
	b.upJSON(2)
	if out := b.mustVflag(0, "plan", "--detailed-exit-codes"); !strings.Contains(out, "no changes") {
		t.Fatalf("plan on a converged host: %s", out)
	}
	// The converged plan reads every step, including OVS and libvirt.
	var rep report.Report
	if err := json.Unmarshal([]byte(b.mustVflag(0, "plan", "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, s := range rep.Steps {
		kinds[s.Kind] = true
	}
	for _, k := range []string{"sriov.numvfs", "eswitch.mode", "bond.create", "reps.up", "ovs.bridge", "libvirt.attach"} {
		if !kinds[k] {
			t.Errorf("converged plan did not check %s", k)
		}
	}
	b.mustVflag(0, "down")
}

// TestDownFromJournalAlone: down works with the config deleted, and twice.
func TestDownFromJournalAlone(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.initSim()
	base := b.dump()
	b.upJSON(2)
	if err := os.Remove(b.config); err != nil {
		t.Fatal(err)
	}
	out := b.mustVflag(2, "down", "--detailed-exit-codes")
	if !strings.Contains(out, "undid") {
		t.Fatalf("down output: %s", out)
	}
	if got := b.dump(); got != base {
		t.Fatalf("down without config: not at baseline:\n%s", testbed.DiffText(base, got))
	}
	if out := b.mustVflag(0, "down", "--detailed-exit-codes"); !strings.Contains(out, "nothing to undo") {
		t.Fatalf("second down: %s", out)
	}
}

// TestSecondUpMakesNoWrite: the converged re-run writes neither the host,
// nor the journal, nor OVSDB.
func TestSecondUpMakesNoWrite(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.initSim()
	b.upJSON(2)
	stat := func(p string) string {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime().String()
	}
	hostM, journalM := stat(filepath.Join(b.simDir, "host.json")), stat(filepath.Join(b.state, "journal.json"))
	dump := b.dump()
	out := b.mustVflag(0, "up")
	if !strings.Contains(out, "no changes") || !strings.Contains(out, "no write") {
		t.Fatalf("second up does not say it made no change: %s", out)
	}
	if stat(filepath.Join(b.simDir, "host.json")) != hostM {
		t.Error("second up wrote the simulated host")
	}
	if stat(filepath.Join(b.state, "journal.json")) != journalM {
		t.Error("second up wrote the journal")
	}
	if got := b.dump(); got != dump {
		t.Errorf("second up changed the system:\n%s", testbed.DiffText(dump, got))
	}
	b.mustVflag(0, "down")
}

// TestConcurrentRuns: a second vflag waits for the one holding the lock,
// bounded by --lock-wait (0: fail at once), saying whom it waits for; two
// ups started together both succeed, one after the other, and leave one
// converged host with its journal whole.
func TestConcurrentRuns(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.initSim()
	base := b.dump()
	lockPath := filepath.Join(b.state, "lock")
	if err := os.MkdirAll(b.state, 0o700); err != nil {
		t.Fatal(err)
	}
	held := holdLock(t, lockPath)
	_, errs, code := b.vflag("up", "--lock-wait", "0")
	if code != 1 || !strings.Contains(errs, "another vflag is running") || strings.Contains(errs, "waited") {
		t.Fatalf("--lock-wait 0: exit %d: %s", code, errs)
	}
	_, errs, code = b.vflag("down", "--lock-wait", "300ms")
	if code != 1 || !strings.Contains(errs, "another vflag is running") || !strings.Contains(errs, "waited --lock-wait 300ms for it") ||
		!strings.Contains(errs, "waiting for another vflag to finish") {
		t.Fatalf("--lock-wait 300ms: exit %d: %s", code, errs)
	}
	held()

	type res struct {
		out, errs string
		code      int
	}
	results := make(chan res, 2)
	for range 2 {
		go func() {
			out, errs, code := b.vflag("up", "--detailed-exit-codes")
			results <- res{out, errs, code}
		}()
	}
	var codes []int
	for range 2 {
		r := <-results
		codes = append(codes, r.code)
		if r.code != 0 && r.code != 2 {
			t.Errorf("concurrent up: exit %d\n%s\n%s", r.code, r.out, r.errs)
		}
	}
	slices.Sort(codes)
	if !slices.Equal(codes, []int{0, 2}) {
		t.Errorf("concurrent ups exited %v, want one change (2) and one converged run (0)", codes)
	}
	b.mustVflag(0, "up", "--detailed-exit-codes")
	b.mustVflag(0, "down")
	if got := b.dump(); got != base {
		t.Errorf("down after concurrent ups: not at baseline:\n%s", testbed.DiffText(base, got))
	}
}
