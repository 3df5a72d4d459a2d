// Package validaterun runs `vflag validate` on a host: it resolves each
// group (or a bare bond), gathers the facts (OVS bridge, libvirt
// attachments), and runs internal/validate's static, traffic, failover and
// RDMA checks with the settings of Options, falling back to each group's
// validate: section. It is separate from internal/validate, which
// internal/host and internal/config import, because it joins them with
// internal/pipeline. It also reads and sets the RoCE settings of `vflag
// roce` (roce.go). Rendering the report is internal/validate's; choosing
// the output is cmd/vflag's.
package validaterun

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/holders"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
)

// Options are the settings of one validate run (the command's flags). A
// zero value takes the group's validate: section, then the default.
type Options struct {
	Group     string // only this group ("": every group)
	Bond      string // validate this bond alone instead of the config's groups
	BondMode  string // with Bond: the mode it must have ("": any)
	AllowSkip bool   // OK when no check failed, even if some were skipped
	RoCEMode  string // expected default RoCE mode: v1 or v2

	Traffic bool // run the traffic check, then the offload check
	Offload bool // run the offload check
	// VswitchdLog is ovs-vswitchd's log ("" DefaultVswitchdLog), read by
	// the offload check.
	VswitchdLog string
	Failover    bool // run the failover check (implies Traffic)
	Manual      bool // failover: the operator pulls the cable
	FailSlave   string
	Peer        string // iperf3 server address
	Server      bool   // be the iperf3 server
	Duration    time.Duration
	Parallel    int
	Interval    time.Duration
	MinShare    float64
	MaxGap      time.Duration

	// OVNFrom and OVNTo are the OVN traffic check's ports (--ovn-from,
	// --ovn-to; "": the group's validate: section, then its first port).
	OVNFrom, OVNTo string

	RDMA       bool
	RDMAPeer   string
	RDMAServer bool
	RDMATool   string
	RDMADev    string
	RDMAIters  int

	// StateDir is vflag's state directory: its journal is what the plan
	// pass (Drift) prunes from. "": no drift checks.
	StateDir string

	// Prompt is where the manual failover check asks the operator.
	Prompt io.Writer
	// OnTick and OnFailoverTick, when set, see the samples of the traffic
	// and the failover check (a live view); TicksDone is called after each
	// check whose samples were seen.
	OnTick, OnFailoverTick func(validate.Tick)
	TicksDone              func()
	Log                    *slog.Logger
}

// run is one validate run on a host.
type run struct {
	o  Options
	h  *host.Host
	pe *pipeline.Env
	// bridge, when set, is the group's bridge as the caller read it (status
	// reads it once for both its own view and these checks).
	bridge *ovs.BridgeStatus
	// drift is what plan would change (drift.go): each change a failed check.
	drift *Drift
	// ovn, when set, is the group's OVN chassis as the caller read it
	// (status reads it once for its checks and its metrics).
	ovn *OVNState
}

// Run validates the groups of cfg (or o.Bond alone) on h; the report is tallied.
func Run(ctx context.Context, cfg *config.Config, h *host.Host, o Options) *validate.Report {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Prompt == nil {
		o.Prompt = io.Discard
	}
	r := &run{o: o, h: h, pe: pipeline.New(cfg, h, o.Log)}
	rep := &validate.Report{AllowSkip: o.AllowSkip}
	var groups []config.Group
	if o.Bond == "" && o.StateDir != "" {
		r.drift = PlanDrift(ctx, cfg, h, o.StateDir)
	}
	if o.Bond != "" {
		rep.Groups = append(rep.Groups, validate.GroupReport{Group: o.Bond, Kind: "bond", Checks: r.bond(ctx, o.Bond)})
	} else {
		groups = cfg.Groups
	}
	rep.Groups = append(rep.Groups, r.groups(ctx, groups)...)
	rep.Tally()
	return rep
}

