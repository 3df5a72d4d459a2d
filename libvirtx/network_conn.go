//go:build !vflag_nolibvirt

package libvirtx

// The VF pools' calls into libvirt (built without vflag_nolibvirt).

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vflag/vflag/internal/crashpoint"
)

func isNoNetwork(err error) bool { return hasCode(err, libvirt.ERR_NO_NETWORK) }

func (c *Conn) lookupNetwork(name string) (*libvirt.Network, error) {
	if c == nil || c.c == nil {
		return nil, errors.New("connection is closed")
	}
	n, err := c.c.LookupNetworkByName(name)
	return n, lvErr(err)
}

func readNetwork(n *libvirt.Network) (netSnapshot, error) {
	var s netSnapshot
	var err error
	if s.active, err = n.IsActive(); err != nil {
		return s, lvErr(err)
	}
	if s.persistent, err = n.IsPersistent(); err != nil {
		return s, lvErr(err)
	}
	if s.autostart, err = n.GetAutostart(); err != nil {
		return s, lvErr(err)
	}
	doc, err := n.GetXMLDesc(0)
	if err != nil {
		return s, lvErr(err)
	}
	if s.live, _, err = parseNetView(doc); err != nil {
		return s, err
	}
	if s.persistent {
		doc, err := n.GetXMLDesc(libvirt.NETWORK_XML_INACTIVE)
		if err != nil {
			return s, fmt.Errorf("read persistent XML: %w", lvErr(err))
		}
		v, _, err := parseNetView(doc)
		if err != nil {
			return s, err
		}
		s.cfg = &v
	}
	if s.active {
		if s.ports, err = listPorts(n); err != nil {
			return s, err
		}
	}
	return s, nil
}

func listPorts(n *libvirt.Network) ([]NetworkPort, error) {
	ports, err := n.ListAllPorts(0)
	if err != nil {
		return nil, fmt.Errorf("list ports: %w", lvErr(err))
	}
	var out []NetworkPort
	var firstErr error
	for i := range ports {
		p := &ports[i]
		doc, err := p.GetXMLDesc(0)
		_ = p.Free()
		if err != nil {
			// A port deleted meanwhile is gone: not an error.
			if !hasCode(err, libvirt.ERR_NO_NETWORK_PORT) && firstErr == nil {
				firstErr = fmt.Errorf("read port: %w", lvErr(err))
			}
			continue
		}
		np, err := parsePort(doc)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		out = append(out, np)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	sortPorts(out)
	return out, nil
}

func sortPorts(ps []NetworkPort) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].PCI != ps[j].PCI {
			return ps[i].PCI < ps[j].PCI
		}
		return ps[i].UUID < ps[j].UUID
	})
}

func parsePort(doc string) (NetworkPort, error) {
	var x libvirtxml.NetworkPort
	if err := x.Unmarshal(doc); err != nil {
		return NetworkPort{}, fmt.Errorf("parse network port XML: %w", err)
	}
	return portOf(x), nil
}

// openNetwork looks a network up and reads it: n nil when there is none
// (or it went meanwhile), which is not an error. The caller frees n.
func (c *Conn) openNetwork(name string) (*libvirt.Network, netSnapshot, error) {
	n, err := c.lookupNetwork(name)
	if isNoNetwork(err) {
		return nil, netSnapshot{}, nil
	}
	if err != nil {
		return nil, netSnapshot{}, err
	}
	s, err := readNetwork(n)
	if err != nil {
		_ = n.Free()
		if isNoNetwork(err) { // undefined meanwhile
			return nil, netSnapshot{}, nil
		}
		return nil, s, err
	}
	return n, s, nil
}

