package validaterun

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovnsb"
)

// sbReadTimeout bounds the read of the Southbound (connect and one
// transaction): a remote that does not answer is a failed check, not a
// hung validate or status.
const sbReadTimeout = 10 * time.Second

// OVNState is what a group's OVN checks judge: the chassis the config
// wants and the facts read for it.
type OVNState struct {
	Want  validate.OVNWant
	Facts validate.OVNFacts
}

// Checks are the OVN checks of the state (validate.OVNChecks).
func (s *OVNState) Checks() []validate.Check { return validate.OVNChecks(s.Want, s.Facts) }

// Counts are what status exports of it (validate.OVNCounts).
func (s *OVNState) Counts() validate.OVNMetrics { return validate.OVNCounts(s.Want, s.Facts) }

// ReadOVN reads group g's OVN chassis on h: its Open_vSwitch row and
// integration bridge, the Southbound and ovn-controller's connection;
// nil for a group without an ovn section. The bindings of extra logical
// ports are read too.
func ReadOVN(ctx context.Context, cfg *config.Config, h *host.Host, g *config.Group, extra ...string) *OVNState {
	if g.OVN == nil {
		return nil
	}
	reps := map[config.VFRef]string{}
	if gh, errs := pipeline.ResolveGroup(h.Kernel, h.FS, g); len(errs) == 0 {
		reps = representorsOf(h, gh) // else the indexes do not match (pf/<n> says why)
	}
	w := OVNWant(g, groupPath(cfg, g), reps)
	w.Extra = extra
	runDir := ovnsb.RunDir()
	if h.Simulated() {
		runDir = "" // the simulated host runs no ovn-controller of its own
	}
	var oc OVNChassisReader
	c, err := h.OVS(ctx)
	if err == nil {
		oc = c
	}
	s := &OVNState{Want: w}
	s.Facts = ReadOVNFacts(ctx, &s.Want, oc, err, sbTLS(g.OVN), runDir)
	return s
}

// OVNChassisReader reads the Open vSwitch side (ovs.Client).
type OVNChassisReader interface {
	OVNChassis(ctx context.Context, bridge string) (ovs.OVNChassisView, error)
}