// groups checks the groups (those o.Group selects), in config order. The
// checks that only read run for every group side by side; traffic,
// failover and RDMA checks (links flapped, traffic sent, a prompt) run one
// group after the other.
func (r *run) groups(ctx context.Context, groups []config.Group) []validate.GroupReport {
	var sel []*config.Group
	for gi := range groups {
		if r.o.Group == "" || r.o.Group == groups[gi].Name {
			sel = append(sel, &groups[gi])
		}
	}
	out := make([]validate.GroupReport, len(sel))
	if r.o.Traffic || r.o.Failover || r.o.RDMA {
		for i, g := range sel {
			out[i] = validate.GroupReport{Group: g.Name, Checks: r.group(ctx, g)}
		}
		return out
	}
	var wg sync.WaitGroup
	for i, g := range sel {
		wg.Go(func() { out[i] = validate.GroupReport{Group: g.Name, Checks: r.group(ctx, g)} })
	}
	wg.Wait()
	return out
}

// Static runs the static checks of group g of cfg on h: what `vflag
// validate` checks without --traffic, --failover, --offload or --rdma, with
// the group's validate: section (roceMode "": its roce_mode). vflag status
// counts their failures as problems.
func Static(ctx context.Context, cfg *config.Config, h *host.Host, g *config.Group, roceMode string) []validate.Check {
	return StaticWith(ctx, cfg, h, g, roceMode, nil, nil)
}

// StaticWith is Static with the group's bridge as the caller already read
// it (nil: read it here) and what plan would change (drift: PlanDrift,
// nil none), each change a failed check.
func StaticWith(ctx context.Context, cfg *config.Config, h *host.Host, g *config.Group, roceMode string, bridge *ovs.BridgeStatus, drift *Drift) []validate.Check {
	return StaticWithOVN(ctx, cfg, h, g, roceMode, bridge, drift, nil)
}

// StaticWithOVN is StaticWith with the group's OVN chassis as the caller
// already read it (ReadOVN; nil: read it here).
func StaticWithOVN(ctx context.Context, cfg *config.Config, h *host.Host, g *config.Group, roceMode string, bridge *ovs.BridgeStatus, drift *Drift, ovn *OVNState) []validate.Check {
	r := &run{o: Options{RoCEMode: roceMode, Log: slog.New(slog.DiscardHandler)}, h: h, pe: pipeline.New(cfg, h, nil), bridge: bridge, drift: drift, ovn: ovn}
	out, _, _ := r.static(ctx, g)
	return out
}

