package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/status"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/ovs/ovnsb/sbtest"
)

func ovnVariant(n int) variant {
	x := baseVariant()
	x.name, x.ovn, x.mtu = "ovn", n, 1600
	return x
}

// TestOVNChassisUpDown: on a host whose Open vSwitch has chassis settings
// of someone else's (a hostname, an encap type, a key vflag never sets)
// and ovn-controller's br-int with its tunnel port, up makes the host a
// chassis: the external_ids, the representors on the adopted br-int with
// their bindings (vm-uuid for vm1's), ovn-controller's ovn-installed on
// both bound ports, the bond in no bridge; plan then changes nothing; down
// puts every key back exactly as it was (absent stays absent) and leaves
// br-int and its tunnel port.
func TestOVNChassisUpDown(t *testing.T) {
	d := startDaemons(t)
	d.startOVN(t)
	d.virt.DefineDomain(t, "vm2")
	d.ovs.MustVsctl("set", "Open_vSwitch", ".", "external_ids:hostname=old-name", "external_ids:ovn-encap-type=stt", "external_ids:unrelated=keep")
	d.ovs.MustVsctl("add-br", "br-int", "--", "set", "Bridge", "br-int", "fail_mode=secure", "datapath_type=netdev",
		"--", "add-port", "br-int", "ovn-ch2-0", "--", "set", "Interface", "ovn-ch2-0", "type=geneve", "options:remote_ip=192.0.2.12")
	b := newBed(t, d, "")
	b.useConfig(ovnVariant(1).config(d))
	b.initSim()
	baseline := b.fullDump()
	plan := changedIDs(t, b.mustVflag(2, "plan", "-o", "json", "--detailed-exit-codes"))
	rep := upReport(t, b)
	if rep.Error != "" {
		t.Fatalf("up: %s", rep.Error)
	}
	if up := rep.ChangedIDs(); strings.Join(plan, " ") != strings.Join(up, " ") {
		t.Errorf("plan predicts %v, up made %v", plan, up)
	}
	host, _ := os.Hostname()
	dump := b.fullDump()
	for _, want := range []string{
		`hostname="` + host + `"`, `ovn-bridge="br-int"`, `ovn-encap-ip="192.0.2.11"`, `ovn-encap-type="geneve"`,
		`ovn-remote="tcp:192.0.2.1:6642"`, `ovn-set-local-ip="true"`, `system-id="chassis-1"`, `unrelated="keep"`,
		`bridge "br-int" datapath_type="netdev" owner="" fail_mode=secure`,
		`port "ovn-ch2-0" tag=- owner=""`,
		`attached-mac="52:54:00:10:00:01", iface-id="lsp-vf01", iface-status="active", ovn-installed="true"}`,
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("after up the host lacks %s:\n%s", want, dump)
		}
	}
	if !strings.Contains(dump, `iface-id="lsp-vm1", iface-status="active", ovn-installed="true", vm-uuid="`) {
		t.Errorf("vm1's port lacks its binding with vm-uuid:\n%s", dump)
	}
	if strings.Contains(dump, `port "bond0"`) {
		t.Errorf("bond0 is a bridge port:\n%s", dump)
	}
	if again := upReport(t, b).ChangedIDs(); len(again) != 0 {
		t.Errorf("a second up changed %v", again)
	}
	b.mustVflag(0, "down")
	if got := b.fullDump(); got != baseline {
		t.Fatalf("down does not give the host from before:\n%s", testbed.LineDiff(baseline, got, 10))
	}
}

// TestOVNCreatesIntegrationBridge: without br-int, up makes it as OVN
// expects it (fail_mode secure, disable-in-band) and down removes it; a
// config without system_id takes one made once and kept in the state
// directory, the same at the next up.
func TestOVNCreatesIntegrationBridge(t *testing.T) {
	d := startDaemons(t)
	d.startOVN(t)
	d.virt.DefineDomain(t, "vm2")
	b := newBed(t, d, "")
	b.useConfig(strings.Replace(ovnVariant(1).config(d), "system_id: chassis-1, ", "", 1))
	b.initSim()
	baseline := b.fullDump()
	if rep := upReport(t, b); rep.Error != "" {
		t.Fatalf("up: %s", rep.Error)
	}
	dump := b.fullDump()
	if !strings.Contains(dump, `bridge "br-int" datapath_type="netdev" owner="lag0" fail_mode=secure other_config={disable-in-band="true"}`) {
		t.Fatalf("br-int not made as OVN expects it:\n%s", dump)
	}
	id, err := os.ReadFile(filepath.Join(b.state, "ovn-system-id"))
	if err != nil || !strings.Contains(dump, `system-id="`+strings.TrimSpace(string(id))+`"`) {
		t.Fatalf("the made system-id %q (%v) is not the chassis's:\n%s", id, err, dump)
	}
	b.mustVflag(0, "down")
	if got := b.fullDump(); got != baseline {
		t.Fatalf("down does not give the host from before:\n%s", testbed.LineDiff(baseline, got, 10))
	}
	if rep := upReport(t, b); rep.Error != "" {
		t.Fatalf("up again: %s", rep.Error)
	}
	if !strings.Contains(b.fullDump(), `system-id="`+strings.TrimSpace(string(id))+`"`) {
		t.Fatal("the second up made another system-id")
	}
	b.mustVflag(0, "down")
}

