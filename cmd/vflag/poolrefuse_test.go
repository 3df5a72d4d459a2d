package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// A pool named like a libvirt network that is not vflag's: plan and up
// refuse it in the preflight, naming the field, before any write, from a
// fresh host and from a converged one (the VFs exist).
func TestNetworkForeignNameRefusedBeforeAnyWrite(t *testing.T) {
	d := poolDaemons(t)
	b := newBed(t, d, exampleConfig)
	b.initSim()
	defineNetwork(t, b, "<network><name>tenant-pool</name><bridge name='virbr-tp'/></network>")
	defer func() { _, _ = b.virt.Virsh("net-undefine", "tenant-pool") }()
	named := strings.Replace(poolNetwork, "    network:\n", "    network:\n      name: tenant-pool\n", 1)
	b.point(networkConfig(t, named))
	const want = `groups[0].network.name: "tenant-pool" is a libvirt network that is not vflag's`
	refused := func(when string) {
		t.Helper()
		host := b.dump()
		for _, cmd := range []string{"plan", "up"} {
			out, errs, code := b.vflag(cmd)
			if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "preflight failed") {
				t.Errorf("%s: %s: exit %d, want 1 with the preflight naming %s:\n%s%s", when, cmd, code, want, out, errs)
			}
		}
		if got := b.dump(); got != host {
			t.Errorf("%s: the refused up changed the host:\n%s", when, testbed.DiffText(host, got))
		}
	}
	refused("fresh host")
	b.point(exampleConfig)
	b.upJSON(2)
	b.point(networkConfig(t, named))
	refused("converged host")
	b.point(exampleConfig)
	b.mustVflag(0, "down")
}

// Renaming vflag's own pool on a converged host converges: the old network
// is not counted as an owner of the VFs (the run removes it); the new one
// has the pool. While a domain holds a port of the old pool, the rename is
// refused before any write, naming the domain.
func TestNetworkPoolRenameConverges(t *testing.T) {
	d := poolDaemons(t)
	named := func(name string) string {
		return networkConfig(t, strings.Replace(poolNetwork, "    network:\n", "    network:\n      name: "+name+"\n", 1))
	}
	b := newBed(t, d, named("fab1-pool"))
	b.initSim()
	b.upJSON(2)
	t.Cleanup(func() { b.mustVflag(0, "down") })
	_, n := netPool(t, b, "fab1-pool")

	// A domain holds a port of the old pool: refused, naming it.
	b.point(named("fab1-pool-b"))
	createPort(t, b, "fab1-pool", "0b0b0b0b-0000-4000-8000-000000000001", "vm1", "")
	host := b.dump()
	for _, cmd := range []string{"plan", "up"} {
		out, errs, code := b.vflag(cmd)
		if cmd == "plan" && code == 0 && strings.Contains(out, "vm1") {
			continue // plan shows the refusal on the step
		}
		if code != 1 || !strings.Contains(out+errs, "vm1") {
			t.Errorf("rename while vm1 holds a port of the old pool: %s exit %d, want the refusal naming vm1:\n%s%s", cmd, code, out, errs)
		}
	}
	if got := b.dump(); got != host {
		t.Errorf("the refused rename changed the host:\n%s", testbed.DiffText(host, got))
	}
	if _, err := b.virt.Virsh("net-port-delete", "fab1-pool", "0b0b0b0b-0000-4000-8000-000000000001"); err != nil {
		t.Fatal(err)
	}

	// Nothing holds the old pool: the rename converges.
	if rep := b.upJSON(2); rep.Error != "" {
		t.Fatalf("rename: %+v", rep)
	}
	if xml, _ := netPool(t, b, "fab1-pool"); xml != "" {
		t.Errorf("the old network is still defined:\n%s", xml)
	}
	if _, got := netPool(t, b, "fab1-pool-b"); got != n {
		t.Errorf("the renamed pool has %d VFs, want %d", got, n)
	}
	if again := b.upJSON(0); again.Changed {
		t.Errorf("a second up changed: %+v", again.ChangedIDs())
	}
	b.mustVflag(0, "status")
}
