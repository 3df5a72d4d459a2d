package libvirtx

// VF pools: libvirt networks with <forward mode='hostdev'>. See doc.go,
// "VF pools", for what libvirt 9.0 allows and why EnsureNetwork does what
// it does.

import (
	"encoding/xml"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/vflag/vflag/internal/pciaddr"
)

// NetworkSpec is one VF pool: a libvirt hostdev network.
type NetworkSpec struct {
	Name string
	// PCIs are the pool's VF PCI addresses, "0000:61:00.2".
	PCIs       []string
	Portgroups []NetworkPortgroup
	// Owner is the vflag group name, stored in vflag's network metadata.
	Owner string
	// Replaces names vflag's own networks that the same run removes (a
	// pool renamed, a group dropped): their pools do not count as having
	// a VF of this one (TakenVFs).
	Replaces []string
}

// NetworkPortgroup is one <portgroup> of a VF pool.
type NetworkPortgroup struct {
	Name    string
	Default bool
	// VLAN is the access or native VLAN (1-4094); 0 is none.
	VLAN int
	// VLANMode is "", "access", "trunk", "native-untagged" or
	// "native-tagged" (OVS's vlan_mode); "" with a VLAN means access.
	VLANMode string
	// Trunks are the VLANs of trunk and native-* modes.
	Trunks []int
	// LibvirtVLAN puts the VLAN into libvirt's own <vlan> of the portgroup:
	// libvirt then sets it on the VF through the PF when a domain starts
	// (legacy eswitch). False keeps it out of libvirt's <vlan> (switchdev:
	// mlx5 refuses a VF VLAN set through the PF); vflag's metadata records
	// it either way.
	LibvirtVLAN bool
}

// NetworkState is what libvirt says about one network.
type NetworkState struct {
	Name       string
	Exists     bool
	Active     bool
	Autostart  bool
	Persistent bool
	// Owned tells that vflag's metadata is present (in the definition in
	// effect or in the persistent one).
	Owned bool
	Owner string
	// PCIs are the pool addresses of the definition in effect (the live
	// one when the network is active), sorted.
	PCIs []string
	// ConfigPCIs are the pool addresses of the persistent definition.
	ConfigPCIs []string
	// Portgroups of the definition in effect: VLAN, VLANMode and Trunks
	// from vflag's metadata when it names the portgroup, else from
	// libvirt's <vlan>; Default and LibvirtVLAN from libvirt's portgroup.
	Portgroups []NetworkPortgroup
	// Ports are the allocated network ports (active networks only),
	// sorted by PCI address.
	Ports []NetworkPort
}

// Portgroup returns the portgroup a port with <group>name</group> gets:
// the one of that name or, for "", the default one (libvirt's rule,
// virPortGroupFindByName: a port without a group is in the default
// portgroup, and its <group> stays empty). false when there is none.
func (s NetworkState) Portgroup(name string) (NetworkPortgroup, bool) {
	for _, pg := range s.Portgroups {
		if (name != "" && pg.Name == name) || (name == "" && pg.Default) {
			return pg, true
		}
	}
	return NetworkPortgroup{}, false
}

// NetworkPort is one allocated port of a network: a VF given to a domain.
type NetworkPort struct {
	UUID string
	// Domain is the port owner's name.
	Domain string
	// PCI is the VF the port plugs (<plug type='hostdev-pci'>).
	PCI       string
	Portgroup string
	MAC       string
}

var vlanModes = map[string]bool{"": true, "access": true, "trunk": true, "native-untagged": true, "native-tagged": true}

func validVLAN(v int) bool { return v >= 1 && v <= 4094 }

