package hook

import (
	"fmt"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// managedVF is one VF of vflag's, with what the config says about it.
type managedVF struct {
	Addr  sriov.Addr
	PF    eswitch.PF
	VF    int
	Group *config.Group // nil: known from the journal only
	// From the journal when Group is nil: bridges holding vflag's ports.
	Bridges []pipeline.BridgeRef
}

func (m managedVF) String() string {
	s := fmt.Sprintf("VF %d of %s (%s)", m.VF, m.PF.Netdev, m.Addr)
	if m.Group != nil {
		s += ", group " + m.Group.Name
	}
	return s
}

// inPool tells whether the VF is in its group's VF pool (a libvirt
// hostdev network): its representor's VLAN is then the network hook's,
// from the port's portgroup, not the config's.
func (m managedVF) inPool() bool {
	if m.Group == nil || m.Group.Network == nil {
		return false
	}
	for pi, ref := range m.Group.PFs {
		if ref != m.PF.Netdev && ref != string(m.PF.Addr) {
			continue
		}
		for _, r := range m.Group.PoolVFs() {
			if r.PF == pi && r.VF == m.VF {
				return true
			}
		}
	}
	return false
}

// vfConfig is the config's entry for the VF (zero when none).
func (m managedVF) vfConfig() config.VFConfig {
	if k, ok := m.key(); ok {
		for _, v := range m.Group.VFs {
			if v.PF == k.PF && v.VF == k.VF {
				return v
			}
		}
	}
	return config.VFConfig{}
}

// key is the VF's coordinates in its group's config (its PF's index in
// pfs[]); ok is false for a VF known from the journal only.
func (m managedVF) key() (pipeline.VFKey, bool) {
	if m.Group == nil {
		return pipeline.VFKey{}, false
	}
	for pi, ref := range m.Group.PFs {
		if ref == m.PF.Netdev || ref == string(m.PF.Addr) {
			return pipeline.VFKey{PF: pi, VF: m.VF}, true
		}
	}
	return pipeline.VFKey{}, false
}

// index finds the VFs the config and the main journal make vflag's.
func (p *preparer) index(cfg *config.Config, j *teardown.Journal, jErr error) {
	k, f := p.h.Kernel, p.h.FS
	if cfg != nil {
		for gi := range cfg.Groups {
			g, errs := pipeline.ResolveGroup(k, f, &cfg.Groups[gi])
			for _, err := range errs {
				p.o.Log.Debug("hook: PF not usable", "group", g.Name, "err", err)
			}
			for _, i := range g.Owners {
				p.addVFs(g.PFs[i], g.Group, nil)
			}
		}
	}
	if jErr != nil {
		fmt.Fprintf(p.o.Stderr, "vflag hook: %v; only the config's VFs are checked\n", jErr)
		return
	}
	bridges := pipeline.JournalBridges(j)
	for _, dev := range pipeline.JournalDevices(j) {
		addr, ok := dev.PCI()
		if !ok {
			continue // no PCI VFs: nothing a domain can take
		}
		pf, err := eswitch.ResolvePF(k, f, string(addr))
		if err != nil {
			continue
		}
		p.addVFs(pf, nil, bridges)
	}
}

// addVFs indexes the VFs of a PF; a config group wins over the journal.
func (p *preparer) addVFs(pf eswitch.PF, g *config.Group, bridges []pipeline.BridgeRef) {
	vfs, err := p.h.PCI.VFs(pf.Dev)
	if err != nil {
		return
	}
	for _, v := range vfs {
		if v.Addr == "" {
			continue
		}
		if _, ok := p.vfs[v.Addr]; ok && g == nil {
			continue
		}
		p.vfs[v.Addr] = managedVF{Addr: v.Addr, PF: pf, VF: v.Index, Group: g, Bridges: bridges}
	}
}
