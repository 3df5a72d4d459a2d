// Package testbed holds what the test harnesses (ovs/ovstest,
// libvirtx/virttest) share with programs that are not tests, such as the
// demo: the part of testing.TB they use.
package testbed

import (
	"fmt"
	"os"
	"sync"
)

// TB is the part of testing.TB the harnesses use. *testing.T satisfies it;
// Runner is the implementation for programs.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Runner is a TB for a program: Fatalf prints, runs the cleanups and exits 1.
type Runner struct {
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	Verbose  bool
}

// Helper implements TB.
func (r *Runner) Helper() {}

// TempDir implements TB.
func (r *Runner) TempDir() string {
	d, err := os.MkdirTemp("", "vflag-demo")
	if err != nil {
		r.Fatalf("temp dir: %v", err)
	}
	r.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// Cleanup implements TB.
func (r *Runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Failed implements TB.
func (r *Runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Logf implements TB; it prints only when Verbose.
func (r *Runner) Logf(format string, args ...any) {
	if r.Verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// Errorf implements TB.
func (r *Runner) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// Fatalf implements TB.
func (r *Runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.Close()
	os.Exit(1)
}

// Close runs the cleanups, last first.
func (r *Runner) Close() {
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
