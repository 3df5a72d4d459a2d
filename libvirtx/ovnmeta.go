package libvirtx

// A domain that takes a VF from a pool of a group with ovn names the
// logical switch port of each such interface in its own metadata, keyed by
// the interface's MAC:
//
//	<metadata>
//	  <vflag-ovn:ovn xmlns:vflag-ovn="https://vflag.dev/xmlns/vflag-ovn/1">
//	    <vflag-ovn:interface mac="52:54:00:30:00:01" ovn_port="vm3-eth0"/>
//	  </vflag-ovn:ovn>
//	</metadata>
//
// The element is the operator's (vflag only reads it): it has a namespace
// of its own because libvirt keeps one metadata element per namespace and
// vflag rewrites its own element (MetadataNamespace, the claims of what it
// attached) whole. The shell equivalent of writing it is
//
//	virsh metadata vm3 --uri https://vflag.dev/xmlns/vflag-ovn/1 --key vflag-ovn --config \
//	    --set '<ovn><interface mac="52:54:00:30:00:01" ovn_port="vm3-eth0"/></ovn>'

import (
	"encoding/xml"
	"fmt"
	"strings"
)

// OVNMetadataNamespace and OVNMetadataKey name the element of a domain's
// <metadata> that binds its pool interfaces to OVN logical switch ports.
const (
	OVNMetadataNamespace = "https://vflag.dev/xmlns/vflag-ovn/1"
	OVNMetadataKey       = "vflag-ovn"
)

// ovnMetaRoot is what ParseOVNMetadata reads: every element of the
// namespace directly in <metadata>, and each one's children.
type ovnMetaRoot struct {
	Elems []struct {
		XMLName  xml.Name
		Children []struct {
			XMLName xml.Name
			Attrs   []xml.Attr `xml:",any,attr"`
		} `xml:",any"`
	} `xml:",any"`
}

// ovnMetaPath is where the problems of the metadata point:
// /domain/metadata/vflag-ovn:ovn, and /interface[n] (1-based) under it.
const ovnMetaPath = "/domain/metadata/" + OVNMetadataKey + ":ovn"

// ParseOVNMetadata reads the OVN element of a domain's <metadata> (its
// inner XML, as libvirt writes it): each <interface mac=... ovn_port=...>
// into ports, keyed by the MAC (lower case). What it refuses goes into
// problems, each naming its place (an XPath into the domain XML) and the
// value: more than one element, an element that is not <ovn> or a child
// that is not <interface>, a missing or invalid MAC, a missing ovn_port,
// a MAC or an ovn_port given twice. Nothing in another namespace is
// looked at. The names of the ports are checked by the hook, which knows
// the config's rule (config.ValidOVNPort).
func ParseOVNMetadata(inner string) (ports map[string]string, problems []string) {
	var root ovnMetaRoot
	if err := xml.Unmarshal([]byte("<metadata>"+inner+"</metadata>"), &root); err != nil {
		if !strings.Contains(inner, OVNMetadataNamespace) {
			return nil, nil // not ours to judge
		}
		return nil, []string{fmt.Sprintf("/domain/metadata: %v", err)}
	}
	add := func(path, value, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("%s: %q %s", path, value, fmt.Sprintf(format, a...)))
	}
	seen := 0
	macAt := map[string]string{}
	portAt := map[string]string{}
	for _, e := range root.Elems {
		if e.XMLName.Space != OVNMetadataNamespace {
			continue
		}
		if seen++; seen > 1 {
			add(ovnMetaPath, e.XMLName.Local, "is a second element of %s: libvirt keeps one per namespace (put every interface in one <ovn>)", OVNMetadataNamespace)
			continue
		}
		if e.XMLName.Local != "ovn" {
			add("/domain/metadata/"+OVNMetadataKey+":"+e.XMLName.Local, e.XMLName.Local, "is not vflag's OVN element: want <ovn> in %s", OVNMetadataNamespace)
			continue
		}
		n := 0
		for _, c := range e.Children {
			if c.XMLName.Local != "interface" || (c.XMLName.Space != OVNMetadataNamespace && c.XMLName.Space != "") {
				add(ovnMetaPath+"/"+c.XMLName.Local, c.XMLName.Local, "is not an <interface mac=... ovn_port=...> entry")
				continue
			}
			n++
			p := fmt.Sprintf("%s/interface[%d]", ovnMetaPath, n)
			var mac, port string
			var hasMAC, hasPort bool
			for _, a := range c.Attrs {
				switch a.Name.Local {
				case "mac":
					mac, hasMAC = a.Value, true
				case "ovn_port":
					port, hasPort = a.Value, true
				}
			}
			m, err := parseMAC(mac)
			switch {
			case !hasMAC:
				add(p+"/@mac", "", "is missing: the MAC of the domain's <interface> the entry binds")
				continue
			case err != nil:
				add(p+"/@mac", mac, "is not a unicast MAC address (six colon-separated hex octets, e.g. 52:54:00:12:34:56)")
				continue
			case !hasPort || port == "":
				add(p+"/@ovn_port", port, "is missing: the logical switch port of the interface with MAC %s", m)
				continue
			}
			if prev, ok := macAt[m]; ok {
				add(p+"/@mac", m, "is already bound at %s: one interface, one logical port", prev)
				continue
			}
			if prev, ok := portAt[port]; ok {
				add(p+"/@ovn_port", port, "is already used at %s: one logical port, one interface", prev)
				continue
			}
			macAt[m], portAt[port] = p+"/@mac", p+"/@ovn_port"
			if ports == nil {
				ports = map[string]string{}
			}
			ports[m] = port
		}
	}
	return ports, problems
}
