package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/teardown"
)

// ovsBridgeKind builds the group's bridge with the bond and the
// representors and turns hw-offload on, in one OVSDB transaction
// (DESIGN.md step 10). Rows vflag creates carry external_ids vflag-owner.
//
//	ovs-vsctl add-br $br -- add-port $br $bond -- add-port $br $rep ... -- set Open_vSwitch . other_config:hw-offload=true
type ovsBridgeKind struct{}

type ovsRecord struct {
	Endpoint string     `json:"endpoint"`
	Bridge   ovs.Record `json:"bridge"`
}

func (ovsBridgeKind) Name() string { return KindOVSBridge }
func (ovsBridgeKind) DependsOn() []string {
	return []string{bondKind{}.Name(), repsUpKind{}.Name()}
}

func (k ovsBridgeKind) id(bridge string) string { return k.Name() + "/" + bridge }

// step is the bridge step; seen, when set, gets the bridge as the check
// read it (the plan pass keeps it for verify: see groupRun.bridgeSeen);
// wrote, when set, gets the change Apply made.
func (k ovsBridgeKind) step(e *Env, spec ovs.BridgeSpec, seen func(ovs.BridgeStatus), wrote func(ovs.Change)) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.id(spec.Bridge), Replannable: true, // seen is the plan pass's (verify of a run that wrote nothing)
		Check: func(ctx context.Context) (teardown.Change, error) {
			c, err := e.h.OVS(ctx)
			if err != nil {
				return teardown.Change{}, err
			}
			ch, bs, err := c.PlanStatus(ctx, spec)
			if err != nil {
				return teardown.Change{}, err
			}
			if seen != nil {
				seen(bs)
			}
			if len(ch.Foreign) > 0 {
				e.log.Warn("ports exist that vflag did not create; left alone", "bridge", spec.Bridge, "ports", ch.Foreign)
			}
			for _, m := range ch.Moved {
				e.log.Info("representor's name is held by a port of vflag's for another group: moving it", "bridge", spec.Bridge, "port", m.Port, "from", m.Bridge, "owner", m.Owner)
			}
			if ch.RestartRequired {
				e.log.Warn("hw-offload is on but the config wants it off: disabling needs an ovs-vswitchd restart; vflag never restarts OVS", "bridge", spec.Bridge)
			}
			// The record's undo removes every row of the owner: a change of a
			// bridge that exists (retag, mtu_request, ports added or
			// removed) is put back by a rollback doing the bridge again.
			rb := teardown.RollbackRedo
			if ch.CreateBridge {
				rb = teardown.RollbackUndo
			}
			return teardown.Change{Needed: !ch.Empty(), Summary: ovsSummary(spec, ch, vlansOf(bs, ch)), Rollback: rb,
				Record: ovsRecord{Endpoint: e.h.OVSDB, Bridge: ovs.Record{Owner: spec.Owner, Bridge: spec.Bridge,
					BridgeCreated: ch.CreateBridge, Ports: ch.AddPorts, HWOffloadSet: ch.SetHWOffload, PriorHWOffload: ch.PriorHWOffload}}}, nil
		},
		Apply: func(ctx context.Context) error {
			c, err := e.h.OVS(ctx)
			if err != nil {
				return err
			}
			_, ch, err := c.Ensure(ctx, spec)
			if err == nil && wrote != nil {
				wrote(ch)
			}
			return err
		},
	}
}

// Undo removes every row the owner holds on the bridge, also those a later
// run added, and restores hw-offload.
func (ovsBridgeKind) Undo(ctx context.Context, e *Env, r ovsRecord) (string, error) {
	c, done, err := e.ovsAt(ctx, r.Endpoint)
	if err != nil {
		return "", err
	}
	defer done()
	if err := c.UndoOwned(ctx, r.Bridge); err != nil {
		return "", err
	}
	what := "remove vflag's ports"
	if r.Bridge.BridgeCreated {
		what = "delete bridge"
	}
	if r.Bridge.HWOffloadSet {
		what += "; hw-offload -> " + orDash(deref(r.Bridge.PriorHWOffload))
	}
	return fmt.Sprintf("%s %s (owner %s)", what, r.Bridge.Bridge, r.Bridge.Owner), nil
}

