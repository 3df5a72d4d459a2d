package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/ovs/ovnsb"
)

// fakeOVN answers as ovn-controller and the Open_vSwitch row would.
type fakeOVN struct {
	status, version string
	ctlErr          error
	ids             map[string]string
	idsErr          error
}

func (f fakeOVN) Controller(context.Context) (string, string, error) {
	return f.status, f.version, f.ctlErr
}
func (f fakeOVN) ExternalIDs(context.Context, string) (map[string]string, error) {
	return f.ids, f.idsErr
}

func ovnGroup() Group {
	g := lagGroup()
	g.OVN = &OVNGroup{Remote: "tcp:192.0.2.1:6642", SystemID: "hv1", EncapType: "geneve", EncapIP: "192.0.2.11/24", EncapDev: "bond0"}
	return g
}

// TestOVNChecks: a ready chassis passes each OVN check; each piece taken
// away fails (or warns) the check that covers it, with its reason and fix.
func TestOVNChecks(t *testing.T) {
	healthy := fakeOVN{status: "connected", version: "ovn-controller 23.03.1",
		ids: map[string]string{"system-id": "hv1", "ovn-remote": "tcp:192.0.2.1:6642"}}
	type row struct {
		name   string
		setup  func(r *readyEnv, g *Group, o *fakeOVN)
		check  string
		status Status
		words  []string
	}
	rows := []row{
		{"controller connected", nil, "ovn/controller", Pass, []string{"connected to the Southbound"}},
		{"controller not running", func(_ *readyEnv, _ *Group, o *fakeOVN) {
			o.ctlErr = fmt.Errorf("%w (no /var/run/ovn/ovn-controller.pid)", ovnsb.ErrControllerNotRunning)
		}, "ovn/controller", Fail, []string{"ovn-controller is not running", "apt-get install ovn-host"}},
		{"controller not connected", func(_ *readyEnv, _ *Group, o *fakeOVN) { o.status = "not connected" },
			"ovn/controller", Fail, []string{"ovn-controller runs but is not connected to the Southbound at tcp:192.0.2.1:6642", "ovn-sbctl --db=<remote> show"}},
		{"controller not connected, no remote yet", func(_ *readyEnv, _ *Group, o *fakeOVN) {
			o.status = "not connected"
			o.ids = map[string]string{"system-id": "hv1"}
		}, "ovn/controller", Warn, []string{"no external_ids:ovn-remote yet", "vflag up sets it"}},
		{"controller unreachable", func(_ *readyEnv, _ *Group, o *fakeOVN) { o.ctlErr = errors.New("connection refused") },
			"ovn/controller", Fail, []string{"cannot ask ovn-controller its connection-status: connection refused"}},
		{"system-id set", nil, "ovn/system-id", Pass, []string{"external_ids:system-id is hv1"}},
		{"system-id unset", func(_ *readyEnv, _ *Group, o *fakeOVN) { o.ids = map[string]string{} },
			"ovn/system-id", Warn, []string{"not set yet", "ovn.system_id (hv1)"}},
		{"system-id another, controller running", func(_ *readyEnv, _ *Group, o *fakeOVN) { o.ids["system-id"] = "old" },
			"ovn/system-id", Fail, []string{"external_ids:system-id is old, ovn.system_id is hv1", "ovn-sbctl chassis-del old"}},
		{"system-id another, controller stopped", func(_ *readyEnv, _ *Group, o *fakeOVN) {
			o.ids["system-id"] = "old"
			o.ctlErr = ovnsb.ErrControllerNotRunning
		}, "ovn/system-id", Warn, []string{"vflag up changes it"}},
		{"the Open_vSwitch row unreadable", func(_ *readyEnv, _ *Group, o *fakeOVN) { o.idsErr = errors.New("no db") },
			"ovn/system-id", Skip, []string{"cannot read the Open_vSwitch row: no db"}},
		{"encap address on the bond", func(r *readyEnv, _ *Group, _ *fakeOVN) {
			mustDo(t, r.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100}))
			mustDo(t, r.h.AddAddr("bond0", "192.0.2.11/24"))
		}, "ovn/encap-ip", Pass, []string{"encap address 192.0.2.11/24 on bond0"}},
		{"encap address not yet there", nil, "ovn/encap-ip", Warn, []string{"192.0.2.11/24 is not on bond0 yet", "vflag up puts it there"}},
		{"encap address on another device", func(r *readyEnv, _ *Group, _ *fakeOVN) {
			mustDo(t, r.h.AddAddr("p1", "192.0.2.11/24"))
		}, "ovn/encap-ip", Fail, []string{"on another device (192.0.2.11/24 on p1), not bond0", "ip addr del 192.0.2.11/24 dev <device>"}},
		{"versions", nil, "ovn/versions", Pass, []string{"ovn-controller 23.03.1, Open vSwitch"}},
		{"versions without a controller", func(_ *readyEnv, _ *Group, o *fakeOVN) { o.ctlErr = ovnsb.ErrControllerNotRunning },
			"ovn/versions", Skip, []string{"ovn-controller's version unknown"}},
		{"geneve loaded", func(r *readyEnv, _ *Group, _ *fakeOVN) { r.machine.file("/sys/module/geneve/initstate", "live\n") },
			"ovn/geneve", Pass, []string{"geneve: module loaded"}},
		{"geneve missing", nil, "ovn/geneve", Fail, []string{"cannot make its geneve tunnel device"}},
		{"tc recirculation sharing", func(r *readyEnv, _ *Group, _ *fakeOVN) {
			r.machine.file("/proc/sys/kernel/osrelease", "7.2.13+deb14-amd64\n").file("/boot/config-7.2.13+deb14-amd64", "CONFIG_NET_CLS_ACT=y\nCONFIG_NET_TC_SKB_EXT=y\n")
		}, "ovn/tc-recirc", Pass, []string{"kernel 7.2.13+deb14-amd64 has CONFIG_NET_TC_SKB_EXT=y"}},
		{"no tc recirculation sharing (Debian's config)", func(r *readyEnv, _ *Group, _ *fakeOVN) {
			r.machine.file("/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n").file("/boot/config-6.1.0-18-amd64", "CONFIG_NET_CLS_ACT=y\n# CONFIG_NET_TC_SKB_EXT is not set\n")
		}, "ovn/tc-recirc", Warn, []string{"kernel 6.1.0-18-amd64 is built without CONFIG_NET_TC_SKB_EXT", "offloads no flow through conntrack", "CONFIG_MLX5_TC_CT=y"}},
		{"kernel config unreadable", func(r *readyEnv, _ *Group, _ *fakeOVN) {
			r.machine.file("/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")
		},
			"ovn/tc-recirc", Skip, []string{"/boot/config-6.1.0-18-amd64 unreadable"}},
		{"vxlan loaded", func(r *readyEnv, g *Group, _ *fakeOVN) {
			g.OVN.EncapType = "vxlan"
			r.machine.file("/sys/module/vxlan/initstate", "live\n")
		}, "ovn/vxlan", Pass, []string{"vxlan: module loaded"}},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			r := newReady(t)
			r.env.Kernel = r.h // the simulated kernel reads addresses
			o := healthy
			o.ids = map[string]string{}
			for k, v := range healthy.ids {
				o.ids[k] = v
			}
			g := ovnGroup()
			if tc.setup != nil {
				tc.setup(r, &g, &o)
			}
			r.env.OVN = o
			rep := Run(t.Context(), r.env, Target{Groups: []Group{g}, StateDir: r.stateDir})
			c := mustFind(t, rep, tc.check)
			if c.Status != tc.status {
				t.Errorf("%s: %s %q (fix %q), want %s", c.Name, c.Status, c.Detail, c.Fix, tc.status)
			}
			for _, w := range tc.words {
				if !strings.Contains(c.Detail+" | "+c.Fix, w) {
					t.Errorf("%s: %q (fix %q) lacks %q", c.Name, c.Detail, c.Fix, w)
				}
			}
		})
	}
	// A group without an ovn section gets none of them.
	r := newReady(t)
	for _, c := range Run(t.Context(), r.env, Target{Groups: []Group{lagGroup()}, StateDir: r.stateDir}).Checks {
		if strings.HasPrefix(c.Name, "ovn/") {
			t.Errorf("a group without ovn has %s", c.Name)
		}
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
