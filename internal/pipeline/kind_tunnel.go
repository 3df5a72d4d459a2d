package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/teardown"
)

// The underlay of a group with a tunnel (DESIGN.md step 6, after the bond
// and its MTU, before the bridge's tunnel ports in step 10): the VLAN
// interface on the bond, the local endpoint's address and the routes to
// the remote endpoints. The tunnel ports themselves are ports of the
// bridge's one transaction (bridgeSpec), undone with it.

// tunnelVLANKind creates the VLAN interface that carries the underlay
// when the tunnel has underlay_vlan, marked as vflag's, and brings it up
// at the tunnel's underlay_mtu.
//
//	ip link add link $bond name $bond.$vlan type vlan id $vlan; ip link set $bond.$vlan alias vflag:$group mtu $mtu up
type tunnelVLANKind struct{}

type tunnelVLANRecord struct {
	Name    string `json:"name"`
	Parent  string `json:"parent"`
	ID      int    `json:"id"`
	Alias   string `json:"alias"`
	Created bool   `json:"created"`
	// The interface's claim, when the entry created it (claim.go).
	linkClaim
}

func (tunnelVLANKind) Name() string { return "tunnel.vlan" }
func (tunnelVLANKind) DependsOn() []string {
	return []string{bondKind{}.Name(), linkUpKind{}.Name(), mtuKind{}.Name()}
}

// tunnelAddrKind puts the local endpoint's address on the underlay device.
//
//	ip addr add $local dev $dev
type tunnelAddrKind struct{}

type tunnelAddrRecord struct {
	Dev  string `json:"dev"`
	CIDR string `json:"cidr"`
}

func (tunnelAddrKind) Name() string { return "tunnel.addr" }
func (tunnelAddrKind) DependsOn() []string {
	return []string{bondKind{}.Name(), tunnelVLANKind{}.Name()}
}

// tunnelRouteKind routes a prefix of remote endpoints through the gateway
// on the underlay device.
//
//	ip route add $dst via $gw dev $dev
type tunnelRouteKind struct{}

type tunnelRouteRecord struct {
	Route eswitch.Route `json:"route"`
}

func (tunnelRouteKind) Name() string { return "tunnel.route" }
func (tunnelRouteKind) DependsOn() []string {
	return []string{tunnelAddrKind{}.Name(), tunnelVLANKind{}.Name(), bondKind{}.Name()}
}

// underlayOf is the kernel's underlay surface; an error when it has none.
func (e *Env) underlayOf() (eswitch.Underlay, error) {
	u, ok := e.k.(eswitch.Underlay)
	if !ok {
		return nil, fmt.Errorf("this host's kernel interface has no addresses, VLAN interfaces or routes (eswitch.Underlay)")
	}
	return u, nil
}

// underlay is the phase: the VLAN interface, then the address, then the
// routes, each a batch (each needs the one before it).
func (run *groupRun) underlay(context.Context) ([]batch, error) {
	g := run.g
	t := g.Underlay() // a tunnel's, or an ovn section's encap address
	if t == nil {
		return nil, nil
	}
	e := run.e
	dev := g.UnderlayDev()
	var out []batch
	if t.VLAN != 0 {
		rec := tunnelVLANRecord{Name: dev, Parent: g.Bond.Name, ID: t.VLAN, Alias: BondAlias(g.Name)}
		out = append(out, batch{tunnelVLANKind{}.step(e, rec, t.MTU)})
	}
	out = append(out, batch{tunnelAddrKind{}.step(e, dev, t.Prefix().String(), BondAlias(g.Name))})
	var routes batch
	for _, r := range t.Routes {
		routes = append(routes, tunnelRouteKind{}.step(e, eswitch.Route{Dst: netip.MustParsePrefix(r).String(), Gw: t.Gateway, Dev: dev}))
	}
	if len(routes) > 0 {
		out = append(out, routes)
	}
	return out, nil
}

// claimedVLAN tells whether an unmarked VLAN interface is the one a
// pending entry was creating (claim.go): still as the create left it,
// down, the record's VLAN on the record's parent.
func (e *Env) claimedVLAN(l eswitch.Link, parent string, id int, want tunnelVLANRecord) bool {
	fresh := !l.AdminUp && l.Master == "" && parent == want.Parent && id == want.ID
	return e.claimed(tunnelVLANKind{}.Name(), l.Name, l, fresh)
}

