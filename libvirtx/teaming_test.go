package libvirtx_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	"github.com/vflag/vflag/libvirtx"
)

// pairOf reads, independently of the package under test, the teaming
// interfaces of a domain XML: "standby <alias> <mac> <bridge> vlan=<tags>
// ovs=<bool> model=<model>" and "vf <pci> <mac> transient=<alias>
// managed=<managed>".
func pairOf(t *testing.T, x string) []string {
	t.Helper()
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range dom.Devices.Interfaces {
		if i.Teaming == nil {
			continue
		}
		switch i.Teaming.Type {
		case "persistent":
			var tags []string
			if i.VLan != nil {
				if i.VLan.Trunk == "yes" {
					tags = append(tags, "trunk")
				}
				for _, tg := range i.VLan.Tags {
					tags = append(tags, strings.TrimSuffix(fmt.Sprintf("%d:%s", tg.ID, tg.NativeMode), ":"))
				}
			}
			ovs := i.VirtualPort != nil && i.VirtualPort.Params != nil && i.VirtualPort.Params.OpenVSwitch != nil
			model, bridge, alias := "", "", ""
			if i.Model != nil {
				model = i.Model.Type
			}
			if i.Source != nil && i.Source.Bridge != nil {
				bridge = i.Source.Bridge.Bridge
			}
			if i.Alias != nil {
				alias = i.Alias.Name
			}
			out = append(out, fmt.Sprintf("standby %s %s %s vlan=%s ovs=%v model=%s", alias, i.MAC.Address, bridge, strings.Join(tags, ","), ovs, model))
		case "transient":
			a := i.Source.Hostdev.PCI.Address
			out = append(out, fmt.Sprintf("vf %04x:%02x:%02x.%x %s transient=%s managed=%s", *a.Domain, *a.Bus, *a.Slot, *a.Function, i.MAC.Address, i.Teaming.Persistent, i.Managed))
		}
	}
	return out
}

