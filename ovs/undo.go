package ovs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/client"
	lmodel "github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
)

// Undo reverses what r records, in one transaction:
//   - deletes the ports named in r that still carry vflag-owner=r.Owner;
//   - deletes the bridge if r.BridgeCreated, it carries vflag-owner=r.Owner and
//     no port is left on it but its own internal port (named like the bridge);
//   - restores hw-offload to r.PriorHWOffload (nil: removes the key) if
//     r.HWOffloadSet and the value is still "true".
//
// Anything already gone counts as undone; Undo is repeatable. Rows vflag does
// not own are never touched.
func (c *Client) Undo(ctx context.Context, r Record) error {
	return c.undo(ctx, r, false)
}

// UndoOwned is Undo with r.Ports replaced by every port on r.Bridge that
// carries vflag-owner=r.Owner, but the bridge's own internal port: the ports
// a later Ensure added are removed too. The ports are found in the same read
// the transaction is computed from.
func (c *Client) UndoOwned(ctx context.Context, r Record) error {
	return c.undo(ctx, r, true)
}

// RemoveOwned removes owner's ports from bridge (all of them, whatever
// record listed them, but the bridge's own internal port), and the bridge
// itself if its row carries vflag-owner=owner and no other port is left on
// it but that internal port. With a port of anyone else left (no mark or
// another owner's), the bridge stays and only owner's ports go. It never
// touches hw-offload. One transaction, whose results are checked; a bridge
// already gone is success, and a port that lost owner's mark since the read
// aborts the transaction instead of being removed.
//
// It prunes a bridge the config renamed: run it before Ensure creates the
// new bridge, so that the netdevs (bond, representors) are released from the
// old one first; a netdev can be a port of only one bridge.
func (c *Client) RemoveOwned(ctx context.Context, owner, bridge string) error {
	if owner == "" {
		return fmt.Errorf("ovs: remove %s from bridge %s: empty owner", owner, bridge)
	}
	if bridge == "" {
		return fmt.Errorf("ovs: remove %s from bridge: empty bridge name", owner)
	}
	return c.undoAs(ctx, fmt.Sprintf("remove %s from bridge %s", owner, bridge),
		Record{Owner: owner, Bridge: bridge, BridgeCreated: true}, true)
}

