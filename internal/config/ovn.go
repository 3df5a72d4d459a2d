package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// OVN makes a switchdev group's host an OVN chassis: the bond leaves every
// bridge and carries the encap address (the underlay, as a tunnel's), the
// representors are ports of the integration bridge (br-int) bound to
// logical switch ports through their Interface external_ids:iface-id, and
// ovn-controller programs br-int and the tunnels to the other chassis from
// the Southbound database. vflag writes nothing to the Northbound: the
// operator creates the logical switches and ports there.
type OVN struct {
	// Remote is the Southbound database (external_ids:ovn-remote): one or
	// more comma-separated endpoints, each tcp:host:port, ssl:host:port or
	// unix:/path.
	Remote string `mapstructure:"remote"`
	// SSL holds the private key, certificate and CA certificate of an ssl:
	// remote: ovn-controller reads them from the Open_vSwitch database's
	// SSL row (ovs-vsctl set-ssl).
	SSL *OVNSSL `mapstructure:"ssl"`
	// EncapType is geneve (default) or vxlan (external_ids:ovn-encap-type).
	EncapType string `mapstructure:"encap_type"`
	// EncapIP is the encap address with its prefix ("192.0.2.11/24"): put
	// on the bond, or on <bond>.<underlay_vlan>, as a tunnel's local
	// address; its address is external_ids:ovn-encap-ip.
	EncapIP string `mapstructure:"encap_ip"`
	// UnderlayVLAN, UnderlayMTU, Gateway and Routes are a tunnel's
	// (tunnel.go): the VLAN interface on the bond, the bond's MTU, the
	// routes to the other chassis outside EncapIP's prefix.
	UnderlayVLAN int      `mapstructure:"underlay_vlan"`
	UnderlayMTU  int      `mapstructure:"underlay_mtu"`
	Gateway      string   `mapstructure:"gateway"`
	Routes       []string `mapstructure:"routes"`
	// SystemID is the chassis name (external_ids:system-id); "": the one
	// Open vSwitch already has, else one vflag makes once and keeps in its
	// state directory.
	SystemID string `mapstructure:"system_id"`
	// Bridge is the integration bridge (external_ids:ovn-bridge; default
	// br-int): adopted when it exists, else created as OVN expects it.
	Bridge string `mapstructure:"bridge"`
	// BridgeMappings maps provider network names to bridges
	// (external_ids:ovn-bridge-mappings, "physnet1:br-phys"); vflag
	// creates none of those bridges.
	BridgeMappings map[string]string `mapstructure:"bridge_mappings"`
	// InstallTimeout bounds up's wait for ovn-controller to set
	// external_ids:ovn-installed=true on every bound representor
	// (default 30s); a port without it then is a degraded up.
	InstallTimeout time.Duration `mapstructure:"install_timeout"`
}

// OVNSSL is an ssl: remote's key material (paths on the host).
type OVNSSL struct {
	PrivateKey  string `mapstructure:"private_key"`
	Certificate string `mapstructure:"certificate"`
	CACert      string `mapstructure:"ca_cert"`
}

// OVN defaults and encap types.
const (
	OVNBridgeDefault         = "br-int"
	OVNEncapGeneve           = "geneve"
	OVNEncapVXLAN            = "vxlan"
	OVNInstallTimeoutDefault = 30 * time.Second
)

// OVNGeneveOptionLen is the Geneve option OVN puts on every packet: its
// 4-byte option header (class 0x0102, type 0x80, length) and 4 bytes of
// data (the logical ingress and egress ports), OVN's
// OVN_GENEVE_OPT_LEN/ovn-architecture(7) "Tunnel Encapsulations".
const OVNGeneveOptionLen = 4 + 4

// OVNOverhead is what OVN's encapsulation adds above the inner frame's
// MTU, counted against the underlay's MTU: the inner Ethernet header 14,
// the outer IP header 20 (IPv4) or 40 (IPv6), UDP 8, the Geneve or VXLAN
// header 8 and, for Geneve, OVN's option (OVNGeneveOptionLen): Geneve
// 14+20+8+8+8 = 58 over IPv4 and 14+40+8+8+8 = 78 over IPv6; VXLAN
// carries no option: 50 and 70, as a tunnel's (TunnelOverhead).
func OVNOverhead(encapType string, ipv6 bool) int {
	n := TunnelOverhead(ipv6)
	if encapType != OVNEncapVXLAN {
		n += OVNGeneveOptionLen
	}
	return n
}