// testTeaming: a migratable attachment is the teaming pair in the
// persistent definition of a q35 domain, as libvirtd 9.0 keeps it;
// idempotent; turned off and on again in place; detached whole by its
// record; refused on a pc machine and beside another interface with its
// MAC, before any write.
func testTeaming(t *testing.T, e *env) {
	name, base := func() (string, string) {
		e.d.DefineDomainMachine(t, "vm-team", "q35")
		return "vm-team", canon(e.xml(t, "vm-team"))
	}()
	a := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.2", MAC: "52:54:00:00:07:01", Owner: "lag0", Migratable: true,
		Standby: libvirtx.Standby{Bridge: "br-vf", VLAN: 10}}
	pair := []string{
		"standby ua-vflag-525400000701 52:54:00:00:07:01 br-vf vlan=10 ovs=true model=virtio",
		"vf 0000:61:00.2 52:54:00:00:07:01 transient=ua-vflag-525400000701 managed=yes",
	}
	needed, why, err := e.c.Plan(a)
	if err != nil || !needed || !strings.Contains(why, "attach standby ua-vflag-525400000701 (virtio on br-vf, vlan 10)") {
		t.Fatalf("Plan = %v, %q, %v", needed, why, err)
	}
	rec, changed, err := e.c.Attach(a)
	if err != nil || !changed {
		t.Fatalf("Attach = %v, %v", changed, err)
	}
	if rec.Standby != "ua-vflag-525400000701" {
		t.Errorf("record's standby = %q", rec.Standby)
	}
	x := e.xml(t, name)
	if got := pairOf(t, x); !cmp.Equal(got, pair) {
		t.Fatalf("pair in libvirt's XML = %q, want %q\n%s", got, pair, x)
	}
	if !strings.Contains(x, `standby="ua-vflag-525400000701"`) {
		t.Errorf("the claim does not name the standby:\n%s", x)
	}
	st, err := e.c.Domain(name)
	if err != nil || len(st.Standbys) != 1 || !st.Standbys[0].Owned || st.Standbys[0].VLAN.VLAN != 10 || len(st.Interfaces) != 1 || st.Interfaces[0].Standby != "ua-vflag-525400000701" {
		t.Errorf("Domain = %+v, %v", st, err)
	}
	if !libvirtx.IsQ35(st.Machine) {
		t.Errorf("Machine = %q", st.Machine)
	}
	needed, why, err = e.c.Plan(a)
	if err != nil || needed || !strings.Contains(why, "already attached with its standby") {
		t.Errorf("Plan after attach = %v, %q, %v", needed, why, err)
	}
	if _, changed, err := e.c.Attach(a); err != nil || changed || e.xml(t, name) != x {
		t.Errorf("second Attach = %v, %v (or the XML changed)", changed, err)
	}

	// The VLAN changes: the standby is updated in place.
	b := a
	b.Standby = libvirtx.Standby{Bridge: "br-vf", VLANMode: "native-untagged", VLAN: 10, Trunks: []int{20, 30}}
	if _, changed, err := e.c.Attach(b); err != nil || !changed {
		t.Fatalf("Attach with a new VLAN = %v, %v", changed, err)
	}
	wantB := []string{"standby ua-vflag-525400000701 52:54:00:00:07:01 br-vf vlan=trunk,10:untagged,20,30 ovs=true model=virtio", pair[1]}
	if got := pairOf(t, e.xml(t, name)); !cmp.Equal(got, wantB) {
		t.Errorf("after the VLAN change: %q, want %q", got, wantB)
	}

	// Off: the VF is plain again, the standby gone; on again: the pair.
	off := a
	off.Migratable = false
	if _, changed, err := e.c.Attach(off); err != nil || !changed {
		t.Fatalf("Attach migratable off = %v, %v", changed, err)
	}
	x = e.xml(t, name)
	if got := pairOf(t, x); len(got) != 0 {
		t.Errorf("teaming interfaces after migratable off: %q", got)
	}
	if got := hostdevIfaces(t, x); !cmp.Equal(got, []string{"0000:61:00.2 52:54:00:00:07:01"}) || strings.Contains(x, "standby=") {
		t.Errorf("after migratable off: %q\n%s", got, x)
	}
	if _, changed, err := e.c.Attach(a); err != nil || !changed {
		t.Fatalf("Attach migratable on again = %v, %v", changed, err)
	}
	if got := pairOf(t, e.xml(t, name)); !cmp.Equal(got, pair) {
		t.Fatalf("pair after on again = %q", got)
	}

	// down: the record alone removes both, and a record without the
	// standby's alias (the claim names it) too.
	rec.Standby = ""
	for i := 0; i < 2; i++ {
		if err := e.c.Detach(rec); err != nil {
			t.Fatalf("Detach #%d: %v", i+1, err)
		}
		// libvirt adds a PCIe root port per device it plugs into a q35
		// definition and keeps the port after the detach (libvirt 9.0):
		// an empty port, for later hotplugs.
		if diff := cmp.Diff(noRootPorts(base), noRootPorts(canon(e.xml(t, name)))); diff != "" {
			t.Errorf("after Detach #%d (-base +got):\n%s", i+1, diff)
		}
	}

	// Refusals, before any write.
	e.d.DefineDomain(t, "vm-team-pc")
	pc := a
	pc.Domain = "vm-team-pc"
	pcBase := canon(e.xml(t, pc.Domain))
	_, _, err = e.c.Attach(pc)
	mustContain(t, err, `domain: has machine type "pc`, "needs a q35 machine")
	probs, perr := e.c.TeamingProblems(pc)
	if perr != nil || len(probs) != 1 || probs[0].Field != "domain" {
		t.Errorf("TeamingProblems(pc) = %+v, %v", probs, perr)
	}
	if canon(e.xml(t, pc.Domain)) != pcBase {
		t.Error("a refused Attach changed the domain")
	}
	// A running q35 domain as libvirt 9.0 defines it has one spare root port: a
	// live pair is refused, naming live; config only is fine.
	e.d.DefineDomainMachine(t, "vm-team-run", "q35")
	e.d.StartDomain(t, "vm-team-run")
	run := a
	run.Domain, run.Live = "vm-team-run", true
	probs, perr = e.c.TeamingProblems(run)
	if perr != nil || len(probs) != 1 || probs[0].Field != "live" || !strings.Contains(probs[0].Msg, "has 1 free hotpluggable PCIe root port(s), the pair needs 2") {
		t.Errorf("TeamingProblems(running, live) = %+v, %v", probs, perr)
	}
	run.Live = false
	if probs, perr = e.c.TeamingProblems(run); perr != nil || len(probs) != 0 {
		t.Errorf("TeamingProblems(running, config only) = %+v, %v", probs, perr)
	}
	e.attachForeignBridge(t, name, "52:54:00:00:07:01")
	withForeign := e.xml(t, name)
	_, _, err = e.c.Attach(a)
	mustContain(t, err, "mac: is the MAC of another interface of the persistent definition of vm-team (<interface type='bridge'> on br-other)")
	if e.xml(t, name) != withForeign {
		t.Error("a refused Attach changed the domain")
	}
}

var rootPortRE = regexp.MustCompile(`(?s)\n\s*<controller type='pci' index='\d+' model='pcie-root-port'>.*?</controller>`)

// noRootPorts drops the pcie-root-port controllers of a domain XML.
func noRootPorts(x string) string { return rootPortRE.ReplaceAllString(x, "") }

// attachForeignBridge attaches, with virsh, a bridge interface vflag did
// not make.
func (e *env) attachForeignBridge(t *testing.T, name, mac string) {
	t.Helper()
	dev := fmt.Sprintf("<interface type='bridge'><mac address='%s'/><source bridge='br-other'/><model type='virtio'/></interface>", mac)
	f := filepath.Join(t.TempDir(), "dev.xml")
	if err := os.WriteFile(f, []byte(dev), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Virsh("attach-device", name, f, "--config"); err != nil {
		t.Fatal(err)
	}
}
