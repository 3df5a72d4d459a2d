package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Tunnel is a switchdev group's overlay: the bond leaves the bridge and
// carries the tunnel endpoint's address (the underlay), the bridge holds
// the representors and one VXLAN or Geneve port per remote endpoint and
// segment, and mlx5 offloads the encap and decap onto the LAG.
type Tunnel struct {
	// Type is vxlan or geneve.
	Type string `mapstructure:"type"`
	// Local is the local endpoint's address with its prefix
	// ("192.0.2.11/24"): on the bond, or on <bond>.<underlay_vlan>.
	Local string `mapstructure:"local"`
	// UnderlayVLAN (1-4094) puts Local on a VLAN interface on the bond
	// instead of the bond itself; 0: on the bond.
	UnderlayVLAN int `mapstructure:"underlay_vlan"`
	// UnderlayMTU is the bond's MTU (and its VLAN interface's): it must
	// leave room for the tunnel's headers above the group's mtu (0: leave
	// the bond's MTU alone; preflight then checks the one it has).
	UnderlayMTU int `mapstructure:"underlay_mtu"`
	// Gateway is the next hop of Routes (an address inside Local's prefix).
	Gateway string `mapstructure:"gateway"`
	// Routes are the prefixes of remote endpoints outside Local's prefix,
	// routed through Gateway on the underlay device.
	Routes []string `mapstructure:"routes"`
	// Remotes are the remote endpoints' addresses (one tunnel port per
	// remote and segment), or the single entry "flow" (remote_ip=flow: one
	// port per segment, the remote chosen by OpenFlow rules).
	Remotes []string `mapstructure:"remotes"`
	// VNI is the key of the default segment: the VFs and portgroups that
	// name no vni of their own (untagged in the bridge). 0: none.
	VNI int `mapstructure:"vni"`
	// DstPort is the UDP destination port (0: the type's IANA port, 4789
	// for VXLAN, 6081 for Geneve).
	DstPort int `mapstructure:"dst_port"`
	// PortPrefix starts the tunnel ports' names (default vx or gnv):
	// <prefix><vni>r<remote index>, or <prefix><vni> with remote_ip=flow.
	PortPrefix string `mapstructure:"port_prefix"`
}

// Tunnel types.
const (
	TunnelVXLAN  = "vxlan"
	TunnelGeneve = "geneve"
	// RemoteFlow is the remotes entry that makes remote_ip=flow.
	RemoteFlow = "flow"
	// MaxVNI is the largest VNI: VXLAN's and Geneve's are 24 bits.
	MaxVNI = 1<<24 - 1
)

// TunnelOverhead is what a tunnel packet adds above the inner frame's MTU,
// counted against the underlay's MTU: the inner frame's Ethernet header
// 14, the outer IP header 20 (IPv4) or 40 (IPv6), UDP 8, VXLAN or Geneve
// (without options) 8. An inner VLAN tag adds 4 more (InnerVLANTagLen,
// Group.TunnelOverhead).
func TunnelOverhead(ipv6 bool) int {
	if ipv6 {
		return 70
	}
	return 50
}

// InnerVLANTagLen is what an 802.1Q tag inside the tunnel adds.
const InnerVLANTagLen = 4

// InnerVLANTag names the first vfs entry or portgroup whose frames cross
// the tunnel with a VLAN tag of their own ("vfs[1]", "network.portgroups[0]"),
// "" when none: one on the default segment (no vni of its own) that is
// tagged in the bridge (a vlan, a trunk or native-* vlan_mode, trunks).
// The default segment's tunnel ports have no tag, so OVS sends them the
// default segment's VLANs tagged (UntaggedTrunks); a segment's own ports
// carry its VLAN as their access tag and strip it.
func (g *Group) InnerVLANTag() string {
	if g.Tunnel == nil {
		return ""
	}
	tagged := func(vni, vlan int, mode string, trunks []int) bool {
		return vni == 0 && (vlan != 0 || (mode != "" && mode != "access") || len(trunks) > 0)
	}
	for i, vf := range g.VFs {
		if tagged(vf.VNI, vf.VLAN, vf.VLANMode, vf.Trunks) {
			return fmt.Sprintf("vfs[%d]", i)
		}
	}
	if g.Network != nil {
		for i, pg := range g.Network.Portgroups {
			if tagged(pg.VNI, pg.VLAN, pg.VLANMode, pg.Trunks) {
				return fmt.Sprintf("network.portgroups[%d]", i)
			}
		}
	}
	return ""
}

