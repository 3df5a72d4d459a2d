package ovs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

func ports(names ...string) []ovs.PortSpec {
	out := make([]ovs.PortSpec, len(names))
	for i, n := range names {
		out[i] = ovs.PortSpec{Name: n}
	}
	return out
}

// Ensure removes the owner's ports that the spec no longer lists, in the
// same one transaction as its additions, and never a port without the mark
// or with another owner's.
func TestEnsureRemovesStalePorts(t *testing.T) {
	t.Parallel()
	four := []string{"bond0", "rep0", "rep1", "rep2", "rep3"}
	for _, tc := range []struct {
		name     string
		next     []ovs.PortSpec
		wantCh   ovs.Change
		wantDump string // ports of br-lag after the second Ensure, foreign ones included
	}{{
		name:   "numvfs 4 to 2",
		next:   ports("bond0", "rep0", "rep1"),
		wantCh: ovs.Change{RemovePorts: []string{"rep2", "rep3"}, Foreign: []string{"user0"}},
		wantDump: `  port "bond0" tag=- owner="lag0"
  port "br-lag" tag=- owner="lag0"
  port "other" tag=- owner="lag9"
  port "rep0" tag=- owner="lag0"
  port "rep1" tag=- owner="lag0"
  port "user0" tag=- owner=""
`,
	}, {
		name: "representors renamed after a reboot",
		next: ports("bond0", "eth10", "eth11", "eth12", "eth13"),
		wantCh: ovs.Change{AddPorts: []string{"eth10", "eth11", "eth12", "eth13"},
			RemovePorts: []string{"rep0", "rep1", "rep2", "rep3"}, Foreign: []string{"user0"}},
		wantDump: `  port "bond0" tag=- owner="lag0"
  port "br-lag" tag=- owner="lag0"
  port "eth10" tag=- owner="lag0"
  port "eth11" tag=- owner="lag0"
  port "eth12" tag=- owner="lag0"
  port "eth13" tag=- owner="lag0"
  port "other" tag=- owner="lag9"
  port "user0" tag=- owner=""
`,
	}, {
		name:   "shrink and retag",
		next:   []ovs.PortSpec{{Name: "bond0"}, {Name: "rep0", Tag: 7}},
		wantCh: ovs.Change{RemovePorts: []string{"rep1", "rep2", "rep3"}, Retag: []string{"rep0"}, Foreign: []string{"user0"}},
		wantDump: `  port "bond0" tag=- owner="lag0"
  port "br-lag" tag=- owner="lag0"
  port "other" tag=- owner="lag9"
  port "rep0" tag=7 owner="lag0"
  port "user0" tag=- owner=""
`,
	}, {
		name:   "no ports at all",
		next:   nil,
		wantCh: ovs.Change{RemovePorts: four},
		wantDump: `  port "br-lag" tag=- owner="lag0"
  port "other" tag=- owner="lag9"
  port "user0" tag=- owner=""
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := ovstest.Start(t)
			c := connect(t, srv)
			ctx := ctxT(t)
			spec := ovs.BridgeSpec{Owner: "lag0", Bridge: "br-lag", DatapathType: "netdev", HWOffload: true,
				Ports: ports(four...)}
			rec, _, err := c.Ensure(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			// A port nobody marked, and one of another owner, on the same
			// bridge. user0 is also listed in the next spec when the
			// spec keeps some ports: it stays foreign.
			srv.MustVsctl("add-port", "br-lag", "user0", "--", "set", "Interface", "user0", "type=internal")
			if _, _, err := c.Ensure(ctx, ovs.BridgeSpec{Owner: "lag9", Bridge: "br-lag", Ports: ports("other")}); err != nil {
				t.Fatal(err)
			}
			next := spec
			next.Ports = tc.next
			if len(next.Ports) > 0 {
				next.Ports = append(next.Ports, ovs.PortSpec{Name: "user0"})
			}

			plan, err := c.Plan(ctx, next)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantCh, plan); d != "" {
				t.Errorf("Plan (-want +got):\n%s", d)
			}
			n := c.TxnCount()
			rec2, ch, err := c.Ensure(ctx, next)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.TxnCount() - n; got != 1 {
				t.Errorf("Ensure sent %d transactions, want exactly 1", got)
			}
			if d := cmp.Diff(tc.wantCh, ch); d != "" {
				t.Errorf("Ensure change (-want +got):\n%s", d)
			}
			// The record lists what Ensure created, never what it removed.
			if d := cmp.Diff(ovs.Record{Owner: "lag0", Bridge: "br-lag", Ports: tc.wantCh.AddPorts}, rec2); d != "" {
				t.Errorf("Ensure record (-want +got):\n%s", d)
			}
			if got := bridgePorts(srv.Dump(), "br-lag"); got != tc.wantDump {
				t.Errorf("ports after Ensure:\n%s\nwant:\n%s", got, tc.wantDump)
			}
			if err := c.WaitApplied(ctx); err != nil {
				t.Fatal(err)
			}

			// Converged.
			n = c.TxnCount()
			if _, ch, err := c.Ensure(ctx, next); err != nil || !ch.Empty() || c.TxnCount() != n {
				t.Errorf("second Ensure: change %+v, err %v, %d transactions", ch, err, c.TxnCount()-n)
			}
			// Undo of the first record (it lists ports already removed):
			// what is left of lag0 goes, the others' ports stay.
			merged := rec
			merged.Ports = append(merged.Ports, rec2.Ports...)
			if err := c.Undo(ctx, journal(t, merged)); err != nil {
				t.Fatal(err)
			}
			if got, want := bridgePorts(srv.Dump(), "br-lag"), `  port "br-lag" tag=- owner="lag0"
  port "other" tag=- owner="lag9"
  port "user0" tag=- owner=""
`; got != want {
				t.Errorf("ports after Undo:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// bridgePorts is the port lines of bridge in a Dump.
func bridgePorts(dump, bridge string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.SplitAfter(dump, "\n") {
		switch {
		case strings.HasPrefix(l, "bridge "):
			in = strings.HasPrefix(l, fmt.Sprintf("bridge %q ", bridge))
		case in && strings.HasPrefix(l, "  port "):
			b.WriteString(l)
		}
	}
	return b.String()
}

// A bridge the config renamed: RemoveOwned prunes the old one (its netdevs
// released), and Ensure right after builds the new one with the same netdevs
// as ports, which a real ovs-vswitchd then opens.
func TestRemoveOwnedRename(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		vsctlBridge bool // br-a was created by someone else, vflag only added ports
		foreignPort bool // br-a holds a port of someone else
		waitBetween bool // WaitApplied between RemoveOwned and Ensure
		wantOld     string
	}{
		{name: "vflag's bridge", wantOld: ""},
		{name: "vflag's bridge, applied in between", waitBetween: true, wantOld: ""},
		{name: "vflag's bridge with a foreign port", foreignPort: true, wantOld: `bridge "br-a" datapath_type="netdev" owner="g"
  port "br-a" tag=- owner="g"
    interface "br-a" type="internal"
  port "u0" tag=- owner=""
    interface "u0" type="internal"
`},
		{name: "bridge vflag did not create", vsctlBridge: true, wantOld: `bridge "br-a" datapath_type="netdev" owner=""
  port "br-a" tag=- owner=""
    interface "br-a" type="internal"
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := ovstest.Start(t)
			srv.AddVeth("b0", "b0peer")
			srv.AddVeth("p0", "p0peer")
			// A bridge of someone else, and another owner's bridge: untouched.
			srv.MustVsctl("add-br", "br-x", "--", "set", "Bridge", "br-x", "datapath_type=netdev")
			srv.MustVsctl("add-port", "br-x", "ux", "--", "set", "Interface", "ux", "type=internal")
			if tc.vsctlBridge {
				srv.MustVsctl("add-br", "br-a", "--", "set", "Bridge", "br-a", "datapath_type=netdev")
			}
			c := connect(t, srv)
			ctx := ctxT(t)
			if _, _, err := c.Ensure(ctx, ovs.BridgeSpec{Owner: "h", Bridge: "br-h", DatapathType: "netdev",
				Ports: ports("h0")}); err != nil {
				t.Fatal(err)
			}
			old := ovs.BridgeSpec{Owner: "g", Bridge: "br-a", DatapathType: "netdev", HWOffload: true,
				Ports: []ovs.PortSpec{{Name: "b0"}, {Name: "p0", Tag: 10}}}
			if _, _, err := c.Ensure(ctx, old); err != nil {
				t.Fatal(err)
			}
			if tc.foreignPort {
				srv.MustVsctl("add-port", "br-a", "u0", "--", "set", "Interface", "u0", "type=internal")
			}
			if err := c.WaitApplied(ctx); err != nil {
				t.Fatal(err)
			}
			assertOFPorts(t, c, "br-a", "b0", "p0")
			others := dumpBridges(srv.Dump(), "br-x", "br-h")

			if got, err := c.OwnedBridges(ctx, "g"); err != nil || !cmp.Equal(got, []string{"br-a"}) {
				t.Errorf("OwnedBridges(g) = %v, %v; want [br-a]", got, err)
			}
			n := c.TxnCount()
			if err := c.RemoveOwned(ctx, "g", "br-a"); err != nil {
				t.Fatal(err)
			}
			if c.TxnCount() != n+1 {
				t.Errorf("RemoveOwned sent %d transactions, want 1", c.TxnCount()-n)
			}
			if got := dumpBridges(srv.Dump(), "br-a"); got != tc.wantOld {
				t.Errorf("br-a after RemoveOwned:\n%s\nwant:\n%s", got, tc.wantOld)
			}
			if tc.waitBetween {
				if err := c.WaitApplied(ctx); err != nil {
					t.Fatal(err)
				}
			}
			nw := old
			nw.Bridge = "br-b"
			_, ch, err := c.Ensure(ctx, nw)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(ovs.Change{CreateBridge: true, AddPorts: []string{"b0", "p0"}}, ch); d != "" {
				t.Errorf("Ensure br-b (-want +got):\n%s", d)
			}
			if err := c.WaitApplied(ctx); err != nil {
				t.Fatal(err)
			}
			assertOFPorts(t, c, "br-b", "b0", "p0")

			dump := srv.Dump()
			if got := dumpBridges(dump, "br-x", "br-h"); got != others {
				t.Errorf("other bridges changed:\n%s\nwant:\n%s", got, others)
			}
			if !strings.HasPrefix(dump, `other_config {hw-offload="true"}`) {
				t.Errorf("hw-offload changed: %s", dump)
			}
			wantOwned := []string{"br-b"}
			if st, _ := c.Status(ctx, "br-a"); st.Owner == "g" {
				wantOwned = []string{"br-a", "br-b"} // kept for its foreign port
			}
			if got, err := c.OwnedBridges(ctx, "g"); err != nil || !cmp.Equal(got, wantOwned) {
				t.Errorf("OwnedBridges(g) after = %v, %v; want %v", got, err, wantOwned)
			}
			if got, err := c.OwnedBridges(ctx, "h"); err != nil || !cmp.Equal(got, []string{"br-h"}) {
				t.Errorf("OwnedBridges(h) = %v, %v", got, err)
			}

			// Repeated: nothing left to do, no transaction.
			n = c.TxnCount()
			if err := c.RemoveOwned(ctx, "g", "br-a"); err != nil || c.TxnCount() != n {
				t.Errorf("second RemoveOwned: %v, %d transactions", err, c.TxnCount()-n)
			}
			// Another owner's bridge and a foreign bridge: nothing of g there.
			for _, br := range []string{"br-h", "br-x", "missing"} {
				if err := c.RemoveOwned(ctx, "g", br); err != nil || c.TxnCount() != n {
					t.Errorf("RemoveOwned(g, %s): %v, %d transactions", br, err, c.TxnCount()-n)
				}
			}
			if got := dumpBridges(srv.Dump(), "br-x", "br-h"); got != others {
				t.Errorf("other bridges changed:\n%s\nwant:\n%s", got, others)
			}
		})
	}
}

