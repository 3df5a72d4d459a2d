package libvirtx

import (
	"encoding/xml"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// children lists the child elements of the root of an XML document, each
// with its attributes: "teaming type=transient persistent=ua-x".
func children(t *testing.T, doc string) (root string, out []string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch se := tok.(type) {
		case xml.StartElement:
			s := se.Name.Local
			for _, a := range se.Attr {
				s += " " + a.Name.Local + "=" + a.Value
			}
			switch depth {
			case 0:
				root = s
			case 1:
				out = append(out, s)
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	return root, out
}

// TestTeamingPairXML holds the pair vflag makes against the shape of
// libvirt's own teaming test files (tests/qemuxml2argvdata/net-virtio-
// teaming.xml, net-virtio-teaming-network.xml and their formatted
// qemuxml2xmloutdata copies): the persistent interface has the MAC, a
// virtio model, <teaming type='persistent'/> and a user alias "ua-...";
// the hostdev interface is managed, has the same MAC and <teaming
// type='transient' persistent='ua-...'/> naming that alias; children in
// the order libvirt formats them (mac, source, vlan, virtualport, model,
// teaming, alias).
func TestTeamingPairXML(t *testing.T) {
	sb, err := StandbyXML("52:54:00:00:00:01", Standby{Bridge: "br-vf", VLAN: 10})
	if err != nil {
		t.Fatal(err)
	}
	root, kids := children(t, sb)
	if root != "interface type=bridge" {
		t.Errorf("standby root = %q\n%s", root, sb)
	}
	want := []string{
		"mac address=52:54:00:00:00:01",
		"source bridge=br-vf",
		"vlan",
		"virtualport type=openvswitch",
		"model type=virtio",
		"teaming type=persistent",
		"alias name=ua-vflag-525400000001",
	}
	if diff := cmp.Diff(want, kids); diff != "" {
		t.Errorf("standby's children (-want +got):\n%s\n%s", diff, sb)
	}
	if !strings.HasPrefix(StandbyAlias("52:54:00:00:00:01"), "ua-") {
		t.Error("the alias is not a user alias (libvirt wants ua- for teaming)")
	}
	vf, err := TeamedVFXML("0000:61:00.2", "52:54:00:00:00:01", StandbyAlias("52:54:00:00:00:01"), 0)
	if err != nil {
		t.Fatal(err)
	}
	root, kids = children(t, vf)
	if root != "interface type=hostdev managed=yes" {
		t.Errorf("VF root = %q\n%s", root, vf)
	}
	want = []string{
		"mac address=52:54:00:00:00:01",
		"source",
		"teaming type=transient persistent=ua-vflag-525400000001",
	}
	if diff := cmp.Diff(want, kids); diff != "" {
		t.Errorf("VF's children (-want +got):\n%s\n%s", diff, vf)
	}
	// A legacy group's VF: the VLAN libvirt sets through the PF.
	vf, err = TeamedVFXML("0000:61:00.2", "52:54:00:00:00:01", StandbyAlias("52:54:00:00:00:01"), 42)
	if err != nil {
		t.Fatal(err)
	}
	_, kids = children(t, vf)
	want = []string{
		"mac address=52:54:00:00:00:01",
		"source",
		"vlan",
		"teaming type=transient persistent=ua-vflag-525400000001",
	}
	if diff := cmp.Diff(want, kids); diff != "" || !strings.Contains(vf, `<tag id="42">`) {
		t.Errorf("legacy VF's children (-want +got):\n%s\n%s", diff, vf)
	}
	// A plain VF has no teaming.
	plain, _ := interfaceXML("0000:61:00.2", "52:54:00:00:00:01", "", 0)
	if strings.Contains(plain, "teaming") {
		t.Errorf("plain VF has teaming:\n%s", plain)
	}
}

// TestStandbyVLAN: the standby's <vlan> gives its OVS port the columns
// the VF's representor port has, as libvirt's openvswitch driver turns a
// <vlan> into columns (one tag: tag=; trunk='yes': trunks=; a tag with
// nativeMode: vlan_mode native-*), and reads back to the same.
func TestStandbyVLAN(t *testing.T) {
	tests := []struct {
		name string
		in   Standby
		want string // the <vlan> element, "" none
	}{
		{"access", Standby{VLAN: 10}, `<vlan><tag id="10"></tag></vlan>`},
		{"access untagged only", Standby{VLANMode: "access"}, `<vlan><tag id="0"></tag></vlan>`},
		{"default port: every VLAN", Standby{}, ""},
		{"trunk", Standby{VLANMode: "trunk", Trunks: []int{20, 30}}, `<vlan trunk="yes"><tag id="20"></tag><tag id="30"></tag></vlan>`},
		{"trunk of every VLAN", Standby{VLANMode: "trunk"}, ""},
		{"native-untagged", Standby{VLANMode: "native-untagged", VLAN: 10, Trunks: []int{20}}, `<vlan trunk="yes"><tag id="10" nativeMode="untagged"></tag><tag id="20"></tag></vlan>`},
		{"native-tagged", Standby{VLANMode: "native-tagged", VLAN: 10}, `<vlan trunk="yes"><tag id="10" nativeMode="tagged"></tag></vlan>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if v := vlanXML(tt.in); v != nil {
				b, err := xml.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				got = strings.Replace(string(b), "DomainInterfaceVLan", "vlan", 2)
			}
			if got != tt.want {
				t.Errorf("vlanXML = %s, want %s", got, tt.want)
			}
			if !sameVLAN(vlanOf(vlanXML(tt.in)), tt.in) {
				t.Errorf("read back as %+v, not the same as %+v", vlanOf(vlanXML(tt.in)), tt.in)
			}
		})
	}
	if sameVLAN(vlanOf(vlanXML(Standby{VLAN: 10})), Standby{VLAN: 20}) {
		t.Error("vlan 10 and 20 compare the same")
	}
}

// TestRewriteVF: the incoming domain's VF moves to another address in the
// hostdev interface's <source> and in vflag's claim, and nowhere else: the
// guest address, the other namespace's element, every other byte stay.
func TestRewriteVF(t *testing.T) {
	doc, err := os.ReadFile("testdata/teaming/incoming.xml")
	if err != nil {
		t.Fatal(err)
	}
	vfs, err := TeamedVFs(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []TeamedVF{{PCI: "0000:61:00.2", MAC: "52:54:00:00:07:01", Standby: "ua-vflag-525400000701", Owner: "lag0", VLAN: Standby{VLAN: 10}, Bridge: "br-vf", HasStandby: true}}
	if diff := cmp.Diff(want, vfs); diff != "" {
		t.Errorf("TeamedVFs (-want +got):\n%s", diff)
	}
	out, err := RewriteVF(doc, "0000:61:00.2", "0000:81:01.3")
	if err != nil {
		t.Fatal(err)
	}
	wantDoc := strings.Replace(string(doc), `<address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x2'/>`, `<address type='pci' domain='0x0000' bus='0x81' slot='0x01' function='0x3'/>`, 1)
	wantDoc = strings.Replace(wantDoc, `<vflag:vf pci="0000:61:00.2"`, `<vflag:vf pci="0000:81:01.3"`, 1)
	if diff := cmp.Diff(wantDoc, string(out)); diff != "" {
		t.Errorf("RewriteVF (-want +got):\n%s", diff)
	}
	vfs, err = TeamedVFs(out)
	if err != nil || len(vfs) != 1 || vfs[0].PCI != "0000:81:01.3" || vfs[0].Owner != "lag0" {
		t.Errorf("after the rewrite: %+v, %v (the claim must follow the VF)", vfs, err)
	}
	if _, err := RewriteVF(doc, "0000:61:00.7", "0000:81:01.3"); err == nil {
		t.Error("RewriteVF of an address no interface has: no error")
	}
}

// TestPlanToggle: turning migratable on for a VF vflag attached plain
// changes the persistent definition (the standby, then the VF again as its
// transient) and leaves the running domain's plain VF alone, adding no
// standby beside it (it would share the VF's MAC on the bridge).
func TestPlanToggle(t *testing.T) {
	doc := `<domain><name>vm1</name><metadata><vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1"><vflag:vf pci="0000:61:00.2" mac="52:54:00:00:00:01" owner="lag0"/></vflag:vflag></metadata>
<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><devices>
<interface type='hostdev' managed='yes'><mac address='52:54:00:00:00:01'/><source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x2'/></source></interface>
</devices></domain>`
	v, err := parseView(doc)
	if err != nil {
		t.Fatal(err)
	}
	n := norm{Attachment{Domain: "vm1", PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0", Migratable: true, Standby: Standby{Bridge: "br-vf", VLAN: 10}}}
	cfg, err := planDef(v, n, "persistent", true)
	if err != nil {
		t.Fatal(err)
	}
	var whats []string
	for _, o := range cfg.ops {
		whats = append(whats, o.what)
	}
	want := []string{
		"attach standby ua-vflag-525400000001 (virtio on br-vf, vlan 10)",
		"detach VF 0000:61:00.2",
		"attach VF 0000:61:00.2 (mac 52:54:00:00:00:01, group lag0) as the transient of ua-vflag-525400000001",
	}
	if diff := cmp.Diff(want, whats); diff != "" || cfg.claim == nil || cfg.claim.Standby != "ua-vflag-525400000001" || cfg.claimAfter {
		t.Errorf("persistent plan (-want +got):\n%s\nclaim %+v after %v", diff, cfg.claim, cfg.claimAfter)
	}
	live, err := planDef(v, n, "live", false)
	if err != nil {
		t.Fatal(err)
	}
	if !live.empty() || len(live.notes) != 1 || !strings.Contains(live.notes[0], "keeps its plain VF 0000:61:00.2 until its next start") {
		t.Errorf("live plan: ops %+v claim %+v notes %q", live.ops, live.claim, live.notes)
	}
	// And off again from the pair: the VF plain again, then the standby
	// goes, then the claim drops it.
	pairDoc := strings.Replace(doc, `owner="lag0"/>`, `owner="lag0" standby="ua-vflag-525400000001"/>`, 1)
	pairDoc = strings.Replace(pairDoc, `</source></interface>`, `</source><teaming type='transient' persistent='ua-vflag-525400000001'/></interface>
<interface type='bridge'><mac address='52:54:00:00:00:01'/><source bridge='br-vf'/><vlan><tag id='10'/></vlan><virtualport type='openvswitch'/><model type='virtio'/><teaming type='persistent'/><alias name='ua-vflag-525400000001'/></interface>`, 1)
	if v, err = parseView(pairDoc); err != nil {
		t.Fatal(err)
	}
	n.Migratable = false
	cfg, err = planDef(v, n, "persistent", true)
	if err != nil {
		t.Fatal(err)
	}
	whats = nil
	for _, o := range cfg.ops {
		whats = append(whats, o.what)
	}
	want = []string{"detach VF 0000:61:00.2", "attach VF 0000:61:00.2 (mac 52:54:00:00:00:01, group lag0)", "detach standby ua-vflag-525400000001"}
	if diff := cmp.Diff(want, whats); diff != "" || cfg.claim == nil || cfg.claim.Standby != "" || !cfg.claimAfter {
		t.Errorf("persistent plan off (-want +got):\n%s\nclaim %+v after %v", diff, cfg.claim, cfg.claimAfter)
	}
}

// TestHotplugPort: a VF on a PCIe root port takes a hotplug (QEMU can
// unplug it at a migration); one on the root complex (bus 0) or on a port
// with hotplug='off' does not.
func TestHotplugPort(t *testing.T) {
	doc := func(bus, hotplug string) string {
		return `<domain><os><type arch='x86_64' machine='q35'>hvm</type></os><devices>
<controller type='pci' index='0' model='pcie-root'/>
<controller type='pci' index='1' model='pcie-root-port'><model name='pcie-root-port'/><target chassis='1' port='0x10'` + hotplug + `/><address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x0'/></controller>
<interface type='hostdev' managed='yes'><mac address='52:54:00:00:00:01'/><source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x2'/></source>
<address type='pci' domain='0x0000' bus='` + bus + `' slot='0x00' function='0x0'/></interface></devices></domain>`
	}
	for _, tt := range []struct {
		bus, hotplug string
		want         bool
	}{
		{"0x01", "", true},
		{"0x01", " hotplug='off'", false},
		{"0x00", "", false},
	} {
		v, err := parseView(doc(tt.bus, tt.hotplug))
		if err != nil || len(v.ifaces) != 1 {
			t.Fatalf("parseView: %v %+v", err, v.ifaces)
		}
		if got := v.onHotplugPort(v.ifaces[0]); got != tt.want {
			t.Errorf("bus %s%s: onHotplugPort = %v, want %v", tt.bus, tt.hotplug, got, tt.want)
		}
	}
}

// TestPlanVFVLAN: a legacy group's pair whose VF's <vlan> is not the
// VLAN wanted (the config's vlan changed, or a pair made before it had
// one) gets the VF again with it in the persistent definition, the
// standby left as it is; the running domain keeps its VF until its next
// start.
func TestPlanVFVLAN(t *testing.T) {
	doc := `<domain><name>vm1</name><metadata><vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1"><vflag:vf pci="0000:61:00.2" mac="52:54:00:00:00:01" owner="igb0" standby="ua-vflag-525400000001"/></vflag:vflag></metadata>
<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><devices>
<interface type='hostdev' managed='yes'><mac address='52:54:00:00:00:01'/><source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x2'/></source><teaming type='transient' persistent='ua-vflag-525400000001'/></interface>
<interface type='bridge'><mac address='52:54:00:00:00:01'/><source bridge='br-host'/><vlan><tag id='42'/></vlan><virtualport type='openvswitch'/><model type='virtio'/><teaming type='persistent'/><alias name='ua-vflag-525400000001'/></interface>
</devices></domain>`
	v, err := parseView(doc)
	if err != nil {
		t.Fatal(err)
	}
	n := norm{Attachment{Domain: "vm1", PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "igb0", Migratable: true, Standby: Standby{Bridge: "br-host", VLAN: 42}, VFVLAN: 42}}
	cfg, err := planDef(v, n, "persistent", true)
	if err != nil {
		t.Fatal(err)
	}
	var whats []string
	for _, o := range cfg.ops {
		whats = append(whats, o.what)
	}
	want := []string{
		"detach VF 0000:61:00.2",
		"attach VF 0000:61:00.2 (mac 52:54:00:00:00:01, group igb0) as the transient of ua-vflag-525400000001",
	}
	if diff := cmp.Diff(want, whats); diff != "" || cfg.claim != nil {
		t.Fatalf("persistent plan (-want +got):\n%s\nclaim %+v", diff, cfg.claim)
	}
	if !strings.Contains(cfg.ops[1].xml, `<tag id="42"></tag>`) {
		t.Errorf("the VF again without its VLAN:\n%s", cfg.ops[1].xml)
	}
	live, err := planDef(v, n, "live", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(live.ops) != 0 || len(live.notes) != 1 || !strings.Contains(live.notes[0], "at the next start") {
		t.Errorf("live plan: ops %+v notes %q", live.ops, live.notes)
	}
	// With the VLAN in place, nothing to do.
	done := strings.Replace(doc, `</source><teaming type='transient'`, `</source><vlan><tag id='42'/></vlan><teaming type='transient'`, 1)
	if v, err = parseView(done); err != nil {
		t.Fatal(err)
	}
	if cfg, err = planDef(v, n, "persistent", true); err != nil || !cfg.empty() {
		t.Errorf("pair with its VLAN: plan %+v, %v", cfg, err)
	}
}
