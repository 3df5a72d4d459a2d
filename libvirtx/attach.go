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

// present checks one definition for the VF: true when vflag's interface with
// this MAC is there; an error when anything else holds the PCI address.
func present(v view, n norm, where string) (bool, error) {
	if v.hasHostdev(n.PCI) {
		return false, fmt.Errorf("the %s definition has a <hostdev> with this PCI address that vflag did not create; not touching it", where)
	}
	found := v.ifacesFor(n.PCI)
	for _, i := range found {
		if !v.owned(i) {
			return false, fmt.Errorf("the %s definition has an <interface type='hostdev'> with this PCI address (mac %s) that vflag did not attach; not touching it", where, i.mac)
		}
	}
	switch {
	case len(found) == 0:
		return false, nil
	case len(found) > 1:
		return false, fmt.Errorf("the %s definition has %d interfaces with this PCI address", where, len(found))
	}
	c, _ := v.claimFor(n.PCI)
	if c.Owner != n.Owner {
		return false, fmt.Errorf("vflag attached it for LAG group %q, not %q", c.Owner, n.Owner)
	}
	if c.MAC != n.MAC {
		return false, fmt.Errorf("vflag attached it with MAC %s, want %s; detach it first", c.MAC, n.MAC)
	}
	return true, nil
}

// plan is what Attach has to do.
type plan struct {
	config     bool // attach to the persistent definition
	live       bool // attach to the live definition
	liveWanted bool // Attachment.Live and the domain runs
	why        string
}

func makePlan(s snapshot, n norm) (plan, error) {
	if !s.persistent {
		return plan{}, errors.New("the domain is transient; vflag attaches only to persistent (defined) domains")
	}
	var p plan
	inCfg, err := present(s.cfg, n, "persistent")
	if err != nil {
		return p, err
	}
	p.config = !inCfg
	p.liveWanted = n.Live && s.active
	inLive := false
	if p.liveWanted {
		if inLive, err = present(*s.live, n, "live"); err != nil {
			return p, err
		}
		p.live = !inLive
	}
	dev := fmt.Sprintf("%s (mac %s, group %s)", n.PCI, n.MAC, n.Owner)
	switch {
	case p.config && p.live:
		p.why = fmt.Sprintf("attach %s to %s: persistent and live", dev, n.Domain)
	case p.config:
		p.why = fmt.Sprintf("attach %s to %s: persistent", dev, n.Domain)
		switch {
		case n.Live && !s.active:
			p.why += " only (domain not running)"
		case !n.Live && s.active:
			p.why += " only (live not requested)"
		}
	case p.live:
		p.why = fmt.Sprintf("attach %s to %s: live (already in the persistent definition)", dev, n.Domain)
	default:
		p.why = fmt.Sprintf("%s already attached to %s by vflag", dev, n.Domain)
	}
	return p, nil
}
