package validate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/ovs"
)

// SharedBlockName is the name of the shared tc block check.
const SharedBlockName = "tc/shared-block"

// SharedBlockCheck judges whether bond and its PFs are on the bond's shared
// tc ingress block (eswitch.SharedBlock): a PF off the block gets none of
// ovs-vswitchd's rules, so what arrives on it is not offloaded. hwOffload
// false: n/a (ovs-vswitchd uses no tc then). The check's Data is the
// eswitch.SharedBlock, with the rules and how many are in hardware.
func SharedBlockCheck(k eswitch.Kernel, bond string, pfs []string, hwOffload bool) (Check, *eswitch.SharedBlock) {
	if !hwOffload {
		return notApplicable(SharedBlockName, "hw-offload is not wanted by the config: ovs-vswitchd puts no rules in tc"), nil
	}
	s, err := eswitch.ReadSharedBlock(k, bond, pfs)
	switch {
	case errors.Is(err, eswitch.ErrNotSupported):
		return skip(SharedBlockName, "this host's kernel interface has no tc"), nil
	case err != nil:
		return failed(SharedBlockName, "%v", err), nil
	}
	var c Check
	if s.OK {
		c = pass(SharedBlockName, "%s", s)
	} else {
		c = failed(SharedBlockName, "%s\ntraffic arriving on a PF off the block meets none of ovs-vswitchd's rules and is not offloaded (lost after an OVS restart or a deleted qdisc); `vflag up` binds them again", s)
	}
	c.Data = s
	return c, &s
}

// OffloadName is the name of the offload check (validate --offload).
const OffloadName = "offload"

// Where a datapath flow runs.
const (
	WhereHW       = "hardware"
	WherePartial  = "hardware (partial)"
	WhereTCSW     = "tc software"
	WhereKernelDP = "OVS kernel datapath"
)

// PortTC is what the caller read of one port's device for the offload
// check: hw-tc-offload, the driver, and where its ingress rules run.
type PortTC struct {
	HWTC    *bool  `json:"hw_tc_offload,omitempty"` // nil: the device has no such feature
	Driver  string `json:"driver,omitempty"`
	Rules   int    `json:"rules"`
	InHW    int    `json:"in_hw"`
	SkipHW  int    `json:"skip_hw"`
	ReadErr string `json:"error,omitempty"`
}

// OffloadFacts are what the offload check judges: ovs-vswitchd's datapath
// flows ("ovs-appctl dpctl/dump-flows -m"), the Open_vSwitch offload
// settings, the group's ports and their devices, the bond's shared block
// and ovs-vswitchd's "failed to offload flow" log lines.
type OffloadFacts struct {
	Flows     []ovs.DPFlow
	FlowsErr  error
	HWOffload string // other_config:hw-offload ("" unset)
	TCPolicy  string // other_config:tc-policy ("" none)
	Bond      string
	Reps      []string // the group's representor ports
	Ports     map[string]PortTC
	Block     *eswitch.SharedBlock
	Refusals  []string // ovs-vswitchd log lines "failed to offload flow: ERR: PORT", oldest first
	// FlowAPI is what ovs-vswitchd's log last said of each port's tc flow
	// API (ovs.FlowAPIs): false, "No suitable flow API found".
	FlowAPI map[string]bool
	// TCRefusals are the distinct refusals ovs-vswitchd's tc offload layer
	// logged before asking the kernel ("flow_put: recirc_id sharing not
	// supported").
	TCRefusals []string
	// LogErr says why ovs-vswitchd's log (Refusals, FlowAPI) could not be
	// read.
	LogErr error
	// DatapathType is the bridge's datapath_type ("" or "system": the
	// kernel datapath, whose flows tc can offload; "netdev": the userspace
	// datapath, which tc offload does not apply to).
	DatapathType string
	// Tunnel is the group's tunnel, for its encap and decap flows; nil
	// without one.
	Tunnel *TunnelOffload
}

