package validate

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovnsb"
)

// ovnTrafficHealthy is ovnHealthy with addresses on its ports and a third
// port, vm3-eth0, bound to hv2 (reached over ovn-hv2-0).
func ovnTrafficHealthy() (OVNTrafficWant, OVNFacts) {
	_, f := ovnHealthy()
	b := f.SB.Bindings
	b["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0", Chassis: "hv1", Up: boolPtr(true), MAC: []string{"02:00:00:00:00:01 10.10.0.1"}}
	b["vm2-eth0"] = ovnsb.Binding{LogicalPort: "vm2-eth0", Chassis: "hv1", Up: boolPtr(true), MAC: []string{"02:00:00:00:00:02 fd00::2 10.10.0.2"}}
	b["vm3-eth0"] = ovnsb.Binding{LogicalPort: "vm3-eth0", Chassis: "hv2", Up: boolPtr(true), MAC: []string{"02:00:00:00:00:03 10.10.0.3"}}
	w := OVNTrafficWant{Chassis: "hv1", Bridge: "br-int", From: "vm1-eth0", FromIface: "eth2", To: "vm3-eth0", ToField: "groups[0].validate.ovn_to"}
	return w, f
}

// A probe trace that ends in a drop after conntrack (OVS 3.1's format,
// shortened) and one that leaves over the tunnel.
const (
	traceDrop = ` Flow: icmp,in_port=5,vlan_tci=0x0000,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:03,nw_src=10.10.0.1,nw_dst=10.10.0.3

bridge("br-int")
----------------
 0. in_port=5, priority 100, cookie 0x2c3ddb5a
    set_field:0x1->reg13
    resubmit(,8)
 8. reg14=0x1,metadata=0x1,dl_src=02:00:00:00:00:01, priority 50, cookie 0x96e0e3b6
    resubmit(,9)
16. ip,metadata=0x1, priority 100, cookie 0x8dfcc1e4
    ct(table=17,zone=NXM_NX_REG13[0..15])
    drop
     -> A clone of the packet is forked to recirculate. The forked pipeline will be resumed at table 17.

Final flow: unchanged
Megaflow: recirc_id=0,eth,icmp,in_port=5,dl_src=02:00:00:00:00:01,nw_frag=no
Datapath actions: ct(zone=1),recirc(0x3)

===============================================================================
recirc(0x3) - resume conntrack with default ct_state=trk|new (use --ct-next to customize)
===============================================================================

Flow: recirc_id=0x3,ct_state=new|trk,ct_zone=1,eth,icmp,reg13=0x1,metadata=0x1,in_port=5

bridge("br-int")
----------------
    thaw
        Resuming from table 17
18. ct_state=+new-est+trk,ip,reg14=0x1,metadata=0x1,nw_dst=10.10.0.3, priority 3002, cookie 0xABCDEF12
    drop

Final flow: unchanged
Megaflow: recirc_id=0x3,ct_state=+new-est-rel-rpl-inv+trk,eth,ip,in_port=5,nw_dst=10.10.0.3,nw_frag=no
Datapath actions: drop
`
	traceOut = `bridge("br-int")
----------------
 0. in_port=5, priority 100, cookie 0x2c3ddb5a
    resubmit(,8)
38. reg15=0x3,metadata=0x1, priority 100, cookie 0x11223344
    output:7

Final flow: unchanged
Datapath actions: set(tunnel(tun_id=0x1,dst=10.0.0.2,ttl=64,tp_dst=6081,geneve({class=0x102,type=0x80,len=4,0x10003}),flags(df|csum|key))),genev_sys_6081
`
)

