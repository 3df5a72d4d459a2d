//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment knobs (all optional).
const (
	envCache     = "VFLAG_E2E_CACHE"     // build cache of e2e/build.sh (default /var/cache/vflag-e2e)
	envScenarios = "VFLAG_E2E_SCENARIOS" // comma-separated scenario names to run (default: all)
	envArtifacts = "VFLAG_E2E_ARTIFACTS" // keep each scenario's output directory under this path
	envBin       = "VFLAG_E2E_BIN"       // use this vflag binary instead of building ./cmd/vflag
	envParallel  = "VFLAG_E2E_PARALLEL"  // guests booted at once (default 2; 1: one after the other)
	envTimeout   = "VFLAG_E2E_TIMEOUT"   // seconds: overrides every "# TIMEOUT:" (run-guest.sh reads it too)
	envBedAgain  = "VFLAG_E2E_BED_AGAIN" // "1": boot the "# BED: yes" scenarios even where they passed on this image
	envDeb       = "VFLAG_E2E_DEB"       // use this .deb for "# DEB: yes" scenarios instead of running make package
)

// TestScenarios builds vflag, boots one QEMU guest per scenario script in
// e2e/scenarios and turns each RESULT line of the guest into a subtest:
// TestScenarios/<scenario>/<check>.
func TestScenarios(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the e2e tests must run as root (QEMU chroot, bind mounts)")
	}
	e2eDir, err := os.Getwd() // go test runs in the package directory
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv(envCache)
	if cache == "" {
		cache = "/var/cache/vflag-e2e"
	}
	if _, err := os.Stat(filepath.Join(cache, "current.env")); err != nil {
		t.Fatalf("no e2e test bed in %s: build it first with 'make e2e-image' (bash e2e/build.sh): %v", cache, err)
	}

	// The result depends on much that go test cannot see (the vflag sources
	// built with exec, the image, the scripts run-guest.sh copies): never
	// let it be cached. go test does not cache a run that opened a file of
	// the module modified less than two seconds before the run ended
	// (.last-run is in e2e/.gitignore).
	t.Cleanup(func() { touchOpen(t, filepath.Join(e2eDir, ".last-run")) })

	scenarios, err := loadScenarios(filepath.Join(e2eDir, "scenarios"), os.Getenv(envScenarios))
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv(envTimeout); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs <= 0 {
			t.Fatalf(envTimeout+"=%q: want seconds", v)
		}
		for i := range scenarios {
			scenarios[i].timeout = time.Duration(secs) * time.Second
		}
	}
	bin := vflagBinary(t, filepath.Dir(e2eDir))
	deb := ""
	for _, sc := range scenarios {
		if sc.deb {
			deb = vflagDeb(t, filepath.Dir(e2eDir))
			break
		}
	}

	// Guests at once: a TCG guest keeps about one host core busy on
	// average (it waits for timers, LACP, the nested VM), so two share the
	// build machine's two cores. The scenarios go longest first (their
	// "# TIMEOUT:" as the estimate), so the last one to finish is short.
	slots := 2
	if v := os.Getenv(envParallel); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf(envParallel+"=%q: want a number of guests >= 1", v)
		}
		slots = n
	}
	order := slices.Clone(scenarios)
	sort.SliceStable(order, func(i, j int) bool { return order[i].timeout > order[j].timeout })
	queue := make(chan scenario, len(order))
	for _, sc := range order {
		queue <- sc
	}
	close(queue)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		digests []string
	)
	for range min(slots, len(order)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sc := range queue {
				t.Run(sc.name, func(t *testing.T) {
					if d := runOne(t, cache, e2eDir, sc, bin, deb); d != "" {
						mu.Lock()
						digests = append(digests, d)
						mu.Unlock()
					}
				})
			}
		}()
	}
	wg.Wait()
	// Last, so that a log kept only by its tail still says why: each failed
	// scenario's failed checks with the lines the guest printed for them.
	for _, d := range digests {
		t.Log(d)
	}
}

// runOne boots one scenario, or skips a bed scenario that passed on this
// image and these scripts. It returns the digest of a failed scenario.
func runOne(t *testing.T, cache, e2eDir string, sc scenario, bin, deb string) string {
	stamp := ""
	if sc.bed {
		stamp = bedStamp(t, cache, e2eDir, sc)
		if _, err := os.Stat(stamp); err == nil && os.Getenv(envBedAgain) != "1" {
			t.Logf("%s checks the test bed, and passed on this image and these scripts (%s): not booted again (%s=1 boots it)", sc.name, stamp, envBedAgain)
			return ""
		}
	}
	digest := runScenario(t, e2eDir, sc, bin, deb)
	if stamp != "" && !t.Failed() {
		recordBed(t, stamp)
	}
	return digest
}

