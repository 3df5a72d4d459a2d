package pipeline

import (
	"context"
	"fmt"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/teardown"
)

// attachKind attaches a VF to a domain as <interface type='hostdev'
// managed='yes'> with the configured MAC, persistent and, if asked and the
// domain runs, live; marked in vflag's domain metadata (DESIGN.md step 11).
//
//	virsh attach-device $domain vf.xml --config [--live]
type attachKind struct{}

type attachRecord struct {
	URI        string          `json:"uri"`
	Attachment libvirtx.Record `json:"attachment"`
}

func (attachKind) Name() string { return KindAttach }
func (attachKind) DependsOn() []string {
	return []string{numVFsKind{}.Name(), vfMACKind{}.Name()}
}

// id names the attachment by logical coordinates: a plan (before the VF
// exists) and up give it the same id.
func (k attachKind) id(domain string, pf eswitch.PF, vf int) string {
	return fmt.Sprintf("%s/%s/%s/vf%d", k.Name(), domain, pf.Netdev, vf)
}

func (k attachKind) step(e *Env, id string, a libvirtx.Attachment) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: id,
		Check: func(ctx context.Context) (teardown.Change, error) {
			c, err := e.h.Virt()
			if err != nil {
				return teardown.Change{}, err
			}
			needed, why, err := c.Plan(a)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: needed, Summary: why,
				Record: attachRecord{URI: e.h.Libvirt, Attachment: a.Record()}}, nil
		},
		Apply: func(ctx context.Context) error {
			c, err := e.h.Virt()
			if err != nil {
				return err
			}
			m := e.domainLock(a.Domain)
			m.Lock()
			defer m.Unlock()
			_, _, err = c.Attach(a)
			return err
		},
	}
}

func (attachKind) Undo(ctx context.Context, e *Env, r attachRecord) (string, error) {
	c, done, err := e.virtAt(r.URI)
	if err != nil {
		return "", err
	}
	defer done()
	if err := c.Detach(r.Attachment); err != nil {
		return "", err
	}
	return fmt.Sprintf("domain %s: detach VF %s", r.Attachment.Domain, r.Attachment.PCI), nil
}

// AttachmentOf is the libvirtx attachment of a config attachment whose VF
// is at pci: the MAC (the attachment's, else the VF's), and for a
// migratable one the standby on the group's bridge with the VLAN columns
// the VF's representor port has (RepPortSpec), or in a legacy group on
// standby_bridge with the VF's vlan, which the VF's <vlan> gets too.
func AttachmentOf(g *config.Group, a config.Attachment, pci string) libvirtx.Attachment {
	mac := a.MAC
	if mac == "" {
		mac = g.VFMAC(a.PF, a.VF)
	}
	att := libvirtx.Attachment{Domain: a.Domain, PCI: pci, MAC: mac, Live: a.Live, Owner: g.Name, Migratable: a.Migratable}
	if !a.Migratable {
		return att
	}
	if g.Eswitch == eswitch.ModeLegacy {
		// No representor: libvirt sets the VF's VLAN through the PF from
		// the VF's <vlan>, and the standby's port on the host's bridge
		// from its own; both the VF's vlan, so the standby reaches the
		// wire the VF's traffic leaves on, in the same VLAN.
		vlan := 0
		for _, v := range g.VFs {
			if v.PF == a.PF && v.VF == a.VF {
				vlan = v.VLAN
			}
		}
		att.VFVLAN = vlan
		att.Standby = libvirtx.Standby{Bridge: g.StandbyBridge, VLAN: vlan}
		return att
	}
	ps := RepPortSpec(g, VFKey{a.PF, a.VF}, "")
	att.Standby = libvirtx.Standby{Bridge: g.OVS.Bridge, VLAN: ps.Tag, VLANMode: ps.VLANMode, Trunks: ps.Trunks}
	return att
}

// attach: one domain at a time (libvirt serialises them anyway).
func (run *groupRun) attach(context.Context) ([]batch, error) {
	vfs, err := run.namedVFs()
	if err != nil {
		return nil, err
	}
	g := run.g
	var out []batch
	for _, a := range g.Attachments {
		pf := g.PFs[a.PF]
		id := attachKind{}.id(a.Domain, pf, a.VF)
		mac := a.MAC
		if mac == "" {
			mac = g.VFMAC(a.PF, a.VF)
		}
		pci, ok := vfs[VFKey{a.PF, a.VF}]
		switch {
		case ok:
			att := AttachmentOf(g.Group, a, string(pci))
			out = append(out, batch{attachKind{}.step(run.e, id, att)})
		case run.dry:
			what := "attach VF"
			if a.Migratable {
				what = "attach the teaming pair (standby " + libvirtx.StandbyAlias(mac) + " on " + standbyBridge(g.Group) + ") of VF"
			}
			out = append(out, batch{predicted(attachKind{}.Name(), id,
				fmt.Sprintf("domain %s: %s %d of %s mac %s (after VF creation)", a.Domain, what, a.VF, pf.Netdev, mac))})
		default:
			return nil, fmt.Errorf("attachment of pf %d vf %d: the VF does not exist", a.PF, a.VF)
		}
	}
	return out, nil
}

// standbyBridge is the bridge of g's teaming standbys: a legacy group's
// standby_bridge, else ovs.bridge.
func standbyBridge(g *config.Group) string {
	if g.Eswitch == eswitch.ModeLegacy {
		return g.StandbyBridge
	}
	return g.OVS.Bridge
}
