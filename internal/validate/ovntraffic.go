package validate

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovnsb"
)

// OVNTrafficName is the name of the OVN traffic check (validate --traffic
// on a group with ovn).
const OVNTrafficName = "ovn/traffic"

// The OVN traffic check's reasons, each a detail's first words (and a
// troubleshooting entry).
const (
	ReasonNotInstalled = "port not installed"
	ReasonNoPath       = "no path"
	ReasonACLDrop      = "ACL drop"
	ReasonACLSuspected = "ACL drop suspected"
	ReasonNoAddress    = "no address"
	ReasonProbeError   = "probe failed"
)

// OVNTrafficWant is what the OVN traffic check runs: an echo request from
// From (one of the group's ports, at its representor FromIface) to To, a
// logical switch port on this chassis or another.
type OVNTrafficWant struct {
	Chassis   string // this chassis
	Bridge    string // br-int
	From      string
	FromIface string
	To        string
	// ToField names where To came from ("--ovn-to",
	// "groups[0].validate.ovn_to"), for the messages.
	ToField string
}

// OVNEndpoint is a logical port's address as the probe uses it.
type OVNEndpoint struct {
	MAC net.HardwareAddr
	IP  netip.Addr
}

// LSPAddress is the first Ethernet and IPv4 address of a Port_Binding's
// mac column ("02:00:00:00:00:01 10.10.0.1 fd00::1"); ok false when it
// has none ("unknown", "dynamic" not yet assigned, a MAC alone).
func LSPAddress(macs []string) (OVNEndpoint, bool) {
	for _, m := range macs {
		f := strings.Fields(m)
		if len(f) < 2 {
			continue
		}
		hw, err := net.ParseMAC(f[0])
		if err != nil || len(hw) != 6 {
			continue
		}
		for _, a := range f[1:] {
			if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
				return OVNEndpoint{MAC: hw, IP: ip}, true
			}
		}
	}
	return OVNEndpoint{}, false
}

// EchoFrame is an Ethernet frame of an ICMP echo request from src to dst
// with identifier id and sequence seq (IPv4, TTL 64, 32 bytes of data).
func EchoFrame(src, dst OVNEndpoint, id, seq uint16) []byte {
	payload := []byte("vflag validate ovn/traffic probe")
	icmp := make([]byte, 8, 8+len(payload))
	icmp[0] = 8 // echo request
	binary.BigEndian.PutUint16(icmp[4:], id)
	binary.BigEndian.PutUint16(icmp[6:], seq)
	icmp = append(icmp, payload...)
	binary.BigEndian.PutUint16(icmp[2:], inetChecksum(icmp))
	ip := make([]byte, 20, 20+len(icmp))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(icmp)))
	binary.BigEndian.PutUint16(ip[4:], id)
	ip[6] = 0x40 // DF
	ip[8], ip[9] = 64, 1
	s, d := src.IP.As4(), dst.IP.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
	f := make([]byte, 0, 14+len(ip)+len(icmp))
	f = append(f, dst.MAC...)
	f = append(f, src.MAC...)
	f = append(f, 0x08, 0x00)
	f = append(f, ip...)
	return append(f, icmp...)
}

func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// IsEchoReply tells whether frame is the ICMP echo reply to EchoFrame(src,
// dst, id, _): from dst's address to src's, with the identifier id; seq
// is its sequence number.
func IsEchoReply(frame []byte, src, dst OVNEndpoint, id uint16) (seq uint16, ok bool) {
	if len(frame) < 14+20+8 || frame[12] != 0x08 || frame[13] != 0x00 {
		return 0, false
	}
	ip := frame[14:]
	hl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || hl < 20 || len(ip) < hl+8 || ip[9] != 1 {
		return 0, false
	}
	s, d := dst.IP.As4(), src.IP.As4()
	if string(ip[12:16]) != string(s[:]) || string(ip[16:20]) != string(d[:]) {
		return 0, false
	}
	icmp := ip[hl:]
	if icmp[0] != 0 || binary.BigEndian.Uint16(icmp[4:]) != id {
		return 0, false
	}
	return binary.BigEndian.Uint16(icmp[6:]), true
}

// TraceFlow is the ofproto/trace flow of EchoFrame(src, dst, ...) coming
// in on OpenFlow port inPort.
func TraceFlow(inPort int, src, dst OVNEndpoint) string {
	return fmt.Sprintf("in_port=%d,icmp,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64,icmp_type=8,icmp_code=0", inPort, src.MAC, dst.MAC, src.IP, dst.IP)
}

