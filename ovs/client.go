package ovs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	lmodel "github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
)

// Client is a connection to one OVSDB server (the Open_vSwitch database)
// with a monitor cache of Open_vSwitch next_cfg and cur_cfg; the Bridge,
// Port and Interface rows are read when needed, in one select transaction. Its methods may be called from several goroutines; Ensure and Undo
// are serialized.
type Client struct {
	endpoint string
	sel      *selectConn // reads (nil for ssl:, whose reads go through db)

	libMu sync.Mutex
	db    client.Client // writes, waits, the next_cfg monitor: lib connects it on first use
	// closed: Close ran; lib connects no more (a warmLib still under way
	// when the caller closed would leave its connection open).
	closed bool

	preMu   sync.Mutex
	pre     *prefetch    // Prefetch's read, until PlanStatus or Status takes it
	planned *plannedRead // the read of the last Plan that found a change, until Ensure takes it

	mu sync.Mutex // serializes read-compute-write in Ensure and Undo

	cfgMu   sync.Mutex
	wantCfg int           // highest next_cfg our own transactions produced
	cfgWake chan struct{} // closed (and replaced) on every Open_vSwitch update of the cache: wakes every waiter

	txns  atomic.Int64 // transactions sent (for tests)
	reads atomic.Int64 // reads of the bridge tables sent: Reads

	beforeCommit func() // tests: runs between the read and the write

	waitLog  *slog.Logger // SetWaitLog
	waitHint string
}

// waitQuiet is how long WaitApplied waits before it says what it waits for:
// ovs-vswitchd applies a change within milliseconds when it runs.
const waitQuiet = time.Second

// txnReplyWait bounds the wait for a transaction's reply once it is sent
// (Txn: not cut short by the caller's cancellation).
const txnReplyWait = 30 * time.Second

// SetWaitLog makes WaitApplied and WaitOFPorts log, once per wait that does
// not end at once (a warning), what they wait for, for how long at most,
// and hint: where the operator should look (the caller knows where the
// netdevs live; this package does not).
func (c *Client) SetWaitLog(log *slog.Logger, hint string) {
	c.waitLog, c.waitHint = log, hint
}

// logWait logs the start of a wait that lasts (SetWaitLog).
func (c *Client) logWait(ctx context.Context, msg string, args ...any) {
	if c.waitLog == nil {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left >= time.Second {
			left = left.Round(time.Second)
		}
		args = append(args, "bound", left.Round(10*time.Millisecond).String())
	}
	if c.waitHint != "" {
		args = append(args, "hint", c.waitHint)
	}
	c.waitLog.Warn(msg, args...)
}

// databaseModel registers only the tables vflag touches.
func databaseModel() (lmodel.ClientDBModel, error) {
	return lmodel.NewClientDBModel("Open_vSwitch", map[string]lmodel.Model{
		model.OpenvSwitchTable: &model.OpenvSwitch{},
		model.BridgeTable:      &model.Bridge{},
		model.PortTable:        &model.Port{},
		model.InterfaceTable:   &model.Interface{},
		model.SSLTable:         &model.SSL{}, // an OVN chassis's ssl: remote
	})
}

// Connect opens endpoint ("unix:/run/openvswitch/db.sock", "tcp:1.2.3.4:6640")
// and checks that it serves the Open_vSwitch database. ctx bounds that
// check. Reads go over a select connection of their own (selectConn);
// libovsdb's client, with its monitor of the columns WaitApplied reads, is
// connected on the first write or wait (lib). An ssl: endpoint has no
// select connection: libovsdb's client is connected at once and carries
// the reads too.
func Connect(ctx context.Context, endpoint string) (*Client, error) {
	c := &Client{endpoint: endpoint, cfgWake: make(chan struct{})}
	sel, err := newSelectConn(endpoint)
	if errors.Is(err, errNoSelectConn) {
		if _, err := c.lib(ctx); err != nil {
			return nil, err
		}
		return c, nil
	}
	if err := sel.ping(ctx); err != nil {
		sel.Close()
		return nil, fmt.Errorf("ovs: connect %s: %w", endpoint, err)
	}
	c.sel = sel
	return c, nil
}