// TestOVNNotInstalledIsDegraded: a bound port that ovn-controller does
// not install within install_timeout (its logical port unknown to the
// Southbound) makes up degraded, exit 1, naming the port, its logical port
// and why; nothing is rolled back (the binding stays, vm1's port is
// installed). Once the Southbound knows the port, up succeeds without a
// change.
func TestOVNNotInstalledIsDegraded(t *testing.T) {
	d := startDaemons(t)
	d.startOVN(t)
	d.virt.DefineDomain(t, "vm2")
	d.ovn.SetLSPs("lsp-vm1")
	b := newBed(t, d, "")
	b.useConfig(strings.Replace(ovnVariant(1).config(d), "install_timeout: 20s", "install_timeout: 300ms", 1))
	b.initSim()
	_, errs, code := b.vflag("up")
	if code != 1 || !strings.Contains(errs, "host degraded") || !strings.Contains(errs, "(ovn_port lsp-vf01) not ovn-installed after 300ms: no logical port lsp-vf01 in the Southbound") {
		t.Fatalf("up: exit %d, want 1, degraded, naming lsp-vf01's port:\n%s", code, errs)
	}
	if strings.Contains(errs, "lsp-vm1)") {
		t.Errorf("the installed port is named:\n%s", errs)
	}
	dump := b.fullDump()
	if !strings.Contains(dump, `iface-id="lsp-vf01", iface-status="active"}`) || !strings.Contains(dump, `iface-id="lsp-vm1", iface-status="active", ovn-installed="true"`) {
		t.Fatalf("the bindings did not stay:\n%s", dump)
	}
	d.ovn.SetLSPs("lsp-vm1", "lsp-vf01")
	if rep := upReport(t, b); rep.Error != "" || len(rep.ChangedIDs()) != 0 {
		t.Fatalf("up once the port is known: %q, changed %v", rep.Error, rep.ChangedIDs())
	}
	b.mustVflag(0, "down")
}

// TestOVNRollbackAtEachStep: an up from the VLAN layout to the OVN one
// that fails at any OVN step (each external_ids key, the bridge's move to
// br-int with the bindings) leaves the host as before the run: the keys
// absent, the bond back in br-lag, no br-int.
func TestOVNRollbackAtEachStep(t *testing.T) {
	d := startDaemons(t)
	d.startOVN(t)
	d.virt.DefineDomain(t, "vm2")
	d.ovs.MustVsctl("set", "Open_vSwitch", ".", "external_ids:ovn-remote=tcp:198.51.100.1:6642")
	b := newBed(t, d, "")
	b.useConfig(baseVariant().config(d))
	b.initSim()
	b.mustVflag(2, "up", "--detailed-exit-codes")
	before := b.fullDump()
	b.useConfig(strings.Replace(ovnVariant(1).config(d), "system_id: chassis-1, ", "", 1))
	steps := planSteps(t, b.mustVflag(2, "plan", "-o", "json", "--detailed-exit-codes"))
	var tried []string
	for _, id := range steps {
		if !strings.HasPrefix(id, "ovn.") && id != "ovs.bridge/br-int" {
			continue
		}
		tried = append(tried, id)
		_, errs, code := b.vflag("up", "--fail-at", id)
		if code != 1 || !strings.Contains(errs, "injected failure") {
			t.Errorf("failure at %s: exit %d, want 1 with the injected failure:\n%s", id, code, errs)
		}
		if got := b.fullDump(); got != before {
			t.Fatalf("failure at %s: after the rollback the host differs from before the run:\n%s\n%s", id, testbed.LineDiff(before, got, 10), errs)
		}
	}
	if len(tried) < 8 {
		t.Fatalf("tried %v: want the bridge and every external_ids key", tried)
	}
	b.mustVflag(0, "down")
}

