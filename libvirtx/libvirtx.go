//go:build !vflag_nolibvirt

package libvirtx

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/vflag/vflag/internal/crashpoint"
)

// Conn is a connection to one libvirt daemon. Its methods may be called
// from several goroutines; Close must come last.
type Conn struct {
	uri string
	c   *libvirt.Connect

	sharedMu  sync.Mutex
	shared    map[string]*sharedRead // Prefetch's reads, until this connection writes a domain
	sharedAge time.Duration          // how long they answer: sharedMaxAge (tests change it)
	reading   sync.WaitGroup         // Prefetch's reads under way (Close waits for them)

	versionsOnce  sync.Once
	libVer, qemuV uint32 // libvirt's and the hypervisor's versions, 0 unknown
}

// versions are the daemon's libvirt version and its hypervisor's (QEMU)
// version, read once ("virsh version"); 0 where libvirt does not say.
func (c *Conn) versions() (lib, qemu uint32) {
	c.versionsOnce.Do(func() {
		if c.c == nil {
			return
		}
		if v, err := c.c.GetLibVersion(); err == nil {
			c.libVer = v
		}
		if v, err := c.c.GetVersion(); err == nil {
			c.qemuV = v
		}
	})
	return c.libVer, c.qemuV
}

// sharedRead is one domain's read that Prefetch started.
type sharedRead struct {
	at   time.Time // when it started
	done chan struct{}
	s    snapshot
	err  error // an error isNoDomain tells is an answer too
}

// sharedMaxAge bounds how old a read Prefetch started may be and still
// answer: a run's preflight, plan pass and verify are milliseconds apart
// unless a long step (VF creation) ran between them; after one, and in a
// process that lives on, the domain is read again.
const sharedMaxAge = time.Second

// sharedFor is the read Prefetch started for name while it may answer.
func (c *Conn) sharedFor(name string) *sharedRead {
	c.sharedMu.Lock()
	defer c.sharedMu.Unlock()
	if r := c.shared[name]; r != nil && time.Since(r.at) <= c.sharedAge {
		return r
	}
	return nil
}

// Open connects to uri ("qemu:///system", "qemu+unix:///system?socket=/path").
func Open(uri string) (*Conn, error) {
	c, err := libvirt.NewConnect(uri)
	err = lvErr(err)
	if err != nil {
		return nil, fmt.Errorf("libvirt: connect to %s: %w", uri, err)
	}
	return &Conn{uri: uri, c: c, sharedAge: sharedMaxAge}, nil
}

// Close closes the connection, once Prefetch's reads are done.
func (c *Conn) Close() error {
	if c == nil || c.c == nil {
		return nil
	}
	c.reading.Wait()
	_, err := c.c.Close()
	err = lvErr(err)
	c.c = nil
	if err != nil {
		return fmt.Errorf("libvirt: close connection to %s: %w", c.uri, err)
	}
	return nil
}

// libvirtError shows a libvirt error by its message; errors.As still finds
// the libvirt.Error (code, domain) behind it.
type libvirtError struct{ err libvirt.Error }

func (e libvirtError) Error() string { return e.err.Message }
func (e libvirtError) Unwrap() error { return e.err }

func lvErr(err error) error {
	var lerr libvirt.Error
	if errors.As(err, &lerr) {
		if _, done := err.(libvirtError); !done {
			return libvirtError{lerr}
		}
	}
	return err
}

func hasCode(err error, code libvirt.ErrorNumber) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == code
}

// lookup finds a domain by name; a domain libvirt does not know gives an
// error with code ERR_NO_DOMAIN (see isNoDomain).
func (c *Conn) lookup(name string) (*libvirt.Domain, error) {
	if c == nil || c.c == nil {
		return nil, errors.New("connection is closed")
	}
	d, err := c.c.LookupDomainByName(name)
	return d, lvErr(err)
}

func isNoDomain(err error) bool { return hasCode(err, libvirt.ERR_NO_DOMAIN) }

func readView(d *libvirt.Domain, flags libvirt.DomainXMLFlags) (view, error) {
	doc, err := d.GetXMLDesc(flags)
	if err != nil {
		return view{}, lvErr(err)
	}
	return parseView(doc)
}

