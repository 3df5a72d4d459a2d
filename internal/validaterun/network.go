package validaterun

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/ovs"
)

// networkChecks are the checks of a group's VF pool: the libvirt network
// exists as vflag's, is active and autostarted with the config's pool
// (libvirt/network/<name>); in a switchdev group each port a domain holds
// has its portgroup's VLAN on its VF's representor
// (libvirt/network/<name>/<pci>).
func (r *run) networkChecks(ctx context.Context, gh pipeline.Group) []validate.Check {
	if gh.Network == nil {
		return nil
	}
	name := "libvirt/network/" + gh.NetworkName()
	fail := func(format string, args ...any) []validate.Check {
		return []validate.Check{{Name: name, Verdict: validate.Fail, Detail: fmt.Sprintf(format, args...)}}
	}
	if why := pipeline.EmptyPool(gh); why != "" {
		return fail("network %s %s", gh.NetworkName(), why)
	}
	pcis := map[pipeline.VFKey]string{}
	for _, k := range gh.Pool() {
		a, ok, err := r.pe.VFAddr(gh, k)
		if err != nil {
			return fail("%v", err)
		}
		if ok {
			pcis[k] = string(a)
		}
	}
	spec, missing := pipeline.NetworkSpec(gh, pcis)
	if len(missing) > 0 {
		return fail("pool VF %s does not exist", missing[0])
	}
	c, err := r.h.Virt()
	if err != nil {
		return fail("%v", err)
	}
	st, err := c.Network(spec.Name)
	switch {
	case err != nil:
		return fail("%v", err)
	case !st.Exists:
		return fail("network %s does not exist (run vflag up)", spec.Name)
	case !st.Owned:
		return fail("network %s is not vflag's (no vflag metadata)", spec.Name)
	case !st.Active:
		return fail("network %s is not active: domains cannot take VFs from it", spec.Name)
	case !st.Autostart:
		return fail("network %s is not autostarted: after a reboot domains cannot take VFs from it", spec.Name)
	}
	want, have := slices.Clone(spec.PCIs), slices.Clone(st.PCIs)
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(want, have) {
		return fail("pool %s, want %s (run vflag up)", strings.Join(have, " "), strings.Join(want, " "))
	}
	out := []validate.Check{{Name: name, Verdict: validate.Pass,
		Detail: fmt.Sprintf("active, autostart, pool of %d VF(s), %d held by domains", len(have), len(st.Ports))}}
	if !gh.Switchdev() || len(st.Ports) == 0 {
		return out
	}
	byPCI := map[string]pipeline.VFKey{}
	for k, a := range pcis {
		byPCI[a] = k
	}
	oc, err := r.h.OVS(ctx)
	if err != nil {
		return append(out, validate.Check{Name: name + "/ports", Verdict: validate.Fail, Detail: err.Error()})
	}
	bs, err := oc.Status(ctx, gh.OVS.Bridge)
	if err != nil {
		return append(out, validate.Check{Name: name + "/ports", Verdict: validate.Fail, Detail: err.Error()})
	}
	for _, p := range st.Ports {
		pname := name + "/" + p.PCI
		k, ok := byPCI[p.PCI]
		if !ok {
			out = append(out, validate.Check{Name: pname, Verdict: validate.Fail, Detail: fmt.Sprintf("domain %s holds VF %s, which is not in the config's pool", p.Domain, p.PCI)})
			continue
		}
		reps, err := eswitch.RepresentorsOf(r.h.Kernel, r.h.FS, gh.PFs[k.PF], k.VF+1)
		rep := reps[k.VF]
		if err != nil || rep == "" {
			out = append(out, validate.Check{Name: pname, Verdict: validate.Fail, Detail: fmt.Sprintf("VF %s (domain %s) has no representor", p.PCI, p.Domain)})
			continue
		}
		w := pipeline.PoolPortSpec(gh.Group, k, rep, p.Portgroup)
		var port *ovs.PortStatus
		for i := range bs.Ports {
			if bs.Ports[i].Name == rep {
				port = &bs.Ports[i]
			}
		}
		trunks := slices.Clone(w.Trunks)
		slices.Sort(trunks)
		switch {
		case port == nil:
			out = append(out, validate.Check{Name: pname, Verdict: validate.Fail, Detail: fmt.Sprintf("representor %s of domain %s's VF is no port of %s", rep, p.Domain, gh.OVS.Bridge)})
		case port.Tag != w.Tag || port.VLANMode != w.VLANMode || !slices.Equal(port.Trunks, trunks):
			out = append(out, validate.Check{Name: pname, Verdict: validate.Fail, Detail: fmt.Sprintf("representor %s of domain %s (portgroup %s): tag %d vlan_mode %q trunks %v, want tag %d vlan_mode %q trunks %v",
				rep, p.Domain, report.OrDash(p.Portgroup), port.Tag, port.VLANMode, port.Trunks, w.Tag, w.VLANMode, trunks)})
		default:
			out = append(out, validate.Check{Name: pname, Verdict: validate.Pass, Detail: fmt.Sprintf("representor %s of domain %s (portgroup %s): tag %d vlan_mode %q trunks %v",
				rep, p.Domain, report.OrDash(p.Portgroup), w.Tag, w.VLANMode, trunks)})
		}
	}
	return out
}
