package validaterun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/ovs"
)

// DefaultVswitchdLog is where Debian's and Red Hat's packages have
// ovs-vswitchd log.
const DefaultVswitchdLog = ovs.DefaultVswitchdLog

// offloadCheck gathers what validate.OffloadCheck judges: the datapath
// flows from ovs-vswitchd ("ovs-appctl dpctl/dump-flows -m" over its
// control socket), the offload settings from OVSDB, the tc state of the
// ports the flows come in on, the bond's shared block and the log's
// refusals.
func (r *run) offloadCheck(ctx context.Context, g *config.Group, gh pipeline.Group) validate.Check {
	start := time.Now()
	c := validate.OffloadCheck(r.offloadFacts(ctx, g, gh, nil))
	c.Duration = time.Since(start)
	return c
}

// offloadFacts reads what the offload check judges; keep, when set,
// selects the flows judged (the OVN traffic check's path).
func (r *run) offloadFacts(ctx context.Context, g *config.Group, gh pipeline.Group, keep func([]ovs.DPFlow) []ovs.DPFlow) validate.OffloadFacts {
	x := validate.OffloadFacts{Bond: g.Bond.Name, Ports: map[string]validate.PortTC{}, DatapathType: g.OVS.DatapathType,
		Tunnel: tunnelOffload(r.h.Kernel, g)}
	if g.OVN != nil {
		x.Tunnel = ovnTunnelOffload(r.h.Kernel, g, ReadOVN(ctx, r.pe.Config(), r.h, g))
	}
	if c, err := r.h.OVS(ctx); err != nil {
		x.FlowsErr = err
	} else if bs, err := c.Status(ctx, g.OVS.Bridge); err != nil {
		x.FlowsErr = err
	} else {
		x.HWOffload, x.TCPolicy = bs.HWOffload, bs.TCPolicy
		for _, p := range bs.Ports {
			if p.Name != g.Bond.Name && p.Name != g.OVS.Bridge && p.Type == "" { // not a tunnel port
				x.Reps = append(x.Reps, p.Name)
			}
		}
	}
	if x.FlowsErr == nil {
		x.Flows, x.FlowsErr = dumpFlows(ovs.RunDirOf(r.h.OVSDB))
	}
	if keep != nil {
		x.Flows = keep(x.Flows)
	}
	if sb, err := eswitch.ReadSharedBlock(r.h.Kernel, g.Bond.Name, netdevs(gh.PFs)); err == nil {
		x.Block = &sb
	}
	for _, f := range x.Flows {
		if _, seen := x.Ports[f.InPort]; f.Packets > 0 && !seen && f.InPort != "" {
			x.Ports[f.InPort] = r.portTC(f.InPort)
		}
	}
	logPath := r.o.VswitchdLog
	if logPath == "" {
		logPath = DefaultVswitchdLog
	}
	x.Refusals, x.FlowAPI, x.TCRefusals, x.LogErr = readVswitchdLog(logPath)
	return x
}

func netdevs(pfs []eswitch.PF) []string {
	out := make([]string, len(pfs))
	for i, pf := range pfs {
		out[i] = pf.Netdev
	}
	return out
}

// dumpFlows asks ovs-vswitchd for its datapath flows with their layer and
// offload state.
func dumpFlows(runDir string) ([]ovs.DPFlow, error) {
	sock, err := ovs.VswitchdSocket(runDir)
	if err != nil {
		return nil, err
	}
	out, err := ovs.Appctl(sock, "dpctl/dump-flows", []string{"-m"}, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return ovs.ParseDumpFlows(out)
}

// portTC reads one port's device: hw-tc-offload, its driver (sysfs), and
// where its ingress rules run (its shared block's for a bond member).
func (r *run) portTC(port string) validate.PortTC {
	var p validate.PortTC
	if err := eswitch.ValidIfName(port); err != nil {
		p.ReadErr = err.Error()
		return p
	}
	on, err := r.h.Kernel.Feature(port, "hw-tc-offload")
	switch {
	case err == nil:
		p.HWTC = &on
	case !errors.Is(err, eswitch.ErrNotSupported):
		p.ReadErr = err.Error()
		return p
	}
	if target, err := r.h.FS.Readlink(filepath.Join("/sys/class/net", port, "device/driver")); err == nil {
		p.Driver = filepath.Base(target)
	}
	tc, err := eswitch.AsTC(r.h.Kernel)
	if err != nil {
		return p
	}
	fs, err := tc.Filters(port)
	if err != nil {
		p.ReadErr = err.Error()
		return p
	}
	for _, f := range fs {
		p.Rules++
		if f.InHW {
			p.InHW++
		}
		if f.SkipHW {
			p.SkipHW++
		}
	}
	return p
}

// readVswitchdLog reads the last MiB of ovs-vswitchd's log once: its
// "failed to offload flow: ERR: PORT" lines (lib/dpif-netlink.c;
// EOPNOTSUPP and ENOSPC only at debug level), the message part only, what
// it last said of each port's tc flow API (ovs.FlowAPILine), and the
// distinct "flow_put: ..." refusals of its tc offload layer
// (lib/netdev-offload-tc.c, what it refuses before asking the kernel: at
// ERR level in Open vSwitch 3.1, at debug level in later ones); err says
// why it cannot be read.
func readVswitchdLog(path string) (refusals []string, flowAPI map[string]bool, tcRefusals []string, err error) {
	flowAPI = map[string]bool{}
	err = ovs.ScanLogTail(path, func(line string) {
		if _, msg, ok := strings.Cut(line, "failed to offload flow: "); ok {
			refusals = append(refusals, "failed to offload flow: "+msg)
		} else if _, msg, ok := strings.Cut(line, "|flow_put: "); ok && strings.Contains(line, "netdev_offload_tc") {
			if msg = "flow_put: " + msg; !slices.Contains(tcRefusals, msg) {
				tcRefusals = append(tcRefusals, msg)
			}
		} else if port, ok, said := ovs.FlowAPILine(line); said {
			flowAPI[port] = ok
		}
	})
	if err != nil {
		err = fmt.Errorf("ovs-vswitchd's log %s: %w", path, err)
	}
	return refusals, flowAPI, tcRefusals, err
}