func TestParseTrace(t *testing.T) {
	if got, want := ParseTrace(traceDrop), (OVNTrace{Actions: "drop", Cookie: "abcdef12", Table: "18"}); got != want {
		t.Errorf("drop: %+v, want %+v", got, want)
	}
	got := ParseTrace(traceOut)
	if !strings.HasSuffix(got.Actions, "),genev_sys_6081") || got.Cookie != "11223344" || got.Dropped() {
		t.Errorf("out: %+v", got)
	}
	if ParseTrace(" 3. in_port=1, priority 1, cookie 0x5\n    drop\nDatapath actions: drop").Cookie != "00000005" {
		t.Error("a short cookie is not padded to 8 digits")
	}
}

// TestOVNTrafficCheck: each missing piece fails with its reason before the
// probe runs; a reply passes naming the path and the replies' flows; no
// reply is an ACL drop when the trace ends in an ACL stage's logical flow,
// no path when another flow drops it, a suspected ACL drop when the
// request leaves this chassis.
func TestOVNTrafficCheck(t *testing.T) {
	aclLF := []ovnsb.LogicalFlow{{UUID: "abcdef12-0000-4000-8000-000000000001", Pipeline: "ingress", Table: 9, Stage: "ls_in_acl", Match: `inport == "vm1-eth0" && ip4.dst == 10.10.0.3`, Actions: "/* drop */"}}
	l2LF := []ovnsb.LogicalFlow{{UUID: "abcdef12-0000-4000-8000-000000000002", Pipeline: "ingress", Table: 27, Stage: "ls_in_l2_lkup", Match: "1", Actions: "outport = get_fdb(eth.dst); next;"}}
	dropped := ParseTrace(traceDrop)
	left := ParseTrace(traceOut)
	replied := &OVNProbe{Sent: 1, Replies: 1, RTT: 3 * time.Millisecond, Wait: time.Second}
	silent := &OVNProbe{Sent: 3, Wait: time.Second}
	flows := []FlowVerdict{{InPort: "genev_sys_6081", Packets: 1, Where: WhereKernelDP, Kinds: []string{"decap", "ct"}, Reasons: []string{"ICMP through conntrack (ct): mlx5 offloads no ICMP connection"}}}
	tests := []struct {
		name   string
		edit   func(*OVNTrafficWant, *OVNFacts, *OVNTrafficFacts)
		want   Verdict
		detail []string
	}{
		{"remote reply", func(_ *OVNTrafficWant, _ *OVNFacts, x *OVNTrafficFacts) { x.Probe, x.Flows = replied, flows }, Pass,
			[]string{"vm1-eth0 (eth2, 10.10.0.1) -> vm3-eth0 (10.10.0.3, on chassis hv2 over ovn-hv2-0): 1 of 1 echo requests answered (first in 3ms)",
				"in_port(genev_sys_6081) (decap, ct) 1 packets: OVS kernel datapath: ICMP through conntrack"}},
		{"local reply", func(w *OVNTrafficWant, _ *OVNFacts, x *OVNTrafficFacts) { w.To, x.Probe = "vm2-eth0", replied }, Pass,
			[]string{"-> vm2-eth0 (10.10.0.2, on this chassis)"}},
		{"no bridge", func(_ *OVNTrafficWant, f *OVNFacts, _ *OVNTrafficFacts) { f.BridgeMissing = true }, Fail,
			[]string{"port not installed: vm1-eth0: the integration bridge br-int does not exist"}},
		{"not on the bridge", func(_ *OVNTrafficWant, f *OVNFacts, _ *OVNTrafficFacts) { delete(f.Interfaces, "eth2") }, Fail,
			[]string{"port not installed: vm1-eth0: its representor eth2 is not an interface of br-int"}},
		{"not installed", func(_ *OVNTrafficWant, f *OVNFacts, _ *OVNTrafficFacts) {
			f.Interfaces["eth2"] = OVNInterface{Name: "eth2", ExternalIDs: map[string]string{"iface-id": "vm1-eth0"}}
		}, Fail, []string{"port not installed: vm1-eth0: ovn-controller has not set ovn-installed on eth2"}},
		{"source bound elsewhere", func(_ *OVNTrafficWant, f *OVNFacts, _ *OVNTrafficFacts) {
			f.SB.Bindings["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0", Chassis: "hv2", MAC: []string{"02:00:00:00:00:01 10.10.0.1"}}
		}, Fail, []string{"port not installed: vm1-eth0: bound to chassis hv2, not this one (hv1)"}},
		{"source without address", func(_ *OVNTrafficWant, f *OVNFacts, _ *OVNTrafficFacts) {
			f.SB.Bindings["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0", Chassis: "hv1", MAC: []string{"unknown"}}
		}, Fail, []string{"no address: vm1-eth0 has no Ethernet and IPv4 address in the Southbound (unknown)"}},
		{"no such destination", func(w *OVNTrafficWant, _ *OVNFacts, _ *OVNTrafficFacts) { w.To = "vm9" }, Fail,
			[]string{"no path: vm9 (groups[0].validate.ovn_to): no such logical port in the Southbound"}},
		{"destination unbound", func(_ *OVNTrafficWant, f *OVNFacts, _ *OVNTrafficFacts) {
			f.SB.Bindings["vm3-eth0"] = ovnsb.Binding{LogicalPort: "vm3-eth0", MAC: []string{"02:00:00:00:00:03 10.10.0.3"}}
		}, Fail, []string{"no path: vm3-eth0 (groups[0].validate.ovn_to) is bound to no chassis"}},
		{"no tunnel", func(_ *OVNTrafficWant, f *OVNFacts, _ *OVNTrafficFacts) { delete(f.Interfaces, "ovn-hv2-0") }, Fail,
			[]string{"no path: vm3-eth0 is on chassis hv2 (encaps geneve 10.0.0.2), and br-int has no tunnel port ovn-* to it: ovn/tunnel/hv2 says why"}},
		{"Southbound unread", func(_ *OVNTrafficWant, f *OVNFacts, _ *OVNTrafficFacts) {
			f.SB, f.SBErr = nil, errors.New("connection refused")
		}, Fail,
			[]string{"no path: cannot read the OVN Southbound: connection refused"}},
		{"probe error", func(_ *OVNTrafficWant, _ *OVNFacts, x *OVNTrafficFacts) {
			x.Probe = &OVNProbe{Err: errors.New("openflow packet-out: refused")}
		}, Fail,
			[]string{"probe failed: vm1-eth0 (eth2, 10.10.0.1) -> vm3-eth0", "openflow packet-out: refused"}},
		{"ACL drop here", func(_ *OVNTrafficWant, _ *OVNFacts, x *OVNTrafficFacts) {
			x.Probe, x.Trace, x.Logical = silent, &dropped, aclLF
		}, Fail,
			[]string{"ACL drop: vm1-eth0 (eth2, 10.10.0.1) -> vm3-eth0 (10.10.0.3, on chassis hv2 over ovn-hv2-0): none of 3 echo requests answered within 1s each: this chassis drops the request at OpenFlow table 18, cookie 0xabcdef12: logical flow abcdef12-0000-4000-8000-000000000001 (ingress table 9, ls_in_acl)"}},
		{"dropped by another flow", func(_ *OVNTrafficWant, _ *OVNFacts, x *OVNTrafficFacts) {
			x.Probe, x.Trace, x.Logical = silent, &dropped, l2LF
		}, Fail,
			[]string{"no path: ", "this chassis drops the request (datapath actions: drop) at OpenFlow table 18, cookie 0xabcdef12: logical flow abcdef12-0000-4000-8000-000000000002 (ingress table 27, ls_in_l2_lkup)"}},
		{"left, no reply", func(_ *OVNTrafficWant, _ *OVNFacts, x *OVNTrafficFacts) { x.Probe, x.Trace = silent, &left }, Fail,
			[]string{"ACL drop suspected: ", "the request leaves this chassis's flows (datapath actions: set(tunnel(", "an ACL dropping it in chassis hv2 (to-lport ACLs run there)", "nothing answers at 10.10.0.3 behind vm3-eth0"}},
		{"no reply, no trace", func(_ *OVNTrafficWant, _ *OVNFacts, x *OVNTrafficFacts) {
			x.Probe, x.TraceErr = silent, errors.New("no ovs-vswitchd")
		}, Fail,
			[]string{"ACL drop suspected: ", "the request's trace on this chassis could not be read: no ovs-vswitchd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, f := ovnTrafficHealthy()
			var x OVNTrafficFacts
			tt.edit(&w, &f, &x)
			c := OVNTrafficCheck(w, PlanOVNTraffic(w, f), x)
			if c.Verdict != tt.want || c.Name != "ovn/traffic/"+w.To {
				t.Fatalf("%s %s: %s", c.Name, c.Verdict, c.Detail)
			}
			for _, s := range tt.detail {
				if !strings.Contains(c.Detail, s) {
					t.Errorf("detail lacks %q:\n%s", s, c.Detail)
				}
			}
		})
	}
}