// WarmWrites connects the client's writing side (libovsdb's client) in the
// background, for a caller that will write whatever it reads (down).
func (c *Client) WarmWrites(ctx context.Context) { c.warmLib(ctx) }

// warmLib connects libovsdb's client in the background: a plan that found
// a change to write calls it, so that the connection (the schema fetched,
// the monitor set up: ~5 ms) overlaps what the caller does before Ensure.
// A failure is not kept: the write connects again and reports it.
func (c *Client) warmLib(ctx context.Context) {
	c.libMu.Lock()
	ready := c.db != nil
	c.libMu.Unlock()
	if !ready {
		go func() { _, _ = c.lib(ctx) }()
	}
}

// lib is libovsdb's client, connected on first use with a monitor of
// Open_vSwitch next_cfg and cur_cfg (WaitApplied). ctx bounds the
// connection and the monitor's initial snapshot.
func (c *Client) lib(ctx context.Context) (client.Client, error) {
	c.libMu.Lock()
	defer c.libMu.Unlock()
	if c.db != nil {
		return c.db, nil
	}
	if c.closed {
		return nil, fmt.Errorf("ovs: connect %s: the client is closed", c.endpoint)
	}
	dbm, err := databaseModel()
	if err != nil {
		return nil, fmt.Errorf("ovs: connect %s: database model: %w", c.endpoint, err)
	}
	db, err := client.NewOVSDBClient(dbm, client.WithEndpoint(c.endpoint))
	if err != nil {
		return nil, fmt.Errorf("ovs: connect %s: %w", c.endpoint, err)
	}
	if err := db.Connect(ctx); err != nil {
		return nil, fmt.Errorf("ovs: connect %s: %w", c.endpoint, err)
	}
	poke := func(table string) {
		if table != model.OpenvSwitchTable {
			return
		}
		c.cfgMu.Lock()
		close(c.cfgWake)
		c.cfgWake = make(chan struct{})
		c.cfgMu.Unlock()
	}
	db.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, _ lmodel.Model) { poke(table) },
		UpdateFunc: func(table string, _, _ lmodel.Model) { poke(table) },
	})

	// The monitor covers only what WaitApplied waits on (one row). Reads
	// select the rows they need in a transaction of their own (read): a
	// monitor of the Bridge, Port and Interface tables would make every
	// connect decode and cache all their rows, and every write of many
	// ports wait until this client had decoded and cached the update
	// ovsdb-server sends ahead of the reply.
	ovs := &model.OpenvSwitch{}
	mon := db.NewMonitor(client.WithTable(ovs, &ovs.NextCfg, &ovs.CurCfg))
	if _, err := db.Monitor(ctx, mon); err != nil {
		db.Close()
		return nil, fmt.Errorf("ovs: connect %s: monitor: %w", c.endpoint, err)
	}
	c.db = db
	return db, nil
}

// Close closes the connections.
func (c *Client) Close() {
	if c.sel != nil {
		c.sel.Close()
	}
	c.libMu.Lock()
	defer c.libMu.Unlock()
	c.closed = true
	if c.db != nil {
		c.db.Close()
	}
}

// state is a consistent view of the tables read.
type state struct {
	root        *model.OpenvSwitch // nil: no Open_vSwitch row (ovs-vsctl init never ran)
	bridges     map[string]*model.Bridge
	ports       map[string]*model.Port // by name
	portByUUID  map[string]*model.Port
	portBridge  map[string]*model.Bridge    // port UUID -> bridge holding it
	ifaces      map[string]*model.Interface // by name
	ifaceByUUID map[string]*model.Interface // empty unless the view reads Interface _uuid
}

// view names the columns a read selects, per table. Each read selects only what its caller uses: every
// value of the reply is decoded (for a few hundred ports, most of a read's
// cost), and row counts grow with the representors.
type view map[string][]string