// normalizeNetwork validates a spec and returns it normalized: PCI
// addresses and portgroups sorted, trunks sorted and without duplicates.
func normalizeNetwork(s NetworkSpec) (NetworkSpec, error) {
	n := NetworkSpec{Name: s.Name, Owner: s.Owner, Replaces: s.Replaces}
	if strings.TrimSpace(s.Name) == "" || s.Name != strings.TrimSpace(s.Name) || strings.Contains(s.Name, "/") {
		return n, fmt.Errorf("network Name %q: want a non-empty name without blanks at its ends and without '/'", s.Name)
	}
	if strings.TrimSpace(s.Owner) == "" {
		return n, fmt.Errorf("network %s: empty Owner (vflag group name)", s.Name)
	}
	if len(s.PCIs) == 0 {
		return n, fmt.Errorf("network %s: PCIs is empty: a VF pool needs at least one VF", s.Name)
	}
	seen := map[string]bool{}
	for i, p := range s.PCIs {
		a, err := parsePCI(p)
		if err != nil {
			return n, fmt.Errorf("network %s: PCIs[%d]: %w", s.Name, i, err)
		}
		if seen[a] {
			return n, fmt.Errorf("network %s: PCIs[%d]: %s listed twice", s.Name, i, a)
		}
		seen[a] = true
		n.PCIs = append(n.PCIs, a)
	}
	sort.Strings(n.PCIs)
	names := map[string]bool{}
	defaults := 0
	for i, pg := range s.Portgroups {
		where := fmt.Sprintf("network %s: Portgroups[%d] (%q)", s.Name, i, pg.Name)
		if strings.TrimSpace(pg.Name) == "" {
			return n, fmt.Errorf("network %s: Portgroups[%d]: empty Name", s.Name, i)
		}
		if names[pg.Name] {
			return n, fmt.Errorf("%s: Name listed twice", where)
		}
		names[pg.Name] = true
		if pg.Default {
			defaults++
			if defaults > 1 {
				return n, fmt.Errorf("%s: Default: a second default portgroup (libvirt allows one)", where)
			}
		}
		if !vlanModes[pg.VLANMode] {
			return n, fmt.Errorf("%s: VLANMode %q: want \"\", access, trunk, native-untagged or native-tagged", where, pg.VLANMode)
		}
		if pg.VLAN != 0 && !validVLAN(pg.VLAN) {
			return n, fmt.Errorf("%s: VLAN %d: want 1-4094 (0 for none)", where, pg.VLAN)
		}
		var trunks []int
		tseen := map[int]bool{}
		for _, v := range pg.Trunks {
			if !validVLAN(v) {
				return n, fmt.Errorf("%s: Trunks: VLAN %d: want 1-4094", where, v)
			}
			if !tseen[v] {
				tseen[v] = true
				trunks = append(trunks, v)
			}
		}
		sort.Ints(trunks)
		switch pg.VLANMode {
		case "", "access":
			if len(trunks) > 0 {
				return n, fmt.Errorf("%s: Trunks need VLANMode trunk, native-untagged or native-tagged, not %q", where, pg.VLANMode)
			}
			if pg.VLANMode == "access" && pg.VLAN == 0 {
				return n, fmt.Errorf("%s: VLANMode access needs a VLAN", where)
			}
		case "trunk":
			if len(trunks) == 0 {
				return n, fmt.Errorf("%s: VLANMode trunk needs Trunks", where)
			}
			if pg.VLAN != 0 {
				return n, fmt.Errorf("%s: VLAN %d: VLANMode trunk has no access VLAN (use native-untagged or native-tagged)", where, pg.VLAN)
			}
		default: // native-untagged, native-tagged
			if pg.VLAN == 0 {
				return n, fmt.Errorf("%s: VLANMode %s needs a VLAN (the native one)", where, pg.VLANMode)
			}
		}
		if pg.LibvirtVLAN && pg.VLANMode != "" && pg.VLANMode != "access" {
			// virNetDevSetNetConfig: "vlan trunking is not supported by
			// SR-IOV network devices"; a nativeMode is silently dropped.
			return n, fmt.Errorf("%s: LibvirtVLAN: libvirt sets only a single access VLAN on a VF, not VLANMode %s", where, pg.VLANMode)
		}
		pg.Trunks = trunks
		n.Portgroups = append(n.Portgroups, pg)
	}
	sort.Slice(n.Portgroups, func(i, j int) bool { return n.Portgroups[i].Name < n.Portgroups[j].Name })
	return n, nil
}

// networkMeta is vflag's metadata element of a network, as SetMetadata
// would take it and as NetworkXML writes it (with the namespace prefix).
type networkMeta struct {
	XMLName    xml.Name        `xml:"vflag:vflag"`
	NS         string          `xml:"xmlns:vflag,attr"`
	Owner      string          `xml:"owner,attr"`
	Portgroups []networkMetaPG `xml:"vflag:portgroup"`
}