// static runs the static checks of one group; ok is false when its PFs
// did not resolve (the checks say why, and nothing else can run).
func (r *run) static(ctx context.Context, g *config.Group) (out []validate.Check, gh pipeline.Group, ok bool) {
	gh, errs := pipeline.ResolveGroup(r.h.Kernel, r.h.FS, g)
	for _, err := range errs {
		out = append(out, validate.Check{Name: fmt.Sprintf("pf/%d", err.Index), Verdict: validate.Fail, Detail: err.Err.Error()})
	}
	if len(errs) > 0 {
		return append(out, r.drift.Checks(g.Name)...), gh, false
	}
	out = append(out, unrealizableVFs(gh)...)
	t := validate.Target{
		Group: g.Name, Switchdev: g.Switchdev(), PFs: gh.PFs, Owners: gh.Owners, NumVFs: g.NumVFs,
		BondName: g.Bond.Name, BondMode: g.Bond.Mode, Bridge: g.OVS.Bridge, HWOffload: *g.OVS.HWOffload,
		DatapathType: g.OVS.DatapathType,
		RoCE:         validate.RoCEExpect{Required: g.Validate.RoCE},
		VFPolicies:   pipeline.VFPolicyWants(g),
		MTU:          g.MTU,
	}
	if c := r.pe.Config(); c != nil {
		t.AcceptUnverifiedLAG = c.AcceptUnverifiedLAG
	}
	if g.MTU != 0 && !g.Switchdev() {
		t.VFNetdevs = r.vfNetdevs(gh)
	}
	t.Tunnel = pipeline.TunnelWant(g)
	var ovnSt *OVNState
	if g.OVN != nil {
		if ovnSt = r.ovn; ovnSt == nil {
			ovnSt = ReadOVN(ctx, r.pe.Config(), r.h, g)
		}
		// The bond is the underlay, in no bridge: the tunnel checks judge
		// it (address, routes, neighbours towards the other chassis, MTU).
		t.Tunnel = ovnUnderlayWant(g, ovnSt)
	}
	if g.Switchdev() {
		for _, rg := range g.RateGroups {
			t.RateNodes = append(t.RateNodes, validate.RateNode{Name: rg.Name, TxMax: pipeline.Mbit(rg.TxMax), TxShare: pipeline.Mbit(rg.TxShare)})
		}
		owner := map[int]bool{}
		for _, i := range gh.Owners {
			owner[i] = true
		}
		for _, v := range g.VFs {
			if v.HasRate() && owner[v.PF] { // as up: VFs of an owning PF only
				t.RateLeaves = append(t.RateLeaves, validate.RateLeaf{PF: v.PF, VF: v.VF, TxMax: pipeline.Mbit(v.TxMax), TxShare: pipeline.Mbit(v.TxShare), Parent: v.RateGroup})
			}
		}
	}
	mode := r.o.RoCEMode
	if mode == "" {
		mode = g.Validate.RoCEMode
	}
	if mode != "" {
		t.RoCE.Mode, _ = validate.ParseRoCEMode(mode)
	}
	var facts validate.Facts
	if g.Switchdev() {
		facts.Bridge, facts.BridgeErr = r.bridgeFacts(ctx, g.OVS.Bridge)
	} else if g.StandbyBridge != "" && slices.ContainsFunc(g.Attachments, func(a config.Attachment) bool { return a.Migratable }) {
		// A legacy group's standbys' bridge, for the teaming check's
		// ports (not read: that check leaves the ports out).
		facts.Bridge, _ = r.bridgeFacts(ctx, g.StandbyBridge)
	}
	facts.Attachments = r.attachmentFacts(gh)
	out = append(out, validate.Static(r.h.Kernel, r.h.FS, t, facts)...)
	out = append(out, r.networkChecks(ctx, gh)...)
	if ovnSt != nil {
		out = append(out, ovnSt.Checks()...)
	}
	return append(out, r.drift.Checks(g.Name)...), gh, true
}

// group runs every check of one group.
func (r *run) group(ctx context.Context, g *config.Group) []validate.Check {
	out, gh, ok := r.static(ctx, g)
	if !ok {
		return out
	}
	var pcis []string
	for _, pf := range gh.PFs {
		pcis = append(pcis, string(pf.Addr))
	}
	tt := trafficTarget{bond: g.Bond.Name, v: g.Validate, pcis: pcis}
	switch {
	case !g.Switchdev():
		// Asked for and cannot run here: an explicit skip, never absent.
		out = append(out, r.legacySkips(g)...)
	case r.o.Traffic || r.o.Failover:
		if g.OVN != nil {
			// Between logical ports through OVN's flows; the bond's
			// shares (iperf3 over the underlay) when a peer is given.
			out = append(out, r.ovnTraffic(ctx, g, gh))
		}
		if g.OVN == nil || r.o.Failover || r.o.Server || tt.v.Server || r.o.Peer != "" || tt.v.Peer != "" {
			reps, err := r.bridgeReps(ctx, g)
			tt.probe = r.slowPathProbe(g, reps, err)
			out = append(out, r.trafficChecks(ctx, tt)...)
		}
		out = append(out, r.offloadCheck(ctx, g, gh))
	case r.o.Offload:
		out = append(out, r.offloadCheck(ctx, g, gh))
	}
	if r.o.RDMA {
		out = append(out, r.rdmaCheck(ctx, tt))
	}
	return out
}

