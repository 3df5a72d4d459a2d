package hook

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/libvirtx"
)

// incomingXML is a migrating domain's XML as the source's libvirt sends it:
// a teaming pair vflag made (its claim names group owner) with the VF at
// pci, a source host's address.
func incomingXML(name, uuid, pci, mac, owner string) string {
	var dom, bus, slot, fn uint
	parts := strings.FieldsFunc(pci, func(r rune) bool { return r == ':' || r == '.' })
	for i, p := range parts {
		var v uint
		for _, c := range p {
			v = v*16 + uint(strings.IndexRune("0123456789abcdef", c))
		}
		switch i {
		case 0:
			dom = v
		case 1:
			bus = v
		case 2:
			slot = v
		case 3:
			fn = v
		}
	}
	addr := "<address type='pci' domain='0x" + hex(dom, 4) + "' bus='0x" + hex(bus, 2) + "' slot='0x" + hex(slot, 2) + "' function='0x" + hex(fn, 1) + "'/>"
	alias := libvirtx.StandbyAlias(mac)
	return `<domain type='kvm'>
  <name>` + name + `</name>
  <uuid>` + uuid + `</uuid>
  <metadata>
    <vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1">
      <vflag:vf pci="` + pci + `" mac="` + mac + `" owner="` + owner + `" standby="` + alias + `"/>
    </vflag:vflag>
  </metadata>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <devices>
    <interface type='bridge'>
      <mac address='` + mac + `'/>
      <source bridge='br-lag'/>
      <vlan><tag id='200'/></vlan>
      <virtualport type='openvswitch'/>
      <model type='virtio'/>
      <teaming type='persistent'/>
      <alias name='` + alias + `'/>
    </interface>
    <interface type='hostdev' managed='yes'>
      <mac address='` + mac + `'/>
      <source>
        ` + addr + `
      </source>
      <teaming type='transient' persistent='` + alias + `'/>
    </interface>
  </devices>
</domain>
`
}

func hex(v uint, width int) string {
	s := ""
	for i := 0; i < width || v > 0; i++ {
		s = string("0123456789abcdef"[v%16]) + s
		v /= 16
	}
	return s
}

// migrate runs "migrate begin" for a domain and returns what the hook
// printed.
func (b *bed) migrate(name, uuid, pci, mac string, mod func(*Options)) (string, error) {
	o := b.optsFor(name, "migrate", "begin")
	o.XML = strings.NewReader(incomingXML(name, uuid, pci, mac, "lag0"))
	var out bytes.Buffer
	o.Stdout = &out
	o.BootID = func() (string, error) { return "boot-1", nil }
	if mod != nil {
		mod(&o)
	}
	err := Run(context.Background(), o)
	return out.String(), err
}

// event runs another hook event of a domain with its incoming XML.
func (b *bed) event(name, uuid, pci, mac, op, sub string, mod func(*Options)) error {
	o := b.optsFor(name, op, sub)
	o.XML = strings.NewReader(incomingXML(name, uuid, pci, mac, "lag0"))
	o.BootID = func() (string, error) { return "boot-1", nil }
	if mod != nil {
		mod(&o)
	}
	return Run(context.Background(), o)
}

// vfIn is the teaming VF of a printed XML.
func vfIn(t *testing.T, doc string) string {
	t.Helper()
	if doc == "" {
		t.Fatal("the hook printed no XML: libvirt keeps the incoming VF address")
	}
	vfs, err := libvirtx.TeamedVFs([]byte(doc))
	if err != nil || len(vfs) != 1 {
		t.Fatalf("TeamedVFs = %+v, %v\n%s", vfs, err, doc)
	}
	return vfs[0].PCI
}

func (b *bed) reserved() map[string]string {
	b.t.Helper()
	got, err := Reserved(context.Background(), Options{StateDir: b.state, BootID: func() (string, error) { return "boot-1", nil }})
	if err != nil {
		b.t.Fatal(err)
	}
	return got
}

const (
	srcVF  = "0000:81:00.5" // the source host's VF: no device here
	uuidA  = "6f1c0a64-4b6e-4c1e-9d1d-3b7c6c1e2a10"
	uuidB  = "6f1c0a64-4b6e-4c1e-9d1d-3b7c6c1e2a11"
	macMig = "52:54:00:aa:07:01"
)

