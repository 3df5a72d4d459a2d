package ovs

import (
	"context"
	"fmt"
	"sort"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
)

// Plan returns what Ensure would change, without writing.
func (c *Client) Plan(ctx context.Context, s BridgeSpec) (Change, error) {
	if err := s.validate(); err != nil {
		return Change{}, fmt.Errorf("ovs: plan bridge %s: %w", s.Bridge, err)
	}
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
	}
	return ch, st.status(s.Bridge), nil
}

// Ensure converges the database to s in one transaction and returns what it
// created (for Undo) and the change it made: it creates the bridge, adds the
// missing ports, retags the owner's ports and removes the owner's ports on
// the bridge that s does not list (Change.RemovePorts; the record keeps
// listing only what Ensure created). Ports without the owner's mark are never
// touched. When the database already matches, it sends no transaction. It does not wait for ovs-vswitchd: call
// WaitApplied for that.
func (c *Client) Ensure(ctx context.Context, s BridgeSpec) (Record, Change, error) {
	rec := Record{Owner: s.Owner, Bridge: s.Bridge}
	if err := s.validate(); err != nil {
		return rec, Change{}, fmt.Errorf("ovs: ensure bridge %s: %w", s.Bridge, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.read(ctx, planView)
	if err != nil {
		return rec, Change{}, fmt.Errorf("ovs: ensure bridge %s: %w", s.Bridge, err)
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
			if v < 1 || v > 4094 {
				return fmt.Errorf("port %s: trunk VLAN %d out of range 1..4094", p.Name, v)
			}
		}
		seen[p.Name] = true
	}
	return nil
}

// plan computes the change from st to s and the transaction that makes it
// (without the next_cfg increment commit adds). Named UUIDs are generated
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
	add, err := planExistingPorts(st, s, br, &ch, t, owner)
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
// another owner's (Foreign), to add (returned), or ours on the bridge with
// VLAN columns or an mtu_request to update in t.
func planExistingPorts(st *state, s BridgeSpec, br *model.Bridge, ch *Change, t *txn, owner map[string]string) ([]PortSpec, error) {
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
			row := ovsdb.Row{"tag": tagValue(ps.Tag), "vlan_mode": vlanModeValue(ps.VLANMode), "trunks": intSet(ps.Trunks)}
			t.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: model.PortTable, Row: row,
				Where: []ovsdb.Condition{
					uuidIs(p.UUID),
					// still ours when the transaction runs
					ovsdb.NewCondition("external_ids", ovsdb.ConditionIncludes, strMap(owner)),
				}}, 1)
		}
		if f := st.portInterface(p); f != nil && f.UUID != "" && mtuRequestOf(f) != ps.MTURequest {
			ch.SetMTU = append(ch.SetMTU, ps.Name)
			t.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: model.InterfaceTable,
				Row: ovsdb.Row{"mtu_request": mtuRequestValue(ps.MTURequest)},
				Where: []ovsdb.Condition{
					uuidIs(f.UUID),
					ovsdb.NewCondition("name", ovsdb.ConditionEqual, ps.Name),
				}}, 1)
		}
	}
	return add, nil
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
		t.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: model.BridgeTable,
			Where:     []ovsdb.Condition{uuidIs(br.UUID)},
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("ports", ovsdb.MutateOperationDelete, uuidSet(uuids...))}}, -1)
	}
}