// TestOVNSSLRowRestored: with an ssl: remote, up puts the chassis's files
// in the SSL row in place of the ones there, and down puts those back.
func TestOVNSSLRowRestored(t *testing.T) {
	d := startDaemons(t)
	d.startOVN(t)
	d.virt.DefineDomain(t, "vm2")
	d.ovs.MustVsctl("set-ssl", "/old/key.pem", "/old/cert.pem", "/old/ca.pem")
	b := newBed(t, d, "")
	b.useConfig(ovnVariant(2).config(d))
	b.initSim()
	baseline := b.fullDump()
	if rep := upReport(t, b); rep.Error != "" {
		t.Fatalf("up: %s", rep.Error)
	}
	if dump := b.fullDump(); !strings.Contains(dump, `ssl private_key="/etc/ovn/key.pem" certificate="/etc/ovn/cert.pem" ca_cert="/etc/ovn/ca.pem"`) ||
		!strings.Contains(dump, `ovn-remote="ssl:[2001:db8::1]:6642"`) || !strings.Contains(dump, `ovn-bridge-mappings="physnet1:br-phys"`) {
		t.Fatalf("up did not make the ssl: chassis:\n%s", dump)
	}
	b.mustVflag(0, "down")
	if got := b.fullDump(); got != baseline {
		t.Fatalf("down does not give the host from before:\n%s", testbed.LineDiff(baseline, got, 10))
	}
}

// TestOVNStatusValidate: an OVN chassis up on the simulated host, with a
// real Southbound that has it registered and its ports bound (what
// ovn-northd and ovn-controller write there, written by the test), has no
// status problem and passes validate: its bond, the underlay, is no bridge
// port and shares no tc block; the encap address, the MTU chain with OVN's
// 58 bytes, every representor's port and the Southbound's view of the
// chassis and its ports are checked. The same host with a port bound to
// another chassis fails that port's check, in status too.
func TestOVNStatusValidate(t *testing.T) {
	d := startDaemons(t)
	d.startOVN(t)
	d.virt.DefineDomain(t, "vm2")
	sb := sbtest.Start(t)
	sb.AddChassis("chassis-1", "geneve", "192.0.2.11")
	for _, lsp := range []string{"lsp-vf01", "lsp-vm1"} {
		sb.AddPort(lsp)
		sb.Bind(lsp, "chassis-1", true)
	}
	b := newBed(t, d, "")
	cfg := ovnVariant(1).config(d)
	if !strings.Contains(cfg, `"tcp:192.0.2.1:6642"`) {
		t.Fatalf("the OVN variant's remote moved:\n%s", cfg)
	}
	b.useConfig(strings.Replace(cfg, `"tcp:192.0.2.1:6642"`, `"`+sb.Endpoint()+`"`, 1))
	b.initSim()
	if rep := upReport(t, b); rep.Error != "" {
		t.Fatalf("up: %s", rep.Error)
	}
	t.Cleanup(func() { b.mustVflag(0, "down") })
	if problems, _ := b.statusProblems(0, "lag0"); len(problems) != 0 {
		t.Errorf("status problems: %v", problems)
	}
	rep := b.validateJSON(0)
	pass := checksBy(rep, validate.Pass)
	for _, n := range []string{"tunnel/underlay", "tunnel/mtu", "ovs/port/pf0vf0", "ovs/hw-offload"} {
		if _, ok := pass[n]; !ok {
			t.Errorf("%s does not pass: %+v", n, rep)
		}
	}
	if _, ok := pass["ovs/port/bond0"]; ok {
		t.Errorf("validate wants bond0 as a bridge port: %+v", rep)
	}
	for _, n := range []string{"ovn/southbound", "ovn/chassis", "ovn/port/lsp-vf01", "ovn/port/lsp-vm1"} {
		if _, ok := pass[n]; !ok {
			t.Errorf("%s does not pass: %+v", n, rep)
		}
	}
	sb.AddChassis("chassis-2", "geneve", "192.0.2.12")
	sb.Bind("lsp-vf01", "", false)
	sb.Bind("lsp-vf01", "chassis-2", true)
	// (chassis-2 also wants a tunnel port and a resolved neighbour: the
	// simulated ovn-controller makes no tunnels; those checks fail too.)
	fail := checksBy(b.validateJSON(1), validate.Fail)
	if !strings.Contains(fail["ovn/port/lsp-vf01"].Detail, "bound to another chassis, chassis-2") {
		t.Errorf("lsp-vf01 bound to chassis-2: validate fails %v, want ovn/port/lsp-vf01 naming chassis-2", names(fail))
	}
	if _, ok := fail["ovn/port/lsp-vm1"]; ok {
		t.Errorf("lsp-vm1, still bound here, fails: %v", fail["ovn/port/lsp-vm1"])
	}
	problems, _ := b.statusProblems(4, "lag0")
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, "ovn/port/lsp-vf01: ") }) {
		t.Errorf("lsp-vf01 bound to chassis-2: status problems %v", problems)
	}
}