type networkMetaPG struct {
	Name     string `xml:"name,attr"`
	VLAN     int    `xml:"vlan,attr,omitempty"`
	VLANMode string `xml:"vlan_mode,attr,omitempty"`
	Trunks   string `xml:"trunks,attr,omitempty"`
}

// parsedMeta is vflag's metadata read back from libvirt (namespace-aware).
type parsedMeta struct {
	Owner      string
	Portgroups []networkMetaPG
}

func parseNetworkMeta(inner string) (*parsedMeta, error) {
	var root struct {
		Vflag []struct {
			Owner      string          `xml:"owner,attr"`
			Portgroups []networkMetaPG `xml:"https://vflag.dev/xmlns/vflag/1 portgroup"`
		} `xml:"https://vflag.dev/xmlns/vflag/1 vflag"`
	}
	if err := xml.Unmarshal([]byte("<metadata>"+inner+"</metadata>"), &root); err != nil {
		return nil, fmt.Errorf("parse vflag network metadata: %w", err)
	}
	if len(root.Vflag) == 0 {
		return nil, nil
	}
	v := root.Vflag[0]
	m := &parsedMeta{Owner: v.Owner, Portgroups: v.Portgroups}
	sort.Slice(m.Portgroups, func(i, j int) bool { return m.Portgroups[i].Name < m.Portgroups[j].Name })
	return m, nil
}

func formatTrunks(vs []int) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func parseTrunks(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("trunks %q: %w", s, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func metaFor(s NetworkSpec) networkMeta {
	m := networkMeta{NS: MetadataNamespace, Owner: s.Owner}
	for _, pg := range s.Portgroups {
		m.Portgroups = append(m.Portgroups, networkMetaPG{Name: pg.Name, VLAN: pg.VLAN, VLANMode: pg.VLANMode, Trunks: formatTrunks(pg.Trunks)})
	}
	return m
}

// libvirtVLAN is the <vlan> of a portgroup with LibvirtVLAN: a single
// access tag (normalizeNetwork refuses other modes).
func libvirtVLAN(pg NetworkPortgroup) *libvirtxml.NetworkVLAN {
	if !pg.LibvirtVLAN || pg.VLAN == 0 {
		return nil
	}
	return &libvirtxml.NetworkVLAN{Tags: []libvirtxml.NetworkVLANTag{{ID: uint(pg.VLAN)}}}
}

func portgroupXML(pg NetworkPortgroup) libvirtxml.NetworkPortGroup {
	x := libvirtxml.NetworkPortGroup{Name: pg.Name, VLAN: libvirtVLAN(pg)}
	if pg.Default {
		x.Default = "yes"
	}
	return x
}

func networkDef(s NetworkSpec) (libvirtxml.Network, error) {
	meta, err := xml.Marshal(metaFor(s))
	if err != nil {
		return libvirtxml.Network{}, fmt.Errorf("network %s: metadata: %w", s.Name, err)
	}
	def := libvirtxml.Network{
		Name:     s.Name,
		Metadata: &libvirtxml.NetworkMetadata{XML: string(meta)},
		Forward:  &libvirtxml.NetworkForward{Mode: "hostdev", Managed: "yes"},
	}
	for _, p := range s.PCIs {
		dom, bus, slot, fn := pciaddr.Addr(p).Parts()
		def.Forward.Addresses = append(def.Forward.Addresses, libvirtxml.NetworkForwardAddress{
			PCI: &libvirtxml.NetworkForwardAddressPCI{Domain: &dom, Bus: &bus, Slot: &slot, Function: &fn},
		})
	}
	for _, pg := range s.Portgroups {
		def.PortGroups = append(def.PortGroups, portgroupXML(pg))
	}
	return def, nil
}

// NetworkXML returns the libvirt network XML of a VF pool: forward mode
// hostdev, managed, one <address> per VF (sorted), the portgroups (sorted
// by name; a <vlan> only where LibvirtVLAN) and vflag's metadata recording
// the owner and each portgroup's vlan, vlan_mode and trunks.
func NetworkXML(s NetworkSpec) (string, error) {
	n, err := normalizeNetwork(s)
	if err != nil {
		return "", err
	}
	def, err := networkDef(n)
	if err != nil {
		return "", err
	}
	out, err := def.Marshal()
	if err != nil {
		return "", fmt.Errorf("network %s: %w", s.Name, err)
	}
	return out, nil
}

// netView is what one network definition says, in the terms EnsureNetwork
// compares.
type netView struct {
	hostdev    bool // forward mode hostdev, managed, addresses only
	pcis       []string
	portgroups []pgView
	meta       *parsedMeta
}

type pgView struct {
	name    string
	isDef   bool
	vlan    string // libvirt's <vlan>, canonical text; "" for none
	libvirt libvirtxml.NetworkPortGroup
}

func vlanText(v *libvirtxml.NetworkVLAN) string {
	if v == nil || len(v.Tags) == 0 {
		return ""
	}
	var b strings.Builder
	if v.Trunk == "yes" {
		b.WriteString("trunk:")
	}
	for i, t := range v.Tags {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(t.ID), 10))
		if t.NativeMode != "" {
			b.WriteString("/" + t.NativeMode)
		}
	}
	return b.String()
}

