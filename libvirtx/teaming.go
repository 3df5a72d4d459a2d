package libvirtx

// Teaming (libvirt's "Teaming a virtio/hostdev NIC pair", formatdomain):
// a migratable attachment is a pair of interfaces with one MAC,
//
//	<interface type='bridge'>                    the standby: persistent, virtio
//	  <mac address='52:54:00:00:00:01'/>
//	  <source bridge='br-vf'/>
//	  <vlan><tag id='10'/></vlan>
//	  <virtualport type='openvswitch'/>
//	  <model type='virtio'/>
//	  <teaming type='persistent'/>
//	  <alias name='ua-vflag-525400000001'/>
//	</interface>
//	<interface type='hostdev' managed='yes'>     the VF: transient
//	  <mac address='52:54:00:00:00:01'/>
//	  <source><address type='pci' .../></source>
//	  <teaming type='transient' persistent='ua-vflag-525400000001'/>
//	</interface>
//
// In a legacy group (no representor) the standby is a port of the host's
// bridge (standby_bridge) and the VF's interface has the VLAN's <vlan> too:
// libvirt sets it on the VF through the PF, so the VF's frames leave on
// the uplink with the tag the standby's port gives its frames.
//
// QEMU gets virtio-net-pci failover=on and vfio-pci failover_pair_id; the
// guest's net_failover pairs the two by MAC and sends through the VF while
// it is plugged. At a migration QEMU unplugs the VF (traffic goes through
// the standby, a port of the same bridge with the same VLAN), and the
// destination plugs its own VF once the guest has negotiated the standby
// feature. libvirt >= 6.1, QEMU >= 4.2, a q35 machine (the VF is a PCIe
// device on a hotpluggable root port).

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/vflag/vflag/internal/pciaddr"
)

// Minimum versions for teaming (libvirt's virDomainNetTeaming, QEMU's
// virtio-net failover), as libvirt's version numbers: major*1e6+minor*1e3+micro.
const (
	MinLibvirtTeaming = 6001000
	MinQEMUTeaming    = 4002000
)

// Standby is the standby half of a migratable attachment: a port of the
// group's OVS bridge with the VF's VLAN columns.
type Standby struct {
	Bridge string
	// VLAN, VLANMode and Trunks are as the representor's port has them
	// (config.VFConfig's vlan, vlan_mode, trunks).
	VLAN     int
	VLANMode string
	Trunks   []int
}

// StandbyAlias is the user alias of the standby of the pair with this MAC:
// "ua-vflag-" and the MAC's hex digits. It follows the MAC, which the pair
// keeps wherever it goes (a migration rewrites the VF's address, not it).
func StandbyAlias(mac string) string {
	return "ua-vflag-" + strings.ReplaceAll(strings.ToLower(mac), ":", "")
}

// vlanXML is the standby's <vlan> for the VF's VLAN columns, as libvirt's
// openvswitch driver turns it into the port's columns
// (virNetDevOpenvswitchConstructVlans): one tag is tag=; trunk='yes' is
// trunks= (every tag listed); a tag with nativeMode sets vlan_mode
// native-* with that tag. An access port without a VLAN gets tag 0
// (untagged frames only, as vlan_mode access without a tag does for the
// representor); a trunk of every VLAN gets no <vlan> (OVS's default port).
func vlanXML(s Standby) *libvirtxml.DomainInterfaceVLan {
	switch s.VLANMode {
	case "trunk":
		if len(s.Trunks) == 0 {
			return nil
		}
		v := &libvirtxml.DomainInterfaceVLan{Trunk: "yes"}
		for _, t := range s.Trunks {
			v.Tags = append(v.Tags, libvirtxml.DomainInterfaceVLanTag{ID: uint(t)})
		}
		return v
	case "native-tagged", "native-untagged":
		v := &libvirtxml.DomainInterfaceVLan{Trunk: "yes", Tags: []libvirtxml.DomainInterfaceVLanTag{{ID: uint(s.VLAN), NativeMode: strings.TrimPrefix(s.VLANMode, "native-")}}}
		for _, t := range s.Trunks {
			if t != s.VLAN {
				v.Tags = append(v.Tags, libvirtxml.DomainInterfaceVLanTag{ID: uint(t)})
			}
		}
		return v
	case "", "access":
		if s.VLAN == 0 && s.VLANMode == "" {
			return nil // OVS's default: a trunk of every VLAN, as the representor's port
		}
		return &libvirtxml.DomainInterfaceVLan{Tags: []libvirtxml.DomainInterfaceVLanTag{{ID: uint(s.VLAN)}}}
	}
	return nil
}

