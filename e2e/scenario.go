// Package e2e runs vflag's end-to-end scenarios: each script in
// e2e/scenarios is booted in a Linux guest under QEMU (see README.md).
// The QEMU harness is e2e_test.go (build tag e2e); this file holds the
// scenario and RESULT parsing, which the untagged tests check without QEMU.
package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type scenario struct {
	name    string   // file name without .sh
	path    string   // absolute path of the script
	expect  []string // names from "# EXPECT:" lines, in order
	timeout time.Duration
	// bed ("# BED: yes"): the scenario checks the test bed (image, kernel,
	// QEMU devices), not vflag; once it passed on an image it is not booted
	// again for that image (see bedKey).
	bed bool
	// deb ("# DEB: yes"): the guest gets the .deb of `make package` as
	// $SHARE/vflag.deb (the harness builds it once per run).
	deb bool
	// init ("# INIT: testbed|systemd") and boots ("# BOOTS: N", systemd
	// only): see run-guest.sh.
	init  string
	boots int
	// kernel ("# KERNEL: bookworm|sid"): the guest kernel (see run-guest.sh).
	kernel string
}

// Header lines: "# NAME: value", where a trailing " # comment" is dropped
// (run-guest.sh reads them the same way).
var (
	headerRE        = regexp.MustCompile(`^# ([A-Z_]+):\s*(.*)$`)
	trailingComment = regexp.MustCompile(`\s+#.*$`)
)

// loadScenarios reads every e2e/scenarios/*.sh except lib.sh. only is a
// comma-separated list of names to keep ("" keeps all).
func loadScenarios(dir, only string) ([]scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.sh"))
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n = strings.TrimSuffix(strings.TrimSpace(n), ".sh"); n != "" {
			keep[n] = true
		}
	}
	var out []scenario
	found := map[string]bool{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".sh")
		if name == "lib" || (len(keep) > 0 && !keep[name]) {
			continue
		}
		found[name] = true
		sc, err := parseScenario(p)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	var missing []string
	for n := range keep {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("unknown scenarios %v (have %s/*.sh)", missing, dir)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenarios in %s", dir)
	}
	return out, nil
}

func parseScenario(path string) (scenario, error) {
	sc := scenario{name: strings.TrimSuffix(filepath.Base(path), ".sh"), path: path, timeout: 600 * time.Second, init: "testbed", boots: 1}
	data, err := os.ReadFile(path)
	if err != nil {
		return sc, err
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		m := headerRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		m[2] = trailingComment.ReplaceAllString(m[2], "")
		switch m[1] {
		case "EXPECT":
			for _, n := range strings.Fields(m[2]) {
				if seen[n] {
					return sc, fmt.Errorf("%s: check %q is listed twice in # EXPECT", path, n)
				}
				seen[n] = true
				sc.expect = append(sc.expect, n)
			}
		case "BED":
			switch strings.TrimSpace(m[2]) {
			case "yes":
				sc.bed = true
			case "no":
			default:
				return sc, fmt.Errorf("%s: bad # BED %q: want yes or no", path, m[2])
			}
		case "DEB":
			switch strings.TrimSpace(m[2]) {
			case "yes":
				sc.deb = true
			case "no":
			default:
				return sc, fmt.Errorf("%s: bad # DEB %q: want yes or no", path, m[2])
			}
		case "INIT":
			switch v := strings.TrimSpace(m[2]); v {
			case "testbed", "systemd":
				sc.init = v
			default:
				return sc, fmt.Errorf("%s: bad # INIT %q: want testbed or systemd", path, m[2])
			}
		case "KERNEL":
			switch v := strings.TrimSpace(m[2]); v {
			case "bookworm", "sid":
				sc.kernel = v
			default:
				return sc, fmt.Errorf("%s: bad # KERNEL %q: want bookworm or sid", path, m[2])
			}
		case "BOOTS":
			n, err := strconv.Atoi(strings.TrimSpace(m[2]))
			if err != nil || n < 1 {
				return sc, fmt.Errorf("%s: bad # BOOTS %q: want a number >= 1", path, m[2])
			}
			sc.boots = n
		case "TIMEOUT":
			secs, err := strconv.Atoi(strings.TrimSpace(m[2]))
			if err != nil || secs <= 0 {
				return sc, fmt.Errorf("%s: bad # TIMEOUT %q", path, m[2])
			}
			sc.timeout = time.Duration(secs) * time.Second
		}
	}
	if sc.boots > 1 && sc.init != "systemd" {
		return sc, fmt.Errorf("%s: # BOOTS: %d needs # INIT: systemd (testbed-init cannot reboot)", path, sc.boots)
	}
	if len(sc.expect) == 0 {
		return sc, fmt.Errorf("%s declares no checks: add '# EXPECT: <check> ...' lines to its header", path)
	}
	return sc, nil
}

