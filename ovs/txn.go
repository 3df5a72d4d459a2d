package ovs

import (
	"context"
	"fmt"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/client"
	lmodel "github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/internal/crashpoint"
	"github.com/vflag/vflag/ovs/model"
)

// txn is a write transaction planned from a read: what to write, in order,
// as builders of libovsdb's typed API (Where/WhereAll with Update, Mutate,
// Wait on the models of ovs/model) and the inserts of new rows (insert.go),
// not yet operations. The typed API maps models to rows through the
// connected client's database model (the server's schema), so the
// operations are built only in commit, after lib connected the client: a
// plan that finds nothing to write (or a PlanStatus, which drops its txn)
// never connects it.
type txn struct {
	ops []pendingOp
}

// pendingOp builds operations with the typed API; each must report expect
// rows (-1: any).
type pendingOp struct {
	build  func(api client.API) ([]ovsdb.Operation, error)
	expect int
}

func (t *txn) add(expect int, build func(api client.API) ([]ovsdb.Operation, error)) {
	t.ops = append(t.ops, pendingOp{build: build, expect: expect})
}

func (t *txn) empty() bool { return len(t.ops) == 0 }

// build returns the transaction's operations and the row count each must
// report.
func (t *txn) build(api client.API) ([]ovsdb.Operation, []int, error) {
	ops := make([]ovsdb.Operation, 0, len(t.ops)+2)
	expect := make([]int, 0, len(t.ops)+2)
	for _, p := range t.ops {
		built, err := p.build(api)
		if err == nil && p.expect >= 0 && len(built) != 1 {
			err = fmt.Errorf("%d operations built, want 1 (a row count is expected)", len(built))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("build operation %d: %w", len(ops), err)
		}
		for range built {
			expect = append(expect, p.expect)
		}
		ops = append(ops, built...)
	}
	return ops, expect, nil
}

// commit builds t's operations (connecting libovsdb's client first), adds
// the increment of next_cfg (so WaitApplied can tell when ovs-vswitchd has
// applied this transaction) and its select, sends the transaction and
// checks every result.
func (c *Client) commit(ctx context.Context, t *txn, root string) error {
	if c.beforeCommit != nil {
		c.beforeCommit()
	}
	db, err := c.lib(ctx)
	if err != nil {
		return err
	}
	t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
		m := &model.OpenvSwitch{UUID: root}
		return api.Where(m).Mutate(m, lmodel.Mutation{Field: &m.NextCfg, Mutator: ovsdb.MutateOperationAdd, Value: 1})
	})
	ops, expect, err := t.build(db)
	if err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	// Raw: libovsdb's typed API has no select (List and Get read its
	// cache); the value of next_cfg this transaction produced is in its
	// own reply only.
	ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: model.OpenvSwitchTable,
		Where:   []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: root})},
		Columns: []string{"next_cfg"}})
	expect = append(expect, -1)

	if err := ctx.Err(); err != nil {
		return fmt.Errorf("transaction: not sent: %w", err)
	}
	c.txns.Add(1)
	// A transaction sent is committed by ovsdb-server whether or not its
	// caller still waits: a cancelled wait (an interrupt, another group's
	// failure) would report a change that then appears after the rollback
	// looked for it. So the reply is awaited past the caller's
	// cancellation, for at most txnReplyWait.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txnReplyWait)
	defer cancel()
	res, err := db.Transact(tctx, ops...)
	crashpoint.Wrote(fmt.Sprintf("ovsdb: transaction of %d operations", len(ops)))
	if err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	if err := checkResults(res, ops, expect); err != nil {
		return err
	}
	last := res[len(ops)-1]
	if len(last.Rows) != 1 {
		return fmt.Errorf("transaction: next_cfg select returned %d rows", len(last.Rows))
	}
	next, ok := toInt(last.Rows[0]["next_cfg"])
	if !ok {
		return fmt.Errorf("transaction: next_cfg is %T", last.Rows[0]["next_cfg"])
	}
	c.cfgMu.Lock()
	c.wantCfg = max(c.wantCfg, next)
	c.cfgMu.Unlock()
	return nil
}

// checkResults checks each operation's result, and its row count against
// expect.
func checkResults(res []ovsdb.OperationResult, ops []ovsdb.Operation, expect []int) error {
	if opErrs, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		var msgs []string
		for _, e := range opErrs {
			if op := e.Operation(); op != nil {
				msgs = append(msgs, fmt.Sprintf("%s %s: %v", op.Op, op.Table, e))
			} else {
				msgs = append(msgs, e.Error())
			}
		}
		if len(msgs) > 0 {
			return fmt.Errorf("transaction of %d operations failed: %w: %s", len(ops), err, strings.Join(msgs, "; "))
		}
		return fmt.Errorf("transaction of %d operations failed: %w", len(ops), err)
	}
	for i, want := range expect {
		if want >= 0 && res[i].Count != want {
			return fmt.Errorf("transaction: %s %s touched %d rows, want %d", ops[i].Op, ops[i].Table, res[i].Count, want)
		}
	}
	return nil
}

// retag updates the VLAN columns of port uuid (all three together) to
// ps's, while the port still carries vflag-owner=owner (else 0 rows: an
// error after the commit).
func (t *txn) retag(uuid, owner string, ps PortSpec) {
	tag, mode, trunks := optInt(ps.Tag), optString(ps.VLANMode), ps.Trunks
	t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
		m := &model.Port{Tag: tag, VLANMode: mode, Trunks: trunks}
		return guarded(2)(api.WhereAll(m, is(&m.UUID, uuid), ownerMark(&m.ExternalIDs, ovsdb.ConditionIncludes, owner)).
			Update(m, &m.Tag, &m.VLANMode, &m.Trunks))
	})
}

