package ovs

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/client"
	lmodel "github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
	"github.com/vflag/vflag/ovs/ovstest"
)

// TestInsertRowsMatchLibovsdb: each row vflag inserts builds the operation
// libovsdb's api.Create makes of its model, with the server's schema, for
// every column set and unset (a column op() forgot, or converts otherwise,
// differs here), and the server takes the transaction of them all.
func TestInsertRowsMatchLibovsdb(t *testing.T) {
	srv := ovstest.Start(t)
	ctx := t.Context()
	_, db := connectWriting(t, srv)
	owner := map[string]string{OwnerKey: "lag0", "other": "x"}
	rows := []insertRow{
		newInterface{UUIDName: "i0", Name: "pf0vf0"},
		newInterface{UUIDName: "i1", Name: "br-x", Type: "internal", ExternalIDs: owner},
		newInterface{UUIDName: "i2", Name: "pf0vf1", ExternalIDs: owner, MTURequest: optInt(9000)},
		newPort{UUIDName: "p0", Name: "pf0vf0", Interfaces: []string{"i0"}},
		newPort{UUIDName: "p1", Name: "br-x", Interfaces: []string{"i1"}, ExternalIDs: owner, Tag: optInt(100)},
		newPort{UUIDName: "p2", Name: "pf0vf1", Interfaces: []string{"i2"}, ExternalIDs: owner,
			Tag: optInt(7), VLANMode: optString("native-untagged"), Trunks: []int{7, 100, 4094}},
		newBridge{UUIDName: "b0", Name: "br-x", Ports: []string{"p0", "p1", "p2"}, ExternalIDs: owner, DatapathType: "netdev"},
		newBridge{UUIDName: "b1", Name: "br-y", FailMode: optString("secure"), OtherConfig: map[string]string{"disable-in-band": "true"}},
		newBridge{UUIDName: "4f8f5e3b-3b0e-4c4a-9b1e-2f8e1f0a6c11", Name: "br-z", Ports: []string{"p0"}},
		newInterface{UUIDName: "i4", Name: "pf0vf2", ExternalIDs: map[string]string{OwnerKey: "lag0", "iface-id": "lsp1", "attached-mac": "52:54:00:00:00:01"}},
		newInterface{UUIDName: "i3", Name: "vx5000r0", Type: "vxlan", ExternalIDs: owner,
			Options: map[string]string{"remote_ip": "192.0.2.12", "local_ip": "192.0.2.11", "key": "5000", "dst_port": "4789"}},
	}
	for i, r := range rows {
		want, err := db.Create(modelOf(r))
		if err != nil {
			t.Fatalf("row %d: libovsdb: %v", i, err)
		}
		if len(want) != 1 {
			t.Fatalf("row %d: libovsdb made %d operations", i, len(want))
		}
		if got := r.op(); !reflect.DeepEqual(got, want[0]) {
			t.Errorf("row %d (%T):\n got  %#v\n want %#v", i, r, got, want[0])
		}
	}
	// The server takes them (the bridges' rows referenced from the root,
	// the rest through them).
	var tx txn
	tx.insert(rows[:7]...)
	ops, _, err := tx.build(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 7 {
		t.Fatalf("%d operations, want 7", len(ops))
	}
	res, err := db.Transact(ctx, ops...)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkResults(res, ops, []int{-1, -1, -1, -1, -1, -1, -1}); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if res[i].UUID.GoUUID == "" {
			t.Errorf("insert %d: no UUID in the reply: %+v", i, res[i])
		}
	}
}

// TestPortOwnedGuardMatchesLibovsdb: the guard of a port's removal is the
// operation libovsdb's WhereAll and Wait make of its conditions, and it
// aborts the transaction exactly when the port lost the owner's mark.
func TestPortOwnedGuardMatchesLibovsdb(t *testing.T) {
	srv := ovstest.Start(t)
	srv.MustVsctl("add-br", "br-g", "--", "add-port", "br-g", "p1", "--", "set", "Port", "p1", "external_ids:"+OwnerKey+"=lag0")
	ctx := t.Context()
	c, db := connectWriting(t, srv)
	st, err := c.read(ctx, planView)
	if err != nil {
		t.Fatal(err)
	}
	p := st.ports["p1"]
	if p == nil {
		t.Fatal("no port p1")
	}
	m := &model.Port{}
	row := &model.Port{UUID: p.UUID}
	want, err := db.WhereAll(m, is(&m.UUID, p.UUID), ownerMark(&m.ExternalIDs, ovsdb.ConditionExcludes, "lag0")).
		Wait(ovsdb.WaitConditionNotEqual, new(int), row, &row.UUID)
	if err != nil || len(want) != 1 {
		t.Fatalf("libovsdb: %v, %d operations", err, len(want))
	}
	if got := portOwnedGuard(p.UUID, "lag0"); !reflect.DeepEqual(got, want[0]) {
		t.Fatalf("\n got  %#v\n want %#v", got, want[0])
	}
	for _, c := range []struct {
		owner   string
		aborted bool
	}{{"lag0", false}, {"lag1", true}} {
		res, err := db.Transact(ctx, portOwnedGuard(p.UUID, c.owner))
		if err != nil {
			t.Fatal(err)
		}
		_, opErr := ovsdb.CheckOperationResults(res, []ovsdb.Operation{portOwnedGuard(p.UUID, c.owner)})
		if (opErr != nil) != c.aborted {
			t.Errorf("port marked lag0, guard for %s: error %v, want aborted %v", c.owner, opErr, c.aborted)
		}
	}
}

// connectWriting connects a client to srv with its writing side (libovsdb's
// client, whose typed API the tests compare with); the test closes it.
func connectWriting(t *testing.T, srv *ovstest.Server) (*Client, client.Client) {
	t.Helper()
	c, err := Connect(t.Context(), srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	db, err := c.lib(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c, db
}

// modelOf is the libovsdb model of a row vflag inserts, the same columns
// set: what api.Create is given in TestInsertRowsMatchLibovsdb.
func modelOf(r insertRow) lmodel.Model {
	switch r := r.(type) {
	case newInterface:
		return &model.Interface{UUID: r.UUIDName, Name: r.Name, Type: r.Type, ExternalIDs: r.ExternalIDs, MTURequest: r.MTURequest, Options: r.Options}
	case newPort:
		return &model.Port{UUID: r.UUIDName, Name: r.Name, Interfaces: r.Interfaces, ExternalIDs: r.ExternalIDs,
			Tag: r.Tag, VLANMode: r.VLANMode, Trunks: r.Trunks}
	case newBridge:
		return &model.Bridge{UUID: r.UUIDName, Name: r.Name, Ports: r.Ports, ExternalIDs: r.ExternalIDs, DatapathType: r.DatapathType,
			FailMode: r.FailMode, OtherConfig: r.OtherConfig}
	}
	panic(fmt.Sprintf("modelOf: %T", r))
}
