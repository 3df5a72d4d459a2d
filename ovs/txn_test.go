package ovs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/vflag/vflag/ovs/model"
	"github.com/vflag/vflag/ovs/ovstest"
)

// TestGuardNotReplacedByCache: libovsdb replaces the conditions of a
// WhereAll that match a row of its cache by that row's _uuid. This
// client's cache never holds a guarded column, but if it did (a monitor of
// other_config added), building the guarded operation fails instead of
// sending it without its guard (guarded).
func TestGuardNotReplacedByCache(t *testing.T) {
	srv := ovstest.Start(t)
	srv.MustVsctl("set", "Open_vSwitch", ".", "other_config:hw-offload=true")
	ctx := t.Context()
	c, err := Connect(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.read(ctx, rootView)
	if err != nil {
		t.Fatal(err)
	}
	db, err := c.lib(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := &txn{}
	tx.setOtherConfigIf(st.root.UUID, HWOffloadKey, nil, "true")
	ops, _, err := tx.build(db)
	if err != nil || len(ops) != 1 || len(ops[0].Where) != 2 {
		t.Fatalf("with the cache of lib: %v, %v", ops, err)
	}

	// A client like lib's but whose monitor holds other_config.
	dbm, err := databaseModel()
	if err != nil {
		t.Fatal(err)
	}
	db, err = client.NewOVSDBClient(dbm, client.WithEndpoint(srv.Endpoint()))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	root := &model.OpenvSwitch{}
	if _, err := db.Monitor(ctx, db.NewMonitor(client.WithTable(root, &root.OtherConfig))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		var roots []model.OpenvSwitch
		if err := db.List(ctx, &roots); err == nil && len(roots) == 1 && roots[0].OtherConfig[HWOffloadKey] == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never held other_config")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ops, _, err = tx.build(db)
	if err == nil || !strings.Contains(err.Error(), "replaced the guard") {
		t.Fatalf("with other_config in the cache: ops %v, err %v, want the guard's loss refused", ops, err)
	}
	t.Log(err)
}

// BenchmarkBuild254 times building, with libovsdb's typed API, the
// operations of an Ensure that creates a bridge of 254 ports (plan and
// build, no transaction): what the typed API adds to the write.
func BenchmarkBuild254(b *testing.B) {
	srv := ovstest.Start(b)
	c, err := Connect(b.Context(), srv.Endpoint())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	db, err := c.lib(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	st, err := c.read(b.Context(), planView)
	if err != nil {
		b.Fatal(err)
	}
	s := BridgeSpec{Owner: "bench", Bridge: "br-bench", DatapathType: "netdev", HWOffload: true, Ports: []PortSpec{{Name: "bond0"}}}
	for i := 1; i < 254; i++ {
		s.Ports = append(s.Ports, PortSpec{Name: fmt.Sprintf("rep%d", i), Tag: 100 + i%3000})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, t, err := plan(st, s)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := t.build(db); err != nil {
			b.Fatal(err)
		}
	}
}

// TestClosedClientConnectsNoMore: a write connection warmed in the
// background (warmLib: Plan, Ensure) that has not connected yet when the
// caller closes the client does not connect afterwards and stay open.
func TestClosedClientConnectsNoMore(t *testing.T) {
	srv := ovstest.Start(t)
	c, err := Connect(t.Context(), srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if db, err := c.lib(t.Context()); err == nil {
		db.Close()
		t.Fatal("lib connected a closed client")
	}
}
