package sim

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/vflag/vflag/eswitch"
)

// A tunnel's underlay (eswitch.Underlay): addresses on any netdev, VLAN
// interfaces, routes through a gateway and neighbour entries.
//
// Rules (net/8021q vlan.c, vlan_dev.c, vlan_netlink.c; net/ipv4 devinet.c,
// fib_semantics.c; net/ipv6 addrconf.c):
//   - a VLAN interface's parent must exist (ENODEV) and the id be 1-4094
//     (ERANGE); two VLAN interfaces with one parent and id: EEXIST; it is
//     born down with its parent's MTU, takes no MTU above it (ERANGE), is
//     lowered with it, is oper up when it and its parent are, and goes when
//     its parent goes;
//   - an address already on the device: EEXIST; another device may hold
//     the same address (the kernel allows it; vflag refuses it); deleting
//     one that is not there: EADDRNOTAVAIL;
//   - a route's gateway must be inside a prefix of an address on its
//     device (ENETUNREACH "Nexthop has invalid gateway"); the same route
//     twice: EEXIST; deleting one that is not there: ESRCH; routes and
//     neighbour entries go with their device;
//   - neighbour entries are set by the test (Host.SetNeigh), as the kernel
//     would after ARP/ND or "ip neigh del"; without one, an address of the
//     spec's switch_peers resolves (REACHABLE) on a netdev that is up,
//     reaches the simulated switch (a bond of PFs with carrier, a VLAN
//     interface on one, a PF) and has an address whose prefix holds it:
//     the hosts behind the switch answer ARP/ND.

const roleVLAN = "vlan"

// underlayState is the underlay's part of the state: routes and
// neighbours (addresses live on their netdev).
type underlayState struct {
	Routes []eswitch.Route   `json:"routes,omitempty"`
	Neighs map[string]string `json:"neighs,omitempty"` // "dev ip" -> state
}

var _ eswitch.Underlay = (*Host)(nil)

// Addrs implements eswitch.Underlay.
func (h *Host) Addrs(name string) ([]string, error) {
	var out []string
	err := h.view(func(st *state, now int64) error {
		nd := st.link(name, now)
		if nd == nil {
			return kernelErr("ip addr show dev "+name, st.notFound(name))
		}
		out = slices.Clone(nd.Addrs)
		sort.Strings(out)
		return nil
	})
	return out, err
}

// AddAddr implements eswitch.Underlay.
func (h *Host) AddAddr(name, cidr string) error {
	return h.update(func(st *state, now int64) (bool, error) {
		op := "ip addr add " + cidr + " dev " + name
		nd := st.link(name, now)
		if nd == nil {
			return false, kernelErr(op, st.notFound(name))
		}
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return false, kernelErr(op, fail(syscall.EINVAL, "invalid address %q", cidr))
		}
		for _, a := range nd.Addrs {
			if q, _ := netip.ParsePrefix(a); q.Addr() == p.Addr() {
				return false, kernelErr(op, fail(syscall.EEXIST, "RTNETLINK answers: File exists"))
			}
		}
		nd.Addrs = append(nd.Addrs, p.String())
		return true, nil
	})
}

// DelAddr implements eswitch.Underlay.
func (h *Host) DelAddr(name, cidr string) error {
	return h.update(func(st *state, now int64) (bool, error) {
		op := "ip addr del " + cidr + " dev " + name
		nd := st.link(name, now)
		if nd == nil {
			return false, kernelErr(op, st.notFound(name))
		}
		p, _ := netip.ParsePrefix(cidr)
		i := slices.IndexFunc(nd.Addrs, func(a string) bool { q, _ := netip.ParsePrefix(a); return q == p })
		if i < 0 {
			return false, kernelErr(op, fail(syscall.EADDRNOTAVAIL, "RTNETLINK answers: Cannot assign requested address"))
		}
		nd.Addrs = slices.Delete(nd.Addrs, i, i+1)
		return true, nil
	})
}