func TestRemoveOwnedErrors(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	if err := c.RemoveOwned(ctx, "", "br0"); err == nil {
		t.Error("RemoveOwned without owner succeeded")
	}
	if err := c.RemoveOwned(ctx, "g", ""); err == nil {
		t.Error("RemoveOwned without bridge succeeded")
	}
	if _, err := c.OwnedBridges(ctx, ""); err == nil {
		t.Error("OwnedBridges without owner succeeded")
	}
	if got, err := c.OwnedBridges(ctx, "g"); err != nil || len(got) != 0 {
		t.Errorf("OwnedBridges on an empty database = %v, %v", got, err)
	}
	if _, err := c.WaitOFPorts(ctx, "br0", ""); err == nil {
		t.Error("WaitOFPorts without owner succeeded")
	}
}

// dumpBridges is the part of a Dump for the named bridges.
func dumpBridges(dump string, names ...string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.SplitAfter(dump, "\n") {
		if strings.HasPrefix(l, "bridge ") {
			in = false
			for _, n := range names {
				if strings.HasPrefix(l, fmt.Sprintf("bridge %q ", n)) {
					in = true
				}
			}
		} else if !strings.HasPrefix(l, " ") {
			in = false
		}
		if in {
			b.WriteString(l)
		}
	}
	return b.String()
}

