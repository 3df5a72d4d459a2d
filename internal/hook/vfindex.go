package hook

import (
	"fmt"
	"path"
	"strconv"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/sysfs"
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

// pfCandidate is a PF whose VFs are vflag's: a config group's (group set,
// the first PF of its device in the group) or the main journal's.
type pfCandidate struct {
	pf    eswitch.PF
	group *config.Group
}

// index finds the PFs whose VFs the config and the main journal make
// vflag's; lookup then finds a domain's VF among them.
func (p *preparer) index(cfg *config.Config, j *teardown.Journal, jErr error) {
	k, f := p.h.Kernel, p.h.FS
	if cfg != nil {
		for gi := range cfg.Groups {
			g, errs := pipeline.ResolveGroup(k, f, &cfg.Groups[gi])
			for _, err := range errs {
				p.o.Log.Debug("hook: PF not usable", "group", g.Name, "err", err)
			}
			for _, i := range g.Owners {
				p.cfgPFs = append(p.cfgPFs, pfCandidate{pf: g.PFs[i], group: g.Group})
			}
		}
	}
	if jErr != nil {
		fmt.Fprintf(p.o.Stderr, "vflag hook: %v; only the config's VFs are checked\n", jErr)
		return
	}
	p.bridges = pipeline.JournalBridges(j)
	p.journalPFs = pipeline.JournalDevices(j)
}

// managed looks up a domain's PCI device among the VFs of the indexed PFs,
// once per address: the device's physfn link names its PF, and only that
// PF's VF index is read, instead of listing every VF of every PF. A config
// group wins over the journal, and a later group over an earlier one (as
// when every group's VFs were listed in turn).
func (p *preparer) managed(pci string) (managedVF, bool) {
	a := sriov.Addr(pci)
	if m, ok := p.vfs[a]; ok {
		return m, true
	}
	if p.notVF[a] {
		return managedVF{}, false
	}
	m, ok := p.find(a)
	if ok {
		p.vfs[a] = m
	} else {
		p.notVF[a] = true
	}
	return m, ok
}

func (p *preparer) find(a sriov.Addr) (managedVF, bool) {
	cfgPFs := make([]eswitch.PF, len(p.cfgPFs))
	for i, c := range p.cfgPFs {
		cfgPFs[i] = c.pf
	}
	at, ok := vfAt(p.h, a, cfgPFs)
	switch {
	case ok:
		return managedVF{Addr: a, PF: cfgPFs[at.pf], VF: at.vf, Group: p.cfgPFs[at.pf].group}, true
	case at.pfAddr == "":
		return p.predicted(a) // not a VF: perhaps one up has not made yet
	case at.pf >= 0:
		return managedVF{}, false // not a VF, or one of a config group's PFs that is not there
	}
	dev := sriov.PCIDevice(at.pfAddr)
	for _, d := range p.journalPFs {
		if d != dev {
			continue
		}
		pf, err := eswitch.ResolvePF(p.h.Kernel, p.h.FS, string(at.pfAddr))
		if err != nil || pf.Dev != dev {
			continue
		}
		if idx, ok := vfIndex(p.h, pf, at.pfAddr, a); ok {
			return managedVF{Addr: a, PF: pf, VF: idx, Bridges: p.bridges}, true
		}
	}
	return managedVF{}, false
}

// vfPlace is where vfAt looked for a PCI address: its PF's address (""
// when it is not a VF), the index in the PFs given of the last one on that
// PF's device (-1 none), and its VF index there (-1 none).
type vfPlace struct {
	pfAddr sriov.Addr
	pf, vf int
}

// vfAt finds the VF at PCI address a among the VFs of pfs: the one way both
// hooks turn a device (the qemu hook's domain interface, the network hook's
// port) into a PF and VF index. The device's physfn link names its PF; the
// last of pfs on that PF's device is the one (a later group wins over an
// earlier one), and only that PF's VF index is read (vfIndex), instead of
// listing every VF of every PF. ok tells that it was found.
func vfAt(h *host.Host, a sriov.Addr, pfs []eswitch.PF) (vfPlace, bool) {
	at := vfPlace{pf: -1, vf: -1}
	if canon, err := sriov.ParseAddr(string(a)); err != nil || canon != a {
		return at, false // never a virtfn link's target
	}
	target, err := h.FS.Readlink(path.Join(a.Dir(), "physfn"))
	if err != nil {
		return at, false // not a VF (or gone)
	}
	pfAddr, err := sriov.ParseAddr(path.Base(target))
	if err != nil {
		return at, false
	}
	at.pfAddr = pfAddr
	dev := sriov.PCIDevice(pfAddr)
	for i := len(pfs) - 1; i >= 0; i-- {
		if pfs[i].Dev != dev {
			continue
		}
		at.pf = i
		if idx, ok := vfIndex(h, pfs[i], pfAddr, a); ok {
			at.vf = idx
			return at, true
		}
		return at, false
	}
	return at, false
}

// predicted finds a device that does not exist yet among the VFs a config
// group's PF will have: the address the PF's sriov_offset and sriov_stride
// give VF i, i below the group's numvfs. At boot libvirtd may autostart a
// domain before vflag-pre has made the VFs (nothing orders libvirtd after
// it where no network service pulls in network.target); the domain is
// vflag's all the same, so that the boot gate defers it, where letting it
// through would have libvirt set up the VF moments later, half made (its
// PF not yet up), and fail the start.
func (p *preparer) predicted(a sriov.Addr) (managedVF, bool) {
	if _, err := p.h.FS.ReadDir(a.Dir()); err == nil {
		return managedVF{}, false // there, and no VF
	}
	pci := sriov.Host{FS: p.h.FS}
	for i := len(p.cfgPFs) - 1; i >= 0; i-- {
		c := p.cfgPFs[i]
		if c.pf.Addr == "" {
			continue
		}
		for vf := 0; vf < c.group.NumVFs; vf++ {
			if got, ok := pci.PredictVF(c.pf.Addr, vf); ok && got == a {
				return managedVF{Addr: a, PF: c.pf, VF: vf, Group: c.group}, true
			}
		}
	}
	return managedVF{}, false
}

// representorOf is the representor of VF vf of pf, found by devlink port
// first, phys_port_name second (eswitch.RepresentorsOf).
func representorOf(h *host.Host, pf eswitch.PF, vf int) (string, error) {
	reps, err := eswitch.RepresentorsOf(h.Kernel, h.FS, pf, vf+1)
	if err != nil {
		return "", err
	}
	rep, ok := reps[vf]
	if !ok {
		return "", fmt.Errorf("VF %d of %s has no representor", vf, pf.Netdev)
	}
	return rep, nil
}

// vfIndex is the index of VF a of the PF: its virtfn<i> link points to a.
// The index is computed from the PF's sriov_offset and sriov_stride (the
// kernel's routing ID rule) and checked against that one link; where that
// fails, the PF's VFs are listed.
func vfIndex(h *host.Host, pf eswitch.PF, pfAddr, a sriov.Addr) (int, bool) {
	if i, ok := ridIndex(h.FS, pfAddr, a); ok {
		if got, ok, err := h.PCI.VF(pf.Dev, i); err == nil && ok && got == a {
			return i, true
		}
	}
	vfs, err := h.PCI.VFs(pf.Dev)
	if err != nil {
		return 0, false
	}
	for _, v := range vfs {
		if v.Addr == a {
			return v.Index, true
		}
	}
	return 0, false
}

// ridIndex computes i from rid(vf) = rid(pf) + offset + i*stride.
func ridIndex(f sysfs.FS, pfAddr, a sriov.Addr) (int, bool) {
	readInt := func(file string) (int, bool) {
		s, err := sysfs.ReadString(f, path.Join(pfAddr.Dir(), file))
		if err != nil {
			return 0, false
		}
		v, err := strconv.Atoi(s)
		return v, err == nil
	}
	off, ok1 := readInt("sriov_offset")
	stride, ok2 := readInt("sriov_stride")
	pd, pb, pdev, pfn := pfAddr.Parts()
	vd, vb, vdev, vfn := a.Parts()
	if !ok1 || !ok2 || stride <= 0 || pd != vd {
		return 0, false
	}
	d := int(vb<<8|vdev<<3|vfn) - int(pb<<8|pdev<<3|pfn) - off
	if d < 0 || d%stride != 0 {
		return 0, false
	}
	return d / stride, true
}