func readSnapshot(d *libvirt.Domain) (snapshot, error) {
	var s snapshot
	var err error
	if s.active, err = d.IsActive(); err != nil {
		return s, lvErr(err)
	}
	if s.persistent, err = d.IsPersistent(); err != nil {
		return s, lvErr(err)
	}
	if s.cfg, err = readView(d, libvirt.DOMAIN_XML_INACTIVE); err != nil {
		return s, fmt.Errorf("read persistent XML: %w", err)
	}
	if s.active {
		v, err := readView(d, 0)
		if err != nil {
			return s, fmt.Errorf("read live XML: %w", err)
		}
		s.live = &v
	}
	return s, nil
}

// Prefetch starts reading the named domains (state and definitions) in
// the background, those not read so since the connection last wrote.
// Until this connection writes a domain (Attach, Detach, StartAutostarted),
// and for sharedMaxAge, Exists, Domain and Plan of those domains answer
// from these reads: a run of vflag reads each of its domains once, for its
// preflight, its plan pass and its verify, and that read overlaps its
// other reads. Call it only once nothing the caller waits for changes the
// domains any more (vflag: after its lock is taken). A read that failed
// is made again by the call that needs it.
func (c *Conn) Prefetch(names ...string) {
	c.sharedMu.Lock()
	defer c.sharedMu.Unlock()
	for _, name := range names {
		if r := c.shared[name]; r != nil && time.Since(r.at) <= c.sharedAge {
			continue
		}
		if c.shared == nil {
			c.shared = map[string]*sharedRead{}
		}
		r := &sharedRead{at: time.Now(), done: make(chan struct{})}
		c.shared[name] = r
		c.reading.Go(func() {
			defer close(r.done)
			r.s, r.err = c.readDomain(name)
		})
	}
}

// wroteDomain drops Prefetch's reads: a domain changed through c.
func (c *Conn) wroteDomain() {
	c.sharedMu.Lock()
	c.shared = nil
	c.sharedMu.Unlock()
}

// readDomain reads a domain; for one libvirt does not know (or that was
// undefined during the read) the error is one isNoDomain tells.
func (c *Conn) readDomain(name string) (snapshot, error) {
	d, err := c.lookup(name)
	if err != nil {
		return snapshot{}, err
	}
	defer d.Free()
	return readSnapshot(d)
}

// domain is readDomain, answered from Prefetch's read while it holds.
func (c *Conn) domain(name string) (snapshot, error) {
	if r := c.sharedFor(name); r != nil {
		if <-r.done; r.err == nil || isNoDomain(r.err) {
			return r.s, r.err
		}
	}
	return c.readDomain(name)
}

// Exists tells whether libvirt knows the domain: one lookup, no XML read
// (preflight's question; Domain reads the definitions), or Prefetch's read
// when it is done.
func (c *Conn) Exists(name string) (bool, error) {
	if r := c.sharedFor(name); r != nil {
		select {
		case <-r.done:
			if r.err == nil || isNoDomain(r.err) {
				return r.err == nil, nil
			}
		default: // still reading: a lookup of its own answers sooner
		}
	}
	d, err := c.lookup(name)
	if isNoDomain(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("libvirt: look up domain %s: %w", name, err)
	}
	_ = d.Free()
	return true, nil
}

// Domain reads the persistent definition of a domain and, when it runs, the
// live one. A missing domain is not an error: Exists is false.
func (c *Conn) Domain(name string) (DomainState, error) {
	st := DomainState{Name: name}
	s, err := c.domain(name)
	if isNoDomain(err) {
		return st, nil // unknown, or undefined meanwhile
	}
	if err != nil {
		return st, fmt.Errorf("libvirt: read domain %s: %w", name, err)
	}
	st.Exists, st.Active, st.Persistent, st.UUID = true, s.active, s.persistent, s.cfg.uuid
	st.Machine = s.cfg.machine
	index := map[string]int{}
	sbIndex := map[string]int{}
	add := func(v view, inConfig bool) {
		for _, i := range v.ifaces {
			if k, ok := index[i.pci+"/"+i.mac]; ok {
				st.Interfaces[k].InLive = true
				continue
			}
			index[i.pci+"/"+i.mac] = len(st.Interfaces)
			st.Interfaces = append(st.Interfaces, HostdevIface{PCI: i.pci, MAC: i.mac, Managed: i.managed, Owned: v.owned(i), Standby: i.team, VLAN: ifaceVLAN(i.def), InConfig: inConfig, InLive: !inConfig,
				NotHotplug: IsQ35(v.machine) && !v.onHotplugPort(i)})
		}
		for _, sb := range v.standbys {
			if k, ok := sbIndex[sb.alias]; ok {
				st.Standbys[k].InLive = true
				st.Standbys[k].Target = sb.target
				continue
			}
			sbIndex[sb.alias] = len(st.Standbys)
			st.Standbys = append(st.Standbys, StandbyIface{Alias: sb.alias, MAC: sb.mac, Bridge: sb.bridge, OVS: sb.ovs, Virtio: sb.virtio, VLAN: sb.vlan,
				Owned: v.ownsStandby(sb), InConfig: inConfig, InLive: !inConfig})
			if !inConfig {
				st.Standbys[len(st.Standbys)-1].Target = sb.target
			}
		}
	}
	if s.persistent {
		add(s.cfg, true)
	}
	if s.live != nil {
		add(*s.live, false)
	}
	return st, nil
}

