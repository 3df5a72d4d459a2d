package ovs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ovn-kubernetes/libovsdb/client"
	lmodel "github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
	"github.com/vflag/vflag/ovs/ovstest"
)

// TestModelFromRowMatchesLibovsdb reads every column of the four tables
// vflag uses, on a real ovsdb-server holding rows with every kind of value
// (optional and set columns empty, with one and with several elements;
// maps with string and integer keys; UUID references; booleans, reals),
// once through the select connection and once through libovsdb's client
// (ovsdb.Row.UnmarshalJSON, model.CreateModel with the server's schema):
// the rows (the select connection's in Go notation by wireToRow) and the
// models (modelFromWire from the JSON text, modelFromRow from the Go
// notation) must be equal.
func TestModelFromRowMatchesLibovsdb(t *testing.T) {
	srv := ovstest.Start(t)
	srv.MustVsctl("add-br", "br0", "--", "set", "bridge", "br0", "external_ids:vflag-owner=g0", "other_config:hwaddr=02:00:00:00:00:01",
		"flood_vlans=10,20", "stp_enable=true", "protocols=OpenFlow13,OpenFlow15")
	srv.MustVsctl("add-port", "br0", "p1", "tag=100", "vlan_mode=native-untagged", "trunks=100,200,300", "--",
		"set", "interface", "p1", "type=internal", "mtu_request=1400", "external_ids:vflag-owner=g0", "external_ids:x=y",
		"options:key=1", "ingress_policing_rate=1000")
	srv.MustVsctl("add-port", "br0", "p2", "trunks=7", "--", "set", "interface", "p2", "type=dummy")
	srv.MustVsctl("add-bond", "br0", "b0", "m1", "m2", "--", "set", "port", "b0", "bond_mode=balance-tcp", "lacp=active",
		"other_config:lacp-time=fast", "bond_updelay=100")
	srv.MustVsctl("add-port", "br0", "missing0") // no netdev: ofport -1 and an error
	srv.MustVsctl("set", "open_vswitch", ".", "other_config:hw-offload=true", "other_config:max-idle=10000", "external_ids:system-id=h1")
	srv.MustVsctl("--", "--id=@q", "create", "qos", "type=linux-htb", "other_config:max-rate=1000000", "--", "set", "port", "p1", "qos=@q")
	srv.MustVsctl("--", "--id=@ft", "create", "flow_table", "name=t0", "--", "set", "bridge", "br0", "flow_tables:0=@ft", "flow_tables:3=@ft")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dbm, err := databaseModel()
	if err != nil {
		t.Fatal(err)
	}
	lib, err := client.NewOVSDBClient(dbm, client.WithEndpoint(srv.Endpoint()))
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	sel, err := newSelectConn(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()

	tables := []string{model.OpenvSwitchTable, model.BridgeTable, model.PortTable, model.InterfaceTable}
	var ops []ovsdb.Operation
	for _, tb := range tables {
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: tb, Where: []ovsdb.Condition{}}) // every column
	}
	want, err := lib.Transact(ctx, ops...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sel.transact(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	libDBM := lib.Cache().DatabaseModel()
	kinds := map[string]bool{}
	for i, tb := range tables {
		if len(got[i]) != len(want[i].Rows) || len(got[i]) == 0 {
			t.Fatalf("%s: %d rows through the select connection, %d through libovsdb", tb, len(got[i]), len(want[i].Rows))
		}
		byUUID := map[string]ovsdb.Row{}
		for _, r := range want[i].Rows {
			byUUID[r["_uuid"].(ovsdb.UUID).GoUUID] = r
		}
		for _, raw := range got[i] {
			r, err := wireToRow(raw)
			if err != nil {
				t.Fatalf("%s row %s: %v", tb, raw, err)
			}
			u := r["_uuid"].(ovsdb.UUID).GoUUID
			w := byUUID[u]
			if !reflect.DeepEqual(r, w) {
				t.Errorf("%s row %s:\nselect connection %v\nlibovsdb          %v", tb, u, r, w)
			}
			for _, v := range r {
				kinds[valueKind(v)] = true
			}
			libModel, err := lmodel.CreateModel(libDBM, tb, &w, u)
			if err != nil {
				t.Fatal(err)
			}
			fromRow := reflect.New(reflect.TypeOf(libModel).Elem()).Interface()
			if err := modelFromRow(fromRow, r); err != nil {
				t.Fatalf("%s row %s: %v", tb, u, err)
			}
			if diff := cmp.Diff(libModel, fromRow); diff != "" {
				t.Errorf("%s row %s: modelFromRow differs from libovsdb's CreateModel (-libovsdb +ours):\n%s", tb, u, diff)
			}
			fromWire := reflect.New(reflect.TypeOf(libModel).Elem()).Interface()
			if err := modelFromWire(fromWire, raw); err != nil {
				t.Fatalf("%s row %s: modelFromWire: %v", tb, u, err)
			}
			if diff := cmp.Diff(libModel, fromWire); diff != "" {
				t.Errorf("%s row %s: modelFromWire differs from libovsdb's CreateModel (-libovsdb +ours):\n%s", tb, u, diff)
			}
		}
	}
	// The rows must have exercised each kind of value the conversion handles
	// (a set of one element comes as the bare atom: string, float64, uuid).
	for _, k := range []string{"string", "float64", "bool", "uuid", "set0", "setN", "map-string", "map-int", "map-empty"} {
		if !kinds[k] {
			t.Errorf("no value of kind %s in the rows read: the test no longer covers it", k)
		}
	}
}

// valueKind classifies a Go-notation value for the coverage check.
func valueKind(v any) string {
	switch x := v.(type) {
	case ovsdb.UUID:
		return "uuid"
	case ovsdb.OvsSet:
		if len(x.GoSet) == 0 {
			return "set0"
		}
		return "setN"
	case ovsdb.OvsMap:
		for k := range x.GoMap {
			if _, ok := k.(float64); ok {
				return "map-int"
			}
			return "map-string"
		}
		return "map-empty"
	}
	return reflect.TypeOf(v).String()
}

// fakeServer is an ovsdb-server stand-in on a unix socket: each accepted
// connection is served by handle.
func fakeServer(t *testing.T, handle func(conn net.Conn, dec *json.Decoder, enc *json.Encoder)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "db.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				handle(conn, json.NewDecoder(bufio.NewReader(conn)), json.NewEncoder(conn))
			}()
		}
	}()
	return "unix:" + sock
}

