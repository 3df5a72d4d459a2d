package libvirtx

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"libvirt.org/go/libvirtxml"

	"github.com/vflag/vflag/internal/pciaddr"
)

// MetadataNamespace and MetadataKey name vflag's element in a domain's
// <metadata>: <vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1">.
const (
	MetadataNamespace = "https://vflag.dev/xmlns/vflag/1"
	MetadataKey       = "vflag"
)

// parsePCI validates and normalizes a PCI address (pciaddr.Parse): lower
// case, and a missing domain means 0000 ("61:00.2" -> "0000:61:00.2").
func parsePCI(s string) (string, error) {
	a, err := pciaddr.Parse(s)
	return string(a), err
}

var macRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`) })

// parseMAC validates and normalizes (lower case) a unicast MAC address in
// colon form.
func parseMAC(s string) (string, error) {
	m := strings.ToLower(strings.TrimSpace(s))
	if !macRE().MatchString(m) {
		return "", fmt.Errorf("invalid MAC address %q: want six colon-separated hex octets, e.g. 52:54:00:12:34:56", s)
	}
	first, _ := strconv.ParseUint(m[:2], 16, 8)
	if first&1 != 0 {
		return "", fmt.Errorf("invalid MAC address %q: multicast (the first octet's low bit is set)", s)
	}
	if m == "00:00:00:00:00:00" {
		return "", fmt.Errorf("invalid MAC address %q: all zero", s)
	}
	return m, nil
}

// formatPCI is the address libvirt spells out in <address domain= bus=
// slot= function=>; "" when one is missing or out of range.
func formatPCI(p *libvirtxml.DomainAddressPCI) string {
	if p == nil || p.Domain == nil || p.Bus == nil || p.Slot == nil || p.Function == nil {
		return ""
	}
	a, err := pciaddr.FromParts(*p.Domain, *p.Bus, *p.Slot, *p.Function)
	if err != nil {
		return ""
	}
	return string(a)
}

// interfaceXML builds the device XML for one VF; with a standby alias, as
// the transient half of a teaming pair.
func interfaceXML(pci, mac, standbyAlias string, vlan int) (string, error) {
	dom, bus, slot, fn := pciaddr.Addr(pci).Parts()
	iface := libvirtxml.DomainInterface{
		Managed: "yes",
		MAC:     &libvirtxml.DomainInterfaceMAC{Address: mac},
		Source: &libvirtxml.DomainInterfaceSource{
			Hostdev: &libvirtxml.DomainInterfaceSourceHostdev{
				PCI: &libvirtxml.DomainHostdevSubsysPCISource{
					Address: &libvirtxml.DomainAddressPCI{Domain: &dom, Bus: &bus, Slot: &slot, Function: &fn},
				},
			},
		},
	}
	if standbyAlias != "" {
		iface.Teaming = &libvirtxml.DomainInterfaceTeaming{Type: "transient", Persistent: standbyAlias}
	}
	if vlan != 0 {
		iface.VLan = &libvirtxml.DomainInterfaceVLan{Tags: []libvirtxml.DomainInterfaceVLanTag{{ID: uint(vlan)}}}
	}
	return iface.Marshal()
}

// ifaceVLAN is the VLAN a VF's <vlan> gives it through the PF: 0 without
// one, its tag with one tag, -1 for anything else (a trunk, which libvirt
// refuses for a VF).
func ifaceVLAN(d libvirtxml.DomainInterface) int {
	switch {
	case d.VLan == nil:
		return 0
	case d.VLan.Trunk == "" && len(d.VLan.Tags) == 1:
		return int(d.VLan.Tags[0].ID)
	}
	return -1
}

// claim is one metadata entry: vflag attached the VF at PCI with MAC for
// the LAG group Owner.
type claim struct {
	PCI   string `xml:"pci,attr"`
	MAC   string `xml:"mac,attr"`
	Owner string `xml:"owner,attr"`
	// Standby is the alias of the pair's standby interface, which vflag
	// made too (migratable attachments); "" for a plain VF.
	Standby string `xml:"standby,attr,omitempty"`
}

// claimsElement is the metadata element as SetMetadata takes it: without a
// namespace, which libvirt adds (prefix MetadataKey).
type claimsElement struct {
	XMLName xml.Name `xml:"vflag"`
	VFs     []claim  `xml:"vf"`
}

func marshalClaims(cs []claim) (string, error) {
	sorted := append([]claim(nil), cs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].PCI < sorted[j].PCI })
	b, err := xml.Marshal(claimsElement{VFs: sorted})
	return string(b), err
}

// parseClaims reads vflag's entries from the inner XML of a domain's
// <metadata>; libvirt declares the namespace on each element in it.
func parseClaims(inner string) ([]claim, error) {
	var root struct {
		Vflag []struct {
			VFs []claim `xml:"https://vflag.dev/xmlns/vflag/1 vf"`
		} `xml:"https://vflag.dev/xmlns/vflag/1 vflag"`
	}
	if err := xml.Unmarshal([]byte("<metadata>"+inner+"</metadata>"), &root); err != nil {
		return nil, fmt.Errorf("parse vflag metadata: %w", err)
	}
	var out []claim
	for _, v := range root.Vflag {
		for _, c := range v.VFs {
			c.PCI = strings.ToLower(c.PCI)
			c.MAC = strings.ToLower(c.MAC)
			out = append(out, c)
		}
	}
	return out, nil
}

// iface is one <interface type='hostdev'> with a PCI source.
type iface struct {
	pci     string
	mac     string
	managed bool
	// team is the persistent alias of its <teaming type='transient'>: the
	// standby it pairs with; "" when it is no teaming interface.
	team string
	// guestBus is the guest PCI bus it sits on (-1: no address yet).
	guestBus int
	def      libvirtxml.DomainInterface
}

// view is what one domain definition (persistent or live) says about VFs.
type view struct {
	uuid     string
	ifaces   []iface
	hostdevs []string // PCI sources of <hostdev mode='subsystem' type='pci'>
	claims   []claim
	// standbys are the teaming standbys (<teaming type='persistent'/>).
	standbys []standby
	// macs are all its interfaces' MACs, for the pair's MAC check.
	macs    []ifaceMAC
	machine string
	ports   rootPorts
}

func parseView(doc string) (view, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		return view{}, fmt.Errorf("parse domain XML: %w", err)
	}
	v := view{uuid: d.UUID}
	var err error
	if v.machine, v.ports, err = scanPCI(doc); err != nil {
		return view{}, err
	}
	if d.Devices != nil {
		for _, i := range d.Devices.Interfaces {
			v.noteIface(i)
			if i.Source == nil || i.Source.Hostdev == nil || i.Source.Hostdev.PCI == nil {
				continue
			}
			pci := formatPCI(i.Source.Hostdev.PCI.Address)
			if pci == "" {
				continue
			}
			mac := ""
			if i.MAC != nil {
				mac = strings.ToLower(i.MAC.Address)
			}
			team := ""
			if i.Teaming != nil && i.Teaming.Type == "transient" {
				team = i.Teaming.Persistent
			}
			bus := -1
			if i.Address != nil && i.Address.PCI != nil && i.Address.PCI.Bus != nil {
				bus = int(*i.Address.PCI.Bus)
			}
			v.ifaces = append(v.ifaces, iface{pci: pci, mac: mac, managed: i.Managed == "yes", team: team, guestBus: bus, def: i})
		}
		for _, h := range d.Devices.Hostdevs {
			if h.SubsysPCI == nil || h.SubsysPCI.Source == nil {
				continue
			}
			if pci := formatPCI(h.SubsysPCI.Source.Address); pci != "" {
				v.hostdevs = append(v.hostdevs, pci)
			}
		}
	}
	if d.Metadata != nil {
		cs, err := parseClaims(d.Metadata.XML)
		if err != nil {
			return view{}, err
		}
		v.claims = cs
	}
	return v, nil
}

// onHotplugPort tells whether the interface sits on a PCIe port that takes
// a hotplug (a PCIe root port or switch downstream port without
// hotplug='off'); true when it has no guest address yet (libvirt gives it
// one when it attaches it).
func (v view) onHotplugPort(i iface) bool {
	if i.guestBus < 0 {
		return true
	}
	return v.ports.hotplug[i.guestBus]
}

// noteIface records an interface's MAC and, for a teaming standby, the
// standby.
func (v *view) noteIface(i libvirtxml.DomainInterface) {
	m := ifaceMAC{what: "an <interface>"}
	if i.MAC != nil {
		m.mac = strings.ToLower(i.MAC.Address)
	}
	if i.Alias != nil {
		m.alias = i.Alias.Name
	}
	if i.Source != nil {
		switch {
		case i.Source.Hostdev != nil && i.Source.Hostdev.PCI != nil:
			m.pci = formatPCI(i.Source.Hostdev.PCI.Address)
			m.what = "<interface type='hostdev'> of " + m.pci
		case i.Source.Bridge != nil:
			m.what = "<interface type='bridge'> on " + i.Source.Bridge.Bridge
		case i.Source.Network != nil:
			m.what = "<interface type='network'> of " + i.Source.Network.Network
		}
	}
	if m.alias != "" {
		m.what += " alias " + m.alias
	}
	if m.mac != "" {
		v.macs = append(v.macs, m)
	}
	if i.Teaming == nil || i.Teaming.Type != "persistent" || m.alias == "" {
		return
	}
	sb := standby{alias: m.alias, mac: m.mac, def: i, vlan: vlanOf(i.VLan)}
	if i.Target != nil {
		sb.target = i.Target.Dev
	}
	if i.Source != nil && i.Source.Bridge != nil {
		sb.bridge = i.Source.Bridge.Bridge
	}
	sb.ovs = i.VirtualPort != nil && i.VirtualPort.Params != nil && i.VirtualPort.Params.OpenVSwitch != nil
	sb.virtio = i.Model != nil && i.Model.Type == "virtio"
	v.standbys = append(v.standbys, sb)
}

// standbyFor is the standby with the alias.
func (v view) standbyFor(alias string) (standby, bool) {
	for _, s := range v.standbys {
		if alias != "" && s.alias == alias {
			return s, true
		}
	}
	return standby{}, false
}

func (v view) claimFor(pci string) (claim, bool) {
	for _, c := range v.claims {
		if c.PCI == pci {
			return c, true
		}
	}
	return claim{}, false
}

func (v view) ifacesFor(pci string) []iface {
	var out []iface
	for _, i := range v.ifaces {
		if i.pci == pci {
			out = append(out, i)
		}
	}
	return out
}

func (v view) hasHostdev(pci string) bool {
	for _, h := range v.hostdevs {
		if h == pci {
			return true
		}
	}
	return false
}

// owned: the definition holds a claim for the interface's PCI address and MAC.
func (v view) owned(i iface) bool {
	c, ok := v.claimFor(i.pci)
	return ok && c.MAC == i.mac
}

// ownsStandby: a claim names the standby's alias, with its MAC.
func (v view) ownsStandby(sb standby) bool {
	for _, c := range v.claims {
		if c.Standby != "" && c.Standby == sb.alias && c.MAC == sb.mac {
			return true
		}
	}
	return false
}

// withClaim returns the claims with c added (replacing an entry for its PCI).
func withClaim(cs []claim, c claim) []claim {
	out := withoutClaim(cs, c.PCI)
	return append(out, c)
}

func withoutClaim(cs []claim, pci string) []claim {
	var out []claim
	for _, x := range cs {
		if x.PCI != pci {
			out = append(out, x)
		}
	}
	return out
}