// planNewPorts inserts a port and its interface for each port to add and
// returns the ports' named UUIDs, for the bridge to reference.
func planNewPorts(add []PortSpec, ch *Change, t *txn, owner map[string]string) []string {
	var portRefs []string
	for i, ps := range add {
		ch.AddPorts = append(ch.AddPorts, ps.Name)
		ifName, portName := fmt.Sprintf("iface%d", i), fmt.Sprintf("port%d", i)
		irow := ovsdb.Row{"name": ps.Name, "external_ids": strMap(owner)}
		if ps.MTURequest != 0 {
			irow["mtu_request"] = ps.MTURequest
		}
		t.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: model.InterfaceTable, UUIDName: ifName, Row: irow}, -1)
		row := ovsdb.Row{"name": ps.Name, "interfaces": uuidSet(ifName), "external_ids": strMap(owner)}
		if ps.Tag != 0 {
			row["tag"] = ps.Tag
		}
		if ps.VLANMode != "" {
			row["vlan_mode"] = ps.VLANMode
		}
		if len(ps.Trunks) > 0 {
			row["trunks"] = intSet(ps.Trunks)
		}
		t.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: model.PortTable, UUIDName: portName, Row: row}, -1)
		portRefs = append(portRefs, portName)
	}
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
		t.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: model.InterfaceTable, UUIDName: "brIface",
			Row: ovsdb.Row{"name": s.Bridge, "type": "internal", "external_ids": strMap(owner)}}, -1)
		t.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: model.PortTable, UUIDName: "brPort",
			Row: ovsdb.Row{"name": s.Bridge, "interfaces": uuidSet("brIface"), "external_ids": strMap(owner)}}, -1)
		row := ovsdb.Row{"name": s.Bridge, "ports": uuidSet(append([]string{"brPort"}, portRefs...)...),
			"external_ids": strMap(owner)}
		if s.DatapathType != "" {
			row["datapath_type"] = s.DatapathType
		}
		t.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: model.BridgeTable, UUIDName: "bridge", Row: row}, -1)
		t.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: model.OpenvSwitchTable,
			Where:     []ovsdb.Condition{uuidIs(st.root.UUID)},
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("bridges", ovsdb.MutateOperationInsert, uuidSet("bridge"))}}, 1)
	} else if len(portRefs) > 0 {
		// Guard: the bridge still exists when the transaction runs, or the
		// new ports would be garbage-collected unreferenced.
		t.add(ovsdb.Operation{Op: ovsdb.OperationWait, Table: model.BridgeTable, Timeout: new(int),
			Where: []ovsdb.Condition{uuidIs(br.UUID)}, Until: string(ovsdb.WaitConditionEqual),
			Columns: []string{"name"}, Rows: []ovsdb.Row{{"name": br.Name}}}, -1)
		t.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: model.BridgeTable,
			Where:     []ovsdb.Condition{uuidIs(br.UUID)},
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("ports", ovsdb.MutateOperationInsert, uuidSet(portRefs...))}}, 1)
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
		t.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: model.OpenvSwitchTable,
			Where: []ovsdb.Condition{uuidIs(st.root.UUID)},
			Mutations: []ovsdb.Mutation{
				*ovsdb.NewMutation("other_config", ovsdb.MutateOperationDelete, ovsdb.OvsSet{GoSet: []any{HWOffloadKey}}),
				*ovsdb.NewMutation("other_config", ovsdb.MutateOperationInsert, strMap(map[string]string{HWOffloadKey: "true"})),
			}}, 1)
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

// tagValue is the Port.tag column value: an empty set for untagged.
func tagValue(tag int) any {
	if tag == 0 {
		return ovsdb.OvsSet{GoSet: []any{}}
	}
	return tag
}

func vlanModeOf(p *model.Port) string {
	if p.VLANMode == nil {
		return ""
	}
	return *p.VLANMode
}

// vlanModeValue is the Port.vlan_mode column value: an empty set for unset.
func vlanModeValue(m string) any {
	if m == "" {
		return ovsdb.OvsSet{GoSet: []any{}}
	}
	return m
}

// trunksOf is Port.trunks, sorted.
func trunksOf(p *model.Port) []int {
	out := append([]int(nil), p.Trunks...)
	sort.Ints(out)
	return out
}

func intSet(v []int) ovsdb.OvsSet {
	s := ovsdb.OvsSet{GoSet: make([]any, len(v))}
	for i, n := range v {
		s.GoSet[i] = n
	}
	return s
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

// mtuRequestValue is the Interface.mtu_request column value: an empty set
// for unset.
func mtuRequestValue(mtu int) any {
	if mtu == 0 {
		return ovsdb.OvsSet{GoSet: []any{}}
	}
	return mtu
}
