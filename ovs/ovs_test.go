package ovs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

// Tests run a real ovsdb-server and ovs-vswitchd (package ovstest): they need
// root and the Open vSwitch binaries.
func TestMain(m *testing.M) { ovstest.Main(m) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t testing.TB, s *ovstest.Server) *ovs.Client {
	t.Helper()
	c, err := ovs.Connect(ctxT(t), s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ptr(s string) *string { return &s }

// journal round-trips a record through JSON, as the journal stores it.
func journal(t *testing.T, r ovs.Record) ovs.Record {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back ovs.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back
}

func lagSpec() ovs.BridgeSpec {
	return ovs.BridgeSpec{
		Owner:        "lag0",
		Bridge:       "br-lag",
		DatapathType: "netdev",
		Ports: []ovs.PortSpec{
			{Name: "bond0"},
			{Name: "vf0rep", Tag: 100},
			{Name: "vf1rep", Tag: 101},
			{Name: "vf2rep"},
		},
		HWOffload: true,
	}
}

func diffDump(t *testing.T, what, want, got string) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s: Dump() mismatch (-want +got):\n%s", what, d)
	}
}

// Create everything in one transaction, converge with zero transactions,
// undo back to the baseline, undo again.
func TestEnsureCreateConvergeUndo(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	baseline := srv.Dump()
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := lagSpec()

	plan, err := c.Plan(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	wantChange := ovs.Change{
		CreateBridge: true,
		AddPorts:     []string{"bond0", "vf0rep", "vf1rep", "vf2rep"},
		SetHWOffload: true,
	}
	if d := cmp.Diff(wantChange, plan); d != "" {
		t.Errorf("Plan (-want +got):\n%s", d)
	}
	if n := c.TxnCount(); n != 0 {
		t.Errorf("Plan sent %d transactions, want 0", n)
	}
	diffDump(t, "after Plan", baseline, srv.Dump())

	rec, ch, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantChange, ch); d != "" {
		t.Errorf("Ensure change (-want +got):\n%s", d)
	}
	wantRec := ovs.Record{Owner: "lag0", Bridge: "br-lag", BridgeCreated: true,
		Ports: []string{"bond0", "vf0rep", "vf1rep", "vf2rep"}, HWOffloadSet: true}
	if d := cmp.Diff(wantRec, rec); d != "" {
		t.Errorf("Ensure record (-want +got):\n%s", d)
	}
	if n := c.TxnCount(); n != 1 {
		t.Errorf("Ensure sent %d transactions, want exactly 1", n)
	}
	after := srv.Dump()
	diffDump(t, "after Ensure", `other_config {hw-offload="true"}
bridge "br-lag" datapath_type="netdev" owner="lag0"
  port "bond0" tag=- owner="lag0"
    interface "bond0" type=""
  port "br-lag" tag=- owner="lag0"
    interface "br-lag" type="internal"
  port "vf0rep" tag=100 owner="lag0"
    interface "vf0rep" type=""
  port "vf1rep" tag=101 owner="lag0"
    interface "vf1rep" type=""
  port "vf2rep" tag=- owner="lag0"
    interface "vf2rep" type=""
`, after)
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}

	// Converged: no change, no transaction, nothing written.
	rec2, ch2, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ch2.Empty() {
		t.Errorf("second Ensure change = %+v, want empty", ch2)
	}
	if d := cmp.Diff(ovs.Record{Owner: "lag0", Bridge: "br-lag"}, rec2); d != "" {
		t.Errorf("second Ensure record (-want +got):\n%s", d)
	}
	if n := c.TxnCount(); n != 1 {
		t.Errorf("second Ensure sent a transaction (total %d)", n)
	}
	diffDump(t, "after second Ensure", after, srv.Dump())

	// A fresh client (a new `vflag up`) also sees nothing to do.
	c2 := connect(t, srv)
	if _, ch, err := c2.Ensure(ctx, spec); err != nil || !ch.Empty() || c2.TxnCount() != 0 {
		t.Errorf("Ensure from a new client: change %+v, err %v, %d transactions", ch, err, c2.TxnCount())
	}

	r := journal(t, rec)
	if err := c.Undo(ctx, r); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after Undo", baseline, srv.Dump())
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	n := c.TxnCount()
	if err := c.Undo(ctx, r); err != nil {
		t.Fatalf("second Undo: %v", err)
	}
	if c.TxnCount() != n {
		t.Errorf("second Undo sent a transaction")
	}
	diffDump(t, "after second Undo", baseline, srv.Dump())
}

