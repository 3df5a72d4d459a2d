package sim

import (
	"errors"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
)

// fakeClock is a manual clock; sleeping on it advances it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(d time.Duration) { c.Advance(d) }

const (
	latVF   = 10 * time.Millisecond
	latMode = 5 * time.Millisecond
	latLAG  = 20 * time.Millisecond
)

func testSpec() *Spec {
	return &Spec{
		NICs: []NICSpec{{
			Name: "nic0",
			PFs:  []PFSpec{{PCI: "0000:61:00.0", Netdev: "p0"}, {PCI: "0000:61:00.1", Netdev: "p1"}},
		}},
		Latency: Latency{VFCreate: latVF, ModeChange: latMode, LAGActivation: latLAG},
	}
}

type th struct {
	t   *testing.T
	h   *Host
	fs  sysfs.FS
	clk *fakeClock
	dir string
}

func newTH(t *testing.T, spec *Spec) *th {
	t.Helper()
	clk := newClock()
	dir := t.TempDir()
	h, err := open(dir, spec, clk.Now, clk.Sleep)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return &th{t: t, h: h, fs: h.FS(), clk: clk, dir: dir}
}

func (x *th) write(p, data string) {
	x.t.Helper()
	if err := x.fs.WriteFile(p, []byte(data)); err != nil {
		x.t.Fatalf("write %s %q: %v", p, data, err)
	}
}

func (x *th) writeErr(p, data string, want syscall.Errno) {
	x.t.Helper()
	err := x.fs.WriteFile(p, []byte(data))
	checkPathErr(x.t, err, want)
}

func (x *th) read(p string) string {
	x.t.Helper()
	b, err := x.fs.ReadFile(p)
	if err != nil {
		x.t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func (x *th) readErr(p string, want syscall.Errno) {
	x.t.Helper()
	_, err := x.fs.ReadFile(p)
	checkPathErr(x.t, err, want)
}

func (x *th) ls(p string) []string {
	x.t.Helper()
	names, err := x.fs.ReadDir(p)
	if err != nil {
		x.t.Fatalf("ls %s: %v", p, err)
	}
	return names
}

func (x *th) readlink(p string) string {
	x.t.Helper()
	s, err := x.fs.Readlink(p)
	if err != nil {
		x.t.Fatalf("readlink %s: %v", p, err)
	}
	return s
}

func (x *th) exists(p string) bool { return sysfs.Exists(x.fs, p) }

func (x *th) ok(err error) {
	x.t.Helper()
	if err != nil {
		x.t.Fatal(err)
	}
}

func (x *th) mode(pci, mode string) error {
	return x.h.SetEswitchMode(eswitch.Devlink{Bus: "pci", Device: pci}, mode)
}

// settle advances the clock past every pending creation.
func (x *th) settle() { x.clk.Advance(time.Hour) }

func checkPathErr(t *testing.T, err error, want syscall.Errno) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *fs.PathError", err, err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

func checkErrno(t *testing.T, err error, want syscall.Errno, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	if msg != "" && !strings.Contains(err.Error(), msg) {
		t.Fatalf("error %q does not mention %q", err, msg)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