var (
	// planView: what plan uses. Interfaces: by name (a wanted
	// port name held by another port's interface) and the mtu_request of
	// the port's interface.
	planView = view{
		model.OpenvSwitchTable: {"_uuid", "other_config"},
		model.BridgeTable:      {"_uuid", "name", "ports", "external_ids"},
		model.PortTable:        {"_uuid", "name", "interfaces", "tag", "vlan_mode", "trunks", "external_ids"},
		model.InterfaceTable:   {"_uuid", "name", "mtu_request", "external_ids", "type", "options"},
	}
	// undoView: what undoTxn and OwnedBridges use: the bridges, their
	// ports' names and marks, hw-offload; no interface.
	undoView = view{
		model.OpenvSwitchTable: {"_uuid", "other_config"},
		model.BridgeTable:      {"_uuid", "name", "ports", "external_ids"},
		model.PortTable:        {"_uuid", "name", "external_ids"},
	}
	// planStatusView is planView and statusView in one read: a plan that
	// also returns the bridge as Status reports it (PlanStatus).
	planStatusView = view{
		model.OpenvSwitchTable: {"_uuid", "other_config"},
		model.BridgeTable:      {"_uuid", "name", "ports", "external_ids"},
		model.PortTable:        {"_uuid", "name", "interfaces", "tag", "vlan_mode", "trunks", "external_ids"},
		model.InterfaceTable:   {"_uuid", "name", "ofport", "error", "mtu", "mtu_request", "external_ids", "type", "options"},
	}
	// cfgView: the Open_vSwitch row's next_cfg and cur_cfg (WaitApplied).
	cfgView = view{model.OpenvSwitchTable: {"_uuid", "next_cfg", "cur_cfg"}}
	// rootView: the Open_vSwitch row's other_config alone (other_config
	// reads and writes: no bridge, port or interface row decoded).
	rootView = view{model.OpenvSwitchTable: {"_uuid", "other_config"}}
	// rootIDsView: the Open_vSwitch row's external_ids alone (OVN's
	// chassis settings).
	rootIDsView = view{model.OpenvSwitchTable: {"_uuid", "external_ids"}}
	// ifaceIDsView: every interface's name and external_ids (OVN's
	// bindings and ovn-installed).
	ifaceIDsView = view{model.InterfaceTable: {"_uuid", "name", "external_ids"}}
	// bridgeSettingsView: a bridge's fail_mode, other_config and marks.
	bridgeSettingsView = view{model.BridgeTable: {"_uuid", "name", "fail_mode", "other_config", "external_ids"}}
	// statusView adds what Status reports: each port's interface with its
	// ofport and error.
	statusView = view{
		model.OpenvSwitchTable: {"_uuid", "other_config"},
		model.BridgeTable:      {"_uuid", "name", "ports", "external_ids"},
		model.PortTable:        {"_uuid", "name", "interfaces", "tag", "vlan_mode", "trunks", "external_ids"},
		model.InterfaceTable:   {"_uuid", "name", "ofport", "error", "mtu", "mtu_request", "type", "options"},
	}
)

// Reads is the number of reads of the Bridge, Port or Interface table
// this client has sent: what a run read of the bridges (tests,
// benchmarks). WaitApplied's select of next_cfg and cur_cfg alone is not
// counted.
func (c *Client) Reads() int64 { return c.reads.Load() }

// read returns the current state: one read-only transaction selecting the
// columns of v, so the view is consistent and includes every transaction
// committed before it (this client's own too).
func (c *Client) read(ctx context.Context, v view) (*state, error) {
	return c.readWhere(ctx, v, nil)
}

