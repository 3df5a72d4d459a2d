package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// TestCheck: simhost says what a config lacks to run on the simulated host
// as written, all of it at once; examples/vflag-simhost.yaml lacks nothing.
func TestCheck(t *testing.T) {
	example, err := os.ReadFile("../../../cmd/vflag/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	simhost, err := os.ReadFile("../../../examples/vflag-simhost.yaml")
	if err != nil {
		t.Fatal(err)
	}
	noSim, _, _ := strings.Cut(string(simhost), "sim:\n")
	const tunnel = "    tunnel: {type: vxlan, local: 192.0.2.11/24, underlay_vlan: 30, underlay_mtu: 1600, gateway: 192.0.2.254, routes: [198.51.100.0/24], remotes: [192.0.2.12, 198.51.100.7], vni: 5000}\n    attachments:"
	withTunnel := strings.Replace(string(simhost), "    attachments:", tunnel, 1)
	const (
		mirror   = "sim.mirror_netns is not set: add `mirror_netns: /run/netns/vflag-sim` under sim: (vflag mirrors the simulated netdevs into that network namespace, and simhost runs ovs-vswitchd there)"
		datapath = "groups[0].ovs.datapath_type: system (the default) needs the kernel's openvswitch module, which this kernel has not loaded: set `datapath_type: netdev` (the userspace datapath) under groups[0].ovs"
	)
	for _, tt := range []struct {
		name      string
		cfg       string
		ovsModule bool
		want      []string // problems; none: runs, with domains
		domains   string
		netns     string
	}{
		{name: "vflag example-config", cfg: string(example), want: []string{mirror, datapath}},
		{name: "vflag example-config, openvswitch module loaded", cfg: string(example), ovsModule: true, want: []string{mirror}},
		{name: "examples/vflag-simhost.yaml", cfg: string(simhost), domains: "vm1", netns: "vflag-sim"},
		{name: "a tunnel whose next hops nobody answers", cfg: withTunnel, want: []string{"groups[0].tunnel: the simulated switch answers ARP/ND only for the hosts sim.switch_peers lists, and validate fails tunnel/neigh/<remote> for a next hop nobody answers: add `switch_peers: [192.0.2.12, 192.0.2.254]` under sim: (the remote endpoints on the underlay's subnet, and the gateway of those behind it)"}},
		{name: "a tunnel with its next hops behind the switch", cfg: strings.Replace(withTunnel, "sim:\n", "sim:\n  switch_peers: [192.0.2.12, 192.0.2.254]\n", 1), domains: "vm1", netns: "vflag-sim"},
		{name: "no sim section", cfg: noSim, want: []string{"it has no sim section: the simulated host is made from it (docs/simulated-host.md; examples/vflag-simhost.yaml has one)"}},
		{name: "mirror_netns outside /run/netns", cfg: strings.Replace(string(simhost), "/run/netns/vflag-sim", "/var/run/ns/x", 1),
			want: []string{`sim.mirror_netns: "/var/run/ns/x": simhost makes the namespace, so it must be /run/netns/NAME (as ` + "`ip netns add NAME`" + ` makes it)`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tt.cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := check(path, tt.ovsModule)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(p.domains, ","); got != tt.domains || p.netns != tt.netns || p.config != path {
					t.Fatalf("plan %+v, want domains %s netns %s", p, tt.domains, tt.netns)
				}
				return
			}
			want := "config " + path + " cannot run on the simulated host as written:\n  " + strings.Join(tt.want, "\n  ")
			if err == nil || err.Error() != want {
				t.Fatalf("error:\n%v\nwant:\n%s", err, want)
			}
		})
	}
}