// unrealizableVFs fails each configured VF entry and attachment that up
// refuses for its PF's missing VF pool (pipeline.PoollessVFs), once per VF.
func unrealizableVFs(gh pipeline.Group) []validate.Check {
	var out []validate.Check
	seen := map[[2]int]bool{}
	for _, v := range pipeline.PoollessVFs(gh) {
		if seen[[2]int{v.PF, v.VF}] {
			continue
		}
		seen[[2]int{v.PF, v.VF}] = true
		out = append(out, validate.Check{Name: fmt.Sprintf("vf/pf%dvf%d", v.PF, v.VF), Verdict: validate.Fail,
			Detail: fmt.Sprintf("%s names VF %d of PF %d, which %s: nothing realizes it", v.Field, v.VF, v.PF, v.Why(gh))})
	}
	return out
}

// legacySkips are the checks asked for that a legacy group cannot run: it
// has no bond for the traffic and failover checks and no OVS bridge for
// the offload check. Each is a skip naming why (the run fails without
// --allow-skip). The RDMA check runs as for any group.
func (r *run) legacySkips(g *config.Group) []validate.Check {
	var out []validate.Check
	sk := func(name, format string, args ...any) {
		out = append(out, validate.Check{Name: name, Verdict: validate.Skip, Detail: fmt.Sprintf(format, args...)})
	}
	if r.o.Traffic || r.o.Failover {
		sk("traffic", "group %s is eswitch legacy: it has no bond to send traffic over and judge the slaves' shares (a bond of your own: vflag validate --bond NAME --traffic)", g.Name)
	}
	if r.o.Failover {
		sk("failover", "group %s is eswitch legacy: it has no bond whose slave could fail over (a bond of your own: vflag validate --bond NAME --failover)", g.Name)
	}
	if r.o.Offload || r.o.Traffic || r.o.Failover {
		sk(validate.OffloadName, "group %s is eswitch legacy: it has no OVS bridge whose datapath flows could be judged", g.Name)
	}
	return out
}

// trafficTarget is what the traffic, failover and RDMA checks run against:
// a group's bond with its validate: section, or a bare bond (--bond) with
// the options only.
type trafficTarget struct {
	bond    string
	v       config.ValidateConfig
	pcis    []string // PCI functions whose RDMA devices are candidates for -d
	netdevs []string // netdevs whose RDMA devices are candidates for -d (--bond)
	// probe, for a group, is the slow-path probe of its representors
	// during the traffic check's run (slowpath.go).
	probe *validate.SlowPathProbe
}

// bond runs every check of a bare bond.
func (r *run) bond(ctx context.Context, bond string) []validate.Check {
	roce := validate.RoCEExpect{Required: r.o.RDMA || r.o.RoCEMode != ""}
	if m := r.o.RoCEMode; m != "" {
		roce.Mode, _ = validate.ParseRoCEMode(m)
	}
	out := validate.BondStatic(r.h.Kernel, r.h.FS, bond, r.o.BondMode, roce)
	b, err := eswitch.ReadBond(r.h.FS, bond)
	if err != nil {
		return out // the bond check says why
	}
	tt := trafficTarget{bond: bond, netdevs: append([]string{bond}, b.Slaves...)}
	for _, s := range b.Slaves {
		tt.pcis = append(tt.pcis, validate.NetdevPCI(r.h.FS, s))
	}
	if r.o.Traffic || r.o.Failover {
		out = append(out, r.trafficChecks(ctx, tt)...)
	}
	if r.o.RDMA {
		out = append(out, r.rdmaCheck(ctx, tt))
	}
	return out
}

func (r *run) bridgeFacts(ctx context.Context, bridge string) (*validate.Bridge, error) {
	var bs ovs.BridgeStatus
	if r.bridge != nil && r.bridge.Bridge == bridge {
		bs = *r.bridge
	} else {
		c, err := r.h.OVS(ctx)
		if err != nil {
			return nil, err
		}
		if bs, err = c.Status(ctx, bridge); err != nil {
			return nil, err
		}
	}
	b := &validate.Bridge{Exists: bs.Exists, HWOffload: bs.HWOffload, Ports: map[string]validate.BridgePort{}}
	for _, p := range bs.Ports {
		b.Ports[p.Name] = validate.BridgePort{OFPort: p.OFPort, Error: p.Error, MTU: p.MTU, Type: p.Type, Options: p.Options,
			Tag: p.Tag, VLANMode: p.VLANMode, Trunks: p.Trunks}
	}
	return b, nil
}