// bedStamp is the file that records a bed scenario's pass for the current
// image, scripts and host QEMU: <cache>/bed-passed/<scenario>-<bedKey>.
func bedStamp(t *testing.T, cache, e2eDir string, sc scenario) string {
	t.Helper()
	var inputs [][]byte
	for _, p := range []string{filepath.Join(cache, "current.env"), sc.path, filepath.Join(e2eDir, "scenarios", "lib.sh"), filepath.Join(e2eDir, "run-guest.sh")} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("bed scenario %s: %v", sc.name, err)
		}
		inputs = append(inputs, b)
	}
	// The default machine runs the host's QEMU, which current.env does not
	// name (the igb machine's is in the image's trixie chroot).
	qemu, err := exec.Command("qemu-system-x86_64", "--version").Output()
	if err != nil {
		t.Fatalf("bed scenario %s: qemu-system-x86_64 --version: %v", sc.name, err)
	}
	inputs = append(inputs, qemu)
	return filepath.Join(cache, "bed-passed", sc.name+"-"+bedKey(inputs[0], inputs[1:]...))
}

// recordBed writes the stamp and removes the scenario's older ones.
func recordBed(t *testing.T, stamp string) {
	t.Helper()
	dir := filepath.Dir(stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(stamp)
	prefix := name[:strings.LastIndexByte(name, '-')+1]
	old, _ := filepath.Glob(filepath.Join(dir, prefix+strings.Repeat("?", 16)))
	for _, o := range old {
		if o != stamp {
			os.Remove(o)
		}
	}
	if err := os.WriteFile(stamp, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// vflagBinary builds ./cmd/vflag from the repository root (or takes
// $VFLAG_E2E_BIN) and returns the binary's path. Beside it, as BIN-hook,
// it builds cmd/vflag-hook as the Makefile does (no cgo, no libvirt): the
// hook scripts `vflag install-hook` writes run it when it is next to vflag,
// and run-guest.sh puts it in the share (hook.sh installs it).
func vflagBinary(t *testing.T, root string) string {
	t.Helper()
	if bin := os.Getenv(envBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: %v", envBin, err)
		}
		return bin
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("cannot build vflag: no go command in PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "vflag")
	start := time.Now()
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/vflag")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -o %s ./cmd/vflag (in %s) failed: %v\n%s\n"+
			"The e2e tests drive the vflag binary: ./cmd/vflag must build first.", bin, root, err, out)
	}
	hook := exec.Command(goTool, "build", "-tags", "vflag_nolibvirt", "-o", bin+"-hook", "./cmd/vflag-hook")
	hook.Dir, hook.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := hook.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags vflag_nolibvirt -o %s-hook ./cmd/vflag-hook (in %s) failed: %v\n%s", bin, root, err, out)
	}
	t.Logf("built vflag and vflag-hook in %s", time.Since(start).Round(time.Millisecond))
	return bin
}

// vflagDeb runs `make package` in the repository root (or takes
// $VFLAG_E2E_DEB) and returns the .deb for this architecture: the boot
// scenarios install the package as a host would.
func vflagDeb(t *testing.T, root string) string {
	t.Helper()
	if deb := os.Getenv(envDeb); deb != "" {
		if _, err := os.Stat(deb); err != nil {
			t.Fatalf("%s: %v", envDeb, err)
		}
		return deb
	}
	start := time.Now()
	cmd := exec.Command("make", "-s", "package")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make package (in %s) failed: %v\n%s", root, err, out)
	}
	arch, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		t.Fatalf("go env GOARCH: %v", err)
	}
	debs, _ := filepath.Glob(filepath.Join(root, "build", "vflag_*_"+strings.TrimSpace(string(arch))+".deb"))
	if len(debs) != 1 {
		t.Fatalf("make package: want one build/vflag_*_%s.deb, found %v", strings.TrimSpace(string(arch)), debs)
	}
	t.Logf("built %s in %s", debs[0], time.Since(start).Round(time.Millisecond))
	return debs[0]
}

