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

// interfaceXML builds the device XML for one VF.
func interfaceXML(pci, mac string) (string, error) {
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
	return iface.Marshal()
}

// claim is one metadata entry: vflag attached the VF at PCI with MAC for
// the LAG group Owner.
type claim struct {
	PCI   string `xml:"pci,attr"`
	MAC   string `xml:"mac,attr"`
	Owner string `xml:"owner,attr"`
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
	def     libvirtxml.DomainInterface
}

// view is what one domain definition (persistent or live) says about VFs.
type view struct {
	uuid     string
	ifaces   []iface
	hostdevs []string // PCI sources of <hostdev mode='subsystem' type='pci'>
	claims   []claim
}

func parseView(doc string) (view, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		return view{}, fmt.Errorf("parse domain XML: %w", err)
	}
	v := view{uuid: d.UUID}
	if d.Devices != nil {
		for _, i := range d.Devices.Interfaces {
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
			v.ifaces = append(v.ifaces, iface{pci: pci, mac: mac, managed: i.Managed == "yes", def: i})
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