func assertOFPorts(t *testing.T, c *ovs.Client, bridge string, names ...string) {
	t.Helper()
	st, err := c.Status(ctxT(t), bridge)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ovs.PortStatus{}
	for _, p := range st.Ports {
		got[p.Name] = p
	}
	for _, n := range names {
		if p, ok := got[n]; !ok || p.OFPort <= 0 || p.Error != "" {
			t.Errorf("%s on %s: %+v (present %v), want an ofport and no error", n, bridge, p, ok)
		}
	}
}

// A port whose netdev does not exist yet gets its ofport when the netdev
// appears: WaitOFPorts returns then, and returns the last status when its
// context ends first.
func TestWaitOFPorts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		applied bool          // WaitApplied before the netdev appears
		delay   time.Duration // from WaitOFPorts' start to the netdev
		wantPre int           // ofport of late0 before the netdev exists (applied only)
	}{
		{name: "netdev appears later", applied: true, delay: 300 * time.Millisecond, wantPre: -1},
		{name: "netdev appears at once", applied: true, delay: 0, wantPre: -1},
		{name: "bridge not applied yet", applied: false, delay: 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := ovstest.Start(t)
			srv.AddVeth("up0", "up0peer")
			c := connect(t, srv)
			ctx := ctxT(t)
			// A foreign port whose netdev never appears: not waited for.
			srv.MustVsctl("add-br", "br-x", "--", "set", "Bridge", "br-x", "datapath_type=netdev")
			spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev", Ports: ports("late0", "up0")}
			if _, _, err := c.Ensure(ctx, spec); err != nil {
				t.Fatal(err)
			}
			srv.MustVsctl("--no-wait", "add-port", "br0", "ghost")
			if tc.applied {
				if err := c.WaitApplied(ctx); err != nil {
					t.Fatal(err)
				}
				st, err := c.Status(ctx, "br0")
				if err != nil {
					t.Fatal(err)
				}
				if p := portOf(st, "late0"); p.OFPort != tc.wantPre || !strings.Contains(p.Error, "No such device") {
					t.Fatalf("late0 before its netdev: %+v", p)
				}
				// A short context: returns the last status, late0 missing.
				short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				start := time.Now()
				st, err = c.WaitOFPorts(short, "br0", "g")
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
					t.Errorf("WaitOFPorts with a 200 ms context returned after %v", d)
				}
				if got := st.WithoutOFPort("g"); !cmp.Equal(got, []string{"late0"}) {
					t.Errorf("WithoutOFPort after a timed-out wait = %v, want [late0]", got)
				}
			}

			type result struct {
				st  ovs.BridgeStatus
				err error
				at  time.Time
			}
			done := make(chan result, 1)
			go func() {
				st, err := c.WaitOFPorts(ctx, "br0", "g")
				done <- result{st, err, time.Now()}
			}()
			time.Sleep(tc.delay)
			select {
			case r := <-done:
				t.Fatalf("WaitOFPorts returned before the netdev exists: %+v, %v", r.st, r.err)
			default:
			}
			// The netdev appears between before and created.
			before := time.Now()
			if _, err := srv.Exec("ip", "link", "add", "late0", "type", "veth", "peer", "name", "late0peer"); err != nil {
				t.Fatal(err)
			}
			created := time.Now()
			var r result
			select {
			case r = <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("WaitOFPorts still waiting 15 s after the netdev appeared")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			t.Logf("WaitOFPorts returned %v after `ip link add` returned (%v after it started); ovs-vswitchd logged the port %s",
				r.at.Sub(created).Round(time.Microsecond), r.at.Sub(before).Round(time.Microsecond), addedAt(srv, "late0", before))
			if got := r.st.WithoutOFPort("g"); len(got) != 0 {
				t.Errorf("ports without ofport after WaitOFPorts: %v", got)
			}
			if p := portOf(r.st, "late0"); p.OFPort <= 0 || p.Error != "" {
				t.Errorf("late0 after WaitOFPorts: %+v", p)
			}
			if p := portOf(r.st, "ghost"); p.OFPort > 0 || p.Owner != "" {
				t.Errorf("ghost: %+v, want a foreign port without ofport", p)
			}
			// Everything there: returns at once.
			start := time.Now()
			if _, err := c.WaitOFPorts(ctx, "br0", "g"); err != nil || time.Since(start) > time.Second {
				t.Errorf("WaitOFPorts with all ofports: %v after %v", err, time.Since(start))
			}
		})
	}
}