// standbyDef is the standby's device definition.
func standbyDef(mac string, s Standby) libvirtxml.DomainInterface {
	return libvirtxml.DomainInterface{
		MAC:         &libvirtxml.DomainInterfaceMAC{Address: mac},
		Source:      &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: s.Bridge}},
		VLan:        vlanXML(s),
		VirtualPort: &libvirtxml.DomainInterfaceVirtualPort{Params: &libvirtxml.DomainInterfaceVirtualPortParams{OpenVSwitch: &libvirtxml.DomainInterfaceVirtualPortParamsOpenVSwitch{}}},
		Model:       &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		Teaming:     &libvirtxml.DomainInterfaceTeaming{Type: "persistent"},
		Alias:       &libvirtxml.DomainAlias{Name: StandbyAlias(mac)},
	}
}

// StandbyXML is the standby's device XML (what `virsh attach-device
// --config` would take).
func StandbyXML(mac string, s Standby) (string, error) {
	d := standbyDef(mac, s)
	return d.Marshal()
}

// TeamedVFXML is the VF's device XML as the transient half of the pair
// whose standby has alias: <teaming type='transient' persistent=alias/>,
// and with vlan (a legacy group's VF, which libvirt sets through the PF)
// <vlan><tag id=vlan/></vlan>.
func TeamedVFXML(pci, mac, alias string, vlan int) (string, error) {
	return interfaceXML(pci, mac, alias, vlan)
}

// standby is a bridge interface of a domain definition that is a teaming
// standby (<teaming type='persistent'/>) with a user alias.
type standby struct {
	alias, mac, bridge string
	target             string // <target dev=>: its tap, the OVS port
	ovs                bool   // virtualport type='openvswitch'
	virtio             bool
	vlan               Standby // its VLAN columns as its <vlan> gives them
	def                libvirtxml.DomainInterface
}

// vlanOf reads a standby's <vlan> back into VLAN columns (vlanXML's inverse).
func vlanOf(v *libvirtxml.DomainInterfaceVLan) Standby {
	var s Standby
	if v == nil || len(v.Tags) == 0 {
		return s
	}
	if v.Trunk != "yes" && len(v.Tags) == 1 {
		s.VLAN = int(v.Tags[0].ID)
		if s.VLAN == 0 {
			s.VLANMode = "access"
		}
		return s
	}
	s.VLANMode = "trunk"
	for _, t := range v.Tags {
		if t.NativeMode != "" {
			s.VLANMode, s.VLAN = "native-"+t.NativeMode, int(t.ID)
			continue
		}
		s.Trunks = append(s.Trunks, int(t.ID))
	}
	return s
}

// sameVLAN compares the VLAN columns a standby has with those wanted, as
// vlanXML spells them.
func sameVLAN(have, want Standby) bool {
	w := vlanOf(vlanXML(want))
	a, b := slices.Clone(have.Trunks), slices.Clone(w.Trunks)
	sort.Ints(a)
	sort.Ints(b)
	return have.VLAN == w.VLAN && have.VLANMode == w.VLANMode && slices.Equal(a, b)
}

// PortColumns are the VLAN columns libvirt gives the OVS port of a
// standby with the VLAN s (virNetDevOpenvswitchConstructVlans): one tag is
// tag=; trunk='yes' is trunks= with every tag, the native one too; a
// native tag sets vlan_mode and tag. Trunks sorted.
func PortColumns(s Standby) (tag int, mode string, trunks []int) {
	v := vlanXML(s)
	if v == nil {
		return 0, "", nil
	}
	if v.Trunk != "yes" {
		return int(v.Tags[0].ID), "", nil
	}
	for _, t := range v.Tags {
		if t.NativeMode != "" {
			mode, tag = "native-"+t.NativeMode, int(t.ID)
		}
		trunks = append(trunks, int(t.ID))
	}
	sort.Ints(trunks)
	return tag, mode, trunks
}

