package validate

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/ovs"
)

// Flows as "ovs-appctl dpctl/dump-flows -m" prints them (ovs-dpctl(8)).
const (
	flowBondHW   = "ufid:1, recirc_id(0),in_port(bond0),eth(src=0c:42:a1:00:00:01,dst=0c:42:a1:00:00:02),eth_type(0x0800),ipv4(frag=no), packets:1000, bytes:1500000, used:0.1s, offloaded:yes, dp:tc, actions:rep0"
	flowRepHW    = "ufid:2, recirc_id(0),in_port(rep0),eth(src=0c:42:a1:00:00:02,dst=0c:42:a1:00:00:01),eth_type(0x0800),ipv4(frag=no), packets:900, bytes:59400, used:0.1s, offloaded:yes, dp:tc, actions:bond0"
	flowRepTCSW  = "ufid:3, recirc_id(0),in_port(rep0),eth(src=0c:42:a1:00:00:02,dst=0c:42:a1:00:00:01),eth_type(0x0800),ipv4(frag=no), packets:900, bytes:59400, used:0.1s, dp:tc, actions:bond0"
	flowRepOVS   = "ufid:4, recirc_id(0),in_port(rep0),eth(src=0c:42:a1:00:00:02,dst=0c:42:a1:00:00:01),eth_type(0x0800),ipv4(frag=no), packets:900, bytes:59400, used:0.1s, dp:ovs, actions:bond0"
	flowBondOVS  = "ufid:5, recirc_id(0),in_port(bond0),eth_type(0x0800),ipv4(frag=no), packets:50, bytes:5000, used:0.1s, dp:ovs, actions:rep0"
	flowRepIdle  = "ufid:6, recirc_id(0),in_port(rep1),eth_type(0x0806), packets:0, bytes:0, used:never, dp:tc, actions:bond0"
	flowOtherSW  = "ufid:7, recirc_id(0),in_port(other0),eth_type(0x0800), packets:77, bytes:7700, used:0.1s, dp:ovs, actions:other1"
	flowPartial  = "ufid:8, recirc_id(0),in_port(rep0),eth_type(0x0800), packets:5, bytes:500, used:0.1s, offloaded:partial, dp:ovs, actions:bond0"
	refusalRep0  = "failed to offload flow: Invalid argument: rep0"
	refusalOther = "failed to offload flow: Invalid argument: other0"
)

func on(b bool) *bool { return &b }

