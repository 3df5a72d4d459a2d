package ovs

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"

	"github.com/ovn-kubernetes/libovsdb/client"
	lmodel "github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
)

// Plan returns what Ensure would change, without writing.
func (c *Client) Plan(ctx context.Context, s BridgeSpec) (Change, error) {
	if err := s.validate(); err != nil {
		return Change{}, fmt.Errorf("ovs: plan bridge %s: %w", s.Bridge, err)
	}
	txns := c.txns.Load()
	st, err := c.read(ctx, planView)
	if err != nil {
		return Change{}, fmt.Errorf("ovs: plan bridge %s: %w", s.Bridge, err)
	}
	ch, _, err := plan(st, s)
	if err != nil {
		return Change{}, fmt.Errorf("ovs: plan bridge %s: %w", s.Bridge, err)
	}
	if !ch.Empty() {
		c.warmLib(ctx)
		c.keepPlanned(st, txns)
	}
	return ch, nil
}

// PlanStatus is Plan that also returns the bridge as Status reports it,
// from the same read: what a caller that would read both (plan, then
// verify the ofports of a run that wrote nothing) reads once.
func (c *Client) PlanStatus(ctx context.Context, s BridgeSpec) (Change, BridgeStatus, error) {
	if err := s.validate(); err != nil {
		return Change{}, BridgeStatus{}, fmt.Errorf("ovs: plan bridge %s: %w", s.Bridge, err)
	}
	txns := c.txns.Load()
	st, err := c.readPrefetched(ctx, planStatusView)
	if err != nil {
		return Change{}, BridgeStatus{}, fmt.Errorf("ovs: plan bridge %s: %w", s.Bridge, err)
	}
	ch, _, err := plan(st, s)
	if err != nil {
		return Change{}, BridgeStatus{}, fmt.Errorf("ovs: plan bridge %s: %w", s.Bridge, err)
	}
	if !ch.Empty() {
		c.warmLib(ctx)
		c.keepPlanned(st, txns)
	}
	return ch, st.status(s.Bridge), nil
}

