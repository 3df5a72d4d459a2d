package libvirtx

import (
	"errors"
	"fmt"
	"strings"
)

// snapshot is one read of a domain: both definitions.
type snapshot struct {
	active     bool
	persistent bool
	cfg        view  // persistent definition (the live one for a transient domain)
	live       *view // nil unless active
}

// norm is a validated Attachment.
type norm struct {
	Attachment
}

func validate(a Attachment) (norm, error) {
	n := norm{a}
	var err error
	if strings.TrimSpace(a.Domain) == "" {
		return n, errors.New("empty domain name")
	}
	if n.PCI, err = parsePCI(a.PCI); err != nil {
		return n, err
	}
	if n.MAC, err = parseMAC(a.MAC); err != nil {
		return n, err
	}
	if strings.TrimSpace(a.Owner) == "" {
		return n, errors.New("empty owner (LAG group name)")
	}
	return n, nil
}

func attachOp(a Attachment) string {
	return fmt.Sprintf("libvirt: attach %s to %s", a.PCI, a.Domain)
}

// devOp is one device change in one definition.
type devOp struct {
	detach bool // else attach (or update)
	update bool // replace the device in place (update-device)
	xml    string
	old    string // an update's device before it (its undo)
	what   string
	pcie   bool // a new PCIe device (a hotplug needs a free root port)
	// standby is the alias of an attached standby ("" for the VF): the
	// undo of an attach finds the device by it.
	standby string
}

// defPlan is what one definition needs: the claim to write (nil: none)
// before or after the device changes, and those changes, in order.
type defPlan struct {
	claim      *claim
	claimAfter bool // drop the claim's standby after the devices went
	ops        []devOp
	notes      []string // what is left for the next start
}

func (d defPlan) empty() bool { return d.claim == nil && len(d.ops) == 0 }

func (d defPlan) pcie() int {
	n := 0
	for _, o := range d.ops {
		if o.pcie {
			n++
		}
	}
	return n
}

// planDef plans one definition for the attachment. replace allows
// changing what vflag made there (a VF becoming or ceasing to be the
// transient half of a pair, a standby's bridge or VLAN): the persistent
// definition only; the running domain keeps its devices until it restarts.
func planDef(v view, n norm, where string, replace bool) (defPlan, error) {
	var p defPlan
	found, c, claimed, err := vflagsAt(v, n, where)
	if err != nil {
		return p, err
	}
	alias := ""
	if n.Migratable {
		alias = StandbyAlias(n.MAC)
	}
	if !replace && len(found) == 1 && found[0].team != alias {
		// The running domain has the VF in the other form (plain, or a
		// pair's): it keeps it, and no standby is added or removed beside
		// it (a standby with the MAC of a VF that is no failover primary
		// would share the MAC on the bridge with its representor).
		what := "its plain VF " + n.PCI
		if found[0].team != "" {
			what = "its teaming pair (standby " + found[0].team + ")"
		}
		p.notes = append(p.notes, "keeps "+what+" until its next start")
		return p, nil
	}
	// The standby vflag made before (its claim names it), and the one wanted.
	oldSB, haveOld := standby{}, false
	if claimed && c.Standby != "" {
		oldSB, haveOld = v.standbyFor(c.Standby)
	}
	sb, haveSB := v.standbyFor(alias)
	if haveSB && !(claimed && c.Standby == alias && sb.mac == c.MAC) {
		return p, fmt.Errorf("the %s definition has an interface with alias %s that vflag did not make; not touching it", where, alias)
	}
	want := claim{PCI: n.PCI, MAC: n.MAC, Owner: n.Owner, Standby: alias}
	if !claimed || c != want {
		p.claim = &want
		p.claimAfter = claimed && c.Standby != "" && alias == ""
	}
	vfXML, err := interfaceXML(n.PCI, n.MAC, alias, n.VFVLAN)
	if err != nil {
		return p, err
	}
	vfWhat := fmt.Sprintf("VF %s (mac %s, group %s)", n.PCI, n.MAC, n.Owner)
	if alias != "" {
		vfWhat = fmt.Sprintf("VF %s (mac %s, group %s) as the transient of %s", n.PCI, n.MAC, n.Owner, alias)
	}
	if alias != "" {
		if err := p.planStandby(n, alias, sb, haveSB, replace); err != nil {
			return p, err
		}
	}
	switch {
	case len(found) == 0:
		p.ops = append(p.ops, devOp{xml: vfXML, what: "attach " + vfWhat, pcie: true})
	case found[0].team != alias || ifaceVLAN(found[0].def) != n.VFVLAN:
		if !replace {
			p.notes = append(p.notes, vfWhat+" at the next start")
			break
		}
		old, err := found[0].def.Marshal()
		if err != nil {
			return p, err
		}
		p.ops = append(p.ops, devOp{detach: true, xml: old, what: "detach VF " + n.PCI}, devOp{xml: vfXML, what: "attach " + vfWhat, pcie: true})
	}
	if haveOld && oldSB.alias != alias {
		if replace {
			old, err := oldSB.def.Marshal()
			if err != nil {
				return p, err
			}
			p.ops = append(p.ops, devOp{detach: true, xml: old, what: "detach standby " + oldSB.alias})
		} else {
			p.notes = append(p.notes, "standby "+oldSB.alias+" leaves at the next start")
		}
	}
	if !replace && len(p.ops) == 0 {
		p.claim = nil // the running domain keeps what it has; its claim too
	}
	return p, nil
}