// vfNetdevs are the host netdevs of the group's VFs configured with a host
// driver ("ls /sys/bus/pci/devices/$vf/net"); a VF without one (vfio-pci,
// unbound, not created) has none.
func (r *run) vfNetdevs(gh pipeline.Group) []string {
	var out []string
	for _, v := range gh.VFs {
		if v.Driver == "" || v.Driver == "vfio-pci" {
			continue
		}
		a, ok, err := r.pe.VFAddr(gh, pipeline.VFKey{PF: v.PF, VF: v.VF})
		if err != nil || !ok {
			continue
		}
		nd, err := r.h.PCI.Netdevs(a)
		if err == nil {
			out = append(out, nd...)
		}
	}
	return out
}

func (r *run) attachmentFacts(gh pipeline.Group) []validate.Attachment {
	var out []validate.Attachment
	if c, err := r.h.Virt(); err == nil && len(gh.Attachments) > 0 {
		c.Prefetch(gh.AttachmentDomains()...) // each domain read once, whatever its attachments
	}
	for _, at := range gh.Attachments {
		va := validate.Attachment{Domain: at.Domain, PF: at.PF, VF: at.VF}
		c, err := r.h.Virt()
		if err != nil {
			va.Err = err.Error()
			out = append(out, va)
			continue
		}
		d, err := c.Domain(at.Domain)
		if err != nil {
			va.Err = err.Error()
			out = append(out, va)
			continue
		}
		vfPCI, vfTeam, notHotplug, vfVLAN := "", "", false, 0
		for _, i := range d.Interfaces {
			if i.Owned && r.pe.VFIs(gh, at.PF, at.VF, i.PCI) {
				va.Present = true
				if i.InConfig || vfPCI == "" {
					vfPCI, vfTeam, notHotplug, vfVLAN = i.PCI, i.Standby, i.NotHotplug, i.VLAN
				}
			}
		}
		if at.Migratable {
			va.Teaming = r.teamingFacts(gh, at, d, vfPCI, vfTeam)
			va.Teaming.VFNotHotplug = notHotplug
			va.Teaming.VFVLAN = vfVLAN
		}
		out = append(out, va)
	}
	return out
}

// teamingFacts reads a migratable attachment's pair from the domain (d)
// and, while it runs, whether QEMU holds its VF at vfPCI (plugged) or not
// (hidden: QEMU realizes a failover primary only once the guest has
// negotiated the standby feature, so nothing opens its vfio group before).
func (r *run) teamingFacts(gh pipeline.Group, at config.Attachment, d libvirtx.DomainState, vfPCI, vfTeam string) *validate.Teaming {
	want := pipeline.AttachmentOf(gh.Group, at, vfPCI)
	mac := strings.ToLower(want.MAC)
	t := &validate.Teaming{MAC: mac, Alias: libvirtx.StandbyAlias(mac), Bridge: want.Standby.Bridge, VFTeam: vfTeam, Running: d.Active,
		WantVLAN: standbyWords(want.Standby), WantVFVLAN: want.VFVLAN}
	tag, mode, trunks := libvirtx.PortColumns(want.Standby)
	t.PortWant = validate.VLAN{Tag: tag, Mode: mode, Trunks: trunks}
	for _, sb := range d.Standbys {
		if sb.Alias != t.Alias || !sb.InConfig && !sb.InLive {
			continue
		}
		t.StandbyFound = true
		t.StandbyMAC, t.StandbyBridge, t.StandbyOVS, t.Virtio = strings.ToLower(sb.MAC), sb.Bridge, sb.OVS, sb.Virtio
		t.StandbyVLANOK = libvirtx.SameVLAN(sb.VLAN, want.Standby)
		t.StandbyVLAN = standbyWords(sb.VLAN)
		t.Port = sb.Target
	}
	if d.Active && vfPCI != "" {
		held, err := holders.Kernel{FS: r.h.FS, Links: r.h.Kernel}.Read([]string{vfPCI})
		if err != nil {
			t.PluggedErr = err.Error()
		}
		for _, h := range held[vfPCI] {
			t.Plugged = t.Plugged || h.PID != 0
		}
	}
	return t
}