// EncapTypeOf is the encap type, geneve when unset.
func (o *OVN) EncapTypeOf() string {
	if o.EncapType == "" {
		return OVNEncapGeneve
	}
	return o.EncapType
}

// Prefix is EncapIP parsed; the zero Prefix when it does not parse.
func (o *OVN) Prefix() netip.Prefix {
	p, _ := netip.ParsePrefix(o.EncapIP)
	return p
}

// Mappings is external_ids:ovn-bridge-mappings's value: physnet:bridge
// pairs sorted by network name, comma-separated ("" without any).
func (o *OVN) Mappings() string {
	keys := make([]string, 0, len(o.BridgeMappings))
	for k := range o.BridgeMappings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + o.BridgeMappings[k]
	}
	return strings.Join(parts, ",")
}

// UsesSSL tells whether one of the remotes is ssl:.
func (o *OVN) UsesSSL() bool {
	for _, r := range strings.Split(o.Remote, ",") {
		if strings.HasPrefix(strings.TrimSpace(r), "ssl:") {
			return true
		}
	}
	return false
}

// UnderlaySpec is the address, device and routes of a group whose bond is
// in no bridge and carries an overlay's outer packets: a tunnel's local
// address or an ovn section's encap address. Section and AddrField name
// the fields, for errors ("tunnel", "local"; "ovn", "encap_ip").
type UnderlaySpec struct {
	Section, AddrField string
	Local              string
	VLAN, MTU          int
	Gateway            string
	Routes             []string
}

// Prefix is Local parsed; the zero Prefix when it does not parse.
func (u *UnderlaySpec) Prefix() netip.Prefix {
	p, _ := netip.ParsePrefix(u.Local)
	return p
}

// Underlay is the group's underlay (a tunnel's or an ovn section's), nil
// with neither: then the bond is a port of the group's bridge.
func (g *Group) Underlay() *UnderlaySpec {
	switch {
	case g.Tunnel != nil:
		t := g.Tunnel
		return &UnderlaySpec{Section: "tunnel", AddrField: "local", Local: t.Local, VLAN: t.UnderlayVLAN, MTU: t.UnderlayMTU, Gateway: t.Gateway, Routes: t.Routes}
	case g.OVN != nil:
		o := g.OVN
		return &UnderlaySpec{Section: "ovn", AddrField: "encap_ip", Local: o.EncapIP, VLAN: o.UnderlayVLAN, MTU: o.UnderlayMTU, Gateway: o.Gateway, Routes: o.Routes}
	}
	return nil
}

// BondInBridge tells whether the group's bond is a port of its bridge
// (the VLAN layout): not with a tunnel or an ovn section.
func (g *Group) BondInBridge() bool { return g.Tunnel == nil && g.OVN == nil }

// OVNPort is one representor's logical switch port: the VF, its LSP
// and the MAC it carries (external_ids:attached-mac); Domain is the
// attachment's domain, "" for a vfs entry.
type OVNPort struct {
	VF     VFRef
	LSP    string
	MAC    string
	Domain string
	Path   string // the field that names it ("groups[0].vfs[1].ovn_port")
}

// OVNPorts are the group's bound representors: every vfs entry and
// attachment with an ovn_port, in that order (nil without an ovn section).
// An attachment's MAC is its own or the VF's.
func (g *Group) OVNPorts(p string) []OVNPort {
	if g.OVN == nil {
		return nil
	}
	var out []OVNPort
	for i, v := range g.VFs {
		if v.OVNPort != "" {
			out = append(out, OVNPort{VF: VFRef{v.PF, v.VF}, LSP: v.OVNPort, MAC: strings.ToLower(v.MAC), Path: fmt.Sprintf("%s.vfs[%d].ovn_port", p, i)})
		}
	}
	for i, a := range g.Attachments {
		if a.OVNPort == "" {
			continue
		}
		mac := a.MAC
		if mac == "" {
			mac = g.VFMAC(a.PF, a.VF)
		}
		out = append(out, OVNPort{VF: VFRef{a.PF, a.VF}, LSP: a.OVNPort, MAC: strings.ToLower(mac), Domain: a.Domain, Path: fmt.Sprintf("%s.attachments[%d].ovn_port", p, i)})
	}
	return out
}

var (
	ovnSystemIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`) })
	ovnPortRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:@/+-]{0,254}$`) })
	physnetRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`) })
	ovnRemoteRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(unix:/\S+|tcp:\S+:\d+|ssl:\S+:\d+)$`) })
)

