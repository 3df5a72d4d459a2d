package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
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
		if len(g.Attachments) > 0 {
			needVirt = true
			domains = append(domains, ds...)
		}
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
		e.preflightDomains(domains, virtErrs.add)
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

// domainRef is an attachment's domain and the field naming it.
type domainRef struct{ path, name string }

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
		add(fmt.Sprintf("%s.pfs[%d]", p, pe.Index), pe.Ref, "not usable: %v", pe.Err)
	}
	g.PFs = e.usablePFs(cg, p, g.PFs, add)
	g.Owners = Owners(g.PFs)
	if len(g.PFs) == 2 && g.Switchdev() {
		checkOneNIC(g, cg, p, add)
	}
	if g.Switchdev() {
		e.checkBondFree(g, cg, p, add)
	}
	if len(g.PFs) == len(cg.PFs) {
		for _, v := range PoollessVFs(g) {
			add(fmt.Sprintf("%s.%s.pf", p, v.Field), v.PF, "%s", v.Why(g))
		}
	}
	var domains []domainRef
	for i, a := range g.Attachments {
		domains = append(domains, domainRef{fmt.Sprintf("%s.attachments[%d].domain", p, i), a.Domain})
	}
	return g, domains
}

// usablePFs returns the resolved PFs that are SR-IOV physical ports (not a
// bond, VF or other netdev) and reports the others; it also checks numvfs
// against each PF's sriov_totalvfs.
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
	if l, err := e.k.Link(g.Bond.Name); err == nil && l.Alias != BondAlias(g.Name) {
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
func (e *Env) preflightDomains(domains []domainRef, add func(string, any, string, ...any)) {
	c, err := e.h.Virt()
	if err != nil {
		add("libvirt", e.h.Libvirt, "is not reachable: %v", err)
	}
	if c != nil {
		// One read of each domain serves this check, the plan pass's
		// attachments and verify, until vflag writes a domain
		// (libvirtx.Conn.Prefetch; the caller holds vflag's lock).
		names := make([]string, 0, len(domains))
		for _, d := range domains {
			names = append(names, d.name)
		}
		c.Prefetch(names...)
	}
	checked := map[string]bool{}
	for _, d := range domains {
		if c == nil || checked[d.name] {
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
	return fmt.Sprintf("has no VFs of its own: %s and pfs[%d] %s are one device (%s) with one VF pool, on pfs[%d]; name the VF with pf: %d",
		g.PFs[p.PF].Netdev, p.Owner, g.PFs[p.Owner].Netdev, g.PFs[p.PF].Dev, p.Owner, p.Owner)
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

func (e *Env) refuseHeld(vfs []string, verb string, uris []string) error {
	if len(vfs) == 0 {
		return nil
	}
	held := map[string]string{}
	for _, uri := range uris {
		h, err := e.holdingAt(uri, vfs)
		if err != nil && e.Force {
			e.log.Warn("--force: VFs removed without knowing whether a running domain holds one", "libvirt", uri, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("refusing to %s VFs: cannot tell whether a running domain holds one: %w; fix that (or shut the domains down and use --force)", verb, err)
		}
		for vf, dom := range h {
			held[vf] = dom
		}
	}
	if len(held) == 0 {
		return nil
	}
	var msgs []string
	for vf, dom := range held {
		msgs = append(msgs, fmt.Sprintf("VF %s is held by running domain %s", vf, dom))
	}
	sort.Strings(msgs)
	return fmt.Errorf("refusing to %s VFs in use: %s; shut the domains down first", verb, strings.Join(msgs, "; "))
}

// DownPreflight refuses while a running domain holds a VF that down would
// remove. haveConfig tells whether the config (and its libvirt URI) is known.
func (e *Env) DownPreflight(j *teardown.Journal, haveConfig bool) error {
	var vfs []string
	uris := map[string]bool{}
	for _, en := range j.Entries() {
		switch en.Kind {
		case numVFsKind{}.Name():
			r, err := decode[numVFsRecord](en.Record)
			if err != nil {
				return err
			}
			if err := validDevice(r.PF); err != nil {
				return err
			}
			if !e.pci.Exists(r.PF) {
				continue // the PF is gone: nothing to hold
			}
			list, err := e.pci.VFs(r.PF)
			if err != nil {
				return fmt.Errorf("refusing to remove VFs: %w", err)
			}
			for _, v := range list {
				vfs = append(vfs, string(v.Addr))
			}
		case attachKind{}.Name():
			r, err := decode[attachRecord](en.Record)
			if err != nil {
				return err
			}
			uris[r.URI] = true
		}
	}
	if len(vfs) == 0 {
		return nil
	}
	if len(uris) == 0 && !haveConfig {
		return nil // nothing tells which libvirt to ask
	}
	// Every libvirt that may hold them: the config's, and each one an
	// attachment was made through.
	if haveConfig {
		uris[e.h.Libvirt] = true
	}
	ask := make([]string, 0, len(uris))
	for uri := range uris {
		ask = append(ask, uri)
	}
	sort.Strings(ask)
	return e.refuseHeld(vfs, "remove", ask)
}