// ovsSummary says what the change does: every kind of write it makes
// (the ports it removes too), each retag from the port's VLAN columns now
// (now: by port name; a port missing there is shown without them) to the
// spec's. "converged" only when it writes nothing.
func ovsSummary(spec ovs.BridgeSpec, ch ovs.Change, now map[string]ovs.PortStatus) string {
	var parts []string
	if ch.CreateBridge {
		parts = append(parts, "create bridge "+spec.Bridge)
	}
	moved := map[string]bool{}
	for _, m := range ch.Moved {
		moved[m.Port] = true
	}
	var add []string
	for _, p := range ch.AddPorts {
		if !moved[p] {
			add = append(add, p)
		}
	}
	if len(add) > 0 {
		parts = append(parts, fmt.Sprintf("add %d ports (%s)", len(add), abbreviate(add, 4)))
	}
	parts = append(parts, movedParts(ch.Moved)...)
	if len(ch.RemovePorts) > 0 {
		parts = append(parts, fmt.Sprintf("remove %d ports the config no longer lists (%s)", len(ch.RemovePorts), abbreviate(ch.RemovePorts, 4)))
	}
	if len(ch.Retag) > 0 {
		want := map[string]ovs.PortSpec{}
		for _, p := range spec.Ports {
			want[p.Name] = p
		}
		var rs []string
		for _, name := range ch.Retag {
			cur, ok := now[name]
			if !ok {
				rs = append(rs, name)
				continue
			}
			w := want[name]
			rs = append(rs, fmt.Sprintf("%s %s -> %s", name, validate.VLANColumns(cur.Tag, cur.VLANMode, cur.Trunks), validate.VLANColumns(w.Tag, w.VLANMode, w.Trunks)))
		}
		parts = append(parts, "retag "+strings.Join(rs, ", "))
	}
	if len(ch.SetMTU) > 0 {
		parts = append(parts, "mtu_request "+abbreviate(ch.SetMTU, 4))
	}
	if len(ch.SetOptions) > 0 {
		parts = append(parts, "tunnel options "+abbreviate(ch.SetOptions, 4))
	}
	if len(ch.SetBind) > 0 {
		parts = append(parts, "OVN bindings "+abbreviate(ch.SetBind, 4))
	}
	if ch.SetHWOffload {
		parts = append(parts, "hw-offload "+orDash(deref(ch.PriorHWOffload))+" -> true")
	}
	if len(parts) == 0 {
		return "bridge " + spec.Bridge + " converged"
	}
	return strings.Join(parts, "; ") + " (one transaction)"
}

// movedParts says, per bridge and owner they leave, which ports a change
// takes from another group of vflag's.
func movedParts(ms []ovs.Move) []string {
	type from struct{ bridge, owner string }
	var order []from
	ports := map[from][]string{}
	for _, m := range ms {
		f := from{m.Bridge, m.Owner}
		if _, ok := ports[f]; !ok {
			order = append(order, f)
		}
		ports[f] = append(ports[f], m.Port)
	}
	out := make([]string, 0, len(order))
	for _, f := range order {
		out = append(out, fmt.Sprintf("move %d ports of group %s from %s (%s)", len(ports[f]), f.owner, f.bridge, abbreviate(ports[f], 4)))
	}
	return out
}

// vlansNow reads the VLAN columns of the ports a change retags (nil when
// it retags none, or when they cannot be read: the summary then names the
// ports only).
func vlansNow(ctx context.Context, c *ovs.Client, bridge string, ch ovs.Change) map[string]ovs.PortStatus {
	if len(ch.Retag) == 0 {
		return nil
	}
	st, err := c.Status(ctx, bridge)
	if err != nil {
		return nil
	}
	return vlansOf(st, ch)
}