// applyOVNDefaults fills an ovn section's defaults: br-int, geneve, the
// install timeout, and the group's bridge (ovs.bridge) as the integration
// bridge when the config gives none.
func (g *Group) applyOVNDefaults() {
	o := g.OVN
	if o == nil {
		return
	}
	if o.Bridge == "" {
		o.Bridge = OVNBridgeDefault
	}
	if o.EncapType == "" {
		o.EncapType = OVNEncapGeneve
	}
	if o.InstallTimeout == 0 {
		o.InstallTimeout = OVNInstallTimeoutDefault
	}
	if g.OVS.Bridge == "" && g.Switchdev() {
		g.OVS.Bridge = o.Bridge
	}
}

// validateOVN checks a group's ovn section: the layout it excludes
// (tunnel, the bond in a bridge, a pool's VLANs), the remote and its SSL files, the
// encap address and its device, routes and MTU chain, the chassis name,
// the bridges, and one chassis per host.
func (v *validator) validateOVN(gc groupCheck) {
	g, p := gc.g, gc.p
	o := g.OVN
	op := p + ".ovn"
	if !gc.switchdev {
		if gc.legacy {
			v.add(op, o.Remote, "needs eswitch switchdev (the representors are the chassis's ports on br-int)")
		}
		return
	}
	if prev, ok := v.seen["ovn/chassis"]; ok {
		v.add(op, o.Remote, "a host is one OVN chassis: only one group may have an ovn section (%s has it)", prev)
	} else {
		v.seen["ovn/chassis"] = op
	}
	if g.Tunnel != nil {
		v.add(op, o.Remote, "is exclusive with %s.tunnel: OVN makes its own tunnels to the other chassis (move the group from tunnel: to ovn:, see ovn.md)", p)
	}
	if g.OVS.Bridge != o.Bridge {
		v.add(p+".ovs.bridge", g.OVS.Bridge, "is the VLAN layout's bridge, with the bond in it: with ovn the bond is in no bridge and the representors go on ovn.bridge %s (leave ovs.bridge out)", o.Bridge)
	}
	if g.Network != nil {
		v.validateOVNPool(g, p)
	}
	v.validateOVNRemote(o, op)
	switch o.EncapType {
	case OVNEncapGeneve, OVNEncapVXLAN:
	default:
		v.add(op+".encap_type", o.EncapType, "must be geneve or vxlan")
	}
	local, err := netip.ParsePrefix(o.EncapIP)
	localOK := err == nil && local.Addr().IsGlobalUnicast()
	if !localOK {
		v.add(op+".encap_ip", o.EncapIP, "must be the encap address with its prefix (192.0.2.11/24, 2001:db8::11/64)")
	} else {
		v.claim("address", local.Addr().String(), op+".encap_ip")
		v.validateUnderlayRoutes(g.Underlay(), op, local)
	}
	if o.UnderlayVLAN < 0 || o.UnderlayVLAN > 4094 {
		v.add(op+".underlay_vlan", o.UnderlayVLAN, "must be a VLAN 1-4094 (or 0: the address on the bond)")
	} else if o.UnderlayVLAN != 0 {
		if len(g.UnderlayDev()) > 15 {
			v.add(op+".underlay_vlan", o.UnderlayVLAN, "makes the VLAN interface's name %s longer than 15 characters: shorten bond.name", g.UnderlayDev())
		} else {
			v.claim("netdev", g.UnderlayDev(), op+".underlay_vlan")
		}
	}
	if o.SystemID != "" && !ovnSystemIDRE().MatchString(o.SystemID) {
		v.add(op+".system_id", o.SystemID, "must be 1-64 characters of [A-Za-z0-9_.:-], starting with a letter or digit (the chassis name)")
	}
	if !bridgeNameRE().MatchString(o.Bridge) || isDotName(o.Bridge) {
		v.add(op+".bridge", o.Bridge, "must be 1-15 characters of [A-Za-z0-9_.-], not \".\" or \"..\"")
	}
	v.validateBridgeMappings(o, op)
	if o.InstallTimeout < 0 {
		v.add(op+".install_timeout", o.InstallTimeout, "must be positive")
	}
	v.validateUnderlayMTU(gc, localOK && local.Addr().Is6())
	v.validateOVNPorts(gc)
}

