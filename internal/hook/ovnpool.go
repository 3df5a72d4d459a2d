package hook

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/sriov"
)

// poolPorts finds the logical switch port of each VF the domain takes
// from a pool of a group with ovn: the entry of its OVN metadata
// (libvirtx.ParseOVNMetadata) with the MAC of the interface that took the
// VF. Everything it takes from the XML is checked here, before any change
// to the host: the metadata's problems, an interface without an entry
// (an unbound port has no network under OVN), a name that is no logical
// port's (config.ValidOVNPort), a logical port the config binds. Any of
// them refuses the start; the domain's other VFs need none of it.
func (p *preparer) poolPorts(cfg *config.Config, d libvirtx.HookDomain, tasks []libvirtx.HookTask) error {
	var problems []string
	var pool []libvirtx.HookTask
	for _, t := range tasks {
		m := p.vfs[sriov.Addr(t.Device.PCI)]
		if m.Group == nil || m.Group.OVN == nil || !m.inPool() {
			continue
		}
		if _, bound := p.configBinding(m); bound {
			continue // an attachment of this domain binds it (ovnBind)
		}
		pool = append(pool, t)
	}
	if len(pool) == 0 {
		return nil
	}
	problems = append(problems, d.OVNProblems...)
	p.poolLSP = map[sriov.Addr]poolPort{}
	for _, t := range pool {
		m := p.vfs[sriov.Addr(t.Device.PCI)]
		lsp, ok := d.OVNPorts[t.MAC]
		at := fmt.Sprintf("/domain/metadata/%s:ovn/interface[@mac='%s']/@ovn_port", libvirtx.OVNMetadataKey, t.MAC)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("interface %s takes %s from pool %s, whose group has ovn, and the domain's metadata names no logical switch port for it: add <interface mac=%q ovn_port=\"LSP\"/> to its <%s:ovn xmlns:%s=%q> element (see ovn.md)",
				t.MAC, m, m.Group.NetworkName(), t.MAC, libvirtx.OVNMetadataKey, libvirtx.OVNMetadataKey, libvirtx.OVNMetadataNamespace))
		case !config.ValidOVNPort(lsp):
			problems = append(problems, fmt.Sprintf("%s: %q is not a logical switch port name (1-255 characters of [A-Za-z0-9_.:@/+-])", at, lsp))
		case cfg != nil && cfg.OVNPortField(lsp) != "":
			problems = append(problems, fmt.Sprintf("%s: %q is bound by the config at %s: one logical port, one interface", at, lsp, cfg.OVNPortField(lsp)))
		default:
			p.poolLSP[sriov.Addr(t.Device.PCI)] = poolPort{lsp: lsp, mac: t.MAC}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("refusing to start domain %s: its OVN ports: %s", d.Name, strings.Join(problems, "; "))
	}
	return nil
}

// poolPort is a pool VF's logical port and the MAC of the interface that
// took it.
type poolPort struct{ lsp, mac string }

// configBinding is the binding the config gives m's VF while this domain
// holds it (an attachment with ovn_port); ok is false when there is none.
func (p *preparer) configBinding(m managedVF) (map[string]string, bool) {
	k, ok := m.key()
	if !ok || m.Group.OVN == nil {
		return nil, false
	}
	return pipeline.OVNBindFor(m.Group, k, p.domain, p.uuid)
}

// bindPool binds the representor rep of a pool VF the domain took to the
// logical port its metadata names (poolPorts): iface-id, attached-mac
// (the interface's MAC, which prepare gave the VF), vm-uuid and
// iface-status, through the domain's journal (release puts back what was
// there). A logical port another interface of the bridge is bound to
// already (another domain naming the same port) is refused: two
// interfaces with one iface-id on a chassis make ovn-controller flap
// between them.
func (p *preparer) bindPool(ctx context.Context, m managedVF, rep string) error {
	pp, ok := p.poolLSP[m.Addr]
	if !ok {
		return nil
	}
	lsp := pp.lsp
	c, err := p.h.OVS(ctx)
	if err != nil {
		return err
	}
	v, err := c.OVNChassis(ctx, m.Group.OVS.Bridge)
	if err != nil {
		return err
	}
	for _, i := range v.Interfaces {
		if i.Name != rep && i.ExternalIDs["iface-id"] == lsp {
			return fmt.Errorf("logical switch port %s is bound already, to interface %s on %s (vm-uuid %s): one logical port, one interface", lsp, i.Name, m.Group.OVS.Bridge, report.OrDash(i.ExternalIDs["vm-uuid"]))
		}
	}
	return p.do(ctx, p.e.OVNBindStep(p.h.OVSDB, rep, pipeline.OVNPoolBind(pp.lsp, pp.mac, p.uuid)))
}