// SameVLAN tells whether a standby's VLAN (as read back from its <vlan>)
// is the one wanted.
func SameVLAN(have, want Standby) bool { return sameVLAN(have, want) }

// StandbyVLAN reads the VLAN columns a standby's <vlan> gives its OVS port
// (tag, vlan_mode, trunks), for the hook and status.
func StandbyVLAN(v *libvirtxml.DomainInterfaceVLan) Standby { return vlanOf(v) }

// pciRootPorts reads a definition's PCIe root ports (and switch downstream
// ports) and which of them are free: no device sits on the bus they open.
// A port with <target hotplug='off'/> takes no hotplug and is not counted.
type rootPorts struct {
	free, total int
	// hotplug maps the bus index each PCIe port opens to whether it takes
	// a hotplug.
	hotplug map[int]bool
}

// scanPCI reads, from a domain document, its machine type, the PCIe
// ports a device can be hotplugged into, and the buses guest devices sit
// on (the <address type='pci'> that are not a hostdev's <source>).
func scanPCI(doc string) (machine string, ports rootPorts, err error) {
	d := xml.NewDecoder(strings.NewReader(doc))
	type port struct {
		index   int
		hotplug bool
	}
	var (
		stack  []string
		ctrl   *port
		all    []port
		usedOn = map[int]bool{}
	)
	attr := func(se xml.StartElement, name string) string {
		for _, a := range se.Attr {
			if a.Name.Space == "" && a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", rootPorts{}, fmt.Errorf("parse domain XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			name := t.Name.Local
			if t.Name.Space != "" {
				name = t.Name.Space + ":" + name
			}
			switch {
			case name == "type" && parent == "os":
				machine = attr(t, "machine")
			case name == "controller" && attr(t, "type") == "pci" && (attr(t, "model") == "pcie-root-port" || attr(t, "model") == "pcie-switch-downstream-port"):
				idx, err := strconv.Atoi(attr(t, "index"))
				if err == nil {
					ctrl = &port{index: idx, hotplug: true}
				}
			case name == "target" && parent == "controller" && ctrl != nil:
				if attr(t, "hotplug") == "off" {
					ctrl.hotplug = false
				}
			case name == "address" && parent != "source" && attr(t, "type") == "pci":
				if b, err := strconv.ParseUint(strings.TrimPrefix(attr(t, "bus"), "0x"), 16, 16); err == nil {
					usedOn[int(b)] = true
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			if len(stack) > 0 {
				if stack[len(stack)-1] == "controller" && ctrl != nil {
					all = append(all, *ctrl)
					ctrl = nil
				}
				stack = stack[:len(stack)-1]
			}
		}
	}
	ports.hotplug = map[int]bool{}
	for _, p := range all {
		ports.hotplug[p.index] = p.hotplug
		if !p.hotplug {
			continue
		}
		ports.total++
		if !usedOn[p.index] {
			ports.free++
		}
	}
	return machine, ports, nil
}

// IsQ35 tells whether a machine type is q35 ("q35", "pc-q35-7.2").
func IsQ35(machine string) bool {
	return machine == "q35" || strings.HasPrefix(machine, "pc-q35-")
}

// versionString spells a libvirt version number: 9000000 is "9.0.0".
func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

// Problem is one reason a migratable attachment cannot be made, for the
// attachment's field Field ("domain", "migratable", "mac", "live").
type Problem struct {
	Field string
	Msg   string
}

// teamingProblems are the refusals of a migratable attachment that the
// domain's definitions and libvirt's versions give (libVer, qemuVer: 0
// unknown): the machine, the versions, the MAC, the live root ports.
// newLive is how many PCIe devices the plan hotplugs into the running domain.
func teamingProblems(s snapshot, n norm, libVer, qemuVer uint32, newLive int) []Problem {
	var out []Problem
	if libVer != 0 && libVer < MinLibvirtTeaming {
		out = append(out, Problem{"migratable", fmt.Sprintf("needs libvirt 6.1 or later for teaming, the daemon is %s", versionString(libVer))})
	}
	if qemuVer != 0 && qemuVer < MinQEMUTeaming {
		out = append(out, Problem{"migratable", fmt.Sprintf("needs QEMU 4.2 or later for virtio-net failover, the hypervisor is %s", versionString(qemuVer))})
	}
	if !IsQ35(s.cfg.machine) {
		out = append(out, Problem{"domain", fmt.Sprintf("has machine type %q: a migratable VF needs a q35 machine (QEMU unplugs it at a migration through PCIe hotplug); redefine the domain with machine q35 or drop migratable", s.cfg.machine)})
	}
	check := func(v view, where string) {
		for _, o := range v.macs {
			if o.mac != n.MAC || o.pci != "" && o.pci == n.PCI || o.alias == StandbyAlias(n.MAC) {
				continue
			}
			if c, ok := v.claimFor(o.pci); o.pci != "" && ok && c.MAC == n.MAC {
				continue // vflag's VF of this pair (at another address before a rewrite)
			}
			out = append(out, Problem{"mac", fmt.Sprintf("is the MAC of another interface of the %s definition of %s (%s): the guest pairs the VF and its virtio standby by MAC, so the pair's MAC must be theirs alone; give the attachment another MAC", where, n.Domain, o.what)})
			return
		}
	}
	check(s.cfg, "persistent")
	if s.live != nil && n.Live {
		check(*s.live, "live")
		if newLive > 0 && IsQ35(s.live.machine) && s.live.ports.free < newLive {
			out = append(out, Problem{"live", fmt.Sprintf("the running domain %s has %d free hotpluggable PCIe root port(s), the pair needs %d: add <controller type='pci' model='pcie-root-port'/> to the domain and restart it, or set live: false (the pair then comes with its next start)", n.Domain, s.live.ports.free, newLive)})
		}
	}
	return out
}

// ifaceMAC is one interface of a definition with its MAC, for the MAC check.
type ifaceMAC struct {
	mac   string
	pci   string // a hostdev interface's VF
	alias string // a user alias
	what  string // "<interface type='network'>", for the message
}

// addressPCI reads an <address type='pci'> start element as libvirt (and
// libvirtxml) read it: each attribute a number in C's notation (0x61
// hex, 010 octal, 16 decimal), an absent one 0.
func addressPCI(se xml.StartElement) (string, bool) {
	var n [4]uint
	for i, name := range [4]string{"domain", "bus", "slot", "function"} {
		for _, a := range se.Attr {
			if a.Name.Space != "" || a.Name.Local != name {
				continue
			}
			v, err := strconv.ParseUint(a.Value, 0, 32)
			if err != nil {
				return "", false
			}
			n[i] = uint(v)
		}
	}
	a, err := pciaddr.FromParts(n[0], n[1], n[2], n[3])
	if err != nil {
		return "", false
	}
	return string(a), true
}

// spliceAttrs returns the start tag tag with attribute values replaced
// (name -> value; an attribute it lacks is added before the tag's end),
// every other byte kept.
func spliceAttrs(tag []byte, set map[string]string) []byte {
	out := slices.Clone(tag)
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		val := []byte(escapeAttr(set[name]))
		re := regexp.MustCompile(`(\s` + regexp.QuoteMeta(name) + `\s*=\s*)('[^']*'|"[^"]*")`)
		if loc := re.FindSubmatchIndex(out); loc != nil {
			quote := out[loc[4]]
			repl := append(append([]byte{quote}, val...), quote)
			out = append(append(slices.Clone(out[:loc[4]]), repl...), out[loc[5]:]...)
			continue
		}
		end := len(out) - 1 // the '>'
		if end > 0 && out[end-1] == '/' {
			end--
		}
		ins := []byte(" " + name + "='" + strings.ReplaceAll(string(val), "'", "&apos;") + "'")
		out = append(append(slices.Clone(out[:end]), ins...), out[end:]...)
	}
	return out
}

func escapeAttr(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// TeamedVF is a VF a domain XML holds as the transient half of a teaming
// pair, as the qemu hook reads it at "migrate begin".
type TeamedVF struct {
	PCI, MAC string
	// Standby is the alias its <teaming persistent=> names.
	Standby string
	// Owner is the group vflag's claim for its address names, "" when
	// vflag has no claim for it (not vflag's VF).
	Owner string
	// VLAN is what the standby's <vlan> makes of its OVS port, Bridge its
	// <source bridge=>; HasStandby tells that the document has that standby.
	VLAN       Standby
	Bridge     string
	HasStandby bool
}

// TeamedVFs lists the transient teaming VFs of <interface type='hostdev'>
// of a domain XML (a pool's <interface type='network'> has no address
// until libvirt picks one, on each host: never listed).
func TeamedVFs(doc []byte) ([]TeamedVF, error) {
	v, err := parseView(string(doc))
	if err != nil {
		return nil, err
	}
	var out []TeamedVF
	for _, i := range v.ifaces {
		if i.team == "" {
			continue
		}
		t := TeamedVF{PCI: i.pci, MAC: i.mac, Standby: i.team}
		if c, ok := v.claimFor(i.pci); ok && c.MAC == i.mac {
			t.Owner = c.Owner
		}
		if sb, ok := v.standbyFor(i.team); ok {
			t.VLAN, t.Bridge, t.HasStandby = sb.vlan, sb.bridge, true
		}
		out = append(out, t)
	}
	return out, nil
}

// RewriteVF returns the domain XML doc with the VF at from replaced by the
// VF at to: the <address> in the <source> of the <interface
// type='hostdev'> that has from, and the pci attribute of vflag's claim
// for from. Every other byte of doc is kept (libvirt uses the document the
// hook prints as it is). It fails when no interface has from.
func RewriteVF(doc []byte, from, to string) ([]byte, error) {
	from, err := parsePCI(from)
	if err != nil {
		return nil, err
	}
	if to, err = parsePCI(to); err != nil {
		return nil, err
	}
	dom, bus, slot, fn := pciaddr.Addr(to).Parts()
	addrAttrs := map[string]string{"domain": fmt.Sprintf("0x%04x", dom), "bus": fmt.Sprintf("0x%02x", bus), "slot": fmt.Sprintf("0x%02x", slot), "function": fmt.Sprintf("0x%x", fn)}
	type span struct {
		start, end int64
		set        map[string]string
	}
	var spans []span
	d := xml.NewDecoder(bytes.NewReader(doc))
	var stack []xml.StartElement
	attr := func(se xml.StartElement, name string) string {
		for _, a := range se.Attr {
			if a.Name.Space == "" && a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	prefixes := map[string]bool{} // prefixes bound to vflag's namespace
	found := false
	for {
		start := d.InputOffset()
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse domain XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" && a.Value == MetadataNamespace {
					prefixes[a.Name.Local] = true
				}
			}
			n := len(stack)
			switch {
			case t.Name.Local == "address" && t.Name.Space == "" && n >= 2 &&
				stack[n-1].Name.Local == "source" && stack[n-2].Name.Local == "interface" && attr(stack[n-2], "type") == "hostdev":
				if a, ok := addressPCI(t); ok && a == from {
					spans = append(spans, span{start, d.InputOffset(), addrAttrs})
					found = true
				}
			case t.Name.Local == "vf" && prefixes[t.Name.Space] && strings.EqualFold(attr(t, "pci"), from):
				spans = append(spans, span{start, d.InputOffset(), map[string]string{"pci": to}})
			}
			stack = append(stack, t)
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("no <interface type='hostdev'> of %s in the domain XML", from)
	}
	out := append([]byte{}, doc...)
	for i := len(spans) - 1; i >= 0; i-- {
		s := spans[i]
		tag := spliceAttrs(out[s.start:s.end], s.set)
		out = append(append(append([]byte{}, out[:s.start]...), tag...), out[s.end:]...)
	}
	return out, nil
}