// validateOVNPool checks a pool in a group with ovn: its ports are bound
// by the qemu hook to the logical port each domain names in its metadata
// (docs/ovn.md), so no vfs entry binds a pool VF, and carry no VLAN on
// br-int, so a portgroup sets none.
func (v *validator) validateOVNPool(g *Group, p string) {
	pool := map[VFRef]bool{}
	for _, r := range g.PoolVFs() {
		pool[r] = true
	}
	for _, port := range g.OVNPorts(p) {
		if port.Domain == "" && pool[port.VF] {
			v.add(port.Path, port.LSP, "binds pf %d vf %d, a VF of the pool %s: the domain that takes a pool VF names its logical port (its metadata, see ovn.md); leave the VF out of network.vfs or drop ovn_port", port.VF.PF, port.VF.VF, g.NetworkName())
		}
	}
	for i, pg := range g.Network.Portgroups {
		v.noVLANUnderOVN(fmt.Sprintf("%s.network.portgroups[%d]", p, i), pg.VLAN, pg.VLANMode, pg.Trunks)
	}
}

// ValidOVNPort tells whether name can be a logical switch port's name as
// vflag takes it, from the config (ovn_port) or from a domain's metadata
// (the qemu hook): 1-255 characters of [A-Za-z0-9_.:@/+-], not starting
// with one of ".:@/+-".
func ValidOVNPort(name string) bool { return ovnPortRE().MatchString(name) }

// OVNPortField is the config field that binds the logical port lsp in
// any group of c ("groups[0].attachments[1].ovn_port"), "" when none does.
func (c *Config) OVNPortField(lsp string) string {
	for i := range c.Groups {
		for _, p := range c.Groups[i].OVNPorts(fmt.Sprintf("groups[%d]", i)) {
			if p.LSP == lsp {
				return p.Path
			}
		}
	}
	return ""
}

// validateOVNRemote checks ovn.remote and ovn.ssl: every endpoint's
// form, and the key, certificate and CA files exactly when a remote is
// ssl:.
func (v *validator) validateOVNRemote(o *OVN, op string) {
	if o.Remote == "" {
		v.add(op+".remote", o.Remote, "is required: the Southbound database (tcp:192.0.2.1:6642, ssl:192.0.2.1:6642 or unix:/path)")
	}
	for _, r := range strings.Split(o.Remote, ",") {
		if o.Remote != "" && !ovnRemoteRE().MatchString(strings.TrimSpace(r)) {
			v.add(op+".remote", o.Remote, "%q is not a Southbound endpoint (tcp:host:port, ssl:host:port or unix:/path; several comma-separated)", strings.TrimSpace(r))
			break
		}
	}
	switch {
	case o.UsesSSL() && o.SSL == nil:
		v.add(op+".ssl", "", "is required with an ssl: remote: private_key, certificate and ca_cert")
	case !o.UsesSSL() && o.SSL != nil:
		v.add(op+".ssl", o.SSL.PrivateKey, "is only used with an ssl: remote")
	case o.SSL != nil:
		for _, f := range []struct{ name, val string }{{"private_key", o.SSL.PrivateKey}, {"certificate", o.SSL.Certificate}, {"ca_cert", o.SSL.CACert}} {
			if !filepath.IsAbs(f.val) || filepath.Clean(f.val) != f.val {
				v.add(op+".ssl."+f.name, f.val, "must be an absolute, clean path")
			}
		}
	}
}

// validateBridgeMappings checks ovn.bridge_mappings: provider network
// names and bridge names, none of them the integration bridge.
func (v *validator) validateBridgeMappings(o *OVN, op string) {
	keys := make([]string, 0, len(o.BridgeMappings))
	for k := range o.BridgeMappings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		br := o.BridgeMappings[k]
		mp := op + ".bridge_mappings." + k
		switch {
		case !physnetRE().MatchString(k):
			v.add(mp, k, "is not a provider network name (1-64 characters of [A-Za-z0-9_.-])")
		case !bridgeNameRE().MatchString(br) || isDotName(br):
			v.add(mp, br, "is not a bridge name (1-15 characters of [A-Za-z0-9_.-])")
		case br == o.Bridge:
			v.add(mp, br, "is the integration bridge ovn.bridge: a provider network needs a bridge of its own")
		}
	}
}