func parseNetView(doc string) (netView, libvirtxml.Network, error) {
	var def libvirtxml.Network
	if err := def.Unmarshal(doc); err != nil {
		return netView{}, def, fmt.Errorf("parse network XML: %w", err)
	}
	v, err := viewOf(def)
	return v, def, err
}

func viewOf(def libvirtxml.Network) (netView, error) {
	var v netView
	if f := def.Forward; f != nil {
		v.hostdev = f.Mode == "hostdev" && f.Managed == "yes" && f.Dev == "" && len(f.PFs) == 0 && len(f.Interfaces) == 0
		for _, a := range f.Addresses {
			if a.PCI == nil {
				continue
			}
			p := a.PCI
			if p.Domain == nil || p.Bus == nil || p.Slot == nil || p.Function == nil {
				continue
			}
			addr, err := pciaddr.FromParts(*p.Domain, *p.Bus, *p.Slot, *p.Function)
			if err != nil {
				continue
			}
			v.pcis = append(v.pcis, string(addr))
		}
	}
	sort.Strings(v.pcis)
	for _, pg := range def.PortGroups {
		v.portgroups = append(v.portgroups, pgView{name: pg.Name, isDef: pg.Default == "yes", vlan: vlanText(pg.VLAN), libvirt: pg})
	}
	sort.Slice(v.portgroups, func(i, j int) bool { return v.portgroups[i].name < v.portgroups[j].name })
	if def.Metadata != nil {
		m, err := parseNetworkMeta(def.Metadata.XML)
		if err != nil {
			return v, err
		}
		v.meta = m
	}
	return v, nil
}

func (v netView) samePool(w netView) bool {
	return v.hostdev == w.hostdev && strings.Join(v.pcis, " ") == strings.Join(w.pcis, " ")
}

func (v netView) sameMeta(w netView) bool {
	if (v.meta == nil) != (w.meta == nil) {
		return false
	}
	if v.meta == nil {
		return true
	}
	if v.meta.Owner != w.meta.Owner || len(v.meta.Portgroups) != len(w.meta.Portgroups) {
		return false
	}
	for i := range v.meta.Portgroups {
		if v.meta.Portgroups[i] != w.meta.Portgroups[i] {
			return false
		}
	}
	return true
}

func (v netView) samePortgroups(w netView) bool {
	if len(v.portgroups) != len(w.portgroups) {
		return false
	}
	for i := range v.portgroups {
		a, b := v.portgroups[i], w.portgroups[i]
		if a.name != b.name || a.isDef != b.isDef || a.vlan != b.vlan {
			return false
		}
	}
	return true
}

func (v netView) same(w netView) bool {
	return v.samePool(w) && v.sameMeta(w) && v.samePortgroups(w)
}