// TestMigrateBeginRewrite: an incoming teaming VF at an address that is no
// VF of this host goes to a free VF of the group, reserved; the printed XML
// differs from the incoming one there only; a domain vflag has no claim in
// passes silently, its XML unchanged (nothing printed).
func TestMigrateBeginRewrite(t *testing.T) {
	b := newBed(t)
	out, err := b.migrate("vm-m1", uuidA, srcVF, macMig, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := vfIn(t, out)
	if got == srcVF || !strings.HasPrefix(got, "0000:61:") {
		t.Fatalf("VF after migrate begin = %s, want a VF of this host's group", got)
	}
	want := strings.ReplaceAll(incomingXML("vm-m1", uuidA, got, macMig, "lag0"), "", "")
	if out != want {
		t.Errorf("printed XML differs from the incoming one beyond the VF:\n%s\nwant\n%s", out, want)
	}
	if r := b.reserved(); r[got] != "vm-m1" || len(r) != 1 {
		t.Errorf("reservations = %v, want %s for vm-m1", r, got)
	}
	// Not vflag's: no claim, its standby on a bridge of no group.
	o := b.optsFor("vm-foreign", "migrate", "begin")
	doc := strings.Replace(incomingXML("vm-foreign", uuidB, srcVF, "52:54:00:aa:07:02", "lag0"), `owner="lag0"`, `owner="lag0"`, 1)
	doc = strings.Replace(doc, `<vflag:vf pci="`+srcVF, `<vflag:vf pci="0000:81:00.6`, 1)
	doc = strings.Replace(doc, "<source bridge='br-lag'/>", "<source bridge='br-other'/>", 1)
	o.XML = strings.NewReader(doc)
	var fout bytes.Buffer
	o.Stdout = &fout
	o.BootID = func() (string, error) { return "boot-1", nil }
	if err := Run(context.Background(), o); err != nil || fout.Len() != 0 {
		t.Errorf("foreign domain: %v, printed %q", err, fout.String())
	}
	// A group this host does not have: left alone, said on stderr.
	var serr bytes.Buffer
	out, err = b.migrate("vm-other", uuidB, srcVF, "52:54:00:aa:07:03", func(o *Options) {
		o.XML = strings.NewReader(incomingXML("vm-other", uuidB, srcVF, "52:54:00:aa:07:03", "lag9"))
		o.Stderr = &serr
	})
	if err != nil || out != "" || !strings.Contains(serr.String(), `group "lag9", which this host's config does not have`) {
		t.Errorf("other group: %v, printed %q, stderr %q", err, out, serr.String())
	}
}

// TestMigrateKeepsFreeAddress: an incoming VF already at a free VF of the
// group keeps its address (nothing printed) and is reserved.
func TestMigrateKeepsFreeAddress(t *testing.T) {
	b := newBed(t)
	out, err := b.migrate("vm-m1", uuidA, "0000:61:00.3", macMig, nil)
	if err != nil || out != "" {
		t.Fatalf("migrate begin = %v, printed %q; want no change", err, out)
	}
	if r := b.reserved(); r["0000:61:00.3"] != "vm-m1" {
		t.Errorf("reservations = %v", r)
	}
}

// TestTwoIncomingMigrations: two migrations arriving at once take two VFs.
func TestTwoIncomingMigrations(t *testing.T) {
	b := newBed(t)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i, name := range []string{"vm-m1", "vm-m2"} {
		wg.Go(func() {
			uuid := []string{uuidA, uuidB}[i]
			mac := []string{"52:54:00:aa:07:01", "52:54:00:aa:07:02"}[i]
			outs[i], errs[i] = b.migrate(name, uuid, srcVF, mac, nil)
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("migrate begin: %v, %v", errs[0], errs[1])
	}
	a, c := vfIn(t, outs[0]), vfIn(t, outs[1])
	if a == c {
		t.Fatalf("both incoming migrations got VF %s", a)
	}
	r := b.reserved()
	if r[a] != "vm-m1" || r[c] != "vm-m2" {
		t.Errorf("reservations = %v", r)
	}
	// A local start of a domain with vm-m1's VF is refused.
	o := b.optsFor("vm-local", "prepare", "begin")
	o.XML = strings.NewReader(strings.Replace(incomingXML("vm-local", "", a, "52:54:00:aa:07:09", "lag0"), `<vflag:vf pci`, `<vflag:other pci`, 1))
	o.BootID = func() (string, error) { return "boot-1", nil }
	err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "VF "+a+" is reserved by the incoming migration of domain vm-m1") {
		t.Errorf("local start on VF %s (reserved: %v): %v", a, b.reserved(), err)
	}
}

// TestFailedMigrationDropsReservation: a migration that fails (release
// without started) gives its VF back; one that started keeps it until its
// release, past ReservationTTL; an unstarted one past the TTL, or one of
// an earlier boot, holds nothing.
func TestFailedMigrationDropsReservation(t *testing.T) {
	b := newBed(t)
	out, err := b.migrate("vm-m1", uuidA, srcVF, macMig, nil)
	if err != nil {
		t.Fatal(err)
	}
	vf := vfIn(t, out)
	if err := b.event("vm-m1", uuidA, vf, macMig, "release", "end", nil); err != nil {
		t.Fatal(err)
	}
	if r := b.reserved(); len(r) != 0 {
		t.Fatalf("reservations after a failed migration's release = %v", r)
	}
	// The next migration may take the same VF.
	out, err = b.migrate("vm-m2", uuidB, srcVF, "52:54:00:aa:07:02", nil)
	if err != nil || vfIn(t, out) != vf {
		t.Fatalf("next migration: %v, VF %s, want %s", err, vfIn(t, out), vf)
	}

	// Started: held past the TTL until the release.
	if err := b.event("vm-m2", uuidB, vf, "52:54:00:aa:07:02", "started", "begin", nil); err != nil {
		t.Fatal(err)
	}
	later := func(o *Options) { o.Now = func() time.Time { return time.Now().Add(2 * ReservationTTL) } }
	out, err = b.migrate("vm-m3", uuidA, srcVF, "52:54:00:aa:07:03", later)
	if err != nil || vfIn(t, out) == vf {
		t.Fatalf("migration past the TTL took the started reservation's VF %s: %v", vf, err)
	}
	third := vfIn(t, out)
	// vm-m3 never started: past the TTL its VF is free again.
	out, err = b.migrate("vm-m4", uuidB, third, "52:54:00:aa:07:04", func(o *Options) {
		o.Now = func() time.Time { return time.Now().Add(4 * ReservationTTL) }
	})
	if err != nil || vfIn(t, orIncoming(out, third)) != third {
		t.Errorf("an unstarted reservation past the TTL still holds %s: %v, %q", third, err, out)
	}
	// Another boot: nothing holds.
	other := func(o *Options) { o.BootID = func() (string, error) { return "boot-2", nil } }
	out, err = b.migrate("vm-m5", uuidA, vf, "52:54:00:aa:07:05", other)
	if err != nil || out != "" {
		t.Errorf("after a reboot, %s is still reserved: %v, %q", vf, err, out)
	}
	entries, _ := os.ReadDir(ReservedDir(b.state))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if slices.Contains(names, third+".json") {
		t.Errorf("void reservation files left: %v", names)
	}
}

// orIncoming is the printed XML, or (nothing printed: unchanged) the
// incoming one with pci.
func orIncoming(out, pci string) string {
	if out != "" {
		return out
	}
	return incomingXML("x", uuidA, pci, macMig, "lag0")
}

// TestMigrateNoFreeVF: a destination whose group has no free VF refuses
// the migration at migrate begin, naming each VF and why; nothing reserved
// by the refused one.
func TestMigrateNoFreeVF(t *testing.T) {
	b := newBed(t)
	var got []string
	for i := 0; ; i++ {
		mac := "52:54:00:aa:08:0" + string(rune('0'+i))
		out, err := b.migrate("vm-f"+string(rune('0'+i)), "", srcVF, mac, nil)
		if err != nil {
			if !strings.Contains(err.Error(), "no free VF of group lag0 on this host") || !strings.Contains(err.Error(), "reserved by the incoming migration of vm-f0") {
				t.Fatalf("refusal: %v", err)
			}
			break
		}
		got = append(got, vfIn(t, out))
		if i > 8 {
			t.Fatal("no refusal")
		}
	}
	if len(got) < 2 || len(b.reserved()) != len(got) {
		t.Errorf("VFs taken %v, reservations %v", got, b.reserved())
	}
	if _, err := os.Stat(filepath.Join(ReservedDir(b.state), "lock")); err != nil {
		t.Errorf("lock file: %v", err)
	}
}

// TestTeamedVFGetsStandbyVLAN: prepare puts a teaming VF's representor on
// the bridge with its standby's VLAN (the pair's, which came with the
// domain), not the config's VLAN of that VF.
func TestTeamedVFGetsStandbyVLAN(t *testing.T) {
	b := newBed(t)
	o := b.optsFor("vm-m1", "prepare", "begin")
	o.XML = strings.NewReader(incomingXML("vm-m1", uuidA, "0000:61:00.3", macMig, "lag0"))
	o.BootID = func() (string, error) { return "boot-1", nil }
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if tag := strings.TrimSpace(b.srv.MustVsctl("get", "Port", b.rep, "tag")); tag != "200" {
		t.Errorf("representor %s tag = %s, want 200 (the standby's; the config says 100)", b.rep, tag)
	}
}

// TestSourceFreesVFAtReleaseOnly: on the source of a migration the VF
// stays prepared (the domain's MAC, its representor's port) through every
// event before "release end" (stopped, a started of the incoming side's
// name, migrate of another domain): a cancelled migration plugs it back
// as it was. release end resets it.
func TestSourceFreesVFAtReleaseOnly(t *testing.T) {
	b := newBed(t)
	const vf = "0000:61:00.3" // VF 1 of ens1f0np0: b.rep, b.vfMAC
	if err := b.event("vm-m1", uuidA, vf, macMig, "prepare", "begin", nil); err != nil {
		t.Fatal(err)
	}
	if b.vfMAC() != macMig || !b.hasPort() {
		t.Fatalf("after prepare: VF MAC %s, port %v", b.vfMAC(), b.hasPort())
	}
	for _, ev := range [][2]string{{"started", "begin"}, {"stopped", "end"}, {"migrate", "end"}, {"restore", "begin"}} {
		if err := b.event("vm-m1", uuidA, vf, macMig, ev[0], ev[1], nil); err != nil {
			t.Fatalf("%s %s: %v", ev[0], ev[1], err)
		}
		if b.vfMAC() != macMig || !b.hasPort() {
			t.Fatalf("after %s %s the VF was freed: MAC %s, port %v", ev[0], ev[1], b.vfMAC(), b.hasPort())
		}
	}
	if err := b.event("vm-m1", uuidA, vf, macMig, "release", "end", nil); err != nil {
		t.Fatal(err)
	}
	if b.vfMAC() != priorMAC || b.hasPort() {
		t.Errorf("after release: VF MAC %s (want %s), port %v", b.vfMAC(), priorMAC, b.hasPort())
	}
}

// TestMigrateHandWrittenPair: a pair written by hand (no vflag claim) whose
// standby is a port of a group's bridge is that group's: its VF moves too;
// one whose standby is on another bridge is left alone.
func TestMigrateHandWrittenPair(t *testing.T) {
	b := newBed(t)
	noClaim := func(bridge string) func(*Options) {
		return func(o *Options) {
			doc := incomingXML("vm-h", uuidA, srcVF, macMig, "lag0")
			doc = strings.Replace(doc, `<vflag:vf pci="`+srcVF+`"`, `<vflag:vf pci="0000:81:00.7"`, 1)
			doc = strings.Replace(doc, "<source bridge='br-lag'/>", "<source bridge='"+bridge+"'/>", 1)
			o.XML = strings.NewReader(doc)
		}
	}
	out, err := b.migrate("vm-h", uuidA, srcVF, macMig, noClaim("br-lag"))
	if err != nil || !strings.HasPrefix(vfIn(t, out), "0000:61:") {
		t.Fatalf("hand-written pair on br-lag: %v\n%s", err, out)
	}
	out, err = b.migrate("vm-h2", uuidB, srcVF, macMig, noClaim("br-other"))
	if err != nil || out != "" {
		t.Errorf("hand-written pair on another bridge: %v, printed %q", err, out)
	}
}

// TestBridgeGroup: a hand-written pair's standby bridge names the group
// whose standbys go there: a switchdev group's ovs.bridge, a legacy
// group's standby_bridge; a legacy group without one has no bridge.
func TestBridgeGroup(t *testing.T) {
	cfg := &config.Config{Groups: []config.Group{
		{Name: "leg0", Eswitch: "legacy"},
		{Name: "lag0", Eswitch: "switchdev", OVS: config.OVSConfig{Bridge: "br-lag"}},
		{Name: "igb0", Eswitch: "legacy", StandbyBridge: "br-host"},
	}}
	for bridge, want := range map[string]string{"br-lag": "lag0", "br-host": "igb0", "br-other": "", "": ""} {
		got := ""
		if g := bridgeGroup(cfg, bridge); g != nil {
			got = g.Name
		}
		if got != want {
			t.Errorf("bridgeGroup(%q) = %q, want %q", bridge, got, want)
		}
	}
}