func TestOffloadCheck(t *testing.T) {
	mlx5 := map[string]PortTC{"rep0": {HWTC: on(true), Driver: "mlx5_core", Rules: 1, InHW: 1}, "bond0": {Driver: ""}}
	nsim := map[string]PortTC{"rep0": {HWTC: on(true), Driver: "netdevsim", Rules: 1}}
	blockOK := &eswitch.SharedBlock{Bond: "bond0", Block: 9, OK: true, Rules: 1, InHW: 1, AllPFs: 1,
		Members: []eswitch.BlockMember{{Netdev: "bond0", OK: true}, {Netdev: "p0", OK: true}, {Netdev: "p1", OK: true}}}
	blockOnePF := &eswitch.SharedBlock{Bond: "bond0", Block: 9, Rules: 1, InHW: 1, AllPFs: 0,
		Members: []eswitch.BlockMember{{Netdev: "bond0", OK: true}, {Netdev: "p0", OK: true}, {Netdev: "p1", Ingress: eswitch.Ingress{}}}}
	tests := []struct {
		name     string
		flows    []string
		flowsErr error
		hwoff    string
		policy   string
		ports    map[string]PortTC
		block    *eswitch.SharedBlock
		refusals []string
		dpType   string
		flowAPI  map[string]bool
		logErr   error
		want     Verdict
		detail   []string
		absent   []string // not in the detail
		inHW     int
		inSW     int
	}{
		{name: "every flow in hardware, the bond's rule on both PFs", flows: []string{flowBondHW, flowRepHW, flowRepIdle, flowOtherSW},
			hwoff: "true", ports: mlx5, block: blockOK, want: Pass, detail: []string{"2 flows with traffic, all in hardware"}, inHW: 2},
		{name: "userspace datapath: tc offload does not apply", flows: []string{flowRepTCSW}, hwoff: "true", ports: nsim, dpType: "netdev", want: NA,
			detail: []string{"datapath_type netdev: the flows run in ovs-vswitchd's userspace datapath"}},
		{name: "partial offload counts as hardware", flows: []string{flowPartial}, hwoff: "true", ports: mlx5, want: Pass, inHW: 1},
		{name: "netdevsim of 6.1: tc software, no flower offload", flows: []string{flowRepTCSW}, hwoff: "true", ports: nsim, want: Fail,
			detail: []string{"in_port(rep0) 900 packets: tc software", "the driver of rep0 (netdevsim) holds none of its 1 tc rules in hardware"}, inSW: 1},
		{name: "hw-offload off", flows: []string{flowRepOVS}, hwoff: "false", ports: mlx5, want: Fail,
			detail: []string{"OVS kernel datapath", "hw-offload off (other_config:hw-offload=false)"}, inSW: 1},
		{name: "tc-policy skip_hw", flows: []string{flowRepTCSW}, hwoff: "true", policy: "skip_hw", ports: map[string]PortTC{"rep0": {HWTC: on(true), Rules: 1, SkipHW: 1}}, want: Fail,
			detail: []string{"tc-policy skip_hw"}, inSW: 1},
		{name: "hw-tc-offload off on the port", flows: []string{flowRepTCSW}, hwoff: "true", ports: map[string]PortTC{"rep0": {HWTC: on(false), Driver: "mlx5_core"}}, want: Fail,
			detail: []string{"hw-tc-offload off on rep0"}, inSW: 1},
		{name: "a device without tc offload (veth)", flows: []string{flowRepTCSW}, hwoff: "true", ports: map[string]PortTC{"rep0": {Driver: "veth"}}, want: Fail,
			detail: []string{"rep0 has no hw-tc-offload feature (driver veth)"}, inSW: 1},
		// tc keeps in software what a device without hw-tc-offload does
		// not take: a flow tc did not take has another reason (seen on the
		// 7.2 bed: netdevsim's ports have the feature off and take rules).
		{name: "hw-tc-offload off is no reason for a flow outside tc", flows: []string{flowRepOVS}, hwoff: "true", ports: map[string]PortTC{"rep0": {HWTC: on(false), Driver: "netdevsim"}},
			refusals: []string{refusalRep0}, want: Fail, detail: []string{"the driver refused it: " + refusalRep0}, absent: []string{"hw-tc-offload off"}, inSW: 1},
		{name: "skip_sw refused by the driver, from the log", flows: []string{flowRepOVS}, hwoff: "true", policy: "skip_sw", ports: nsim,
			refusals: []string{refusalOther, refusalRep0}, want: Fail, detail: []string{"tc-policy skip_sw: a rule no device takes", "the driver refused it: " + refusalRep0}, inSW: 1},
		{name: "bond flow with a PF off the shared block", flows: []string{flowBondOVS}, hwoff: "true", ports: mlx5, block: blockOnePF, want: Fail,
			detail: []string{"port missing from the shared block: p1 (no ingress qdisc)"}, inSW: 1},
		{name: "bond's rule in hardware on one PF only", flows: []string{flowBondHW}, hwoff: "true", ports: mlx5, block: blockOnePF, want: Fail,
			detail: []string{"not on every PF (in_hw_count below the PF count)"}, inHW: 1},
		{name: "ovs-vswitchd without a flow API for the bond (Debian's 7.2, after an OVS restart)", flows: []string{flowBondOVS}, hwoff: "true", ports: mlx5, block: blockOK,
			flowAPI: map[string]bool{"bond0": false, "rep0": true}, want: Fail, detail: []string{"ovs-vswitchd has no tc flow API for bond0", "bond0: No suitable flow API found"}, inSW: 1},
		{name: "to a port without a flow API: the rep's flow out to the bond", flows: []string{flowRepOVS}, hwoff: "true", ports: mlx5, block: blockOK,
			flowAPI: map[string]bool{"bond0": false}, want: Fail, detail: []string{"in_port(rep0) 900 packets: OVS kernel datapath", "ovs-vswitchd has no tc flow API for bond0"}, inSW: 1},
		{name: "no reason found, the log unreadable: says so", flows: []string{flowRepOVS}, hwoff: "true", ports: mlx5, block: blockOK,
			logErr: errors.New("ovs-vswitchd's log /var/log/openvswitch/ovs-vswitchd.log: permission denied"), want: Fail,
			detail: []string{"no reason found, and none read from ovs-vswitchd's log: ovs-vswitchd's log /var/log/openvswitch/ovs-vswitchd.log: permission denied (set ovs_log"}, inSW: 1},
		{name: "no traffic", flows: []string{flowRepIdle, flowOtherSW}, hwoff: "true", want: Skip, detail: []string{"(1 idle)"}},
		{name: "unreadable", flowsErr: errors.New("ovs-vswitchd's pid file: no such file"), want: Fail, detail: []string{"cannot read ovs-vswitchd's datapath flows"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flows, err := ovs.ParseDumpFlows(strings.Join(tt.flows, "\n"))
			if err != nil {
				t.Fatal(err)
			}
			c := OffloadCheck(OffloadFacts{Flows: flows, FlowsErr: tt.flowsErr, HWOffload: tt.hwoff, TCPolicy: tt.policy, Bond: "bond0",
				Reps: []string{"rep0", "rep1"}, Ports: tt.ports, Block: tt.block, Refusals: tt.refusals, DatapathType: tt.dpType, FlowAPI: tt.flowAPI, LogErr: tt.logErr})
			if c.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s: %s", c.Verdict, tt.want, c.Detail)
			}
			for _, s := range tt.detail {
				if !strings.Contains(c.Detail, s) {
					t.Errorf("detail %q lacks %q", c.Detail, s)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(c.Detail, s) {
					t.Errorf("detail %q has %q", c.Detail, s)
				}
			}
			if d, ok := c.Data.(OffloadData); ok {
				if d.InHW != tt.inHW || d.InSW != tt.inSW {
					t.Errorf("in_hw %d in_software %d, want %d %d", d.InHW, d.InSW, tt.inHW, tt.inSW)
				}
				for _, f := range d.Flows {
					if f.InPort == "other0" {
						t.Errorf("another group's flow judged: %+v", f)
					}
				}
			} else if tt.flowsErr == nil && tt.dpType == "" {
				t.Errorf("no OffloadData: %#v", c.Data)
			}
			t.Logf("%s: %s", c.Verdict, c.Detail)
		})
	}
}

