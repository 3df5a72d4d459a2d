package main

// `vflag hook qemu`: the libvirt qemu hook (/etc/libvirt/hooks/qemu.d/vflag).
// libvirt runs it at every domain lifecycle event with the domain XML on
// stdin. It must never call back into libvirt (libvirtd waits for the hook:
// a call from it deadlocks), must be fast, must never fail a domain vflag
// does not manage, and must refuse (non-zero exit, message on stderr) to
// start a domain whose managed VF is not ready.
//
// Which VFs are vflag's: the VFs of the PFs of the config's groups and of
// the PFs in the journal (read-only and without the lock: up may hold it).
// What the hook changes per domain (VF MACs, representor ports it had to add
// to the bridge) goes to STATE_DIR/hook/<domain>.json, so that release
// resets exactly that, without the config.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/atomicfile"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// hookTimeout bounds everything the hook does: libvirt waits for it.
const hookTimeout = 20 * time.Second

func (a *app) hookCommand() *cobra.Command {
	hook := &cobra.Command{
		Use:   "hook",
		Short: "libvirt hook entry points (installed by install-hook)",
	}
	qemu := &cobra.Command{
		Use:   "qemu DOMAIN OPERATION SUB-OPERATION [EXTRA]",
		Short: "libvirt qemu hook: ready the host side of vflag's VFs on prepare/start, reset it on release",
		Long: `Run by libvirt as /etc/libvirt/hooks/qemu.d/vflag with the domain XML on stdin.
On "prepare begin" and "start begin" it makes the host side of every VF vflag manages that the
domain uses ready: PF up, VF MAC = the domain's MAC (through the PF), representor up and in the
group's bridge with the VF's VLAN tag. It refuses (exit 1, reason on stderr: libvirt aborts the
start) when that is impossible. On "release end" it resets what it did. Domains without a VF of
vflag's pass at once, silently. It never calls libvirt.`,
		Args: cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if p, _ := cmd.Flags().GetString("domain-xml"); p != "-" {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), hookTimeout)
			defer cancel()
			return a.runHook(ctx, args[0], args[1], args[2], in)
		},
	}
	qemu.Flags().String("domain-xml", "-", "read the domain XML from this file instead of stdin (testing, debugging)")
	hook.AddCommand(qemu)
	return hook
}

// managedVF is one VF of vflag's, with what the config says about it.
type managedVF struct {
	Addr  sriov.Addr
	PF    eswitch.PF
	VF    int
	Group *config.Group // nil: known from the journal only
	// From the journal when Group is nil: bridges holding vflag's ports.
	Bridges  []pipeline.BridgeRef
	Endpoint string
}

func (m managedVF) String() string {
	s := fmt.Sprintf("VF %d of %s (%s)", m.VF, m.PF.Netdev, m.Addr)
	if m.Group != nil {
		s += ", group " + m.Group.Name
	}
	return s
}

// hookState is what the hook changed for one domain.
type hookState struct {
	Domain string      `json:"domain"`
	VFs    []hookVFRec `json:"vfs"`
}

type hookVFRec struct {
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

func (s *hookState) vf(pci string) *hookVFRec {
	for i := range s.VFs {
		if s.VFs[i].PCI == pci {
			return &s.VFs[i]
		}
	}
	return nil
}

func hookStatePath(stateDir, domain string) string {
	return filepath.Join(stateDir, "hook", url.PathEscape(domain)+".json")
}

func loadHookState(stateDir, domain string) (*hookState, error) {
	data, err := os.ReadFile(hookStatePath(stateDir, domain))
	if errors.Is(err, fs.ErrNotExist) {
		return &hookState{Domain: domain}, nil
	}
	if err != nil {
		return nil, err
	}
	var s hookState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("hook state %s: %w", hookStatePath(stateDir, domain), err)
	}
	return &s, nil
}