// The probe's frame is a valid echo request (both checksums verify); the
// reply the destination would send is recognized, one with another
// identifier or from another address is not.
func TestEchoFrame(t *testing.T) {
	src := OVNEndpoint{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.10.0.1")}
	dst := OVNEndpoint{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 3}, IP: netip.MustParseAddr("10.10.0.3")}
	fr := EchoFrame(src, dst, 0x1234, 2)
	if inetChecksum(fr[14:34]) != 0 || inetChecksum(fr[34:]) != 0 {
		t.Fatalf("checksums do not verify: % x", fr)
	}
	if string(fr[0:6]) != string(dst.MAC) || string(fr[6:12]) != string(src.MAC) || fr[34] != 8 {
		t.Fatalf("not an echo request from src to dst: % x", fr)
	}
	reply := func(from OVNEndpoint, id uint16) []byte {
		r := EchoFrame(from, src, id, 2)
		r[34] = 0 // echo reply
		return r
	}
	if seq, ok := IsEchoReply(reply(dst, 0x1234), src, dst, 0x1234); !ok || seq != 2 {
		t.Errorf("the reply is not recognized (seq %d)", seq)
	}
	if _, ok := IsEchoReply(reply(dst, 0x1235), src, dst, 0x1234); ok {
		t.Error("a reply with another identifier is taken")
	}
	other := OVNEndpoint{MAC: dst.MAC, IP: netip.MustParseAddr("10.10.0.4")}
	if _, ok := IsEchoReply(reply(other, 0x1234), src, dst, 0x1234); ok {
		t.Error("a reply from another address is taken")
	}
	if _, ok := IsEchoReply(fr, src, dst, 0x1234); ok {
		t.Error("the request itself is taken for the reply")
	}
}

