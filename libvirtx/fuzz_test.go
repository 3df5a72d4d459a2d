package libvirtx

import (
	"bytes"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/pciaddr"
)

// checkPCI fails unless s is a PCI address in canonical form.
func checkPCI(t *testing.T, what, s string) {
	t.Helper()
	if a, err := pciaddr.Parse(s); err != nil || string(a) != s {
		t.Fatalf("%s: PCI address %q is not canonical (%q, %v)", what, s, a, err)
	}
}

// FuzzParseHookDomain: whatever the domain XML, the hook's reading of it
// does not panic; every device it finds has a canonical PCI address,
// every entry of its OVN metadata a canonical unicast MAC and a logical
// port of its own, and every task PlanHook makes of them has a unicast MAC
// in canonical form.
func FuzzParseHookDomain(f *testing.F) {
	for _, doc := range [][]byte{
		domainXML(),
		domainXML(hostdevIface, hostdevElem),
		domainXML(poolIface),
		domainXML(poolIfaceActual, usbHostdev, gpuHostdev),
		domainXML(poolIfaceStarted, hostdevIface),
		domainXML(strings.Replace(hostdevIface, "52:54:00:10:00:00", "01:00:5E:00:00:01", 1)),
		domainXML(strings.Replace(poolIfaceActual, "bus='0x61'", "bus='0x161'", 1)),
		[]byte(`<domain><devices><interface type='network'><source network='n'/><actual type='hostdev'><source><address domain='' bus='61' slot='0x1f' function='7'/></source></actual></interface></devices></domain>`),
		[]byte(`<domain><devices><hostdev mode='subsystem' type='pci'><source><address domain='0x10000' bus='0x00' slot='0x00' function='0x0'/></source></hostdev></devices></domain>`),
		[]byte(`<domain><name>x</name></domain>`),
		[]byte(`not xml`),
		[]byte(strings.Replace(string(domainXML(poolIfaceStarted)), "</metadata>", ovnMeta(`<vflag-ovn:interface mac="52:54:00:10:00:07" ovn_port="vm1-eth1"/><vflag-ovn:interface mac="52:54:00:10:00:07" ovn_port="b"/><vflag-ovn:x/>`)+"</metadata>", 1)),
		[]byte(`<domain><metadata><o:ovn xmlns:o="https://vflag.dev/xmlns/vflag-ovn/1"><o:interface mac="52:54:00:AA:00:01" ovn_port="a"/><interface mac="zz"/></o:ovn></metadata></domain>`),
	} {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := ParseHookDomain(doc)
		if err != nil {
			return
		}
		// The OVN metadata: each entry keyed by a canonical unicast MAC,
		// naming a logical port, no logical port twice.
		lsps := map[string]bool{}
		for mac, lsp := range d.OVNPorts {
			if m, err := parseMAC(mac); err != nil || m != mac || lsp == "" || lsps[lsp] {
				t.Fatalf("OVN metadata entry %q -> %q (%v; seen %v)", mac, lsp, err, lsps[lsp])
			}
			lsps[lsp] = true
		}
		for _, dev := range d.Devices {
			checkPCI(t, "ParseHookDomain", dev.PCI)
			switch dev.From {
			case FromHostdev:
				if dev.MAC != "" || dev.Network != "" {
					t.Fatalf("a <hostdev> with a MAC or network: %+v", dev)
				}
			case FromInterface, FromNetwork:
			default:
				t.Fatalf("device from %q: %+v", dev.From, dev)
			}
		}
		tasks, err := PlanHook(d, func(string) bool { return true })
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, task := range tasks {
			checkPCI(t, "PlanHook", task.Device.PCI)
			if seen[task.Device.PCI] {
				t.Fatalf("PlanHook: VF %s twice", task.Device.PCI)
			}
			seen[task.Device.PCI] = true
			if task.Device.From == FromHostdev {
				if task.MAC != "" {
					t.Fatalf("PlanHook: a MAC for a <hostdev>: %+v", task)
				}
				continue
			}
			hw, err := net.ParseMAC(task.MAC)
			if err != nil || len(hw) != 6 || hw.String() != task.MAC || hw[0]&1 != 0 || bytes.Equal(hw, make([]byte, 6)) {
				t.Fatalf("PlanHook: VF %s gets the MAC %q (%v)", task.Device.PCI, task.MAC, err)
			}
		}
	})
}

