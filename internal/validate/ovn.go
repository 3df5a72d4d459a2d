package validate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/vflag/vflag/ovs/ovnsb"
)

// OVN check names (docs/troubleshooting.md's check index). A port's check
// is "ovn/port/<logical port>", a tunnel's "ovn/tunnel/<chassis>".
const (
	OVNSouthboundName = "ovn/southbound"
	OVNChassisName    = "ovn/chassis"
)

// OVNWant is a group's OVN chassis as the config implies it.
type OVNWant struct {
	// Remote is the Southbound's remote (for the messages).
	Remote string
	// Pool are the representors of the group's pool VFs: one a domain
	// holds has the iface-id of the logical port the domain's metadata
	// names (the qemu hook set it), and is checked as a port of Ports
	// (ReadOVNFacts adds it there); a free one has none.
	Pool []OVNPoolWant
	// Chassis is this chassis's name: the Open_vSwitch row's
	// external_ids:system-id.
	Chassis string
	// EncapType and EncapIP are the encapsulation this chassis offers
	// (ovn-encap-type, ovn-encap-ip): geneve or vxlan, an address on the bond.
	EncapType, EncapIP string
	// Bridge is the integration bridge (br-int).
	Bridge string
	// Ports are the logical switch ports the config binds here.
	Ports []OVNPortWant
	// Extra are more logical ports whose bindings are read (the OVN
	// traffic check's destination).
	Extra []string
}

// OVNPoolWant is one pool VF's representor.
type OVNPoolWant struct {
	Interface string
	// Field names the VF in the config ("groups[0].network pf 0 vf 3").
	Field string
}

// PoolPorts are the ports of the pool's representors that interfaces
// binds (an iface-id on the Interface), as OVNPortWant: the logical port,
// and a Field that names the pool VF and the domain's UUID (vm-uuid).
func (w OVNWant) PoolPorts(interfaces map[string]OVNInterface) []OVNPortWant {
	var out []OVNPortWant
	for _, p := range w.Pool {
		ifc, ok := interfaces[p.Interface]
		lsp := ifc.ExternalIDs["iface-id"]
		if !ok || lsp == "" {
			continue
		}
		out = append(out, OVNPortWant{LSP: lsp, Interface: p.Interface,
			Field: fmt.Sprintf("%s, bound by the metadata of domain %s", p.Field, orDash(ifc.ExternalIDs["vm-uuid"]))})
	}
	return out
}

// OVNPortWant is one configured port: the logical switch port and the
// Interface (the representor) that vflag gave its iface-id.
type OVNPortWant struct {
	LSP       string
	Interface string
	// Field is the config field naming the port ("groups[0].vfs[2].ovn_port").
	Field string
}

// OVNInterface is what the checks read of one Interface of the
// integration bridge.
type OVNInterface struct {
	Name        string
	Type        string
	ExternalIDs map[string]string
	Options     map[string]string
}

// OVNFacts are what the OVN checks judge, read by the caller.
type OVNFacts struct {
	// SB is the Southbound's chassis and the configured ports' bindings;
	// SBErr says why it could not be read.
	SB    *ovnsb.Snapshot
	SBErr error
	// Interfaces are the integration bridge's interfaces by name;
	// BridgeErr says why they could not be read, BridgeMissing that the
	// bridge does not exist.
	Interfaces    map[string]OVNInterface
	BridgeErr     error
	BridgeMissing bool
	// Controller is ovn-controller's connection-status ("connected", "not
	// connected") or "ovn-controller not running"; "" not known (not
	// asked, or it did not answer).
	Controller string
}

// OVNChecks are a group's OVN checks: the Southbound read, this chassis
// registered with its encap, each configured port installed and bound
// here, and a tunnel port to every other chassis.
func OVNChecks(w OVNWant, f OVNFacts) []Check {
	var out []Check
	if f.SBErr != nil {
		out = append(out, failed(OVNSouthboundName, "cannot read the OVN Southbound at %s: %v\nwithout it neither this chassis's registration, the ports' bindings nor the other chassis can be checked", w.Remote, f.SBErr))
	} else {
		out = append(out, pass(OVNSouthboundName, "%s: %d chassis", w.Remote, len(f.SB.Chassis)))
		out = append(out, OVNChassisCheck(w, f.SB))
	}
	for _, p := range w.Ports {
		out = append(out, OVNPortCheck(w, p, f))
	}
	if f.SBErr == nil {
		out = append(out, OVNTunnelChecks(w, f)...)
	}
	return out
}

func encapList(es []ovnsb.Encap) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Type+" "+e.IP)
	}
	return orDash(strings.Join(s, ", "))
}

