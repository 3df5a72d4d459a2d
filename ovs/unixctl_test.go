package ovs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

// TestParseDumpFlows reads "dpctl/dump-flows -m" as ovs-dpctl(8) and
// lib/dpctl.c format_dpif_flow print it: a tc flow in hardware, a tc flow
// in software (with TCP flags), a kernel datapath flow, a partially
// offloaded one and a flow without ufid nor dp (ovs-dpctl without -m
// details, numeric in_port).
func TestParseDumpFlows(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "dump-flows-m.txt"))
	if err != nil {
		t.Fatal(err)
	}
	flows, err := ovs.ParseDumpFlows(string(data))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		InPort, Offloaded, DP, Actions, Used string
		Packets                              uint64
	}
	var got []row
	for _, f := range flows {
		got = append(got, row{f.InPort, f.Offloaded, f.DP, f.Actions, f.Used, f.Packets})
	}
	want := []row{
		{"bond0", "yes", "tc", "eth2", "0.140s", 152303},
		{"eth2", "", "tc", "bond0", "0.150s", 98211},
		{"eth3", "", "ovs", "bond0,eth2", "1.020s", 3},
		{"eth3", "partial", "ovs", "bond0", "never", 12},
		{"2", "", "", "drop", "never", 0},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("flows (-want +got):\n%s", d)
	}
	if flows[0].UFID != "5f1c2d3e-0a1b-4c2d-8e3f-112233445566" || flows[4].UFID != "" {
		t.Errorf("ufids %q %q", flows[0].UFID, flows[4].UFID)
	}
	if flows[1].Match != "recirc_id(0),in_port(eth2),eth(src=0c:42:a1:00:00:02,dst=0c:42:a1:00:00:01),eth_type(0x0800),ipv4(frag=no)" {
		t.Errorf("match %q", flows[1].Match)
	}
	for _, bad := range []string{"in_port(eth0), packets:1, bytes:2, used:never", "in_port(eth0), bytes:2, actions:drop", "in_port(eth0), packets:x, bytes:2, used:never, actions:drop"} {
		if _, err := ovs.ParseDumpFlows(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestAppctl asks a real ovs-vswitchd over its control socket.
func TestAppctl(t *testing.T) {
	s := ovstest.Start(t)
	sock, err := ovs.VswitchdSocket(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	s.MustVsctl("add-br", "br0", "--", "set", "Bridge", "br0", "datapath_type=netdev")
	out, err := ovs.Appctl(sock, "dpctl/dump-flows", []string{"-m"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovs.ParseDumpFlows(out); err != nil {
		t.Errorf("dump-flows output: %v\n%s", err, out)
	}
	if out, err := ovs.Appctl(sock, "version", nil, 5*time.Second); err != nil || out == "" {
		t.Errorf("version: %q %v", out, err)
	}
	if _, err := ovs.Appctl(sock, "no/such-command", nil, 5*time.Second); !errors.Is(err, ovs.ErrAppctl) {
		t.Errorf("unknown command: %v, want ErrAppctl", err)
	}
}