// AddVLAN implements eswitch.Underlay.
// Two writes, as AddBond: the create, then the alias.
func (h *Host) AddVLAN(name, parent string, id int, alias string) error {
	err := h.update(func(st *state, now int64) (bool, error) {
		op := fmt.Sprintf("ip link add link %s name %s type vlan id %d", parent, name, id)
		p := st.link(parent, now)
		switch {
		case p == nil:
			return false, kernelErr(op, st.notFound(parent))
		case !ifnameOK(name):
			return false, kernelErr(op, fail(syscall.EINVAL, "invalid interface name %q", name))
		case id < 1 || id > 4094:
			return false, kernelErr(op, fail(syscall.ERANGE, "Invalid VLAN id"))
		case st.Netdevs[name] != nil:
			return false, kernelErr(op, fail(syscall.EEXIST, "RTNETLINK answers: File exists"))
		}
		for _, nd := range st.Netdevs {
			if nd.Role == roleVLAN && nd.Parent == parent && nd.VLANID == id {
				return false, kernelErr(op, fail(syscall.EEXIST, "RTNETLINK answers: File exists"))
			}
		}
		st.addNetdev(&netdev{Name: name, Role: roleVLAN, Parent: parent, VLANID: id, MAC: p.MAC, PermMAC: p.MAC,
			MTU: p.MTU, ReadyAt: now})
		return true, nil
	})
	if err != nil || alias == "" {
		return err
	}
	return h.setAlias(name, alias)
}

// VLAN implements eswitch.Underlay.
func (h *Host) VLAN(name string) (string, int, error) {
	var parent string
	var id int
	err := h.view(func(st *state, now int64) error {
		nd := st.link(name, now)
		if nd == nil {
			return kernelErr("ip -d link show "+name, st.notFound(name))
		}
		parent, id = nd.Parent, nd.VLANID
		return nil
	})
	return parent, id, err
}