// OVNChassisCheck: this chassis is in the Southbound with an Encap of the
// configured type and address.
func OVNChassisCheck(w OVNWant, sb *ovnsb.Snapshot) Check {
	c := sb.ChassisNamed(w.Chassis)
	if c == nil {
		var names []string
		for _, o := range sb.Chassis {
			names = append(names, o.Name)
		}
		return failed(OVNChassisName, "chassis %s is not registered in the Southbound (registered: %s): ovn-controller registers it when it runs, reaches the Southbound and finds external_ids:system-id=%s", w.Chassis, orDash(strings.Join(names, ", ")), w.Chassis)
	}
	want := ovnsb.Encap{Type: w.EncapType, IP: w.EncapIP}
	if !slices.Contains(c.Encaps, want) {
		return failed(OVNChassisName, "chassis %s is registered with encaps %s, not %s %s: the other chassis tunnel to the address in the Southbound (ovn-controller writes it from external_ids:ovn-encap-type and ovn-encap-ip)", w.Chassis, encapList(c.Encaps), w.EncapType, w.EncapIP)
	}
	return pass(OVNChassisName, "chassis %s registered with encap %s %s", w.Chassis, w.EncapType, w.EncapIP)
}

// OVNPortCheck: the port's Interface is on the integration bridge with its
// iface-id, ovn-controller has set ovn-installed on it, and its
// Port_Binding is bound to this chassis and up. The first missing piece is
// the reason.
func OVNPortCheck(w OVNWant, p OVNPortWant, f OVNFacts) Check {
	name := fmt.Sprintf("ovn/port/%s", p.LSP)
	switch {
	case f.BridgeErr != nil:
		return failed(name, "cannot read the interfaces of %s: %v", w.Bridge, f.BridgeErr)
	case f.BridgeMissing:
		return failed(name, "the integration bridge %s does not exist: ovn-controller makes it, or vflag up does", w.Bridge)
	}
	ifc, ok := f.Interfaces[p.Interface]
	if !ok {
		return failed(name, "%s (%s): its interface %s is not a port of %s (vflag up adds it)", p.LSP, p.Field, p.Interface, w.Bridge)
	}
	if id := ifc.ExternalIDs["iface-id"]; id != p.LSP {
		return failed(name, "%s (%s): interface %s has external_ids:iface-id=%s, not %s: ovn-controller binds it to another logical port (vflag up sets it)", p.LSP, p.Field, p.Interface, orDash(id), p.LSP)
	}
	installed := ifc.ExternalIDs["ovn-installed"] == "true"
	notConnected := f.Controller != "" && f.Controller != "connected"
	controller := func(why string) Check {
		if notConnected {
			return failed(name, "%s: %s; ovn-controller is not connected to the Southbound (%s): it cannot claim the port or install its flows", p.LSP, why, f.Controller)
		}
		return failed(name, "%s: %s", p.LSP, why)
	}
	if f.SBErr != nil {
		if !installed {
			return controller(fmt.Sprintf("interface %s has no external_ids:ovn-installed=true: ovn-controller has not installed its flows (the Southbound could not be read for its binding)", p.Interface))
		}
		return skip(name, "%s: interface %s is ovn-installed; its Port_Binding is unknown: the Southbound could not be read", p.LSP, p.Interface)
	}
	b, ok := f.SB.Bindings[p.LSP]
	switch {
	case !ok:
		return failed(name, "%s (%s): no such logical switch port in the Southbound: create it in the Northbound (ovn-nbctl lsp-add SWITCH %s) and check that ovn-northd runs", p.LSP, p.Field, p.LSP)
	case b.Chassis != "" && b.Chassis != w.Chassis:
		return failed(name, "%s is bound to another chassis, %s, not this one (%s): another host's interface has iface-id=%s, or the port's requested-chassis names another chassis", p.LSP, b.Chassis, w.Chassis, p.LSP)
	case b.Chassis == "":
		return controller("the Port_Binding is bound to no chassis: ovn-controller on this host has not claimed it")
	case !installed:
		return controller(fmt.Sprintf("bound here, but interface %s has no external_ids:ovn-installed=true: ovn-controller has not installed the port's flows yet", p.Interface))
	case b.Up == nil || !*b.Up:
		return controller("bound here and ovn-installed, but the Port_Binding's up is not true: ovn-controller has not reported the port up to the Southbound")
	}
	return pass(name, "%s on %s: bound to %s, ovn-installed, up", p.LSP, p.Interface, b.Chassis)
}

// encapPreference is the order ovn-controller picks a remote chassis's
// encap in when it offers several.
var encapPreference = []string{"geneve", "stt", "vxlan"}