// readWhere is read with, per table, the conditions a row must meet (rows
// of other names are not sent, nor decoded).
func (c *Client) readWhere(ctx context.Context, v view, where map[string][]ovsdb.Condition) (*state, error) {
	// Only the tables the view names: a table left out is not selected
	// (its rows would all be decoded) and reads as empty.
	tables := []string{model.OpenvSwitchTable, model.BridgeTable, model.PortTable, model.InterfaceTable}
	var ops []ovsdb.Operation
	index := map[string]int{}
	for _, t := range tables {
		if cols, ok := v[t]; ok {
			index[t] = len(ops)
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: t, Columns: cols, Where: where[t]})
		}
	}
	if _, ok := v[model.PortTable]; ok {
		c.reads.Add(1)
	} else if _, ok := v[model.BridgeTable]; ok {
		c.reads.Add(1)
	}
	rows, err := c.selectRows(ctx, ops)
	if err != nil {
		return nil, fmt.Errorf("read from %s: %w", c.endpoint, err)
	}
	result := func(t string) rowSet {
		if i, ok := index[t]; ok {
			return rows[i]
		}
		return rowSet{}
	}
	roots, err := modelsOf[model.OpenvSwitch](model.OpenvSwitchTable, result(model.OpenvSwitchTable))
	if err != nil {
		return nil, err
	}
	bridges, err := modelsOf[model.Bridge](model.BridgeTable, result(model.BridgeTable))
	if err != nil {
		return nil, err
	}
	ports, err := modelsOf[model.Port](model.PortTable, result(model.PortTable))
	if err != nil {
		return nil, err
	}
	ifaces, err := modelsOf[model.Interface](model.InterfaceTable, result(model.InterfaceTable))
	if err != nil {
		return nil, err
	}
	st := &state{
		bridges:     make(map[string]*model.Bridge, len(bridges)),
		ports:       make(map[string]*model.Port, len(ports)),
		portByUUID:  make(map[string]*model.Port, len(ports)),
		portBridge:  make(map[string]*model.Bridge, len(ports)),
		ifaces:      make(map[string]*model.Interface, len(ifaces)),
		ifaceByUUID: make(map[string]*model.Interface, len(ifaces)),
	}
	switch len(roots) {
	case 0:
	case 1:
		st.root = roots[0]
	default:
		return nil, fmt.Errorf("%d Open_vSwitch rows, want 1", len(roots))
	}
	for _, b := range bridges {
		st.bridges[b.Name] = b
		for _, p := range b.Ports {
			st.portBridge[p] = b
		}
	}
	for _, p := range ports {
		st.ports[p.Name] = p
		st.portByUUID[p.UUID] = p
	}
	for _, f := range ifaces {
		st.ifaces[f.Name] = f
		if f.UUID != "" {
			st.ifaceByUUID[f.UUID] = f
		}
	}
	return st, nil
}

// rowSet is one select's rows: as JSON text from the select connection
// (wire), or in libovsdb's Go notation from its client (rows, for ssl:).
type rowSet struct {
	wire []json.RawMessage
	rows []ovsdb.Row
}

// selectRows sends the select operations as one transaction, over the
// select connection (or libovsdb's client for ssl:), and returns each
// operation's rows.
func (c *Client) selectRows(ctx context.Context, ops []ovsdb.Operation) ([]rowSet, error) {
	out := make([]rowSet, len(ops))
	if c.sel != nil {
		wire, err := c.sel.transact(ctx, ops)
		if err != nil {
			return nil, err
		}
		for i := range ops {
			out[i].wire = wire[i]
		}
		return out, nil
	}
	db, err := c.lib(ctx)
	if err != nil {
		return nil, err
	}
	res, err := db.Transact(ctx, ops...)
	if err != nil {
		return nil, err
	}
	if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		return nil, err
	}
	for i := range ops {
		out[i].rows = res[i].Rows
	}
	return out, nil
}

// modelsOf maps the rows of one select of table to its models.
func modelsOf[T any](table string, rs rowSet) ([]*T, error) {
	out := make([]*T, 0, len(rs.wire)+len(rs.rows))
	var d wireDecoder
	for i, raw := range rs.wire {
		t := new(T)
		if err := d.model(t, raw); err != nil {
			return nil, fmt.Errorf("read %s row %d of %d: %w", table, i+1, len(rs.wire), err)
		}
		out = append(out, t)
	}
	for _, row := range rs.rows {
		t := new(T)
		if err := modelFromRow(t, row); err != nil {
			u, _ := row["_uuid"].(ovsdb.UUID)
			return nil, fmt.Errorf("read %s row %s: %w", table, u.GoUUID, err)
		}
		out = append(out, t)
	}
	return out, nil
}

func (st *state) hwOffload() string {
	if st.root == nil {
		return ""
	}
	return st.root.OtherConfig[HWOffloadKey]
}

