package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// holdGroup starts a simulated process comm that holds VF vf's IOMMU group
// open (vf bound to vfio-pci first); it returns the pid and the group file.
func (ce *convergeEnv) holdGroup(t *testing.T, vf, comm string) (int, string) {
	t.Helper()
	bindVFIO(t, ce.sim.FS(), vf)
	g, err := ce.sim.IOMMUGroup(vf)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := ce.sim.Spawn(comm)
	if err != nil {
		t.Fatal(err)
	}
	file := fmt.Sprintf("/dev/vfio/%d", g)
	if _, err := ce.sim.Open(pid, file); err != nil {
		t.Fatal(err)
	}
	return pid, file
}

// downWith runs down as `vflag down` does (DownPreflight, then the journal
// undone), with the config's libvirt URI; libvirtDown points it at no
// libvirtd instead (and drops the test's stand-in for libvirt's answer).
func (ce *convergeEnv) downWith(t *testing.T, libvirtDown bool) error {
	t.Helper()
	c := ce.config(exampleBed(t))
	h := host.New(ce.sim, ce.sim.FS(), c.OVSDB, c.Libvirt)
	defer h.Close()
	e := New(c, h, nil)
	e.Holding = func(vfs []string) (map[string]string, error) {
		out := map[string]string{}
		for _, v := range vfs {
			if d, ok := ce.held[v]; ok {
				out[v] = d
			}
		}
		return out, nil
	}
	if libvirtDown {
		e.Holding = nil
		h.Libvirt = "qemu+unix:///system?socket=" + filepath.Join(t.TempDir(), "no-libvirt-sock")
	}
	j, err := teardown.OpenJournal(ce.journalDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.DownPreflight(j, true); err != nil {
		return err
	}
	r := &teardown.Runner{Journal: j, Undo: e.Undoers()}
	return r.Down(context.Background())
}

// TestGateAsksTheKernel: the disruption gate takes the kernel's answer of
// who holds a VF, not libvirt's alone. A process libvirt does not know
// (a DPDK application) holding VF 1's vfio group is named by pid and
// command in the plan, and a numvfs change and down are refused naming it,
// with libvirt answering nothing and with libvirtd not running at all; a
// QEMU holding VF 0 that libvirt says runs vm1 is named as vm1's; a VF's
// host netdev that is up holds it; a bind of a held VF to the config's host
// driver is refused naming the holder. Once the processes are gone and the
// netdev is down, down goes through without --force and without libvirtd.
func TestGateAsksTheKernel(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	if _, err := ce.run(false, nil); err != nil {
		t.Fatalf("first up: %v", err)
	}
	dpdk, dpdkFile := ce.holdGroup(t, "0000:61:00.3", "dpdk-testpmd")
	dpdkLine := fmt.Sprintf("VF 0000:61:00.3 is held by pid %d (dpdk-testpmd) through %s", dpdk, dpdkFile)
	numvfs := func(c *config.Config) { c.Groups[0].NumVFs = 2 }

	plan, err := ce.run(true, numvfs)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	ev, _ := eventOf(plan.Results(), "sriov.numvfs/pci/0000:61:00.0")
	if !ev.Disruptive || strings.Join(ev.Holders, "\n") != dpdkLine || len(ev.Domains) != 0 {
		t.Errorf("plan: numvfs disruptive=%v holders=%q domains=%v; want the DPDK process alone", ev.Disruptive, ev.Holders, ev.Domains)
	}
	refused := func(what string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no refusal, want one naming %q", what, want)
		}
		t.Logf("%s: %v", what, err)
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to name %q", what, err, w)
			}
		}
	}
	before := ce.sim.Dump()
	_, err = ce.run(false, numvfs)
	refused("up with a numvfs change", err, "refusing a disruptive change", "would break: "+dpdkLine)
	// Without attachments preflight needs no libvirt: only the gate would.
	noAttach := func(c *config.Config) { numvfs(c); c.Groups[0].Attachments = nil }
	_, err = ce.runWith(false, noAttach, func(e *Env) {
		e.Holding = nil
		e.h.Libvirt = "qemu+unix:///system?socket=" + filepath.Join(t.TempDir(), "no-libvirt-sock")
	})
	refused("up with a numvfs change, libvirtd not running", err, dpdkLine)
	refused("down", ce.downWith(t, false), "refusing to remove VFs in use: "+dpdkLine)
	refused("down, libvirtd not running", ce.downWith(t, true), "refusing to remove VFs in use: "+dpdkLine)
	if ce.sim.Dump() != before {
		t.Fatal("a refused run changed the host")
	}

	// libvirt says vm1 runs on VF 0, whose group a QEMU holds: one holder,
	// the domain with its process.
	qemu, qemuFile := ce.holdGroup(t, "0000:61:00.2", "qemu-system-x86")
	ce.held["0000:61:00.2"] = "vm1"
	_, err = ce.run(false, numvfs)
	refused("up with vm1 running", err, fmt.Sprintf("VF 0000:61:00.2 is held by running domain vm1 (pid %d qemu-system-x86 through %s); %s", qemu, qemuFile, dpdkLine))
	plan, _ = ce.run(true, numvfs)
	if ev, _ := eventOf(plan.Results(), "sriov.numvfs/pci/0000:61:00.0"); strings.Join(ev.Domains, ",") != "vm1" || len(ev.Holders) != 2 {
		t.Errorf("plan with vm1 running: domains %v holders %q", ev.Domains, ev.Holders)
	}
	delete(ce.held, "0000:61:00.2")
	must(t, ce.sim.Exit(qemu))

	// A bind to the config's host driver would take VF 1 from vfio-pci.
	toHost := func(c *config.Config) { c.Groups[0].VFs[1].Driver = "mlx5_core" }
	_, err = ce.run(false, toHost)
	refused("up binding a held VF to the host", err, "group lag0: sriov.bind/ens1f0np0/vf1 would take from its driver: "+dpdkLine)
	must(t, ce.sim.Exit(dpdk))

	// The host's netdev of VF 1 of PF 1 (the config's mlx5_core VF), up.
	var vfNetdev string
	if vf, ok, err := (sriov.Host{FS: ce.sim.FS()}).VF(sriov.PCIDevice("0000:61:00.1"), 1); err != nil || !ok {
		t.Fatalf("VF 1 of PF 1: %v %v", ok, err)
	} else if nd, err := (sriov.Host{FS: ce.sim.FS()}).Netdevs(vf); err != nil || len(nd) != 1 {
		t.Fatalf("netdev of %s: %v %v", vf, nd, err)
	} else {
		vfNetdev = nd[0]
		must(t, ce.sim.SetLinkUp(vfNetdev, true))
		_, err = ce.run(false, numvfs)
		refused("up with a host netdev up", err, fmt.Sprintf("VF %s is held by the host: netdev %s is up", vf, vfNetdev))
		must(t, ce.sim.SetLinkUp(vfNetdev, false))
	}

	// Nothing holds a VF now: down needs neither libvirtd nor --force.
	if err := ce.downWith(t, true); err != nil {
		t.Fatalf("down with no VF in use and libvirtd not running: %v", err)
	}
	if n, _ := (sriov.Host{FS: ce.sim.FS()}).NumVFs(sriov.PCIDevice("0000:61:00.0")); n != 0 {
		t.Errorf("after down: numvfs %d", n)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDownRebindAsksTheKernel: VFs made before up (no numvfs of vflag's
// to undo), the config's host-driver VF bound by up: down would take that
// VF from its driver again, so while its host netdev is up down is refused
// naming the netdev; once it is down, down goes through.
func TestDownRebindAsksTheKernel(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	f := ce.sim.FS()
	for _, pf := range []string{"0000:61:00.0", "0000:61:00.1"} {
		must(t, f.WriteFile("/sys/bus/pci/devices/"+pf+"/sriov_numvfs", []byte("4")))
	}
	if _, err := ce.run(false, nil); err != nil {
		t.Fatalf("up: %v", err)
	}
	j, err := teardown.OpenJournal(ce.journalDir)
	must(t, err)
	for _, en := range j.Entries() {
		if en.Kind == KindNumVFs {
			t.Fatalf("up journaled %s: the VFs were there before", en.ID)
		}
	}
	pci := sriov.Host{FS: f}
	vf, ok, err := pci.VF(sriov.PCIDevice("0000:61:00.1"), 1) // the config's mlx5_core VF
	if err != nil || !ok {
		t.Fatalf("VF 1 of PF 1: %v %v", ok, err)
	}
	nd, err := pci.Netdevs(vf)
	if err != nil || len(nd) != 1 {
		t.Fatalf("netdev of %s: %v %v", vf, nd, err)
	}
	must(t, ce.sim.SetLinkUp(nd[0], true))
	err = ce.downWith(t, true)
	if want := fmt.Sprintf("refusing to remove VFs in use: VF %s is held by the host: netdev %s is up", vf, nd[0]); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("down with the host netdev up: %v\nwant %q", err, want)
	}
	must(t, ce.sim.SetLinkUp(nd[0], false))
	if err := ce.downWith(t, true); err != nil {
		t.Fatalf("down: %v", err)
	}
}
