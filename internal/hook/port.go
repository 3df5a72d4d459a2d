package hook

import (
	"context"
	"fmt"
	"time"

	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/ovs"
)

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
			return fmt.Errorf("port %s on %s failed: %s", rep, tg.bridge, report.OrDash(port.Error))
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
		if port != nil && want.Columns(*port) {
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
