package validate

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/vflag/vflag/eswitch"
)

// TunnelWant is a group's tunnel as the config implies it (Target.Tunnel).
type TunnelWant struct {
	Type string
	Dev  string // the underlay device: the bond or its VLAN interface
	// Local is the local endpoint's address with its prefix.
	Local string
	// Remotes are the fixed remote endpoints (none with remote_ip=flow).
	Remotes []string
	// Routes are the configured routes through the gateway on Dev.
	Routes []eswitch.Route
	// RepMTU is the representors' MTU (the group's mtu; 0: 1500, the
	// kernel's), Overhead what the tunnel's headers add.
	RepMTU, Overhead int
	// InnerVLAN explains an inner VLAN tag counted in Overhead (" and an
	// inner VLAN tag (vfs[0] is tagged on the default segment)"), "" without.
	InnerVLAN string
	Ports     []TunnelPortWant
	// Section is the config section the underlay comes from, for the
	// fixes: "tunnel" ("" too) or "ovn" (OVN's encap, whose remotes are
	// the other chassis and whose tunnel ports are ovn-controller's).
	Section string
}

// TunnelPortWant is one tunnel port of the bridge.
type TunnelPortWant struct {
	Name, Type string
	// Tag, VLANMode and Trunks are the port's VLAN columns: a segment's
	// VLAN as its access tag, or the untagged segment's trunks.
	Tag      int
	VLANMode string
	Trunks   []int
	Options  map[string]string
}

// Tunnel check names (docs/troubleshooting.md's check index).
const (
	TunnelUnderlayName = "tunnel/underlay"
	TunnelMTUName      = "tunnel/mtu"
)

// tunnelChecks are a tunnel group's checks: the local address on its
// device, a route and a resolved neighbour for each remote endpoint, the
// MTU chain, and each tunnel port with its options.
func tunnelChecks(k eswitch.Kernel, t Target, facts Facts) []Check {
	tw := t.Tunnel
	u, ok := k.(eswitch.Underlay)
	if !ok {
		return []Check{skip(TunnelUnderlayName, "this host's kernel interface reads no addresses or routes")}
	}
	local, _ := netip.ParsePrefix(tw.Local)
	out := []Check{underlayCheck(u, tw)}
	routes, rerr := u.Routes(tw.Dev)
	for _, r := range tw.Remotes {
		out = append(out, remoteChecks(u, tw, local, r, routes, rerr)...)
	}
	out = append(out, tunnelMTUCheck(k, t))
	for _, p := range tw.Ports {
		out = append(out, tunnelPortCheck(t, p, facts))
	}
	return out
}

func underlayCheck(u eswitch.Underlay, tw *TunnelWant) Check {
	addrs, err := u.Addrs(tw.Dev)
	switch {
	case err != nil:
		return failed(TunnelUnderlayName, "cannot read the addresses of %s: %v", tw.Dev, err)
	case !slices.Contains(addrs, tw.Local):
		return failed(TunnelUnderlayName, "the tunnel's local address %s is not on %s (it has %s): the tunnel ports' local_ip is no address of this host, nothing is encapsulated (vflag up puts it there)", tw.Local, tw.Dev, orDash(strings.Join(addrs, " ")))
	}
	return pass(TunnelUnderlayName, "local address %s on %s", tw.Local, tw.Dev)
}