// result is one "RESULT <name> PASS|FAIL|SKIP <detail>" line of the guest.
type result struct {
	status, detail string
}

var resultRE = regexp.MustCompile(`^RESULT ([A-Za-z0-9_.:-]+) (PASS|FAIL|SKIP)(?: (.*))?$`)

// parseResults collects the RESULT lines of a guest log by check name.
func parseResults(log []byte) map[string][]result {
	res := map[string][]result{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if m := resultRE.FindStringSubmatch(strings.TrimRight(sc.Text(), "\r")); m != nil {
			res[m[1]] = append(res[m[1]], result{status: m[2], detail: m[3]})
		}
	}
	return res
}

// judgeResults turns the RESULT lines of one expected check into the
// subtest's verdict: problems (each fails it) and the lines to log. No
// line is a problem (the check never ran), so is a FAIL, and so is a SKIP:
// an expected check that did not run proves nothing, the bed lacks what it
// should have.
func judgeResults(rs []result) (problems, logs []string) {
	if len(rs) == 0 {
		return []string{"missing: the guest printed no RESULT line for this check"}, nil
	}
	for _, r := range rs {
		switch r.status {
		case "FAIL":
			problems = append(problems, "FAIL "+r.detail)
		case "SKIP":
			problems = append(problems, "SKIP (an expected check must run) "+r.detail)
		default:
			logs = append(logs, "PASS "+r.detail)
		}
	}
	return problems, logs
}

// bedKey identifies what a bed scenario's verdict depends on: the image, as
// the KEY=VALUE lines of the cache's current.env name it (stage directories
// named by input hashes, package versions; its comment line carries the
// build time and is left out), and the text of the scripts the guest runs.
func bedKey(currentEnv []byte, scripts ...[]byte) string {
	h := sha256.New()
	for _, line := range strings.Split(string(currentEnv), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			fmt.Fprintf(h, "%s\n", line)
		}
	}
	for _, s := range scripts {
		fmt.Fprintf(h, "%d\n", len(s))
		h.Write(s)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// failureDigest gathers, for each check of failed, the lines the guest
// printed for it ("    [name] ..." from lib.sh's _show, and its RESULT
// lines), at most perCheck of the last ones each: what a CI log cut to its
// tail still shows about why a scenario failed.
func failureDigest(log []byte, failed []string, perCheck int) string {
	want := map[string]bool{}
	for _, f := range failed {
		want[f] = true
	}
	lines := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		name := ""
		if m := resultRE.FindStringSubmatch(l); m != nil {
			name = m[1]
		} else if t := strings.TrimLeft(l, " \t"); strings.HasPrefix(t, "[") {
			if i := strings.IndexByte(t, ']'); i > 1 {
				name = t[1:i]
			}
		}
		if want[name] {
			lines[name] = append(lines[name], l)
		}
	}
	var b strings.Builder
	for _, f := range failed {
		ls := lines[f]
		fmt.Fprintf(&b, "-- %s:", f)
		if len(ls) == 0 {
			b.WriteString(" (no line in the guest log)\n")
			continue
		}
		b.WriteByte('\n')
		if len(ls) > perCheck {
			fmt.Fprintf(&b, "   (%d lines before these)\n", len(ls)-perCheck)
			ls = ls[len(ls)-perCheck:]
		}
		for _, l := range ls {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// bootCrashed: the console shows the guest kernel's oops or panic (the
// caller has seen that the scenario never began).
func bootCrashed(console string) bool {
	return strings.Contains(console, "Oops:") || strings.Contains(console, "Kernel panic")
}

var exitRE = regexp.MustCompile(`(?m)^TESTBED-EXIT (\d+)\s*$`)

// guestClockRanAway: the guest says its own limit ran out (TESTBED-EXIT
// 124) in less than half of that limit of real time, which only a guest
// clock that jumped can do.
func guestClockRanAway(guestLog []byte, ran, limit time.Duration) bool {
	m := exitRE.FindSubmatch(guestLog)
	return m != nil && string(m[1]) == "124" && ran < limit/2
}

// stalledBeforeFirstResult: run-guest.sh's exit 125 (its stall_watch
// stopped a guest that went silent before its first RESULT).
func stalledBeforeFirstResult(runErr error) bool {
	var exitErr *exec.ExitError
	return errors.As(runErr, &exitErr) && exitErr.ExitCode() == 125
}