// Ensure converges the database to s in one transaction and returns what it
// created (for Undo) and the change it made: it creates the bridge, adds the
// missing ports, retags the owner's ports and removes the owner's ports on
// the bridge that s does not list (Change.RemovePorts; the record keeps
// listing only what Ensure created). Ports without the owner's mark are never
// touched, but for those of another owner of vflag's that s.MoveOthers
// moves (Change.Moved): a port without any vflag-owner mark never is. When
// the database already matches, it sends no transaction (the write's
// connection, made while it reads, stays unused). It does not wait
// for ovs-vswitchd: call WaitApplied for that. It builds its transaction
// from the read of a Plan or PlanStatus that found a change, when this
// client has sent no transaction since and that read is younger than
// plannedMaxAge (the transaction's guards catch what another client
// changed meanwhile, as they do after a read of its own); else it reads.
func (c *Client) Ensure(ctx context.Context, s BridgeSpec) (Record, Change, error) {
	rec := Record{Owner: s.Owner, Bridge: s.Bridge}
	if err := s.validate(); err != nil {
		return rec, Change{}, fmt.Errorf("ovs: ensure bridge %s: %w", s.Bridge, err)
	}
	// The write's connection (libovsdb's client: the schema fetched, the
	// monitor set up) is made while the read and the plan run.
	c.warmLib(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.takePlanned()
	if st == nil {
		var err error
		if st, err = c.read(ctx, planView); err != nil {
			return rec, Change{}, fmt.Errorf("ovs: ensure bridge %s: %w", s.Bridge, err)
		}
	}
	s.PlanMoves = false
	ch, t, err := plan(st, s)
	if err != nil {
		return rec, Change{}, fmt.Errorf("ovs: ensure bridge %s: %w", s.Bridge, err)
	}
	if ch.Empty() {
		return rec, ch, nil
	}
	if st.root == nil {
		return rec, Change{}, fmt.Errorf("ovs: ensure bridge %s: %w", s.Bridge, errNoRoot)
	}
	if err := c.commit(ctx, t, st.root.UUID); err != nil {
		return rec, Change{}, fmt.Errorf("ovs: ensure bridge %s: %w", s.Bridge, err)
	}
	rec.BridgeCreated = ch.CreateBridge
	rec.Ports = append([]string(nil), ch.AddPorts...)
	if ch.SetHWOffload {
		rec.HWOffloadSet = true
		rec.PriorHWOffload = ch.PriorHWOffload
	}
	return rec, ch, nil
}

func (s BridgeSpec) validate() error {
	if s.Owner == "" {
		return fmt.Errorf("empty owner")
	}
	if s.Bridge == "" {
		return fmt.Errorf("empty bridge name")
	}
	seen := make(map[string]bool, len(s.Ports))
	for _, p := range s.Ports {
		switch {
		case p.Name == "":
			return fmt.Errorf("port with an empty name")
		case p.Name == s.Bridge:
			return fmt.Errorf("port %s has the bridge's name", p.Name)
		case seen[p.Name]:
			return fmt.Errorf("port %s listed twice", p.Name)
		case p.Tag < 0 || p.Tag > 4094:
			return fmt.Errorf("port %s: VLAN tag %d out of range 0..4094", p.Name, p.Tag)
		case p.MTURequest < 0:
			return fmt.Errorf("port %s: mtu_request %d is negative", p.Name, p.MTURequest)
		}
		switch p.VLANMode {
		case "", "access", "trunk", "native-tagged", "native-untagged":
		default:
			return fmt.Errorf("port %s: vlan_mode %q is not access, trunk, native-tagged or native-untagged", p.Name, p.VLANMode)
		}
		for _, v := range p.Trunks {
			if v < 0 || v > 4094 { // 0: untagged frames
				return fmt.Errorf("port %s: trunk VLAN %d out of range 0..4094", p.Name, v)
			}
		}
		seen[p.Name] = true
	}
	return nil
}

// plan computes the change from st to s and what the transaction that
// makes it writes (without the next_cfg increment commit adds), as a txn
// whose operations commit builds with libovsdb's typed API once the client
// is connected: plan itself needs no connection. Named UUIDs are generated
// identifiers; names only ever appear as column values.
func plan(st *state, s BridgeSpec) (Change, *txn, error) {
	var ch Change
	t := &txn{}
	owner := map[string]string{OwnerKey: s.Owner}

	br := st.bridges[s.Bridge]
	if br == nil {
		ch.CreateBridge = true
		if p := st.ports[s.Bridge]; p != nil {
			return ch, nil, fmt.Errorf("a port named %s already exists (on bridge %s)", s.Bridge, st.bridgeName(p))
		}
		if st.ifaces[s.Bridge] != nil {
			return ch, nil, fmt.Errorf("an interface named %s already exists", s.Bridge)
		}
	}
	add, err := planExistingPorts(st, s, br, &ch, t)
	if err != nil {
		return ch, nil, err
	}
	if br != nil && !s.Partial {
		planStalePorts(st, s, br, &ch, t)
	}
	portRefs := planNewPorts(add, &ch, t, owner)
	if err := planBridge(st, s, br, portRefs, t, owner); err != nil {
		return ch, nil, err
	}
	if err := planHWOffload(st, s, &ch, t); err != nil {
		return ch, nil, err
	}
	return ch, t, nil
}

// planExistingPorts sorts the spec's ports by what the database holds:
// another owner's (Foreign; with s.MoveOthers, one of vflag's for another
// owner is taken off its bridge in t and returned to add), to add
// (returned), or ours on the bridge with
// VLAN columns or an mtu_request to update in t.
func planExistingPorts(st *state, s BridgeSpec, br *model.Bridge, ch *Change, t *txn) ([]PortSpec, error) {
	var add []PortSpec
	for _, ps := range s.Ports {
		p := st.ports[ps.Name]
		if p == nil {
			if st.ifaces[ps.Name] != nil {
				// An interface of another port (an OVS bond member) holds the name.
				ch.Foreign = append(ch.Foreign, ps.Name)
				continue
			}
			add = append(add, ps)
			continue
		}
		if !ownedBy(p.ExternalIDs, s.Owner) {
			if from, other := st.portBridge[p.UUID], p.ExternalIDs[OwnerKey]; s.MoveOthers && from != nil && other != "" {
				ch.Moved = append(ch.Moved, Move{Port: ps.Name, Bridge: from.Name, Owner: other})
				planMove(p, from, other, t)
				add = append(add, ps)
				continue
			}
			ch.Foreign = append(ch.Foreign, ps.Name)
			continue
		}
		if on := st.portBridge[p.UUID]; br == nil || on == nil || on.UUID != br.UUID {
			if s.PlanMoves {
				add = append(add, ps)
				continue
			}
			return nil, fmt.Errorf("port %s belongs to %s but is on bridge %s", ps.Name, s.Owner, st.bridgeName(p))
		}
		if tagOf(p) != ps.Tag || vlanModeOf(p) != ps.VLANMode || !sameInts(trunksOf(p), ps.Trunks) {
			// The VLAN columns of this port only, all three together.
			ch.Retag = append(ch.Retag, ps.Name)
			t.retag(p.UUID, s.Owner, ps)
		}
		if f := st.portInterface(p); f != nil && f.UUID != "" && mtuRequestOf(f) != ps.MTURequest {
			ch.SetMTU = append(ch.SetMTU, ps.Name)
			uuid, name, mtu := f.UUID, ps.Name, ps.MTURequest
			t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
				m := &model.Interface{MTURequest: optInt(mtu)}
				return guarded(2)(api.WhereAll(m, is(&m.UUID, uuid), is(&m.Name, name)).Update(m, &m.MTURequest))
			})
		}
		// The type and options of a typed port (a tunnel's) only: a netdev
		// port's type is left as it is.
		if f := st.portInterface(p); ps.Type != "" && f != nil && f.UUID != "" && (f.Type != ps.Type || !maps.Equal(f.Options, ps.Options)) {
			ch.SetOptions = append(ch.SetOptions, ps.Name)
			t.setInterface(f.UUID, ps)
		}
		if f := st.portInterface(p); ps.Bind != nil && f != nil && f.UUID != "" && !sameBind(f.ExternalIDs, ps.Bind) {
			ch.SetBind = append(ch.SetBind, ps.Name)
			t.setBind(f.UUID, ps)
		}
	}
	return add, nil
}