// guardOwned adds a wait that aborts the transaction if port p still exists
// but no longer carries vflag-owner=owner when the transaction runs (another
// client took it over or dropped the mark since the read). A port already
// gone passes: removing it is done.
func (t *txn) guardOwned(p *model.Port, owner string) {
	op := portOwnedGuard(p.UUID, owner)
	t.add(-1, func(client.API) ([]ovsdb.Operation, error) { return []ovsdb.Operation{op}, nil })
}

// portOwnedGuard is guardOwned's wait, built directly: a bridge's undo
// guards each of its ports, and libovsdb's WhereAll and Wait took 1.7 ms
// for 129 of them. With timeout 0, the transaction aborts unless the rows
// of Port whose _uuid is uuid and whose external_ids exclude the owner's
// mark differ from [{_uuid: uuid}], i.e. unless that port is gone or still
// marked. TestPortOwnedGuardMatchesLibovsdb holds it to what WhereAll and
// Wait make of the same conditions.
func portOwnedGuard(uuid, owner string) ovsdb.Operation {
	ref := ovsdb.UUID{GoUUID: uuid}
	return ovsdb.Operation{Op: ovsdb.OperationWait, Table: model.PortTable, Timeout: new(int),
		Where: []ovsdb.Condition{
			{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ref},
			{Column: "external_ids", Function: ovsdb.ConditionExcludes, Value: ovsdb.OvsMap{GoMap: map[any]any{OwnerKey: owner}}},
		},
		Until: string(ovsdb.WaitConditionNotEqual), Columns: []string{"_uuid"}, Rows: []ovsdb.Row{{"_uuid": ref}}}
}

// setOtherConfigIf sets other_config:key of the Open_vSwitch row root to
// *value (nil: removes it) only while it holds ifValue (a guard: someone
// who changed it since wins, the operation then touching 0 rows).
func (t *txn) setOtherConfigIf(root, key string, value *string, ifValue string) {
	t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
		m := &model.OpenvSwitch{}
		return guarded(2)(api.WhereAll(m, is(&m.UUID, root),
			lmodel.Condition{Field: &m.OtherConfig, Function: ovsdb.ConditionIncludes, Value: map[string]string{key: ifValue}}).
			Mutate(m, setOtherConfig(m, key, value)...))
	})
}

// mutateRoot mutates the Open_vSwitch row root.
func mutateRoot(api client.API, root string, mut func(m *model.OpenvSwitch) []lmodel.Mutation) ([]ovsdb.Operation, error) {
	m := &model.OpenvSwitch{UUID: root}
	return api.Where(m).Mutate(m, mut(m)...)
}

// mutateBridgePorts inserts or deletes (mutator) port UUIDs (or named
// UUIDs) in the ports of bridge uuid.
func mutateBridgePorts(api client.API, uuid string, mutator ovsdb.Mutator, ports []string) ([]ovsdb.Operation, error) {
	m := &model.Bridge{UUID: uuid}
	return api.Where(m).Mutate(m, lmodel.Mutation{Field: &m.Ports, Mutator: mutator, Value: ports})
}

// setOtherConfig are the mutations that set other_config:key to *value
// (nil: remove it) in m.
func setOtherConfig(m *model.OpenvSwitch, key string, value *string) []lmodel.Mutation {
	muts := []lmodel.Mutation{{Field: &m.OtherConfig, Mutator: ovsdb.MutateOperationDelete, Value: []string{key}}}
	if value != nil {
		muts = append(muts, lmodel.Mutation{Field: &m.OtherConfig, Mutator: ovsdb.MutateOperationInsert, Value: map[string]string{key: *value}})
	}
	return muts
}

// guarded checks that each operation kept the n conditions of its
// WhereAll. libovsdb evaluates explicit conditions against its cache first
// and, on a hit, replaces them by the _uuid of the rows it found. This
// client's cache holds only the Open_vSwitch row's next_cfg and cur_cfg
// (the monitor of lib), so a condition on another column (a guard: the
// owner's mark, other_config:hw-offload) never matches it and is sent as
// written; guarded makes sure of that, so that a guard is never dropped
// silently.
func guarded(n int) func([]ovsdb.Operation, error) ([]ovsdb.Operation, error) {
	return func(ops []ovsdb.Operation, err error) ([]ovsdb.Operation, error) {
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			if len(op.Where) != n {
				return nil, fmt.Errorf("%s %s: %d conditions, want %d: libovsdb replaced the guard", op.Op, op.Table, len(op.Where), n)
			}
		}
		return ops, nil
	}
}

// is is the condition field == value.
func is(field, value any) lmodel.Condition {
	return lmodel.Condition{Field: field, Function: ovsdb.ConditionEqual, Value: value}
}

// ownerMark is the condition that the external_ids field holds (includes)
// or does not hold (excludes) vflag-owner=owner.
func ownerMark(field *map[string]string, f ovsdb.ConditionFunction, owner string) lmodel.Condition {
	return lmodel.Condition{Field: field, Function: f, Value: map[string]string{OwnerKey: owner}}
}

// optInt is an optional integer column's value: nil (empty) for 0.
func optInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// optString is an optional string column's value: nil (empty) for "".
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		return int(n), true
	case int:
		return n, true
	case int64:
		return int(n), true
	}
	return 0, false
}