// Plan tells whether Attach would change the domain, and why; it only reads.
// A missing domain, a foreign device with the same PCI address or an
// invalid attachment is an error.
func (c *Conn) Plan(a Attachment) (needed bool, why string, err error) {
	n, err := validate(a)
	if err != nil {
		return false, "", fmt.Errorf("%s: %w", attachOp(a), err)
	}
	op := attachOp(n.Attachment)
	s, err := c.domain(n.Domain)
	if isNoDomain(err) {
		return false, "", fmt.Errorf("%s: domain not found: %w", op, err)
	}
	if err != nil {
		return false, "", fmt.Errorf("%s: %w", op, err)
	}
	lib, qemu := c.versions()
	p, err := makePlan(s, n, lib, qemu)
	if err != nil {
		return false, "", fmt.Errorf("%s: %w", op, err)
	}
	return p.needed(), p.why, nil
}

// TeamingProblems are the reasons a migratable attachment cannot be made
// on this domain (Problem.Field names the attachment's field): its
// machine, libvirt's and QEMU's versions, a MAC another interface has,
// the free root ports of the running domain. Only reads; nil for an
// attachment that is not migratable or a domain libvirt does not know.
func (c *Conn) TeamingProblems(a Attachment) ([]Problem, error) {
	if !a.Migratable {
		return nil, nil
	}
	// The VF may not exist yet (preflight, before up makes it): its
	// address is not needed here.
	n := norm{a}
	var err error
	if n.MAC, err = parseMAC(a.MAC); err != nil {
		return nil, fmt.Errorf("%s: %w", attachOp(a), err)
	}
	if a.PCI != "" {
		if n.PCI, err = parsePCI(a.PCI); err != nil {
			return nil, fmt.Errorf("%s: %w", attachOp(a), err)
		}
	}
	s, err := c.domain(n.Domain)
	if isNoDomain(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", attachOp(n.Attachment), err)
	}
	newLive := 0
	if n.Live && s.live != nil {
		if lp, err := planDef(*s.live, n, "live", false); err == nil {
			newLive = lp.pcie()
		}
	}
	lib, qemu := c.versions()
	return teamingProblems(s, n, lib, qemu, newLive), nil
}

func setClaims(d *libvirt.Domain, cs []claim, impact libvirt.DomainModificationImpact) error {
	content := "" // removes vflag's element
	if len(cs) > 0 {
		var err error
		if content, err = marshalClaims(cs); err != nil {
			return err
		}
	}
	return lvErr(wrote("set domain metadata", d.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, content, MetadataKey, MetadataNamespace, impact)))
}

