package bootgate

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

func gate(t *testing.T, dir string, boot *string) Gate {
	t.Helper()
	return Gate{Dir: dir, BootID: func() (string, error) { return *boot, nil }}
}

// TestReadyIsPerBoot: the mark holds for the boot that wrote it only.
func TestReadyIsPerBoot(t *testing.T) {
	boot := "boot-1"
	g := gate(t, t.TempDir(), &boot)
	if ok, err := g.Ready(); err != nil || ok {
		t.Fatalf("fresh dir: Ready = %v, %v; want false", ok, err)
	}
	if err := g.MarkReady(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := g.Ready(); !ok {
		t.Fatal("after MarkReady: not ready")
	}
	boot = "boot-2" // a reboot
	if ok, _ := g.Ready(); ok {
		t.Fatal("after a reboot: still ready from the earlier boot")
	}
	if err := g.MarkReady(); err != nil {
		t.Fatal(err)
	}
	if err := g.Unready(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := g.Ready(); ok {
		t.Fatal("after Unready: ready")
	}
	if err := g.Unready(); err != nil {
		t.Fatalf("Unready twice: %v", err)
	}
}

// TestMarkReadyWritesOncePerBoot: a converged up (ready in this boot
// already) leaves the mark's file as it is; a new boot rewrites it.
func TestMarkReadyWritesOncePerBoot(t *testing.T) {
	boot := "boot-1"
	dir := t.TempDir()
	g := gate(t, dir, &boot)
	inode := func() uint64 {
		t.Helper()
		st, err := os.Stat(g.readyPath())
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	if err := g.MarkReady(); err != nil {
		t.Fatal(err)
	}
	first := inode()
	if err := g.MarkReady(); err != nil {
		t.Fatal(err)
	}
	if inode() != first {
		t.Error("MarkReady in the same boot rewrote the mark")
	}
	boot = "boot-2"
	if err := g.MarkReady(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := g.Ready(); !ok {
		t.Error("MarkReady after a reboot did not write this boot's mark")
	}
}

// TestDeferredListsThisBootOnly: deferrals of an earlier boot are dropped
// (and removed); names that need escaping come back as given.
func TestDeferredListsThisBootOnly(t *testing.T) {
	boot := "boot-1"
	dir := t.TempDir()
	g := gate(t, dir, &boot)
	if err := g.Defer("old/vm"); err != nil {
		t.Fatal(err)
	}
	boot = "boot-2"
	for _, d := range []string{"vm2", "vm 1", "vm2"} {
		if err := g.Defer(d); err != nil {
			t.Fatal(err)
		}
	}
	got, err := g.Deferred()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"vm 1", "vm2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Deferred = %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "deferred", "old%2Fvm")); !os.IsNotExist(err) {
		t.Fatalf("the earlier boot's deferral is still there: %v", err)
	}
	if err := g.Undefer("vm2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.Deferred(); !reflect.DeepEqual(got, []string{"vm 1"}) {
		t.Fatalf("after Undefer: %q", got)
	}
}

type fakeStarter struct {
	g       Gate
	fail    map[string]error
	started []string
	ready   []bool // Ready() as each start saw it
}

func (f *fakeStarter) StartAutostarted(d string) (bool, error) {
	ok, _ := f.g.Ready()
	f.ready = append(f.ready, ok)
	if err := f.fail[d]; err != nil {
		return false, err
	}
	f.started = append(f.started, d)
	return true, nil
}

// TestReadyAndStart: the mark is written before any deferred domain is
// started (the hook's order relies on it), every deferral is tried once
// and forgotten, a failure is reported per domain, and libvirt is not
// connected when nothing was deferred.
func TestReadyAndStart(t *testing.T) {
	boot := "boot-1"
	g := gate(t, t.TempDir(), &boot)
	connects := 0
	f := &fakeStarter{g: g, fail: map[string]error{"vm3": errors.New("hook refused")}}
	connect := func() (Starter, error) { connects++; return f, nil }

	if res, err := g.ReadyAndStart(connect); err != nil || len(res) != 0 || connects != 0 {
		t.Fatalf("nothing deferred: res %v err %v connects %d; want none, no connect", res, err, connects)
	}
	if err := g.Unready(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"vm3", "vm1"} {
		if err := g.Defer(d); err != nil {
			t.Fatal(err)
		}
	}
	res, err := g.ReadyAndStart(connect)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Domain != "vm1" || !res[0].Started || res[1].Domain != "vm3" || res[1].Started || res[1].Err == nil {
		t.Fatalf("results %+v: want vm1 started, vm3 failed with its error", res)
	}
	if !reflect.DeepEqual(f.ready, []bool{true, true}) {
		t.Fatalf("Ready() seen by the starts: %v, want the mark written first", f.ready)
	}
	if left, _ := g.Deferred(); len(left) != 0 {
		t.Fatalf("deferrals left: %q", left)
	}
}
