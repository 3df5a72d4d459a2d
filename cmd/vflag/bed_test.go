package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs/ovstest"
)

func TestMain(m *testing.M) {
	// The test binary runs as vflag itself (main, with its signal handling)
	// for the tests that need a real process, e.g. Ctrl-C on a terminal.
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	ovstest.Main(m)
}

// Parallel tests: the longest tests of the package (table walks, the crash
// and rollback properties, the Ctrl-C windows of seconds) call t.Parallel.
// Each starts daemons of its own and spends most of its time waiting (the
// simulated hardware's latencies, subprocesses, polls), so two at a time
// (go test's -parallel, GOMAXPROCS: 2 on the build machine) take about half
// the time on two cores. go test runs them after every sequential test has
// returned, so they never overlap a test that sets the environment
// (t.Setenv, which a parallel test may not call).

// runMainEnv makes the test binary run main (see TestMain).
const runMainEnv = "VFLAG_TEST_RUN_MAIN"

// bed is one test host: a simulated NIC (in its own directory), a real
// ovsdb-server/ovs-vswitchd and a real libvirtd with domain vm1. The OVS and
// libvirt daemons may be shared by sequential subtests: every subtest must
// leave them at their baseline, which is what the tests assert anyway.
type bed struct {
	t      testing.TB
	ovs    *ovstest.Server
	virt   *virttest.Daemon
	simDir string
	state  string
	config string
}

// daemons are the real parts shared by a test's subtests.
type daemons struct {
	ovs  *ovstest.Server
	virt *virttest.Daemon
	// ovn is the simulated ovn-controller on ovs: the Southbound knows the
	// logical ports of the OVN variants (lsp-vm1, lsp-vf01, lsp-elsewhere).
	ovn *sim.OVNController
}

func startDaemons(t testing.TB) daemons {
	d := daemons{ovs: ovstest.Start(t), virt: virttest.Start(t)}
	d.virt.DefineDomain(t, "vm1")
	return d
}

// startOVN runs the simulated ovn-controller on the daemons' OVSDB until
// the test ends; its Southbound knows the logical ports of the OVN
// variants and of examples/ovn.yaml. Only the tests that make an OVN
// chassis start it (its polls shift the timing of the interrupt tests).
func (d *daemons) startOVN(t testing.TB) {
	d.ovn = sim.NewOVNController(d.ovs.Endpoint(), "lsp-vm1", "lsp-vf01", "lsp-elsewhere", "vm1-eth0", "vm2-eth0")
	d.ovn.Poll = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.ovn.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// newBed makes a fresh simulated host with config text cfg (the example
// config when empty) pointed at the daemons.
func newBed(t testing.TB, d daemons, cfg string) *bed {
	dir := t.TempDir()
	b := &bed{t: t, ovs: d.ovs, virt: d.virt, simDir: filepath.Join(dir, "sim"), state: filepath.Join(dir, "state"),
		config: filepath.Join(dir, "vflag.yaml")}
	if cfg == "" {
		cfg = exampleConfig
	}
	cfg = testbed.PointConfig(cfg, d.ovs.Endpoint(), d.virt.URI(), d.ovs.Netns())
	if err := os.WriteFile(b.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// vflag runs the command in-process, as a separate invocation would.
func (b *bed) vflag(args ...string) (stdout, stderr string, code int) {
	b.t.Helper()
	var out, errb bytes.Buffer
	all := append([]string{"--config", b.config, "--sim", b.simDir, "--state-dir", b.state}, args...)
	code = run(context.Background(), all, &out, &errb)
	return out.String(), errb.String(), code
}

// mustVflag runs a command that must exit with code want.
func (b *bed) mustVflag(want int, args ...string) string {
	b.t.Helper()
	out, errs, code := b.vflag(args...)
	if code != want {
		b.t.Fatalf("vflag %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out
}

// upJSON runs `up -o json` and decodes its report.
func (b *bed) upJSON(want int, args ...string) report.Report {
	b.t.Helper()
	out := b.mustVflag(want, append([]string{"up", "-o", "json", "--detailed-exit-codes"}, args...)...)
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		b.t.Fatalf("decode up report: %v\n%s", err, out)
	}
	return rep
}

// simDump is the simulated host's whole state.
func (b *bed) simDump() string {
	b.t.Helper()
	h, err := sim.Open(b.simDir, nil)
	if err != nil {
		b.t.Fatalf("open sim: %v", err)
	}
	defer h.Close()
	return h.Dump()
}

// dump is the whole system (testbed.World): the simulated kernel without
// its log, OVSDB, and vm1's persistent XML.
func (b *bed) dump() string {
	b.t.Helper()
	return testbed.World(testbed.Kernel(b.simDump()), b.ovs.Dump(), b.virt.DomainXML(b.t, "vm1"))
}

// initSim creates the simulated host from the config without changing it
// (a status run opens it), so a baseline dump can be taken. Before up the
// host differs from the config: status exits exitNotUp (the journal holds
// nothing of the groups), or exitProblems where plan refuses the config on
// this host or the journal holds what an earlier host's up made.
func (b *bed) initSim() {
	b.t.Helper()
	b.mustVflagAny(exitNotUp, exitProblems)("status")
}

// statusAny runs `vflag status` with args on a host that may differ from
// the config: exit 0, exitProblems or exitNotUp.
func (b *bed) statusAny(args ...string) string {
	b.t.Helper()
	out, errs, code := b.vflag(append([]string{"status"}, args...)...)
	if code != 0 && code != exitProblems && code != exitNotUp {
		b.t.Fatalf("vflag status %s: exit %d, want 0 or %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, exitProblems, out, errs)
	}
	return out
}