// Network reads a network: both definitions and, when it is active, its
// ports. A missing network is not an error: Exists is false.
func (c *Conn) Network(name string) (NetworkState, error) {
	n, s, err := c.openNetwork(name)
	if err != nil {
		return NetworkState{Name: name}, fmt.Errorf("libvirt: read network %s: %w", name, err)
	}
	if n == nil {
		return NetworkState{Name: name}, nil
	}
	_ = n.Free()
	return stateOf(name, s), nil
}

func stateOf(name string, s netSnapshot) NetworkState {
	st := NetworkState{Name: name, Exists: true, Active: s.active, Autostart: s.autostart, Persistent: s.persistent}
	st.Owned, st.Owner = s.owned()
	st.PCIs = s.live.pcis
	if s.cfg != nil {
		st.ConfigPCIs = s.cfg.pcis
	}
	st.Portgroups = s.live.statePortgroups()
	st.Ports = s.ports
	return st
}

func portDomains(ps []NetworkPort) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		if !seen[p.Domain] {
			seen[p.Domain] = true
			out = append(out, p.Domain)
		}
	}
	sort.Strings(out)
	return out
}

// readPlan reads libvirt's network of ns's name (n nil: there is none)
// and the pools of the others, and makes the plan.
func (c *Conn) readPlan(ns NetworkSpec, want netView) (*libvirt.Network, netSnapshot, NetworkPlan, error) {
	taken, err := c.TakenVFs(ns.Name, ns.PCIs, ns.Replaces...)
	if err != nil {
		return nil, netSnapshot{}, NetworkPlan{}, err
	}
	n, snap, err := c.openNetwork(ns.Name)
	switch {
	case err != nil:
		return nil, snap, NetworkPlan{}, err
	case n == nil:
		return nil, snap, makeNetworkPlan(nil, ns, want, taken), nil
	}
	return n, snap, makeNetworkPlan(&snap, ns, want, taken), nil
}

// TakenVFs lists which of pcis the pool of a libvirt network other than
// name and the replaced ones has (in its running or its persistent
// definition), sorted by address: libvirt takes such an address (see
// doc.go, "VF pools").
func (c *Conn) TakenVFs(name string, pcis []string, replaced ...string) ([]TakenVF, error) {
	if c == nil || c.c == nil {
		return nil, errors.New("connection is closed")
	}
	want := map[string]bool{}
	for _, p := range pcis {
		a, err := parsePCI(p)
		if err != nil {
			return nil, err
		}
		want[a] = true
	}
	nets, err := c.c.ListAllNetworks(0)
	if err != nil {
		return nil, fmt.Errorf("libvirt: list networks: %w", lvErr(err))
	}
	var out []TakenVF
	var firstErr error
	for i := range nets {
		n := &nets[i]
		other, err := n.GetName()
		if err == nil && other != name && !slices.Contains(replaced, other) {
			out, err = appendTaken(out, n, other, want)
		}
		if err != nil && !isNoNetwork(err) && firstErr == nil {
			firstErr = fmt.Errorf("libvirt: read network %s: %w", other, err)
		}
		_ = n.Free()
	}
	if firstErr != nil {
		return nil, firstErr
	}
	sortTaken(out)
	return out, nil
}

// appendTaken adds the addresses of want that network n (named name) has.
func appendTaken(out []TakenVF, n *libvirt.Network, name string, want map[string]bool) ([]TakenVF, error) {
	seen := map[string]bool{}
	for _, flags := range []libvirt.NetworkXMLFlags{0, libvirt.NETWORK_XML_INACTIVE} {
		doc, err := n.GetXMLDesc(flags)
		if err != nil {
			return out, lvErr(err)
		}
		v, _, err := parseNetView(doc)
		if err != nil {
			return out, err
		}
		for _, a := range v.pcis {
			if want[a] && !seen[a] {
				seen[a] = true
				out = append(out, TakenVF{PCI: a, Network: name})
			}
		}
	}
	return out, nil
}