// OwnedBridges returns, sorted, the bridges whose row carries
// vflag-owner=owner or that hold a port carrying it.
func (c *Client) OwnedBridges(ctx context.Context, owner string) ([]string, error) {
	if owner == "" {
		return nil, fmt.Errorf("ovs: bridges of owner: empty owner")
	}
	st, err := c.read(ctx, undoView)
	if err != nil {
		return nil, fmt.Errorf("ovs: bridges of owner %s: %w", owner, err)
	}
	var out []string
	for name, b := range st.bridges {
		owned := ownedBy(b.ExternalIDs, owner)
		for _, pu := range b.Ports {
			if owned {
				break
			}
			if p := st.portByUUID[pu]; p != nil && ownedBy(p.ExternalIDs, owner) {
				owned = true
			}
		}
		if owned {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (c *Client) undo(ctx context.Context, r Record, owned bool) error {
	return c.undoAs(ctx, "undo bridge "+r.Bridge, r, owned)
}

// undoAs runs Undo (owned: UndoOwned) of r; what names the operation in
// errors.
func (c *Client) undoAs(ctx context.Context, what string, r Record, owned bool) error {
	if r.Owner == "" {
		return fmt.Errorf("ovs: %s: record without owner", what)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.read(ctx, undoView)
	if err != nil {
		return fmt.Errorf("ovs: %s: %w", what, err)
	}
	if owned {
		r.Ports = nil
		if b := st.bridges[r.Bridge]; b != nil {
			for _, pu := range b.Ports {
				if p := st.portByUUID[pu]; p != nil && p.Name != r.Bridge && ownedBy(p.ExternalIDs, r.Owner) {
					r.Ports = append(r.Ports, p.Name)
				}
			}
		}
	}
	t := undoTxn(st, r)
	if t.empty() {
		return nil
	}
	if err := c.commit(ctx, t, st.root.UUID); err != nil {
		return fmt.Errorf("ovs: %s: %w", what, err)
	}
	return nil
}

func undoTxn(st *state, r Record) *txn {
	t := &txn{}
	if st.root == nil {
		// No root row: no bridge can exist (bridges are garbage collected
		// when unreferenced) and there is no other_config to restore.
		return t
	}

	// Ports to delete, grouped by the bridge holding them.
	del := map[string][]string{} // bridge UUID -> port UUIDs
	deleted := map[string]bool{}
	var order []string
	for _, name := range r.Ports {
		p := st.ports[name]
		if p == nil || deleted[p.UUID] || !ownedBy(p.ExternalIDs, r.Owner) {
			continue
		}
		b := st.portBridge[p.UUID]
		if b == nil {
			continue
		}
		if _, ok := del[b.UUID]; !ok {
			order = append(order, b.UUID)
		}
		del[b.UUID] = append(del[b.UUID], p.UUID)
		deleted[p.UUID] = true
		t.guardOwned(p, r.Owner)
	}

	if br := st.bridges[r.Bridge]; r.BridgeCreated && br != nil && ownedBy(br.ExternalIDs, r.Owner) {
		empty := true
		for _, pu := range br.Ports {
			if deleted[pu] {
				continue
			}
			if p := st.portByUUID[pu]; p == nil || p.Name != r.Bridge {
				empty = false
				break
			}
		}
		if empty {
			// Guard: the bridge still has exactly the ports we saw. Removing it
			// from Open_vSwitch.bridges garbage-collects the bridge, its ports
			// and their interfaces.
			bu, ports, root := br.UUID, br.Ports, st.root.UUID
			t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
				row := &model.Bridge{Ports: ports}
				return api.Where(&model.Bridge{UUID: bu}).Wait(ovsdb.WaitConditionEqual, new(int), row, &row.Ports)
			})
			t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
				return mutateRoot(api, root, func(m *model.OpenvSwitch) []lmodel.Mutation {
					return []lmodel.Mutation{{Field: &m.Bridges, Mutator: ovsdb.MutateOperationDelete, Value: []string{bu}}}
				})
			})
			delete(del, br.UUID)
		}
	}
	for _, bu := range order {
		ports, ok := del[bu]
		if !ok {
			continue
		}
		// A bridge gone meanwhile holds nothing any more: any count is fine.
		t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
			return mutateBridgePorts(api, bu, ovsdb.MutateOperationDelete, ports)
		})
	}

	if cur, _ := otherConfig(st, HWOffloadKey); r.HWOffloadSet && cur == "true" {
		// Only while the value is still "true"; someone who changed it since
		// wins (count 0).
		t.setOtherConfigIf(st.root.UUID, HWOffloadKey, r.PriorHWOffload, "true")
	}
	return t
}

// OtherConfig returns Open_vSwitch other_config (empty without the root row).
//
//	ovs-vsctl get Open_vSwitch . other_config
func (c *Client) OtherConfig(ctx context.Context) (map[string]string, error) {
	st, err := c.read(ctx, rootView)
	if err != nil {
		return nil, fmt.Errorf("ovs: read other_config: %w", err)
	}
	out := map[string]string{}
	if st.root != nil {
		for k, v := range st.root.OtherConfig {
			out[k] = v
		}
	}
	return out, nil
}

// SetOtherConfig sets Open_vSwitch other_config:key to *value (nil removes
// the key) in one transaction. With ifValue non-nil the write happens only
// while the key still holds *ifValue (an undo: someone who changed it
// since wins); it is then no error that nothing was written.
//
//	ovs-vsctl set Open_vSwitch . other_config:$key=$value   (remove Open_vSwitch . other_config $key)
func (c *Client) SetOtherConfig(ctx context.Context, key string, value, ifValue *string) error {
	if key == "" {
		return fmt.Errorf("ovs: set other_config: empty key")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.read(ctx, rootView)
	if err != nil {
		return fmt.Errorf("ovs: set other_config:%s: %w", key, err)
	}
	if st.root == nil {
		return fmt.Errorf("ovs: set other_config:%s: %w", key, errNoRoot)
	}
	cur, ok := st.root.OtherConfig[key]
	if ifValue != nil && (!ok || cur != *ifValue) {
		return nil
	}
	if (value == nil && !ok) || (value != nil && ok && cur == *value) {
		return nil
	}
	t := &txn{}
	if ifValue != nil {
		t.setOtherConfigIf(st.root.UUID, key, value, *ifValue)
	} else {
		root := st.root.UUID
		t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
			return mutateRoot(api, root, func(m *model.OpenvSwitch) []lmodel.Mutation { return setOtherConfig(m, key, value) })
		})
	}
	if err := c.commit(ctx, t, st.root.UUID); err != nil {
		return fmt.Errorf("ovs: set other_config:%s: %w", key, err)
	}
	return nil
}