func runScenario(t *testing.T, e2eDir string, sc scenario, bin, deb string) (digest string) {
	out := t.TempDir()
	if dir := os.Getenv(envArtifacts); dir != "" {
		out = filepath.Join(dir, sc.name)
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// run-guest.sh gives the guest sc.timeout and QEMU sc.timeout+90s.
	ctx, cancel := context.WithTimeout(context.Background(), sc.timeout+150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(e2eDir, "run-guest.sh"), sc.path, out)
	cmd.Env = append(os.Environ(), "VFLAG_BIN="+bin)
	if sc.deb {
		cmd.Env = append(cmd.Env, "VFLAG_DEB="+deb)
	}
	var console bytes.Buffer
	cmd.Stdout, cmd.Stderr = &console, &console
	start := time.Now()
	runErr := cmd.Run()
	ran := time.Since(start)
	t.Logf("%s: guest ran %s (outputs in %s)", sc.name, ran.Round(time.Second), out)

	logPath := filepath.Join(out, "share", "out", sc.name+".log")
	guestLog, err := os.ReadFile(logPath)
	crashed := err != nil && bootCrashed(console.String())
	clockRan := err == nil && guestClockRanAway(guestLog, ran, sc.timeout)
	if stalled := stalledBeforeFirstResult(runErr); (crashed || stalled || clockRan) && ctx.Err() == nil {
		// The guest kernel died before the scenario began (seen once in
		// 10 boots of Debian's 7.2 under TCG: "Oops: int3" in the
		// scheduler at 2 s), or stalled before the first RESULT (seen
		// under TCG: "rcu_preempt kthread timer wakeup didn't happen",
		// then silence; run-guest.sh stops such a guest): a fault of the
		// bed, not of vflag. Boot again once, saying so.
		what := "crashed before the scenario started"
		switch {
		case stalled:
			what = "stalled before its first RESULT"
		case clockRan:
			// Seen on a loaded machine: the sid kernel's clock jumped
			// 385 s during boot (soft lockups reported), and its guest
			// limit of 480 s ran out after 17 s of real time.
			what = fmt.Sprintf("reached its guest-side limit (%s) after %s of real time: its clock ran away", sc.timeout, ran.Round(time.Second))
		}
		t.Logf("%s: the guest kernel %s; booting it again once:\n%s", sc.name, what, lastLines(console.String(), 12))
		retry := exec.CommandContext(ctx, "bash", filepath.Join(e2eDir, "run-guest.sh"), sc.path, out)
		retry.Env = cmd.Env
		console.Reset()
		retry.Stdout, retry.Stderr = &console, &console
		start = time.Now()
		runErr = retry.Run()
		t.Logf("%s: guest ran %s again", sc.name, time.Since(start).Round(time.Second))
		guestLog, err = os.ReadFile(logPath)
	}
	if err != nil {
		t.Errorf("the guest never started the scenario: no log %s", logPath)
	}
	defer func() {
		if t.Failed() {
			t.Logf("==== guest log %s:\n%s", logPath, guestLog)
			t.Logf("==== run-guest.sh output (console.log), last 80 lines:\n%s", lastLines(console.String(), 80))
		}
	}()

	var exitErr *exec.ExitError
	switch m := exitRE.FindSubmatch(guestLog); {
	case ctx.Err() != nil:
		t.Errorf("the harness killed run-guest.sh after %s", sc.timeout+150*time.Second)
	case errors.As(runErr, &exitErr) && exitErr.ExitCode() == 124:
		t.Errorf("QEMU was killed by run-guest.sh's host-side timeout (# TIMEOUT: %d + 90 s)", int(sc.timeout.Seconds()))
	case stalledBeforeFirstResult(runErr):
		t.Errorf("the guest stalled before its first RESULT at both boots (run-guest.sh's stall_watch stopped it)")
	case m == nil:
		t.Errorf("the scenario did not finish: no TESTBED-EXIT line (guest crash or power-off?); run-guest.sh: %v", runErr)
	case string(m[1]) == "124":
		t.Errorf("the scenario hit its guest-side timeout (# TIMEOUT: %d)", int(sc.timeout.Seconds()))
	case string(m[1]) != "0":
		t.Errorf("the scenario script exited %s", m[1])
	case runErr != nil:
		t.Errorf("run-guest.sh: %v", runErr)
	}

	results := parseResults(guestLog)
	var failed []string
	for _, name := range sc.expect {
		rs := results[name]
		delete(results, name)
		if !t.Run(name, func(t *testing.T) { judge(t, rs) }) {
			failed = append(failed, name)
		}
	}
	var extra []string
	for name := range results {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		t.Run(name, func(t *testing.T) {
			t.Errorf("RESULT for a check the scenario does not declare: add it to a '# EXPECT:' line of %s", filepath.Base(sc.path))
		})
	}
	if !t.Failed() {
		return ""
	}
	return fmt.Sprintf("==== %s failed: %d check(s) of %d; the guest's lines for each (full log: %s)\n%s%s",
		sc.name, len(failed), len(sc.expect), logPath, failureDigest(guestLog, failed, 30),
		"==== console, last 15 lines:\n"+lastLines(console.String(), 15))
}

func judge(t *testing.T, rs []result) {
	problems, logs := judgeResults(rs)
	for _, l := range logs {
		t.Log(l)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func touchOpen(t *testing.T, path string) {
	if err := os.WriteFile(path, []byte(time.Now().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		t.Logf("cannot write %s: %v (this run may be cached by go test)", path, err)
		return
	}
	if f, err := os.Open(path); err == nil {
		f.Close()
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