// standbyWords says a standby's VLAN columns: "vlan 10", "vlan_mode trunk
// trunks 20,30"; "" for OVS's default port.
func standbyWords(s libvirtx.Standby) string {
	var w []string
	if s.VLANMode != "" {
		w = append(w, "vlan_mode "+s.VLANMode)
	}
	if s.VLAN != 0 {
		w = append(w, fmt.Sprintf("vlan %d", s.VLAN))
	}
	if len(s.Trunks) > 0 {
		ts := make([]string, len(s.Trunks))
		for i, v := range s.Trunks {
			ts[i] = fmt.Sprint(v)
		}
		w = append(w, "trunks "+strings.Join(ts, ","))
	}
	return strings.Join(w, " ")
}

func (r *run) duration(v config.ValidateConfig) time.Duration {
	if r.o.Duration > 0 {
		return r.o.Duration
	}
	if v.Duration > 0 {
		return v.Duration
	}
	return 10 * time.Second
}

// trafficChecks runs the traffic check and, when asked, the failover check.
func (r *run) trafficChecks(ctx context.Context, tt trafficTarget) []validate.Check {
	k, f := r.h.Kernel, r.h.FS
	b, err := eswitch.ReadBond(f, tt.bond)
	if err != nil {
		return []validate.Check{{Name: "traffic", Verdict: validate.Fail, Detail: fmt.Sprintf("bond %s: %v", tt.bond, err)}}
	}
	counters, closeCounters := r.counters()
	defer closeCounters()
	dur := r.duration(tt.v)
	minShare := r.o.MinShare
	if minShare == 0 {
		minShare = tt.v.MinShare
	}
	interval := r.o.Interval
	if interval <= 0 {
		interval = time.Second
	}
	tc := validate.TrafficConfig{
		Bond: tt.bond, Mode: b.Mode, Slaves: b.Slaves, Counters: counters,
		Load:     r.load(tt, b.Mode, dur),
		Probe:    tt.probe,
		Interval: interval, MinShare: minShare,
		Active: func() string {
			nb, err := eswitch.ReadBond(f, tt.bond)
			if err != nil {
				return ""
			}
			return nb.ActiveSlave
		},
		OnTick: r.o.OnTick,
	}
	var out []validate.Check
	c := validate.TrafficCheck(ctx, tc)
	r.ticksDone(tc.OnTick)
	out = append(out, c)
	if tt.probe != nil {
		out = append(out, tt.probe.Check())
	}
	if !r.o.Failover || ctx.Err() != nil {
		return out
	}
	victim := r.o.FailSlave
	if victim == "" {
		victim = tc.Active()
	}
	if victim == "" && len(b.Slaves) > 0 {
		victim = b.Slaves[0]
	}
	maxGap := r.o.MaxGap
	if maxGap == 0 {
		maxGap = tt.v.MaxGap
	}
	fc := validate.FailoverConfig{
		TrafficConfig: tc, Fail: victim, Manual: r.o.Manual, Prompt: r.o.Prompt, MaxGap: maxGap,
		SetLink: k.SetLinkUp,
		LinkUp: func(name string) (bool, error) {
			l, err := k.Link(name)
			if err != nil {
				return false, err
			}
			return l.AdminUp && l.OperState == "up" && l.Master == tt.bond, nil
		},
	}
	if fc.Interval > 100*time.Millisecond {
		fc.Interval = 100 * time.Millisecond // the gap is measured at sampling resolution
	}
	fc.OnTick = r.o.OnFailoverTick
	fc.Probe = nil // the probe judges the traffic check's run
	out = append(out, validate.FailoverCheck(ctx, fc, dur))
	r.ticksDone(fc.OnTick)
	return out
}

func (r *run) ticksDone(onTick func(validate.Tick)) {
	if onTick != nil && r.o.TicksDone != nil {
		r.o.TicksDone()
	}
}