// ownedBy reports whether external_ids mark a row as owner's.
func ownedBy(ext map[string]string, owner string) bool {
	v, ok := ext[OwnerKey]
	return ok && owner != "" && v == owner
}

// WaitApplied waits until ovs-vswitchd has applied every change this client
// made so far (and any change already visible in the cache): until
// Open_vSwitch.cur_cfg >= next_cfg. It wakes on monitor updates, never polls,
// and gives up when ctx ends.
func (c *Client) WaitApplied(ctx context.Context) error {
	c.cfgMu.Lock()
	target := c.wantCfg
	c.cfgMu.Unlock()
	// One select first: when ovs-vswitchd has caught up already (a run
	// that wrote nothing, the usual case), no monitor is needed, nor
	// libovsdb's connection.
	if c.sel != nil {
		if st, err := c.read(ctx, cfgView); err == nil && st.root != nil && st.root.CurCfg >= max(target, st.root.NextCfg) {
			return nil
		}
	}
	first := true
	cur := 0
	quiet := time.NewTimer(waitQuiet)
	defer quiet.Stop()
	db, err := c.lib(ctx)
	if err != nil {
		return fmt.Errorf("ovs: wait applied: %w", err)
	}
	for {
		// The wake channel is taken before the cache is read, so that an
		// update between the read and the select still wakes this waiter
		// (several groups wait at once: a single-slot poke woke only one).
		c.cfgMu.Lock()
		wake := c.cfgWake
		c.cfgMu.Unlock()
		var roots []model.OpenvSwitch
		if err := db.List(ctx, &roots); err != nil {
			return fmt.Errorf("ovs: wait applied: read cache: %w", err)
		}
		if len(roots) == 1 {
			if first {
				target = max(target, roots[0].NextCfg)
				first = false
			}
			cur = roots[0].CurCfg
			if cur >= target {
				return nil
			}
		}
		select {
		case <-wake:
		case <-quiet.C:
			c.logWait(ctx, "waiting for ovs-vswitchd to apply the configuration: is it running, connected to "+c.endpoint+"?",
				"next_cfg", target, "cur_cfg", cur)
		case <-ctx.Done():
			return fmt.Errorf("ovs: wait for ovs-vswitchd to apply configuration %d (applied: %d): %w", target, cur, ctx.Err())
		}
	}
}

// prefetch is a read started ahead of its use (Prefetch).
type prefetch struct {
	done chan struct{}
	txns int64 // the client's transactions when it started
	st   *state
	err  error
}

// Prefetch starts, in the background, the read PlanStatus and Status make
// (the Open_vSwitch, Bridge, Port and Interface columns of planStatusView),
// so that its round trip and decoding overlap the caller's other work; the
// next PlanStatus or Status takes it, once, if this client has written
// nothing since it started, and reads afresh otherwise. The read is a
// snapshot of the moment it runs: call Prefetch only once nothing the
// caller waits for can change the database any more (vflag: after its lock
// is taken).
func (c *Client) Prefetch(ctx context.Context) {
	p := &prefetch{done: make(chan struct{}), txns: c.txns.Load()}
	c.preMu.Lock()
	c.pre = p
	c.preMu.Unlock()
	go func() {
		defer close(p.done)
		p.st, p.err = c.read(ctx, planStatusView)
	}()
}

