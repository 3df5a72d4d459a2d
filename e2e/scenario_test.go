package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The scenario scripts are checked without QEMU: their headers parse and
// their shell syntax (and that of the host scripts) is valid.
func TestScenarioFiles(t *testing.T) {
	scs, err := loadScenarios("scenarios", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		t.Run(sc.name, func(t *testing.T) {
			if out, err := exec.Command("bash", "-n", sc.path).CombinedOutput(); err != nil {
				t.Errorf("bash -n: %v\n%s", err, out)
			}
		})
	}
	for _, f := range []string{"scenarios/lib.sh", "run-guest.sh", "build.sh", "common.sh", "guest/testbed-init"} {
		if out, err := exec.Command("bash", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", f, err, out)
		}
	}
}

func TestParseScenario(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("a.sh", "#!/bin/bash\n# MACHINE: igb\n# TIMEOUT: 42   # seconds\n# EXPECT: one two\n# EXPECT: three # the last\n# Note: ignored\n")
	sc, err := parseScenario(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"one", "two", "three"}; !reflect.DeepEqual(sc.expect, want) {
		t.Errorf("expect = %v, want %v", sc.expect, want)
	}
	if sc.timeout != 42*time.Second || sc.name != "a" || sc.bed {
		t.Errorf("timeout %v name %q bed %v", sc.timeout, sc.name, sc.bed)
	}
	if sc, err := parseScenario(write("bed.sh", "# BED: yes   # the bed\n# EXPECT: x\n")); err != nil || !sc.bed {
		t.Errorf("# BED: yes: bed %v, err %v", sc.bed, err)
	}
	if sc, err := parseScenario(write("k.sh", "# KERNEL: sid\n# EXPECT: x\n")); err != nil || sc.kernel != "sid" {
		t.Errorf("# KERNEL: sid: kernel %q, err %v", sc.kernel, err)
	}
	for body, why := range map[string]string{
		"# EXPECT: x\n# KERNEL: 7.2\n":   "bad KERNEL",
		"# EXPECT: x\n# BED: maybe\n":    "bad BED",
		"# MACHINE: default\n":           "no EXPECT",
		"# EXPECT: x x\n":                "duplicate",
		"# EXPECT: x\n# TIMEOUT: soon\n": "bad timeout",
	} {
		if _, err := parseScenario(write("bad.sh", body)); err == nil {
			t.Errorf("%s: no error", why)
		}
	}
	write("lib.sh", "# helpers\n")
	write("b.sh", "# EXPECT: b\n")
	scs, err := loadScenarios(dir, "b")
	if err != nil || len(scs) != 1 || scs[0].name != "b" {
		t.Errorf("loadScenarios(b) = %v, %v", scs, err)
	}
	if _, err := loadScenarios(dir, "nope"); err == nil {
		t.Error("unknown scenario name: no error")
	}
}

