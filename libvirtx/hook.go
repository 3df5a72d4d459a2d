package libvirtx

// The qemu hook's pure half: which lifecycle events vflag acts on, and
// which of a domain's devices are PCI passthrough devices, read from the
// domain XML libvirt writes to the hook's stdin. Nothing here talks to
// libvirt: a hook that calls back into libvirtd deadlocks it.

import (
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/vflag/vflag/internal/pciaddr"
)

// HookAction is what the qemu hook does for one lifecycle event.
type HookAction int

const (
	// HookIgnore: nothing to do (exit 0 at once, without reading stdin).
	HookIgnore HookAction = iota
	// HookPrepare: make the host side of every managed VF ready, or refuse.
	HookPrepare
	// HookRelease: reset what the hook did for the domain.
	HookRelease
	// HookMigrate: an incoming migration's domain XML, which the hook may
	// print changed (a teaming VF moved to a free VF of this host).
	HookMigrate
	// HookStarted: the domain's QEMU runs (an incoming migration's
	// reservation is the domain's from now until its release).
	HookStarted
)

func (a HookAction) String() string {
	switch a {
	case HookPrepare:
		return "prepare"
	case HookRelease:
		return "release"
	case HookMigrate:
		return "migrate"
	case HookStarted:
		return "started"
	}
	return "ignore"
}

// HookActionFor maps libvirt's qemu hook arguments (operation, sub-operation)
// to an action:
//
//   - "prepare begin": before libvirt allocates resources. Interfaces of
//     type='network' have no VF yet at this point.
//   - "start begin": after libvirt allocated network ports: an interface from
//     a hostdev network pool shows as type='hostdev' with its VF's address.
//     Prepare is repeated here (it is idempotent) to cover pools.
//   - "release end": the domain is gone and libvirt has given its devices back.
//   - "migrate begin": on the destination of a migration, before anything
//     else, with the incoming XML; the XML the hook prints is used.
//   - "started begin": QEMU runs.
//
// Every other event (stopped, restore, reconnect, attach, unknown future
// ones) is ignored; stopped is followed by release. A migration's source
// gets no event at the VF's unplug: its VF stays prepared until release.
func HookActionFor(op, subop string) HookAction {
	switch op + "/" + subop {
	case "prepare/begin", "start/begin":
		return HookPrepare
	case "release/end":
		return HookRelease
	case "migrate/begin":
		return HookMigrate
	case "started/begin":
		return HookStarted
	}
	return HookIgnore
}

// Passthrough kinds: where in the domain XML a PCI device came from.
const (
	FromInterface = "interface" // <interface type='hostdev'>
	FromHostdev   = "hostdev"   // <hostdev mode='subsystem' type='pci'>
	FromNetwork   = "network"   // <interface type='network'> with an allocated hostdev (<actual>)
)

// PassthroughDevice is one PCI device a domain takes from the host.
type PassthroughDevice struct {
	PCI  string // normalized "0000:61:00.2"
	MAC  string // guest MAC, lower case; "" for a plain <hostdev>
	From string // FromInterface, FromHostdev or FromNetwork
	// Network is the network name of an interface of type='network'.
	Network string
	// Standby is the alias of the teaming standby of a transient teaming
	// interface ("" none), and StandbyVLAN what that standby's <vlan>
	// makes of its OVS port (HasStandbyVLAN: the document has the standby):
	// the VLAN the pair has, wherever it runs.
	Standby        string
	StandbyVLAN    Standby
	HasStandbyVLAN bool
}

// HookDomain is what the hook reads from a domain's XML.
type HookDomain struct {
	Name string
	UUID string
	// Devices are the PCI passthrough devices, in document order.
	Devices []PassthroughDevice
	// Pending names the interfaces of type='network' whose device libvirt
	// has not chosen yet (prepare runs before network allocation): the hook
	// sees them again, resolved, at "start begin".
	Pending []string
	// OVNPorts maps an interface's MAC (lower case) to the logical switch
	// port the domain's OVN metadata names for it (ParseOVNMetadata), and
	// OVNProblems says what is wrong with that metadata, each problem
	// naming its place. The hook needs them, and refuses the start for a
	// problem, only for a VF of a pool in a group with ovn.
	OVNPorts    map[string]string
	OVNProblems []string
}

// actualXML reads what libvirtxml does not model: the <actual> element libvirt
// keeps inside an <interface type='network'> in its status XML.
type actualXML struct {
	Devices struct {
		Interfaces []struct {
			Type   string `xml:"type,attr"`
			Actual *struct {
				Type   string `xml:"type,attr"`
				Source *struct {
					Address *struct {
						Type     string `xml:"type,attr"`
						Domain   string `xml:"domain,attr"`
						Bus      string `xml:"bus,attr"`
						Slot     string `xml:"slot,attr"`
						Function string `xml:"function,attr"`
					} `xml:"address"`
				} `xml:"source"`
			} `xml:"actual"`
		} `xml:"interface"`
	} `xml:"devices"`
}

