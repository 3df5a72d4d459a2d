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

// portTarget is a bridge a managed VF's representor belongs in.
type portTarget struct{ endpoint, owner, bridge string }

// portTargets are m's bridges: its group's, else those its journal entries
// name.
func (p *preparer) portTargets(m managedVF) []portTarget {
	if m.Group != nil {
		return []portTarget{{p.h.OVSDB, m.Group.Name, m.Group.OVS.Bridge}}
	}
	var targets []portTarget
	for _, b := range m.Bridges {
		targets = append(targets, portTarget{b.Endpoint, b.Owner, b.Bridge})
	}
	return targets
}

// portReads is the read of the representor's port on each target, started
// by startPortReads; wait returns them once they are all done.
type portReads struct {
	done     chan struct{}
	targets  []portTarget
	statuses []ovs.BridgeStatus
	errs     []error
}

func (r *portReads) wait() ([]portTarget, []ovs.BridgeStatus, []error) {
	<-r.done
	return r.targets, r.statuses, r.errs
}

// startPortReads reads, in the background, the port rep on each of m's
// bridges: prepare sets the VF's MAC meanwhile, whose journal waits on the
// disk.
func (p *preparer) startPortReads(ctx context.Context, m managedVF, rep string) *portReads {
	targets := p.portTargets(m)
	r := &portReads{done: make(chan struct{}), targets: targets, statuses: make([]ovs.BridgeStatus, len(targets)), errs: make([]error, len(targets))}
	go func() {
		defer close(r.done)
		for i, tg := range targets {
			r.statuses[i], r.errs[i] = p.portStatus(ctx, tg.endpoint, tg.bridge, rep)
		}
	}()
	return r
}

// ensurePort checks that the representor want.Name is a port of the
// group's bridge with the VF's VLAN columns (tag, vlan_mode, trunks) and
// the group's mtu_request, as the bridge step makes it, adding it (an
// ovs.port step) when it is missing. reads is the port as startPortReads
// read it.
func (p *preparer) ensurePort(ctx context.Context, m managedVF, want ovs.PortSpec, reads *portReads) error {
	rep := want.Name
	targets, statuses, errs := reads.wait()
	if len(targets) == 0 {
		return fmt.Errorf("representor %s: no bridge known (neither config nor journal names one)", rep)
	}
	for i, tg := range targets {
		bs, err := statuses[i], errs[i]
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
