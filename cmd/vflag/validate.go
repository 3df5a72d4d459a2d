package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/atomicfile"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/internal/validate"
)

func (a *app) validateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a provisioned group: static checks, and with flags traffic, failover and RDMA (exit 0 only if all pass)",
		Long: `validate runs, per group, the static checks (eswitch modes, bond and slaves,
hardware LAG, representors in the bridge with an ofport, hw-offload,
attachments, RDMA devices, RoCE mode, GID table) and, when asked, the
traffic check (--traffic: iperf3 while sampling both slaves' counters), the
failover check (--failover: one slave down during traffic, or --manual) and
the RDMA check (--rdma: ib_send_bw -R or rping). It exits 0 only if every
check passed (with --allow-skip: if none failed), 1 otherwise.
With --sim the traffic is simulated: packets pushed through the simulated bond.

--bond NAME validates one bond instead of the config's groups, and needs no
config: a bond whose ports have no devlink/switchdev (plain NICs, veths), or
a VF-LAG host's bond checked on its own. Its static checks are the bond
(mode: --bond-mode, any when not given; at least 2 slaves), each slave (up,
with link) and the RDMA devices on the bond or a slave (under a slave's PCI
function, a GID on the bond or a slave, or a software device such as rxe
whose parent is one): RoCE mode and GID table. --traffic, --failover and
--rdma work as for a group, taking their settings from the flags.

  vflag validate --bond bond0 --bond-mode active-backup --failover --peer 192.0.2.10
  vflag validate --bond bond0 --rdma --rdma-peer 192.0.2.10 --roce-mode v2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGHUP)
			defer stop()
			return a.runValidate(ctx, cmd)
		},
	}
	f := cmd.Flags()
	f.String("group", "", "validate only this group (default: every group)")
	f.String("bond", "", "validate this bond alone instead of the config's groups (no config needed; see above)")
	f.String("bond-mode", "", "with --bond: the bond mode it must have (default: any)")
	f.String("junit", "", "also write the verdicts as JUnit XML to this file")
	f.Bool("allow-skip", false, "exit 0 when no check failed, even if some were skipped (e.g. LAG unverified)")
	f.Bool("traffic", false, "run the traffic check (iperf3)")
	f.Bool("failover", false, "run the failover check (implies traffic): one slave down during traffic, then restored")
	f.Bool("manual", false, "failover: ask the operator to pull and replug the cable instead of setting the slave down")
	f.String("fail-slave", "", "failover: the slave to fail (default: the active slave, or the first)")
	f.String("peer", "", "iperf3 server address (default groups[].validate.peer)")
	f.Bool("server", false, "be the iperf3 server (one test) instead of the client")
	f.Duration("duration", 0, "traffic duration per check (default groups[].validate.duration or 10s)")
	f.Int("parallel", 0, "iperf3 parallel streams (default 4 in active-active modes, 1 in active-backup)")
	f.Duration("interval", time.Second, "counter sampling interval")
	f.Float64("min-share", 0, "share of the packets a carrying slave must reach (default 0.05)")
	f.Duration("max-gap", 0, "failover: longest tolerated pause of the traffic (default: only reported)")
	f.Bool("rdma", false, "run the RDMA check (ib_send_bw -R, or rping)")
	f.String("rdma-peer", "", "RDMA server address over the bond (default groups[].validate.rdma_peer)")
	f.Bool("rdma-server", false, "be the ib_send_bw/rping server")
	f.String("rdma-tool", "", "ib_send_bw (default) or rping")
	f.String("rdma-dev", "", "RDMA device for ib_send_bw -d (default: the device behind the PFs, or on the --bond)")
	f.Int("rdma-iters", 0, "ib_send_bw: send this many messages (-n) instead of running for --duration (-D); -D's timing is unreliable under emulation")
	f.String("roce-mode", "", "expected default RoCE mode: v1 or v2 (default groups[].validate.roce_mode)")
	for _, name := range []string{"group", "bond", "bond-mode", "rdma-iters", "junit", "allow-skip", "traffic", "failover", "manual", "fail-slave", "peer", "server",
		"duration", "parallel", "interval", "min-share", "max-gap", "rdma", "rdma-peer", "rdma-server", "rdma-tool", "rdma-dev", "roce-mode"} {
		_ = a.v.BindPFlag("validate-"+name, f.Lookup(name))
	}
	return cmd
}

func (a *app) vget(name string) string { return a.v.GetString("validate-" + name) }

// kernelBondModes are the kernel's bonding modes (/sys/class/net/<bond>/bonding/mode).
var kernelBondModes = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}

func (a *app) runValidate(ctx context.Context, cmd *cobra.Command) error {
	bond := a.vget("bond")
	if bond != "" {
		if a.vget("group") != "" {
			return fmt.Errorf("--bond and --group exclude each other")
		}
		if err := eswitch.ValidIfName(bond); err != nil {
			return fmt.Errorf("--bond: %w", err)
		}
		if m := a.vget("bond-mode"); m != "" && !slices.Contains(kernelBondModes, m) {
			return fmt.Errorf("--bond-mode: %q is not a bonding mode (%s)", m, strings.Join(kernelBondModes, ", "))
		}
	} else if a.vget("bond-mode") != "" {
		return fmt.Errorf("--bond-mode needs --bond")
	}
	if n := a.v.GetInt("validate-rdma-iters"); n < 0 {
		return fmt.Errorf("--rdma-iters: %d must be positive", n)
	}
	cfg, err := a.loadConfig(bond != "")
	if err != nil {
		return err
	}
	if g := a.vget("group"); g != "" {
		found := false
		for _, x := range cfg.Groups {
			found = found || x.Name == g
		}
		if !found {
			return fmt.Errorf("--group: %q is not a group of the config", g)
		}
	}
	if m := a.vget("roce-mode"); m != "" {
		if _, err := validate.ParseRoCEMode(m); err != nil {
			return fmt.Errorf("--roce-mode: %w", err)
		}
	}
	if s := a.v.GetFloat64("validate-min-share"); s < 0 || s >= 0.5 {
		return fmt.Errorf("--min-share: %v must be in [0, 0.5)", s)
	}
	if a.v.GetDuration("validate-interval") <= 0 {
		return fmt.Errorf("--interval: %s must be positive", a.v.GetDuration("validate-interval"))
	}
	e, closeEnv, err := a.openEnv(cfg, cfg)
	if err != nil {
		return err
	}
	defer closeEnv()

	rep := &validate.Report{AllowSkip: a.v.GetBool("validate-allow-skip")}
	var groups []config.Group
	if bond != "" {
		rep.Groups = append(rep.Groups, validate.GroupReport{Group: bond, Kind: "bond", Checks: a.validateBond(ctx, e, bond)})
	} else {
		groups = cfg.Groups
	}
	for gi := range groups {
		g := &groups[gi]
		if sel := a.vget("group"); sel != "" && sel != g.Name {
			continue
		}
		gr := validate.GroupReport{Group: g.Name}
		gr.Checks = a.validateGroup(ctx, e, g)
		rep.Groups = append(rep.Groups, gr)
	}
	rep.Tally()
	if path := a.vget("junit"); path != "" {
		if err := writeJUnit(path, rep); err != nil {
			return err
		}
	}
	if a.v.GetString("output") == "json" {
		if err := rep.WriteJSON(a.stdout); err != nil {
			return err
		}
	} else {
		rep.WriteText(a.stdout)
	}
	if !rep.OK {
		return exitError{code: 1}
	}
	return nil
}

func writeJUnit(path string, rep *validate.Report) error {
	var b bytes.Buffer
	if err := rep.WriteJUnit(&b); err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	return nil
}

// validateGroup runs every check of one group.
func (a *app) validateGroup(ctx context.Context, e *env, g *config.Group) []validate.Check {
	var out []validate.Check
	var pfs []eswitch.PF
	for i, ref := range g.PFs {
		pf, err := eswitch.ResolvePF(e.k, e.fs, ref)
		if err != nil {
			out = append(out, validate.Check{Name: fmt.Sprintf("pf/%d", i), Verdict: validate.Fail, Detail: err.Error()})
			continue
		}
		pfs = append(pfs, pf)
	}
	if len(pfs) != len(g.PFs) {
		return out
	}
	gh := pipeline.Group{Group: g, PFs: pfs, Owners: pipeline.Owners(pfs)}
	t := validate.Target{
		Group: g.Name, Switchdev: g.Switchdev(), PFs: pfs, Owners: gh.Owners, NumVFs: g.NumVFs,
		BondName: g.Bond.Name, BondMode: g.Bond.Mode, Bridge: g.OVS.Bridge, HWOffload: *g.OVS.HWOffload,
		DatapathType: g.OVS.DatapathType,
		RoCE:         validate.RoCEExpect{Required: g.Validate.RoCE},
	}
	mode := a.vget("roce-mode")
	if mode == "" {
		mode = g.Validate.RoCEMode
	}
	if mode != "" {
		t.RoCE.Mode, _ = validate.ParseRoCEMode(mode)
	}
	var facts validate.Facts
	if g.Switchdev() {
		facts.Bridge, facts.BridgeErr = e.bridgeFacts(ctx, g.OVS.Bridge)
	}
	facts.Attachments = e.attachmentFacts(gh)
	out = append(out, validate.Static(e.k, e.fs, t, facts)...)

	var pcis []string
	for _, pf := range gh.PFs {
		pcis = append(pcis, string(pf.Addr))
	}
	tt := trafficTarget{bond: g.Bond.Name, v: g.Validate, pcis: pcis}
	failover := a.v.GetBool("validate-failover")
	if (a.v.GetBool("validate-traffic") || failover) && g.Switchdev() {
		out = append(out, a.trafficChecks(ctx, e, tt, failover)...)
	}
	if a.v.GetBool("validate-rdma") {
		out = append(out, a.rdmaCheck(ctx, e, tt))
	}
	return out
}

// trafficTarget is what the traffic, failover and RDMA checks run against:
// a group's bond with its validate: section, or a bare bond (--bond) with
// the flags only.
type trafficTarget struct {
	bond    string
	v       config.ValidateConfig
	pcis    []string // PCI functions whose RDMA devices are candidates for -d
	netdevs []string // netdevs whose RDMA devices are candidates for -d (--bond)
}

// validateBond runs every check of a bare bond (--bond).
func (a *app) validateBond(ctx context.Context, e *env, bond string) []validate.Check {
	roce := validate.RoCEExpect{Required: a.v.GetBool("validate-rdma") || a.vget("roce-mode") != ""}
	if m := a.vget("roce-mode"); m != "" {
		roce.Mode, _ = validate.ParseRoCEMode(m)
	}
	out := validate.BondStatic(e.k, e.fs, bond, a.vget("bond-mode"), roce)
	b, err := eswitch.ReadBond(e.fs, bond)
	if err != nil {
		return out // the bond check says why
	}
	tt := trafficTarget{bond: bond, netdevs: append([]string{bond}, b.Slaves...)}
	for _, s := range b.Slaves {
		tt.pcis = append(tt.pcis, validate.NetdevPCI(e.fs, s))
	}
	failover := a.v.GetBool("validate-failover")
	if a.v.GetBool("validate-traffic") || failover {
		out = append(out, a.trafficChecks(ctx, e, tt, failover)...)
	}
	if a.v.GetBool("validate-rdma") {
		out = append(out, a.rdmaCheck(ctx, e, tt))
	}
	return out
}

func (e *env) bridgeFacts(ctx context.Context, bridge string) (*validate.Bridge, error) {
	c, err := e.ovsClient(ctx)
	if err != nil {
		return nil, err
	}
	bs, err := c.Status(ctx, bridge)
	if err != nil {
		return nil, err
	}
	b := &validate.Bridge{Exists: bs.Exists, HWOffload: bs.HWOffload, Ports: map[string]validate.BridgePort{}}
	for _, p := range bs.Ports {
		b.Ports[p.Name] = validate.BridgePort{OFPort: p.OFPort, Error: p.Error}
	}
	return b, nil
}

func (e *env) attachmentFacts(gh pipeline.Group) []validate.Attachment {
	var out []validate.Attachment
	for _, at := range gh.Attachments {
		va := validate.Attachment{Domain: at.Domain, PF: at.PF, VF: at.VF}
		c, err := e.virtConn()
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
		for _, i := range d.Interfaces {
			va.Present = va.Present || i.Owned && e.VFIs(gh, at.PF, at.VF, i.PCI)
		}
		out = append(out, va)
	}
	return out
}

func (a *app) duration(v config.ValidateConfig) time.Duration {
	if d := a.v.GetDuration("validate-duration"); d > 0 {
		return d
	}
	if v.Duration > 0 {
		return v.Duration
	}
	return 10 * time.Second
}

// trafficChecks runs the traffic check and, when asked, the failover check.
func (a *app) trafficChecks(ctx context.Context, e *env, tt trafficTarget, failover bool) []validate.Check {
	b, err := eswitch.ReadBond(e.fs, tt.bond)
	if err != nil {
		return []validate.Check{{Name: "traffic", Verdict: validate.Fail, Detail: fmt.Sprintf("bond %s: %v", tt.bond, err)}}
	}
	counters, closeCounters := a.counters(e.fs)
	defer closeCounters()
	dur := a.duration(tt.v)
	minShare := a.v.GetFloat64("validate-min-share")
	if minShare == 0 {
		minShare = tt.v.MinShare
	}
	tc := validate.TrafficConfig{
		Bond: tt.bond, Mode: b.Mode, Slaves: b.Slaves, Counters: counters,
		Load:     a.load(e, tt, b.Mode, dur),
		Interval: a.v.GetDuration("validate-interval"), MinShare: minShare,
		Active: func() string {
			nb, err := eswitch.ReadBond(e.fs, tt.bond)
			if err != nil {
				return ""
			}
			return nb.ActiveSlave
		},
	}
	if isTerminal(a.stderr) {
		tc.OnTick = liveView(a.stderr)
	}
	var out []validate.Check
	c := validate.TrafficCheck(ctx, tc)
	if tc.OnTick != nil {
		fmt.Fprintln(a.stderr)
	}
	out = append(out, c)
	if !failover || ctx.Err() != nil {
		return out
	}
	victim := a.vget("fail-slave")
	if victim == "" {
		victim = tc.Active()
	}
	if victim == "" && len(b.Slaves) > 0 {
		victim = b.Slaves[0]
	}
	maxGap := a.v.GetDuration("validate-max-gap")
	if maxGap == 0 {
		maxGap = tt.v.MaxGap
	}
	fc := validate.FailoverConfig{
		TrafficConfig: tc, Fail: victim, Manual: a.v.GetBool("validate-manual"), Prompt: a.stderr, MaxGap: maxGap,
		SetLink: e.k.SetLinkUp,
		LinkUp: func(name string) (bool, error) {
			l, err := e.k.Link(name)
			if err != nil {
				return false, err
			}
			return l.AdminUp && l.OperState == "up" && l.Master == tt.bond, nil
		},
	}
	if fc.Interval > 100*time.Millisecond {
		fc.Interval = 100 * time.Millisecond // the gap is measured at sampling resolution
	}
	if isTerminal(a.stderr) {
		fc.OnTick = throttle(liveView(a.stderr), time.Second)
	}
	out = append(out, validate.FailoverCheck(ctx, fc, dur))
	if fc.OnTick != nil {
		fmt.Fprintln(a.stderr)
	}
	return out
}

// counters are the ethtool physical counters where the driver has them
// (real host), the generic sysfs counters otherwise.
func (a *app) counters(f sysfs.FS) (validate.Counters, func()) {
	base := validate.SysfsCounters{FS: f}
	if a.v.GetString("sim") != "" {
		return base, func() {}
	}
	ec, err := validate.NewEthtoolCounters(base)
	if err != nil {
		a.log.Debug("ethtool counters unavailable; using /sys/class/net statistics", "err", err)
		return base, func() {}
	}
	return ec, ec.Close
}

// load is iperf3 on a real host, simulated packets through the bond with --sim.
func (a *app) load(e *env, tt trafficTarget, mode string, dur time.Duration) validate.Load {
	if h, ok := e.k.(*sim.Host); ok {
		return simLoad{h: h, bond: tt.bond, dur: dur}
	}
	peer := a.vget("peer")
	if peer == "" {
		peer = tt.v.Peer
	}
	par := a.v.GetInt("validate-parallel")
	if par == 0 {
		par = tt.v.Parallel
	}
	if par == 0 {
		par = 4
		if mode == "active-backup" {
			par = 1
		}
	}
	return validate.Iperf3{Peer: peer, Server: a.v.GetBool("validate-server") || tt.v.Server, Duration: dur, Parallel: par}
}

// simLoad pushes packets through a simulated bond every 20 ms.
type simLoad struct {
	h    *sim.Host
	bond string
	dur  time.Duration
}

func (l simLoad) Run(ctx context.Context) (validate.LoadResult, error) {
	const tick, pkts, size = 20 * time.Millisecond, 500, 1500
	end := time.Now().Add(l.dur)
	t := time.NewTicker(tick)
	defer t.Stop()
	var sent, carried uint64
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return validate.LoadResult{Summary: fmt.Sprintf("simulated: %d of %d packets carried", carried, sent)}, nil
		case <-t.C:
		}
		c, err := l.h.Traffic(l.bond, pkts, size)
		if err != nil {
			return validate.LoadResult{}, fmt.Errorf("simulated traffic: %w", err)
		}
		sent += pkts
		carried += c
	}
	return validate.LoadResult{Summary: fmt.Sprintf("simulated: %d of %d packets carried", carried, sent)}, nil
}

// liveView prints one line per tick: each slave's packet and bit rate.
func liveView(w io.Writer) func(validate.Tick) {
	return func(t validate.Tick) {
		names := make([]string, 0, len(t.Rates))
		for n := range t.Rates {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			r := t.Rates[n]
			parts = append(parts, fmt.Sprintf("%s %8.0f pkt/s %10s", n, r.PacketsPerSec, formatRate(r.BitsPerSec)))
		}
		fmt.Fprintf(w, "\r\033[K[%5.1fs] %s", t.At.Seconds(), strings.Join(parts, " | "))
	}
}

func formatRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gb/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2f Mb/s", bps/1e6)
	}
	return fmt.Sprintf("%.1f kb/s", bps/1e3)
}

// throttle calls fn at most once per period (the live view of a finely
// sampled failover check).
func throttle(fn func(validate.Tick), period time.Duration) func(validate.Tick) {
	var last time.Duration = -period
	return func(t validate.Tick) {
		if t.At-last >= period {
			last = t.At
			fn(t)
		}
	}
}

func (a *app) rdmaCheck(ctx context.Context, e *env, tt trafficTarget) validate.Check {
	r := validate.RDMAPerf{
		Tool: a.vget("rdma-tool"), Peer: a.vget("rdma-peer"), Server: a.v.GetBool("validate-rdma-server"),
		Dev: a.vget("rdma-dev"), Duration: a.duration(tt.v), Iters: a.v.GetInt("validate-rdma-iters"),
	}
	if r.Tool == "" {
		r.Tool = tt.v.RDMATool
	}
	if r.Peer == "" {
		r.Peer = tt.v.RDMAPeer
	}
	if r.Dev == "" {
		if devs, err := validate.RDMADevicesFor(e.fs, tt.pcis, tt.netdevs); err == nil && len(devs) > 0 {
			r.Dev = devs[0].Name
		}
	}
	if _, ok := e.k.(*sim.Host); ok {
		name := "rdma/" + r.Tool
		if r.Tool == "" {
			name = "rdma/ib_send_bw"
		}
		return validate.Check{Name: name, Verdict: validate.Skip, Detail: "the simulated host carries no RDMA traffic"}
	}
	return validate.RDMACheck(ctx, r)
}
