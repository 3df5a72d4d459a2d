package validate

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/ovs"
)

// Flows of an OVN chassis as the kernel datapath prints them: encap from
// a representor to the other chassis with OVN's Geneve option, decap from
// genev_sys_6081, ICMP and TCP through conntrack (an ACL).
const (
	ovnEncap   = "ufid:21, recirc_id(0),in_port(rep0),eth_type(0x0800),ipv4(proto=6,frag=no), packets:40, bytes:4000, used:0.1s, dp:ovs, actions:set(tunnel(tun_id=0x1,dst=192.0.2.12,ttl=64,tp_dst=6081,geneve({class=0x102,type=0x80,len=4,0x00010002}),flags(df|csum|key))),genev_sys_6081"
	ovnDecapHW = "ufid:22, recirc_id(0),tunnel(tun_id=0x1,src=192.0.2.12,dst=192.0.2.11,geneve({class=0x102,type=0x80,len=4,0x00020001/0x7fffffff}),flags(+key)),in_port(genev_sys_6081),eth_type(0x0800),ipv4(frag=no), packets:30, bytes:3000, used:0.1s, offloaded:yes, dp:tc, actions:rep0"
	ovnICMPCT  = "ufid:23, ct_state(+new-est+trk),recirc_id(0x5),in_port(rep1),eth_type(0x0800),ipv4(proto=1,frag=no),icmp(type=8/0xff), packets:5, bytes:490, used:0.1s, dp:ovs, actions:ct(commit,zone=3),recirc(0x6)"
	ovnTCPCT   = "ufid:24, ct_state(+new-est+trk),recirc_id(0x7),in_port(rep1),eth_type(0x0800),ipv4(proto=6,frag=no), packets:3, bytes:180, used:0.1s, dp:tc, actions:ct(commit,zone=3),recirc(0x8)"
	ovnTwoOpts = "ufid:25, recirc_id(0),tunnel(tun_id=0x1,src=192.0.2.12,dst=192.0.2.11,geneve({class=0x102,type=0x80,len=4,0x00000000}{class=0x103,type=0x1,len=4,0x1}),flags(+key)),in_port(genev_sys_6081),eth_type(0x0800),ipv4(frag=no), packets:7, bytes:700, used:0.1s, dp:tc, actions:rep1"
)