// ParseHookDomain reads a domain XML document as libvirt passes it to a hook.
func ParseHookDomain(doc []byte) (HookDomain, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(string(doc)); err != nil {
		return HookDomain{}, fmt.Errorf("parse domain XML: %w", err)
	}
	hd := HookDomain{Name: d.Name, UUID: d.UUID}
	if d.Metadata != nil {
		hd.OVNPorts, hd.OVNProblems = ParseOVNMetadata(d.Metadata.XML)
	}
	if d.Devices == nil {
		return hd, nil
	}
	var act actualXML
	_ = xml.Unmarshal(doc, &act) // libvirtxml accepted the document; <actual> is optional
	standbys := map[string]Standby{}
	for _, i := range d.Devices.Interfaces {
		if i.Teaming != nil && i.Teaming.Type == "persistent" && i.Alias != nil && i.Alias.Name != "" {
			standbys[i.Alias.Name] = vlanOf(i.VLan)
		}
	}
	team := func(dev PassthroughDevice, i libvirtxml.DomainInterface) PassthroughDevice {
		if i.Teaming != nil && i.Teaming.Type == "transient" && i.Teaming.Persistent != "" {
			dev.Standby = i.Teaming.Persistent
			dev.StandbyVLAN, dev.HasStandbyVLAN = standbys[dev.Standby]
		}
		return dev
	}
	for n, i := range d.Devices.Interfaces {
		mac := ""
		if i.MAC != nil {
			mac = strings.ToLower(strings.TrimSpace(i.MAC.Address))
		}
		switch {
		case i.Source != nil && i.Source.Hostdev != nil:
			if i.Source.Hostdev.PCI == nil {
				continue // a USB hostdev interface
			}
			if pci := formatPCI(i.Source.Hostdev.PCI.Address); pci != "" {
				hd.Devices = append(hd.Devices, team(PassthroughDevice{PCI: pci, MAC: mac, From: FromInterface}, i))
			}
		case i.Source != nil && i.Source.Network != nil:
			net := i.Source.Network.Network
			if n < len(act.Devices.Interfaces) {
				if a := act.Devices.Interfaces[n].Actual; a != nil && a.Type == "hostdev" && a.Source != nil && a.Source.Address != nil {
					ad := a.Source.Address
					if pci, ok := actualPCI(ad.Domain, ad.Bus, ad.Slot, ad.Function); ok {
						hd.Devices = append(hd.Devices, team(PassthroughDevice{PCI: pci, MAC: mac, From: FromNetwork, Network: net}, i))
						continue
					}
				}
			}
			hd.Pending = append(hd.Pending, net)
		}
	}
	for _, h := range d.Devices.Hostdevs {
		if h.SubsysPCI == nil || h.SubsysPCI.Source == nil {
			continue
		}
		if pci := formatPCI(h.SubsysPCI.Source.Address); pci != "" {
			hd.Devices = append(hd.Devices, PassthroughDevice{PCI: pci, From: FromHostdev})
		}
	}
	return hd, nil
}

// actualPCI reads the address of an <actual type='hostdev'>: hex
// attributes ("0x61"; the 0x is optional, an absent one is 0). ok is false
// when one is not a number or is out of range.
func actualPCI(domain, bus, slot, function string) (string, bool) {
	var n [4]uint
	for i, s := range [4]string{domain, bus, slot, function} {
		s = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
		if s == "" {
			continue
		}
		v, err := strconv.ParseUint(s, 16, 32)
		if err != nil {
			return "", false
		}
		n[i] = uint(v)
	}
	a, err := pciaddr.FromParts(n[0], n[1], n[2], n[3])
	if err != nil {
		return "", false
	}
	return string(a), true
}

// HookTask is one managed VF the hook must act on.
type HookTask struct {
	Device PassthroughDevice
	// MAC is the MAC to give the VF through its PF on prepare: the domain's
	// for an interface, "" (leave the VF's own) for a plain <hostdev>.
	MAC string
}

// PlanHook picks the domain's devices vflag manages (managed reports whether
// a PCI address is a VF of vflag's) and checks that the domain uses each at
// most once. An error means the domain must not start.
func PlanHook(d HookDomain, managed func(pci string) bool) ([]HookTask, error) {
	var tasks []HookTask
	seen := map[string]string{}
	var problems []string
	for _, dev := range d.Devices {
		if !managed(dev.PCI) {
			continue
		}
		if prev, ok := seen[dev.PCI]; ok {
			problems = append(problems, fmt.Sprintf("VF %s is used twice (%s and %s)", dev.PCI, prev, dev.From))
			continue
		}
		seen[dev.PCI] = dev.From
		t := HookTask{Device: dev}
		if dev.From != FromHostdev {
			if dev.MAC == "" {
				problems = append(problems, fmt.Sprintf("VF %s: the %s has no MAC address", dev.PCI, dev.From))
				continue
			}
			m, err := parseMAC(dev.MAC)
			if err != nil {
				problems = append(problems, fmt.Sprintf("VF %s: %v", dev.PCI, err))
				continue
			}
			t.MAC = m
		}
		tasks = append(tasks, t)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("domain %s: %s", d.Name, strings.Join(problems, "; "))
	}
	return tasks, nil
}