// Attach puts the VF into the domain, persistent and, when a.Live and the
// domain runs, live. changed is false when vflag's interface was already
// there. See the package documentation for the order of the steps.
func (c *Conn) Attach(a Attachment) (Record, bool, error) {
	n, err := validate(a)
	if err != nil {
		return Record{}, false, fmt.Errorf("%s: %w", attachOp(a), err)
	}
	op := attachOp(n.Attachment)
	defer c.wroteDomain()
	d, err := c.lookup(n.Domain)
	if isNoDomain(err) {
		return Record{}, false, fmt.Errorf("%s: domain not found: %w", op, err)
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("%s: %w", op, err)
	}
	defer d.Free()
	s, err := readSnapshot(d)
	if err != nil {
		return Record{}, false, fmt.Errorf("%s: %w", op, err)
	}
	lib, qemu := c.versions()
	p, err := makePlan(s, n, lib, qemu)
	if err != nil {
		return Record{}, false, fmt.Errorf("%s: %w", op, err)
	}
	rec := n.Attachment.Record()
	rec.Live = p.liveWanted
	if !p.needed() {
		return rec, false, nil
	}

	// undo holds what this call did, to roll it back in reverse.
	var undo []func() error
	fail := func(err error) (Record, bool, error) {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil {
				errs = append(errs, uerr)
			}
		}
		if len(errs) > 0 {
			return Record{}, false, fmt.Errorf("%s: %w (rollback failed: %v)", op, err, errors.Join(errs...))
		}
		return Record{}, false, fmt.Errorf("%s: %w", op, err)
	}
	if err := applyDef(d, s.cfg, p.config, n, "persistent", libvirt.DOMAIN_XML_INACTIVE, libvirt.DOMAIN_DEVICE_MODIFY_CONFIG, libvirt.DOMAIN_AFFECT_CONFIG, &undo); err != nil {
		return fail(err)
	}
	if s.live != nil {
		if err := applyDef(d, *s.live, p.live, n, "live", 0, libvirt.DOMAIN_DEVICE_MODIFY_LIVE, libvirt.DOMAIN_AFFECT_LIVE, &undo); err != nil {
			return fail(err)
		}
	}
	return rec, true, nil
}

// applyDef carries out one definition's plan: the claim before the
// devices (after them when it drops a standby: a device of vflag's never
// exists without its claim), each device change, and for each an undo.
func applyDef(d *libvirt.Domain, v view, dp defPlan, n norm, where string, read libvirt.DomainXMLFlags, modify libvirt.DomainDeviceModifyFlags, impact libvirt.DomainModificationImpact, undo *[]func() error) error {
	if dp.empty() {
		return nil
	}
	prior := v.claims
	setClaim := func() error {
		if err := setClaims(d, withClaim(prior, *dp.claim), impact); err != nil {
			return fmt.Errorf("record ownership in %s metadata: %w", where, err)
		}
		*undo = append(*undo, func() error {
			if err := setClaims(d, prior, impact); err != nil {
				return fmt.Errorf("restore %s metadata: %w", where, err)
			}
			return nil
		})
		return nil
	}
	if dp.claim != nil && !dp.claimAfter {
		if err := setClaim(); err != nil {
			return err
		}
	}
	for _, o := range dp.ops {
		switch {
		case o.detach:
			if err := lvErr(wrote("detach device ("+where+")", d.DetachDeviceFlags(o.xml, modify))); err != nil {
				return fmt.Errorf("%s: %s: %w", where, o.what, err)
			}
			x := o.xml
			*undo = append(*undo, func() error {
				if err := lvErr(d.AttachDeviceFlags(x, modify)); err != nil {
					return fmt.Errorf("attach again (%s): %w", where, err)
				}
				return nil
			})
		case o.update:
			if err := lvErr(wrote("update device ("+where+")", d.UpdateDeviceFlags(o.xml, modify))); err != nil {
				return fmt.Errorf("%s: %s: %w", where, o.what, err)
			}
			old := o.old
			*undo = append(*undo, func() error {
				if err := lvErr(d.UpdateDeviceFlags(old, modify)); err != nil {
					return fmt.Errorf("update back (%s): %w", where, err)
				}
				return nil
			})
		default:
			if err := lvErr(wrote("attach device ("+where+")", d.AttachDeviceFlags(o.xml, modify))); err != nil {
				return fmt.Errorf("%s: %s: %w", where, o.what, err)
			}
			sb := o.standby
			*undo = append(*undo, func() error {
				var err error
				if sb != "" {
					err = detachStandby(d, sb, read, modify)
				} else {
					err = detachIface(d, n.PCI, n.MAC, read, modify)
				}
				if err != nil {
					return fmt.Errorf("detach from %s definition: %w", where, err)
				}
				return nil
			})
		}
	}
	if dp.claim != nil && dp.claimAfter {
		return setClaim()
	}
	return nil
}

// detachStandby removes the standby with this alias from one definition,
// found afresh. Absent = success.
func detachStandby(d *libvirt.Domain, alias string, read libvirt.DomainXMLFlags, modify libvirt.DomainDeviceModifyFlags) error {
	v, err := readView(d, read)
	if err != nil {
		return err
	}
	sb, ok := v.standbyFor(alias)
	if !ok {
		return nil
	}
	x, err := sb.def.Marshal()
	if err != nil {
		return err
	}
	return lvErr(wrote("detach device", d.DetachDeviceFlags(x, modify)))
}

