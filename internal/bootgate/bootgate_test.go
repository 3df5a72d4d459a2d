package bootgate

import (
	"os"
	"path/filepath"
	"reflect"
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