// sameBind tells whether external_ids ids hold exactly bind's values of
// BindKeys (a key bind lacks absent from ids too).
func sameBind(ids, bind map[string]string) bool {
	for _, k := range BindKeys {
		v, ok := ids[k]
		w, want := bind[k]
		if ok != want || v != w {
			return false
		}
	}
	return true
}

// setBind rewrites the OVN binding keys of interface uuid (while it still
// has ps's name): BindKeys removed, then ps.Bind's inserted; its other
// keys stay (ovn-controller's ovn-installed, which it takes off itself
// when the iface-id changes).
func (t *txn) setBind(uuid string, ps PortSpec) {
	name, bind := ps.Name, maps.Clone(ps.Bind)
	t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
		m := &model.Interface{}
		muts := []lmodel.Mutation{{Field: &m.ExternalIDs, Mutator: ovsdb.MutateOperationDelete, Value: append([]string(nil), BindKeys...)}}
		if len(bind) > 0 {
			muts = append(muts, lmodel.Mutation{Field: &m.ExternalIDs, Mutator: ovsdb.MutateOperationInsert, Value: bind})
		}
		return guarded(2)(api.WhereAll(m, is(&m.UUID, uuid), is(&m.Name, name)).Mutate(m, muts...))
	})
}

// planMove takes port p of vflag's other owner off bridge from, guarded
// by p still carrying that owner's mark (or being gone): unreferenced, the
// port and its interface are garbage collected before the transaction's
// index check, so the new port and interface of the same name that the
// caller adds in the same transaction take their place.
func planMove(p *model.Port, from *model.Bridge, owner string, t *txn) {
	t.guardOwned(p, owner)
	bu, pu := from.UUID, p.UUID
	t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
		return mutateBridgePorts(api, bu, ovsdb.MutateOperationDelete, []string{pu})
	})
}

