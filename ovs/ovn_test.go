package ovs_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

// An integration bridge: created with fail_mode secure and
// disable-in-band (an existing one adopted as it is, unmarked), each
// representor's Interface with its OVN binding keys; a changed binding is
// rewritten in place, ovn-controller's ovn-installed and the owner's mark
// kept; a binding dropped from the spec is removed; Undo of the adopted
// bridge leaves it and the ports vflag did not create.
func TestIntegrationBridgeBindings(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	bind := map[string]string{"iface-id": "lsp1", "attached-mac": "52:54:00:00:00:01", "iface-status": "active"}
	spec := ovs.BridgeSpec{Owner: "lag0", Bridge: "br-int", DatapathType: "netdev", Integration: true,
		Ports: []ovs.PortSpec{{Name: "vf0rep", Bind: bind}, {Name: "vf1rep", Bind: map[string]string{}}}}
	rec, _, err := c.Ensure(ctx, spec)
	if err != nil || !rec.BridgeCreated {
		t.Fatalf("ensure: %+v %v", rec, err)
	}
	b, err := c.Bridge(ctx, "br-int")
	if err != nil || b.FailMode != "secure" || b.OtherConfig["disable-in-band"] != "true" || b.Owner != "lag0" {
		t.Fatalf("created br-int: %+v %v", b, err)
	}
	ids, err := c.InterfaceIDs(ctx, []string{"vf0rep", "vf1rep"})
	if err != nil || ids["vf0rep"]["iface-id"] != "lsp1" || ids["vf0rep"][ovs.OwnerKey] != "lag0" || ids["vf1rep"]["iface-id"] != "" {
		t.Fatalf("interfaces' external_ids %v %v", ids, err)
	}
	if ch, err := c.Plan(ctx, spec); err != nil || !ch.Empty() {
		t.Fatalf("plan after ensure: %+v %v", ch, err)
	}
	// ovn-controller's mark; then the binding moves to another LSP.
	srv.MustVsctl("set", "Interface", "vf0rep", "external_ids:ovn-installed=true")
	spec.Ports[0].Bind = map[string]string{"iface-id": "lsp2", "attached-mac": "52:54:00:00:00:01", "iface-status": "active", "vm-uuid": "u1"}
	ch, err := c.Plan(ctx, spec)
	if err != nil || !slices.Equal(ch.SetBind, []string{"vf0rep"}) || len(ch.AddPorts) != 0 {
		t.Fatalf("plan of a new binding: %+v %v", ch, err)
	}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	ids, _ = c.InterfaceIDs(ctx, []string{"vf0rep"})
	want := map[string]string{ovs.OwnerKey: "lag0", "iface-id": "lsp2", "attached-mac": "52:54:00:00:00:01", "iface-status": "active", "vm-uuid": "u1", "ovn-installed": "true"}
	if !maps.Equal(ids["vf0rep"], want) {
		t.Fatalf("rebound: %v, want %v", ids["vf0rep"], want)
	}
	// The binding dropped: its keys go, the others stay.
	spec.Ports[0].Bind = map[string]string{}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	ids, _ = c.InterfaceIDs(ctx, []string{"vf0rep"})
	if want := map[string]string{ovs.OwnerKey: "lag0", "ovn-installed": "true"}; !maps.Equal(ids["vf0rep"], want) {
		t.Fatalf("unbound: %v, want %v", ids["vf0rep"], want)
	}
	// nil Bind leaves the keys alone.
	srv.MustVsctl("set", "Interface", "vf1rep", "external_ids:iface-id=someone")
	spec.Ports[1].Bind = nil
	if ch, err := c.Plan(ctx, spec); err != nil || len(ch.SetBind) != 0 {
		t.Fatalf("nil Bind: %+v %v", ch, err)
	}
	if err := c.UndoOwned(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Bridge(ctx, "br-int"); b.Exists {
		t.Fatal("the br-int vflag created survived its undo")
	}
}

// An existing br-int (ovn-controller's) is adopted: vflag's ports go on it,
// the bridge keeps no mark and its settings, and the undo removes only
// vflag's ports: ovn-controller's tunnel port stays, and the bridge.
func TestIntegrationBridgeAdopted(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.MustVsctl("add-br", "br-int", "--", "set", "Bridge", "br-int", "fail_mode=secure", "datapath_type=netdev",
		"--", "add-port", "br-int", "ovn-abc-0", "--", "set", "Interface", "ovn-abc-0", "type=geneve", "options:remote_ip=192.0.2.12")
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "lag0", Bridge: "br-int", Integration: true,
		Ports: []ovs.PortSpec{{Name: "vf0rep", Bind: map[string]string{"iface-id": "lsp1"}}}}
	rec, ch, err := c.Ensure(ctx, spec)
	if err != nil || rec.BridgeCreated || len(ch.Foreign) != 0 || len(ch.RemovePorts) != 0 {
		t.Fatalf("ensure: %+v %+v %v", rec, ch, err)
	}
	if b, _ := c.Bridge(ctx, "br-int"); b.Owner != "" {
		t.Fatalf("adopted br-int got a mark: %+v", b)
	}
	if err := c.UndoOwned(ctx, rec); err != nil {
		t.Fatal(err)
	}
	out := srv.MustVsctl("list-ports", "br-int")
	if strings.TrimSpace(out) != "ovn-abc-0" {
		t.Fatalf("br-int's ports after the undo: %q", out)
	}
}