// UntaggedTrunks are the VLANs that a port without a tag of its own
// carries in a tunnel group whose other segments are tagged in the bridge:
// 0 (untagged frames) and the VLANs that the entries without a vni use
// (their vlan and trunks), less every tagged segment's VLAN. Without it a
// port without a tag is an OVS trunk of every VLAN, so the untagged
// segment's tunnel ports and representors would carry each tagged
// segment's frames, still tagged, into the untagged segment's VNI and VMs.
// nil without a tunnel or without a tagged segment (such a group's ports
// trunk every VLAN, as in a group without a tunnel).
func (g *Group) UntaggedTrunks() []int {
	tagged := map[int]bool{}
	for _, s := range g.Segments() {
		if s.Tag != 0 {
			tagged[s.Tag] = true
		}
	}
	if len(tagged) == 0 {
		return nil
	}
	set := map[int]bool{0: true}
	add := func(vni, vlan int, trunks []int) {
		if vni != 0 {
			return
		}
		for _, v := range append([]int{vlan}, trunks...) {
			if !tagged[v] {
				set[v] = true
			}
		}
	}
	for _, vf := range g.VFs {
		add(vf.VNI, vf.VLAN, vf.Trunks)
	}
	if g.Network != nil {
		for _, pg := range g.Network.Portgroups {
			add(pg.VNI, pg.VLAN, pg.Trunks)
		}
	}
	out := make([]int, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

// TunnelOverhead is what the group's tunnel adds above the representors'
// MTU: the headers (TunnelOverhead) and, when a port on the default
// segment is tagged (InnerVLANTag), the inner VLAN tag; with an ovn
// section, OVN's encapsulation (OVNOverhead).
func (g *Group) TunnelOverhead() int {
	if g.OVN != nil && g.Tunnel == nil {
		return OVNOverhead(g.OVN.EncapTypeOf(), g.OVN.Prefix().Addr().Is6())
	}
	if g.Tunnel == nil {
		return 0
	}
	n := TunnelOverhead(g.Tunnel.IPv6())
	if g.InnerVLANTag() != "" {
		n += InnerVLANTagLen
	}
	return n
}

// InnerVLANNote explains the inner VLAN tag in an MTU message
// (" and an inner VLAN tag (vfs[0] is tagged on the default segment)"),
// "" without one.
func (g *Group) InnerVLANNote() string {
	if at := g.InnerVLANTag(); at != "" {
		return fmt.Sprintf(" and an inner VLAN tag (%s is tagged on the default segment)", at)
	}
	return ""
}

// DstPortOf is the tunnel's UDP destination port.
func (t *Tunnel) DstPortOf() int {
	switch {
	case t.DstPort != 0:
		return t.DstPort
	case t.Type == TunnelGeneve:
		return 6081
	}
	return 4789
}

// Prefix is Local parsed; the zero Prefix when it does not parse.
func (t *Tunnel) Prefix() netip.Prefix {
	p, _ := netip.ParsePrefix(t.Local)
	return p
}

// IPv6 tells whether the underlay is IPv6.
func (t *Tunnel) IPv6() bool { return t.Prefix().Addr().Is6() }

// Flow tells whether the remote is chosen per flow (remote_ip=flow).
func (t *Tunnel) Flow() bool { return len(t.Remotes) == 1 && t.Remotes[0] == RemoteFlow }

func (t *Tunnel) portPrefix() string {
	switch {
	case t.PortPrefix != "":
		return t.PortPrefix
	case t.Type == TunnelGeneve:
		return "gnv"
	}
	return "vx"
}

// UnderlayDev is the device that carries the local endpoint's address
// (a tunnel's local, an ovn section's encap_ip); "" without either.
func (g *Group) UnderlayDev() string {
	u := g.Underlay()
	if u == nil {
		return ""
	}
	if u.VLAN != 0 {
		return fmt.Sprintf("%s.%d", g.Bond.Name, u.VLAN)
	}
	return g.Bond.Name
}

// Segment is one overlay segment of a group: its key and the VLAN tag
// that stands for it inside the bridge (0: untagged).
type Segment struct{ VNI, Tag int }

// Segments are the group's overlay segments, sorted by VNI: the default
// (tunnel.vni, untagged) and each vni a vfs entry or portgroup names, with
// that entry's vlan as its tag in the bridge. nil without a tunnel.
func (g *Group) Segments() []Segment {
	if g.Tunnel == nil {
		return nil
	}
	seen := map[int]int{}
	if g.Tunnel.VNI != 0 {
		seen[g.Tunnel.VNI] = 0
	}
	for _, v := range g.VFs {
		if v.VNI != 0 {
			seen[v.VNI] = v.VLAN
		}
	}
	if g.Network != nil {
		for _, pg := range g.Network.Portgroups {
			if pg.VNI != 0 {
				seen[pg.VNI] = pg.VLAN
			}
		}
	}
	out := make([]Segment, 0, len(seen))
	for vni, tag := range seen {
		out = append(out, Segment{vni, tag})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VNI < out[j].VNI })
	return out
}

// TunnelPort is one tunnel port of the group's bridge.
type TunnelPort struct {
	Name    string
	Type    string
	Tag     int
	Options map[string]string // remote_ip, local_ip, key, dst_port
}

// TunnelPorts are the group's tunnel ports: one per remote and segment
// (one per segment with remote_ip=flow), in segment then remote order.
func (g *Group) TunnelPorts() []TunnelPort {
	t := g.Tunnel
	if t == nil {
		return nil
	}
	var out []TunnelPort
	for _, s := range g.Segments() {
		for ri, r := range t.Remotes {
			name := fmt.Sprintf("%s%dr%d", t.portPrefix(), s.VNI, ri)
			if t.Flow() {
				name = fmt.Sprintf("%s%d", t.portPrefix(), s.VNI)
			}
			out = append(out, TunnelPort{Name: name, Type: t.Type, Tag: s.Tag, Options: map[string]string{
				"remote_ip": r, "local_ip": t.Prefix().Addr().String(), "key": fmt.Sprint(s.VNI), "dst_port": fmt.Sprint(t.DstPortOf()),
			}})
		}
	}
	return out
}

var portPrefixRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9]{0,3}$`) })

// maxRemotes bounds tunnel.remotes: the port names carry the index.
const maxRemotes = 64

// validateTunnel checks a group's tunnel section: type, the local
// address and its device, routes, remotes, the segments' keys and their
// tags, the port names across groups and the MTU chain.
func (v *validator) validateTunnel(gc groupCheck) {
	g, p := gc.g, gc.p
	t := g.Tunnel
	tp := p + ".tunnel"
	if !gc.switchdev {
		if gc.legacy {
			v.add(tp, t.Type, "needs eswitch switchdev (the tunnel ports go on the representors' bridge)")
		}
		return
	}
	if t.Type != TunnelVXLAN && t.Type != TunnelGeneve {
		v.add(tp+".type", t.Type, "must be vxlan or geneve")
	}
	local, err := netip.ParsePrefix(t.Local)
	localOK := err == nil && local.Addr().IsGlobalUnicast()
	if !localOK {
		v.add(tp+".local", t.Local, "must be the local endpoint's unicast address with its prefix (192.0.2.11/24, 2001:db8::11/64)")
	} else {
		v.claim("address", local.Addr().String(), tp+".local")
	}
	if t.UnderlayVLAN < 0 || t.UnderlayVLAN > 4094 {
		v.add(tp+".underlay_vlan", t.UnderlayVLAN, "must be a VLAN 1-4094 (or 0: the address on the bond)")
	} else if t.UnderlayVLAN != 0 && len(g.UnderlayDev()) > 15 {
		v.add(tp+".underlay_vlan", t.UnderlayVLAN, "makes the VLAN interface's name %s longer than 15 characters: shorten bond.name", g.UnderlayDev())
	}
	if localOK {
		v.validateUnderlayRoutes(g.Underlay(), tp, local)
		v.validateRemotes(t, tp, local)
	}
	if t.DstPort < 0 || t.DstPort > 65535 {
		v.add(tp+".dst_port", t.DstPort, "must be a UDP port 1-65535 (or 0: 4789 for vxlan, 6081 for geneve)")
	}
	if t.PortPrefix != "" && !portPrefixRE().MatchString(t.PortPrefix) {
		v.add(tp+".port_prefix", t.PortPrefix, "must be 1-4 characters of [a-z0-9], starting with a letter")
	}
	v.validateSegments(gc)
	if !v.reported[tp+".port_prefix"] && !v.reported[tp+".remotes"] {
		for _, tpt := range g.TunnelPorts() {
			v.claim("ovsport", tpt.Name, tp+".port_prefix")
		}
	}
	if t.UnderlayVLAN > 0 && t.UnderlayVLAN <= 4094 {
		v.claim("netdev", g.UnderlayDev(), tp+".underlay_vlan")
	}
	v.validateUnderlayMTU(gc, localOK && local.Addr().Is6())
}

// validateUnderlayRoutes checks the gateway (inside the local prefix, same
// family) and the routes (prefixes of that family, which need a gateway)
// of a tunnel or an ovn section (tp: its path).
func (v *validator) validateUnderlayRoutes(t *UnderlaySpec, tp string, local netip.Prefix) {
	if t.Gateway != "" {
		a, err := netip.ParseAddr(t.Gateway)
		switch {
		case err != nil:
			v.add(tp+".gateway", t.Gateway, "is not an IP address")
		case a.Is4() != local.Addr().Is4():
			v.add(tp+".gateway", t.Gateway, "is not of %s's address family (%s)", t.AddrField, t.Local)
		case !local.Masked().Contains(a) || a == local.Addr():
			v.add(tp+".gateway", t.Gateway, "must be another address inside %s's prefix %s (the next hop on the underlay)", t.AddrField, local.Masked())
		}
	}
	for i, r := range t.Routes {
		rp := fmt.Sprintf("%s.routes[%d]", tp, i)
		pr, err := netip.ParsePrefix(r)
		switch {
		case err != nil || pr != pr.Masked():
			v.add(rp, r, "is not a network prefix (198.51.100.0/24)")
		case pr.Addr().Is4() != local.Addr().Is4():
			v.add(rp, r, "is not of %s's address family (%s)", t.AddrField, t.Local)
		case t.Gateway == "":
			v.add(rp, r, "needs %s.gateway (its next hop)", t.Section)
		}
	}
}

// validateRemotes checks the remote endpoints: addresses of local's family,
// none local itself, each inside local's prefix or one of the routes; or
// the single entry "flow".
func (v *validator) validateRemotes(t *Tunnel, tp string, local netip.Prefix) {
	if len(t.Remotes) == 0 {
		v.add(tp+".remotes", "", "must list the remote endpoints' addresses (or the single entry flow: remote_ip=flow)")
		return
	}
	if len(t.Remotes) > maxRemotes {
		v.add(tp+".remotes", len(t.Remotes), "lists more than %d endpoints", maxRemotes)
		return
	}
	seen := map[netip.Addr]int{}
	for i, r := range t.Remotes {
		rp := fmt.Sprintf("%s.remotes[%d]", tp, i)
		if r == RemoteFlow {
			if len(t.Remotes) > 1 {
				v.add(rp, r, "must be the only entry (remote_ip=flow: one port per segment)")
			}
			continue
		}
		a, err := netip.ParseAddr(r)
		switch {
		case err != nil || !a.IsGlobalUnicast():
			v.add(rp, r, "is not a unicast IP address (or flow)")
			continue
		case a.Is4() != local.Addr().Is4():
			v.add(rp, r, "is not of local's address family (%s)", t.Local)
			continue
		case a == local.Addr():
			v.add(rp, r, "is the local endpoint's own address")
			continue
		}
		if j, ok := seen[a]; ok {
			v.add(rp, r, "is already listed at %s.remotes[%d]", tp, j)
		}
		seen[a] = i
		if !local.Masked().Contains(a) && !routed(t.Routes, a) {
			v.add(rp, r, "is neither inside local's prefix %s nor in tunnel.routes: no route through the bond reaches it", local.Masked())
		}
	}
}

func routed(routes []string, a netip.Addr) bool {
	for _, r := range routes {
		if p, err := netip.ParsePrefix(r); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}

// validateSegments checks tunnel.vni and each vni of vfs and portgroups:
// in range, needing a tunnel, an access VLAN (the segment's tag in the
// bridge), and one tag per VNI and one VNI per tag.
func (v *validator) validateSegments(gc groupCheck) {
	g, p := gc.g, gc.p
	t := g.Tunnel
	if t != nil && (t.VNI < 0 || t.VNI > MaxVNI) {
		v.add(p+".tunnel.vni", t.VNI, "is out of range: a %s VNI is 24 bits, 1-%d (or 0: no default segment)", orVXLAN(t.Type), MaxVNI)
	}
	tagOf := map[int]string{} // vni -> "tag@path"
	vniOf := map[int]string{} // tag -> "vni@path"
	use := func(path string, vni, tag int) {
		if prev, ok := tagOf[vni]; ok && !strings.HasPrefix(prev, fmt.Sprintf("%d@", tag)) {
			v.add(path, vni, "is the VNI of another VLAN at %s: one segment, one VLAN in the bridge", after(prev))
		}
		if prev, ok := vniOf[tag]; ok && !strings.HasPrefix(prev, fmt.Sprintf("%d@", vni)) {
			v.add(path, vni, "differs from the VNI of VLAN %d at %s: one VLAN in the bridge, one segment", tag, after(prev))
		}
		tagOf[vni] = fmt.Sprintf("%d@%s", tag, path)
		vniOf[tag] = fmt.Sprintf("%d@%s", vni, path)
	}
	if t != nil && t.VNI > 0 && t.VNI <= MaxVNI {
		use(p+".tunnel.vni", t.VNI, 0)
	}
	check := func(path string, vni, vlan int, mode string) {
		switch {
		case vni == 0:
		case t == nil:
			v.add(path, vni, "needs %s.tunnel (a VNI is an overlay segment's key)", p)
		case vni < 0 || vni > MaxVNI:
			v.add(path, vni, "is out of range: a %s VNI is 24 bits, 1-%d", orVXLAN(t.Type), MaxVNI)
		case mode != "" && mode != "access":
			v.add(path, vni, "needs an access port (vlan_mode %s carries several VLANs; a segment is one)", mode)
		default:
			use(path, vni, vlan)
		}
	}
	for i, vf := range g.VFs {
		check(fmt.Sprintf("%s.vfs[%d].vni", p, i), vf.VNI, vf.VLAN, vf.VLANMode)
	}
	if g.Network != nil {
		for i, pg := range g.Network.Portgroups {
			check(fmt.Sprintf("%s.network.portgroups[%d].vni", p, i), pg.VNI, pg.VLAN, pg.VLANMode)
		}
	}
	if t != nil && len(g.Segments()) == 0 {
		v.add(p+".tunnel.vni", t.VNI, "is 0 and no vfs entry or portgroup names a vni: the tunnel would carry no segment")
	}
}

func orVXLAN(typ string) string {
	if typ == TunnelGeneve {
		return "Geneve"
	}
	return "VXLAN"
}

func after(s string) string { _, p, _ := strings.Cut(s, "@"); return p }

// validateUnderlayMTU checks the MTU chain where the config gives both
// ends: the representors' mtu plus the tunnel's (or OVN's) headers must
// fit in the bond's.
func (v *validator) validateUnderlayMTU(gc groupCheck, ipv6 bool) {
	g := gc.g
	un := g.Underlay()
	tp := gc.p + "." + un.Section
	u := un.MTU
	if u != 0 && (u < MinMTU || u > MaxMTU) {
		v.add(tp+".underlay_mtu", u, "must be %d-%d (or 0 to leave the bond's MTU alone)", MinMTU, MaxMTU)
		return
	}
	if u == 0 || g.MTU == 0 || v.reported[gc.p+".mtu"] {
		return
	}
	over := g.TunnelOverhead()
	if need := g.MTU + over; u < need {
		fam := "IPv4"
		if ipv6 {
			fam = "IPv6"
		}
		what := orVXLAN(g.Tunnel.typeOf())
		if g.Tunnel == nil {
			what = "OVN " + orVXLAN(g.OVN.EncapTypeOf())
			if g.OVN.EncapTypeOf() == OVNEncapGeneve {
				what += " (with OVN's option)"
			}
		}
		v.add(tp+".underlay_mtu", u, "leaves no room for the tunnel: the representors' mtu %d plus %d bytes of %s over %s headers%s needs %d on the bond", g.MTU, over, what, fam, g.InnerVLANNote(), need)
	}
}

// typeOf is the tunnel's type, "" for no tunnel.
func (t *Tunnel) typeOf() string {
	if t == nil {
		return ""
	}
	return t.Type
}
