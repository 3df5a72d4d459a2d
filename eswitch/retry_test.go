package eswitch

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

// fakeDump is a dump function that answers from a script: the i-th call
// returns results[i] and errs[i] (the last ones repeat), as the library does,
// partial results along with ErrDumpInterrupted.
type fakeDump struct {
	results [][]string
	errs    []error
	calls   int
}

func (f *fakeDump) dump() ([]string, error) {
	i := min(f.calls, len(f.errs)-1)
	f.calls++
	return f.results[i], f.errs[i]
}

func TestRetryDumpInterruptedThenComplete(t *testing.T) {
	f := &fakeDump{
		results: [][]string{{"eth0"}, {"eth0", "eth0"}, {"eth0", "pf0vf0"}},
		errs:    []error{netlink.ErrDumpInterrupted, fmt.Errorf("wrapped: %w", netlink.ErrDumpInterrupted), nil},
	}
	got, err := retryDump("ip link show", f.dump)
	if err != nil {
		t.Fatalf("retryDump: %v", err)
	}
	if f.calls != 3 {
		t.Errorf("dump called %d times, want 3 (two interrupted, one complete)", f.calls)
	}
	if want := []string{"eth0", "pf0vf0"}; !slices.Equal(got, want) {
		t.Errorf("result %v, want the complete dump %v", got, want)
	}
}

func TestRetryDumpAlwaysInterrupted(t *testing.T) {
	f := &fakeDump{results: [][]string{{"partial"}}, errs: []error{netlink.ErrDumpInterrupted}}
	got, err := retryDump("devlink port show", f.dump)
	if f.calls != dumpAttempts {
		t.Errorf("dump called %d times, want %d (the bound)", f.calls, dumpAttempts)
	}
	if dumpAttempts < 3 || dumpAttempts > 10 {
		t.Errorf("dumpAttempts = %d: want a small bound that still retries", dumpAttempts)
	}
	if err == nil {
		t.Fatalf("retryDump succeeded with %v, want an error", got)
	}
	if got != nil {
		t.Errorf("result %v returned with the error: an interrupted dump's partial result must be dropped", got)
	}
	if !errors.Is(err, netlink.ErrDumpInterrupted) {
		t.Errorf("error %v does not wrap ErrDumpInterrupted", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "devlink port show: ") || !strings.Contains(msg, fmt.Sprint(dumpAttempts)) {
		t.Errorf("error %q should name the operation and the number of attempts", msg)
	}
}

func TestRetryDumpOtherErrorNotRetried(t *testing.T) {
	f := &fakeDump{results: [][]string{nil}, errs: []error{syscall.ENOENT}}
	_, err := retryDump("devlink port show", f.dump)
	if f.calls != 1 {
		t.Errorf("dump called %d times after a plain error, want 1", f.calls)
	}
	if !errors.Is(err, syscall.ENOENT) || !strings.HasPrefix(err.Error(), "devlink port show: ") {
		t.Errorf("error %v: want ENOENT wrapped with the operation", err)
	}
}