// remoteChecks: the remote is reached through the underlay device (inside
// the local prefix, or by a configured route there), and the neighbour of
// its next hop is resolved: mlx5 offloads an encap rule only with the
// next hop's MAC (until then the flow stays in software).
func remoteChecks(u eswitch.Underlay, tw *TunnelWant, local netip.Prefix, remote string, routes []eswitch.Route, rerr error) []Check {
	rn, nn := "tunnel/route/"+remote, "tunnel/neigh/"+remote
	a, err := netip.ParseAddr(remote)
	if err != nil {
		return []Check{failed(rn, "remote %q is not an address", remote)}
	}
	hop := remote
	var out []Check
	switch {
	case local.Masked().Contains(a):
		out = append(out, pass(rn, "%s is on the link of %s (%s)", remote, tw.Dev, local.Masked()))
	case rerr != nil:
		return []Check{failed(rn, "cannot read the routes of %s: %v", tw.Dev, rerr)}
	default:
		var via *eswitch.Route
		for i, r := range routes {
			if p, err := netip.ParsePrefix(r.Dst); err == nil && p.Contains(a) {
				via = &routes[i]
			}
		}
		if via == nil {
			return []Check{failed(rn, "no route to %s through %s: encapsulated packets leave by another device or not at all (vflag up adds tunnel.routes)", remote, tw.Dev)}
		}
		hop = via.Gw
		out = append(out, pass(rn, "%s through %s", remote, via))
	}
	st, err := u.Neigh(tw.Dev, hop)
	switch {
	case err != nil:
		out = append(out, failed(nn, "cannot read the neighbour %s on %s: %v", hop, tw.Dev, err))
	case !eswitch.NeighResolved(st):
		out = append(out, failed(nn, "the neighbour %s of remote %s on %s is unresolved (%s): mlx5 offloads no encap rule until it resolves, the flow stays in software; check that %s answers ARP/ND through the bond (ping -I %s %s)", hop, remote, tw.Dev, orDash(st), hop, tw.Dev, hop))
	default:
		out = append(out, pass(nn, "neighbour %s of remote %s on %s: %s", hop, remote, tw.Dev, st))
	}
	return out
}

// tunnelMTUCheck: the underlay device's MTU leaves room for the tunnel's
// headers above the representors' MTU.
func tunnelMTUCheck(k eswitch.Kernel, t Target) Check {
	tw := t.Tunnel
	reps := tw.RepMTU
	if reps == 0 {
		reps = 1500
	}
	l, err := k.Link(tw.Dev)
	if err != nil {
		return failed(TunnelMTUName, "cannot read the MTU of %s: %v", tw.Dev, err)
	}
	if need := reps + tw.Overhead; l.MTU < need {
		return failed(TunnelMTUName, "%s has MTU %d, but the representors' %d plus %d bytes of tunnel headers%s need %d: full-size frames are dropped on the underlay (set %s.underlay_mtu to %d or more, or lower mtu)", tw.Dev, l.MTU, reps, tw.Overhead, tw.InnerVLAN, need, sectionOf(tw), need)
	}
	return pass(TunnelMTUName, "%s MTU %d fits the representors' %d plus %d bytes of tunnel headers%s", tw.Dev, l.MTU, reps, tw.Overhead, tw.InnerVLAN)
}

func sectionOf(tw *TunnelWant) string {
	if tw.Section == "" {
		return "tunnel"
	}
	return tw.Section
}

func tunnelPortCheck(t Target, want TunnelPortWant, facts Facts) Check {
	name := "tunnel/port/" + want.Name
	br := facts.Bridge
	if facts.BridgeErr != nil || br == nil || !br.Exists {
		return failed(name, "bridge %s cannot be read or does not exist", t.Bridge)
	}
	p, ok := br.Ports[want.Name]
	switch {
	case !ok:
		return failed(name, "tunnel port %s is not a port of bridge %s (vflag up adds it)", want.Name, t.Bridge)
	case p.Type != want.Type || !maps.Equal(p.Options, want.Options):
		return failed(name, "tunnel port %s is %s %v, want %s %v (vflag up sets them)", want.Name, orDash(p.Type), p.Options, want.Type, want.Options)
	case p.Tag != want.Tag || p.VLANMode != want.VLANMode || !slices.Equal(p.Trunks, want.Trunks):
		return failed(name, "tunnel port %s has %s, want %s: it carries another segment's frames or drops its own (vflag up sets them)", want.Name, VLANColumns(p.Tag, p.VLANMode, p.Trunks), VLANColumns(want.Tag, want.VLANMode, want.Trunks))
	case p.OFPort <= 0:
		return failed(name, "tunnel port %s has no ofport (%d): %s", want.Name, p.OFPort, orDash(p.Error))
	}
	return pass(name, "%s port %s: key %s, remote %s, ofport %d", want.Type, want.Name, want.Options["key"], want.Options["remote_ip"], p.OFPort)
}

// VLANColumns shows a port's VLAN columns: "untagged", "tag 100",
// "tag 100 vlan_mode native-untagged trunks [20 30]".
func VLANColumns(tag int, mode string, trunks []int) string {
	s := "untagged"
	if tag != 0 {
		s = fmt.Sprintf("tag %d", tag)
	}
	if mode != "" {
		s += " vlan_mode " + mode
	}
	if len(trunks) > 0 {
		s += fmt.Sprintf(" trunks %v", slices.Sorted(slices.Values(trunks)))
	}
	return s
}