// addedAt says when ovs-vswitchd's log reports the interface added, relative
// to t (for the measurement in the test log only).
func addedAt(srv *ovstest.Server, iface string, t time.Time) string {
	b, err := os.ReadFile(filepath.Join(srv.Dir(), "ovs-vswitchd.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "added interface "+iface+" ") {
			continue
		}
		ts, _, _ := strings.Cut(l, "|")
		at, err := time.Parse("2006-01-02T15:04:05.000Z", ts)
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return fmt.Sprintf("added %v after `ip link add` started: %q", at.Sub(t).Round(time.Millisecond), l)
	}
	return "(not in its log)"
}

func portOf(st ovs.BridgeStatus, name string) ovs.PortStatus {
	for _, p := range st.Ports {
		if p.Name == name {
			return p
		}
	}
	return ovs.PortStatus{}
}

// A port that loses the owner's mark between the read and the write (another
// client took it over) is never removed: the transaction aborts, nothing of
// it happens, and the error says so.
func TestRemoveGuardedAgainstConcurrentChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		remove func(c *ovs.Client, ctx context.Context) error
	}{
		{"Ensure of a smaller spec", func(c *ovs.Client, ctx context.Context) error {
			_, _, err := c.Ensure(ctx, ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev",
				Ports: ports("a", "new")})
			return err
		}},
		{"RemoveOwned", func(c *ovs.Client, ctx context.Context) error { return c.RemoveOwned(ctx, "g", "br0") }},
		{"UndoOwned", func(c *ovs.Client, ctx context.Context) error {
			return c.UndoOwned(ctx, ovs.Record{Owner: "g", Bridge: "br0", BridgeCreated: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := ovstest.Start(t)
			c := connect(t, srv)
			ctx := ctxT(t)
			if _, _, err := c.Ensure(ctx, ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev",
				Ports: ports("a", "b", "c")}); err != nil {
				t.Fatal(err)
			}
			before := srv.Dump()
			c.SetBeforeCommit(func() {
				srv.MustVsctl("--no-wait", "set", "Port", "c", "external_ids:vflag-owner=other")
			})
			err := tc.remove(c, ctx)
			c.SetBeforeCommit(nil)
			t.Logf("%s: %v", tc.name, err)
			if err == nil || !strings.Contains(err.Error(), "wait") {
				t.Errorf("err = %v, want the transaction aborted by its wait", err)
			}
			want := strings.Replace(before, `port "c" tag=- owner="g"`, `port "c" tag=- owner="other"`, 1)
			diffDump(t, "after the aborted removal", want, srv.Dump())
		})
	}
}