// counters are the ethtool physical counters where the driver has them
// (real host), the generic sysfs counters otherwise.
func (r *run) counters() (validate.Counters, func()) {
	base := validate.SysfsCounters{FS: r.h.FS}
	if r.h.Simulated() {
		return base, func() {}
	}
	ec, err := validate.NewEthtoolCounters(base)
	if err != nil {
		r.o.Log.Debug("ethtool counters unavailable; using /sys/class/net statistics", "err", err)
		return base, func() {}
	}
	return ec, ec.Close
}

// load is iperf3 on a real host, simulated packets through the bond on the simulated one.
func (r *run) load(tt trafficTarget, mode string, dur time.Duration) validate.Load {
	var reps []string
	if tt.probe != nil && tt.probe.NA == "" {
		reps = tt.probe.Reps
	}
	if l, ok := r.h.TrafficLoad(tt.bond, reps, dur); ok {
		return l
	}
	peer := r.o.Peer
	if peer == "" {
		peer = tt.v.Peer
	}
	par := r.o.Parallel
	if par == 0 {
		par = tt.v.Parallel
	}
	if par == 0 {
		par = 4
		if mode == "active-backup" {
			par = 1
		}
	}
	return validate.Iperf3{Peer: peer, Server: r.o.Server || tt.v.Server, Duration: dur, Parallel: par}
}

func (r *run) rdmaCheck(ctx context.Context, tt trafficTarget) validate.Check {
	p := validate.RDMAPerf{
		Tool: r.o.RDMATool, Peer: r.o.RDMAPeer, Server: r.o.RDMAServer,
		Dev: r.o.RDMADev, Duration: r.duration(tt.v), Iters: r.o.RDMAIters,
	}
	if p.Tool == "" {
		p.Tool = tt.v.RDMATool
	}
	if p.Peer == "" {
		p.Peer = tt.v.RDMAPeer
	}
	if p.Dev == "" {
		if devs, err := validate.RDMADevicesFor(r.h.FS, tt.pcis, tt.netdevs); err == nil && len(devs) > 0 {
			p.Dev = devs[0].Name
		}
	}
	if p.Tool == "ibv_rc_pingpong" {
		// Verbs address the peer by GID: the one of the RoCE version to
		// test (--roce-mode or groups[].validate.roce_mode; v2 by default).
		mode := validate.RoCEv2
		if m := r.o.RoCEMode; m != "" {
			mode, _ = validate.ParseRoCEMode(m)
		} else if m := tt.v.RoCEMode; m != "" {
			mode, _ = validate.ParseRoCEMode(m)
		}
		if p.Dev == "" {
			p.GIDIndex, p.GIDWhy = -1, "no RDMA device behind the PFs or on the bond (--rdma-dev)"
		} else {
			p.GIDIndex, p.GIDWhy = validate.PickGID(r.h.FS, p.Dev, 1, mode)
		}
	}
	if r.h.Simulated() {
		name := "rdma/" + p.Tool
		if p.Tool == "" {
			name = "rdma/ib_send_bw"
		}
		return validate.Check{Name: name, Verdict: validate.Skip, Detail: "the simulated host carries no RDMA traffic"}
	}
	return validate.RDMACheck(ctx, p)
}

// RoCEDevices are the RDMA devices `vflag roce` looks at: those behind the
// PFs of cfg's groups (nil cfg: none), else every RDMA device of the host.
func RoCEDevices(cfg *config.Config, h *host.Host) ([]string, error) {
	var devs []string
	if cfg != nil {
		var pcis []string
		for gi := range cfg.Groups {
			gh, _ := pipeline.ResolveGroup(h.Kernel, h.FS, &cfg.Groups[gi])
			for _, pf := range gh.PFs {
				if pf.Addr != "" {
					pcis = append(pcis, string(pf.Addr))
				}
			}
		}
		ds, err := validate.RDMADevicesOf(h.FS, pcis)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			devs = append(devs, d.Name)
		}
	}
	if len(devs) == 0 {
		ds, err := validate.AllRDMADevices(h.FS)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			devs = append(devs, d.Name)
		}
	}
	return devs, nil
}