// FuzzParseView: whatever the domain XML, parseView does not panic; the
// interfaces and hostdevs it finds have canonical PCI addresses, and its
// claims (vflag's metadata) survive marshalClaims and parseClaims.
func FuzzParseView(f *testing.F) {
	for _, doc := range [][]byte{
		domainXML(),
		domainXML(hostdevIface, hostdevElem, gpuHostdev, usbHostdev),
		domainXML(poolIfaceActual),
		[]byte(`<domain><metadata><vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1"><vflag:vf pci="0000:61:00.2" mac="52:54:00:10:00:00" owner="lag&lt;0&gt;"/><vflag:vf pci="0000:61:00.2" mac="x" owner=""/></vflag:vflag><o:x xmlns:o="urn:o"><o:vf pci="1"/></o:x></metadata></domain>`),
		[]byte(`<domain><metadata><vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1"><vflag:vf pci="ÀB" mac="&#x9;Ω" owner="a&#xA;b"/></vflag:vflag></metadata></domain>`),
		[]byte(`<domain><metadata><vflag xmlns="https://vflag.dev/xmlns/vflag/1"><vf pci="0000:61:00.3"/></vflag></metadata></domain>`),
	} {
		f.Add(string(doc))
	}
	f.Fuzz(func(t *testing.T, doc string) {
		v, err := parseView(doc)
		if err != nil {
			return
		}
		for _, i := range v.ifaces {
			checkPCI(t, "parseView interface", i.pci)
		}
		for _, h := range v.hostdevs {
			checkPCI(t, "parseView hostdev", h)
		}
		content, err := marshalClaims(v.claims)
		if err != nil {
			t.Fatalf("marshalClaims(%+v): %v", v.claims, err)
		}
		stored := strings.Replace(content, "<vflag>", `<vflag xmlns="`+MetadataNamespace+`">`, 1)
		back, err := parseClaims(stored)
		if err != nil {
			t.Fatalf("parseClaims(%q) of marshalClaims(%+v): %v", stored, v.claims, err)
		}
		cmpClaim := func(a, b claim) int {
			return strings.Compare(a.PCI+"\x00"+a.MAC+"\x00"+a.Owner, b.PCI+"\x00"+b.MAC+"\x00"+b.Owner)
		}
		want := slices.SortedFunc(slices.Values(v.claims), cmpClaim)
		got := slices.SortedFunc(slices.Values(back), cmpClaim)
		if !slices.Equal(want, got) {
			t.Fatalf("claims changed in a round trip through %q:\n%+v\n%+v", stored, want, got)
		}
	})
}

// FuzzParseNetworkHook: whatever the network hook's standard input,
// ParseNetworkHook does not panic, and what it returns has a network name
// and canonical PCI addresses.
func FuzzParseNetworkHook(f *testing.F) {
	// Short versions of the captured testdata/network-hook: with
	// port-created-begin.xml (1.6 KB) as a seed, Go 1.26's fuzz worker
	// stalls after a few inputs, outside the fuzz function.
	for _, s := range []string{
		`<hookData><network><name>vflag-lag0</name><metadata><vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1" owner="lag0"><vflag:portgroup name="a" vlan="100"/><vflag:portgroup name="t" vlan="5" vlan_mode="native-untagged" trunks="6,7"/></vflag:vflag></metadata><forward mode='hostdev' managed='yes'><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x2'/></forward><portgroup name='a' default='yes'/><portgroup name='t'><vlan><tag id='200'/></vlan></portgroup></network></hookData>`,
		`<hookData><network connections='1'><name>n</name></network><networkport><uuid>u</uuid><owner><name>vm1</name></owner><group>a</group><mac address='52:54:00:00:00:01'/><vlan><tag id='100'/></vlan><plug type='hostdev-pci' managed='yes'><address domain='0x0000' bus='0x61' slot='0x00' function='0x2'/></plug></networkport></hookData>`,
		`<hookData><network><name>n</name><forward mode='hostdev'><address type='pci' domain='0x10000' bus='0x00' slot='0x00' function='0x0'/></forward></network></hookData>`,
		`<hookData><network><name>n</name><portgroup name='p'><vlan trunk='yes'><tag id='4294967295' nativeMode='x'/></vlan></portgroup></network><networkport><plug type='hostdev-pci'><address domain='0' bus='1'/></plug></networkport></hookData>`,
		`<hookData><network><name>n</name><metadata><v:vflag xmlns:v="https://vflag.dev/xmlns/vflag/1" owner="o"><v:portgroup name="p" trunks="1,x"/></v:vflag></metadata></network></hookData>`,
		`not xml`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		h, err := ParseNetworkHook(doc)
		if err != nil {
			return
		}
		if h.Network.Name == "" {
			t.Fatal("parsed hook data without a network name")
		}
		for _, p := range h.Network.PCIs {
			checkPCI(t, "pool", p)
		}
		if h.Port != nil && h.Port.PCI != "" {
			checkPCI(t, "port", h.Port.PCI)
		}
	})
}

// FuzzRewriteVF: whatever the incoming domain XML, each teaming VF
// TeamedVFs finds can be moved by RewriteVF, and the result reads back
// with that VF at its new address, its MAC and standby kept, and as many
// teaming VFs as before.
func FuzzRewriteVF(f *testing.F) {
	if doc, err := os.ReadFile("testdata/teaming/incoming.xml"); err == nil {
		f.Add(string(doc))
	}
	f.Add(`<domain><devices><interface type='hostdev'><mac address='52:54:00:00:00:01'/><source><address type="pci" bus = "0x61" slot='0' function='2'/></source><teaming type='transient' persistent='ua-x'/></interface></devices></domain>`)
	f.Fuzz(func(t *testing.T, doc string) {
		vfs, err := TeamedVFs([]byte(doc))
		if err != nil {
			return
		}
		const to = "0000:81:01.3"
		for _, v := range vfs {
			if v.PCI == to {
				continue
			}
			out, err := RewriteVF([]byte(doc), v.PCI, to)
			if err != nil {
				t.Fatalf("RewriteVF of %s: %v", v.PCI, err)
			}
			back, err := TeamedVFs(out)
			if err != nil {
				t.Fatalf("the rewritten XML does not parse: %v\n%s", err, out)
			}
			if len(back) != len(vfs) {
				t.Fatalf("%d teaming VFs before, %d after\n%s", len(vfs), len(back), out)
			}
			found := false
			for _, b := range back {
				found = found || b.PCI == to && b.MAC == v.MAC && b.Standby == v.Standby
			}
			if !found {
				t.Fatalf("no teaming VF at %s with MAC %s after the rewrite\n%s", to, v.MAC, out)
			}
		}
	})
}