// TestEnsurePartialKeepsOthers: a Partial spec (the qemu hook adding one
// representor) removes none of the owner's other ports.
func TestEnsurePartialKeepsOthers(t *testing.T) {
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	full := ovs.BridgeSpec{Owner: "lag0", Bridge: "br-lag", DatapathType: "netdev", Ports: ports("bond0", "rep0", "rep1")}
	if _, _, err := c.Ensure(ctx, full); err != nil {
		t.Fatal(err)
	}
	one := ovs.BridgeSpec{Owner: "lag0", Bridge: "br-lag", Ports: []ovs.PortSpec{{Name: "rep2", Tag: 7}}, Partial: true}
	_, ch, err := c.Ensure(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.RemovePorts) != 0 || strings.Join(ch.AddPorts, " ") != "rep2" {
		t.Fatalf("partial Ensure: add %v remove %v, want add [rep2] and no removal", ch.AddPorts, ch.RemovePorts)
	}
	bs, err := c.Status(ctx, "br-lag")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range bs.Ports {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	if got := strings.Join(names, " "); got != "bond0 br-lag rep0 rep1 rep2" {
		t.Fatalf("ports after a partial Ensure: %s", got)
	}
}

// Two owners whose netdevs swapped names (a reboot that gave one group's
// representors the names the other group's had): with MoveOthers, each
// owner's Ensure takes its ports from the other owner's bridge (or from
// its own bridge, where a third owner holds one) in its one transaction,
// whichever goes first; a port without a mark stays where it is.
func TestEnsureMovesOthersPorts(t *testing.T) {
	t.Parallel()
	specA := func(reps ...string) ovs.BridgeSpec {
		return ovs.BridgeSpec{Owner: "lag0", Bridge: "br-a", DatapathType: "netdev", MoveOthers: true, Ports: ports(append([]string{"bond0"}, reps...)...)}
	}
	specB := func(reps ...string) ovs.BridgeSpec {
		return ovs.BridgeSpec{Owner: "lag1", Bridge: "br-b", DatapathType: "netdev", MoveOthers: true, Ports: ports(append([]string{"bond1"}, reps...)...)}
	}
	wantA := `  port "bond0" tag=- owner="lag0"
  port "br-a" tag=- owner="lag0"
  port "e8" tag=- owner="lag0"
  port "e9" tag=- owner="lag0"
  port "x0" tag=- owner="lag0"
`
	wantB := `  port "bond1" tag=- owner="lag1"
  port "br-b" tag=- owner="lag1"
  port "e4" tag=- owner="lag1"
  port "e5" tag=- owner="lag1"
  port "u8" tag=- owner=""
`
	for _, aFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("lag0 first=%v", aFirst), func(t *testing.T) {
			t.Parallel()
			srv := ovstest.Start(t)
			c := connect(t, srv)
			ctx := ctxT(t)
			for _, s := range []ovs.BridgeSpec{specA("e4", "e5"), specB("e8", "e9"), {Owner: "lag9", Bridge: "br-a", Ports: ports("x0")}} {
				if _, _, err := c.Ensure(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			srv.MustVsctl("add-port", "br-b", "u8", "--", "set", "Interface", "u8", "type=internal")
			// After the swap: lag0's are e8 and e9 (and x0, lag9's on br-a),
			// lag1's e4 and e5; lag0 also lists u8, which nobody marked.
			a, b := specA("e8", "e9", "x0", "u8"), specB("e4", "e5")
			// Both planned from the same read (plan shows both moves).
			pa, err := c.Plan(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			want := ovs.Change{AddPorts: []string{"e8", "e9", "x0"}, RemovePorts: []string{"e4", "e5"}, Foreign: []string{"u8"},
				Moved: []ovs.Move{{Port: "e8", Bridge: "br-b", Owner: "lag1"}, {Port: "e9", Bridge: "br-b", Owner: "lag1"}, {Port: "x0", Bridge: "br-a", Owner: "lag9"}}}
			if d := cmp.Diff(want, pa); d != "" {
				t.Errorf("Plan lag0 (-want +got):\n%s", d)
			}
			pb, err := c.Plan(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(ovs.Change{AddPorts: []string{"e4", "e5"}, RemovePorts: []string{"e8", "e9"},
				Moved: []ovs.Move{{Port: "e4", Bridge: "br-a", Owner: "lag0"}, {Port: "e5", Bridge: "br-a", Owner: "lag0"}}}, pb); d != "" {
				t.Errorf("Plan lag1 (-want +got):\n%s", d)
			}
			order := []ovs.BridgeSpec{a, b}
			if !aFirst {
				order = []ovs.BridgeSpec{b, a}
			}
			for _, s := range order {
				rec, _, err := c.Ensure(ctx, s)
				if err != nil {
					t.Fatalf("Ensure %s: %v", s.Bridge, err)
				}
				// What the owner holds now it made: its undo removes it.
				if slices.Contains(rec.Ports, "u8") {
					t.Errorf("record of %s lists the foreign port u8: %v", s.Bridge, rec.Ports)
				}
			}
			if err := c.WaitApplied(ctx); err != nil {
				t.Fatal(err)
			}
			dump := srv.Dump()
			if got := bridgePorts(dump, "br-a"); got != wantA {
				t.Errorf("br-a:\n%s\nwant:\n%s", got, wantA)
			}
			if got := bridgePorts(dump, "br-b"); got != wantB {
				t.Errorf("br-b:\n%s\nwant:\n%s", got, wantB)
			}
			for _, s := range []ovs.BridgeSpec{a, b} {
				if ch, err := c.Plan(ctx, s); err != nil || !ch.Empty() {
					t.Errorf("converged %s plans %+v (err %v)", s.Bridge, ch, err)
				}
			}
			// Undo of lag0's whole bridge takes the moved ports too; the
			// foreign u8 stays on br-b.
			if err := c.UndoOwned(ctx, ovs.Record{Owner: "lag0", Bridge: "br-a", BridgeCreated: true}); err != nil {
				t.Fatal(err)
			}
			if got := bridgePorts(srv.Dump(), "br-b"); got != wantB {
				t.Errorf("br-b after lag0's undo:\n%s\nwant:\n%s", got, wantB)
			}
			if got := bridgePorts(srv.Dump(), "br-a"); strings.Contains(got, "e8") {
				t.Errorf("br-a after lag0's undo still holds e8:\n%s", got)
			}
		})
	}
}

// Without MoveOthers another owner's port stays where it is, reported as
// foreign, and an owner's Ensure never touches it.
func TestEnsureLeavesOthersPortsWithoutMove(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	if _, _, err := c.Ensure(ctx, ovs.BridgeSpec{Owner: "lag1", Bridge: "br-b", DatapathType: "netdev", Ports: ports("e8")}); err != nil {
		t.Fatal(err)
	}
	_, ch, err := c.Ensure(ctx, ovs.BridgeSpec{Owner: "lag0", Bridge: "br-a", DatapathType: "netdev", Ports: ports("e8")})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ovs.Change{CreateBridge: true, Foreign: []string{"e8"}}, ch); d != "" {
		t.Errorf("Ensure (-want +got):\n%s", d)
	}
	if got := bridgePorts(srv.Dump(), "br-b"); !strings.Contains(got, `port "e8" tag=- owner="lag1"`) {
		t.Errorf("br-b lost e8:\n%s", got)
	}
}