// TestOffloadCheckOVN: an OVN group's flows are classified (encap, decap,
// ct) and each one outside the hardware gets the reason its flow shows:
// ICMP through conntrack, a connection not yet established, two Geneve
// option classes and an option of value 0, the encap refusal ovs-vswitchd
// logged naming OVN's tunnel port; the flow in hardware passes.
func TestOffloadCheckOVN(t *testing.T) {
	flows, err := ovs.ParseDumpFlows(strings.Join([]string{ovnEncap, ovnDecapHW, ovnICMPCT, ovnTCPCT, ovnTwoOpts}, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	x := OffloadFacts{Flows: flows, HWOffload: "true", Bond: "bond0", Reps: []string{"rep0", "rep1"},
		Ports:    map[string]PortTC{"rep0": {HWTC: on(true), Driver: "mlx5_core"}, "rep1": {HWTC: on(true), Driver: "mlx5_core"}, "genev_sys_6081": {Driver: "geneve", Rules: 2, InHW: 1}},
		Refusals: []string{"failed to offload flow: No such file or directory: ovn-hv2-0"},
		Tunnel:   &TunnelOffload{VPort: "genev_sys_6081", Unresolved: map[string]string{}, OVN: true, RemoteOf: map[string]string{"ovn-hv2-0": "192.0.2.12"}}}
	c := OffloadCheck(x)
	if c.Verdict != Fail {
		t.Fatalf("%s: %s", c.Verdict, c.Detail)
	}
	for _, s := range []string{
		"4 of 5 flows with traffic NOT in hardware",
		"in_port(rep0) (encap) 40 packets: OVS kernel datapath: the driver refused the encap to OVN's tunnel port ovn-hv2-0: failed to offload flow: No such file or directory: ovn-hv2-0 (seen on LAG setups",
		"in_port(rep1) (ct) 5 packets: OVS kernel datapath: ICMP through conntrack (ct): mlx5 offloads no ICMP connection",
		"in_port(rep1) (ct) 3 packets: tc software: conntrack (ct) in the path (an ACL of the logical switch)",
		"in_port(genev_sys_6081) (decap) 7 packets: tc software: more than one Geneve option class/type (class=0x102,type=0x80; class=0x103,type=0x1)",
		"a Geneve option of value 0",
	} {
		if !strings.Contains(c.Detail, s) {
			t.Errorf("detail lacks %q:\n%s", s, c.Detail)
		}
	}
	d := c.Data.(OffloadData)
	kinds := map[uint64]string{}
	for _, f := range d.Flows {
		kinds[f.Packets] = strings.Join(f.Kinds, ",")
	}
	for pk, want := range map[uint64]string{40: "encap", 30: "decap", 5: "ct", 3: "ct", 7: "decap"} {
		if kinds[pk] != want {
			t.Errorf("flow of %d packets: kinds %q, want %q", pk, kinds[pk], want)
		}
	}
	// Not an OVN tunnel: none of OVN's reasons or kinds.
	x.Tunnel.OVN = false
	if c := OffloadCheck(x); strings.Contains(c.Detail, "conntrack") || strings.Contains(c.Detail, "(encap)") || strings.Contains(c.Detail, "Geneve option") {
		t.Errorf("a non-OVN tunnel got OVN's reasons: %s", c.Detail)
	}
}

func TestGeneveOptions(t *testing.T) {
	for in, want := range map[string]struct {
		n    int
		zero bool
	}{
		"geneve({class=0x102,type=0x80,len=4,0x00010002})":                           {1, false},
		"geneve({class=0x102,type=0x80,len=4,0x0/0x7fffffff})":                       {1, true},
		"geneve({class=0x102,type=0x80,len=4,0x1}{class=0x102,type=0x80,len=4,0x2})": {1, false},
		"geneve({class=0x102,type=0x80,len=4,0x1}{class=0xffff,type=0x1,len=0})":     {2, false},
		"tunnel(tun_id=0x1)": {0, false},
	} {
		cts, zero := geneveOptions(in)
		if len(cts) != want.n || zero != want.zero {
			t.Errorf("geneveOptions(%q) = %v, %v; want %d class/types, zero %v", in, cts, zero, want.n, want.zero)
		}
	}
}

// TestOffloadOVNRecircSharing: without CONFIG_NET_TC_SKB_EXT (Debian's
// kernels) the OVS datapath shares no recirculation ids with tc and
// ovs-vswitchd refuses every recirculating flow ("flow_put: recirc_id
// sharing not supported", seen on the 6.1 and 7.2 beds): a conntrack flow
// in the kernel datapath gets that reason, with its port's refusal when
// dpif_netlink logged it; a flow without conntrack (its match's
// ct_state(0/0) reads none, recirc_id(0)) is no ct flow and does not get it.
func TestOffloadOVNRecircSharing(t *testing.T) {
	const (
		ctFlow   = "ufid:31, recirc_id(0x8),dp_hash(0/0),in_port(eth4),ct_state(0x21/0x3f),ct_zone(0/0),eth_type(0x0800),ipv4(proto=6,frag=no), packets:338, bytes:4000, used:0.1s, dp:ovs, actions:ct(commit,zone=4,label=0/0x1,nat(src)),ct(zone=5),recirc(0x9)"
		noCTFlow = "ufid:32, recirc_id(0),dp_hash(0/0),in_port(eth5),ct_state(0/0),ct_zone(0/0),eth_type(0x0800),ipv4(proto=6,frag=no), packets:40, bytes:4000, used:0.1s, dp:ovs, actions:eth4"
	)
	flows, err := ovs.ParseDumpFlows(ctFlow + "\n" + noCTFlow)
	if err != nil {
		t.Fatal(err)
	}
	x := OffloadFacts{Flows: flows, HWOffload: "true", Bond: "bond0", Reps: []string{"eth4", "eth5"},
		Ports:      map[string]PortTC{"eth4": {HWTC: on(true), Driver: "netdevsim"}, "eth5": {HWTC: on(true), Driver: "netdevsim"}},
		Refusals:   []string{"failed to offload flow: Operation not supported: eth4"},
		TCRefusals: []string{"flow_put: recirc_id sharing not supported"},
		Tunnel:     &TunnelOffload{VPort: "genev_sys_6081", OVN: true}}
	d := OffloadCheck(x).Data.(OffloadData)
	if len(d.Flows) != 2 {
		t.Fatalf("flows %+v", d.Flows)
	}
	ct, noCT := d.Flows[0], d.Flows[1]
	why := strings.Join(ct.Reasons, "\n")
	for _, s := range []string{"the driver refused it: failed to offload flow: Operation not supported: eth4",
		`the flow recirculates (conntrack) and the kernel's OVS datapath shares no recirculation ids with tc (ovs-vswitchd's log: "flow_put: recirc_id sharing not supported"; the kernel lacks CONFIG_NET_TC_SKB_EXT`,
		"(the refusal above is this one)"} {
		if !strings.Contains(why, s) {
			t.Errorf("the ct flow's reasons lack %q:\n%s", s, why)
		}
	}
	if strings.Join(noCT.Kinds, ",") != "" || strings.Contains(strings.Join(noCT.Reasons, "\n"), "recirc") {
		t.Errorf("the flow without conntrack: kinds %v, reasons %q", noCT.Kinds, noCT.Reasons)
	}
}