// Open_vSwitch external_ids: set, read, set only while a value holds,
// removed.
func TestRootExternalIDs(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.MustVsctl("set", "Open_vSwitch", ".", "external_ids:system-id=abc")
	c := connect(t, srv)
	ctx := ctxT(t)
	v := "tcp:192.0.2.1:6642"
	if err := c.SetExternalID(ctx, "ovn-remote", &v, nil); err != nil {
		t.Fatal(err)
	}
	other, old := "x", "abc"
	if err := c.SetExternalID(ctx, "system-id", &other, &v); err != nil { // not while it holds v: left
		t.Fatal(err)
	}
	ids, err := c.ExternalIDs(ctx)
	if err != nil || ids["ovn-remote"] != v || ids["system-id"] != "abc" {
		t.Fatalf("external_ids %v %v", ids, err)
	}
	if err := c.SetExternalID(ctx, "system-id", &other, &old); err != nil {
		t.Fatal(err)
	}
	if err := c.SetExternalID(ctx, "ovn-remote", nil, nil); err != nil {
		t.Fatal(err)
	}
	ids, _ = c.ExternalIDs(ctx)
	if _, ok := ids["ovn-remote"]; ok || ids["system-id"] != "x" {
		t.Fatalf("external_ids %v: want system-id x and no ovn-remote", ids)
	}
}

// The SSL row: made and referenced, updated in place, dropped.
func TestSSLRow(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	if _, ok, err := c.SSL(ctx); ok || err != nil {
		t.Fatalf("fresh database: SSL ok=%v %v", ok, err)
	}
	p := ovs.SSLPaths{PrivateKey: "/k", Certificate: "/c", CACert: "/ca"}
	if err := c.SetSSL(ctx, &p); err != nil {
		t.Fatal(err)
	}
	if got := srv.MustVsctl("get-ssl"); !strings.Contains(got, "Private key: /k") || !strings.Contains(got, "CA Certificate: /ca") {
		t.Fatalf("get-ssl: %s", got)
	}
	q := ovs.SSLPaths{PrivateKey: "/k2", Certificate: "/c", CACert: "/ca"}
	if err := c.SetSSL(ctx, &q); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := c.SSL(ctx); !ok || err != nil || got != q {
		t.Fatalf("after the update: %+v %v %v", got, ok, err)
	}
	if err := c.SetSSL(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(srv.MustVsctl("get-ssl")); got != "" {
		t.Fatalf("get-ssl after the drop: %q", got)
	}
}