// portgroups returns the NetworkState portgroups of a definition.
func (v netView) statePortgroups() []NetworkPortgroup {
	var out []NetworkPortgroup
	metaPG := map[string]networkMetaPG{}
	if v.meta != nil {
		for _, m := range v.meta.Portgroups {
			metaPG[m.Name] = m
		}
	}
	for _, pg := range v.portgroups {
		s := NetworkPortgroup{Name: pg.name, Default: pg.isDef, LibvirtVLAN: pg.vlan != ""}
		if m, ok := metaPG[pg.name]; ok {
			s.VLAN, s.VLANMode = m.VLAN, m.VLANMode
			s.Trunks, _ = parseTrunks(m.Trunks)
		} else if vl := pg.libvirt.VLAN; vl != nil && len(vl.Tags) > 0 {
			s.VLAN, s.VLANMode, s.Trunks = fromLibvirtVLAN(vl)
		}
		out = append(out, s)
	}
	return out
}

// fromLibvirtVLAN reads a libvirt <vlan> in vflag's terms.
func fromLibvirtVLAN(vl *libvirtxml.NetworkVLAN) (vlan int, mode string, trunks []int) {
	native := -1
	for i, t := range vl.Tags {
		if t.NativeMode != "" {
			native = i
			mode = "native-" + t.NativeMode
			vlan = int(t.ID)
		}
	}
	if native < 0 && vl.Trunk != "yes" && len(vl.Tags) == 1 {
		return int(vl.Tags[0].ID), "access", nil
	}
	if native < 0 {
		mode = "trunk"
	}
	for i, t := range vl.Tags {
		if i != native {
			trunks = append(trunks, int(t.ID))
		}
	}
	return vlan, mode, trunks
}

func portOf(x libvirtxml.NetworkPort) NetworkPort {
	p := NetworkPort{UUID: x.UUID, Portgroup: x.Group}
	if x.Owner != nil {
		p.Domain = x.Owner.Name
	}
	if x.MAC != nil {
		p.MAC = strings.ToLower(x.MAC.Address)
	}
	if x.Plug != nil && x.Plug.HostDevPCI != nil && x.Plug.HostDevPCI.Address != nil {
		a := x.Plug.HostDevPCI.Address
		if a.Domain != nil && a.Bus != nil && a.Slot != nil && a.Function != nil {
			if addr, err := pciaddr.FromParts(*a.Domain, *a.Bus, *a.Slot, *a.Function); err == nil {
				p.PCI = string(addr)
			}
		}
	}
	return p
}

// NetworkHookData is what libvirt passes to the network hook
// (/etc/libvirt/hooks/network) on its standard input.
type NetworkHookData struct {
	// Network is read from the <network> element (the live definition):
	// Name, Exists (true), Owned, Owner, PCIs and Portgroups are set.
	Network NetworkState
	// Port is the <networkport> of port-created and port-deleted; nil
	// for the other operations.
	Port *NetworkPort
}

// ParseNetworkHook reads the network hook's standard input:
//
//	<hookData>
//	  <network>...</network>
//	  <networkport>...</networkport>   (port-created, port-deleted only)
//	</hookData>
func ParseNetworkHook(stdin []byte) (NetworkHookData, error) {
	var doc struct {
		XMLName xml.Name                `xml:"hookData"`
		Network *libvirtxml.Network     `xml:"network"`
		Port    *libvirtxml.NetworkPort `xml:"networkport"`
	}
	if err := xml.Unmarshal(stdin, &doc); err != nil {
		return NetworkHookData{}, fmt.Errorf("parse network hook data: %w", err)
	}
	if doc.Network == nil || doc.Network.Name == "" {
		return NetworkHookData{}, errors.New("parse network hook data: no <network> with a <name>")
	}
	v, err := viewOf(*doc.Network)
	if err != nil {
		return NetworkHookData{}, fmt.Errorf("parse network hook data: %w", err)
	}
	var h NetworkHookData
	h.Network = NetworkState{Name: doc.Network.Name, Exists: true, PCIs: v.pcis, Portgroups: v.statePortgroups()}
	if v.meta != nil {
		h.Network.Owned, h.Network.Owner = true, v.meta.Owner
	}
	if doc.Port != nil {
		p := portOf(*doc.Port)
		h.Port = &p
	}
	return h, nil
}
