package doctor

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOutputNamesOnlyDocumentsThatExist: what doctor prints (details and
// fixes) on a ready host and on kernels of every version class names no
// document a user cannot open: DESIGN.md and KERNEL-FACTS.md were not in
// the repository. A document it names is at the repository's root or in
// docs/.
func TestOutputNamesOnlyDocumentsThatExist(t *testing.T) {
	doc := regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9_-]*\.md\b`)
	for _, rel := range []string{"6.1.0-18-amd64", "6.12.3", "5.19.0", "5.15.0-91-generic"} {
		r := newReady(t)
		r.machine.file("/proc/sys/kernel/osrelease", rel+"\n")
		rep := Run(t.Context(), r.env, Target{Groups: []Group{lagGroup()}, StateDir: r.stateDir})
		for _, c := range rep.Checks {
			for _, name := range doc.FindAllString(c.Detail+" "+c.Fix, -1) {
				found := false
				for _, dir := range []string{"../..", "../../docs"} {
					if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
						found = true
					}
				}
				if !found {
					t.Errorf("kernel %s: %s names %s, which is not in the repository: %s", rel, c.Name, name, c.Detail)
				}
			}
		}
	}
}

// TestOVSVswitchdOfTheConfig: doctor judges the ovs-vswitchd that serves
// the config's OVSDB (the pid in ovs-vswitchd.pid of a unix: socket's
// directory), not any ovs-vswitchd in /proc: one with another run
// directory, or in another network namespace than vflag's on a real host,
// cannot open this host's bond and representors (a simulated host's
// ovs-vswitchd runs in its mirror namespace by design).
func TestOVSVswitchdOfTheConfig(t *testing.T) {
	const other = "ovs-vswitchd\x00unix:/tmp/ovst1/db.sock\x00--pidfile=/tmp/ovst1/ovs-vswitchd.pid\x00"
	tests := []struct {
		name   string
		setup  func(r *readyEnv, g *Group)
		status Status
		words  []string
	}{
		{"the config's", func(r *readyEnv, g *Group) {}, Pass,
			[]string{"ovs-vswitchd pid 4242 serves unix:/var/run/openvswitch/db.sock"}},
		{"only another run directory's", func(r *readyEnv, g *Group) {
			r.machine.remove("/var/run/openvswitch/ovs-vswitchd.pid").file("/proc/4242/cmdline", other)
		}, Fail, []string{"no ovs-vswitchd serves unix:/var/run/openvswitch/db.sock", "pid 4242", "unix:/tmp/ovst1/db.sock"}},
		{"a stale pid file", func(r *readyEnv, g *Group) {
			r.machine.file("/var/run/openvswitch/ovs-vswitchd.pid", "777\n")
		}, Fail, []string{"no ovs-vswitchd serves unix:/var/run/openvswitch/db.sock", "pid 777", "not running"}},
		{"in another network namespace", func(r *readyEnv, g *Group) {
			r.machine.remove("/proc/4242/ns/net").link("/proc/4242/ns/net", "net:[4026532777]")
		}, Fail, []string{"pid 4242 serves unix:/var/run/openvswitch/db.sock", "another network namespace"}},
		{"a simulated host's, in its namespace", func(r *readyEnv, g *Group) {
			r.env.Simulated = true
			r.machine.remove("/proc/4242/ns/net").link("/proc/4242/ns/net", "net:[4026532777]")
		}, Pass, []string{"pid 4242 serves unix:/var/run/openvswitch/db.sock", "network namespace net:[4026532777]"}},
		{"an OVSDB over tcp", func(r *readyEnv, g *Group) {
			g.OVSDB = "tcp:127.0.0.1:6640"
			r.machine.remove("/var/run/openvswitch/ovs-vswitchd.pid")
		}, Pass, []string{"pid 4242", "tcp:127.0.0.1:6640"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReady(t)
			g := lagGroup()
			tt.setup(r, &g)
			rep := runDoctor(t, r.env, Target{Groups: []Group{g}, StateDir: r.stateDir})
			c := mustFind(t, rep, "daemons/ovs-vswitchd")
			if c.Status != tt.status {
				t.Errorf("status %s, want %s: %s", c.Status, tt.status, c.Detail)
			}
			for _, w := range tt.words {
				if !strings.Contains(c.Detail, w) {
					t.Errorf("detail lacks %q: %s", w, c.Detail)
				}
			}
			if c.Status == Fail && c.Fix == "" {
				t.Error("a failure without a fix")
			}
		})
	}
}