// ExternalIDs returns Open_vSwitch external_ids (empty without the root
// row): the chassis settings of OVN (system-id, ovn-remote, ...).
//
//	ovs-vsctl get Open_vSwitch . external_ids
func (c *Client) ExternalIDs(ctx context.Context) (map[string]string, error) {
	st, err := c.read(ctx, rootIDsView)
	if err != nil {
		return nil, fmt.Errorf("ovs: read external_ids: %w", err)
	}
	out := map[string]string{}
	if st.root != nil {
		for k, v := range st.root.ExternalIDs {
			out[k] = v
		}
	}
	return out, nil
}

// SetExternalID sets Open_vSwitch external_ids:key to *value (nil removes
// the key) in one transaction, as SetOtherConfig does other_config's;
// with ifValue non-nil, only while the key still holds *ifValue.
//
//	ovs-vsctl set Open_vSwitch . external_ids:$key=$value   (remove Open_vSwitch . external_ids $key)
func (c *Client) SetExternalID(ctx context.Context, key string, value, ifValue *string) error {
	if key == "" {
		return fmt.Errorf("ovs: set external_ids: empty key")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.read(ctx, rootIDsView)
	if err != nil {
		return fmt.Errorf("ovs: set external_ids:%s: %w", key, err)
	}
	if st.root == nil {
		return fmt.Errorf("ovs: set external_ids:%s: %w", key, errNoRoot)
	}
	cur, ok := st.root.ExternalIDs[key]
	if ifValue != nil && (!ok || cur != *ifValue) {
		return nil
	}
	if (value == nil && !ok) || (value != nil && ok && cur == *value) {
		return nil
	}
	root := st.root.UUID
	t := &txn{}
	t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
		m := &model.OpenvSwitch{}
		conds := []lmodel.Condition{is(&m.UUID, root)}
		if ifValue != nil {
			conds = append(conds, lmodel.Condition{Field: &m.ExternalIDs, Function: ovsdb.ConditionIncludes, Value: map[string]string{key: *ifValue}})
		}
		muts := []lmodel.Mutation{{Field: &m.ExternalIDs, Mutator: ovsdb.MutateOperationDelete, Value: []string{key}}}
		if value != nil {
			muts = append(muts, lmodel.Mutation{Field: &m.ExternalIDs, Mutator: ovsdb.MutateOperationInsert, Value: map[string]string{key: *value}})
		}
		return guarded(len(conds))(api.WhereAll(m, conds...).Mutate(m, muts...))
	})
	if err := c.commit(ctx, t, root); err != nil {
		return fmt.Errorf("ovs: set external_ids:%s: %w", key, err)
	}
	return nil
}

// InterfaceIDs returns the external_ids of the interfaces named, by name
// (an interface that does not exist is not in the map).
//
//	ovs-vsctl get Interface $name external_ids
func (c *Client) InterfaceIDs(ctx context.Context, names []string) (map[string]map[string]string, error) {
	st, err := c.read(ctx, ifaceIDsView)
	if err != nil {
		return nil, fmt.Errorf("ovs: read interfaces' external_ids: %w", err)
	}
	out := make(map[string]map[string]string, len(names))
	for _, n := range names {
		if f := st.ifaces[n]; f != nil {
			out[n] = f.ExternalIDs
		}
	}
	return out, nil
}

// BridgeSettings are an existing bridge's fail_mode and other_config,
// with Exists false when there is no such bridge.
type BridgeSettings struct {
	Exists      bool
	Owner       string
	FailMode    string
	OtherConfig map[string]string
}

