package eswitch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Route is one route of a tunnel's underlay: Dst through Gw on Dev
// ("ip route add $dst via $gw dev $dev").
type Route struct {
	Dst string `json:"dst"` // "198.51.100.0/24"
	Gw  string `json:"gw"`
	Dev string `json:"dev"`
}

func (r Route) String() string { return r.Dst + " via " + r.Gw + " dev " + r.Dev }

// Neighbour states as "ip neigh" prints them; NeighNone: no entry.
const (
	NeighNone      = ""
	NeighReachable = "REACHABLE"
	NeighStale     = "STALE"
	NeighFailed    = "FAILED"
)

// NeighResolved tells whether a neighbour state gives a MAC address: what
// mlx5 needs to offload an encap rule (an entry that is absent, INCOMPLETE
// or FAILED leaves the rule in software until it resolves).
func NeighResolved(state string) bool {
	switch state {
	case NeighNone, NeighFailed, "INCOMPLETE", "NOARP":
		return false
	}
	return true
}

// Underlay is what a Kernel adds for a tunnel's underlay: addresses, VLAN
// interfaces, routes and neighbours. Netlink and the simulated host
// implement it.
type Underlay interface {
	// Addrs lists an interface's global addresses ("ip -o addr show dev $name scope global").
	Addrs(name string) ([]string, error)
	// AddAddr adds an address with its prefix ("ip addr add $cidr dev $name").
	AddAddr(name, cidr string) error
	// DelAddr removes it ("ip addr del $cidr dev $name").
	DelAddr(name, cidr string) error
	// AddVLAN creates a VLAN interface on parent, down, with an alias
	// ("ip link add link $parent name $name type vlan id $id; ip link set $name alias $alias").
	AddVLAN(name, parent string, id int, alias string) error
	// VLAN reads a VLAN interface's parent and id ("ip -d link show $name");
	// id 0 when the link is not a VLAN interface.
	VLAN(name string) (parent string, id int, err error)
	// Routes lists the routes through a gateway on dev ("ip route show dev $dev").
	Routes(dev string) ([]Route, error)
	// AddRoute adds one ("ip route add $dst via $gw dev $dev").
	AddRoute(r Route) error
	// DelRoute removes one ("ip route del $dst via $gw dev $dev").
	DelRoute(r Route) error
	// Neigh reads the state of ip's neighbour entry on dev ("ip neigh show
	// $ip dev $dev"); NeighNone when there is none.
	Neigh(dev, ip string) (string, error)
}

var _ Underlay = Netlink{}

func parseCIDR(cidr string) (*netlink.Addr, error) {
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", cidr, err)
	}
	return a, nil
}

// AddAddr implements Underlay.
func (n Netlink) AddAddr(name, cidr string) error {
	return n.addrOp(name, cidr, "add", func(h *netlink.Handle, l netlink.Link, a *netlink.Addr) error { return h.AddrAdd(l, a) })
}

// DelAddr implements Underlay.
func (n Netlink) DelAddr(name, cidr string) error {
	return n.addrOp(name, cidr, "del", func(h *netlink.Handle, l netlink.Link, a *netlink.Addr) error { return h.AddrDel(l, a) })
}

func (n Netlink) addrOp(name, cidr, op string, fn func(*netlink.Handle, netlink.Link, *netlink.Addr) error) error {
	a, err := parseCIDR(cidr)
	if err != nil {
		return err
	}
	return n.onLink(name, func(h *netlink.Handle, l netlink.Link) error {
		if err := fn(h, l, a); err != nil {
			return fmt.Errorf("ip addr %s %s dev %s: %w", op, cidr, name, err)
		}
		return nil
	})
}

// AddVLAN implements Underlay.
func (n Netlink) AddVLAN(name, parent string, id int, alias string) error {
	h, done, err := n.handle()
	if err != nil {
		return err
	}
	defer done()
	p, err := linkByName(h, parent)
	if err != nil {
		return err
	}
	attrs := netlink.NewLinkAttrs()
	// The alias goes in the create as well, which Linux ignores there
	// (see AddBond): the second request sets it.
	attrs.Name, attrs.ParentIndex, attrs.Alias = name, p.Attrs().Index, alias
	v := &netlink.Vlan{LinkAttrs: attrs, VlanId: id, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q}
	if err := h.LinkAdd(v); err != nil {
		return fmt.Errorf("ip link add link %s name %s type vlan id %d: %w", parent, name, id, err)
	}
	if alias != "" {
		if err := h.LinkSetAlias(v, alias); err != nil {
			return fmt.Errorf("ip link set %s alias %s: %w", name, alias, err)
		}
	}
	return nil
}