// validateOVNPorts checks ovn_port on vfs and attachments: needing an ovn
// section, a name, one port per LSP and per VF (a MAC is optional: the
// binding's attached-mac where given; ovn-controller binds by iface-id), and
// no VLAN column on a bound representor's port (OVN tags nothing on
// br-int: a logical switch's localnet port carries the VLAN).
func (v *validator) validateOVNPorts(gc groupCheck) {
	g, p := gc.g, gc.p
	byVF := map[VFRef]string{}
	for _, port := range g.OVNPorts(p) {
		if !ovnPortRE().MatchString(port.LSP) {
			v.add(port.Path, port.LSP, "is not a logical switch port name (1-255 characters of [A-Za-z0-9_.:@/+-])")
			continue
		}
		v.claim("ovn_port", port.LSP, port.Path)
		if prev, ok := byVF[port.VF]; ok {
			v.add(port.Path, port.LSP, "binds pf %d vf %d, already bound at %s: one representor, one logical port", port.VF.PF, port.VF.VF, prev)
		}
		byVF[port.VF] = port.Path
	}
	for i, vf := range g.VFs {
		v.noVLANUnderOVN(fmt.Sprintf("%s.vfs[%d]", p, i), vf.VLAN, vf.VLANMode, vf.Trunks)
	}
}

// validateOVNPortsWithout reports ovn_port in a group without an ovn
// section.
func (v *validator) validateOVNPortsWithout(gc groupCheck) {
	g, p := gc.g, gc.p
	for i, vf := range g.VFs {
		if vf.OVNPort != "" {
			v.add(fmt.Sprintf("%s.vfs[%d].ovn_port", p, i), vf.OVNPort, "needs %s.ovn (the logical port is bound on the chassis's br-int)", p)
		}
	}
	for i, a := range g.Attachments {
		if a.OVNPort != "" {
			v.add(fmt.Sprintf("%s.attachments[%d].ovn_port", p, i), a.OVNPort, "needs %s.ovn (the logical port is bound on the chassis's br-int)", p)
		}
	}
}

// validateOVNTraffic checks validate.ovn_from and validate.ovn_to: an ovn
// section, logical switch port names, ovn_from one of the group's
// ovn_port (the probe enters br-int at its representor).
func (v *validator) validateOVNTraffic(gc groupCheck) {
	g, p := gc.g, gc.p+".validate"
	for _, f := range []struct{ field, val string }{{"ovn_from", g.Validate.OVNFrom}, {"ovn_to", g.Validate.OVNTo}} {
		switch {
		case f.val == "":
		case g.OVN == nil:
			v.add(p+"."+f.field, f.val, "needs %s.ovn (the OVN traffic check runs between logical switch ports)", gc.p)
		case !ovnPortRE().MatchString(f.val):
			v.add(p+"."+f.field, f.val, "is not a logical switch port name (1-255 characters of [A-Za-z0-9_.:@/+-])")
		}
	}
	if from := g.Validate.OVNFrom; from != "" && g.OVN != nil && ovnPortRE().MatchString(from) {
		if err := g.OVNTrafficFrom(from, gc.p); err != nil {
			v.add(p+".ovn_from", from, "%v", err)
		}
	}
	if to := g.Validate.OVNTo; to != "" && to == g.Validate.OVNFrom {
		v.add(p+".ovn_to", to, "is ovn_from too: the check runs between two ports")
	}
}

// OVNTrafficFrom checks that lsp is one of the group's ovn_port (at
// config path p): the OVN traffic check's probe enters br-int at its
// representor, which vflag bound.
func (g *Group) OVNTrafficFrom(lsp, p string) error {
	var names []string
	for _, port := range g.OVNPorts(p) {
		if port.LSP == lsp {
			return nil
		}
		names = append(names, port.LSP)
	}
	if len(names) == 0 {
		return fmt.Errorf("is not an ovn_port of the group: it has none (give a vfs[] or attachments[] entry an ovn_port)")
	}
	return fmt.Errorf("is not an ovn_port of the group (%s)", strings.Join(names, ", "))
}

// ValidOVNPortName tells whether s can name a logical switch port (what
// ovn_port and validate.ovn_from/ovn_to accept).
func ValidOVNPortName(s string) bool { return ovnPortRE().MatchString(s) }

// noVLANUnderOVN refuses the VLAN settings of a VF or a pool's portgroup
// at path p in a group with ovn: br-int's ports take none (OVN tags a
// localnet port or the logical port itself).
func (v *validator) noVLANUnderOVN(p string, vlan int, mode string, trunks []int) {
	if vlan != 0 {
		v.add(p+".vlan", vlan, "is not allowed with ovn: br-int's ports carry no tag (give the logical switch a localnet port with tag_request, or the LSP a tag)")
	}
	if mode != "" {
		v.add(p+".vlan_mode", mode, "is not allowed with ovn: br-int's ports carry no VLAN columns")
	}
	if len(trunks) > 0 {
		v.add(p+".trunks", fmt.Sprint(trunks), "are not allowed with ovn: br-int's ports carry no VLAN columns")
	}
}