func TestParseResults(t *testing.T) {
	log := "boot noise\nRESULT a PASS fine\r\nRESULT b FAIL want 1, got 2\nRESULT a FAIL again\n" +
		"RESULT c SKIP\nRESULT bad-name-without-status\n  RESULT indented PASS x\nRESULT d PASS\n"
	got := parseResults([]byte(log))
	want := map[string][]result{
		"a": {{"PASS", "fine"}, {"FAIL", "again"}},
		"b": {{"FAIL", "want 1, got 2"}},
		"c": {{"SKIP", ""}},
		"d": {{"PASS", ""}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseResults = %v, want %v", got, want)
	}
}

func TestJudgeResults(t *testing.T) {
	tests := []struct {
		name     string
		rs       []result
		problems []string
	}{
		{"pass", []result{{"PASS", "4.1 Gbit/s"}}, nil},
		{"missing", nil, []string{"missing: the guest printed no RESULT line for this check"}},
		{"fail", []result{{"PASS", "a"}, {"FAIL", "b"}}, []string{"FAIL b"}},
		{"skip fails", []result{{"SKIP", "no iperf3"}}, []string{"SKIP (an expected check must run) no iperf3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := judgeResults(tt.rs)
			if strings.Join(got, "|") != strings.Join(tt.problems, "|") {
				t.Errorf("problems %q, want %q", got, tt.problems)
			}
		})
	}
}

func TestBedKey(t *testing.T) {
	env := []byte("# written by e2e/build.sh 2026-11-22T07:50:44Z\nKVER=6.1.0-56-amd64\nROOT_IMG=/c/image/9023e5b6f12ef548/root.ext4\n")
	script := []byte("# EXPECT: x\n")
	k := bedKey(env, script)
	if len(k) != 16 {
		t.Fatalf("key %q", k)
	}
	rebuilt := []byte(strings.Replace(string(env), "07:50:44Z", "09:01:02Z", 1))
	if got := bedKey(rebuilt, script); got != k {
		t.Errorf("a rebuild of the same image changed the key: %s -> %s", k, got)
	}
	newImage := []byte(strings.Replace(string(env), "9023e5b6f12ef548", "0000000000000000", 1))
	if bedKey(newImage, script) == k {
		t.Error("another image, same key")
	}
	if bedKey(env, []byte("# EXPECT: y\n")) == k {
		t.Error("another script, same key")
	}
	if bedKey(env, []byte("a"), []byte("b")) == bedKey(env, []byte("ab")) {
		t.Error("scripts are not delimited")
	}
}

func TestFailureDigest(t *testing.T) {
	log := []byte(`step 2
    [a_up] vflag up: changed 3 step(s)
RESULT a_up PASS ok
    [b_unit] vflag.service: failed exit-code
    [b_unit] vflag[9]: refusing: x
    [b_unit] vflag[9]: last
RESULT b_unit FAIL exit 1 from 'units_ok'
    [c] other
`)
	got := failureDigest(log, []string{"b_unit", "gone"}, 3)
	want := `-- b_unit:
   (1 lines before these)
    [b_unit] vflag[9]: refusing: x
    [b_unit] vflag[9]: last
RESULT b_unit FAIL exit 1 from 'units_ok'
-- gone: (no line in the guest log)
`
	if got != want {
		t.Errorf("failureDigest:\n%s\nwant:\n%s", got, want)
	}
}

func TestBootCrashed(t *testing.T) {
	for console, want := range map[string]bool{
		"Booting from ROM..[    2.275967] Oops: int3: 0000 [#1] SMP NOPTI\n":   true,
		"[    1.0] Kernel panic - not syncing: VFS: Unable to mount root fs\n": true,
		"TESTBED-INIT: running scenario x.sh (timeout 480s)\n":                 false,
	} {
		if got := bootCrashed(console); got != want {
			t.Errorf("bootCrashed(%q) = %v, want %v", console, got, want)
		}
	}
}

func TestGuestClockRanAway(t *testing.T) {
	timedOut := []byte("RESULT s_kernel PASS 7.2\nTESTBED-TIMEOUT guest-side limit of 480s reached\nTESTBED-EXIT 124\n")
	for _, tc := range []struct {
		log  []byte
		ran  time.Duration
		want bool
	}{
		{timedOut, 17 * time.Second, true},               // the guest's 480 s in 17 s of real time
		{timedOut, 470 * time.Second, false},             // a real timeout
		{[]byte("TESTBED-EXIT 0\n"), time.Second, false}, // finished
		{[]byte("TESTBED-EXIT 1\n"), time.Second, false},
	} {
		if got := guestClockRanAway(tc.log, tc.ran, 480*time.Second); got != tc.want {
			t.Errorf("guestClockRanAway(%q, %s) = %v, want %v", tc.log, tc.ran, got, tc.want)
		}
	}
}

func TestStalledBeforeFirstResult(t *testing.T) {
	for script, want := range map[string]bool{"exit 125": true, "exit 124": false, "exit 0": false} {
		err := exec.Command("bash", "-c", script).Run()
		if got := stalledBeforeFirstResult(err); got != want {
			t.Errorf("%s: stalledBeforeFirstResult = %v, want %v", script, got, want)
		}
	}
}