func (k tunnelVLANKind) step(e *Env, want tunnelVLANRecord, mtu int) teardown.Step {
	// state reads the interface: absent, ours and as wanted (up, at mtu),
	// or what differs ("mark": a crashed run created it and did not set
	// its alias).
	state := func() (exists bool, todo []string, err error) {
		u, err := e.underlayOf()
		if err != nil {
			return false, nil, err
		}
		l, err := e.k.Link(want.Name)
		if errors.Is(err, eswitch.ErrLinkNotFound) {
			return false, []string{"create"}, nil
		}
		if err != nil {
			return false, nil, err
		}
		parent, id, err := u.VLAN(want.Name)
		if err != nil {
			return true, nil, err
		}
		if l.Alias != want.Alias && e.claimedVLAN(l, parent, id, want) {
			todo = append(todo, "mark")
		} else if l.Alias != want.Alias || parent != want.Parent || id != want.ID {
			return true, nil, fmt.Errorf("%s exists and is not vflag's VLAN %d on %s (alias %q, VLAN %d on %q): vflag leaves it alone", want.Name, want.ID, want.Parent, l.Alias, id, parent)
		}
		// Above mtu, the bond's MTU step (before this one, to the same
		// mtu) lowers it: the kernel never lets a VLAN's MTU exceed its
		// parent's and lowers it with the parent's (net/8021q/vlan.c,
		// vlan_device_event NETDEV_CHANGEMTU), so a plan would predict a
		// change that up never makes. Below mtu, nothing raises it.
		if mtu != 0 && l.MTU < mtu {
			todo = append(todo, fmt.Sprintf("mtu %d -> %d", l.MTU, mtu))
		}
		if !l.AdminUp {
			todo = append(todo, "up")
		}
		return true, todo, nil
	}
	return teardown.Step{Kind: k.Name(), ID: k.Name() + "/" + want.Name,
		Check: func(context.Context) (teardown.Change, error) {
			exists, todo, err := state()
			if err != nil {
				return teardown.Change{}, err
			}
			rec := want
			rec.Created = !exists
			if !exists {
				if rec.linkClaim, err = e.claimNow(); err != nil {
					return teardown.Change{}, err
				}
			}
			return teardown.Change{Needed: len(todo) > 0, Record: rec,
				Summary: fmt.Sprintf("VLAN interface %s (VLAN %d on %s): %s", want.Name, want.ID, want.Parent, orDash(abbreviate(todo, 4)))}, nil
		},
		Apply: func(context.Context) error {
			exists, todo, err := state()
			if err != nil {
				return err
			}
			u, _ := e.underlayOf()
			if !exists {
				if err := u.AddVLAN(want.Name, want.Parent, want.ID, want.Alias); err != nil {
					return err
				}
			}
			if slices.Contains(todo, "mark") {
				if err := e.markLink(want.Name, want.Alias); err != nil {
					return err
				}
			}
			if mtu != 0 {
				if err := e.k.SetLinkMTU(want.Name, mtu); err != nil {
					return err
				}
			}
			return e.k.SetLinkUp(want.Name, true)
		},
	}
}

// Undo deletes the VLAN interface vflag created, while it still carries
// vflag's alias.
func (tunnelVLANKind) Undo(_ context.Context, e *Env, r tunnelVLANRecord) (string, error) {
	if !r.Created {
		return "", nil
	}
	l, err := e.k.Link(r.Name)
	if gone(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if l.Alias != r.Alias {
		u, err := e.underlayOf()
		if err != nil {
			return "", err
		}
		parent, id, err := u.VLAN(r.Name)
		if err != nil || !e.claimedVLAN(l, parent, id, r) {
			return fmt.Sprintf("%s left alone: its alias is %q, not %q", r.Name, l.Alias, r.Alias), nil
		}
	}
	if err := e.k.DeleteLink(r.Name); err != nil && !gone(err) {
		return "", err
	}
	return "delete VLAN interface " + r.Name, nil
}

// step: ours is the alias of the group's own devices (the bond, its VLAN
// interfaces), whose address a prune of the run removes first (a changed
// underlay_vlan moves it).
func (k tunnelAddrKind) step(e *Env, dev, cidr, ours string) teardown.Step {
	rec := tunnelAddrRecord{Dev: dev, CIDR: cidr}
	return teardown.Step{Kind: k.Name(), ID: k.Name() + "/" + dev + "/" + cidr,
		Check: func(context.Context) (teardown.Change, error) {
			have, err := e.hasAddr(dev, cidr)
			if err != nil {
				return teardown.Change{}, err
			}
			if other, err := e.addrElsewhere(dev, cidr, ours); err != nil || other != "" {
				return teardown.Change{}, errors.Join(err, addrElsewhereErr(cidr, dev, other))
			}
			return teardown.Change{Needed: !have, Record: rec, Summary: fmt.Sprintf("address %s on %s", cidr, dev)}, nil
		},
		Apply: func(context.Context) error {
			u, err := e.underlayOf()
			if err != nil {
				return err
			}
			if err := u.AddAddr(dev, cidr); err != nil && !eswitch.AddrExists(err) {
				return err
			}
			return nil
		},
	}
}

func addrElsewhereErr(cidr, dev, other string) error {
	if other == "" {
		return nil
	}
	return fmt.Errorf("the underlay's address %s is already on %s: it must be on %s only (remove it there: ip addr del %s dev %s)", cidr, other, dev, cidr, other)
}

// hasAddr tells whether dev has cidr; a device that does not exist yet
// (an earlier step of the run makes it) has none.
func (e *Env) hasAddr(dev, cidr string) (bool, error) {
	u, err := e.underlayOf()
	if err != nil {
		return false, err
	}
	addrs, err := u.Addrs(dev)
	if gone(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(addrs, cidr), nil
}

// addrElsewhere names a device other than dev that holds cidr's address
// (any prefix), "" when none does; a device with the alias ours (the
// group's own) does not count.
func (e *Env) addrElsewhere(dev, cidr, ours string) (string, error) {
	u, err := e.underlayOf()
	if err != nil {
		return "", err
	}
	want, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", err
	}
	links, err := e.k.Links()
	if err != nil {
		return "", err
	}
	for _, l := range links {
		if l.Name == dev || ours != "" && l.Alias == ours {
			continue
		}
		addrs, err := u.Addrs(l.Name)
		if gone(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a); err == nil && p.Addr() == want.Addr() {
				return l.Name, nil
			}
		}
	}
	return "", nil
}