// TestOVNHookLifecycle: the qemu hook in an OVN group binds like up. After
// up, vm1's prepare (its XML as libvirt passes it) finds vm1's port bound
// as up bound it: nothing journaled. With the binding removed (as a
// release leaves it), prepare binds it again with vm1's UUID, an up then
// changes nothing (up and the hook agree), release removes exactly the
// keys it set, and down leaves the host as before up. Then a pool port (ovnPoolPort).
func TestOVNHookLifecycle(t *testing.T) {
	d := poolDaemons(t) // the OVN controller too
	d.virt.DefineDomain(t, "vm2")
	b := newBed(t, d, "")
	b.useConfig(strings.Replace(ovnVariant(1).config(d), "    attachments:\n", "    network: {vfs: [{pf: 0, vf: 2}, {pf: 0, vf: 3}]}\n    attachments:\n", 1))
	b.initSim()
	baseline := b.fullDump()
	if rep := upReport(t, b); rep.Error != "" {
		t.Fatalf("up: %s", rep.Error)
	}
	xml := b.virt.DomainXML(t, "vm1")
	if !strings.Contains(xml, "<uuid>") || !strings.Contains(xml, "hostdev") {
		t.Fatalf("vm1's XML lacks its UUID or its VF:\n%s", xml)
	}
	bound := b.ovs.Dump()
	const binding = `iface-id="lsp-vm1", iface-status="active", ovn-installed="true", vm-uuid="`
	if !strings.Contains(bound, binding) {
		t.Fatalf("up did not bind vm1's port:\n%s", bound)
	}
	hook := func(op, sub string) {
		t.Helper()
		if out, errs, code := b.hook(nil, "vm1", op, sub, xml); code != 0 {
			t.Fatalf("hook %s %s: exit %d\n%s\n%s", op, sub, code, out, errs)
		}
	}
	hook("prepare", "begin")
	if b.hookStateExists("vm1") {
		t.Fatalf("prepare changed up's binding (the hook journaled changes):\n%s", b.ovs.Dump())
	}
	hook("release", "end")

	var hs status.HostStatus
	if err := json.Unmarshal([]byte(b.statusAny("-o", "json")), &hs); err != nil {
		t.Fatal(err)
	}
	rep0 := ""
	for _, v := range hs.Groups[0].VFs {
		if v.PCI == "0000:61:00.2" {
			rep0 = v.Representor
		}
	}
	b.ovs.MustVsctl("remove", "Interface", rep0, "external_ids", "iface-id", "attached-mac", "vm-uuid", "iface-status")
	unbound := b.ovs.Dump()
	if strings.Contains(unbound, `iface-id="lsp-vm1"`) {
		t.Fatalf("binding not removed:\n%s", unbound)
	}
	hook("prepare", "begin")
	if got := b.ovs.Dump(); !strings.Contains(got, `iface-id="lsp-vm1", iface-status="active"`) || !b.hookStateExists("vm1") {
		t.Fatalf("prepare did not bind vm1's port (journal %v):\n%s", b.hookStateExists("vm1"), got)
	}
	if again := upReport(t, b).ChangedIDs(); len(again) != 0 {
		t.Errorf("up after the hook's prepare changed %v", again)
	}
	if got := b.ovs.Dump(); !strings.Contains(got, binding) || got != bound {
		t.Errorf("after prepare and up the OVSDB is not as up made it:\n%s", testbed.LineDiff(bound, got, 10))
	}
	hook("release", "end")
	if b.hookStateExists("vm1") {
		t.Error("the hook's journal is left after release")
	}
	if got := b.ovs.Dump(); strings.Contains(got, `iface-id="lsp-vm1"`) {
		t.Errorf("release left the binding:\n%s", got)
	}
	ovnPoolPort(t, b)
	b.mustVflag(0, "down")
	if got := b.fullDump(); got != baseline {
		t.Fatalf("down does not give the host from before:\n%s", testbed.LineDiff(baseline, got, 10))
	}
}