// Routes implements eswitch.Underlay.
func (h *Host) Routes(dev string) ([]eswitch.Route, error) {
	var out []eswitch.Route
	err := h.view(func(st *state, now int64) error {
		if st.link(dev, now) == nil {
			return kernelErr("ip route show dev "+dev, st.notFound(dev))
		}
		for _, r := range st.Underlay.Routes {
			if r.Dev == dev {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}

// AddRoute implements eswitch.Underlay.
func (h *Host) AddRoute(r eswitch.Route) error {
	return h.update(func(st *state, now int64) (bool, error) {
		op := "ip route add " + r.String()
		nd := st.link(r.Dev, now)
		if nd == nil {
			return false, kernelErr(op, st.notFound(r.Dev))
		}
		dst, err1 := netip.ParsePrefix(r.Dst)
		gw, err2 := netip.ParseAddr(r.Gw)
		if err1 != nil || err2 != nil {
			return false, kernelErr(op, fail(syscall.EINVAL, "invalid route"))
		}
		if !onLink(nd, gw) {
			return false, kernelErr(op, fail(syscall.ENETUNREACH, "Error: Nexthop has invalid gateway."))
		}
		for _, q := range st.Underlay.Routes {
			if q.Dst == dst.String() {
				return false, kernelErr(op, fail(syscall.EEXIST, "RTNETLINK answers: File exists"))
			}
		}
		st.Underlay.Routes = append(st.Underlay.Routes, eswitch.Route{Dst: dst.String(), Gw: gw.String(), Dev: r.Dev})
		sort.Slice(st.Underlay.Routes, func(i, j int) bool { return st.Underlay.Routes[i].Dst < st.Underlay.Routes[j].Dst })
		return true, nil
	})
}

// DelRoute implements eswitch.Underlay.
func (h *Host) DelRoute(r eswitch.Route) error {
	return h.update(func(st *state, now int64) (bool, error) {
		i := slices.Index(st.Underlay.Routes, r)
		if i < 0 {
			return false, kernelErr("ip route del "+r.String(), fail(syscall.ESRCH, "RTNETLINK answers: No such process"))
		}
		st.Underlay.Routes = slices.Delete(st.Underlay.Routes, i, i+1)
		return true, nil
	})
}

// Neigh implements eswitch.Underlay.
func (h *Host) Neigh(dev, ip string) (string, error) {
	var s string
	err := h.view(func(st *state, now int64) error {
		if st.link(dev, now) == nil {
			return kernelErr("ip neigh show dev "+dev, st.notFound(dev))
		}
		s = st.Underlay.Neighs[dev+" "+ip]
		if s == "" && st.switchAnswers(dev, ip, now) {
			s = "REACHABLE"
		}
		return nil
	})
	return s, err
}

// switchAnswers tells whether a host behind the simulated switch answers
// for ip on dev: ip is one of the spec's switch_peers, dev is oper up, has
// an address whose prefix holds ip, and reaches the switch (a PF, a bond
// with a slave, or a VLAN interface on one of them).
func (st *state) switchAnswers(dev, ip string, now int64) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil || !slices.Contains(st.Spec.SwitchPeers, a.String()) {
		return false
	}
	nd := st.link(dev, now)
	if nd == nil || !st.operUp(nd, now) {
		return false
	}
	onLink := false
	for _, s := range nd.Addrs {
		if p, err := netip.ParsePrefix(s); err == nil && p.Contains(a) {
			onLink = true
		}
	}
	return onLink && st.reachesSwitch(nd, 0)
}

// reachesSwitch tells whether nd's frames leave through a PF: a PF, a bond
// with a PF slave, a VLAN interface on one of them.
func (st *state) reachesSwitch(nd *netdev, depth int) bool {
	if nd == nil || depth > 4 {
		return false
	}
	switch nd.Role {
	case rolePF:
		return true
	case roleVLAN:
		return st.reachesSwitch(st.Netdevs[nd.Parent], depth+1)
	case roleBond:
		for _, s := range nd.Bond.Slaves {
			if st.reachesSwitch(st.Netdevs[s], depth+1) {
				return true
			}
		}
	}
	return false
}

// SetNeigh sets the neighbour entry of ip on dev to state (an "ip neigh"
// state such as REACHABLE), or removes it with "" (ip neigh del).
func (h *Host) SetNeigh(dev, ip, nstate string) error {
	return h.update(func(st *state, now int64) (bool, error) {
		if st.link(dev, now) == nil {
			return false, kernelErr("ip neigh replace "+ip+" dev "+dev, st.notFound(dev))
		}
		key := dev + " " + ip
		if st.Underlay.Neighs[key] == nstate {
			return false, nil
		}
		if nstate == "" {
			delete(st.Underlay.Neighs, key)
			return true, nil
		}
		if st.Underlay.Neighs == nil {
			st.Underlay.Neighs = map[string]string{}
		}
		st.Underlay.Neighs[key] = nstate
		return true, nil
	})
}

// onLink tells whether gw is inside the prefix of an address of nd.
func onLink(nd *netdev, gw netip.Addr) bool {
	for _, a := range nd.Addrs {
		if p, err := netip.ParsePrefix(a); err == nil && p.Masked().Contains(gw) {
			return true
		}
	}
	return false
}

// removeUnderlay drops what goes with a netdev that is unregistered: its
// VLAN interfaces (they go first, as the kernel unregisters uppers), its
// routes and neighbour entries.
func (st *state) removeUnderlay(now int64, name string) {
	for _, nd := range st.Netdevs {
		if nd.Role == roleVLAN && nd.Parent == name {
			st.removeNetdev(now, nd.Name)
		}
	}
	st.Underlay.Routes = slices.DeleteFunc(st.Underlay.Routes, func(r eswitch.Route) bool { return r.Dev == name })
	for k := range st.Underlay.Neighs {
		if strings.HasPrefix(k, name+" ") {
			delete(st.Underlay.Neighs, k)
		}
	}
}

// lowerVLANMTU lowers the MTU of the VLAN interfaces on parent to mtu
// (vlan_device_event NETDEV_CHANGEMTU).
func (st *state) lowerVLANMTU(parent string, mtu int) {
	for _, nd := range st.Netdevs {
		if nd.Role == roleVLAN && nd.Parent == parent && nd.MTU > mtu {
			nd.MTU = mtu
		}
	}
}

// dumpUnderlay renders addresses, routes and neighbours, when there are any.
func (st *state) dumpUnderlay(w func(string, ...any), nds []*netdev) {
	var lines []string
	for _, nd := range nds {
		if nd.Role == roleVLAN {
			lines = append(lines, fmt.Sprintf("  %s vlan %d on %s", nd.Name, nd.VLANID, nd.Parent))
		}
		if len(nd.Addrs) > 0 {
			a := slices.Clone(nd.Addrs)
			sort.Strings(a)
			lines = append(lines, fmt.Sprintf("  %s addrs %s", nd.Name, strings.Join(a, " ")))
		}
	}
	for _, r := range st.Underlay.Routes {
		lines = append(lines, "  route "+r.String())
	}
	keys := make([]string, 0, len(st.Underlay.Neighs))
	for k := range st.Underlay.Neighs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("  neigh %s %s", k, st.Underlay.Neighs[k]))
	}
	if len(lines) == 0 {
		return
	}
	w("underlay:\n")
	for _, l := range lines {
		w("%s\n", l)
	}
}

// The eswitch's encap mode (eswitch.EncapModer; mlx5
// mlx5_devlink_eswitch_encap_mode_set): basic (a PF's EncapMode "") or
// none; another value EOPNOTSUPP; stored in legacy; in switchdev refused
// with EOPNOTSUPP while a flower rule is in the eswitch's hardware. A
// driver other than mlx5 reports none (ErrNotSupported).

var _ eswitch.EncapModer = (*Host)(nil)

// EncapMode implements eswitch.EncapModer.
func (h *Host) EncapMode(d eswitch.Devlink) (string, error) {
	var mode string
	err := h.view(func(st *state, now int64) error {
		nic, pf, e := st.devlinkPF(d)
		if e == nil && nic.Driver != "" && nic.Driver != "mlx5_core" {
			e = fail(syscall.EOPNOTSUPP, "no encap-mode").with(eswitch.ErrNotSupported)
		}
		if e != nil {
			return kernelErr("devlink dev eswitch show "+d.String(), e)
		}
		mode = pf.EncapMode
		if mode == "" {
			mode = eswitch.EncapBasic
		}
		return nil
	})
	return mode, err
}

// SetEncapMode implements eswitch.EncapModer.
func (h *Host) SetEncapMode(d eswitch.Devlink, mode string) error {
	op := fmt.Sprintf("devlink dev eswitch set %s encap-mode %s", d, mode)
	return h.update(func(st *state, now int64) (bool, error) {
		nic, pf, e := st.devlinkPF(d)
		switch {
		case e != nil:
		case nic.Driver != "" && nic.Driver != "mlx5_core":
			e = fail(syscall.EOPNOTSUPP, "Operation not supported").with(eswitch.ErrNotSupported)
		case mode != eswitch.EncapBasic && mode != eswitch.EncapNone:
			e = fail(syscall.EOPNOTSUPP, "Operation not supported")
		case pf.Mode == eswitch.ModeSwitchdev && st.eswitchRules(pf, now) > 0:
			e = fail(syscall.EOPNOTSUPP, "Can't set encapsulation when flows are configured")
		}
		if e != nil {
			return false, kernelErr(op, e)
		}
		cur := pf.EncapMode
		if cur == "" {
			cur = eswitch.EncapBasic
		}
		if cur == mode {
			return false, nil
		}
		pf.EncapMode = mode
		if mode == eswitch.EncapBasic {
			pf.EncapMode = ""
		}
		return true, nil
	})
}
