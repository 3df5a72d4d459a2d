package virttest

import (
	"os"
	"path/filepath"
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