// ovnPoolPort: the group's VF pool (pf 0 vf 2 and 3). A domain's port
// takes a pool VF (the network hook changes nothing); the domain's
// metadata is set as ovn.md says (virsh metadata --set), and the qemu hook at "start begin" binds its
// representor to the logical port the domain's metadata names for the
// interface's MAC (with the domain's UUID); an up then changes nothing
// (the binding is the hook's), validate checks the port as
// ovn/port/<lsp>; release removes exactly the keys the hook set.
func ovnPoolPort(t *testing.T, b *bed) {
	t.Helper()
	if rep := upReport(t, b); rep.Error != "" { // vm1's port bound again
		t.Fatalf("up: %s", rep.Error)
	}
	const port = "aaaaaaaa-0000-0000-0000-0000000000b2"
	pci := createPort(t, b, "vflag-lag0", port, "vm2", "")
	up := b.ovs.Dump()
	// The network hook has no VLAN to put on an OVN pool port: nothing.
	if _, errs, code := b.netHook("vflag-lag0", "port-created", "begin", hookData(t, b, "vflag-lag0", port)); code != 0 {
		t.Fatalf("network hook port-created: exit %d\n%s", code, errs)
	}
	if got := b.ovs.Dump(); got != up {
		t.Fatalf("the network hook changed OVSDB:\n%s", testbed.LineDiff(up, got, 10))
	}
	// The domain's metadata as ovn.md has the operator write it, and as
	// libvirt then hands it to the hook.
	if out, err := b.virt.Virsh("metadata", "vm2", "--config", "--uri", "https://vflag.dev/xmlns/vflag-ovn/1", "--key", "vflag-ovn",
		"--set", `<ovn><interface mac="52:54:00:ab:00:01" ovn_port="vm2-eth0"/></ovn>`); err != nil {
		t.Fatalf("virsh metadata: %v\n%s", err, out)
	}
	meta := regexp.MustCompile(`(?s)<metadata>.*</metadata>`).FindString(b.virt.DomainXML(t, "vm2"))
	if !strings.Contains(meta, "https://vflag.dev/xmlns/vflag-ovn/1") {
		t.Fatalf("vm2's metadata lacks the OVN element: %q", meta)
	}
	bus, slot, fn := pci[5:7], pci[8:10], pci[11:]
	xml := `<domain type='kvm'><name>vm2</name><uuid>0f3c2a51-6b7d-4e8f-9a0b-0000000000b2</uuid>
  ` + meta + `
  <devices><interface type='hostdev' managed='yes'><mac address='52:54:00:ab:00:01'/>
    <source><address type='pci' domain='0x0000' bus='0x` + bus + `' slot='0x` + slot + `' function='0x` + fn + `'/></source></interface></devices></domain>`
	if out, errs, code := b.hook(nil, "vm2", "start", "begin", xml); code != 0 {
		t.Fatalf("hook start begin: exit %d\n%s\n%s", code, out, errs)
	}
	const binding = `attached-mac="52:54:00:ab:00:01", iface-id="vm2-eth0", iface-status="active"`
	bound := b.ovs.Dump()
	if !strings.Contains(bound, binding) || !strings.Contains(bound, `vm-uuid="0f3c2a51-6b7d-4e8f-9a0b-0000000000b2"`) {
		t.Fatalf("the hook did not bind %s's representor:\n%s", pci, testbed.LineDiff(up, bound, 10))
	}
	if again := upReport(t, b).ChangedIDs(); len(again) != 0 {
		t.Errorf("up with the pool port bound changed %v:\n%s", again, testbed.LineDiff(bound, b.ovs.Dump(), 10))
	}
	if got := b.ovs.Dump(); !strings.Contains(got, binding) {
		t.Errorf("up removed the pool port's binding:\n%s", testbed.LineDiff(bound, got, 10))
	}
	if out, _, _ := b.vflag("validate"); !strings.Contains(out, "ovn/port/vm2-eth0") {
		t.Errorf("validate has no check of the bound pool port:\n%s", out)
	}
	if out, errs, code := b.hook(nil, "vm2", "release", "end", xml); code != 0 {
		t.Fatalf("hook release end: exit %d\n%s\n%s", code, out, errs)
	}
	if got := b.ovs.Dump(); strings.Contains(got, `iface-id="vm2-eth0"`) {
		t.Errorf("release left the binding:\n%s", testbed.LineDiff(up, got, 10))
	}
	if _, err := b.virt.Virsh("net-port-delete", "vflag-lag0", port); err != nil {
		t.Fatal(err)
	}
	if out, err := b.virt.Virsh("metadata", "vm2", "--config", "--uri", "https://vflag.dev/xmlns/vflag-ovn/1", "--remove"); err != nil {
		t.Fatalf("virsh metadata --remove: %v\n%s", err, out)
	}
}