// PlanNetwork says, without a write, what EnsureNetwork(s) would do now,
// or why it would refuse (NetworkPlan.Refused).
func (c *Conn) PlanNetwork(s NetworkSpec) (NetworkPlan, error) {
	ns, _, want, err := wantedNetwork(s)
	if err != nil {
		return NetworkPlan{}, err
	}
	n, _, p, err := c.readPlan(ns, want)
	if err != nil {
		return p, fmt.Errorf("libvirt: read network %s: %w", ns.Name, err)
	}
	if n != nil {
		_ = n.Free()
	}
	return p, nil
}

// EnsureNetwork makes the network of s exist, persistent, active and
// autostarted, with the definition NetworkXML(s): it carries out the plan
// PlanNetwork makes (define, start, restart, live portgroup update,
// autostart) and returns its refusal (a network that is not vflag's or is
// another group's; a change of the running definition while ports are
// allocated) with nothing changed. It reports whether it changed anything.
func (c *Conn) EnsureNetwork(s NetworkSpec) (bool, error) {
	ns, def, want, err := wantedNetwork(s)
	if err != nil {
		return false, err
	}
	op := "libvirt: ensure network " + ns.Name
	n, snap, plan, err := c.readPlan(ns, want)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if plan.Refused != nil {
		if n != nil {
			_ = n.Free()
		}
		return false, plan.Refused
	}
	if n == nil {
		doc, err := def.Marshal()
		if err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		return c.createNetwork(op, ns.Name, doc)
	}
	defer func() { _ = n.Free() }()
	return c.applyNetworkPlan(n, op, plan, def, snap.live, ns)
}

// createNetwork defines the network doc (none of that name exists),
// starts it and turns its autostart on.
func (c *Conn) createNetwork(op, name, doc string) (bool, error) {
	if err := c.defineNetwork(doc); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	n, err := c.lookupNetwork(name)
	if err != nil {
		return true, fmt.Errorf("%s: %w", op, err)
	}
	defer func() { _ = n.Free() }()
	if err := lvErr(wrote("start network", n.Create())); err != nil {
		return true, fmt.Errorf("%s: start: %w", op, err)
	}
	if err := lvErr(wrote("autostart network", n.SetAutostart(true))); err != nil {
		return true, fmt.Errorf("%s: autostart: %w", op, err)
	}
	return true, nil
}

// applyNetworkPlan makes the changes plan lists on the existing network n:
// define def (with n's UUID: libvirt redefines a network by it, and a
// definition without one is a new network, refused for a name in use),
// start it or (running) restart it or update its portgroups live from
// those of live to those of ns, and turn its autostart on.
func (c *Conn) applyNetworkPlan(n *libvirt.Network, op string, plan NetworkPlan, def libvirtxml.Network, live netView, ns NetworkSpec) (bool, error) {
	changed := false
	if plan.Define {
		uuid, err := n.GetUUIDString()
		if err != nil {
			return false, fmt.Errorf("%s: %w", op, lvErr(err))
		}
		def.UUID = uuid
		doc, err := def.Marshal()
		if err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		if err := c.defineNetwork(doc); err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		changed = true
	}
	switch {
	case plan.Start:
		if err := lvErr(wrote("start network", n.Create())); err != nil {
			return changed, fmt.Errorf("%s: start: %w", op, err)
		}
		changed = true
	case plan.Restart:
		if err := lvErr(wrote("stop network", n.Destroy())); err != nil {
			return changed, fmt.Errorf("%s: stop for a restart: %w", op, err)
		}
		if err := lvErr(wrote("start network", n.Create())); err != nil {
			return true, fmt.Errorf("%s: start again: %w", op, err)
		}
		changed = true
	case plan.UpdatePortgroups:
		if err := updatePortgroups(n, live, ns); err != nil {
			return changed, fmt.Errorf("%s: %w", op, err)
		}
		changed = true
	}
	if plan.Autostart {
		if err := lvErr(wrote("autostart network", n.SetAutostart(true))); err != nil {
			return changed, fmt.Errorf("%s: autostart: %w", op, err)
		}
		changed = true
	}
	return changed, nil
}

