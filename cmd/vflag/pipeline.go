package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// env is one vflag run's handles on the host. OVSDB and libvirt are
// connected lazily: a group without a bridge or attachments never needs them.
type env struct {
	cfg  *Config
	k    eswitch.Kernel
	fs   sysfs.FS
	pci  sriov.Host
	log  *slog.Logger
	poll time.Duration

	// stage is stageAll or stagePre (boot, before the network, OVS and
	// libvirt: steps 1-5 only).
	stage string

	mu   sync.Mutex
	ovsc *ovs.Client
	virt *libvirtx.Conn
}

// Stages of up (--stage).
const (
	stageAll = "all"
	stagePre = "pre"
)

func newEnv(cfg *Config, k eswitch.Kernel, f sysfs.FS, log *slog.Logger) *env {
	return &env{cfg: cfg, k: k, fs: f, pci: sriov.Host{FS: f}, log: log}
}

func (e *env) ovsClient(ctx context.Context) (*ovs.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ovsc == nil {
		c, err := ovs.Connect(ctx, e.cfg.OVSDB)
		if err != nil {
			return nil, err
		}
		e.ovsc = c
	}
	return e.ovsc, nil
}

func (e *env) virtConn() (*libvirtx.Conn, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.virt == nil {
		c, err := libvirtx.Open(e.cfg.Libvirt)
		if err != nil {
			return nil, err
		}
		e.virt = c
	}
	return e.virt, nil
}

func (e *env) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ovsc != nil {
		e.ovsc.Close()
		e.ovsc = nil
	}
	if e.virt != nil {
		e.virt.Close()
		e.virt = nil
	}
}

// groupHost is a group's PFs as found on the host by preflight.
type groupHost struct {
	g   *Group
	pfs []eswitch.PF
	// owners indexes the PFs that own VFs: the first PF of each SR-IOV
	// device (both mlx5 PFs; one of two netdevsim ports, which share a device).
	owners []int
}

// vfOwners returns the index of the first PF of each distinct device.
func vfOwners(pfs []eswitch.PF) []int {
	var out []int
	seen := map[sriov.Device]bool{}
	for i, pf := range pfs {
		if !seen[pf.Dev] {
			seen[pf.Dev] = true
			out = append(out, i)
		}
	}
	return out
}