// vlansOf is vlansNow from a bridge already read.
func vlansOf(st ovs.BridgeStatus, ch ovs.Change) map[string]ovs.PortStatus {
	if len(ch.Retag) == 0 {
		return nil
	}
	out := map[string]ovs.PortStatus{}
	for _, p := range st.Ports {
		out[p.Name] = p
	}
	return out
}

// ovsPortKind adds one representor port to a bridge of vflag's: the qemu
// hook's repair of a VF a domain is about to use. Unlike ovs.bridge its
// undo removes only the ports it recorded (the group's other ports stay).
//
//	ovs-vsctl add-port $br $rep tag=$vlan -- set Port $rep external_ids:vflag-owner=$group
type ovsPortKind struct{}

type ovsPortRecord struct {
	Endpoint string     `json:"endpoint"`
	Port     ovs.Record `json:"port"`
}

func (ovsPortKind) Name() string        { return "ovs.port" }
func (ovsPortKind) DependsOn() []string { return []string{ovsBridgeKind{}.Name()} }

// PortStep adds (or retags) one port of vflag's on an existing bridge.
func (e *Env) PortStep(endpoint string, spec ovs.BridgeSpec) teardown.Step {
	spec.Partial = true // one port: the group's other ports are not stale
	k := ovsPortKind{}
	connect := func(ctx context.Context) (*ovs.Client, error) {
		if endpoint == e.h.OVSDB {
			return e.h.OVS(ctx)
		}
		return nil, fmt.Errorf("ovs.port: endpoint %s is not this run's (%s)", endpoint, e.h.OVSDB)
	}
	var names []string
	for _, p := range spec.Ports {
		names = append(names, p.Name)
	}
	return teardown.Step{
		Kind: k.Name(), ID: k.id(spec.Bridge, names),
		Check: func(ctx context.Context) (teardown.Change, error) {
			c, err := connect(ctx)
			if err != nil {
				return teardown.Change{}, err
			}
			ch, err := c.Plan(ctx, spec)
			if err != nil {
				return teardown.Change{}, err
			}
			if len(ch.Foreign) > 0 {
				return teardown.Change{}, fmt.Errorf("port %s exists on %s but is not vflag's: left alone", strings.Join(ch.Foreign, " "), spec.Bridge)
			}
			return teardown.Change{Needed: !ch.Empty(), Summary: ovsSummary(spec, ch, vlansNow(ctx, c, spec.Bridge, ch)),
				Record: ovsPortRecord{Endpoint: endpoint, Port: ovs.Record{Owner: spec.Owner, Bridge: spec.Bridge, Ports: ch.AddPorts}}}, nil
		},
		Apply: func(ctx context.Context) error {
			c, err := connect(ctx)
			if err != nil {
				return err
			}
			_, _, err = c.Ensure(ctx, spec)
			return err
		},
	}
}

func (k ovsPortKind) id(bridge string, ports []string) string {
	return k.Name() + "/" + bridge + "/" + strings.Join(ports, "+")
}

// AdoptPort is a step that journals ports of vflag's already added to a
// bridge (by a vflag that kept them elsewhere: the qemu hook's old state
// file): its Check reports the change, its Apply does nothing. Its id is
// that of PortStep for the same ports.
func AdoptPort(endpoint string, rec ovs.Record) teardown.Step {
	k := ovsPortKind{}
	return teardown.Step{
		Kind: k.Name(), ID: k.id(rec.Bridge, rec.Ports),
		Check: func(context.Context) (teardown.Change, error) {
			return teardown.Change{Needed: true, Summary: fmt.Sprintf("port %s on %s (adopted)", strings.Join(rec.Ports, " "), rec.Bridge),
				Record: ovsPortRecord{Endpoint: endpoint, Port: rec}}, nil
		},
		Apply: func(context.Context) error { return nil },
	}
}

func (ovsPortKind) Undo(ctx context.Context, e *Env, r ovsPortRecord) (string, error) {
	if len(r.Port.Ports) == 0 {
		return "", nil
	}
	c, done, err := e.ovsAt(ctx, r.Endpoint)
	if err != nil {
		return "", err
	}
	defer done()
	if err := c.Undo(ctx, r.Port); err != nil {
		return "", err
	}
	return fmt.Sprintf("remove port %s from %s", strings.Join(r.Port.Ports, " "), r.Port.Bridge), nil
}