// A bridge vflag did not create, with foreign ports and a pre-set hw-offload
// value: Ensure adds vflag's ports, Undo removes only them and restores the
// value.
func TestExistingBridgeWithForeignPorts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		preOffload *string // nil: key absent
		wantSet    bool
	}{
		{"offload unset", nil, true},
		{"offload false", ptr("false"), true},
		{"offload true", ptr("true"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := ovstest.Start(t)
			srv.MustVsctl("add-br", "br-ext", "--", "set", "Bridge", "br-ext", "datapath_type=netdev")
			srv.MustVsctl("add-port", "br-ext", "user0", "--", "set", "Interface", "user0", "type=internal")
			// A port vflag wants, created by someone else.
			srv.MustVsctl("add-port", "br-ext", "vf1rep", "tag=7", "--", "set", "Interface", "vf1rep", "type=internal")
			if tc.preOffload != nil {
				srv.MustVsctl("set", "Open_vSwitch", ".", "other_config:hw-offload="+*tc.preOffload)
			}
			baseline := srv.Dump()
			c := connect(t, srv)
			ctx := ctxT(t)
			spec := ovs.BridgeSpec{Owner: "lag1", Bridge: "br-ext", DatapathType: "system",
				Ports:     []ovs.PortSpec{{Name: "bond1"}, {Name: "vf0rep", Tag: 5}, {Name: "vf1rep", Tag: 9}},
				HWOffload: true}

			rec, ch, err := c.Ensure(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			wantCh := ovs.Change{AddPorts: []string{"bond1", "vf0rep"}, Foreign: []string{"vf1rep"}}
			wantRec := ovs.Record{Owner: "lag1", Bridge: "br-ext", Ports: []string{"bond1", "vf0rep"}}
			if tc.wantSet {
				wantCh.SetHWOffload, wantCh.PriorHWOffload = true, tc.preOffload
				wantRec.HWOffloadSet, wantRec.PriorHWOffload = true, tc.preOffload
			}
			if d := cmp.Diff(wantCh, ch); d != "" {
				t.Errorf("change (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantRec, rec); d != "" {
				t.Errorf("record (-want +got):\n%s", d)
			}
			diffDump(t, "after Ensure", `other_config {hw-offload="true"}
bridge "br-ext" datapath_type="netdev" owner=""
  port "bond1" tag=- owner="lag1"
    interface "bond1" type=""
  port "br-ext" tag=- owner=""
    interface "br-ext" type="internal"
  port "user0" tag=- owner=""
    interface "user0" type="internal"
  port "vf0rep" tag=5 owner="lag1"
    interface "vf0rep" type=""
  port "vf1rep" tag=7 owner=""
    interface "vf1rep" type="internal"
`, srv.Dump())

			// Foreign stays reported, nothing else to do.
			if _, ch, err := c.Ensure(ctx, spec); err != nil || !ch.Empty() || !cmp.Equal(ch.Foreign, []string{"vf1rep"}) {
				t.Errorf("second Ensure: change %+v, err %v", ch, err)
			}
			for i := 0; i < 2; i++ {
				if err := c.Undo(ctx, journal(t, rec)); err != nil {
					t.Fatalf("Undo #%d: %v", i+1, err)
				}
				diffDump(t, fmt.Sprintf("after Undo #%d", i+1), baseline, srv.Dump())
			}
		})
	}
}

func TestRetag(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev",
		Ports: []ovs.PortSpec{{Name: "a", Tag: 10}, {Name: "b", Tag: 11}}}
	rec, _, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		tags      [2]int
		wantRetag []string
		wantDump  string
	}{
		{[2]int{20, 11}, []string{"a"}, "a tag=20 b tag=11"},
		{[2]int{0, 0}, []string{"a", "b"}, "a tag=- b tag=-"},
		{[2]int{0, 4094}, []string{"b"}, "a tag=- b tag=4094"},
	} {
		spec.Ports[0].Tag, spec.Ports[1].Tag = step.tags[0], step.tags[1]
		n := c.TxnCount()
		r, ch, err := c.Ensure(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(ovs.Change{Retag: step.wantRetag}, ch); d != "" {
			t.Errorf("tags %v: change (-want +got):\n%s", step.tags, d)
		}
		if len(r.Ports) != 0 || r.BridgeCreated || c.TxnCount() != n+1 {
			t.Errorf("tags %v: record %+v, %d transactions", step.tags, r, c.TxnCount()-n)
		}
		var got []string
		for _, l := range strings.Split(srv.Dump(), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "port" && f[1] != `"br0"` {
				got = append(got, strings.Trim(f[1], `"`), f[2])
			}
		}
		if g := strings.Join(got, " "); g != step.wantDump {
			t.Errorf("tags %v: ports %q, want %q", step.tags, g, step.wantDump)
		}
	}
	if err := c.Undo(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status(ctx, "br0"); err != nil || st.Exists {
		t.Errorf("after Undo: %+v, %v", st, err)
	}
}

// Turning hw-offload off needs an OVS restart: reported, never done.
func TestHWOffloadOffRequiresRestart(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.MustVsctl("set", "Open_vSwitch", ".", "other_config:hw-offload=true")
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev", HWOffload: false}
	rec, ch, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.RestartRequired || ch.SetHWOffload || !ch.CreateBridge {
		t.Errorf("change = %+v, want CreateBridge and RestartRequired", ch)
	}
	if _, ch, err = c.Ensure(ctx, spec); err != nil || !ch.Empty() || !ch.RestartRequired {
		t.Errorf("second Ensure: change %+v, err %v; want empty with RestartRequired", ch, err)
	}
	if st, err := c.Status(ctx, "br0"); err != nil || st.HWOffload != "true" {
		t.Errorf("status %+v, %v: hw-offload changed", st, err)
	}
	if err := c.Undo(ctx, rec); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after Undo", "other_config {hw-offload=\"true\"}\n", srv.Dump())
}

// Undo never touches what vflag does not own any more: a port whose owner
// mark was removed stays, and so does the bridge holding it; a hw-offload
// value changed by the user since is kept.
func TestUndoRespectsChangesSinceEnsure(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev",
		Ports: []ovs.PortSpec{{Name: "p0"}, {Name: "p1"}}, HWOffload: true}
	rec, _, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	srv.MustVsctl("remove", "Port", "p1", "external_ids", "vflag-owner")
	srv.MustVsctl("add-port", "br0", "user0", "--", "set", "Interface", "user0", "type=internal")
	srv.MustVsctl("set", "Open_vSwitch", ".", "other_config:hw-offload=false")
	if err := c.Undo(ctx, rec); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after Undo", `other_config {hw-offload="false"}
bridge "br0" datapath_type="netdev" owner="g"
  port "br0" tag=- owner="g"
    interface "br0" type="internal"
  port "p1" tag=- owner=""
    interface "p1" type=""
  port "user0" tag=- owner=""
    interface "user0" type="internal"
`, srv.Dump())

	// Once the user's ports are gone, a repeated Undo removes the bridge.
	srv.MustVsctl("del-port", "p1", "--", "del-port", "user0")
	if err := c.Undo(ctx, rec); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after second Undo", "other_config {hw-offload=\"false\"}\n", srv.Dump())
}

func TestEnsureErrors(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.MustVsctl("add-br", "brA", "--", "set", "Bridge", "brA", "datapath_type=netdev")
	srv.MustVsctl("add-port", "brA", "mine", "--", "set", "Port", "mine", "external_ids:vflag-owner=g",
		"--", "set", "Interface", "mine", "type=internal")
	c := connect(t, srv)
	ctx := ctxT(t)
	base := func() ovs.BridgeSpec {
		return ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev", Ports: []ovs.PortSpec{{Name: "p0"}}}
	}
	for _, tc := range []struct {
		name string
		mod  func(*ovs.BridgeSpec)
		want string
	}{
		{"empty owner", func(s *ovs.BridgeSpec) { s.Owner = "" }, "empty owner"},
		{"empty bridge", func(s *ovs.BridgeSpec) { s.Bridge = "" }, "empty bridge"},
		{"duplicate port", func(s *ovs.BridgeSpec) { s.Ports = append(s.Ports, ovs.PortSpec{Name: "p0"}) }, "listed twice"},
		{"port named like bridge", func(s *ovs.BridgeSpec) { s.Ports[0].Name = "br0" }, "bridge's name"},
		{"tag out of range", func(s *ovs.BridgeSpec) { s.Ports[0].Tag = 4095 }, "out of range"},
		{"own port on another bridge", func(s *ovs.BridgeSpec) { s.Ports[0].Name = "mine" }, "is on bridge brA"},
		{"bridge name taken by a port", func(s *ovs.BridgeSpec) { s.Bridge = "mine"; s.Ports = nil }, "port named mine already exists"},
	} {
		s := base()
		tc.mod(&s)
		_, _, err := c.Ensure(ctx, s)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "ovs: ensure bridge ") {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
		if _, err := c.Plan(ctx, s); err == nil {
			t.Errorf("%s: Plan succeeded", tc.name)
		}
	}
	if n := c.TxnCount(); n != 0 {
		t.Errorf("%d transactions sent for invalid specs", n)
	}
	if err := c.Undo(ctx, ovs.Record{Bridge: "br0"}); err == nil {
		t.Errorf("Undo without owner succeeded")
	}
}

func TestConnectErrorNamesEndpoint(t *testing.T) {
	t.Parallel()
	ep := "unix:" + t.TempDir() + "/missing.sock"
	_, err := ovs.Connect(ctxT(t), ep)
	if err == nil || !strings.Contains(err.Error(), ep) {
		t.Errorf("Connect(%s) = %v, want an error naming the endpoint", ep, err)
	}
}

// WaitApplied returns once ovs-vswitchd has applied the change, and only then.
func TestWaitApplied(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev", Ports: []ovs.PortSpec{{Name: "p0"}}}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	out := strings.Fields(srv.MustVsctl("get", "Open_vSwitch", ".", "cur_cfg", "next_cfg"))
	if len(out) != 2 || out[0] != out[1] {
		t.Errorf("cur_cfg next_cfg = %v after WaitApplied", out)
	}
	// The bridge's internal port has the OpenFlow LOCAL port number: the
	// switch has built the bridge.
	st, err := c.Status(ctx, "br0")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Ports) != 2 || st.Ports[0].Name != "br0" || st.Ports[0].OFPort != 65534 {
		t.Errorf("status after WaitApplied: %+v", st)
	}

	// Without ovs-vswitchd nothing applies the next change: WaitApplied must
	// wait until its context ends.
	srv.StopVswitchd()
	spec.Ports = append(spec.Ports, ovs.PortSpec{Name: "p1"})
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := c.WaitApplied(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitApplied without ovs-vswitchd = %v, want deadline exceeded", err)
	}
}

// Status shows real OpenFlow port numbers for ports whose network devices
// exist in the switch's namespace, and the error for a missing one.
func TestStatus(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.AddVeth("vf0rep", "vf0peer")
	srv.AddVeth("vf1rep", "vf1peer")
	c := connect(t, srv)
	ctx := ctxT(t)

	st, err := c.Status(ctx, "br-lag")
	if err != nil || st.Exists || st.HWOffload != "" {
		t.Errorf("status before Ensure: %+v, %v", st, err)
	}
	spec := ovs.BridgeSpec{Owner: "lag0", Bridge: "br-lag", DatapathType: "netdev", HWOffload: true,
		Ports: []ovs.PortSpec{{Name: "vf0rep", Tag: 5}, {Name: "vf1rep"}, {Name: "vfmissing"}}}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = c.Status(ctx, "br-lag")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exists || st.Owner != "lag0" || st.HWOffload != "true" || len(st.Ports) != 4 {
		t.Fatalf("status = %+v", st)
	}
	byName := map[string]ovs.PortStatus{}
	for _, p := range st.Ports {
		byName[p.Name] = p
	}
	for _, name := range []string{"vf0rep", "vf1rep"} {
		p := byName[name]
		if p.OFPort <= 0 || p.OFPort >= 65534 || p.Error != "" || p.Owner != "lag0" {
			t.Errorf("%s: %+v, want a real ofport and no error", name, p)
		}
	}
	if byName["vf0rep"].Tag != 5 || byName["vf1rep"].Tag != 0 {
		t.Errorf("tags: %+v", st.Ports)
	}
	if p := byName["vfmissing"]; p.OFPort != -1 || !strings.Contains(p.Error, "No such device") {
		t.Errorf("vfmissing: %+v, want ofport -1 and a 'No such device' error", p)
	}
	if p := byName["br-lag"]; p.OFPort != 65534 {
		t.Errorf("internal port: %+v", p)
	}
}

// A config that grows: the second Ensure adds only the new port and records
// only it; Undo of the merged records returns to the baseline.
func TestEnsureGrowsMergedUndo(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	baseline := srv.Dump()
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev", HWOffload: true,
		Ports: []ovs.PortSpec{{Name: "a"}}}
	rec1, _, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Ports = append(spec.Ports, ovs.PortSpec{Name: "b", Tag: 3})
	rec2, ch, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ovs.Change{AddPorts: []string{"b"}}, ch); d != "" {
		t.Errorf("change (-want +got):\n%s", d)
	}
	if d := cmp.Diff(ovs.Record{Owner: "g", Bridge: "br0", Ports: []string{"b"}}, rec2); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
	// The caller's merge.
	merged := rec1
	merged.Ports = append(merged.Ports, rec2.Ports...)
	if err := c.Undo(ctx, journal(t, merged)); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after Undo", baseline, srv.Dump())
}

// UndoOwned removes every port of the owner on the bridge, also one the
// record does not list (added by a later Ensure), and leaves another
// owner's port and a foreign port alone; a second UndoOwned changes nothing.
func TestUndoOwned(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.MustVsctl("add-br", "br0", "--", "set", "Bridge", "br0", "datapath_type=netdev")
	srv.MustVsctl("add-port", "br0", "user0", "--", "set", "Interface", "user0", "type=internal")
	baseline := srv.Dump()
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", HWOffload: true, Ports: []ovs.PortSpec{{Name: "a"}}}
	rec, _, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Ports = append(spec.Ports, ovs.PortSpec{Name: "b", Tag: 3})
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	other := ovs.BridgeSpec{Owner: "h", Bridge: "br0", Ports: []ovs.PortSpec{{Name: "c"}}}
	orec, _, err := c.Ensure(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	rec = journal(t, rec) // lists "a" only
	if err := c.UndoOwned(ctx, rec); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after UndoOwned", `other_config {}
bridge "br0" datapath_type="netdev" owner=""
  port "br0" tag=- owner=""
    interface "br0" type="internal"
  port "c" tag=- owner="h"
    interface "c" type=""
  port "user0" tag=- owner=""
    interface "user0" type="internal"
`, srv.Dump())
	n := c.TxnCount()
	if err := c.UndoOwned(ctx, rec); err != nil || c.TxnCount() != n {
		t.Errorf("second UndoOwned: err %v, %d transactions", err, c.TxnCount()-n)
	}
	if err := c.Undo(ctx, journal(t, orec)); err != nil {
		t.Fatal(err)
	}
	diffDump(t, "after both", baseline, srv.Dump())
}

// TestVLANModeTrunksMTU: vlan_mode, trunks and mtu_request are written on
// creation, changed on exactly the ports whose columns differ (trunks as a
// set) and cleared when the spec drops them.
func TestVLANModeTrunksMTU(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev",
		Ports: []ovs.PortSpec{{Name: "bond0", MTURequest: 9000},
			{Name: "a", Tag: 10, VLANMode: "native-untagged", Trunks: []int{30, 20}, MTURequest: 9000},
			{Name: "b", Tag: 11, MTURequest: 9000}}}
	type port struct {
		Tag    int
		Mode   string
		Trunks []int
		MTUReq int
	}
	read := func() map[string]port {
		st, err := c.Status(ctx, "br0")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]port{}
		for _, p := range st.Ports {
			if p.Name != "br0" {
				out[p.Name] = port{p.Tag, p.VLANMode, p.Trunks, p.MTURequest}
			}
		}
		return out
	}
	rec, _, err := c.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]port{"bond0": {0, "", nil, 9000}, "a": {10, "native-untagged", []int{20, 30}, 9000}, "b": {11, "", nil, 9000}}
	if d := cmp.Diff(want, read()); d != "" {
		t.Fatalf("after create (-want +got):\n%s", d)
	}
	for _, step := range []struct {
		name   string
		mutate func(s *ovs.BridgeSpec)
		want   ovs.Change
		after  func(m map[string]port)
	}{
		{"trunks reordered: no change", func(s *ovs.BridgeSpec) { s.Ports[1].Trunks = []int{20, 30} }, ovs.Change{}, func(map[string]port) {}},
		{"trunks [20] on a only", func(s *ovs.BridgeSpec) { s.Ports[1].Trunks = []int{20} }, ovs.Change{Retag: []string{"a"}},
			func(m map[string]port) { m["a"] = port{10, "native-untagged", []int{20}, 9000} }},
		{"a to trunk mode", func(s *ovs.BridgeSpec) { s.Ports[1].Tag, s.Ports[1].VLANMode = 0, "trunk" }, ovs.Change{Retag: []string{"a"}},
			func(m map[string]port) { m["a"] = port{0, "trunk", []int{20}, 9000} }},
		{"mtu 1500", func(s *ovs.BridgeSpec) {
			for i := range s.Ports {
				s.Ports[i].MTURequest = 1500
			}
		}, ovs.Change{SetMTU: []string{"bond0", "a", "b"}}, func(m map[string]port) {
			for k, p := range m {
				p.MTUReq = 1500
				m[k] = p
			}
		}},
		{"mtu and VLAN columns dropped", func(s *ovs.BridgeSpec) {
			for i := range s.Ports {
				s.Ports[i].MTURequest = 0
			}
			s.Ports[1].VLANMode, s.Ports[1].Trunks = "", nil
		}, ovs.Change{Retag: []string{"a"}, SetMTU: []string{"bond0", "a", "b"}}, func(m map[string]port) {
			m["bond0"], m["a"], m["b"] = port{}, port{}, port{Tag: 11}
		}},
	} {
		step.mutate(&spec)
		n := c.TxnCount()
		_, ch, err := c.Ensure(ctx, spec)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if d := cmp.Diff(step.want, ch); d != "" {
			t.Errorf("%s: change (-want +got):\n%s", step.name, d)
		}
		wantTx := int64(1)
		if step.want.Empty() {
			wantTx = 0
		}
		if c.TxnCount()-n != wantTx {
			t.Errorf("%s: %d transactions, want %d", step.name, c.TxnCount()-n, wantTx)
		}
		step.after(want)
		if d := cmp.Diff(want, read()); d != "" {
			t.Errorf("%s: ports (-want +got):\n%s", step.name, d)
		}
	}
	if err := c.Undo(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status(ctx, "br0"); err != nil || st.Exists {
		t.Errorf("after Undo: %+v, %v", st, err)
	}
}

// PlanStatus reads once what Plan and Status read apart, and says the same
// as each: before the bridge exists, converged, and with a port retagged
// and one missing.
func TestPlanStatusIsPlanAndStatus(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.AddVeth("vf0rep", "vf0peer")
	srv.AddVeth("vf1rep", "vf1peer")
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "lag0", Bridge: "br-lag", DatapathType: "netdev", HWOffload: true,
		Ports: []ovs.PortSpec{{Name: "vf0rep", Tag: 5}, {Name: "vf1rep"}}}
	same := func(when string, s ovs.BridgeSpec) {
		t.Helper()
		ch, err := c.Plan(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx, s.Bridge)
		if err != nil {
			t.Fatal(err)
		}
		n0 := c.Reads()
		ch2, st2, err := c.PlanStatus(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if n := c.Reads() - n0; n != 1 {
			t.Errorf("%s: PlanStatus made %d transactions, want 1 read", when, n)
		}
		if !reflect.DeepEqual(ch, ch2) {
			t.Errorf("%s: PlanStatus change %+v, Plan %+v", when, ch2, ch)
		}
		if !reflect.DeepEqual(st, st2) {
			t.Errorf("%s: PlanStatus status %+v, Status %+v", when, st2, st)
		}
	}
	same("no bridge", spec)
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	same("converged", spec)
	changed := spec
	changed.Ports = []ovs.PortSpec{{Name: "vf0rep", Tag: 7}, {Name: "vf1rep"}, {Name: "vf2rep"}}
	same("retag and a new port", changed)
}

// PortStatus is Status cut to one port: the same bridge facts and the same
// port, read with conditions (no other port or interface row sent).
func TestPortStatus(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.AddVeth("vf0rep", "vf0peer")
	srv.AddVeth("vf1rep", "vf1peer")
	c := connect(t, srv)
	ctx := ctxT(t)
	if ps, err := c.PortStatus(ctx, "br-lag", "vf0rep"); err != nil || ps.Exists || len(ps.Ports) != 0 {
		t.Fatalf("before the bridge: %+v, %v", ps, err)
	}
	spec := ovs.BridgeSpec{Owner: "lag0", Bridge: "br-lag", DatapathType: "netdev", HWOffload: true,
		Ports: []ovs.PortSpec{{Name: "vf0rep", Tag: 5}, {Name: "vf1rep"}}}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	full, err := c.Status(ctx, "br-lag")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := c.PortStatus(ctx, "br-lag", "vf0rep")
	if err != nil {
		t.Fatal(err)
	}
	var want []ovs.PortStatus
	for _, p := range full.Ports {
		if p.Name == "vf0rep" {
			want = append(want, p)
		}
	}
	if !ps.Exists || ps.Owner != full.Owner || ps.HWOffload != full.HWOffload || !reflect.DeepEqual(ps.Ports, want) {
		t.Errorf("PortStatus = %+v, want the bridge facts of %+v and port %+v", ps, full, want)
	}
	// A port of that name on another bridge is not this bridge's.
	srv.MustVsctl("add-br", "br-other", "--", "set", "Bridge", "br-other", "datapath_type=netdev")
	if ps, err := c.PortStatus(ctx, "br-other", "vf0rep"); err != nil || !ps.Exists || len(ps.Ports) != 0 {
		t.Errorf("vf0rep through br-other: %+v, %v; want the bridge without the port", ps, err)
	}
}

// TestPrefetch: PlanStatus takes the read Prefetch started (one read in
// all), and a write of the client's own in between makes it read afresh
// (the prefetched state predates the write and would hide it).
func TestPrefetch(t *testing.T) {
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := lagSpec()

	n0 := c.Reads()
	c.Prefetch(ctx)
	ch, _, err := c.PlanStatus(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Reads() - n0; n != 1 {
		t.Errorf("Prefetch then PlanStatus: %d reads, want 1", n)
	}
	if !ch.CreateBridge {
		t.Fatalf("plan on an empty database: %+v, want the bridge created", ch)
	}

	c.Prefetch(ctx) // sees no bridge
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	ch, bs, err := c.PlanStatus(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Empty() || !bs.Exists || len(bs.Ports) != len(spec.Ports)+1 {
		t.Errorf("PlanStatus after Ensure, with a Prefetch from before it: change %+v, bridge exists %v with %d ports; want no change and the bridge with %d ports",
			ch, bs.Exists, len(bs.Ports), len(spec.Ports)+1)
	}

	// Taken once: the next PlanStatus reads again.
	c.Prefetch(ctx)
	if _, err := c.Status(ctx, spec.Bridge); err != nil {
		t.Fatal(err)
	}
	n0 = c.Reads()
	if _, _, err := c.PlanStatus(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if n := c.Reads() - n0; n != 1 {
		t.Errorf("PlanStatus after the prefetch was taken: %d reads, want 1", n)
	}
}

// TestEnsureBuildsOnThePlansRead: Ensure after a PlanStatus that found a
// change writes from that read (a VLAN change reads OVSDB once), but reads
// again once this client wrote in between, and a plan that found nothing
// leaves nothing for it.
func TestEnsureBuildsOnThePlansRead(t *testing.T) {
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	spec := lagSpec()
	ensureReads := func(what string, want int64) {
		t.Helper()
		n0 := c.Reads()
		if _, _, err := c.Ensure(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if n := c.Reads() - n0; n != want {
			t.Errorf("Ensure %s: %d reads, want %d", what, n, want)
		}
	}
	planChanges := func(want bool) {
		t.Helper()
		ch, _, err := c.PlanStatus(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Empty() == want {
			t.Fatalf("plan: %+v, want a change: %v", ch, want)
		}
	}

	planChanges(true)
	ensureReads("right after the plan that found the bridge missing", 0)
	if got := strings.Fields(srv.MustVsctl("list-ports", spec.Bridge)); len(got) != len(spec.Ports) {
		t.Errorf("ports after Ensure on the plan's read: %q, want %d", got, len(spec.Ports))
	}

	spec.Ports[1].Tag = 300
	planChanges(true)
	if err := c.SetOtherConfig(ctx, "vflag-test", ptr("1"), nil); err != nil {
		t.Fatal(err)
	}
	ensureReads("after a write of this client's since the plan", 1)
	if got := strings.TrimSpace(srv.MustVsctl("get", "Port", spec.Ports[1].Name, "tag")); got != "300" {
		t.Errorf("tag after the retag: %q, want 300", got)
	}

	planChanges(false)
	ensureReads("after a plan that found nothing to change", 1)
}