// readPrefetched is read(ctx, v) for a view of planStatusView's columns or
// fewer: Prefetch's state when it is there and still valid, else a read.
func (c *Client) readPrefetched(ctx context.Context, v view) (*state, error) {
	c.preMu.Lock()
	p := c.pre
	c.pre = nil
	c.preMu.Unlock()
	if p != nil {
		select {
		case <-p.done:
			if p.err == nil && p.txns == c.txns.Load() {
				return p.st, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.read(ctx, v)
}

// plannedMaxAge bounds how old a plan's read Ensure builds on may be: a
// plan pass and the forward pass after it are milliseconds apart, unless a
// long step (VF creation) ran between them; after one, Ensure reads again,
// so that a change another client made meanwhile is planned around instead
// of failing the transaction's guards.
const plannedMaxAge = time.Second

// plannedRead is the state a Plan or PlanStatus that found a change read.
type plannedRead struct {
	st   *state
	txns int64 // the client's transactions before that read
	at   time.Time
}

// keepPlanned keeps st, read with txns transactions sent before it, for
// the next Ensure.
func (c *Client) keepPlanned(st *state, txns int64) {
	c.preMu.Lock()
	c.planned = &plannedRead{st: st, txns: txns, at: time.Now()}
	c.preMu.Unlock()
}

// takePlanned returns, once, the state keepPlanned kept, or nil when there
// is none, this client has written since, or it is older than plannedMaxAge.
func (c *Client) takePlanned() *state {
	c.preMu.Lock()
	p := c.planned
	c.planned = nil
	c.preMu.Unlock()
	if p == nil || p.txns != c.txns.Load() || time.Since(p.at) > plannedMaxAge {
		return nil
	}
	return p.st
}

// Status reports the bridge, its ports with their OpenFlow port numbers and
// interface errors, and the hw-offload setting.
func (c *Client) Status(ctx context.Context, bridge string) (BridgeStatus, error) {
	st, err := c.readPrefetched(ctx, statusView)
	if err != nil {
		return BridgeStatus{}, fmt.Errorf("ovs: status of bridge %s: %w", bridge, err)
	}
	return st.status(bridge), nil
}

// PortStatus is Status of one port of the bridge: the bridge (Exists,
// Owner, hw-offload) and, when it is the bridge's, the port named port
// with its interface of that name; only those rows are read.
func (c *Client) PortStatus(ctx context.Context, bridge, port string) (BridgeStatus, error) {
	named := func(n string) []ovsdb.Condition {
		return []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, n)}
	}
	st, err := c.readWhere(ctx, statusView, map[string][]ovsdb.Condition{
		model.BridgeTable: named(bridge), model.PortTable: named(port), model.InterfaceTable: named(port)})
	if err != nil {
		return BridgeStatus{}, fmt.Errorf("ovs: status of port %s on bridge %s: %w", port, bridge, err)
	}
	return st.status(bridge), nil
}

// status is Status from a state read with statusView.
func (st *state) status(bridge string) BridgeStatus {
	bs := BridgeStatus{Bridge: bridge, HWOffload: st.hwOffload()}
	bs.TCPolicy, _ = otherConfig(st, "tc-policy")
	bs.MaxIdle, _ = otherConfig(st, "max-idle")
	b := st.bridges[bridge]
	if b == nil {
		return bs
	}
	bs.Exists = true
	bs.Owner = b.ExternalIDs[OwnerKey]
	for _, pu := range b.Ports {
		p := st.portByUUID[pu]
		if p == nil {
			continue
		}
		ps := PortStatus{Name: p.Name, Owner: p.ExternalIDs[OwnerKey]}
		ps.Tag, ps.VLANMode, ps.Trunks = tagOf(p), vlanModeOf(p), trunksOf(p)
		if f := st.portInterface(p); f != nil {
			ps.MTURequest = mtuRequestOf(f)
			ps.Type, ps.Options = f.Type, f.Options
			if f.MTU != nil {
				ps.MTU = *f.MTU
			}
			if f.Ofport != nil {
				ps.OFPort = *f.Ofport
			}
			if f.Error != nil {
				ps.Error = *f.Error
			}
		}
		bs.Ports = append(bs.Ports, ps)
	}
	sort.Slice(bs.Ports, func(i, j int) bool { return bs.Ports[i].Name < bs.Ports[j].Name })
	return bs
}

// portInterface is the interface named like the port, else the first one.
func (st *state) portInterface(p *model.Port) *model.Interface {
	var first *model.Interface
	for _, u := range p.Interfaces {
		f := st.ifaceByUUID[u]
		if f == nil {
			continue
		}
		if f.Name == p.Name {
			return f
		}
		if first == nil {
			first = f
		}
	}
	return first
}

var errNoRoot = errors.New("no Open_vSwitch row in the database (ovs-vsctl init has not run)")