// ovnExample is examples/ovn.yaml made to run on the simulated host, as
// simhost's check asks: the userspace datapath, the Southbound on the unix
// socket sock (its ssl section gone), examples/vflag-simhost.yaml's sim
// section with mirror_netns /run/netns/netns. With sock "" the remote and
// ssl stay as written.
func ovnExample(t *testing.T, sock, netns string) string {
	t.Helper()
	ovn, err := os.ReadFile("../../../examples/ovn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	simhost, err := os.ReadFile("../../../examples/vflag-simhost.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, simSection, _ := strings.Cut(string(simhost), "sim:\n")
	simSection = strings.Replace(simSection, "/run/netns/vflag-sim", "/run/netns/"+netns, 1)
	var lines []string
	for _, l := range strings.SplitAfter(string(ovn), "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case sock == "":
		case strings.HasPrefix(trimmed, "remote:"):
			l = "      remote: unix:" + sock + "\n"
		case trimmed == "ssl:", strings.HasPrefix(trimmed, "private_key:"), strings.HasPrefix(trimmed, "certificate:"), strings.HasPrefix(trimmed, "ca_cert:"):
			continue
		}
		if trimmed == "ovn:" {
			lines = append(lines, "    ovs: {datapath_type: netdev}\n")
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "") + "sim:\n" + simSection
}

// ovnSimhostHeader is what examples/ovn-simhost.yaml says above the
// lines of examples/ovn.yaml.
const ovnSimhostHeader = `# examples/ovn.yaml made ready for the simulated host (make simhost
# CONFIG=examples/ovn-simhost.yaml; docs/ovn.md, "Trying it on the simulated
# host"): the Southbound on a unix socket simhost serves, no ssl section,
# the userspace datapath (ovs datapath_type netdev), and the sim section of
# examples/vflag-simhost.yaml. A test keeps it equal to ovn.yaml with those
# changes.
#
`

// TestOVNSimhostExample: examples/ovn-simhost.yaml is examples/ovn.yaml
// with the changes the simulated host needs, and nothing else: a change
// of either example shows here until the other follows.
func TestOVNSimhostExample(t *testing.T) {
	got, err := os.ReadFile("../../../examples/ovn-simhost.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := ovnSimhostHeader + ovnExample(t, "/tmp/vflag-simhost-ovnsb.sock", "vflag-sim")
	if string(got) != want {
		t.Errorf("examples/ovn-simhost.yaml is not examples/ovn.yaml with simhost's changes:\n%s", testbed.LineDiff(want, string(got), 10))
	}
	if _, err := check("../../../examples/ovn-simhost.yaml", false); err != nil {
		t.Errorf("simhost refuses examples/ovn-simhost.yaml: %v", err)
	}
}

// TestCheckOVN: an OVN config runs on the simulated host with its
// Southbound on a unix socket simhost can make, and the logical ports its
// ovn_port entries name for the Northbound; a remote simhost cannot serve
// is named with the fix.
func TestCheckOVN(t *testing.T) {
	dir := t.TempDir()
	const field = "groups[0].ovn.remote: "
	for _, tt := range []struct {
		name string
		cfg  string
		want string // the problem; "": runs
	}{
		{name: "unix socket", cfg: ovnExample(t, filepath.Join(dir, "sb.sock"), "vflag-sim")},
		{name: "examples/ovn.yaml's ssl remote", cfg: ovnExample(t, "", "vflag-sim"),
			want: field + "ssl:192.0.2.1:6642: simhost runs the OVN Southbound on this machine and serves it on the unix socket ovn.remote names (ovn-controller runs in the private ovs-vswitchd's network namespace, which reaches no address of this one): set `remote: unix:/tmp/vflag-simhost-ovnsb.sock` under groups[0].ovn and remove its ssl"},
		{name: "tcp remote", cfg: strings.Replace(ovnExample(t, "/x", "vflag-sim"), "unix:/x", "tcp:127.0.0.1:6642", 1),
			want: field + "tcp:127.0.0.1:6642: simhost runs the OVN Southbound on this machine and serves it on the unix socket ovn.remote names (ovn-controller runs in the private ovs-vswitchd's network namespace, which reaches no address of this one): set `remote: unix:/tmp/vflag-simhost-ovnsb.sock` under groups[0].ovn"},
		{name: "the machine's OVN run directory", cfg: ovnExample(t, "/var/run/ovn/ovnsb_db.sock", "vflag-sim"),
			want: field + "unix:/var/run/ovn/ovnsb_db.sock is in /var/run/ovn, the machine's own run directory (a real OVN or Open vSwitch uses it): name a socket elsewhere, such as unix:/tmp/vflag-simhost-ovnsb.sock"},
		{name: "no such directory", cfg: ovnExample(t, filepath.Join(dir, "nodir", "sb.sock"), "vflag-sim"),
			want: field + "unix:" + dir + "/nodir/sb.sock: its directory " + dir + "/nodir does not exist (simhost makes the socket, not the directory)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tt.cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := check(path, false)
			if tt.want != "" {
				want := "config " + path + " cannot run on the simulated host as written:\n  " + tt.want
				if err == nil || err.Error() != want {
					t.Fatalf("error:\n%v\nwant:\n%s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(p.lsps, ","); got != "vm1-eth0,vm2-eth0" || strings.Join(p.domains, ",") != "vm1,vm2" {
				t.Fatalf("plan %+v: want logical ports vm1-eth0,vm2-eth0 and domains vm1,vm2", p)
			}
			if p.ovn == nil || p.ovn.sock != filepath.Join(dir, "sb.sock") || !p.ovn.netdev || p.ovn.logicals != "ls-ovn0" {
				t.Fatalf("ovn plan %+v: want the socket %s/sb.sock, netdev, switch ls-ovn0", p.ovn, dir)
			}
		})
	}
}