// vflagsAt is what the definition has at the attachment's PCI address:
// the VF's interface vflag made (at most one), and vflag's claim on it.
// Anything there vflag did not make, or made for another group or MAC, is
// an error: never touched.
func vflagsAt(v view, n norm, where string) (found []iface, c claim, claimed bool, err error) {
	if v.hasHostdev(n.PCI) {
		return nil, c, false, fmt.Errorf("the %s definition has a <hostdev> with this PCI address that vflag did not create; not touching it", where)
	}
	found = v.ifacesFor(n.PCI)
	for _, i := range found {
		if !v.owned(i) {
			return nil, c, false, fmt.Errorf("the %s definition has an <interface type='hostdev'> with this PCI address (mac %s) that vflag did not attach; not touching it", where, i.mac)
		}
	}
	if len(found) > 1 {
		return nil, c, false, fmt.Errorf("the %s definition has %d interfaces with this PCI address", where, len(found))
	}
	c, claimed = v.claimFor(n.PCI)
	if claimed && len(found) == 1 {
		if c.Owner != n.Owner {
			return nil, c, false, fmt.Errorf("vflag attached it for LAG group %q, not %q", c.Owner, n.Owner)
		}
		if c.MAC != n.MAC {
			return nil, c, false, fmt.Errorf("vflag attached it with MAC %s, want %s; detach it first", c.MAC, n.MAC)
		}
	}
	return found, c, claimed, nil
}

// planStandby plans the teaming pair's standby (alias): attached when the
// definition lacks it; updated in place (replace) when its bridge or VLAN
// differs, else left for the next start.
func (p *defPlan) planStandby(n norm, alias string, sb standby, haveSB, replace bool) error {
	sbXML, err := StandbyXML(n.MAC, n.Standby)
	if err != nil {
		return err
	}
	sbWhat := fmt.Sprintf("standby %s (virtio on %s%s)", alias, n.Standby.Bridge, vlanWords(n.Standby))
	switch {
	case !haveSB:
		p.ops = append(p.ops, devOp{xml: sbXML, what: "attach " + sbWhat, pcie: true, standby: alias})
	case sb.bridge != n.Standby.Bridge || !sameVLAN(sb.vlan, n.Standby) || !sb.ovs || !sb.virtio:
		if !replace {
			p.notes = append(p.notes, sbWhat+" at the next start")
			return nil
		}
		old, err := sb.def.Marshal()
		if err != nil {
			return err
		}
		// libvirt finds the device by MAC and guest address: the VF has
		// the MAC too.
		upd := standbyDef(n.MAC, n.Standby)
		upd.Address = sb.def.Address
		x, err := upd.Marshal()
		if err != nil {
			return err
		}
		p.ops = append(p.ops, devOp{update: true, xml: x, old: old, what: "update " + sbWhat})
	}
	return nil
}

// vlanWords says a standby's VLAN: ", vlan 10", ", trunks 10,20".
func vlanWords(s Standby) string {
	out := ""
	if s.VLANMode != "" {
		out += ", vlan_mode " + s.VLANMode
	}
	if s.VLAN != 0 {
		out += fmt.Sprintf(", vlan %d", s.VLAN)
	}
	if len(s.Trunks) > 0 {
		ts := make([]string, len(s.Trunks))
		for i, t := range s.Trunks {
			ts[i] = fmt.Sprint(t)
		}
		out += ", trunks " + strings.Join(ts, ",")
	}
	return out
}

