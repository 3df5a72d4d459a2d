package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/internal/validaterun"
)

func (a *app) validateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a provisioned group: static checks, and with flags traffic, failover and RDMA (exit 0 only if none failed or skipped)",
		Long: `validate runs, per group, the static checks (eswitch modes, bond and slaves,
hardware LAG, representors in the bridge with an ofport, hw-offload,
attachments, RDMA devices, RoCE mode, GID table) and, when asked, the
traffic check (--traffic: iperf3 while sampling both slaves' counters), the
failover check (--failover: one slave down during traffic, or --manual) and
the RDMA check (--rdma: ib_send_bw -R or rping).

Each check is pass, fail, skip or n/a. skip: the check applies to the
group's config, or was asked for by a flag, and could not run here (the
detail says why; e.g. --traffic on a legacy group, which has no bond).
n/a: the config does not call for it (no RoCE configured and no RDMA
device, hw_offload: false, a datapath_type netdev bridge for the offload
check). It exits 0 when no check failed or was skipped (with --allow-skip:
when none failed), 1 otherwise; n/a never fails the run.
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
	f.Bool("allow-skip", false, "exit 0 when no check failed, even if some were skipped (e.g. LAG unverified, --traffic on a legacy group)")
	f.Bool("traffic", false, "run the traffic check (iperf3), then the offload check")
	f.Bool("offload", false, "run the offload check: where each datapath flow of the group runs (hardware, tc software, OVS kernel datapath) and why not in hardware")
	f.String("ovs-log", "", "ovs-vswitchd's log, read by the offload check for its \"failed to offload flow\" lines (default: the config's ovs_log, else "+validaterun.DefaultVswitchdLog+")")
	f.Bool("failover", false, "run the failover check (implies traffic): one slave down during traffic, then restored")
	f.Bool("manual", false, "failover: ask the operator to pull and replug the cable instead of setting the slave down")
	f.String("fail-slave", "", "failover: the slave to fail (default: the active slave, or the first)")
	f.String("peer", "", "iperf3 server address (default groups[].validate.peer)")
	f.Bool("server", false, "be the iperf3 server (one test) instead of the client")
	f.String("ovn-from", "", "OVN traffic check: the group's logical port the probe is sent from (default groups[].validate.ovn_from, else the group's first ovn_port)")
	f.String("ovn-to", "", "OVN traffic check: the logical switch port it is sent to, on this chassis or another (default groups[].validate.ovn_to)")
	f.Duration("duration", 0, "traffic duration per check (default groups[].validate.duration or 10s)")
	f.Int("parallel", 0, "iperf3 parallel streams (default 4 in active-active modes, 1 in active-backup)")
	f.Duration("interval", time.Second, "counter sampling interval")
	f.Float64("min-share", 0, "share of the packets a carrying slave must reach (default 0.05)")
	f.Duration("max-gap", 0, "failover: longest tolerated pause of the traffic (default: only reported)")
	f.Bool("rdma", false, "run the RDMA check (ib_send_bw -R, or rping)")
	f.String("rdma-peer", "", "RDMA server address over the bond (default groups[].validate.rdma_peer)")
	f.Bool("rdma-server", false, "be the ib_send_bw/rping server")
	f.String("rdma-tool", "", "ib_send_bw (default), rping, ucmatose (RDMA CM connect and transfer) or ibv_rc_pingpong (verbs over the GID of the RoCE mode: --roce-mode, default v2)")
	f.String("rdma-dev", "", "RDMA device for ib_send_bw -d (default: the device behind the PFs, or on the --bond)")
	f.Int("rdma-iters", 0, "ib_send_bw: send this many messages (-n) instead of running for --duration (-D); -D's timing is unreliable under emulation")
	f.String("roce-mode", "", "expected default RoCE mode: v1 or v2 (default groups[].validate.roce_mode)")
	for _, name := range []string{"group", "bond", "bond-mode", "rdma-iters", "junit", "allow-skip", "traffic", "offload", "ovs-log", "failover", "manual", "fail-slave", "peer", "server", "ovn-from", "ovn-to",
		"duration", "parallel", "interval", "min-share", "max-gap", "rdma", "rdma-peer", "rdma-server", "rdma-tool", "rdma-dev", "roce-mode"} {
		_ = a.v.BindPFlag("validate-"+name, f.Lookup(name))
	}
	return cmd
}

func (a *app) vget(name string) string { return a.v.GetString("validate-" + name) }

func (a *app) runValidate(ctx context.Context, cmd *cobra.Command) error {
	o := validaterun.Options{
		Group: a.vget("group"), Bond: a.vget("bond"), BondMode: a.vget("bond-mode"), AllowSkip: a.v.GetBool("validate-allow-skip"),
		RoCEMode: a.vget("roce-mode"), Traffic: a.v.GetBool("validate-traffic"), Failover: a.v.GetBool("validate-failover"),
		Offload: a.v.GetBool("validate-offload"), VswitchdLog: a.vget("ovs-log"),
		Manual: a.v.GetBool("validate-manual"), FailSlave: a.vget("fail-slave"), Peer: a.vget("peer"),
		OVNFrom: a.vget("ovn-from"), OVNTo: a.vget("ovn-to"),
		Server: a.v.GetBool("validate-server"), Duration: a.v.GetDuration("validate-duration"),
		Parallel: a.v.GetInt("validate-parallel"), Interval: a.v.GetDuration("validate-interval"),
		MinShare: a.v.GetFloat64("validate-min-share"), MaxGap: a.v.GetDuration("validate-max-gap"),
		RDMA: a.v.GetBool("validate-rdma"), RDMAPeer: a.vget("rdma-peer"), RDMAServer: a.v.GetBool("validate-rdma-server"),
		RDMATool: a.vget("rdma-tool"), RDMADev: a.vget("rdma-dev"), RDMAIters: a.v.GetInt("validate-rdma-iters"),
		Prompt: a.stderr, Log: a.log, StateDir: a.stateDir(),
	}
	if err := o.CheckFlags(); err != nil {
		return err
	}
	cfg, err := a.loadConfig(o.Bond != "")
	if err != nil {
		return err
	}
	if err := o.CheckConfig(cfg); err != nil {
		return err
	}
	if o.VswitchdLog == "" && cfg != nil {
		o.VswitchdLog = cfg.OVSLog // "" too: validaterun's default
	}
	a.warm = warmFor(cfg, true)
	h, err := a.openHost(cfg, cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	if isTerminal(a.stderr) {
		o.OnTick, o.OnFailoverTick = validate.LiveView(a.stderr), validate.Throttle(validate.LiveView(a.stderr), time.Second)
		o.TicksDone = func() { fmt.Fprintln(a.stderr) }
	}
	rep := validaterun.Run(ctx, cfg, h, o)
	if path := a.vget("junit"); path != "" {
		if err := rep.WriteJUnitFile(path); err != nil {
			return fmt.Errorf("--junit %s: %w", path, err)
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