// setInterface updates the type and options of interface uuid (a tunnel
// port whose remote, key or type changed) while it still has ps's name.
func (t *txn) setInterface(uuid string, ps PortSpec) {
	name, typ, opts := ps.Name, ps.Type, maps.Clone(ps.Options)
	if opts == nil {
		opts = map[string]string{}
	}
	t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
		m := &model.Interface{Type: typ, Options: opts}
		return guarded(2)(api.WhereAll(m, is(&m.UUID, uuid), is(&m.Name, name)).Update(m, &m.Type, &m.Options))
	})
}

// planStalePorts removes, in the same transaction, the vflag-owned ports on
// the existing bridge br that the spec no longer lists (a smaller numvfs,
// representors renamed after a reboot); the bridge's own internal port
// stays.
func planStalePorts(st *state, s BridgeSpec, br *model.Bridge, ch *Change, t *txn) {
	want := make(map[string]bool, len(s.Ports))
	for _, ps := range s.Ports {
		want[ps.Name] = true
	}
	var stale []*model.Port
	for _, pu := range br.Ports {
		p := st.portByUUID[pu]
		if p == nil || p.Name == s.Bridge || want[p.Name] || !ownedBy(p.ExternalIDs, s.Owner) {
			continue
		}
		stale = append(stale, p)
	}
	sort.Slice(stale, func(i, j int) bool { return stale[i].Name < stale[j].Name })
	uuids := make([]string, len(stale))
	for i, p := range stale {
		ch.RemovePorts = append(ch.RemovePorts, p.Name)
		t.guardOwned(p, s.Owner)
		uuids[i] = p.UUID
	}
	if len(stale) > 0 {
		// Unreferenced, the ports and their interfaces are garbage
		// collected. A bridge gone meanwhile holds nothing: any count.
		bu := br.UUID
		t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
			return mutateBridgePorts(api, bu, ovsdb.MutateOperationDelete, uuids)
		})
	}
}

// planNewPorts creates a port and its interface for each port to add and
// returns the ports' named UUIDs, for the bridge to reference.
func planNewPorts(add []PortSpec, ch *Change, t *txn, owner map[string]string) []string {
	portRefs := make([]string, 0, len(add))
	rows := make([]insertRow, 0, 2*len(add))
	for i, ps := range add {
		ch.AddPorts = append(ch.AddPorts, ps.Name)
		ifName, portName := "iface"+strconv.Itoa(i), "port"+strconv.Itoa(i)
		ifIDs := owner
		if len(ps.Bind) > 0 {
			ifIDs = maps.Clone(owner)
			for _, k := range BindKeys {
				if v, ok := ps.Bind[k]; ok {
					ifIDs[k] = v
				}
			}
		}
		rows = append(rows,
			newInterface{UUIDName: ifName, Name: ps.Name, Type: ps.Type, Options: ps.Options, ExternalIDs: ifIDs, MTURequest: optInt(ps.MTURequest)},
			newPort{UUIDName: portName, Name: ps.Name, Interfaces: []string{ifName}, ExternalIDs: owner,
				Tag: optInt(ps.Tag), VLANMode: optString(ps.VLANMode), Trunks: ps.Trunks})
		portRefs = append(portRefs, portName)
	}
	t.insert(rows...)
	return portRefs
}