type fakeRequest struct {
	ID     any               `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
	Result json.RawMessage   `json:"result"`
}

// TestSelectConnAnswersEcho: ovsdb-server's inactivity probe (an "echo"
// request) that arrives before a reply is answered with its params, and the
// reply is still read.
func TestSelectConnAnswersEcho(t *testing.T) {
	echoed := make(chan string, 1)
	ep := fakeServer(t, func(_ net.Conn, dec *json.Decoder, enc *json.Encoder) {
		var req fakeRequest
		if dec.Decode(&req) != nil {
			return
		}
		_ = enc.Encode(map[string]any{"method": "echo", "params": []string{"probe-1"}, "id": "echo"})
		var rep fakeRequest
		if dec.Decode(&rep) != nil {
			return
		}
		echoed <- string(rep.Result)
		_ = enc.Encode(map[string]any{"id": req.ID, "result": []string{"Open_vSwitch"}, "error": nil})
	})
	sel, err := newSelectConn(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	if err := sel.ping(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if got := <-echoed; got != `["probe-1"]` {
		t.Errorf("echo answered with %s, want [\"probe-1\"]", got)
	}
}

// TestSelectConnRedials: a connection the server closed while idle (as
// ovsdb-server does when its probe goes unanswered) is dialed again for
// the next request, which succeeds.
func TestSelectConnRedials(t *testing.T) {
	var conns atomic.Int32
	ep := fakeServer(t, func(_ net.Conn, dec *json.Decoder, enc *json.Encoder) {
		conns.Add(1)
		var req fakeRequest
		if dec.Decode(&req) != nil {
			return
		}
		_ = enc.Encode(map[string]any{"id": req.ID, "result": []string{"Open_vSwitch"}, "error": nil})
		// then close: the next request on this connection fails
	})
	sel, err := newSelectConn(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	for i := range 3 {
		if err := sel.ping(context.Background()); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections for 3 requests each closed after its reply, want 3", n)
	}
}

// TestSelectConnErrors: what the server answers is an error naming the
// operation, an RPC error is not retried, and a context that ends stops
// the wait for a reply.
func TestSelectConnErrors(t *testing.T) {
	ep := fakeServer(t, func(_ net.Conn, dec *json.Decoder, enc *json.Encoder) {
		for {
			var req fakeRequest
			if dec.Decode(&req) != nil {
				return
			}
			switch {
			case req.Method == "list_dbs":
				_ = enc.Encode(map[string]any{"id": req.ID, "result": []string{"OVN_Northbound"}, "error": nil})
			case len(req.Params) > 1 && strings.Contains(string(req.Params[1]), `"Port"`):
				_ = enc.Encode(map[string]any{"id": req.ID, "result": []any{map[string]any{"error": "unknown column", "details": "no column bogus in table Port"}}, "error": nil})
			case len(req.Params) > 1 && strings.Contains(string(req.Params[1]), `"Bridge"`):
				_ = enc.Encode(map[string]any{"id": req.ID, "result": nil, "error": "unknown database"})
			default: // never answers
			}
		}
	})
	sel, err := newSelectConn(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	ctx := context.Background()
	if err := sel.ping(ctx); err == nil || !strings.Contains(err.Error(), "no Open_vSwitch database") {
		t.Errorf("ping of a server without Open_vSwitch: %v", err)
	}
	_, err = sel.transact(ctx, []ovsdb.Operation{{Op: ovsdb.OperationSelect, Table: "Port", Columns: []string{"bogus"}}})
	if err == nil || !strings.Contains(err.Error(), "select Port: unknown column: no column bogus in table Port") {
		t.Errorf("a failed select: %v", err)
	}
	_, err = sel.transact(ctx, []ovsdb.Operation{{Op: ovsdb.OperationSelect, Table: "Bridge"}})
	var re *rpcError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "unknown database") {
		t.Errorf("an RPC error: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = sel.transact(short, []ovsdb.Operation{{Op: ovsdb.OperationSelect, Table: "Interface"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a reply that never comes: %v, want the context's deadline", err)
	}
}

// lateTimerCtx is a context whose deadline has passed while its timer has
// not fired yet (Err is nil): what a loaded machine shows for a few
// milliseconds after a deadline.
type lateTimerCtx struct {
	context.Context
	deadline time.Time
}

func (c lateTimerCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// TestSelectConnDeadlineBeforeTimer: a call whose connection hit the
// context's deadline before the context's timer fired ends with the
// deadline, and the connection is not dialed again past it (CI once saw
// "dial unix ...: i/o timeout" from a wait that should have ended quietly).
func TestSelectConnDeadlineBeforeTimer(t *testing.T) {
	var conns atomic.Int32
	ep := fakeServer(t, func(_ net.Conn, dec *json.Decoder, enc *json.Encoder) {
		conns.Add(1)
		for {
			var req fakeRequest
			if dec.Decode(&req) != nil {
				return
			}
			_ = enc.Encode(map[string]any{"id": req.ID, "result": []string{"Open_vSwitch"}, "error": nil})
		}
	})
	sel, err := newSelectConn(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	if err := sel.ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	late := lateTimerCtx{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	if late.Err() != nil {
		t.Fatal("the test's context has ended")
	}
	err = sel.ping(late)
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "dial") {
		t.Errorf("a call past the deadline: %v, want the context's deadline, no dial", err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1: a call past its deadline dialed again", n)
	}
	if ctxEnded(context.Background()) != nil || ctxEnded(late) == nil {
		t.Error("ctxEnded: wrong for a live context or one past its deadline")
	}
}

// TestWaitAppliedNoWriteNoMonitor: a client that wrote nothing, against an
// ovs-vswitchd that has applied everything, returns from WaitApplied after
// one select, without connecting libovsdb's client (schema and monitor);
// once it writes, WaitApplied waits on the monitor.
func TestWaitAppliedNoWriteNoMonitor(t *testing.T) {
	srv := ovstest.Start(t)
	srv.MustVsctl("add-br", "br0") // waits until ovs-vswitchd applied it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	if c.db != nil {
		t.Errorf("WaitApplied of a client that wrote nothing connected libovsdb's client")
	}
	if _, _, err := c.Ensure(ctx, BridgeSpec{Owner: "g", Bridge: "br1", DatapathType: "netdev", Ports: []PortSpec{{Name: "p1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	out := srv.MustVsctl("get", "open_vswitch", ".", "next_cfg", "cur_cfg")
	if f := strings.Fields(out); len(f) != 2 || f[0] != f[1] {
		t.Errorf("next_cfg cur_cfg = %q after WaitApplied, want equal", out)
	}
}

// TestPlanWarmsLib: a plan that finds nothing to write leaves libovsdb's
// client unconnected; one that finds a change connects it in the
// background, before the write needs it.
func TestPlanWarmsLib(t *testing.T) {
	srv := ovstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := BridgeSpec{Owner: "g", Bridge: "br1", DatapathType: "netdev", Ports: []PortSpec{{Name: "p1"}}}
	w, err := Connect(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, _, err := w.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}

	c, err := Connect(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	connected := func() bool {
		c.libMu.Lock()
		defer c.libMu.Unlock()
		return c.db != nil
	}
	if ch, _, err := c.PlanStatus(ctx, spec); err != nil || !ch.Empty() {
		t.Fatalf("plan of a converged bridge: %+v, %v", ch, err)
	}
	time.Sleep(200 * time.Millisecond)
	if connected() {
		t.Errorf("a plan with nothing to write connected libovsdb's client")
	}
	spec.Ports[0].Tag = 7
	if ch, _, err := c.PlanStatus(ctx, spec); err != nil || ch.Empty() {
		t.Fatalf("plan of a retag: %+v, %v", ch, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !connected() {
		t.Errorf("a plan with a change to write did not connect libovsdb's client")
	}
}
