package virttest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestDaemonLifecycle(t *testing.T) {
	var d *Daemon
	var libvirtd, virtlogd int
	t.Run("running", func(t *testing.T) {
		d = Start(t)
		libvirtd, virtlogd = d.cmd.Process.Pid, d.virtlogdPID()
		if !alive(libvirtd) || !alive(virtlogd) {
			t.Fatalf("libvirtd (%d) alive %v, virtlogd (%d) alive %v", libvirtd, alive(libvirtd), virtlogd, alive(virtlogd))
		}
		if !strings.HasPrefix(d.URI(), "qemu+unix:///system?socket=") {
			t.Errorf("URI() = %q", d.URI())
		}
		// The daemons see their own /run/libvirt, not the host's.
		if _, err := os.Stat(filepath.Join(d.Dir(), "run", "virtlogd-sock")); err != nil {
			t.Errorf("virtlogd socket not in the private run dir: %v", err)
		}

		d.DefineDomain(t, "lifecycle")
		out, err := d.Virsh("list", "--all", "--name")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != "lifecycle" {
			t.Errorf("virsh list --all --name = %q, want lifecycle", out)
		}
		if state, err := d.Virsh("domstate", "lifecycle"); err != nil || strings.TrimSpace(state) != "shut off" {
			t.Errorf("domstate = %q, %v; want shut off", state, err)
		}
		x := d.DomainXML(t, "lifecycle")
		if !strings.Contains(x, "<name>lifecycle</name>") || strings.Contains(x, "<graphics") {
			t.Errorf("unexpected domain XML:\n%s", x)
		}
		// The definition lives in the private /etc/libvirt.
		if _, err := os.Stat(filepath.Join(d.Dir(), "etc", "qemu", "lifecycle.xml")); err != nil {
			t.Errorf("definition not in the private config dir: %v", err)
		}
		if _, err := d.Virsh("dominfo", "no-such-domain"); err == nil {
			t.Error("virsh dominfo of a missing domain succeeded")
		}
	})
	if d == nil {
		return
	}
	if alive(libvirtd) || alive(virtlogd) {
		t.Errorf("after cleanup: libvirtd (%d) alive %v, virtlogd (%d) alive %v", libvirtd, alive(libvirtd), virtlogd, alive(virtlogd))
	}
	if _, err := os.Stat(d.Dir()); !os.IsNotExist(err) {
		t.Errorf("private root %s not removed: %v", d.Dir(), err)
	}
}

func TestTwoDaemonsAreIndependent(t *testing.T) {
	a, b := Start(t), Start(t)
	a.DefineDomain(t, "only-in-a")
	out, err := b.Virsh("list", "--all", "--name")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "" {
		t.Errorf("second daemon lists %q, want nothing", out)
	}
}

func TestStartDomain(t *testing.T) {
	d := Start(t)
	d.DefineDomain(t, "runner")
	d.StartDomain(t, "runner")
	out, err := d.Virsh("domstate", "runner")
	if err != nil || strings.TrimSpace(out) != "running" {
		t.Fatalf("domstate = %q, %v; want running", out, err)
	}
}

func TestFakeVFsAndCapturedHooks(t *testing.T) {
	const doc = `<network>
  <name>pool</name>
  <forward mode='hostdev' managed='yes'>
    <address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x2'/>
  </forward>
</network>`
	f := filepath.Join(t.TempDir(), "net.xml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("without", func(t *testing.T) {
		d := Start(t)
		_, err := d.Virsh("net-define", f)
		if err == nil || !strings.Contains(err.Error(), "is not an SR-IOV Virtual Function") {
			t.Errorf("net-define without FakeVFs: %v; want libvirt's refusal", err)
		}
		if calls, err := d.HookCalls("network"); err != nil || len(calls) != 0 {
			t.Errorf("HookCalls without CaptureHooks = %v, %v; want none", calls, err)
		}
	})

	t.Run("with", func(t *testing.T) {
		d := Start(t, FakeVFs("0000:61:00.2"), CaptureHooks("network"))
		for _, args := range [][]string{{"net-define", f}, {"net-start", "pool"}} {
			if _, err := d.Virsh(args...); err != nil {
				t.Fatal(err)
			}
		}
		calls, err := d.HookCalls("network")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range calls {
			got = append(got, strings.Join(c.Args, " "))
			if !strings.HasPrefix(c.Stdin, "<hookData>") || !strings.Contains(c.Stdin, "<name>pool</name>") {
				t.Errorf("hook stdin %q, want the hookData of network pool", c.Stdin)
			}
		}
		if want := "pool start begin - | pool started begin -"; strings.Join(got, " | ") != want {
			t.Errorf("hook calls %q, want %q", got, want)
		}
		// The host's real devices stay visible to the daemon.
		entries, err := os.ReadDir(pciDevicesDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(d.Dir(), fakePCIDir, e.Name(), "vendor")); err != nil {
				t.Errorf("real device %s missing in the fake directory: %v", e.Name(), err)
			}
		}
	})
}

func TestOptionsRefuseBadInput(t *testing.T) {
	d := &Daemon{base: t.TempDir()}
	if err := d.installHooks([]string{"nosuch"}); err == nil {
		t.Error("installHooks accepted an unknown hook driver")
	}
	if err := d.prepareFakeVFs([]string{"61:00.2"}); err == nil {
		t.Error("prepareFakeVFs accepted an address without a domain")
	}
}

// TestCapabilitiesCacheStaysValid: Start probes every emulator libvirt
// will and saves them to the cache; daemons started one after the other
// from it find it valid (libvirt probes no emulator again: the files it
// keeps are byte for byte the cached ones), because each reads the host's
// CPUID on the same CPU; once ready, libvirtd may run on every CPU the
// test may.
func TestCapabilitiesCacheStaysValid(t *testing.T) {
	// The cache starts with the entry of the emulator Start always
	// probed (when the user's cache has one): Start must add the others.
	cache := t.TempDir()
	if user := capsCacheDir(); user != "" {
		files, _ := filepath.Glob(filepath.Join(user, "*.xml"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil && strings.Contains(string(b), "<emulator>/usr/bin/qemu-system-x86_64</emulator>") {
				if err := os.WriteFile(filepath.Join(cache, filepath.Base(f)), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Setenv("VIRTTEST_QEMU_CAPS_CACHE", cache)
	first := Start(t)
	want := cacheFiles(t, cache)
	// Every emulator the host's capabilities name is probed by Start (a
	// hostdev attach asks for them), none left for a test to pay for.
	if _, err := first.Virsh("capabilities"); err != nil {
		t.Fatal(err)
	}
	if got := cacheFiles(t, first.capsDir()); got != want {
		t.Fatalf("libvirt probed an emulator after Start (its capabilities cache differs from the one Start saved)")
	}
	ours := cpusAllowed(t, os.Getpid())
	for i := range 3 {
		d := Start(t)
		if got := cacheFiles(t, d.capsDir()); got != want {
			t.Fatalf("daemon %d rewrote the capabilities cache (it found it stale and probed the emulator again)", i+2)
		}
		if got := cpusAllowed(t, d.cmd.Process.Pid); got != ours {
			t.Errorf("daemon %d: libvirtd runs on CPUs %s, the test on %s", i+2, got, ours)
		}
		d.stop()
	}
}

// cacheFiles is the content of the *.xml files in dir.
func cacheFiles(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.xml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no capabilities cache in %s (%v)", dir, err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(f[len(dir):] + "\n" + string(b))
	}
	return all.String()
}

// cpusAllowed is the Cpus_allowed_list of process pid's main thread.
func cpusAllowed(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for %d", pid)
	return ""
}