// detachIface removes the interface with this PCI address and MAC from one
// definition, found afresh so that libvirt matches it exactly (MAC plus
// guest address; a MAC alone can be ambiguous). Absent = success.
func detachIface(d *libvirt.Domain, pci, mac string, read libvirt.DomainXMLFlags, modify libvirt.DomainDeviceModifyFlags) error {
	v, err := readView(d, read)
	if err != nil {
		return err
	}
	for _, i := range v.ifacesFor(pci) {
		if i.mac != mac {
			continue
		}
		x, err := i.def.Marshal()
		if err != nil {
			return err
		}
		if err := lvErr(wrote("detach device", d.DetachDeviceFlags(x, modify))); err != nil {
			return err
		}
	}
	return nil
}

// Detach undoes an Attach from its Record: it removes the interface with
// the record's PCI address, but only where vflag's metadata claims it, then
// the claim. The live definition is handled when r.Live and the domain runs.
// A missing domain, interface or claim is success; Detach is repeatable.
func (c *Conn) Detach(r Record) error {
	defer c.wroteDomain()
	op := fmt.Sprintf("libvirt: detach %s from %s", r.PCI, r.Domain)
	pci, err := parsePCI(r.PCI)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if strings.TrimSpace(r.Domain) == "" {
		return fmt.Errorf("%s: empty domain name", op)
	}
	mac := ""
	if r.MAC != "" {
		if mac, err = parseMAC(r.MAC); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	d, err := c.lookup(r.Domain)
	if isNoDomain(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer d.Free()
	s, err := readSnapshot(d)
	if err != nil {
		if isNoDomain(err) {
			return nil
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	if r.Live && s.live != nil {
		if err := detachFrom(d, *s.live, pci, mac, r.Owner, r.Standby, "live", 0, libvirt.DOMAIN_DEVICE_MODIFY_LIVE, libvirt.DOMAIN_AFFECT_LIVE); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if s.persistent {
		if err := detachFrom(d, s.cfg, pci, mac, r.Owner, r.Standby, "persistent", libvirt.DOMAIN_XML_INACTIVE, libvirt.DOMAIN_DEVICE_MODIFY_CONFIG, libvirt.DOMAIN_AFFECT_CONFIG); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return nil
}

// detachFrom removes vflag's interface for pci from one definition (read
// with the read flags), then the pair's standby (its claim's alias, else
// standbyAlias) when vflag made it, checks that they are gone, then drops
// the claim.
func detachFrom(d *libvirt.Domain, v view, pci, mac, owner, standbyAlias, where string, read libvirt.DomainXMLFlags, modify libvirt.DomainDeviceModifyFlags, impact libvirt.DomainModificationImpact) error {
	cl, claimed := v.claimFor(pci)
	found := v.ifacesFor(pci)
	if claimed {
		if owner != "" && cl.Owner != owner {
			return fmt.Errorf("%s definition: vflag attached it for LAG group %q, not %q; left in place", where, cl.Owner, owner)
		}
		if mac != "" && cl.MAC != mac {
			return fmt.Errorf("%s definition: vflag attached it with MAC %s, the record says %s; left in place", where, cl.MAC, mac)
		}
	}
	for _, i := range found {
		if !v.owned(i) {
			return fmt.Errorf("%s definition: the interface with this PCI address (mac %s) is not vflag's; left in place", where, i.mac)
		}
	}
	for _, i := range found {
		x, err := i.def.Marshal()
		if err != nil {
			return fmt.Errorf("%s definition: %w", where, err)
		}
		if err := lvErr(wrote("detach device", d.DetachDeviceFlags(x, modify))); err != nil {
			if hasCode(err, libvirt.ERR_DEVICE_MISSING) || isNoDomain(err) {
				continue
			}
			return fmt.Errorf("%s definition: %w", where, err)
		}
	}
	// The pair's standby goes after its VF (the VF's teaming names it).
	alias := cl.Standby
	if alias == "" {
		alias = standbyAlias
	}
	sb, haveSB := v.standbyFor(alias)
	if haveSB && !v.ownsStandby(sb) {
		haveSB = false // not vflag's: left in place
	}
	if haveSB {
		x, err := sb.def.Marshal()
		if err != nil {
			return fmt.Errorf("%s definition: %w", where, err)
		}
		if err := lvErr(wrote("detach device", d.DetachDeviceFlags(x, modify))); err != nil && !hasCode(err, libvirt.ERR_DEVICE_MISSING) && !isNoDomain(err) {
			return fmt.Errorf("%s definition: standby %s: %w", where, alias, err)
		}
	}
	if len(found) > 0 || haveSB {
		after, err := readView(d, read)
		if err != nil {
			return fmt.Errorf("%s definition: re-read: %w", where, err)
		}
		for _, i := range after.ifacesFor(pci) {
			if i.mac == cl.MAC {
				return fmt.Errorf("%s definition: the interface is still there after the detach request (a live PCI unplug needs the guest's cooperation); retry later", where)
			}
		}
		if _, still := after.standbyFor(alias); haveSB && still {
			return fmt.Errorf("%s definition: standby %s is still there after the detach request (a live unplug needs the guest's cooperation); retry later", where, alias)
		}
	}
	if claimed {
		if err := setClaims(d, withoutClaim(v.claims, pci), impact); err != nil {
			return fmt.Errorf("%s definition: remove ownership metadata: %w", where, err)
		}
	}
	return nil
}

// HoldingDomains maps each of the given VF PCI addresses that a running
// domain uses (as <interface type='hostdev'> or <hostdev>, in its live XML)
// to that domain's name. Shut-off domains hold nothing.
func (c *Conn) HoldingDomains(pcis []string) (map[string]string, error) {
	want := map[string]bool{}
	for _, p := range pcis {
		n, err := parsePCI(p)
		if err != nil {
			return nil, fmt.Errorf("libvirt: find domains holding VFs: %w", err)
		}
		want[n] = true
	}
	out := map[string]string{}
	if len(want) == 0 {
		return out, nil
	}
	if c == nil || c.c == nil {
		return nil, errors.New("libvirt: find domains holding VFs: connection is closed")
	}
	doms, err := c.c.ListAllDomains(libvirt.CONNECT_LIST_DOMAINS_ACTIVE)
	err = lvErr(err)
	if err != nil {
		return nil, fmt.Errorf("libvirt: list running domains: %w", err)
	}
	type held struct{ name, pci string }
	var all []held
	var firstErr error
	for i := range doms {
		d := &doms[i]
		name, err := d.GetName()
		err = lvErr(err)
		if err == nil {
			var v view
			v, err = readView(d, 0)
			if err == nil {
				for _, f := range v.ifaces {
					all = append(all, held{name, f.pci})
				}
				for _, h := range v.hostdevs {
					all = append(all, held{name, h})
				}
			} else if isNoDomain(err) {
				err = nil // stopped and undefined meanwhile
			} else {
				err = fmt.Errorf("libvirt: read live XML of %s: %w", name, err)
			}
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		d.Free()
	}
	if firstErr != nil {
		return nil, firstErr
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	for _, h := range all {
		if _, dup := out[h.pci]; want[h.pci] && !dup {
			out[h.pci] = h.name
		}
	}
	return out, nil
}

// StartAutostarted starts a defined, shut-off domain whose autostart flag
// is set, as libvirtd would have at its start ("virsh start $domain"). It
// returns false, and does nothing, for a domain that is running, unknown,
// or not autostarted.
func (c *Conn) StartAutostarted(name string) (bool, error) {
	defer c.wroteDomain()
	d, err := c.lookup(name)
	if isNoDomain(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("libvirt: look up domain %s: %w", name, err)
	}
	defer d.Free()
	auto, err := d.GetAutostart()
	if err != nil {
		return false, fmt.Errorf("libvirt: autostart flag of %s: %w", name, lvErr(err))
	}
	active, err := d.IsActive()
	if err != nil {
		return false, fmt.Errorf("libvirt: state of %s: %w", name, lvErr(err))
	}
	if !auto || active {
		return false, nil
	}
	if err := wrote("start domain", d.Create()); err != nil {
		err = lvErr(err)
		if hasCode(err, libvirt.ERR_OPERATION_INVALID) {
			if a, _ := d.IsActive(); a {
				return false, nil // started meanwhile (the hook found the mark)
			}
		}
		return false, fmt.Errorf("libvirt: start domain %s: %w", name, err)
	}
	return true, nil
}

// wrote counts a write to libvirt that has just been made (crashpoint: the
// crash tests stop the process after any one of them) and returns its error.
func wrote(what string, err error) error {
	crashpoint.Wrote("libvirt: " + what)
	return err
}
