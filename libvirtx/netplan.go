package libvirtx

// The one decision about a VF pool network: what EnsureNetwork does to
// libvirt's network of a NetworkSpec's name, or why it refuses. PlanNetwork
// (a plan, `vflag plan`) and EnsureNetwork (up) both read the network and
// call makeNetworkPlan; EnsureNetwork then carries out what it says.

import (
	"fmt"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// netSnapshot is one read of an existing network.
type netSnapshot struct {
	active, persistent, autostart bool
	live                          netView // the definition in effect
	cfg                           *netView
	ports                         []NetworkPort
}

// owned tells whether vflag's metadata is in the definition in effect or
// the persistent one, and the owner it names.
func (s netSnapshot) owned() (bool, string) {
	if s.live.meta != nil {
		return true, s.live.meta.Owner
	}
	if s.cfg != nil && s.cfg.meta != nil {
		return true, s.cfg.meta.Owner
	}
	return false, ""
}

// wantedNetwork normalizes s and returns it with its definition and that
// definition's view, what makeNetworkPlan compares libvirt's against.
func wantedNetwork(s NetworkSpec) (NetworkSpec, libvirtxml.Network, netView, error) {
	ns, err := normalizeNetwork(s)
	if err != nil {
		return ns, libvirtxml.Network{}, netView{}, err
	}
	def, err := networkDef(ns)
	if err != nil {
		return ns, def, netView{}, err
	}
	want, err := viewOf(def)
	if err != nil {
		return ns, def, netView{}, err
	}
	return ns, def, want, nil
}

// NetworkPlan is what EnsureNetwork does to libvirt's network of a
// NetworkSpec's name, or why it refuses: PlanNetwork says it without a
// write, EnsureNetwork carries it out.
type NetworkPlan struct {
	Name string
	// Exists: libvirt has a network of that name. Without one, the plan
	// defines, starts and autostarts it.
	Exists bool
	// Refused, when set, is why nothing is done: the network is not
	// vflag's or is another group's, a VF of the pool is in another
	// network's pool, or its running definition would change while domains
	// hold its ports (libvirt 9.0 loses track of them; see doc.go, "VF
	// pools"). The other fields still say what differs.
	Refused error
	// Define: the persistent definition is missing or differs; it is
	// defined again (with the network's UUID).
	Define bool
	// Start: the network is not active.
	Start bool
	// Restart: the network runs, and its pool (or forward mode) or vflag's
	// metadata differs: destroy, start (libvirt changes neither live).
	Restart bool
	// UpdatePortgroups: the network runs and only libvirt's portgroups
	// differ: they are changed live (virNetworkUpdate).
	UpdatePortgroups bool
	// Autostart: autostart is off; it is turned on.
	Autostart bool

	// What differs. PoolAdd and PoolDel are the VFs the wanted pool adds
	// to, and drops from, the pools of both definitions together (sorted);
	// PoolDiffers is also set when only the forward mode differs.
	PoolAdd, PoolDel []string
	PoolDiffers      bool
	// PortgroupsDiffer: libvirt's portgroups or vflag's metadata differ,
	// from PortgroupsFrom (of the running definition when it differs, else
	// of the persistent one) to PortgroupsTo.
	PortgroupsDiffer             bool
	PortgroupsFrom, PortgroupsTo []NetworkPortgroup
	// PoolSize is the number of VFs in the wanted pool.
	PoolSize int
	// Ports are the network's allocated ports (domains holding its VFs).
	Ports []NetworkPort
}

// Needed tells whether EnsureNetwork changes anything (a refused plan
// changes nothing).
func (p NetworkPlan) Needed() bool {
	return p.Refused == nil && (p.Define || p.Start || p.Restart || p.UpdatePortgroups || p.Autostart)
}

// Actions are what EnsureNetwork does, in order: define, start, restart,
// update portgroups, autostart (none when refused).
func (p NetworkPlan) Actions() []string {
	if p.Refused != nil {
		return nil
	}
	var out []string
	for _, a := range []struct {
		on   bool
		what string
	}{{p.Define, "define"}, {p.Start, "start"}, {p.Restart, "restart"}, {p.UpdatePortgroups, "update portgroups"}, {p.Autostart, "autostart"}} {
		if a.on {
			out = append(out, a.what)
		}
	}
	return out
}

// String says what differs and what is done, as a plan shows it.
func (p NetworkPlan) String() string {
	if !p.Exists {
		return fmt.Sprintf("define a hostdev pool of %d VF(s), portgroups %s; start, autostart", p.PoolSize, PortgroupsString(p.PortgroupsTo))
	}
	var diff []string
	if len(p.PoolAdd) > 0 {
		diff = append(diff, "pool + "+strings.Join(p.PoolAdd, " "))
	}
	if len(p.PoolDel) > 0 {
		diff = append(diff, "pool - "+strings.Join(p.PoolDel, " "))
	}
	if p.PoolDiffers && len(p.PoolAdd) == 0 && len(p.PoolDel) == 0 {
		diff = append(diff, "pool definition out of date")
	}
	if p.PortgroupsDiffer {
		diff = append(diff, "portgroups "+PortgroupsString(p.PortgroupsFrom)+" -> "+PortgroupsString(p.PortgroupsTo))
	}
	acts := p.Actions()
	if p.Refused != nil {
		return strings.Join(diff, ", ")
	}
	if len(diff) == 0 {
		return strings.Join(acts, ", ")
	}
	return strings.Join(diff, ", ") + "; " + strings.Join(acts, ", ")
}

// TakenVF is an address of a pool that another libvirt network's pool
// has too (Conn.TakenVFs).
type TakenVF struct{ PCI, Network string }

// Why says what is wrong with it (after the VF's name), for the plan and
// preflight alike.
func (t TakenVF) Why() string {
	return fmt.Sprintf("is already in the pool of libvirt network %s: libvirt takes an address two networks list and hands the VF out from both, to two domains; take it out of one of them", t.Network)
}

func sortTaken(ts []TakenVF) {
	slices.SortFunc(ts, func(a, b TakenVF) int { return strings.Compare(a.PCI+" "+a.Network, b.PCI+" "+b.Network) })
}

// makeNetworkPlan is the decision: snap is libvirt's network of ns's name
// (nil: none), ns the normalized spec and want its definition's view,
// taken the pool's VFs other networks have.
func makeNetworkPlan(snap *netSnapshot, ns NetworkSpec, want netView, taken []TakenVF) NetworkPlan {
	p := NetworkPlan{Name: ns.Name, PoolSize: len(ns.PCIs), PortgroupsTo: ns.Portgroups}
	if len(taken) > 0 {
		var why []string
		for _, t := range taken {
			why = append(why, "VF "+t.PCI+" "+t.Why())
		}
		p.Refused = fmt.Errorf("refusing libvirt network %s: %s", ns.Name, strings.Join(why, "; "))
	}
	if snap == nil {
		p.Define, p.Start, p.Autostart = true, true, true
		return p
	}
	p.Exists, p.Ports = true, snap.ports
	owned, owner := snap.owned()
	switch {
	case !owned:
		p.Refused = fmt.Errorf("libvirt network %s exists and is not vflag's (no vflag metadata): refusing to change it; give the group's network another name", ns.Name)
		return p
	case owner != ns.Owner:
		p.Refused = fmt.Errorf("libvirt network %s belongs to vflag group %q, not %q: refusing to change it", ns.Name, owner, ns.Owner)
		return p
	}
	live, cfg := snap.live, snap.cfg
	livePool, liveMeta, livePG := !live.samePool(want), !live.sameMeta(want), !live.samePortgroups(want)
	p.Define = cfg == nil || !cfg.same(want)
	p.Start = !snap.active
	p.Restart = snap.active && (livePool || liveMeta)
	p.UpdatePortgroups = snap.active && !p.Restart && livePG
	p.Autostart = !snap.autostart

	p.PoolDiffers = livePool || cfg != nil && !cfg.samePool(want)
	p.PoolAdd, p.PoolDel = poolDelta(live, cfg, want)
	from := live
	if !liveMeta && !livePG && cfg != nil {
		from = *cfg
	}
	if !from.sameMeta(want) || !from.samePortgroups(want) {
		p.PortgroupsDiffer, p.PortgroupsFrom = true, from.statePortgroups()
	}
	if p.Refused == nil && snap.active && len(snap.ports) > 0 && (p.Restart || p.UpdatePortgroups) {
		p.Refused = liveChangeRefused(ns.Name, livePool, liveMeta, livePG, live, want, snap.ports)
	}
	return p
}

// poolDelta is the VFs want adds to, and drops from, the pools of live and
// cfg together.
func poolDelta(live netView, cfg *netView, want netView) (add, del []string) {
	has := slices.Clone(live.pcis)
	if cfg != nil {
		has = append(has, cfg.pcis...)
	}
	for _, a := range want.pcis {
		if !slices.Contains(has, a) {
			add = append(add, a)
		}
	}
	for _, a := range has {
		if !slices.Contains(want.pcis, a) && !slices.Contains(del, a) {
			del = append(del, a)
		}
	}
	slices.Sort(del)
	return add, del
}

// liveChangeRefused is the refusal of a change of the running definition
// while ports are allocated, naming what would change and who holds the
// ports (and which of their VFs would leave the pool).
func liveChangeRefused(name string, pool, meta, pg bool, live, want netView, ports []NetworkPort) error {
	var what []string
	if pool {
		what = append(what, fmt.Sprintf("VF pool %s -> %s: libvirt cannot change a running hostdev network's <address> pool", strings.Join(live.pcis, " "), strings.Join(want.pcis, " ")))
	}
	if meta {
		what = append(what, "vflag metadata: libvirt 9.0 has no live network metadata update")
	}
	if pg {
		what = append(what, "portgroups: a live update resets libvirt's VF usage counts of the pool")
	}
	var leaving []string
	for _, p := range ports {
		if !slices.Contains(want.pcis, p.PCI) {
			leaving = append(leaving, fmt.Sprintf("VF %s held by domain %s would leave the pool", p.PCI, p.Domain))
		}
	}
	msg := fmt.Sprintf("refusing to change libvirt network %s (%s) while domains hold its VFs (%s): the running network would lose track of its ports",
		name, strings.Join(what, "; "), PortHolders(ports))
	if len(leaving) > 0 {
		msg += "; " + strings.Join(leaving, ", ")
	}
	return fmt.Errorf("%s; shut those domains down first", msg)
}

// PortgroupsString shows portgroups as a plan does: "[a(default) vlan 10,
// t trunk trunks [5 6]]", "none" for none.
func PortgroupsString(pgs []NetworkPortgroup) string {
	if len(pgs) == 0 {
		return "none"
	}
	out := make([]string, len(pgs))
	for i, p := range pgs {
		out[i] = p.String()
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// String shows a portgroup: name, (default), mode, VLAN, trunks, and
// "(libvirt <vlan>)" when libvirt's own <vlan> carries the VLAN (libvirt
// sets it on the VF through the PF: legacy; a group changed to switchdev
// must lose it).
func (p NetworkPortgroup) String() string {
	s := p.Name
	if p.Default {
		s += "(default)"
	}
	if p.VLANMode != "" {
		s += " " + p.VLANMode
	}
	if p.VLAN != 0 {
		s += fmt.Sprintf(" vlan %d", p.VLAN)
	}
	if len(p.Trunks) > 0 {
		s += fmt.Sprintf(" trunks %v", p.Trunks)
	}
	if p.LibvirtVLAN && p.VLAN != 0 {
		s += " (libvirt <vlan>)"
	}
	return s
}

// PortHolders lists each port's domain and VF: "domain vm1 on
// 0000:61:00.2, domain vm2 on 0000:61:00.3".
func PortHolders(ps []NetworkPort) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprintf("domain %s on %s", p.Domain, p.PCI)
	}
	return strings.Join(out, ", ")
}