// ReadOVNFacts reads what the OVN checks judge for w: br-int's interfaces
// and the Open_vSwitch row from oc (ovsErr: why there is none), the
// Southbound at w.Remote (t: an ssl: remote's files), and ovn-controller's
// connection-status from its control socket in runDir ("": not asked). A
// w without a chassis name (no system_id in the config) takes the
// Open_vSwitch row's system-id.
func ReadOVNFacts(ctx context.Context, w *validate.OVNWant, oc OVNChassisReader, ovsErr error, t *ovnsb.TLS, runDir string) validate.OVNFacts {
	var f validate.OVNFacts
	if ovsErr == nil {
		v, err := oc.OVNChassis(ctx, w.Bridge)
		if err != nil {
			f.BridgeErr = err
		} else {
			f.BridgeMissing = !v.BridgeExists
			f.Interfaces = map[string]validate.OVNInterface{}
			for _, i := range v.Interfaces {
				f.Interfaces[i.Name] = validate.OVNInterface{Name: i.Name, Type: i.Type, ExternalIDs: i.ExternalIDs, Options: i.Options}
			}
			if w.Chassis == "" {
				w.Chassis = v.ExternalIDs["system-id"]
			}
			w.Ports = append(w.Ports, w.PoolPorts(f.Interfaces)...)
		}
	} else {
		f.BridgeErr = ovsErr
	}
	var lsps []string
	for _, p := range w.Ports {
		lsps = append(lsps, p.LSP)
	}
	for _, x := range w.Extra {
		if !slices.Contains(lsps, x) {
			lsps = append(lsps, x)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, sbReadTimeout)
	defer cancel()
	f.SB, f.SBErr = ovnsb.Read(sctx, w.Remote, t, lsps)
	if runDir != "" {
		// Unknown ("") when it cannot be asked: doctor's ovn/controller
		// says why; a port's check names it only when it is known.
		st, err := ovnsb.ControllerStatus(runDir)
		switch {
		case err == nil:
			f.Controller = st
		case errors.Is(err, ovnsb.ErrControllerNotRunning):
			f.Controller = "ovn-controller not running"
		}
	}
	return f
}

// OVNWant is the chassis group g's config wants: reps maps each VF to
// its representor (a VF without one keeps the name "pf<i>vf<n>", which
// no interface of br-int has: its check fails naming it); the pool's VFs
// with a representor, whose bound ports ReadOVNFacts adds.
func OVNWant(g *config.Group, path string, reps map[config.VFRef]string) validate.OVNWant {
	o := g.OVN
	w := validate.OVNWant{Remote: o.Remote, Chassis: o.SystemID, EncapType: o.EncapTypeOf(), Bridge: o.Bridge}
	if p := o.Prefix(); p.IsValid() {
		w.EncapIP = p.Addr().String()
	}
	for _, p := range g.OVNPorts(path) {
		rep, ok := reps[p.VF]
		if !ok {
			rep = fmt.Sprintf("pf%dvf%d", p.VF.PF, p.VF.VF)
		}
		w.Ports = append(w.Ports, validate.OVNPortWant{LSP: p.LSP, Interface: rep, Field: p.Path})
	}
	for _, r := range g.PoolVFs() {
		if rep, ok := reps[r]; ok {
			w.Pool = append(w.Pool, validate.OVNPoolWant{Interface: rep, Field: fmt.Sprintf("%s.network pf %d vf %d", path, r.PF, r.VF)})
		}
	}
	return w
}

// representorsOf maps each VF of the group's resolved PFs to its
// representor netdev.
func representorsOf(h *host.Host, gh pipeline.Group) map[config.VFRef]string {
	out := map[config.VFRef]string{}
	for i, pf := range gh.PFs {
		reps, err := eswitch.Representors(h.Kernel, h.FS, pf)
		if err != nil {
			continue
		}
		for vf, name := range reps {
			out[config.VFRef{PF: i, VF: vf}] = name
		}
	}
	return out
}

// groupPath is the config path of g ("groups[1]").
func groupPath(cfg *config.Config, g *config.Group) string {
	if cfg != nil {
		for i := range cfg.Groups {
			if cfg.Groups[i].Name == g.Name {
				return fmt.Sprintf("groups[%d]", i)
			}
		}
	}
	return "groups[?]"
}

// sbTLS is the ovn section's key material for an ssl: remote, nil without.
func sbTLS(o *config.OVN) *ovnsb.TLS {
	if o.SSL == nil {
		return nil
	}
	return &ovnsb.TLS{PrivateKey: o.SSL.PrivateKey, Certificate: o.SSL.Certificate, CACert: o.SSL.CACert}
}

// ovnTunnelOffload is what the offload check needs of an OVN group's
// tunnel: the datapath's tunnel port (ovs-vswitchd names it
// <type>_sys_<port>: OVN's Geneve and VXLAN use the IANA ports), the
// ovn-* ports' remote_ip (the log's refusals name the port), and the
// other chassis whose next hop's neighbour is unresolved.
func ovnTunnelOffload(k eswitch.Kernel, g *config.Group, st *OVNState) *validate.TunnelOffload {
	vport := "genev_sys_6081"
	if g.OVN.EncapTypeOf() == config.OVNEncapVXLAN {
		vport = "vxlan_sys_4789"
	}
	out := &validate.TunnelOffload{VPort: vport, OVN: true, Unresolved: map[string]string{}, RemoteOf: map[string]string{}}
	for name, i := range st.Facts.Interfaces {
		if ip := i.Options["remote_ip"]; strings.HasPrefix(name, "ovn-") && ip != "" {
			out.RemoteOf[name] = ip
		}
	}
	u, ok := k.(eswitch.Underlay)
	if !ok || st.Facts.SB == nil {
		return out
	}
	prefix, gw := g.OVN.Prefix(), g.OVN.Gateway
	for _, c := range st.Facts.SB.Chassis {
		if c.Name == st.Want.Chassis {
			continue
		}
		for _, e := range c.Encaps {
			hop := e.IP
			if a, err := netip.ParseAddr(e.IP); err == nil && !prefix.Masked().Contains(a) && gw != "" {
				hop = gw
			}
			if s, err := u.Neigh(g.UnderlayDev(), hop); err == nil && !eswitch.NeighResolved(s) {
				out.Unresolved[e.IP] = s
			}
		}
	}
	return out
}

// ovnUnderlayWant is an OVN group's underlay as validate's tunnel checks
// judge it: pipeline.TunnelWant's (the encap address on the bond or its
// VLAN interface, the configured routes, the MTU chain with OVN's
// overhead) with a route and a resolved neighbour towards each other
// chassis's encap address of the configured type as remotes, and the
// fixes naming the ovn section. No tunnel ports: ovn-controller makes
// them, the ovn/tunnel/<chassis> checks judge them.
func ovnUnderlayWant(g *config.Group, st *OVNState) *validate.TunnelWant {
	w := pipeline.TunnelWant(g)
	if w == nil {
		return nil
	}
	w.Section = "ovn"
	if st == nil || st.Facts.SB == nil {
		return w
	}
	for _, c := range st.Facts.SB.Chassis {
		if c.Name == st.Want.Chassis {
			continue
		}
		for _, e := range c.Encaps {
			if e.Type == g.OVN.EncapTypeOf() && !slices.Contains(w.Remotes, e.IP) {
				w.Remotes = append(w.Remotes, e.IP)
			}
		}
	}
	return w
}