// TunnelOffload is what the offload check knows of a group's tunnel.
type TunnelOffload struct {
	// VPort is the datapath's tunnel port, the in_port of decap flows
	// (vxlan_sys_4789, genev_sys_6081).
	VPort string
	// Unresolved are the remote endpoints whose next hop's neighbour entry
	// is not resolved, with its state ("" none): mlx5 offloads no encap
	// rule towards them.
	Unresolved map[string]string
	// OVN: the tunnel is OVN's (ovn-controller's ovn-* ports on br-int,
	// Geneve with OVN's option); RemoteOf maps each tunnel port to its
	// remote_ip, for the refusals ovs-vswitchd logs naming the port.
	OVN      bool
	RemoteOf map[string]string
}

// encapDst is the tunnel destination a flow's actions encapsulate to
// ("set(tunnel(tun_id=0x1388,src=192.0.2.11,dst=192.0.2.12,...))"), "" none.
func encapDst(actions string) string {
	_, rest, ok := strings.Cut(actions, "set(tunnel(")
	if !ok {
		return ""
	}
	_, rest, ok = strings.Cut(rest, "dst=")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, ",)"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// FlowVerdict is one flow of the group with where it runs and why not in
// hardware.
type FlowVerdict struct {
	InPort    string `json:"in_port"`
	Match     string `json:"match"`
	Packets   uint64 `json:"packets"`
	Offloaded string `json:"offloaded,omitempty"`
	DP        string `json:"dp,omitempty"`
	Where     string `json:"where"`
	// Kinds, for an OVN group's flows: encap (into the tunnel), decap
	// (out of it), ct (through conntrack, as OVN's ACLs put them).
	Kinds   []string `json:"kinds,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
	Actions string   `json:"actions"`
}

// OffloadData is the offload check's evidence (Check.Data).
type OffloadData struct {
	Flows     []FlowVerdict        `json:"flows"`
	InHW      int                  `json:"in_hw"`       // flows with traffic in hardware (yes or partial)
	InSW      int                  `json:"in_software"` // flows with traffic in tc software or the kernel datapath
	Idle      int                  `json:"idle"`        // the group's flows without packets
	Ports     map[string]PortTC    `json:"ports,omitempty"`
	Block     *eswitch.SharedBlock `json:"shared_block,omitempty"`
	HWOffload string               `json:"hw_offload"`
	TCPolicy  string               `json:"tc_policy,omitempty"`
	Refusals  []string             `json:"refusals,omitempty"`
}

// Where says where a flow runs from its dp and offloaded fields.
func Where(f ovs.DPFlow) string {
	switch {
	case f.Offloaded == "yes":
		return WhereHW
	case f.Offloaded == "partial":
		return WherePartial
	case f.DP == "tc":
		return WhereTCSW
	}
	return WhereKernelDP
}

// OffloadCheck judges where the group's flows run: pass when every flow of
// the group with traffic is in hardware (and, for the bond's rules, on
// every PF: in_hw_count), fail naming each other flow's place and the
// reasons found, skip when the group has no flow with traffic.
func OffloadCheck(x OffloadFacts) Check {
	if x.FlowsErr != nil {
		return failed(OffloadName, "cannot read ovs-vswitchd's datapath flows: %v", x.FlowsErr)
	}
	if x.DatapathType == "netdev" {
		// Not a verdict on the NIC: this bridge's flows never go to tc.
		return notApplicable(OffloadName, "datapath_type netdev: the flows run in ovs-vswitchd's userspace datapath, and tc hardware offload applies to the kernel datapath (system) only")
	}
	ours := map[string]bool{x.Bond: true}
	for _, r := range x.Reps {
		ours[r] = true
	}
	if x.Tunnel != nil {
		ours[x.Tunnel.VPort] = true // decap flows
	}
	d := OffloadData{Ports: x.Ports, Block: x.Block, HWOffload: x.HWOffload, TCPolicy: x.TCPolicy, Refusals: x.Refusals, Flows: []FlowVerdict{}}
	var bad []string
	bondInHW := false
	for _, f := range x.Flows {
		if !ours[f.InPort] {
			continue
		}
		if f.Packets == 0 {
			d.Idle++
			continue
		}
		v := FlowVerdict{InPort: f.InPort, Match: f.Match, Packets: f.Packets, Offloaded: f.Offloaded, DP: f.DP, Where: Where(f), Actions: f.Actions, Kinds: flowKinds(x, f)}
		if v.Where == WhereHW || v.Where == WherePartial {
			d.InHW++
			bondInHW = bondInHW || f.InPort == x.Bond
		} else {
			d.InSW++
			v.Reasons = notInHWReasons(x, f)
			kinds := ""
			if len(v.Kinds) > 0 {
				kinds = " (" + strings.Join(v.Kinds, ", ") + ")"
			}
			bad = append(bad, fmt.Sprintf("in_port(%s)%s %d packets: %s: %s", f.InPort, kinds, f.Packets, v.Where, strings.Join(v.Reasons, "; ")))
		}
		d.Flows = append(d.Flows, v)
	}
	var c Check
	switch {
	case d.InHW+d.InSW == 0:
		c = skip(OffloadName, "no datapath flow of the group has traffic (%d idle): nothing to judge; run it with --traffic or while the VMs talk", d.Idle)
	case len(bad) > 0:
		c = failed(OffloadName, "%d of %d flows with traffic NOT in hardware\n%s", d.InSW, d.InHW+d.InSW, strings.Join(bad, "\n"))
	case bondInHW && x.Block != nil && x.Block.InHW > x.Block.AllPFs:
		c = failed(OffloadName, "%d flows in hardware, but %d of the bond's %d rules in hardware are not on every PF (in_hw_count below the PF count): traffic arriving on the other PF is not offloaded; %s",
			d.InHW, x.Block.InHW-x.Block.AllPFs, x.Block.InHW, x.Block)
	default:
		c = pass(OffloadName, "%d flows with traffic, all in hardware", d.InHW)
	}
	c.Data = d
	return c
}

// notInHWReasons finds why a flow is not in hardware, most general first.
func notInHWReasons(x OffloadFacts, f ovs.DPFlow) []string {
	var out []string
	if x.HWOffload != "true" {
		out = append(out, fmt.Sprintf("hw-offload off (other_config:hw-offload=%s): ovs-vswitchd puts no flow in tc", orDash(x.HWOffload)))
	}
	switch {
	case x.TCPolicy == "skip_hw":
		out = append(out, "tc-policy skip_hw: ovs-vswitchd asks tc to keep every rule out of hardware")
	case x.TCPolicy == "skip_sw" && f.DP != "tc":
		out = append(out, "tc-policy skip_sw: a rule no device takes into hardware is refused by tc and the flow stays in the OVS kernel datapath")
	}
	if f.DP != "tc" {
		for _, port := range append([]string{f.InPort}, outputPorts(f.Actions)...) {
			if api, said := x.FlowAPI[port]; said && !api {
				out = append(out, fmt.Sprintf("ovs-vswitchd has no tc flow API for %s (its log: \"%s: No suitable flow API found\": the kernel refused the port its ingress qdisc when ovs-vswitchd added it, e.g. a bond whose block held rules in its PFs' hardware): a flow from or to it stays in the OVS kernel datapath until the port is added again (vflag up does it for the bond)", port, port))
				break
			}
		}
	}
	decap := x.Tunnel != nil && f.InPort == x.Tunnel.VPort
	if x.Tunnel != nil {
		if dst := encapDst(f.Actions); dst != "" {
			if st, unresolved := x.Tunnel.Unresolved[dst]; unresolved {
				out = append(out, fmt.Sprintf("encap to %s: its next hop's neighbour is unresolved (%s): mlx5 offloads an encap rule only once it is resolved", dst, orDash(st)))
			}
		}
	}
	if decap && f.DP == "tc" && x.Ports[f.InPort].InHW == 0 {
		out = append(out, fmt.Sprintf("decap on %s: no tc rule of it in hardware: mlx5 takes decap rules there through its indirect block (the eswitch in switchdev with encap-mode basic, the tunnel's local address on the LAG's bond)", f.InPort))
	}
	p, known := x.Ports[f.InPort]
	// Without hw-tc-offload tc keeps a rule in software (dp:tc): it is no
	// reason for a flow tc did not take (dp:ovs), unless tc-policy skip_sw
	// makes tc refuse what no device takes.
	tcDecides := f.DP == "tc" || x.TCPolicy == "skip_sw"
	switch {
	case !known || decap: // a tunnel device has no hw-tc-offload of its own
	case p.ReadErr != "":
		out = append(out, fmt.Sprintf("%s: %s", f.InPort, p.ReadErr))
	case !tcDecides:
	case p.HWTC == nil:
		out = append(out, fmt.Sprintf("%s has no hw-tc-offload feature (driver %s): no tc offload", f.InPort, orDash(p.Driver)))
	case !*p.HWTC:
		out = append(out, fmt.Sprintf("hw-tc-offload off on %s: its driver takes no tc rule", f.InPort))
	}
	if x.Tunnel != nil && x.Tunnel.OVN {
		out = append(out, ovnFlowReasons(x, f)...)
	}
	if f.InPort == x.Bond && x.Block != nil && !x.Block.OK {
		out = append(out, "port missing from the shared block: "+strings.Join(x.Block.Missing(), ", "))
	}
	refused := false
	for i := len(x.Refusals) - 1; i >= 0; i-- {
		if strings.HasSuffix(x.Refusals[i], ": "+f.InPort) {
			out = append(out, "the driver refused it: "+x.Refusals[i])
			refused = true
			break
		}
	}
	if f.DP != "tc" && recirculates(f) && slices.ContainsFunc(x.TCRefusals, func(r string) bool { return strings.Contains(r, "recirc_id sharing") }) {
		// Open vSwitch's own refusal, before the kernel's tc: its
		// datapath does not share recirculation ids with tc.
		why := "the flow recirculates (conntrack) and the kernel's OVS datapath shares no recirculation ids with tc (ovs-vswitchd's log: \"flow_put: recirc_id sharing not supported\"; the kernel lacks CONFIG_NET_TC_SKB_EXT, as Debian's are built): ovs-vswitchd puts no such flow in tc, whatever the NIC"
		if refused {
			why += " (the refusal above is this one)"
		}
		out = append(out, why)
	}
	if known && p.ReadErr == "" && p.HWTC != nil && *p.HWTC && x.TCPolicy != "skip_hw" && f.DP == "tc" && p.Rules > 0 && p.InHW == 0 && p.SkipHW < p.Rules {
		out = append(out, fmt.Sprintf("the driver of %s (%s) holds none of its %d tc rules in hardware (not_in_hw): the device has no tc flower offload", f.InPort, orDash(p.Driver), p.Rules))
	}
	if len(out) == 0 && x.LogErr != nil {
		out = append(out, fmt.Sprintf("no reason found, and none read from ovs-vswitchd's log: %v (set ovs_log, or --ovs-log, to its --log-file)", x.LogErr))
	}
	if len(out) == 0 {
		out = append(out, "no reason found (see ovs-vswitchd's log with vlog/set dpif_netlink:dbg netdev_offload_tc:dbg)")
	}
	return out
}

// ovnFlowReasons are what keeps an OVN flow out of the NIC that the flow
// itself shows: conntrack (ICMP through it above all), its Geneve options,
// the encap refusal mlx5 logs on LAG setups.
func ovnFlowReasons(x OffloadFacts, f ovs.DPFlow) []string {
	var out []string
	if usesCT(f) {
		if strings.Contains(f.Match, "icmp(") || strings.Contains(f.Match, "icmpv6(") {
			out = append(out, "ICMP through conntrack (ct): mlx5 offloads no ICMP connection, its packets stay in software (TCP and UDP connections are offloaded once established)")
		} else {
			out = append(out, "conntrack (ct) in the path (an ACL of the logical switch): mlx5 offloads a connection only once it is established; until then, and for each new one, the packets run in software")
		}
	}
	cts, zero := geneveOptions(f.Match + " " + f.Actions)
	if len(cts) > 1 {
		out = append(out, fmt.Sprintf("more than one Geneve option class/type (%s): mlx5 offloads one option class/type at a time", strings.Join(cts, "; ")))
	}
	if zero {
		out = append(out, "a Geneve option of value 0: mlx5 does not offload a Geneve option whose value is 0")
	}
	dst := encapDst(f.Actions)
	for i := len(x.Refusals) - 1; i >= 0 && dst != ""; i-- {
		r := x.Refusals[i]
		_, port, ok := strings.Cut(strings.TrimPrefix(r, "failed to offload flow: "), ": ovn-")
		if ok && x.Tunnel.RemoteOf["ovn-"+port] == dst {
			out = append(out, fmt.Sprintf("the driver refused the encap to OVN's tunnel port ovn-%s: %s (seen on LAG setups: the encap address and the route to %s must be on the LAG's bond, and the neighbour resolved)", port, r, dst))
			break
		}
	}
	return out
}

// outputPorts are the ports a datapath flow's actions output to, as
// "dpctl/dump-flows -m" names them ("actions:bond0,eth2"; other actions,
// such as push_vlan(...) or set(...), are left out).
func outputPorts(actions string) []string {
	var out []string
	depth := 0
	start := 0
	for i := 0; i <= len(actions); i++ {
		if i < len(actions) {
			switch actions[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if a := actions[start:i]; a != "" && !strings.ContainsAny(a, "():=") {
			out = append(out, a)
		}
		start = i + 1
	}
	return out
}

// flowKinds classifies an OVN group's flow: encap (its actions set a
// tunnel), decap (in_port the datapath's tunnel port), ct (its match reads
// ct_state or its actions send it through conntrack).
func flowKinds(x OffloadFacts, f ovs.DPFlow) []string {
	if x.Tunnel == nil || !x.Tunnel.OVN {
		return nil
	}
	var out []string
	if encapDst(f.Actions) != "" {
		out = append(out, "encap")
	}
	if f.InPort == x.Tunnel.VPort {
		out = append(out, "decap")
	}
	if usesCT(f) {
		out = append(out, "ct")
	}
	return out
}

// usesCT: the flow goes through conntrack (ct(...) or recirc after ct
// in its actions, ct_state in its match).
// recirculates: the flow is on a recirculation chain (recirc_id not 0) or
// recirculates (a recirc action), what tc can take only when the datapath
// shares recirculation ids with it.
func recirculates(f ovs.DPFlow) bool {
	if strings.Contains(f.Actions, "recirc(") {
		return true
	}
	_, id, ok := strings.Cut(f.Match, "recirc_id(")
	if !ok {
		return false
	}
	id, _, _ = strings.Cut(id, ")")
	return id != "0" && id != "0x0" && !strings.HasPrefix(id, "0/")
}

// A match of ct_state(0/0) reads no conntrack state ("dump-flows -m"
// prints every field, masked out or not).
func usesCT(f ovs.DPFlow) bool {
	if strings.Contains(f.Actions, "ct(") {
		return true
	}
	_, st, ok := strings.Cut(f.Match, "ct_state(")
	if !ok {
		return false
	}
	st, _, _ = strings.Cut(st, ")")
	return st != "0/0" && !strings.HasSuffix(st, "/0")
}

// geneveOptions are the Geneve options of a flow's match or actions as
// the datapath prints them ("geneve({class=0x102,type=0x80,len=4,0x10002/0x7fffffff})"):
// each option's class and type, and whether its value is 0.
func geneveOptions(s string) (classTypes []string, zero bool) {
	for {
		i := strings.Index(s, "{class=")
		if i < 0 {
			return classTypes, zero
		}
		s = s[i+1:]
		j := strings.IndexByte(s, '}')
		if j < 0 {
			return classTypes, zero
		}
		fields := strings.Split(s[:j], ",")
		s = s[j:]
		if len(fields) < 2 {
			continue
		}
		ct := fields[0] + "," + fields[1]
		if !slices.Contains(classTypes, ct) {
			classTypes = append(classTypes, ct)
		}
		if len(fields) < 4 { // len=0: no value
			continue
		}
		val, _, _ := strings.Cut(fields[3], "/")
		if v, err := strconv.ParseUint(strings.TrimPrefix(val, "0x"), 16, 64); err == nil && v == 0 {
			zero = true
		}
	}
}
