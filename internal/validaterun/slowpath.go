package validaterun

import (
	"context"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/validate"
)

// slowPathProbe is the slow-path probe of group g's traffic run over the
// representors reps (listErr: why they could not be listed): ethtool -S
// where the driver has its software and vport counters (mlx5), the
// generic statistics else. n/a when the config wants no hw-offload (the
// traffic runs in software by design) or the bridge has the userspace
// datapath (tc offload does not apply).
func (r *run) slowPathProbe(g *config.Group, reps []string, listErr error) *validate.SlowPathProbe {
	c := validate.StatsRepCounters{Sysfs: validate.SysfsCounters{FS: r.h.FS}}
	if st, err := eswitch.AsEthtoolStats(r.h.Kernel); err == nil {
		c.Stats = st.Stats
	}
	p := &validate.SlowPathProbe{Reps: reps, Counters: c, ListErr: listErr}
	switch {
	case g.OVS.HWOffload != nil && !*g.OVS.HWOffload:
		p.NA = "hw-offload is not wanted by the config: the traffic crosses the representors in software by design"
	case g.OVS.DatapathType == "netdev":
		p.NA = "datapath_type netdev: the traffic runs in ovs-vswitchd's userspace datapath, and tc hardware offload applies to the kernel datapath (system) only"
	}
	if p.NA != "" {
		p.ListErr = nil
	}
	return p
}

// bridgeReps lists the ports of g's bridge other than the bond and the
// bridge's own: the group's representors (as the offload check takes them).
func (r *run) bridgeReps(ctx context.Context, g *config.Group) ([]string, error) {
	c, err := r.h.OVS(ctx)
	if err != nil {
		return nil, err
	}
	bs, err := c.Status(ctx, g.OVS.Bridge)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range bs.Ports {
		if p.Name != g.Bond.Name && p.Name != g.OVS.Bridge && p.Type == "" { // not a tunnel port
			out = append(out, p.Name)
		}
	}
	return out, nil
}