// VLAN implements Underlay.
func (n Netlink) VLAN(name string) (parent string, id int, err error) {
	err = n.onLink(name, func(h *netlink.Handle, l netlink.Link) error {
		v, ok := l.(*netlink.Vlan)
		if !ok {
			return nil
		}
		id = v.VlanId
		p, err := h.LinkByIndex(v.ParentIndex)
		if err != nil {
			return fmt.Errorf("ip link show %s: its parent %d: %w", name, v.ParentIndex, err)
		}
		parent = p.Attrs().Name
		return nil
	})
	return parent, id, err
}

// Routes implements Underlay.
func (n Netlink) Routes(dev string) ([]Route, error) {
	h, done, err := n.handle()
	if err != nil {
		return nil, err
	}
	defer done()
	l, err := linkByName(h, dev)
	if err != nil {
		return nil, err
	}
	list, err := retryDump("ip route show dev "+dev, func() ([]netlink.Route, error) { return h.RouteList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	var out []Route
	for _, r := range list {
		if r.Dst == nil || r.Gw == nil || r.Table != unix.RT_TABLE_MAIN {
			continue
		}
		out = append(out, Route{Dst: r.Dst.String(), Gw: r.Gw.String(), Dev: dev})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dst < out[j].Dst })
	return out, nil
}

func (n Netlink) routeOp(r Route, op string, fn func(*netlink.Handle, *netlink.Route) error) error {
	_, dst, err := net.ParseCIDR(r.Dst)
	if err != nil {
		return fmt.Errorf("route %s: %w", r, err)
	}
	gw := net.ParseIP(r.Gw)
	if gw == nil {
		return fmt.Errorf("route %s: gateway %q is not an address", r, r.Gw)
	}
	h, done, err := n.handle()
	if err != nil {
		return err
	}
	defer done()
	l, err := linkByName(h, r.Dev)
	if err != nil {
		return err
	}
	if err := fn(h, &netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: gw}); err != nil {
		return fmt.Errorf("ip route %s %s: %w", op, r, err)
	}
	return nil
}

// AddRoute implements Underlay.
func (n Netlink) AddRoute(r Route) error {
	return n.routeOp(r, "add", func(h *netlink.Handle, rt *netlink.Route) error { return h.RouteAdd(rt) })
}

// DelRoute implements Underlay.
func (n Netlink) DelRoute(r Route) error {
	return n.routeOp(r, "del", func(h *netlink.Handle, rt *netlink.Route) error { return h.RouteDel(rt) })
}

// Neigh implements Underlay.
func (n Netlink) Neigh(dev, ip string) (string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", fmt.Errorf("neighbour %q: %w", ip, err)
	}
	h, done, err := n.handle()
	if err != nil {
		return "", err
	}
	defer done()
	l, err := linkByName(h, dev)
	if err != nil {
		return "", err
	}
	fam := netlink.FAMILY_V4
	if a.Is6() {
		fam = netlink.FAMILY_V6
	}
	list, err := retryDump("ip neigh show dev "+dev, func() ([]netlink.Neigh, error) { return h.NeighList(l.Attrs().Index, fam) })
	if err != nil {
		return "", err
	}
	for _, nb := range list {
		if nb.IP.Equal(net.IP(a.AsSlice())) {
			return neighState(nb.State), nil
		}
	}
	return NeighNone, nil
}

func neighState(s int) string {
	switch {
	case s&netlink.NUD_PERMANENT != 0:
		return "PERMANENT"
	case s&netlink.NUD_REACHABLE != 0:
		return NeighReachable
	case s&netlink.NUD_STALE != 0:
		return NeighStale
	case s&netlink.NUD_DELAY != 0:
		return "DELAY"
	case s&netlink.NUD_PROBE != 0:
		return "PROBE"
	case s&netlink.NUD_INCOMPLETE != 0:
		return "INCOMPLETE"
	case s&netlink.NUD_NOARP != 0:
		return "NOARP"
	}
	return NeighFailed
}

// AddrExists tells whether an error of AddAddr or AddRoute means the
// address or route is there already.
func AddrExists(err error) bool { return errors.Is(err, syscall.EEXIST) }

// AddrGone tells whether an error of DelAddr or DelRoute means it is
// already gone (or its device is).
func AddrGone(err error) bool {
	return errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.ESRCH) || errors.Is(err, ErrLinkNotFound)
}