func TestLSPAddress(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{[]string{"02:00:00:00:00:01 10.10.0.1"}, "02:00:00:00:00:01 10.10.0.1"},
		{[]string{"unknown", "02:00:00:00:00:02 fd00::2 10.10.0.2"}, "02:00:00:00:00:02 10.10.0.2"},
		{[]string{"02:00:00:00:00:01"}, ""},
		{[]string{"dynamic"}, ""},
		{nil, ""},
	} {
		e, ok := LSPAddress(tt.in)
		got := ""
		if ok {
			got = e.MAC.String() + " " + e.IP.String()
		}
		if got != tt.want {
			t.Errorf("LSPAddress(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFlowsOutTo(t *testing.T) {
	flows := []ovs.DPFlow{
		{InPort: "genev_sys_6081", Actions: "ct(zone=1),recirc(0x4)"},
		{InPort: "genev_sys_6081", Actions: "eth2"},
		{InPort: "eth3", Actions: "eth20,eth2"},
		{InPort: "eth2", Actions: "set(tunnel(dst=10.0.0.2)),genev_sys_6081"},
	}
	got := FlowsOutTo(flows, "eth2")
	if len(got) != 2 || got[0].Actions != "eth2" || got[1].InPort != "eth3" {
		t.Errorf("got %+v", got)
	}
}