// OVNTrace is what ofproto/trace said of the probe's request on this
// chassis: the last datapath actions (after every conntrack
// recirculation) and the cookie of the last OpenFlow flow it matched.
type OVNTrace struct {
	Actions string `json:"datapath_actions"`
	// Cookie is the last matched flow's cookie (8 hex digits: the first
	// 32 bits of its logical flow's UUID), Table its OpenFlow table.
	Cookie string `json:"cookie,omitempty"`
	Table  string `json:"table,omitempty"`
}

// Dropped: the request goes nowhere on this chassis.
func (t *OVNTrace) Dropped() bool { return t.Actions == "drop" || t.Actions == "" }

var traceFlowRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*(\d+)\. .*cookie 0x([0-9a-fA-F]+)`)
})

// ParseTrace reads ofproto/trace's output: the last "Datapath actions:"
// line and the last flow with a cookie before it.
func ParseTrace(out string) OVNTrace {
	var t OVNTrace
	cookie, table := "", ""
	for _, l := range strings.Split(out, "\n") {
		if m := traceFlowRE().FindStringSubmatch(l); m != nil {
			c := strings.ToLower(m[2])
			if len(c) > 8 {
				c = c[len(c)-8:]
			}
			cookie, table = fmt.Sprintf("%08s", c), m[1]
			continue
		}
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "Datapath actions:"); ok {
			t.Actions, t.Cookie, t.Table = strings.TrimSpace(a), cookie, table
		}
	}
	return t
}

// OVNProbe is the outcome of the probe: echo requests sent into br-int at
// the From port's representor, the replies seen going out of it.
type OVNProbe struct {
	Sent    int           `json:"sent"`
	Replies int           `json:"replies"`
	RTT     time.Duration `json:"rtt_ns,omitempty"` // the first reply's
	Wait    time.Duration `json:"wait_ns"`          // how long it waited for each
	Err     error         `json:"-"`
}

// OVNTrafficFacts are what the OVN traffic check judges, read by the
// caller: the OVN facts (with the bindings of From and To), the probe, the
// request's trace on this chassis (read when no reply came), the logical
// flows of its last cookie, and the flows of the replies' path as the
// offload check classified them.
type OVNTrafficFacts struct {
	OVN      OVNFacts
	Probe    *OVNProbe
	Trace    *OVNTrace
	TraceErr error
	Logical  []ovnsb.LogicalFlow
	Flows    []FlowVerdict
}

// OVNTrafficData is the check's evidence (Check.Data).
type OVNTrafficData struct {
	From    string              `json:"from"`
	To      string              `json:"to"`
	ToIP    string              `json:"to_ip,omitempty"`
	Chassis string              `json:"to_chassis,omitempty"`
	Tunnel  string              `json:"tunnel,omitempty"`
	Probe   *OVNProbe           `json:"probe,omitempty"`
	Trace   *OVNTrace           `json:"trace,omitempty"`
	Logical []ovnsb.LogicalFlow `json:"logical_flows,omitempty"`
	Flows   []FlowVerdict       `json:"flows,omitempty"`
	Reason  string              `json:"reason,omitempty"`
}

// OVNTrafficPath is what the probe needs before it runs: both ends'
// addresses and, for a port on another chassis, the tunnel port to it. A
// non-empty reason ("port not installed", "no path", "no address") with
// its detail says why it cannot run.
type OVNTrafficPath struct {
	Src, Dst  OVNEndpoint
	Chassis   string // the chassis To is bound to
	Tunnel    string // the ovn-* port to it ("" local)
	Reason    string
	Detail    string
	RemoteIPs []string
}

// PlanOVNTraffic checks what the probe needs: From's Interface on the
// bridge and ovn-installed, bound here; To in the Southbound, bound to a
// chassis, with a tunnel port to that chassis when it is not this one;
// both with an Ethernet and IPv4 address.
func PlanOVNTraffic(w OVNTrafficWant, f OVNFacts) OVNTrafficPath {
	var p OVNTrafficPath
	no := func(reason, format string, args ...any) OVNTrafficPath {
		p.Reason, p.Detail = reason, fmt.Sprintf(format, args...)
		return p
	}
	if f.SBErr != nil {
		return no(ReasonNoPath, "cannot read the OVN Southbound: %v", f.SBErr)
	}
	switch {
	case f.BridgeErr != nil:
		return no(ReasonNotInstalled, "%s: cannot read %s's interfaces (%v): ovn/port/%s says why", w.From, w.Bridge, f.BridgeErr, w.From)
	case f.BridgeMissing:
		return no(ReasonNotInstalled, "%s: the integration bridge %s does not exist (ovn-controller makes it, or vflag up)", w.From, w.Bridge)
	}
	i, ok := f.Interfaces[w.FromIface]
	switch {
	case !ok:
		return no(ReasonNotInstalled, "%s: its representor %s is not an interface of %s (vflag up puts it there)", w.From, w.FromIface, w.Bridge)
	case i.ExternalIDs["ovn-installed"] != "true":
		return no(ReasonNotInstalled, "%s: ovn-controller has not set ovn-installed on %s: its flows are not in %s (ovn/port/%s says why)", w.From, w.FromIface, w.Bridge, w.From)
	}
	from, ok := f.SB.Bindings[w.From]
	switch {
	case !ok:
		return no(ReasonNotInstalled, "%s: no such logical port in the Southbound", w.From)
	case from.Chassis != w.Chassis:
		return no(ReasonNotInstalled, "%s: bound to chassis %s, not this one (%s)", w.From, orDash(from.Chassis), w.Chassis)
	}
	if p.Src, ok = LSPAddress(from.MAC); !ok {
		return no(ReasonNoAddress, "%s has no Ethernet and IPv4 address in the Southbound (%s): the probe sends from the port's own addresses (ovn-nbctl lsp-set-addresses %s \"MAC IP\")", w.From, orDash(strings.Join(from.MAC, "; ")), w.From)
	}
	to, ok := f.SB.Bindings[w.To]
	if !ok {
		return no(ReasonNoPath, "%s (%s): no such logical port in the Southbound (ovn-nbctl lsp-add SWITCH %s; or ovn-northd has not run)", w.To, w.ToField, w.To)
	}
	if to.Chassis == "" {
		return no(ReasonNoPath, "%s (%s) is bound to no chassis: no ovn-controller has its interface (its VM not running, or its iface-id not set)", w.To, w.ToField)
	}
	if p.Dst, ok = LSPAddress(to.MAC); !ok {
		return no(ReasonNoAddress, "%s (%s) has no Ethernet and IPv4 address in the Southbound (%s): the probe sends to the port's own addresses", w.To, w.ToField, orDash(strings.Join(to.MAC, "; ")))
	}
	p.Chassis = to.Chassis
	if to.Chassis == w.Chassis {
		return p
	}
	c := f.SB.ChassisNamed(to.Chassis)
	if c == nil {
		return no(ReasonNoPath, "%s is bound to chassis %s, which is not registered in the Southbound", w.To, to.Chassis)
	}
	for _, e := range c.Encaps {
		p.RemoteIPs = append(p.RemoteIPs, e.IP)
		for name, i := range f.Interfaces {
			if strings.HasPrefix(name, "ovn-") && i.Options["remote_ip"] == e.IP && (p.Tunnel == "" || name < p.Tunnel) {
				p.Tunnel = name
			}
		}
	}
	if p.Tunnel == "" {
		return no(ReasonNoPath, "%s is on chassis %s (encaps %s), and %s has no tunnel port ovn-* to it: ovn/tunnel/%s says why", w.To, to.Chassis, encapList(c.Encaps), w.Bridge, to.Chassis)
	}
	return p
}

// OVNTrafficCheck judges the probe: pass when an echo reply came back to
// From; else fail with the first reason found: what the probe needs
// (PlanOVNTraffic), the probe's own error, the request dropped on this
// chassis by an ACL's logical flow (ofproto/trace's last flow and its
// Logical_Flow's stage) or by another flow, or the request leaving this
// chassis and no reply coming back (an ACL drop beyond it suspected).
func OVNTrafficCheck(w OVNTrafficWant, p OVNTrafficPath, f OVNTrafficFacts) Check {
	d := OVNTrafficData{From: w.From, To: w.To, Chassis: p.Chassis, Tunnel: p.Tunnel, Probe: f.Probe, Trace: f.Trace, Logical: f.Logical, Flows: f.Flows}
	if p.Dst.IP.IsValid() {
		d.ToIP = p.Dst.IP.String()
	}
	name := OVNTrafficName + "/" + w.To
	out := func(c Check, reason string) Check {
		d.Reason = reason
		c.Data = d
		return c
	}
	if p.Reason != "" {
		return out(failed(name, "%s: %s", p.Reason, p.Detail), p.Reason)
	}
	where := "on this chassis"
	if p.Tunnel != "" {
		where = fmt.Sprintf("on chassis %s over %s", p.Chassis, p.Tunnel)
	}
	path := fmt.Sprintf("%s (%s, %s) -> %s (%s, %s)", w.From, w.FromIface, p.Src.IP, w.To, p.Dst.IP, where)
	pr := f.Probe
	switch {
	case pr == nil:
		return out(skip(name, "%s: the probe did not run", path), "")
	case pr.Err != nil:
		return out(failed(name, "%s: %s: %v", ReasonProbeError, path, pr.Err), ReasonProbeError)
	case pr.Replies > 0:
		return out(pass(name, "%s: %d of %d echo requests answered (first in %s) through OVN's flows%s", path, pr.Replies, pr.Sent, pr.RTT.Round(time.Microsecond), flowSummary(f.Flows)), "")
	}
	none := fmt.Sprintf("%s: none of %d echo requests answered within %s each", path, pr.Sent, pr.Wait)
	switch {
	case f.TraceErr != nil || f.Trace == nil:
		return out(failed(name, "%s: %s; the request's trace on this chassis could not be read: %v", ReasonACLSuspected, none, f.TraceErr), ReasonACLSuspected)
	case f.Trace.Dropped():
		lf := aclFlow(f.Logical)
		if lf != nil {
			return out(failed(name, "%s: %s: this chassis drops the request at OpenFlow table %s, cookie 0x%s: logical flow %s (%s table %d, %s): match %q, actions %q: the logical switch's ACL drops it",
				ReasonACLDrop, none, f.Trace.Table, f.Trace.Cookie, lf.UUID, lf.Pipeline, lf.Table, lf.Stage, lf.Match, lf.Actions), ReasonACLDrop)
		}
		desc := "no logical flow has that cookie"
		if len(f.Logical) > 0 {
			l := f.Logical[0]
			desc = fmt.Sprintf("logical flow %s (%s table %d, %s): match %q, actions %q", l.UUID, l.Pipeline, l.Table, orDash(l.Stage), l.Match, l.Actions)
		}
		return out(failed(name, "%s: %s: this chassis drops the request (datapath actions: drop) at OpenFlow table %s, cookie 0x%s: %s (ovn-trace shows the logical pipeline)",
			ReasonNoPath, none, orDash(f.Trace.Table), orDash(f.Trace.Cookie), desc), ReasonNoPath)
	}
	beyond := "the destination's pipeline"
	if p.Tunnel != "" {
		beyond = "chassis " + p.Chassis
	}
	return out(failed(name, "%s: %s: the request leaves this chassis's flows (datapath actions: %s), no reply comes back: an ACL dropping it in %s (to-lport ACLs run there) or the reply is suspected, or nothing answers at %s behind %s",
		ReasonACLSuspected, none, f.Trace.Actions, beyond, p.Dst.IP, w.To), ReasonACLSuspected)
}

// aclFlow is the first of lfs whose stage is an ACL stage of a logical
// switch (ls_in_acl, ls_out_acl, and 23.06's ls_*_acl_eval/_action).
func aclFlow(lfs []ovnsb.LogicalFlow) *ovnsb.LogicalFlow {
	for i := range lfs {
		if strings.Contains(lfs[i].Stage, "_acl") {
			return &lfs[i]
		}
	}
	return nil
}

// flowSummary says where the datapath flows of the replies' path run, as
// the offload check classified them.
func flowSummary(fs []FlowVerdict) string {
	if len(fs) == 0 {
		return ""
	}
	var s []string
	for _, f := range fs {
		kinds := ""
		if len(f.Kinds) > 0 {
			kinds = " (" + strings.Join(f.Kinds, ", ") + ")"
		}
		why := ""
		if len(f.Reasons) > 0 {
			why = ": " + f.Reasons[0]
		}
		s = append(s, fmt.Sprintf("in_port(%s)%s %d packets: %s%s", f.InPort, kinds, f.Packets, f.Where, why))
	}
	return "; the replies' datapath flows:\n" + strings.Join(s, "\n")
}

// FlowsOutTo are the flows whose actions output to port.
func FlowsOutTo(flows []ovs.DPFlow, port string) []ovs.DPFlow {
	var out []ovs.DPFlow
	for _, f := range flows {
		if slices.Contains(outputPorts(f.Actions), port) {
			out = append(out, f)
		}
	}
	return out
}