// predictedBridge is the plan's line for a bridge whose representors up
// is still to make: the layout it builds, the bond as the uplink port, or
// in the tunnel layout the tunnel ports with the bond outside the bridge
// (the underlay).
func predictedBridge(g Group) string {
	reps := g.NumVFs * len(g.Owners)
	if o := g.OVN; o != nil {
		return fmt.Sprintf("integration bridge %s (adopted, or made with fail-mode=secure): %d representors, %d bound to logical ports, hw-offload=%v (one transaction; bond %s stays out of every bridge, the underlay of %s %s)",
			o.Bridge, reps, len(g.OVNPorts("")), *g.OVS.HWOffload, g.Bond.Name, o.EncapTypeOf(), o.EncapIP)
	}
	if t := g.Tunnel; t != nil {
		return fmt.Sprintf("bridge %s: %d tunnel port(s) (%s to %s) and %d representors, hw-offload=%v (one transaction; bond %s stays out of the bridge, the underlay)",
			g.OVS.Bridge, len(g.TunnelPorts()), t.Type, strings.Join(t.Remotes, ", "), reps, *g.OVS.HWOffload, g.Bond.Name)
	}
	return fmt.Sprintf("bridge %s: bond %s and %d representors, hw-offload=%v (one transaction)", g.OVS.Bridge, g.Bond.Name, reps, *g.OVS.HWOffload)
}

func (run *groupRun) ovsBridge(context.Context) ([]batch, error) {
	g := run.g
	if !run.repsAll || run.anyFresh() {
		// Representors made again are new netdevs: the bridge's ports change.
		return one(predicted(ovsBridgeKind{}.Name(), ovsBridgeKind{}.id(g.OVS.Bridge), predictedBridge(g))), nil
	}
	if err := run.readPoolPorts(); err != nil {
		return nil, err
	}
	run.readDomainUUIDs()
	spec := run.bridgeSpec()
	spec.PlanMoves = run.dry // a renamed bridge's ports: the prune before the forward pass frees them
	// A representor's name held by a port of another group of vflag's (a
	// reboot that shifted the names between groups, or a group the config
	// dropped): this group takes it. The bridge phase runs one group at a
	// time (sharedPhases), so each transaction reads what the other wrote.
	spec.MoveOthers = true
	return one(ovsBridgeKind{}.step(run.e, spec, func(bs ovs.BridgeStatus) { run.bridgeSeen = &bs },
		func(ch ovs.Change) { run.bridgeColumnsOnly = columnsOnly(ch) })), nil
}

// columnsOnly tells whether a change of the bridge only rewrote columns of
// ports it keeps (VLAN tags, mtu_request): no bridge, port or interface made
// or removed, hw-offload as it was, so every port keeps its ofport.
func columnsOnly(ch ovs.Change) bool {
	return !ch.CreateBridge && len(ch.AddPorts) == 0 && len(ch.RemovePorts) == 0 && !ch.SetHWOffload
}

// bridgeSpec is the group's bridge: the bond plus every representor, with
// the VLAN columns of its VF; with the group's mtu, every interface's
// mtu_request.
func (run *groupRun) bridgeSpec() ovs.BridgeSpec {
	g := run.g
	spec := ovs.BridgeSpec{Owner: g.Name, Bridge: g.OVS.Bridge, DatapathType: g.OVS.DatapathType, HWOffload: *g.OVS.HWOffload,
		Integration: g.OVN != nil}
	if g.BondInBridge() {
		spec.Ports = append(spec.Ports, ovs.PortSpec{Name: g.Bond.Name, MTURequest: g.MTU})
	}
	spec.Ports = append(spec.Ports, tunnelPortSpecs(g.Group)...)
	for _, pf := range g.Owners {
		for vf := 0; vf < g.NumVFs; vf++ {
			k := VFKey{pf, vf}
			ps := RepPortSpec(g.Group, k, run.reps[k])
			if pg, held := run.poolPorts[k]; held {
				ps = PoolPortSpec(g.Group, k, run.reps[k], pg)
			}
			ps.Bind = run.ovnBind(k)
			spec.Ports = append(spec.Ports, ps)
		}
	}
	return spec
}

