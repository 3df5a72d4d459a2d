package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/sriov"
)

// HostErrors is every reason the host is not ready for the config, found
// by preflight before any write; each names the config field it concerns.
// They are about the host, not the config file's syntax.
type HostErrors []config.FieldError

// DoctorHint ends a preflight failure on the host.
const DoctorHint = "run `vflag doctor` to see what the host lacks and how to fix it"

func (es HostErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return "preflight failed (the host, not the config file):\n  " + strings.Join(lines, "\n  ") + "\n" + DoctorHint
}

// Preflight checks, before any write, everything the host must satisfy
// (DESIGN.md step 0), and resolves the groups. Every problem is reported,
// each naming its field.
func (e *Env) Preflight(ctx context.Context) ([]Group, error) {
	var errs HostErrors
	var out []Group
	needOVS, needVirt := false, false
	var domains []domainRef // the attachments' domains, each must exist
	for gi := range e.cfg.Groups {
		g, ds := e.preflightGroup(gi, errs.add)
		needOVS = needOVS || g.Switchdev()
		needVirt = needVirt || len(g.Attachments) > 0 || g.Network != nil
		domains = append(domains, ds...)
		out = append(out, g)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if e.Stage == StagePre {
		// Boot, before OVS and libvirtd: neither is asked, and no domain runs yet.
		return out, nil
	}
	// OVSDB and libvirtd are asked at the same time: neither waits for the
	// other's connection. Once OVSDB answers, the bridges' read the bridge
	// step's check makes is started (ovs.Client.Prefetch: the caller holds
	// vflag's lock), so it overlaps the sysfs and netlink reads of the steps
	// before it.
	ovsErr := make(chan error, 1)
	go func() {
		if !needOVS {
			ovsErr <- nil
			return
		}
		c, err := e.h.OVS(ctx)
		if err == nil {
			c.Prefetch(ctx)
		}
		ovsErr <- err
	}()
	var virtErrs HostErrors
	if needVirt {
		if c, err := e.h.Virt(); err != nil {
			virtErrs.add("libvirt", e.h.Libvirt, "is not reachable: %v", err)
		} else {
			e.preflightDomains(c, domains, virtErrs.add)
			e.preflightPools(c, out, virtErrs.add)
		}
	}
	if err := <-ovsErr; err != nil {
		errs.add("ovsdb", e.h.OVSDB, "is not reachable: %v", err)
	}
	errs = append(errs, virtErrs...)
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// add appends a host error for the config field path.
func (es *HostErrors) add(path string, v any, format string, args ...any) {
	*es = append(*es, config.FieldError{Path: path, Value: v, Msg: fmt.Sprintf(format, args...)})
}

// domainRef is an attachment's domain and the field naming it; for a
// migratable attachment, the attachment (its field path is path's parent).
type domainRef struct {
	path, name string
	teaming    *libvirtx.Attachment
}

// preflightGroup resolves group gi and checks its PFs, its bond and its
// VF pools on the host; it returns the group (with only its usable PFs)
// and its attachments' domains.
func (e *Env) preflightGroup(gi int, add func(string, any, string, ...any)) (Group, []domainRef) {
	cg := &e.cfg.Groups[gi]
	p := fmt.Sprintf("groups[%d]", gi)
	g, pfErrs := ResolveGroup(e.k, e.fs, cg)
	for _, pe := range pfErrs {
		if what := e.notAPort(pe.Ref); what != "" {
			add(fmt.Sprintf("%s.pfs[%d]", p, pe.Index), pe.Ref, "is %s, not a physical port (PF) of an SR-IOV NIC", what)
			continue
		}
		hint := ""
		if h := e.hintPFs([]absentPF{{group: gi, index: pe.Index, ref: pe.Ref, err: pe.Err}}); len(h) == 1 && h[0] != "" {
			hint = " (" + h[0] + ")"
		}
		add(fmt.Sprintf("%s.pfs[%d]", p, pe.Index), pe.Ref, "not usable: %v%s", pe.Err, hint)
	}
	g.PFs = e.usablePFs(cg, p, g.PFs, add)
	g.Owners = Owners(g.PFs)
	if len(g.PFs) == 2 && g.Switchdev() {
		checkOneNIC(g, cg, p, add)
	}
	if g.Switchdev() {
		e.checkBondFree(g, cg, p, add)
		e.preflightTunnel(g, p, add)
	}
	if len(g.PFs) == len(cg.PFs) {
		for _, v := range PoollessVFs(g) {
			add(fmt.Sprintf("%s.%s.pf", p, v.Field), v.PF, "%s", v.Why(g))
		}
		if why := EmptyPool(g); why != "" {
			add(p+".network", g.NetworkName(), "%s", why)
		}
	}
	var domains []domainRef
	for i, a := range g.Attachments {
		ref := domainRef{path: fmt.Sprintf("%s.attachments[%d].domain", p, i), name: a.Domain}
		if a.Migratable {
			att := AttachmentOf(cg, a, "")
			ref.teaming = &att
		}
		domains = append(domains, ref)
	}
	return g, domains
}

// usablePFs returns the resolved PFs that are SR-IOV physical ports (not a
// bond, VF or other netdev) and reports the others; it also checks numvfs
// against each PF's sriov_totalvfs, and, in a switchdev group, each mlx5
// PF's sriov_totalvfs against VF-LAG's limit (eswitch.TotalVFsProblem).
func (e *Env) usablePFs(cg *config.Group, p string, pfs []eswitch.PF, add func(string, any, string, ...any)) []eswitch.PF {
	var usable = pfs[:0:0]
	for i, pf := range pfs {
		idx := indexOfRef(cg.PFs, pf, i)
		path := fmt.Sprintf("%s.pfs[%d]", p, idx)
		if what := e.notAPort(pf.Netdev); what != "" {
			add(path, cg.PFs[idx], "is %s, not a physical port (PF) of an SR-IOV NIC", what)
			continue
		}
		if !e.pci.HasSRIOV(pf.Dev) {
			add(path, cg.PFs[idx], "is not an SR-IOV physical function (%s has no sriov_numvfs)", pf.Dev)
			continue
		}
		if e.pci.HasPCIVFs(pf.Dev) { // netdevsim has no sriov_totalvfs: the kernel checks the count
			total, err := e.pci.TotalVFs(pf.Dev)
			if err != nil {
				add(path, cg.PFs[idx], "%v", err)
				continue
			}
			if cg.NumVFs > total {
				add(p+".numvfs", cg.NumVFs, "exceeds sriov_totalvfs %d of %s (%s)", total, pf.Netdev, pf.Dev)
			}
			if cg.Switchdev() {
				drv, _ := e.pci.Driver(pf.Addr)
				if why := eswitch.TotalVFsProblem(pf.Netdev, string(pf.Addr), drv, total); why != "" {
					add(path, cg.PFs[idx], "%s; fix: %s", why, eswitch.FirmwareNumVFsFix(string(pf.Addr)))
				}
			}
		}
		usable = append(usable, pf)
	}
	return usable
}

// checkOneNIC checks that a switchdev group's two PFs are the two
// distinct ports of one NIC.
func checkOneNIC(g Group, cg *config.Group, p string, add func(string, any, string, ...any)) {
	a, b := g.PFs[0], g.PFs[1]
	// One NIC: the same devlink instance (netdevsim) or the same PCI
	// slot (mlx5: one instance per function), and one switch id.
	sameNIC := a.Devlink == b.Devlink || a.Addr != "" && b.Addr != "" && a.Addr.Slot() == b.Addr.Slot()
	if !sameNIC || a.SwitchID != "" && b.SwitchID != "" && a.SwitchID != b.SwitchID {
		add(p+".pfs", strings.Join(cg.PFs, ","), "are not the two ports of one NIC (%s and %s differ in PCI slot, devlink instance or switch id)", a.Dev, b.Dev)
	}
	if a.Netdev == b.Netdev {
		add(p+".pfs", strings.Join(cg.PFs, ","), "name the same PF twice")
	}
}

// checkBondFree checks that a switchdev group's bond name is free or
// vflag's own, and that no PF is a slave of another master.
func (e *Env) checkBondFree(g Group, cg *config.Group, p string, add func(string, any, string, ...any)) {
	if l, err := e.k.Link(g.Bond.Name); err == nil && l.Alias != BondAlias(g.Name) && !e.claimedBond(l) {
		add(p+".bond.name", g.Bond.Name, "exists and was not created by vflag (alias %q): choose another name", l.Alias)
	} else if err != nil && !errors.Is(err, eswitch.ErrLinkNotFound) {
		add(p+".bond.name", g.Bond.Name, "%v", err)
	}
	for i, pf := range g.PFs {
		if l, err := e.k.Link(pf.Netdev); err == nil && l.Master != "" && l.Master != g.Bond.Name {
			add(fmt.Sprintf("%s.pfs[%d]", p, i), cg.PFs[i], "is already a slave of %s", l.Master)
		}
	}
}

// preflightDomains checks that libvirt is reachable and knows each
// attachment's domain: an attachment to a domain libvirt does not know
// would fail at its step, after the eswitch, bond and bridge were built,
// so it is refused now (plan fails where up would).
func (e *Env) preflightDomains(c *libvirtx.Conn, domains []domainRef, add func(string, any, string, ...any)) {
	// One read of each domain serves this check, the plan pass's
	// attachments and verify, until vflag writes a domain
	// (libvirtx.Conn.Prefetch; the caller holds vflag's lock).
	names := make([]string, 0, len(domains))
	for _, d := range domains {
		names = append(names, d.name)
	}
	c.Prefetch(names...)
	checked := map[string]bool{}
	var teaming []domainRef
	defer func() {
		// After the domains' own checks: a domain that is missing is said once.
		for _, d := range teaming {
			e.preflightTeaming(c, d, add)
		}
	}()
	for _, d := range domains {
		if d.teaming != nil {
			teaming = append(teaming, d)
		}
		if checked[d.name] {
			continue
		}
		checked[d.name] = true
		st, err := c.Domain(d.name)
		switch {
		case err != nil:
			add(d.path, d.name, "cannot be read from libvirt %s: %v", e.h.Libvirt, err)
		case !st.Exists:
			add(d.path, d.name, "is not a domain of libvirt %s: define it first (virsh define), or drop the attachment", e.h.Libvirt)
		case !st.Persistent:
			// The attach step would refuse it, after the steps before it
			// changed the host: say it before any write.
			add(d.path, d.name, "is a transient domain of libvirt %s: vflag attaches VFs only to defined (persistent) domains; define it (virsh define), or drop the attachment", e.h.Libvirt)
		}
	}
}

// preflightTeaming refuses, before any write, a migratable attachment
// libvirt could not make a teaming pair of (libvirtx.TeamingProblems): the
// domain's machine, libvirt's and QEMU's versions, a MAC another interface
// of the domain has, the running domain's free PCIe root ports.
func (e *Env) preflightTeaming(c *libvirtx.Conn, d domainRef, add func(string, any, string, ...any)) {
	base := strings.TrimSuffix(d.path, ".domain")
	probs, err := c.TeamingProblems(*d.teaming)
	if err != nil {
		add(base+".migratable", true, "%v", err)
		return
	}
	for _, pr := range probs {
		var v any = true
		switch pr.Field {
		case "domain":
			v = d.name
		case "mac":
			v = d.teaming.MAC
		case "live":
			v = d.teaming.Live
		}
		add(base+"."+pr.Field, v, "%s", pr.Msg)
	}
}

// preflightPools refuses, before any write, a VF pool whose network name
// is a libvirt network that is not vflag's (or another group's), and a
// pool's VF that another libvirt network's pool has too
// (libvirtx.TakenVFs: libvirt would take it and hand it out from both):
// the VFs that exist now, and those up is still to make at the address the
// PF's SR-IOV routing rule gives them (sriov.Host.PredictVF). vflag's own
// networks that the run removes (ReplacedNetworks) count as neither.
func (e *Env) preflightPools(c *libvirtx.Conn, gs []Group, add func(string, any, string, ...any)) {
	replaced := e.ReplacedNetworks()
	for gi, g := range gs {
		if g.Network == nil {
			continue
		}
		path := fmt.Sprintf("groups[%d].network", gi)
		if st, err := c.Network(g.NetworkName()); err != nil {
			add(path+".name", g.NetworkName(), "%v", err)
			continue
		} else if st.Exists && !st.Owned {
			add(path+".name", g.NetworkName(), "is a libvirt network that is not vflag's (no vflag metadata): vflag never changes it; give the group's network another name")
			continue
		} else if st.Exists && st.Owner != g.Name && !slices.Contains(replaced, st.Name) {
			add(path+".name", g.NetworkName(), "is vflag group %q's libvirt network: give this group's network another name", st.Owner)
			continue
		}
		var pcis []string
		keys := map[string]VFKey{}
		predicted := map[string]bool{}
		for _, k := range g.Pool() {
			a, ok, err := e.VFAddr(g, k)
			if err != nil {
				add(path, g.NetworkName(), "VF %s: %v", k, err)
				continue
			}
			if !ok && k.PF >= 0 && k.PF < len(g.PFs) && g.PFs[k.PF].Addr != "" {
				if a, ok = e.pci.PredictVF(g.PFs[k.PF].Addr, k.VF); ok {
					predicted[string(a)] = true
				}
			}
			if ok {
				pcis = append(pcis, string(a))
				keys[string(a)] = k
			}
		}
		if len(pcis) == 0 {
			continue
		}
		taken, err := c.TakenVFs(g.NetworkName(), pcis, replaced...)
		if err != nil {
			add("libvirt", e.h.Libvirt, "cannot read its networks' VF pools: %v", err)
			return
		}
		for _, t := range taken {
			at := t.PCI
			if predicted[t.PCI] {
				at += ", its address once up makes it"
			}
			add(path, g.NetworkName(), "VF %s (%s) %s", keys[t.PCI], at, t.Why())
		}
	}
}

// ReplacedNetworks are vflag's own libvirt networks that the journal
// records (Recorded) and no group of the config names: the run removes
// them (a pool renamed, a group or its network dropped), so they own
// nothing the config wants.
func (e *Env) ReplacedNetworks() []string {
	wanted := map[string]bool{}
	for i := range e.cfg.Groups {
		if e.cfg.Groups[i].Network != nil {
			wanted[e.cfg.Groups[i].NetworkName()] = true
		}
	}
	var out []string
	for _, en := range e.Recorded {
		if en.Kind != KindNetwork {
			continue
		}
		rec, err := decode[networkRecord](en.Record)
		if err != nil || wanted[rec.Name] || slices.Contains(out, rec.Name) {
			continue
		}
		out = append(out, rec.Name)
	}
	return out
}

// PoollessVF is a VF entry or attachment of the config on a PF that has no
// VFs of its own: its device's VFs hang off an earlier PF of the group
// (netdevsim: one devlink instance, one VF pool for both ports, all VFs and
// representors on the first port). Nothing realizes it: no VF, no
// representor, no port, no leaf.
type PoollessVF struct {
	Field  string // "vfs[1]", "attachments[0]"
	PF, VF int
	Owner  int // the PF of the same device that holds its VFs
}

// Why says what is wrong with it, for preflight and validate alike.
func (p PoollessVF) Why(g Group) string {
	return fmt.Sprintf("has no VFs of its own: %s; name the VF with pf: %d", oneDevice(g, p.PF, p.Owner), p.Owner)
}

// oneDevice says that PF pf shares owner's device and VF pool.
func oneDevice(g Group, pf, owner int) string {
	return fmt.Sprintf("%s and pfs[%d] %s are one device (%s) with one VF pool, on pfs[%d]",
		g.PFs[pf].Netdev, owner, g.PFs[owner].Netdev, g.PFs[pf].Dev, owner)
}

// EmptyPool says why the group's VF pool has no VF, for preflight and
// validate alike: the pool the config leaves (every VF no vfs entry gives
// to the host and no attachment takes) lies on PFs without VFs of their
// own; "" when it has a VF. (A pool whose every VF is taken is the
// config's error; a pool that names its VFs is PoollessVFs'.) libvirt 9.0
// takes a hostdev network without an address: it defines and starts it,
// and every port it is asked for fails.
func EmptyPool(g Group) string {
	if g.Network == nil || len(g.Network.VFs) > 0 || len(g.Pool()) > 0 || len(g.PFs) != len(g.Group.PFs) {
		return ""
	}
	free := g.PoolVFs()
	if len(free) == 0 {
		return ""
	}
	ownerOf := map[sriov.Device]int{}
	for _, i := range g.Owners {
		ownerOf[g.PFs[i].Dev] = i
	}
	var where, owners []string
	seen := map[int]bool{}
	for _, r := range free {
		if !seen[r.PF] {
			seen[r.PF] = true
			o := ownerOf[g.PFs[r.PF].Dev]
			where = append(where, fmt.Sprintf("pfs[%d] %s, which has no VFs of its own (%s)", r.PF, g.PFs[r.PF].Netdev, oneDevice(g, r.PF, o)))
			owners = append(owners, fmt.Sprintf("pfs[%d]", o))
		}
	}
	return fmt.Sprintf("has no VF: its %d free VF(s) are on %s, and every VF of %s goes to the host (vfs[].driver) or an attachment; "+
		"libvirt defines and starts a hostdev network without an address, and every domain start on it fails (\"network '%s' requires exclusive access to interfaces, but none are available\"): free a VF of %s, or drop the network",
		len(free), strings.Join(where, "; "), strings.Join(owners, ", "), g.NetworkName(), strings.Join(owners, ", "))
}

// PoollessVFs lists the group's VF entries, then attachments, on a PF
// without VFs of its own (the PFs resolved, in config order).
func PoollessVFs(g Group) []PoollessVF {
	ownerOf := map[sriov.Device]int{}
	for _, i := range g.Owners {
		ownerOf[g.PFs[i].Dev] = i
	}
	var out []PoollessVF
	check := func(field string, pf, vf int) {
		if pf < 0 || pf >= len(g.PFs) {
			return // the config's own check names it
		}
		if o := ownerOf[g.PFs[pf].Dev]; o != pf {
			out = append(out, PoollessVF{Field: field, PF: pf, VF: vf, Owner: o})
		}
	}
	for i, v := range g.VFs {
		check(fmt.Sprintf("vfs[%d]", i), v.PF, v.VF)
	}
	for i, a := range g.Attachments {
		check(fmt.Sprintf("attachments[%d]", i), a.PF, a.VF)
	}
	if g.Network != nil {
		for i, v := range g.Network.VFs {
			check(fmt.Sprintf("network.vfs[%d]", i), v.PF, v.VF)
		}
	}
	return out
}

// indexOfRef is the index in refs of the reference that resolved to pf
// (ResolveGroup drops the ones that did not resolve); fallback if none.
func indexOfRef(refs []string, pf eswitch.PF, fallback int) int {
	for i, r := range refs {
		if r == pf.Netdev || r == string(pf.Addr) {
			return i
		}
	}
	return fallback
}

// notAPort says what a netdev that resolved to a PF really is when it is not
// the PF's own port: a bond, a VF representor, a VF; "" when it is a port.
func (e *Env) notAPort(netdev string) string {
	if eswitch.ValidIfName(netdev) != nil {
		return "" // a PCI address
	}
	if _, err := e.fs.ReadFile("/sys/class/net/" + netdev + "/bonding/mode"); err == nil {
		return "a bond"
	}
	if ppn, err := eswitch.PhysPortName(e.fs, netdev); err == nil && eswitch.IsRepresentorName(ppn) {
		return "a VF representor (phys_port_name " + ppn + ")"
	}
	if _, err := e.fs.Readlink("/sys/class/net/" + netdev + "/device/physfn"); err == nil {
		return "a VF"
	}
	if _, err := e.k.Link(netdev); err == nil {
		if _, err := e.fs.Readlink("/sys/class/net/" + netdev + "/device"); err != nil {
			return "a virtual interface (no device behind it)"
		}
	}
	return ""
}