// preflight checks, before any write, everything the host must satisfy
// (DESIGN.md step 0). Every problem is reported, each naming its field.
func (e *env) preflight(ctx context.Context) ([]groupHost, error) {
	var errs ConfigErrors
	add := func(path string, v any, format string, args ...any) {
		errs = append(errs, FieldError{Path: path, Value: v, Msg: fmt.Sprintf(format, args...)})
	}
	var hosts []groupHost
	needOVS, needVirt := false, false
	for gi := range e.cfg.Groups {
		g := &e.cfg.Groups[gi]
		p := fmt.Sprintf("groups[%d]", gi)
		gh := groupHost{g: g}
		for i, ref := range g.PFs {
			pf, err := eswitch.ResolvePF(e.k, e.fs, ref)
			if err != nil {
				add(fmt.Sprintf("%s.pfs[%d]", p, i), ref, "not usable: %v", err)
				continue
			}
			if !e.pci.HasSRIOV(pf.Dev) {
				add(fmt.Sprintf("%s.pfs[%d]", p, i), ref, "is not an SR-IOV physical function (%s has no sriov_numvfs)", pf.Dev)
				continue
			}
			if e.pci.HasPCIVFs(pf.Dev) { // netdevsim has no sriov_totalvfs: the kernel checks the count
				total, err := e.pci.TotalVFs(pf.Dev)
				if err != nil {
					add(fmt.Sprintf("%s.pfs[%d]", p, i), ref, "%v", err)
					continue
				}
				if g.NumVFs > total {
					add(p+".numvfs", g.NumVFs, "exceeds sriov_totalvfs %d of %s (%s)", total, pf.Netdev, pf.Dev)
				}
			}
			gh.pfs = append(gh.pfs, pf)
		}
		if len(gh.pfs) == 2 && g.switchdev() {
			a, b := gh.pfs[0], gh.pfs[1]
			// One NIC: the same devlink instance (netdevsim) or the same PCI
			// slot (mlx5: one instance per function), and one switch id.
			sameNIC := a.Devlink == b.Devlink || a.Addr != "" && b.Addr != "" && a.Addr.Slot() == b.Addr.Slot()
			if !sameNIC || a.SwitchID != "" && b.SwitchID != "" && a.SwitchID != b.SwitchID {
				add(p+".pfs", strings.Join(g.PFs, ","), "are not the two ports of one NIC (%s and %s differ in PCI slot, devlink instance or switch id)", a.Dev, b.Dev)
			}
			if a.Netdev == b.Netdev {
				add(p+".pfs", strings.Join(g.PFs, ","), "name the same PF twice")
			}
		}
		gh.owners = vfOwners(gh.pfs)
		if g.switchdev() {
			needOVS = true
			if l, err := e.k.Link(g.Bond.Name); err == nil && l.Alias != bondAlias(g.Name) {
				add(p+".bond.name", g.Bond.Name, "exists and was not created by vflag (alias %q): choose another name", l.Alias)
			} else if err != nil && !errors.Is(err, eswitch.ErrLinkNotFound) {
				add(p+".bond.name", g.Bond.Name, "%v", err)
			}
			for i, pf := range gh.pfs {
				if l, err := e.k.Link(pf.Netdev); err == nil && l.Master != "" && l.Master != g.Bond.Name {
					add(fmt.Sprintf("%s.pfs[%d]", p, i), g.PFs[i], "is already a slave of %s", l.Master)
				}
			}
		}
		if len(g.Attachments) > 0 {
			needVirt = true
		}
		hosts = append(hosts, gh)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if e.stage == stagePre {
		// Boot, before OVS and libvirtd: neither is asked, and no domain runs yet.
		return hosts, nil
	}
	if needOVS {
		if _, err := e.ovsClient(ctx); err != nil {
			errs = append(errs, FieldError{Path: "ovsdb", Value: e.cfg.OVSDB, Msg: fmt.Sprintf("is not reachable: %v", err)})
		}
	}
	if needVirt {
		if _, err := e.virtConn(); err != nil {
			errs = append(errs, FieldError{Path: "libvirt", Value: e.cfg.Libvirt, Msg: fmt.Sprintf("is not reachable: %v", err)})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if err := e.checkNotHeld(hosts); err != nil {
		return nil, err
	}
	return hosts, nil
}

// checkNotHeld refuses when a running domain holds a VF of a PF whose VFs
// vflag would recreate or whose eswitch it would change.
func (e *env) checkNotHeld(hosts []groupHost) error {
	var vfs []string
	for _, gh := range hosts {
		for _, i := range gh.owners {
			pf := gh.pfs[i]
			cur, err := e.pci.NumVFs(pf.Dev)
			if err != nil {
				return err
			}
			if cur == gh.g.NumVFs && !(gh.g.switchdev() && e.modeOf(pf) != eswitch.ModeSwitchdev) {
				continue // neither numvfs nor the eswitch mode changes: VMs keep their VFs
			}
			list, err := e.pci.VFs(pf.Dev)
			if err != nil {
				return err
			}
			for _, v := range list {
				vfs = append(vfs, string(v.Addr))
			}
		}
	}
	return e.refuseHeld(vfs, "change")
}

func (e *env) modeOf(pf eswitch.PF) string {
	m, _ := e.k.EswitchMode(pf.Devlink)
	return m
}

func (e *env) refuseHeld(vfs []string, verb string) error {
	if len(vfs) == 0 {
		return nil
	}
	c, err := e.virtConn()
	if err != nil {
		e.log.Warn("cannot ask libvirt whether a domain holds a VF", "uri", e.cfg.Libvirt, "err", err)
		return nil
	}
	held, err := c.HoldingDomains(vfs)
	if err != nil {
		return err
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

// up runs the pipeline of DESIGN.md section 2 for every group.
func (e *env) up(ctx context.Context, r *teardown.Runner, hosts []groupHost) error {
	for _, gh := range hosts {
		if err := e.upGroup(ctx, r, gh); err != nil {
			return fmt.Errorf("group %s: %w", gh.g.Name, err)
		}
	}
	return nil
}

func (e *env) upGroup(ctx context.Context, r *teardown.Runner, gh groupHost) error {
	g, pfs := gh.g, gh.pfs
	log := e.log.With("group", g.Name)
	each := func(f func(eswitch.PF) teardown.Step) []teardown.Step { // per PF
		var out []teardown.Step
		for _, pf := range pfs {
			out = append(out, f(pf))
		}
		return out
	}
	eachDev := func(f func(eswitch.PF) teardown.Step) []teardown.Step { // per SR-IOV device
		var out []teardown.Step
		for _, i := range gh.owners {
			out = append(out, f(pfs[i]))
		}
		return out
	}
	// 1. Legacy-mode settings.
	if err := r.Do(ctx, eachDev(e.autoprobeStep)...); err != nil {
		return err
	}
	if g.FlowSteeringMode != "" {
		var steps []teardown.Step
		for _, d := range devlinks(pfs) {
			steps = append(steps, e.paramStep(d, "flow_steering_mode", g.FlowSteeringMode))
		}
		if err := r.Do(ctx, steps...); err != nil {
			return err
		}
	}
	// 2. VFs on both PFs, in parallel.
	if err := r.Do(ctx, eachDev(func(pf eswitch.PF) teardown.Step { return e.numVFsStep(pf, g.NumVFs) })...); err != nil {
		return err
	}
	// The VFs the config names (host drivers, attachments), where they
	// exist already (in a plan they may not): one virtfn link each rather
	// than every VF of every PF.
	vfAddr := map[[2]int]sriov.Addr{}
	owner := map[int]bool{}
	for _, i := range gh.owners {
		owner[i] = true
	}
	var named [][2]int
	for _, v := range g.VFs {
		named = append(named, [2]int{v.PF, v.VF})
	}
	for _, a := range g.Attachments {
		named = append(named, [2]int{a.PF, a.VF})
	}
	for _, k := range named {
		if _, done := vfAddr[k]; done || !owner[k[0]] {
			continue
		}
		a, ok, err := e.pci.VF(pfs[k[0]].Dev, k[1])
		if err != nil {
			return err
		}
		if ok {
			vfAddr[k] = a
		}
	}
	// 3. VF administrative settings through the PF.
	var macSteps []teardown.Step
	for _, v := range g.VFs {
		if v.MAC != "" {
			macSteps = append(macSteps, e.vfMACStep(pfs[v.PF], v.VF, v.MAC))
		}
	}
	if err := r.Do(ctx, macSteps...); err != nil {
		return err
	}
	// 4. Unbind every VF. A VF already on its configured host driver may stay
	// bound only where unbinding serves nothing: a legacy group, or a
	// switchdev group whose eswitch and LAG are already in place.
	wantDriver := map[sriov.Addr]string{}
	for _, v := range g.VFs {
		if a, ok := vfAddr[[2]int{v.PF, v.VF}]; ok && v.Driver != "" {
			wantDriver[a] = v.Driver
		}
	}
	settled := !g.switchdev() || e.lagSettled(gh)
	keep := func(vf sriov.Addr, driver string) bool { return settled && wantDriver[vf] == driver }
	if err := r.Do(ctx, eachDev(func(pf eswitch.PF) teardown.Step { return e.unbindStep(pf, keep) })...); err != nil {
		return err
	}
	if !g.switchdev() {
		// Legacy group: no bond brings the PFs up, and libvirt refuses to
		// start a domain with a VF whose PF is down.
		if err := r.Do(ctx, e.linkUpStep(strings.Join(netdevs(pfs), "+"), netdevs(pfs)...)); err != nil {
			return err
		}
		if e.stage == stagePre {
			return nil // attachments need libvirt
		}
	}
	if g.switchdev() {
		// 5. switchdev on both PFs, then hw-tc-offload.
		var modeSteps []teardown.Step
		for _, d := range devlinks(pfs) {
			modeSteps = append(modeSteps, e.modeStep(d, pfs, eswitch.ModeSwitchdev))
		}
		if err := r.Do(ctx, modeSteps...); err != nil {
			return err
		}
		if err := r.Do(ctx, each(e.tcOffloadStep)...); err != nil {
			return err
		}
		if e.stage == stagePre {
			return nil // the bond and what depends on it: vflag.service, after the network and OVS
		}
		// 6. The bond, after switchdev; ports enslaved while down, then up.
		if err := r.Do(ctx, e.bondStep(g)); err != nil {
			return err
		}
		for _, pf := range pfs {
			if err := r.Do(ctx, e.enslaveStep(pf, g.Bond.Name)); err != nil {
				return err
			}
		}
		if err := r.Do(ctx, e.linkUpStep(g.Bond.Name, append([]string{g.Bond.Name}, netdevs(pfs)...)...)); err != nil {
			return err
		}
		// 7. Hardware LAG.
		if !r.DryRun {
			lctx, cancel := context.WithTimeout(ctx, e.cfg.LAGTimeout)
			st, err := eswitch.WaitLAG(lctx, e.fs, pfs[0].Addr, e.poll)
			cancel()
			if err != nil {
				return fmt.Errorf("hardware LAG on %s did not activate within %s (check dmesg for \"Can't activate LAG offload\"): %w", pfs[0].Addr, e.cfg.LAGTimeout, err)
			}
			if st.State == eswitch.LAGUnverified {
				log.Warn("hardware LAG state is not visible (no mlx5 debugfs): unverified", "pf", pfs[0].Addr)
			} else {
				log.Debug("hardware LAG active", "type", st.Type, "port_sel_mode", st.PortSelMode)
			}
		}
	}
	// 8. Host drivers, strictly after LAG.
	var bindSteps []teardown.Step
	for _, v := range g.VFs {
		if v.Driver == "" {
			continue
		}
		a, ok := vfAddr[[2]int{v.PF, v.VF}]
		if !ok && !r.DryRun {
			return fmt.Errorf("VF %d of %s does not exist", v.VF, pfs[v.PF].Netdev)
		}
		if !ok {
			r.Note(teardown.Event{Kind: kindBind, ID: fmt.Sprintf("%s/%s/vf%d", kindBind, pfs[v.PF].Netdev, v.VF), Changed: true, DryRun: true,
				Summary: fmt.Sprintf("VF %d of %s: bind to %s (after VF creation and LAG)", v.VF, pfs[v.PF].Netdev, v.Driver)})
			continue
		}
		bindSteps = append(bindSteps, e.bindStep(a, v.Driver))
	}
	if err := r.Do(ctx, bindSteps...); err != nil {
		return err
	}
	if g.switchdev() {
		// 9. Representors, by devlink port then phys_port_name + switch id.
		reps, complete, err := e.representors(ctx, gh, !r.DryRun)
		if err != nil {
			return err
		}
		if !complete { // a plan on a host that is not in switchdev yet
			r.Note(teardown.Event{Kind: kindRepsUp, ID: kindRepsUp + "/" + g.Name, Changed: true, DryRun: true,
				Summary: fmt.Sprintf("map %d representors and set them up (after switchdev)", g.NumVFs*len(gh.owners))})
			r.Note(teardown.Event{Kind: kindOVS, ID: kindOVS + "/" + g.OVS.Bridge, Changed: true, DryRun: true,
				Summary: fmt.Sprintf("bridge %s: bond %s and %d representors, hw-offload=%v (one transaction)", g.OVS.Bridge, g.Bond.Name, g.NumVFs*len(gh.owners), *g.OVS.HWOffload)})
			return e.attachAll(ctx, r, gh, vfAddr)
		}
		var upSteps []teardown.Step
		for _, i := range gh.owners {
			pf := pfs[i]
			var names []string
			for vf := 0; vf < g.NumVFs; vf++ {
				names = append(names, reps[[2]int{i, vf}])
			}
			upSteps = append(upSteps, e.linkUpStep("reps/"+pf.Netdev, names...))
		}
		if err := r.Do(ctx, upSteps...); err != nil {
			return err
		}
		// 10. OVS: one transaction.
		if err := r.Do(ctx, e.ovsStep(e.bridgeSpec(gh, reps))); err != nil {
			return err
		}
	}
	return e.attachAll(ctx, r, gh, vfAddr)
}

// attachAll is steps 11 and 12: libvirt attachments, then verification.
func (e *env) attachAll(ctx context.Context, r *teardown.Runner, gh groupHost, vfAddr map[[2]int]sriov.Addr) error {
	g, pfs := gh.g, gh.pfs
	var attSteps []teardown.Step
	for _, a := range g.Attachments {
		pci, ok := vfAddr[[2]int{a.PF, a.VF}]
		if !ok && !r.DryRun {
			return fmt.Errorf("attachment of pf %d vf %d: the VF does not exist", a.PF, a.VF)
		}
		if !ok {
			pci = sriov.Addr(fmt.Sprintf("<vf %d of %s>", a.VF, pfs[a.PF].Netdev))
		}
		mac := a.MAC
		if mac == "" {
			mac = g.vfMAC(a.PF, a.VF)
		}
		att := libvirtx.Attachment{Domain: a.Domain, PCI: string(pci), MAC: mac, Live: a.Live, Owner: g.Name}
		if r.DryRun && !ok {
			r.Note(teardown.Event{Kind: kindAttach, ID: kindAttach + "/" + a.Domain, Changed: true, DryRun: true,
				Summary: fmt.Sprintf("domain %s: attach VF %d of %s mac %s (after VF creation)", a.Domain, a.VF, pfs[a.PF].Netdev, mac)})
			continue
		}
		attSteps = append(attSteps, e.attachStep(att))
	}
	// One domain at a time: libvirt serialises them anyway.
	for _, s := range attSteps {
		if err := r.Do(ctx, s); err != nil {
			return err
		}
	}
	if r.DryRun {
		return nil
	}
	// 12. Verify.
	return e.verify(ctx, gh)
}

// lagSettled tells whether a switchdev group's eswitches, bond and LAG are
// already in place, so that VFs bound after LAG need not be unbound again.
func (e *env) lagSettled(gh groupHost) bool {
	for _, pf := range gh.pfs {
		if e.modeOf(pf) != eswitch.ModeSwitchdev {
			return false
		}
		l, err := e.k.Link(pf.Netdev)
		if err != nil || l.Master != gh.g.Bond.Name {
			return false
		}
	}
	st, err := eswitch.ReadLAG(e.fs, gh.pfs[0].Addr)
	return err == nil && st.State != eswitch.LAGInactive
}

// representors maps (pf index, vf) to representor netdev for every VF of
// every owning PF, waiting for them when wait is set; complete tells whether
// all were found.
func (e *env) representors(ctx context.Context, gh groupHost, wait bool) (map[[2]int]string, bool, error) {
	n := gh.g.NumVFs
	out := map[[2]int]string{}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, i := range gh.owners {
		pf := gh.pfs[i]
		var reps map[int]string
		var err error
		if wait {
			reps, err = eswitch.WaitRepresentors(ctx, e.k, e.fs, pf, n, e.poll)
		} else {
			reps, err = eswitch.Representors(e.k, e.fs, pf)
		}
		if err != nil {
			return nil, false, err
		}
		for vf, name := range reps {
			if vf < n {
				out[[2]int{i, vf}] = name
			}
		}
	}
	return out, len(out) == n*len(gh.owners), nil
}

// bridgeSpec is the group's bridge: the bond plus every representor, with
// the VLAN tag of its VF.
func (e *env) bridgeSpec(gh groupHost, reps map[[2]int]string) ovs.BridgeSpec {
	g := gh.g
	spec := ovs.BridgeSpec{Owner: g.Name, Bridge: g.OVS.Bridge, DatapathType: g.OVS.DatapathType, HWOffload: *g.OVS.HWOffload}
	spec.Ports = append(spec.Ports, ovs.PortSpec{Name: g.Bond.Name})
	tags := map[[2]int]int{}
	for _, v := range g.VFs {
		tags[[2]int{v.PF, v.VF}] = v.VLAN
	}
	for _, pf := range gh.owners {
		for vf := 0; vf < g.NumVFs; vf++ {
			k := [2]int{pf, vf}
			spec.Ports = append(spec.Ports, ovs.PortSpec{Name: reps[k], Tag: tags[k]})
		}
	}
	return spec
}

// verify is step 12: LAG active, every representor in the bridge with an
// ofport, hw-offload on, every attachment in its domain.
func (e *env) verify(ctx context.Context, gh groupHost) error {
	g := gh.g
	var problems []string
	if g.switchdev() {
		st, err := eswitch.ReadLAG(e.fs, gh.pfs[0].Addr)
		if err != nil {
			return err
		}
		if st.State == eswitch.LAGInactive {
			problems = append(problems, "hardware LAG is inactive")
		}
		c, err := e.ovsClient(ctx)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = c.WaitApplied(wctx)
		cancel()
		if err != nil {
			return fmt.Errorf("verify: ovs-vswitchd did not apply the configuration: %w", err)
		}
		bs, err := c.Status(ctx, g.OVS.Bridge)
		if err != nil {
			return err
		}
		for _, p := range bs.Ports {
			if p.Owner == g.Name && p.OFPort <= 0 {
				problems = append(problems, fmt.Sprintf("port %s has no ofport (%s)", p.Name, orDash(p.Error)))
			}
		}
		if *g.OVS.HWOffload && bs.HWOffload != "true" {
			problems = append(problems, "hw-offload is "+orDash(bs.HWOffload))
		}
	}
	domains := map[string]libvirtx.DomainState{} // each domain's XML is read once
	for _, a := range g.Attachments {
		d, ok := domains[a.Domain]
		if !ok {
			c, err := e.virtConn()
			if err != nil {
				return err
			}
			if d, err = c.Domain(a.Domain); err != nil {
				return err
			}
			domains[a.Domain] = d
		}
		found := false
		for _, i := range d.Interfaces {
			found = found || i.Owned && e.vfIs(gh, a.PF, a.VF, i.PCI)
		}
		if !found {
			problems = append(problems, fmt.Sprintf("domain %s lacks VF %d of %s", a.Domain, a.VF, gh.pfs[a.PF].Netdev))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("verify: %s", strings.Join(problems, "; "))
	}
	return nil
}

func (e *env) vfIs(gh groupHost, pf, vf int, pci string) bool {
	a, ok, err := e.pci.VF(gh.pfs[pf].Dev, vf)
	return err == nil && ok && string(a) == pci
}

// devlinks lists the distinct devlink instances of the PFs (netdevsim has one for both ports).
func devlinks(pfs []eswitch.PF) []eswitch.Devlink {
	var out []eswitch.Devlink
	seen := map[eswitch.Devlink]bool{}
	for _, pf := range pfs {
		if !seen[pf.Devlink] {
			seen[pf.Devlink] = true
			out = append(out, pf.Devlink)
		}
	}
	return out
}

func netdevs(pfs []eswitch.PF) []string {
	var out []string
	for _, pf := range pfs {
		out = append(out, pf.Netdev)
	}
	return out
}
