package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// TestBootStages simulates a reboot after up (the simulated host back at its
// baseline, OVSDB and the domain definitions kept, the journal kept) and
// runs what the units run: up --stage pre (no OVS or libvirt needed), then
// up. Then down returns the host to its baseline.
func TestBootStages(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.initSim()
	base := b.dump()
	b.upJSON(2)
	after := b.dump()

	// Reboot: the simulated kernel state is lost.
	if err := os.Remove(filepath.Join(b.simDir, "host.json")); err != nil {
		t.Fatal(err)
	}
	// The pre stage must not need OVS or libvirt: point both nowhere.
	cfg, _ := os.ReadFile(b.config)
	nowhere := strings.Replace(string(cfg), "ovsdb: "+b.ovs.Endpoint(), "ovsdb: unix:/nonexistent/db.sock", 1)
	nowhere = strings.Replace(nowhere, "libvirt: "+b.virt.URI(), "libvirt: qemu+unix:///system?socket=/nonexistent/sock", 1)
	os.WriteFile(b.config, []byte(nowhere), 0o600)
	rep := b.upJSON(2, "--stage", "pre")
	if rep.Error != "" {
		t.Fatalf("stage pre: %+v", rep)
	}
	// No bond, no LAG, OVS and libvirt unreachable: problems.
	status := b.mustVflag(exitProblems, "status")
	for _, want := range []string{"numvfs 4/8 eswitch switchdev", "problem: bond: bond bond0 does not exist\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("after stage pre, status lacks %q:\n%s", want, status)
		}
	}
	if strings.Contains(status, "master bond0") {
		t.Errorf("stage pre made the bond:\n%s", status)
	}
	if again := b.upJSON(0, "--stage", "pre"); again.Changed {
		t.Fatalf("second stage pre changed: %+v", again)
	}
	os.WriteFile(b.config, cfg, 0o600)
	b.upJSON(2)
	// Representor names depend on the order the kernel creates them (both
	// PFs switch in parallel): compare what does not.
	if got := b.upJSON(0); got.Changed {
		t.Fatalf("up after pre + up changed: %+v", got)
	}
	status = b.mustVflag(0, "status")
	for _, want := range []string{"master bond0", "lag active", "hw-offload true", "domain vm1"} {
		if !strings.Contains(status, want) {
			t.Errorf("after the boot stages, status lacks %q:\n%s", want, status)
		}
	}
	if n, m := strings.Count(after, "\n"), strings.Count(b.dump(), "\n"); n != m {
		t.Errorf("after the boot stages the host dump has %d lines, after the first up %d", m, n)
	}
	b.mustVflag(0, "down")
	if got := b.dump(); got != base {
		t.Fatalf("down did not return to baseline:\n%s", testbed.DiffText(base, got))
	}
	if _, errs, code := b.vflag("up", "--stage", "post"); code != 1 || !strings.Contains(errs, "--stage") {
		t.Fatalf("up --stage post: exit %d %s", code, errs)
	}
}
