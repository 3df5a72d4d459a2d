package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pathsafe"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// Timeout bounds everything the hook does: libvirt waits for it.
const Timeout = 20 * time.Second

// Options are one hook event and what it may use.
type Options struct {
	// StateDir is vflag's state directory (the main journal; the hook's
	// journals are under StateDir/hook).
	StateDir string
	// Domain, Op, SubOp are libvirt's arguments.
	Domain, Op, SubOp string
	// XML is the domain XML (libvirt's stdin); it is read in every case.
	XML io.Reader
	// Config loads the config: (nil, nil) when there is none. Called only
	// when the domain has PCI devices or changes to release.
	Config func() (*config.Config, error)
	// Host opens the host for cfg (nil: no config; endpoints are defaults).
	Host func(cfg *config.Config) (*host.Host, error)
	Log  *slog.Logger
	// Stderr receives the warnings that must not fail a domain.
	Stderr io.Writer
	// StopAfter and FailAt are the runner's test hooks (teardown.Runner).
	StopAfter int
	FailAt    string
	// Gate, when set, keeps a domain holding one of vflag's VFs from
	// starting before up has brought the VF-LAG up in this boot
	// (internal/bootgate); an autostarted domain is deferred, and up starts it.
	Gate *bootgate.Gate
	// Autostart tells whether libvirt autostarts the domain (default: its
	// link in AutostartDir; the hook must not ask libvirt).
	Autostart func(domain string) bool
}

// AutostartDir is where the system qemu driver of libvirt keeps the links
// of autostarted domains ("virsh autostart $domain").
const AutostartDir = "/etc/libvirt/qemu/autostart"

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Config == nil {
		o.Config = func() (*config.Config, error) { return nil, nil }
	}
	if o.Autostart == nil {
		o.Autostart = func(domain string) bool {
			// libvirt names the link after the domain, unescaped: a name
			// that is not one plain path element has no link there.
			if domain == "." || domain == ".." || strings.ContainsAny(domain, "/\x00") {
				return false
			}
			_, err := os.Lstat(filepath.Join(AutostartDir, domain+".xml"))
			return err == nil
		}
	}
	return o
}

// Dir is the directory of a domain's journal and lock,
// STATE_DIR/hook/<pathsafe.Component(domain)>: never outside STATE_DIR/hook,
// whatever the name (a domain may be named ".." or "../x"). A name that
// cannot be encoded (empty, too long) is an error.
func Dir(stateDir, domain string) (string, error) {
	return pathsafe.Join(filepath.Join(stateDir, "hook"), "domain", domain)
}

// oldStatePath is the state file of vflag releases before the per-domain
// journal (the directory's path plus ".json").
func oldStatePath(dir string) string { return dir + ".json" }

// domainName is the name the hook keeps the domain's state under: libvirt's
// argument, else the XML's. It fails when that name cannot be used for a
// path (pathsafe.Component), before anything is opened or locked.
func (o Options) domainName(d libvirtx.HookDomain) (name, dir string, err error) {
	name = o.Domain
	if name == "" {
		name = d.Name
	}
	dir, err = Dir(o.StateDir, name)
	return name, dir, err
}

// Run is the qemu hook for one event.
func Run(ctx context.Context, o Options) error {
	o = o.withDefaults()
	action := libvirtx.HookActionFor(o.Op, o.SubOp)
	// Read stdin in every case: libvirt writes the XML to a pipe, and a hook
	// that exits without reading it can make the write fail.
	var doc []byte
	var err error
	if o.XML != nil {
		doc, err = io.ReadAll(io.LimitReader(o.XML, 64<<20))
	}
	if err != nil || action == libvirtx.HookIgnore {
		return nil
	}
	d, err := libvirtx.ParseHookDomain(doc)
	if err != nil {
		// Not knowing the devices, the hook cannot tell whether the domain is
		// vflag's; it must not fail a domain that is not.
		fmt.Fprintf(o.Stderr, "vflag hook: domain %s: %v; not checked\n", o.Domain, err)
		return nil
	}
	name, dir, nameErr := o.domainName(d)
	d.Name = name
	if action == libvirtx.HookRelease {
		if nameErr != nil {
			// No journal can exist under a name that has no path: nothing
			// of vflag's is the domain's, and nothing is touched.
			fmt.Fprintf(o.Stderr, "vflag hook: release of %v: vflag kept no state for it; nothing to undo\n", nameErr)
			return nil
		}
		return release(ctx, o, name, dir)
	}
	if len(d.Devices) == 0 {
		return nil // the fast path: no PCI passthrough at all
	}
	return prepare(ctx, o, d, dir, nameErr)
}

