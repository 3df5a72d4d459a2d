package crashpoint

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// childEnv makes the test binary a child that arms the count at its value,
// logs to childLog and makes five writes, each begun and ended first, as
// the simulated kernel does.
const (
	childEnv = "CRASHPOINT_TEST_AFTER"
	childLog = "CRASHPOINT_TEST_LOG"
)

func TestMain(m *testing.M) {
	if s := os.Getenv(childEnv); s != "" {
		n, _ := strconv.Atoi(s)
		if err := Arm(n, os.Getenv(childLog)); err != nil {
			os.Exit(2)
		}
		for i := 1; i <= 5; i++ {
			Begin()
			End()
			Wrote("write " + strconv.Itoa(i))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKillAfterNthWrite: an armed process is killed by SIGKILL right after
// its Nth write, which the log names last; counting only (N <= 0) lets it
// finish with every write logged.
func TestKillAfterNthWrite(t *testing.T) {
	for _, tc := range []struct {
		after, logged int
		killed        bool
	}{{1, 1, true}, {3, 3, true}, {5, 5, true}, {6, 5, false}, {-1, 5, false}} {
		t.Run(strconv.Itoa(tc.after), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "writes.log")
			cmd := exec.Command(os.Args[0], "-test.run", "^$")
			cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(tc.after), childLog+"="+log)
			err := cmd.Run()
			var ee *exec.ExitError
			killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
			if killed != tc.killed || !killed && err != nil {
				t.Fatalf("child: %v, want killed %v", err, tc.killed)
			}
			raw, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			if len(lines) != tc.logged || lines[len(lines)-1] != strconv.Itoa(tc.logged)+" write "+strconv.Itoa(tc.logged) {
				t.Fatalf("log %q, want %d writes, the last %d", lines, tc.logged, tc.logged)
			}
		})
	}
}

// TestUnarmed: without Arm, writes are not counted and nothing stops.
func TestUnarmed(t *testing.T) {
	if Armed() {
		t.Fatal("armed without Arm")
	}
	Begin()
	End()
	Wrote("nothing")
}
