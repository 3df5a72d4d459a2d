package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// TestRebootPreThenFailedUp: after a reboot (the kernel starts over, the
// journal and OVSDB remain) and the boot's up --stage pre, an up that fails
// rolls back to the host the pre stage left (the domains' definitions the
// reboot kept included), whichever step fails: a kernel object the run
// made (the bond, a VF's host driver, the tc blocks), the bridge (a VLAN
// the config changed before the reboot) or an attachment (one the config
// moved to another domain). The bridge is as the config of the last up
// before the reboot made it, its ports named as the representors are now
// (the reboot may have given them each other's names: the rows OVS kept
// are those of the old names). up then converges, a second up changes
// nothing, and down restores the booted host.
func TestRebootPreThenFailedUp(t *testing.T) {
	d := startDaemons(t)
	d.virt.DefineDomain(t, "vm2")
	base := baseVariant()
	for _, tt := range []struct {
		name string
		// after is the config from the reboot on (edited before it).
		after func(*variant)
		// fail are the steps up fails at, in turn (each must be in plan).
		fail []string
	}{
		{"same-config", func(*variant) {},
			[]string{"bond.create/bond0", "sriov.bind/ens1f1np1/vf1", "tc.ingress-block/bond0", "tc.ingress-block/ens1f1np1"}},
		{"vlan-changed", func(x *variant) { x.vlan0 = 300 }, []string{"ovs.bridge/br-lag"}},
		{"attachment-moved", func(x *variant) { x.attach10 = "vm2" }, []string{"libvirt.attach/vm2/ens1f1np1/vf0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBed(t, d, "")
			b.useConfig(base.config(d))
			b.initSim()
			b.mustVflag(2, "up", "--detailed-exit-codes")
			bridge := section(b.fullDump(), "ovsdb")
			// Reboot: the kernel starts over; the journal and OVSDB remain.
			b.simDir = t.TempDir()
			b.initSim()
			kernel := func() string { return canonical(testbed.Kernel(b.simDump())) }
			booted := kernel()
			after := base
			tt.after(&after)
			b.useConfig(after.config(d))
			b.mustVflag(2, "up", "--stage", "pre", "--detailed-exit-codes")
			pre := b.fullDump()
			planned := planSteps(t, b.mustVflag(2, "plan", "-o", "json", "--detailed-exit-codes"))
			for _, id := range tt.fail {
				if !slices.Contains(planned, id) {
					t.Fatalf("plan after the pre stage does not change %s: %v", id, planned)
				}
				_, errs, code := b.vflag("up", "--fail-at", id)
				if code != 1 || !strings.Contains(errs, "injected failure") || !strings.Contains(errs, "rolled back") || strings.Contains(errs, "rollback failed") {
					t.Errorf("up failing at %s: exit %d, want 1, injected and rolled back:\n%s", id, code, errs)
				}
				got := b.fullDump()
				for _, sec := range []string{"kernel", "vm1", "vm2"} {
					if want, got := section(pre, sec), section(got, sec); got != want {
						t.Errorf("up failing at %s: after the rollback %s differs from the pre stage's:\n%s\nstderr:\n%s", id, sec, testbed.DiffText(want, got), errs)
					}
				}
				// A failure before the bridge step leaves OVS's rows as the
				// reboot kept them; after it, the bridge is done again.
				ovsWant, from := section(pre, "ovsdb"), "the pre stage's"
				if at := slices.Index(planned, "ovs.bridge/br-lag"); at >= 0 && slices.Index(planned, id) >= at {
					ovsWant, from = bridge, "the last up's before the reboot"
				}
				if got := section(got, "ovsdb"); got != ovsWant {
					t.Errorf("up failing at %s: after the rollback OVSDB differs from %s:\n%s\nstderr:\n%s", id, from, testbed.DiffText(ovsWant, got), errs)
				}
			}
			if rep := upReport(t, b); rep.Error != "" {
				t.Fatalf("up after the rollbacks: %s", rep.Error)
			}
			b.mustVflag(0, "up", "--detailed-exit-codes")
			b.mustVflag(0, "down")
			if got := kernel(); got != booted {
				t.Errorf("down does not restore the booted host:\n%s", testbed.DiffText(booted, got))
			}
			if out := strings.TrimSpace(b.ovs.MustVsctl("list-br")); out != "" {
				t.Errorf("bridges left after down: %s", out)
			}
			for _, vm := range []string{"vm1", "vm2"} {
				if x := b.virt.DomainXML(t, vm); strings.Contains(x, "<hostdev") {
					t.Errorf("%s keeps a hostdev after down:\n%s", vm, x)
				}
			}
		})
	}
}

// section is the "== name" section of a dump (testbed.World's, fullDump's).
func section(dump, name string) string {
	_, rest, ok := strings.Cut(dump, "== "+name+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n== "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}