// plan is what Attach has to do.
type plan struct {
	config     defPlan // the persistent definition
	live       defPlan // the live definition
	liveWanted bool    // Attachment.Live and the domain runs
	why        string
}

func (p plan) needed() bool { return !p.config.empty() || !p.live.empty() }

// makePlan plans both definitions; libVer and qemuVer (0: unknown) are
// libvirt's and QEMU's versions, which a migratable attachment needs.
func makePlan(s snapshot, n norm, libVer, qemuVer uint32) (plan, error) {
	if !s.persistent {
		return plan{}, errors.New("the domain is transient; vflag attaches only to persistent (defined) domains")
	}
	var p plan
	var err error
	if p.config, err = planDef(s.cfg, n, "persistent", true); err != nil {
		return p, err
	}
	p.liveWanted = n.Live && s.active
	if p.liveWanted {
		if p.live, err = planDef(*s.live, n, "live", false); err != nil {
			return p, err
		}
	}
	if n.Migratable && (!p.config.empty() || !p.live.empty()) {
		if probs := teamingProblems(s, n, libVer, qemuVer, p.live.pcie()); len(probs) > 0 {
			msgs := make([]string, len(probs))
			for i, pr := range probs {
				msgs[i] = pr.Field + ": " + pr.Msg
			}
			return p, errors.New(strings.Join(msgs, "; "))
		}
	}
	p.why = describe(p, n, s.active)
	return p, nil
}

// describe says what the plan does: "attach VF ... to vm1: persistent".
func describe(p plan, n norm, active bool) string {
	words := func(d defPlan) string {
		var w []string
		for _, o := range d.ops {
			w = append(w, o.what)
		}
		if len(w) == 0 && d.claim != nil {
			w = append(w, "record vflag's claim")
		}
		return strings.Join(w, ", ")
	}
	dev := fmt.Sprintf("%s (mac %s, group %s)", n.PCI, n.MAC, n.Owner)
	plainAttach := func(d defPlan) bool {
		return len(d.ops) == 0 || len(d.ops) == 1 && !d.ops[0].detach && !d.ops[0].update
	}
	if !n.Migratable && plainAttach(p.config) && plainAttach(p.live) && len(p.live.notes) == 0 {
		config, live := len(p.config.ops) > 0, len(p.live.ops) > 0
		switch {
		case config && live:
			return fmt.Sprintf("attach %s to %s: persistent and live", dev, n.Domain)
		case config:
			why := fmt.Sprintf("attach %s to %s: persistent", dev, n.Domain)
			switch {
			case n.Live && !active:
				why += " only (domain not running)"
			case !n.Live && active:
				why += " only (live not requested)"
			}
			return why
		case live:
			return fmt.Sprintf("attach %s to %s: live (already in the persistent definition)", dev, n.Domain)
		case p.config.empty() && p.live.empty():
			return fmt.Sprintf("%s already attached to %s by vflag", dev, n.Domain)
		}
	}
	var parts []string
	if !p.config.empty() {
		parts = append(parts, fmt.Sprintf("%s: persistent: %s", n.Domain, words(p.config)))
	}
	if !p.live.empty() {
		parts = append(parts, fmt.Sprintf("%s: live: %s", n.Domain, words(p.live)))
	}
	if len(p.live.notes) > 0 {
		parts = append(parts, fmt.Sprintf("%s: the running domain keeps its interfaces until its next start (%s)", n.Domain, strings.Join(p.live.notes, "; ")))
	}
	if len(parts) == 0 {
		what := "attached"
		if n.Migratable {
			what = "attached with its standby " + StandbyAlias(n.MAC)
		}
		return fmt.Sprintf("%s already %s to %s by vflag", dev, what, n.Domain)
	}
	why := strings.Join(parts, "; ")
	if p.live.empty() && len(p.live.notes) == 0 && !p.config.empty() {
		switch {
		case n.Live && !active:
			why += " only (domain not running)"
		case !n.Live && active:
			why += " only (live not requested)"
		}
	}
	return why
}