func TestOutputPorts(t *testing.T) {
	for in, want := range map[string][]string{
		"bond0":                                 {"bond0"},
		"bond0,eth2":                            {"bond0", "eth2"},
		"push_vlan(vid=100,pcp=0),bond0":        {"bond0"},
		"set(tunnel(tun_id=0x1,dst=1.1.1.1)),3": {"3"},
		"drop":                                  {"drop"},
		"":                                      nil,
	} {
		if got := outputPorts(in); !slices.Equal(got, want) {
			t.Errorf("outputPorts(%q) = %q, want %q", in, got, want)
		}
	}
}

// Flows of a VXLAN group as the kernel datapath shows them: encap from a
// representor to the remote, decap from the datapath's tunnel port.
const (
	flowEncapSW = "ufid:9, recirc_id(0),in_port(rep0),eth_type(0x0800),ipv4(frag=no), packets:40, bytes:4000, used:0.1s, dp:ovs, actions:set(tunnel(tun_id=0x1388,src=192.0.2.11,dst=192.0.2.12,ttl=64,tp_dst=4789,flags(df|key))),vxlan_sys_4789"
	flowDecapTC = "ufid:10, recirc_id(0),tunnel(tun_id=0x1388,src=192.0.2.12,dst=192.0.2.11,flags(+key)),in_port(vxlan_sys_4789),eth_type(0x0800),ipv4(frag=no), packets:30, bytes:3000, used:0.1s, dp:tc, actions:rep0"
)

// TestOffloadCheckTunnel: a tunnel group's encap flow in software names
// the remote's unresolved neighbour, its decap flow (from the tunnel's
// datapath port, which is the group's) the indirect block; neither gets
// the hw-tc-offload reasons of a representor.
func TestOffloadCheckTunnel(t *testing.T) {
	flows, err := ovs.ParseDumpFlows(flowEncapSW + "\n" + flowDecapTC)
	if err != nil {
		t.Fatal(err)
	}
	x := OffloadFacts{Flows: flows, HWOffload: "true", Bond: "bond0", Reps: []string{"rep0"},
		Ports:  map[string]PortTC{"rep0": {HWTC: on(true), Driver: "mlx5_core", Rules: 1, InHW: 1}, "vxlan_sys_4789": {Driver: "vxlan", Rules: 1}},
		Tunnel: &TunnelOffload{VPort: "vxlan_sys_4789", Unresolved: map[string]string{"192.0.2.12": "FAILED"}}}
	c := OffloadCheck(x)
	for _, s := range []string{
		"in_port(rep0) 40 packets: OVS kernel datapath: encap to 192.0.2.12: its next hop's neighbour is unresolved (FAILED)",
		"in_port(vxlan_sys_4789) 30 packets: tc software: decap on vxlan_sys_4789: no tc rule of it in hardware",
		"2 of 2 flows with traffic NOT in hardware",
	} {
		if c.Verdict != Fail || !strings.Contains(c.Detail, s) {
			t.Errorf("%s %q lacks %q", c.Verdict, c.Detail, s)
		}
	}
	if strings.Contains(c.Detail, "vxlan_sys_4789 has no hw-tc-offload") {
		t.Errorf("the tunnel port judged as a representor: %s", c.Detail)
	}
	x.Tunnel = nil // without the tunnel, its decap flow is no flow of the group
	if c := OffloadCheck(x); strings.Contains(c.Detail, "vxlan_sys_4789") {
		t.Errorf("decap flow judged without a tunnel: %s", c.Detail)
	}
}