// planBridge creates the bridge (br nil) with its internal port and the
// new ports, or adds the new ports to the existing bridge, guarded by the
// bridge still existing.
func planBridge(st *state, s BridgeSpec, br *model.Bridge, portRefs []string, t *txn, owner map[string]string) error {
	if br == nil {
		if st.root == nil {
			return errNoRoot
		}
		nb := newBridge{UUIDName: "bridge", Name: s.Bridge, Ports: append([]string{"brPort"}, portRefs...),
			ExternalIDs: owner, DatapathType: s.DatapathType}
		if s.Integration {
			nb.FailMode, nb.OtherConfig = optString(FailModeSecure), map[string]string{DisableInBandKey: "true"}
		}
		t.insert(
			newInterface{UUIDName: "brIface", Name: s.Bridge, Type: "internal", ExternalIDs: owner},
			newPort{UUIDName: "brPort", Name: s.Bridge, Interfaces: []string{"brIface"}, ExternalIDs: owner},
			nb)
		root := st.root.UUID
		t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
			return mutateRoot(api, root, func(m *model.OpenvSwitch) []lmodel.Mutation {
				return []lmodel.Mutation{{Field: &m.Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{"bridge"}}}
			})
		})
	} else if len(portRefs) > 0 {
		// Guard: the bridge still exists when the transaction runs, or the
		// new ports would be garbage-collected unreferenced.
		bu, name := br.UUID, br.Name
		t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
			row := &model.Bridge{Name: name}
			return api.Where(&model.Bridge{UUID: bu}).Wait(ovsdb.WaitConditionEqual, new(int), row, &row.Name)
		})
		t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
			return mutateBridgePorts(api, bu, ovsdb.MutateOperationInsert, portRefs)
		})
	}
	return nil
}

// planHWOffload sets other_config:hw-offload=true when the spec wants it
// and it is not; turning it off is only reported (RestartRequired).
func planHWOffload(st *state, s BridgeSpec, ch *Change, t *txn) error {
	switch cur, ok := otherConfig(st, HWOffloadKey); {
	case s.HWOffload && cur != "true":
		if st.root == nil {
			return errNoRoot
		}
		ch.SetHWOffload = true
		if ok {
			ch.PriorHWOffload = &cur
		}
		root, on := st.root.UUID, "true"
		t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
			return mutateRoot(api, root, func(m *model.OpenvSwitch) []lmodel.Mutation {
				return setOtherConfig(m, HWOffloadKey, &on)
			})
		})
	case !s.HWOffload && cur == "true":
		// Turning offload off needs an ovs-vswitchd restart; never done here.
		ch.RestartRequired = true
	}
	return nil
}

func otherConfig(st *state, key string) (string, bool) {
	if st.root == nil {
		return "", false
	}
	v, ok := st.root.OtherConfig[key]
	return v, ok
}

func (st *state) bridgeName(p *model.Port) string {
	if b := st.portBridge[p.UUID]; b != nil {
		return b.Name
	}
	return "(none)"
}

func tagOf(p *model.Port) int {
	if p.Tag == nil {
		return 0
	}
	return *p.Tag
}

func vlanModeOf(p *model.Port) string {
	if p.VLANMode == nil {
		return ""
	}
	return *p.VLANMode
}

// trunksOf is Port.trunks, sorted.
func trunksOf(p *model.Port) []int {
	out := append([]int(nil), p.Trunks...)
	sort.Ints(out)
	return out
}

// sameInts compares a sorted set with an unsorted list of distinct values.
func sameInts(sorted, v []int) bool {
	if len(sorted) != len(v) {
		return false
	}
	w := append([]int(nil), v...)
	sort.Ints(w)
	for i := range w {
		if w[i] != sorted[i] {
			return false
		}
	}
	return true
}

func mtuRequestOf(f *model.Interface) int {
	if f.MTURequest == nil {
		return 0
	}
	return *f.MTURequest
}
