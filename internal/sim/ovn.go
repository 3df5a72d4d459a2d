package sim

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/vflag/vflag/ovs"
)

// OVNController models what ovn-controller does that vflag observes on
// the chassis's Open vSwitch database, for the simulated host (make
// simhost, the tests): no Southbound, no flows, no tunnels, only the
// binding's outcome on the Interface.
//
//   - It acts once the chassis is configured: Open_vSwitch external_ids
//     system-id, ovn-remote and ovn-encap-ip set (ovn-controller neither
//     connects nor registers the chassis without them).
//   - An Interface of the integration bridge (external_ids:ovn-bridge,
//     br-int by default) whose iface-id names a logical port the
//     Southbound knows (LSPs) gets external_ids:ovn-installed=true, but
//     only InstallDelay after the controller first saw that binding:
//     ovn-controller sets it once the port's flows are in, never at the
//     binding's write.
//   - An Interface of an unknown logical port never gets it (ovn-controller
//     finds no Port_Binding to claim).
//   - When the iface-id goes, changes, or names a port the Southbound no
//     longer knows, ovn-installed is removed (the binding is released);
//     a new binding is installed after InstallDelay again.
//
// Ports on other bridges, and every other key, are never touched.
type OVNController struct {
	// OVSDB is the chassis's Open vSwitch database endpoint.
	OVSDB string
	// InstallDelay is how long after the first sight of a binding the
	// port's flows are "in" (ovn-installed set); 0: the next round.
	InstallDelay time.Duration
	// Poll is the interval of the rounds (default 20ms).
	Poll time.Duration

	mu   sync.Mutex
	lsps []string
	seen map[string]sightedBinding // interface -> the binding first seen, when
}

type sightedBinding struct {
	lsp string
	at  time.Time
}

// NewOVNController is a controller for the database at endpoint whose
// Southbound knows the logical ports lsps.
func NewOVNController(endpoint string, lsps ...string) *OVNController {
	return &OVNController{OVSDB: endpoint, lsps: slices.Clone(lsps)}
}

// SetLSPs replaces the logical ports the Southbound knows (the operator
// added or deleted one in the Northbound).
func (o *OVNController) SetLSPs(lsps ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lsps = slices.Clone(lsps)
}

func (o *OVNController) known(lsp string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.lsps, lsp)
}

// Run runs rounds until ctx ends; an error of a round (the database
// restarting) is retried at the next.
func (o *OVNController) Run(ctx context.Context) error {
	poll := o.Poll
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	var c *ovs.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		if c == nil {
			var err error
			if c, err = ovs.Connect(ctx, o.OVSDB); err != nil {
				c = nil
			}
		}
		if c != nil {
			if err := o.Round(ctx, c, time.Now()); err != nil && ctx.Err() == nil {
				c.Close()
				c = nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// Round is one pass over the integration bridge's interfaces at time now.
func (o *OVNController) Round(ctx context.Context, c *ovs.Client, now time.Time) error {
	root, err := c.ExternalIDs(ctx)
	if err != nil {
		return err
	}
	if root["system-id"] == "" || root["ovn-remote"] == "" || root["ovn-encap-ip"] == "" {
		return nil
	}
	bridge := root["ovn-bridge"]
	if bridge == "" {
		bridge = "br-int"
	}
	st, err := c.Status(ctx, bridge)
	if err != nil || !st.Exists {
		return err
	}
	names := make([]string, 0, len(st.Ports))
	for _, p := range st.Ports {
		names = append(names, p.Name)
	}
	ids, err := c.InterfaceIDs(ctx, names)
	if err != nil {
		return err
	}
	o.mu.Lock()
	if o.seen == nil {
		o.seen = map[string]sightedBinding{}
	}
	o.mu.Unlock()
	on := ovs.OVNInstalledValue
	for _, name := range names {
		x := ids[name]
		lsp := x[ovs.IfaceIDKey]
		installed := x[ovs.OVNInstalledKey] == ovs.OVNInstalledValue
		if lsp == "" || !o.known(lsp) {
			o.forget(name)
			if installed {
				if err := c.SetInterfaceID(ctx, name, ovs.OVNInstalledKey, nil); err != nil {
					return err
				}
			}
			continue
		}
		o.mu.Lock()
		s, ok := o.seen[name]
		if !ok || s.lsp != lsp {
			s = sightedBinding{lsp: lsp, at: now}
			o.seen[name] = s
			o.mu.Unlock()
			if ok && installed { // rebound: released first
				if err := c.SetInterfaceID(ctx, name, ovs.OVNInstalledKey, nil); err != nil {
					return err
				}
				installed = false
			}
		} else {
			o.mu.Unlock()
		}
		if !installed && now.Sub(s.at) >= o.InstallDelay && (ok || o.InstallDelay == 0) {
			if err := c.SetInterfaceID(ctx, name, ovs.OVNInstalledKey, &on); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *OVNController) forget(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, name)
}