// readPoolPorts finds, for a switchdev group with a network, the pool's
// VFs that a domain's port holds and the portgroup of each: their
// representors' OVS ports carry that portgroup's VLAN (the network hook
// sets it when libvirt makes the port), which up keeps.
func (run *groupRun) readPoolPorts() error {
	g := run.g
	run.poolPorts = nil
	if g.Network == nil || !g.Switchdev() {
		return nil
	}
	vfs, err := run.namedVFs()
	if err != nil {
		return err
	}
	byPCI := map[string]VFKey{}
	for _, k := range g.Pool() {
		if a, ok := vfs[k]; ok {
			byPCI[string(a)] = k
		}
	}
	if len(byPCI) == 0 {
		return nil
	}
	c, err := run.e.h.Virt()
	if err != nil {
		return fmt.Errorf("libvirt network %s (the VLANs of its ports' representors): %w", g.NetworkName(), err)
	}
	st, err := c.Network(g.NetworkName())
	if err != nil {
		return fmt.Errorf("libvirt network %s (the VLANs of its ports' representors): %w", g.NetworkName(), err)
	}
	if !st.Owned {
		return nil // a foreign network of that name: the network step refuses it
	}
	run.poolPorts = map[VFKey]string{}
	for _, p := range st.Ports {
		if k, ok := byPCI[p.PCI]; ok {
			run.poolPorts[k] = p.Portgroup
		}
	}
	return nil
}

// PoolPortSpec is the OVS port of the representor rep of pool VF k while a
// domain's port in portgroup pg holds it: the portgroup's VLAN (the default
// portgroup's when pg is "" or unknown), else as RepPortSpec.
func PoolPortSpec(g *config.Group, k VFKey, rep, pg string) ovs.PortSpec {
	ps := RepPortSpec(g, k, rep)
	if g.Network == nil {
		return ps
	}
	var chosen *config.Portgroup
	for i, p := range g.Network.Portgroups {
		if p.Name == pg && pg != "" {
			chosen = &g.Network.Portgroups[i]
			break
		}
		if p.Default && chosen == nil {
			chosen = &g.Network.Portgroups[i]
		}
	}
	if chosen != nil {
		ps.Tag, ps.VLANMode, ps.Trunks = chosen.VLAN, chosen.VLANMode, slices.Clone(chosen.Trunks)
	}
	return onUntaggedSegment(g, ps)
}

// RepPortSpec is the OVS port of the representor rep of VF k: its VF's
// tag, vlan_mode and trunks, and the group's mtu as mtu_request. The
// bridge step and the qemu hook build it alike.
func RepPortSpec(g *config.Group, k VFKey, rep string) ovs.PortSpec {
	ps := ovs.PortSpec{Name: rep, MTURequest: g.MTU}
	for _, v := range g.VFs {
		if v.PF == k.PF && v.VF == k.VF {
			ps.Tag, ps.VLANMode, ps.Trunks = v.VLAN, v.VLANMode, v.Trunks
		}
	}
	return onUntaggedSegment(g, ps)
}

// onUntaggedSegment keeps a port without VLAN columns of its own (no tag,
// vlan_mode or trunks) to the untagged segment in a tunnel group whose
// other segments are tagged: vlan_mode trunk with the untagged segment's
// VLANs (config.Group.UntaggedTrunks), where OVS's default would trunk
// every segment's VLAN to it. Other ports are returned as they are.
func onUntaggedSegment(g *config.Group, ps ovs.PortSpec) ovs.PortSpec {
	if ps.Tag != 0 || ps.VLANMode != "" || len(ps.Trunks) > 0 {
		return ps
	}
	if t := g.UntaggedTrunks(); t != nil {
		ps.VLANMode, ps.Trunks = "trunk", t
	}
	return ps
}
