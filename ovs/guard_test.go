package ovs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

// TestEnsureGuardsAgainstConcurrentChange: each guard of a write holds when
// another client changes the database between the read a write is planned
// from and its commit (SetBeforeCommit). (A port that lost the owner's mark
// before its removal: TestRemoveGuardedAgainstConcurrentChange.)
func TestEnsureGuardsAgainstConcurrentChange(t *testing.T) {
	t.Parallel()
	base := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev", Ports: ports("a")}
	withHW := base
	withHW.HWOffload = true
	for _, tc := range []struct {
		name  string
		setup ovs.BridgeSpec
		race  []string // ovs-vsctl --no-wait arguments, run before the commit
		write func(ctx context.Context, c *ovs.Client, rec ovs.Record) error
		// errHas: what the write's error must say ("": no error).
		errHas string
		// get: ovs-vsctl arguments whose output after the write must be want.
		get  []string
		want string
	}{
		{
			name: "Ensure adding ports to a bridge deleted meanwhile aborts",
			race: []string{"del-br", "br0"},
			write: func(ctx context.Context, c *ovs.Client, _ ovs.Record) error {
				s := base
				s.Ports, s.HWOffload = ports("a", "b"), true
				_, _, err := c.Ensure(ctx, s)
				return err
			},
			errHas: "wait",
			// Nothing of the aborted transaction happened.
			get: []string{"get", "Open_vSwitch", ".", "other_config"}, want: "{k=v}",
		},
		{
			// Ensure builds on the plan's read (no read of its own): the
			// guards catch the change made since that read too.
			name:  "Ensure on a plan's read, the bridge deleted meanwhile, aborts",
			setup: base,
			race:  []string{"del-br", "br0"},
			write: func(ctx context.Context, c *ovs.Client, _ ovs.Record) error {
				s := base
				s.Ports, s.HWOffload = ports("a", "b"), true
				if ch, _, err := c.PlanStatus(ctx, s); err != nil || ch.Empty() {
					return fmt.Errorf("plan: %+v, %v; want a change", ch, err)
				}
				_, _, err := c.Ensure(ctx, s)
				return err
			},
			errHas: "wait",
			get:    []string{"get", "Open_vSwitch", ".", "other_config"}, want: "{k=v}",
		},
		{
			name:  "Undo of a bridge that gained a port aborts",
			setup: base,
			race:  []string{"add-port", "br0", "user0", "--", "set", "Interface", "user0", "type=internal"},
			write: func(ctx context.Context, c *ovs.Client, rec ovs.Record) error { return c.Undo(ctx, rec) },
			// The bridge, its port a and the user's port all stay.
			errHas: "wait",
			get:    []string{"list-ports", "br0"}, want: "a\nuser0",
		},
		{
			name:  "Undo restores hw-offload only while it is still true",
			setup: withHW,
			race:  []string{"set", "Open_vSwitch", ".", "other_config:hw-offload=false"},
			write: func(ctx context.Context, c *ovs.Client, rec ovs.Record) error { return c.Undo(ctx, rec) },
			get:   []string{"get", "Open_vSwitch", ".", "other_config:hw-offload"}, want: `"false"`,
		},
		{
			name:  "a retag misses a port that lost the owner's mark",
			setup: base,
			race:  []string{"remove", "Port", "a", "external_ids", "vflag-owner"},
			write: func(ctx context.Context, c *ovs.Client, _ ovs.Record) error {
				s := base
				s.Ports = []ovs.PortSpec{{Name: "a", Tag: 7}}
				_, _, err := c.Ensure(ctx, s)
				return err
			},
			errHas: "touched 0 rows, want 1",
			get:    []string{"get", "Port", "a", "tag"}, want: "[]",
		},
		{
			name:  "SetOtherConfig with ifValue writes only while the key holds it",
			setup: base,
			race:  []string{"set", "Open_vSwitch", ".", "other_config:k=changed"},
			write: func(ctx context.Context, c *ovs.Client, _ ovs.Record) error {
				return c.SetOtherConfig(ctx, "k", nil, ptr("v"))
			},
			get: []string{"get", "Open_vSwitch", ".", "other_config:k"}, want: `changed`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := ovstest.Start(t)
			c := connect(t, srv)
			ctx := ctxT(t)
			w := c
			if tc.setup.Owner == "" {
				// The bridge with its port a, made by another client for
				// this one to add to.
				w, tc.setup = connect(t, srv), base
			}
			rec, _, err := w.Ensure(ctx, tc.setup)
			if err != nil {
				t.Fatal(err)
			}
			srv.MustVsctl("set", "Open_vSwitch", ".", "other_config:k=v")
			c.SetBeforeCommit(func() { srv.MustVsctl(append([]string{"--no-wait"}, tc.race...)...) })
			err = tc.write(ctx, c, rec)
			c.SetBeforeCommit(nil)
			t.Logf("write: %v", err)
			switch {
			case tc.errHas == "" && err != nil:
				t.Errorf("write: %v, want success", err)
			case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
				t.Errorf("write: err %v, want one saying %q", err, tc.errHas)
			}
			if got := strings.TrimSpace(srv.MustVsctl(tc.get...)); got != tc.want {
				t.Errorf("ovs-vsctl %s = %q, want %q", strings.Join(tc.get, " "), got, tc.want)
			}
		})
	}
}