func (c *Conn) defineNetwork(doc string) error {
	if c == nil || c.c == nil {
		return errors.New("connection is closed")
	}
	n, err := c.c.NetworkDefineXML(doc)
	crashpoint.Wrote("libvirt: define network")
	if err != nil {
		return fmt.Errorf("define: %w", lvErr(err))
	}
	_ = n.Free()
	return nil
}

// updatePortgroups changes the live portgroups of a running network to
// those of s: removed ones first, then changed or added ones that are not
// the default, the default last (libvirt allows one default at a time).
func updatePortgroups(n *libvirt.Network, live netView, s NetworkSpec) error {
	have := map[string]pgView{}
	for _, pg := range live.portgroups {
		have[pg.name] = pg
	}
	wantNames := map[string]bool{}
	for _, pg := range s.Portgroups {
		wantNames[pg.Name] = true
	}
	const flags = libvirt.NETWORK_UPDATE_AFFECT_LIVE
	for _, pg := range live.portgroups {
		if wantNames[pg.name] {
			continue
		}
		x, err := pg.libvirt.Marshal()
		if err != nil {
			return err
		}
		if err := lvErr(wrote("update network", n.Update(libvirt.NETWORK_UPDATE_COMMAND_DELETE, libvirt.NETWORK_SECTION_PORTGROUP, -1, x, flags))); err != nil {
			return fmt.Errorf("remove portgroup %s: %w", pg.name, err)
		}
	}
	ordered := append([]NetworkPortgroup(nil), s.Portgroups...)
	sort.SliceStable(ordered, func(i, j int) bool { return !ordered[i].Default && ordered[j].Default })
	for _, pg := range ordered {
		x := portgroupXML(pg)
		cur, exists := have[pg.Name]
		if exists && cur.isDef == pg.Default && cur.vlan == vlanText(x.VLAN) {
			continue
		}
		doc, err := x.Marshal()
		if err != nil {
			return err
		}
		cmd := libvirt.NETWORK_UPDATE_COMMAND_ADD_LAST
		verb := "add"
		if exists {
			cmd, verb = libvirt.NETWORK_UPDATE_COMMAND_MODIFY, "change"
		}
		if err := lvErr(wrote("update network", n.Update(cmd, libvirt.NETWORK_SECTION_PORTGROUP, -1, doc, flags))); err != nil {
			return fmt.Errorf("%s portgroup %s: %w", verb, pg.Name, err)
		}
	}
	return nil
}

// RemoveNetwork stops and undefines a vflag network. It refuses a network
// without vflag's metadata and one with allocated ports (naming their
// domains). A missing network is (false, nil).
func (c *Conn) RemoveNetwork(name string) (bool, error) {
	op := "libvirt: remove network " + name
	n, snap, err := c.openNetwork(name)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if n == nil {
		return false, nil
	}
	defer func() { _ = n.Free() }()
	if owned, _ := snap.owned(); !owned {
		return false, fmt.Errorf("%s: the network has no vflag metadata (not vflag's); refusing to remove it", op)
	}
	if len(snap.ports) > 0 {
		return false, fmt.Errorf("%s: %d port(s) allocated to domains %s: %s; refusing to remove it",
			op, len(snap.ports), strings.Join(portDomains(snap.ports), ", "), PortHolders(snap.ports))
	}
	if snap.active {
		if err := lvErr(wrote("stop network", n.Destroy())); err != nil && !isNoNetwork(err) {
			return false, fmt.Errorf("%s: stop: %w", op, err)
		}
	}
	if snap.persistent {
		if err := lvErr(wrote("undefine network", n.Undefine())); err != nil && !isNoNetwork(err) {
			return true, fmt.Errorf("%s: undefine: %w", op, err)
		}
	}
	return true, nil
}