// preferredEncap is the encap ovn-controller tunnels to a chassis with.
func preferredEncap(es []ovnsb.Encap) (ovnsb.Encap, bool) {
	for _, t := range encapPreference {
		for _, e := range es {
			if e.Type == t {
				return e, true
			}
		}
	}
	return ovnsb.Encap{}, false
}

// OVNTunnelChecks: a tunnel port ovn-* on the integration bridge to every
// other chassis, of its encap's type with options:remote_ip its address
// (and local_ip, where set, this chassis's encap address).
func OVNTunnelChecks(w OVNWant, f OVNFacts) []Check {
	var tunnels []OVNInterface
	for _, ifc := range f.Interfaces {
		if strings.HasPrefix(ifc.Name, "ovn-") && ifc.Options["remote_ip"] != "" {
			tunnels = append(tunnels, ifc)
		}
	}
	sort.Slice(tunnels, func(i, j int) bool { return tunnels[i].Name < tunnels[j].Name })
	var out []Check
	for _, c := range f.SB.Chassis {
		if c.Name == w.Chassis {
			continue
		}
		name := fmt.Sprintf("ovn/tunnel/%s", c.Name)
		if f.BridgeErr != nil || f.BridgeMissing {
			out = append(out, failed(name, "cannot read the tunnel ports of %s: %s", w.Bridge, bridgeWhy(f)))
			continue
		}
		e, ok := preferredEncap(c.Encaps)
		if !ok {
			out = append(out, failed(name, "chassis %s has no geneve, stt or vxlan encap in the Southbound (%s): no tunnel can reach it", c.Name, encapList(c.Encaps)))
			continue
		}
		var to, toChassis *OVNInterface
		for i, t := range tunnels {
			if t.Options["remote_ip"] == e.IP && t.Type == e.Type {
				to = &tunnels[i]
				break
			}
			if id, _, _ := strings.Cut(t.ExternalIDs["ovn-chassis-id"], "@"); id == c.Name {
				toChassis = &tunnels[i]
			}
		}
		switch {
		case to == nil && toChassis != nil:
			out = append(out, failed(name, "tunnel port %s to chassis %s is %s with remote_ip %s, but the chassis's encap is %s %s: ovn-controller has not caught up with the Southbound", toChassis.Name, c.Name, orDash(toChassis.Type), orDash(toChassis.Options["remote_ip"]), e.Type, e.IP))
		case to == nil:
			out = append(out, failed(name, "no tunnel port ovn-* on %s to chassis %s (%s remote_ip %s): ovn-controller makes one to every chassis it shares a datapath with; is it connected, and is this chassis's encap type one the other supports?", w.Bridge, c.Name, e.Type, e.IP))
		case to.Options["local_ip"] != "" && to.Options["local_ip"] != w.EncapIP:
			out = append(out, failed(name, "tunnel port %s to chassis %s has local_ip %s, not this chassis's encap address %s: encapsulated packets leave from an address the other chassis does not tunnel to", to.Name, c.Name, to.Options["local_ip"], w.EncapIP))
		default:
			out = append(out, pass(name, "tunnel port %s: %s to %s", to.Name, e.Type, e.IP))
		}
	}
	return out
}

func bridgeWhy(f OVNFacts) string {
	if f.BridgeErr != nil {
		return f.BridgeErr.Error()
	}
	return "the bridge does not exist"
}

// OVNMetrics are the counts status exports for a group's OVN chassis.
type OVNMetrics struct {
	// Registered: this chassis is in the Southbound with its encap.
	Registered bool
	// Bound: configured ports whose Port_Binding is bound to this chassis.
	// Installed: configured ports whose interface is ovn-installed.
	Ports, Bound, Installed int
}

// OVNCounts counts what OVNMetrics holds from the same facts the checks judge.
func OVNCounts(w OVNWant, f OVNFacts) OVNMetrics {
	m := OVNMetrics{Ports: len(w.Ports)}
	if f.SBErr == nil && f.SB != nil {
		m.Registered = OVNChassisCheck(w, f.SB).Verdict == Pass
	}
	for _, p := range w.Ports {
		if ifc, ok := f.Interfaces[p.Interface]; ok && ifc.ExternalIDs["iface-id"] == p.LSP && ifc.ExternalIDs["ovn-installed"] == "true" {
			m.Installed++
		}
		if f.SBErr == nil && f.SB != nil {
			if b, ok := f.SB.Bindings[p.LSP]; ok && b.Chassis == w.Chassis {
				m.Bound++
			}
		}
	}
	return m
}