// Bridge reads a bridge's fail_mode, other_config and owner's mark.
//
//	ovs-vsctl get Bridge $br fail_mode other_config external_ids
func (c *Client) Bridge(ctx context.Context, name string) (BridgeSettings, error) {
	st, err := c.readWhere(ctx, bridgeSettingsView, map[string][]ovsdb.Condition{
		model.BridgeTable: {ovsdb.NewCondition("name", ovsdb.ConditionEqual, name)}})
	if err != nil {
		return BridgeSettings{}, fmt.Errorf("ovs: read bridge %s: %w", name, err)
	}
	b := st.bridges[name]
	if b == nil {
		return BridgeSettings{}, nil
	}
	out := BridgeSettings{Exists: true, Owner: b.ExternalIDs[OwnerKey], OtherConfig: b.OtherConfig}
	if b.FailMode != nil {
		out.FailMode = *b.FailMode
	}
	return out, nil
}

// SetInterfaceID sets external_ids:key of the Interface named iface to
// *value (nil removes the key), guarded by the interface still having
// that name; an interface that does not exist is no error. It is what
// ovn-controller does with ovn-installed (the simulated host's model of
// it writes through it).
//
//	ovs-vsctl set Interface $iface external_ids:$key=$value   (remove Interface $iface external_ids $key)
func (c *Client) SetInterfaceID(ctx context.Context, iface, key string, value *string) error {
	if key == "" {
		return fmt.Errorf("ovs: set interface external_ids: empty interface or key")
	}
	return c.SetInterfaceIDs(ctx, iface, map[string]*string{key: value})
}

// SetInterfaceIDs sets several external_ids keys of the Interface named
// iface in one transaction: each key to *value, a nil value removing the
// key; guarded by the interface still having that name. An interface that
// does not exist is no error; keys already as wanted are not written.
//
//	ovs-vsctl set Interface $iface external_ids:$k1=$v1 ... -- remove Interface $iface external_ids $k2 ...
func (c *Client) SetInterfaceIDs(ctx context.Context, iface string, values map[string]*string) error {
	what := "external_ids:" + strings.Join(slices.Sorted(maps.Keys(values)), ",")
	if iface == "" || len(values) == 0 {
		return fmt.Errorf("ovs: set interface external_ids: empty interface or keys")
	}
	for k := range values {
		if k == "" {
			return fmt.Errorf("ovs: set interface external_ids: empty key")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.readWhere(ctx, view{model.OpenvSwitchTable: {"_uuid"}, model.InterfaceTable: ifaceIDsView[model.InterfaceTable]},
		map[string][]ovsdb.Condition{model.InterfaceTable: {ovsdb.NewCondition("name", ovsdb.ConditionEqual, iface)}})
	if err != nil {
		return fmt.Errorf("ovs: set %s of %s: %w", what, iface, err)
	}
	f := st.ifaces[iface]
	if f == nil {
		return nil
	}
	var del []string
	ins := map[string]string{}
	for k, v := range values {
		cur, ok := f.ExternalIDs[k]
		if (v == nil && !ok) || (v != nil && ok && cur == *v) {
			continue
		}
		del = append(del, k)
		if v != nil {
			ins[k] = *v
		}
	}
	if len(del) == 0 {
		return nil
	}
	sort.Strings(del)
	uuid := f.UUID
	t := &txn{}
	t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
		m := &model.Interface{}
		muts := []lmodel.Mutation{{Field: &m.ExternalIDs, Mutator: ovsdb.MutateOperationDelete, Value: del}}
		if len(ins) > 0 {
			muts = append(muts, lmodel.Mutation{Field: &m.ExternalIDs, Mutator: ovsdb.MutateOperationInsert, Value: ins})
		}
		return guarded(2)(api.WhereAll(m, is(&m.UUID, uuid), is(&m.Name, iface)).Mutate(m, muts...))
	})
	if st.root == nil {
		return fmt.Errorf("ovs: set %s of %s: %w", what, iface, errNoRoot)
	}
	if err := c.commit(ctx, t, st.root.UUID); err != nil {
		return fmt.Errorf("ovs: set %s of %s: %w", what, iface, err)
	}
	return nil
}