// domainJournal is a domain's journal, under its lock.
type domainJournal struct {
	dir  string
	lock *teardown.Lock
	j    *teardown.Journal
}

// openDomain locks and opens a domain's journal, adopting an old-format
// state file first.
func openDomain(ctx context.Context, o Options, domain, dir string) (*domainJournal, error) {
	o = o.withDefaults()
	if err := pathsafe.EnsureDir(dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := teardown.AcquireLock(dir)
	if err != nil {
		return nil, fmt.Errorf("hook journal of domain %s: %w", domain, err)
	}
	dj := &domainJournal{dir: dir, lock: lock}
	dj.j, err = teardown.OpenJournal(dir)
	if err == nil {
		err = adoptOldState(ctx, o, dir, dj.j)
	}
	if err != nil {
		dj.close()
		return nil, err
	}
	return dj, nil
}

// close removes the directory when its journal is empty, then unlocks.
func (dj *domainJournal) close() {
	if dj.j != nil && len(dj.j.Entries()) == 0 {
		if err := os.Remove(filepath.Join(dj.dir, "journal.json")); err == nil || errors.Is(err, fs.ErrNotExist) {
			_ = os.Remove(dj.lock.Path())
			_ = os.Remove(dj.dir)
		}
	}
	_ = dj.lock.Release()
}

func (o Options) runner(j *teardown.Journal, e *pipeline.Env) *teardown.Runner {
	return &teardown.Runner{Journal: j, Undo: e.Undoers(), Log: o.Log, NoRollback: true, StopAfter: o.StopAfter, FailAt: o.FailAt}
}

// release is down of the domain's journal. Nothing journaled: nothing to do
// (and no host opened).
func release(ctx context.Context, o Options, domain, dir string) error {
	_, jErr := os.Lstat(filepath.Join(dir, "journal.json"))
	_, sErr := os.Lstat(oldStatePath(dir))
	if errors.Is(jErr, fs.ErrNotExist) && errors.Is(sErr, fs.ErrNotExist) {
		return nil
	}
	dj, err := openDomain(ctx, o, domain, dir)
	if err != nil {
		return fmt.Errorf("release of domain %s: %w", domain, err)
	}
	defer dj.close()
	if len(dj.j.Entries()) == 0 {
		return nil
	}
	cfg, cfgErr := o.Config()
	if cfgErr != nil {
		// As down: the domain's journal alone says what to undo.
		o.Log.Warn("config not usable; the release works from the domain's journal alone", "domain", domain, "err", cfgErr)
		cfg = nil
	}
	h, err := o.Host(cfg)
	if err != nil {
		return fmt.Errorf("release of domain %s: %w", domain, err)
	}
	defer h.Close()
	e := pipeline.New(cfg, h, o.Log)
	if err := o.runner(dj.j, e).Down(ctx); err != nil {
		return fmt.Errorf("release of domain %s: %w", domain, err)
	}
	return nil
}

// oldState is the hook's state file of vflag releases before the
// per-domain journal: what the hook changed for one domain.
type oldState struct {
	Domain string     `json:"domain"`
	VFs    []oldVFRec `json:"vfs"`
}

type oldVFRec struct {
	PCI string `json:"pci"`
	PF  string `json:"pf"` // PF netdev
	VF  int    `json:"vf"`
	// MACSet: the hook changed the VF's MAC; PriorMAC is the one before.
	MACSet   bool   `json:"mac_set,omitempty"`
	PriorMAC string `json:"prior_mac,omitempty"`
	// Port: a representor port the hook added to a bridge.
	Port *ovs.Record `json:"port,omitempty"`
	// Endpoint is the OVSDB endpoint of Port.
	Endpoint string `json:"endpoint,omitempty"`
}

// adoptOldState journals the records of an old-format state file as the
// equivalent entries (write-ahead, through the runner: the changes are
// already on the host, so nothing is applied), then removes the file. A
// crash in between adopts again: the journal keeps its first capture.
func adoptOldState(ctx context.Context, o Options, dir string, j *teardown.Journal) error {
	path := oldStatePath(dir)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st oldState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("hook state %s: %w", path, err)
	}
	sort.SliceStable(st.VFs, func(a, b int) bool { return st.VFs[a].PCI < st.VFs[b].PCI })
	// Per VF the MAC before the port, as prepare journals them: down undoes
	// the port first.
	var steps []teardown.Step
	for _, v := range st.VFs {
		if v.MACSet {
			steps = append(steps, pipeline.AdoptVFMAC(v.PF, v.VF, v.PriorMAC))
		}
		if v.Port != nil && len(v.Port.Ports) > 0 {
			steps = append(steps, pipeline.AdoptPort(v.Endpoint, *v.Port))
		}
	}
	r := &teardown.Runner{Journal: j, Undo: pipeline.New(nil, host.New(nil, nil, "", ""), o.Log).Undoers(), Log: o.Log, NoRollback: true}
	for _, s := range steps {
		if err := r.Do(ctx, s); err != nil {
			return fmt.Errorf("adopt hook state %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	o.Log.Info("hook: adopted old-format state file into the domain's journal", "file", path, "journal", j.Path(), "entries", len(steps))
	return nil
}

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

func sortedInts(v []int) []int {
	out := append([]int(nil), v...)
	slices.Sort(out)
	return out
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
	if m.Group == nil {
		return config.VFConfig{}
	}
	for pi, ref := range m.Group.PFs {
		if ref != m.PF.Netdev && ref != string(m.PF.Addr) {
			continue
		}
		for _, v := range m.Group.VFs {
			if v.PF == pi && v.VF == m.VF {
				return v
			}
		}
	}
	return config.VFConfig{}
}

// preparer is the hook's view of the host for one prepare/start event.
type preparer struct {
	o   Options
	e   *pipeline.Env
	h   *host.Host
	vfs map[sriov.Addr]managedVF
	r   *teardown.Runner
}

func prepare(ctx context.Context, o Options, d libvirtx.HookDomain, dir string, nameErr error) error {
	if err := pathsafe.CheckDir(o.StateDir); err != nil {
		// The main journal is read below, as root.
		return fmt.Errorf("refusing to start domain %q: %w", d.Name, err)
	}
	cfg, cfgErr := o.Config()
	j, jErr := teardown.OpenJournal(o.StateDir)
	if cfg == nil && (jErr != nil || len(j.Entries()) == 0) {
		if cfgErr != nil {
			// Possibly not vflag's domain at all: warn, never fail it.
			fmt.Fprintf(o.Stderr, "vflag hook: %v; VFs not checked\n", cfgErr)
		}
		return nil
	}
	h, err := o.Host(cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	p := &preparer{o: o, e: pipeline.New(cfg, h, o.Log), h: h, vfs: map[sriov.Addr]managedVF{}}
	p.index(cfg, j, jErr)
	if len(p.vfs) == 0 {
		return nil
	}
	tasks, err := libvirtx.PlanHook(d, func(pci string) bool { _, ok := p.vfs[sriov.Addr(pci)]; return ok })
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	if len(tasks) == 0 {
		return nil
	}
	// A VF the config gives to the host is refused for that, at once: not
	// deferred at boot to be refused later.
	var conflicts []string
	for _, t := range tasks {
		m := p.vfs[sriov.Addr(t.Device.PCI)]
		if err := hostConflict(m); err != nil {
			conflicts = append(conflicts, fmt.Sprintf("%s: %v", m, err))
		}
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("refusing to start domain %s: VF not ready: %s (see `vflag status`)", d.Name, strings.Join(conflicts, "; "))
	}
	if nameErr != nil {
		// Its changes could not be journaled, nor released: it must not
		// take vflag's VFs.
		return fmt.Errorf("refusing to start %v: vflag cannot keep the state of its VFs under that name; rename the domain", nameErr)
	}
	if err := gate(o, d.Name); err != nil {
		return err
	}
	dj, err := openDomain(ctx, o, d.Name, dir)
	if err != nil {
		return fmt.Errorf("refusing to start domain %s: %w", d.Name, err)
	}
	defer dj.close()
	p.r = o.runner(dj.j, p.e)
	var problems []string
	for _, t := range tasks {
		m := p.vfs[sriov.Addr(t.Device.PCI)]
		if err := p.prepareVF(ctx, m, t); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", m, err))
		}
	}
	// No rollback: libvirt runs "release end" after an aborted start, which
	// undoes what the domain's journal holds.
	if len(problems) > 0 {
		return fmt.Errorf("refusing to start domain %s: VF not ready: %s (see `vflag status`)", d.Name, strings.Join(problems, "; "))
	}
	return nil
}

// gate refuses to start a domain holding vflag's VFs before up has brought
// the VF-LAG up in this boot (their drivers are bound strictly after the
// LAG); an autostarted domain is recorded as deferred first, and the mark
// read again after that (see internal/bootgate for the order).
func gate(o Options, domain string) error {
	if o.Gate == nil {
		return nil
	}
	ready, err := o.Gate.Ready()
	if err != nil {
		return fmt.Errorf("refusing to start domain %s: %w", domain, err)
	}
	if ready {
		return nil
	}
	if !o.Autostart(domain) {
		return fmt.Errorf("refusing to start domain %s: vflag has not brought the VF-LAG up in this boot yet, and its VFs must not be used before; start it after `vflag up` (vflag.service runs it at boot)", domain)
	}
	if err := o.Gate.Defer(domain); err != nil {
		return fmt.Errorf("refusing to start domain %s: %w", domain, err)
	}
	if ready, err := o.Gate.Ready(); err == nil && ready {
		_ = o.Gate.Undefer(domain) // up finished meanwhile: go on
		return nil
	}
	return fmt.Errorf("deferring the autostart of domain %s: vflag has not brought the VF-LAG up in this boot yet; `vflag up` (vflag.service) starts it once it has", domain)
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

// do runs one change through the domain's journal. The runner's
// "no rollback" note is dropped: release undoes the domain's journal.
func (p *preparer) do(ctx context.Context, s teardown.Step) error {
	err := p.r.Do(ctx, s)
	if err != nil && !errors.Is(err, teardown.ErrStopped) {
		if u := errors.Unwrap(err); u != nil {
			return u
		}
	}
	return err
}

func (p *preparer) modeOf(pf eswitch.PF) string {
	m, _ := p.h.Kernel.EswitchMode(pf.Devlink)
	return m
}

// hostConflict refuses a VF the config gives to a host driver.
func hostConflict(m managedVF) error {
	if d := m.vfConfig().Driver; d != "" {
		return fmt.Errorf("the config gives it to the host (driver %s): a domain must not take it; give the domain another VF or drop the driver from the config and run `vflag up`", d)
	}
	return nil
}

// prepareVF makes one VF's host side ready.
func (p *preparer) prepareVF(ctx context.Context, m managedVF, t libvirtx.HookTask) error {
	k := p.h.Kernel
	vc := m.vfConfig()
	if err := hostConflict(m); err != nil {
		return err
	}
	// PF up (direct, not journaled: release leaves it up, the PF serves
	// other VFs): libvirt refuses a VF whose PF is down, and no traffic flows.
	l, err := k.Link(m.PF.Netdev)
	if err != nil {
		return fmt.Errorf("PF %s: %w", m.PF.Netdev, err)
	}
	if !l.AdminUp {
		if err := k.SetLinkUp(m.PF.Netdev, true); err != nil {
			return fmt.Errorf("set PF %s up: %w", m.PF.Netdev, err)
		}
	}
	// VF MAC through the PF.
	if t.MAC != "" {
		if err := p.do(ctx, p.e.VFMACStep(m.PF, m.VF, t.MAC)); err != nil {
			return err
		}
	}
	switchdev := m.Group != nil && m.Group.Switchdev()
	if m.Group == nil {
		switchdev = p.modeOf(m.PF) == eswitch.ModeSwitchdev
	}
	if !switchdev {
		return nil
	}
	if mode := p.modeOf(m.PF); mode != eswitch.ModeSwitchdev {
		return fmt.Errorf("eswitch of %s is %s, not switchdev", m.PF.Netdev, pipeline.OrDash(mode))
	}
	reps, err := eswitch.RepresentorsOf(k, p.h.FS, m.PF, m.VF+1)
	if err != nil {
		return err
	}
	rep, ok := reps[m.VF]
	if !ok {
		return errors.New("no representor")
	}
	rl, err := k.Link(rep)
	if err != nil {
		return fmt.Errorf("representor %s: %w", rep, err)
	}
	if !rl.AdminUp { // direct, like the PF's
		if err := k.SetLinkUp(rep, true); err != nil {
			return fmt.Errorf("set representor %s up: %w", rep, err)
		}
	}
	want := ovs.PortSpec{Name: rep, Tag: vc.VLAN, VLANMode: vc.VLANMode, Trunks: vc.Trunks}
	if m.Group != nil {
		want.MTURequest = m.Group.MTU
	}
	return p.ensurePort(ctx, m, want)
}

// portStatus reads the bridge and the port rep on it at endpoint: through
// the run's connection when it is the host's endpoint (PortStep writes
// through it too), else a connection of its own; only the port's rows.
func (p *preparer) portStatus(ctx context.Context, endpoint, bridge, rep string) (ovs.BridgeStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if endpoint == p.h.OVSDB {
		c, err := p.h.OVS(cctx)
		if err != nil {
			return ovs.BridgeStatus{}, err
		}
		return c.PortStatus(ctx, bridge, rep)
	}
	c, err := ovs.Connect(cctx, endpoint)
	if err != nil {
		return ovs.BridgeStatus{}, err
	}
	defer c.Close()
	return c.PortStatus(ctx, bridge, rep)
}

// ensurePort checks that the representor is a port of the group's bridge
// with the VF's VLAN columns (tag, vlan_mode, trunks) and the group's
// mtu_request, as the bridge step makes it, adding it (an ovs.port step)
// when it is missing.
func (p *preparer) ensurePort(ctx context.Context, m managedVF, want ovs.PortSpec) error {
	rep := want.Name
	type target struct{ endpoint, owner, bridge string }
	var targets []target
	if m.Group != nil {
		targets = append(targets, target{p.h.OVSDB, m.Group.Name, m.Group.OVS.Bridge})
	} else {
		for _, b := range m.Bridges {
			targets = append(targets, target{b.Endpoint, b.Owner, b.Bridge})
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("representor %s: no bridge known (neither config nor journal names one)", rep)
	}
	for _, tg := range targets {
		bs, err := p.portStatus(ctx, tg.endpoint, tg.bridge, rep)
		if err != nil {
			return fmt.Errorf("representor %s: %w", rep, err)
		}
		if !bs.Exists {
			if m.Group != nil {
				return fmt.Errorf("bridge %s does not exist", tg.bridge)
			}
			continue
		}
		var port *ovs.PortStatus
		for i := range bs.Ports {
			if bs.Ports[i].Name == rep {
				port = &bs.Ports[i]
			}
		}
		if port != nil && port.OFPort < 0 {
			return fmt.Errorf("port %s on %s failed: %s", rep, tg.bridge, pipeline.OrDash(port.Error))
		}
		if m.Group == nil { // journal only: the tag is unknown; the port must be there
			if port == nil {
				continue
			}
			return nil
		}
		if port != nil && m.inPool() {
			// A pool VF's VLAN columns are the network hook's (its port's
			// portgroup, set when libvirt allocated the port): kept.
			want.Tag, want.VLANMode, want.Trunks = port.Tag, port.VLANMode, port.Trunks
		}
		if port != nil && port.Tag == want.Tag && port.VLANMode == want.VLANMode &&
			slices.Equal(port.Trunks, sortedInts(want.Trunks)) && port.MTURequest == want.MTURequest {
			return nil
		}
		// Missing, or vflag's with other VLAN columns or mtu_request: one
		// transaction adds or changes it (a port that is not vflag's fails
		// the step's check).
		spec := ovs.BridgeSpec{Owner: tg.owner, Bridge: tg.bridge, Ports: []ovs.PortSpec{want}}
		return p.do(ctx, p.e.PortStep(tg.endpoint, spec))
	}
	return fmt.Errorf("representor %s is in no bridge of vflag's", rep)
}