// save writes the state atomically, without VFs the hook changed nothing
// of; an empty state removes the file.
func (s *hookState) save(stateDir string) error {
	path := hookStatePath(stateDir, s.Domain)
	var keep []hookVFRec
	for _, v := range s.VFs {
		if v.MACSet || v.Port != nil {
			keep = append(keep, v)
		}
	}
	s.VFs = keep
	if len(s.VFs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// runHook is the qemu hook for one event.
func (a *app) runHook(ctx context.Context, domain, op, subop string, in io.Reader) error {
	action := libvirtx.HookActionFor(op, subop)
	// Read stdin in every case: libvirt writes the XML to a pipe, and a hook
	// that exits without reading it can make the write fail.
	doc, err := io.ReadAll(io.LimitReader(in, 64<<20))
	if err != nil || action == libvirtx.HookIgnore {
		return nil
	}
	d, err := libvirtx.ParseHookDomain(doc)
	if err != nil {
		// Not knowing the devices, the hook cannot tell whether the domain is
		// vflag's; it must not fail a domain that is not.
		fmt.Fprintf(a.stderr, "vflag hook: domain %s: %v; not checked\n", domain, err)
		return nil
	}
	if d.Name == "" {
		d.Name = domain
	}
	stateDir := a.stateDir()
	if action == libvirtx.HookRelease {
		return a.hookRelease(ctx, d, stateDir)
	}
	if len(d.Devices) == 0 {
		return nil // the fast path: no PCI passthrough at all
	}
	hx, err := a.openHookEnv(ctx)
	if err != nil {
		return err
	}
	defer hx.close()
	if len(hx.vfs) == 0 {
		return nil
	}
	tasks, err := libvirtx.PlanHook(d, func(pci string) bool { _, ok := hx.vfs[sriov.Addr(pci)]; return ok })
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	if len(tasks) == 0 {
		return nil
	}
	st, err := loadHookState(stateDir, d.Name)
	if err != nil {
		return err
	}
	var problems []string
	for _, t := range tasks {
		m := hx.vfs[sriov.Addr(t.Device.PCI)]
		if err := hx.prepareVF(ctx, st, m, t); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", m, err))
		}
	}
	// Saved also on failure: libvirt runs "release end" after an aborted
	// start, which resets what this run did.
	if err := st.save(stateDir); err != nil {
		problems = append(problems, fmt.Sprintf("save hook state: %v", err))
	}
	if len(problems) > 0 {
		return fmt.Errorf("refusing to start domain %s: VF not ready: %s (see `vflag status`)", d.Name, strings.Join(problems, "; "))
	}
	return nil
}

// hookEnv is the hook's view of the host: the kernel and the managed VFs.
type hookEnv struct {
	e        *env
	vfs      map[sriov.Addr]managedVF
	endpoint string
}

func (hx *hookEnv) close() {
	if hx.e != nil {
		hx.e.close()
	}
}

// openHookEnv loads the config (when usable) and the journal (read-only,
// no lock) and indexes the VFs they make vflag's.
func (a *app) openHookEnv(ctx context.Context) (*hookEnv, error) {
	cfg, cfgErr := a.loadConfig(true)
	j, jErr := teardown.OpenJournal(a.stateDir())
	if cfg == nil && (jErr != nil || len(j.Entries()) == 0) {
		if cfgErr != nil {
			// Possibly not vflag's domain at all: warn, never fail it.
			fmt.Fprintf(a.stderr, "vflag hook: %v; VFs not checked\n", cfgErr)
		}
		return &hookEnv{}, nil
	}
	e, _, err := a.openEnv(cfg, cfg)
	if err != nil {
		return nil, err
	}
	k, f := e.k, e.fs
	hx := &hookEnv{e: e, vfs: map[sriov.Addr]managedVF{}, endpoint: e.cfg.OVSDB}
	if cfg != nil {
		for gi := range cfg.Groups {
			g := &cfg.Groups[gi]
			var pfs []eswitch.PF
			for _, ref := range g.PFs {
				pf, err := eswitch.ResolvePF(k, f, ref)
				if err != nil {
					a.log.Debug("hook: PF not usable", "group", g.Name, "pf", ref, "err", err)
					continue
				}
				pfs = append(pfs, pf)
			}
			for _, i := range pipeline.Owners(pfs) {
				hx.addVFs(pfs[i], g, nil)
			}
		}
	}
	if jErr != nil {
		fmt.Fprintf(a.stderr, "vflag hook: %v; only the config's VFs are checked\n", jErr)
		return hx, nil
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
		hx.addVFs(pf, nil, bridges)
	}
	return hx, nil
}

// addVFs indexes the VFs of a PF; a config group wins over the journal.
func (hx *hookEnv) addVFs(pf eswitch.PF, g *config.Group, bridges []pipeline.BridgeRef) {
	vfs, err := hx.e.pci.VFs(pf.Dev)
	if err != nil {
		return
	}
	for _, v := range vfs {
		if v.Addr == "" {
			continue
		}
		if _, ok := hx.vfs[v.Addr]; ok && g == nil {
			continue
		}
		hx.vfs[v.Addr] = managedVF{Addr: v.Addr, PF: pf, VF: v.Index, Group: g, Bridges: bridges}
	}
}

// pfIndex is the index of a PF in its group's pfs.
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

// prepareVF makes one VF's host side ready, recording in st what it changed.
func (hx *hookEnv) prepareVF(ctx context.Context, st *hookState, m managedVF, t libvirtx.HookTask) error {
	e := hx.e
	vc := m.vfConfig()
	if vc.Driver != "" {
		return fmt.Errorf("the config gives it to the host (driver %s): a domain must not take it; give the domain another VF or drop the driver from the config and run `vflag up`", vc.Driver)
	}
	rec := st.vf(string(m.Addr))
	if rec == nil {
		st.VFs = append(st.VFs, hookVFRec{PCI: string(m.Addr), PF: m.PF.Netdev, VF: m.VF})
		rec = &st.VFs[len(st.VFs)-1]
	}
	// PF up: libvirt refuses a VF whose PF is down, and no traffic flows.
	l, err := e.k.Link(m.PF.Netdev)
	if err != nil {
		return fmt.Errorf("PF %s: %w", m.PF.Netdev, err)
	}
	if !l.AdminUp {
		if err := e.k.SetLinkUp(m.PF.Netdev, true); err != nil {
			return fmt.Errorf("set PF %s up: %w", m.PF.Netdev, err)
		}
	}
	// VF MAC through the PF.
	if t.MAC != "" {
		cur, err := e.VFMAC(m.PF, m.VF)
		if err != nil {
			return err
		}
		if cur != t.MAC {
			hw, _ := net.ParseMAC(t.MAC)
			if err := e.k.SetVFMAC(m.PF.Netdev, m.VF, hw); err != nil {
				return fmt.Errorf("set MAC %s: %w", t.MAC, err)
			}
			if !rec.MACSet {
				rec.MACSet, rec.PriorMAC = true, cur
			}
		}
	}
	switchdev := m.Group != nil && m.Group.Switchdev()
	if m.Group == nil {
		switchdev = e.modeOf(m.PF) == eswitch.ModeSwitchdev
	}
	if !switchdev {
		return nil
	}
	if mode := e.modeOf(m.PF); mode != eswitch.ModeSwitchdev {
		return fmt.Errorf("eswitch of %s is %s, not switchdev", m.PF.Netdev, pipeline.OrDash(mode))
	}
	reps, err := eswitch.Representors(e.k, e.fs, m.PF)
	if err != nil {
		return err
	}
	rep, ok := reps[m.VF]
	if !ok {
		return errors.New("no representor")
	}
	rl, err := e.k.Link(rep)
	if err != nil {
		return fmt.Errorf("representor %s: %w", rep, err)
	}
	if !rl.AdminUp {
		if err := e.k.SetLinkUp(rep, true); err != nil {
			return fmt.Errorf("set representor %s up: %w", rep, err)
		}
	}
	return hx.ensurePort(ctx, rec, m, rep, vc.VLAN)
}

// ensurePort checks that the representor is a port of the group's bridge
// with the VF's tag, adding (and recording) it when it is missing.
func (hx *hookEnv) ensurePort(ctx context.Context, rec *hookVFRec, m managedVF, rep string, vlan int) error {
	type target struct{ endpoint, owner, bridge string }
	var targets []target
	if m.Group != nil {
		targets = append(targets, target{hx.endpoint, m.Group.Name, m.Group.OVS.Bridge})
	} else {
		for _, b := range m.Bridges {
			targets = append(targets, target{b.Endpoint, b.Owner, b.Bridge})
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("representor %s: no bridge known (neither config nor journal names one)", rep)
	}
	for _, tg := range targets {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := ovs.Connect(cctx, tg.endpoint)
		cancel()
		if err != nil {
			return fmt.Errorf("representor %s: %w", rep, err)
		}
		bs, err := c.Status(ctx, tg.bridge)
		if err != nil {
			c.Close()
			return err
		}
		if !bs.Exists {
			c.Close()
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
		if m.Group == nil { // journal only: the tag is unknown; the port must be there
			c.Close()
			if port == nil {
				continue
			}
			if port.OFPort < 0 {
				return fmt.Errorf("port %s on %s failed: %s", rep, tg.bridge, pipeline.OrDash(port.Error))
			}
			return nil
		}
		if port != nil && port.OFPort < 0 {
			c.Close()
			return fmt.Errorf("port %s on %s failed: %s", rep, tg.bridge, pipeline.OrDash(port.Error))
		}
		if port != nil && port.Tag == vlan {
			c.Close()
			return nil
		}
		// Missing, or vflag's with another tag: one transaction adds or retags
		// it. HWOffload false never writes (turning it off needs a restart).
		spec := ovs.BridgeSpec{Owner: tg.owner, Bridge: tg.bridge, Ports: []ovs.PortSpec{{Name: rep, Tag: vlan}}}
		r, ch, err := c.Ensure(ctx, spec)
		c.Close()
		if err != nil {
			return err
		}
		if len(ch.Foreign) > 0 {
			return fmt.Errorf("port %s exists on %s but is not vflag's: left alone", rep, tg.bridge)
		}
		if len(r.Ports) > 0 && rec.Port == nil {
			rec.Port = &ovs.Record{Owner: tg.owner, Bridge: tg.bridge, Ports: r.Ports}
			rec.Endpoint = tg.endpoint
		}
		return nil
	}
	return fmt.Errorf("representor %s is in no bridge of vflag's", rep)
}

// hookRelease resets what prepare recorded for the domain: VF MACs back,
// added ports removed. Nothing recorded: nothing to do.
func (a *app) hookRelease(ctx context.Context, d libvirtx.HookDomain, stateDir string) error {
	st, err := loadHookState(stateDir, d.Name)
	if err != nil {
		return err
	}
	if len(st.VFs) == 0 {
		return nil
	}
	cfg, _ := a.loadConfig(true)
	e, closeEnv, err := a.openEnv(cfg, cfg)
	if err != nil {
		return err
	}
	defer closeEnv()
	k := e.k
	var errs []string
	var keep []hookVFRec
	sort.SliceStable(st.VFs, func(i, j int) bool { return st.VFs[i].PCI < st.VFs[j].PCI })
	for _, r := range st.VFs {
		failed := false
		if r.Port != nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err := ovs.Connect(cctx, r.Endpoint)
			cancel()
			if err == nil {
				err = c.Undo(ctx, *r.Port)
				c.Close()
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("VF %s: remove port %s: %v", r.PCI, strings.Join(r.Port.Ports, " "), err))
				failed = true
			} else {
				r.Port = nil
			}
		}
		if r.MACSet {
			if err := resetVFMAC(k, r); err != nil {
				errs = append(errs, fmt.Sprintf("VF %s: reset MAC: %v", r.PCI, err))
				failed = true
			} else {
				r.MACSet = false
			}
		}
		if failed {
			keep = append(keep, r)
		}
	}
	st.VFs = keep
	if err := st.save(stateDir); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("release of domain %s: %s", d.Name, strings.Join(errs, "; "))
	}
	return nil
}

// resetVFMAC puts back the MAC a VF had before the hook; a VF or PF that is
// gone needs nothing.
func resetVFMAC(k eswitch.Kernel, r hookVFRec) error {
	return pipeline.RestoreVFMAC(k, r.PF, r.VF, r.PriorMAC)
}