// Undo removes the address; already gone (or its device) is success.
func (tunnelAddrKind) Undo(_ context.Context, e *Env, r tunnelAddrRecord) (string, error) {
	u, err := e.underlayOf()
	if err != nil {
		return "", err
	}
	if err := u.DelAddr(r.Dev, r.CIDR); err != nil && !eswitch.AddrGone(err) {
		return "", err
	}
	return fmt.Sprintf("remove address %s from %s", r.CIDR, r.Dev), nil
}

func (k tunnelRouteKind) step(e *Env, r eswitch.Route) teardown.Step {
	return teardown.Step{Kind: k.Name(), ID: k.Name() + "/" + r.Dev + "/" + r.Dst,
		Check: func(context.Context) (teardown.Change, error) {
			u, err := e.underlayOf()
			if err != nil {
				return teardown.Change{}, err
			}
			have, err := u.Routes(r.Dev)
			if err != nil && !gone(err) {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: !slices.Contains(have, r), Record: tunnelRouteRecord{Route: r}, Summary: "route " + r.String()}, nil
		},
		Apply: func(context.Context) error {
			u, err := e.underlayOf()
			if err != nil {
				return err
			}
			have, err := u.Routes(r.Dev)
			if err != nil {
				return err
			}
			for _, h := range have {
				if h.Dst == r.Dst && h != r { // through another gateway: replaced
					if err := u.DelRoute(h); err != nil && !eswitch.AddrGone(err) {
						return err
					}
				}
			}
			if err := u.AddRoute(r); err != nil && !eswitch.AddrExists(err) {
				return err
			}
			return nil
		},
	}
}

// Undo removes the route; already gone (or its device) is success.
func (tunnelRouteKind) Undo(_ context.Context, e *Env, r tunnelRouteRecord) (string, error) {
	u, err := e.underlayOf()
	if err != nil {
		return "", err
	}
	if err := u.DelRoute(r.Route); err != nil && !eswitch.AddrGone(err) {
		return "", err
	}
	return "remove route " + r.Route.String(), nil
}

// tunnelPortSpecs are the group's tunnel ports as bridge ports.
func tunnelPortSpecs(g *config.Group) []ovs.PortSpec {
	var out []ovs.PortSpec
	for _, tp := range g.TunnelPorts() {
		out = append(out, onUntaggedSegment(g, ovs.PortSpec{Name: tp.Name, Type: tp.Type, Options: tp.Options, Tag: tp.Tag}))
	}
	return out
}

// TunnelWant is what validate checks of a group's tunnel; nil without one.
// A group with ovn has its underlay checked the same way (the encap
// address on its device, its routes, the MTU chain with OVN's overhead),
// without remotes or tunnel ports: ovn-controller makes those.
func TunnelWant(g *config.Group) *validate.TunnelWant {
	if o := g.OVN; o != nil && g.Tunnel == nil && g.Switchdev() {
		w := &validate.TunnelWant{Type: "OVN " + o.EncapTypeOf(), Dev: g.UnderlayDev(), Local: o.Prefix().String(), RepMTU: g.MTU, Overhead: g.TunnelOverhead()}
		for _, r := range o.Routes {
			if p, err := netip.ParsePrefix(r); err == nil {
				w.Routes = append(w.Routes, eswitch.Route{Dst: p.Masked().String(), Gw: o.Gateway, Dev: w.Dev})
			}
		}
		return w
	}
	t := g.Tunnel
	if t == nil || !g.Switchdev() {
		return nil
	}
	w := &validate.TunnelWant{Type: t.Type, Dev: g.UnderlayDev(), Local: t.Prefix().String(), RepMTU: g.MTU,
		Overhead: g.TunnelOverhead(), InnerVLAN: g.InnerVLANNote()}
	if !t.Flow() {
		w.Remotes = t.Remotes
	}
	for _, r := range t.Routes {
		if p, err := netip.ParsePrefix(r); err == nil {
			w.Routes = append(w.Routes, eswitch.Route{Dst: p.Masked().String(), Gw: t.Gateway, Dev: w.Dev})
		}
	}
	for _, p := range g.TunnelPorts() {
		ps := onUntaggedSegment(g, ovs.PortSpec{Tag: p.Tag})
		w.Ports = append(w.Ports, validate.TunnelPortWant{Name: p.Name, Type: p.Type, Tag: p.Tag, VLANMode: ps.VLANMode, Trunks: ps.Trunks, Options: p.Options})
	}
	return w
}
