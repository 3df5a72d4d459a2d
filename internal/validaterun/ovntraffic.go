package validaterun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovnsb"
)

// The OVN traffic check's probe: this many echo requests, each waited for
// this long.
const (
	ovnProbes    = 3
	ovnProbeWait = time.Second
)

// ovnTrafficEnds are the check's ports and where the destination came
// from: the flags, then the group's validate: section, then (the source)
// the group's first ovn_port.
func (r *run) ovnTrafficEnds(g *config.Group) (from, to, toField string) {
	from, to, toField = r.o.OVNFrom, r.o.OVNTo, "--ovn-to"
	if from == "" {
		from = g.Validate.OVNFrom
	}
	if from == "" {
		if ps := g.OVNPorts(""); len(ps) > 0 {
			from = ps[0].LSP
		}
	}
	if to == "" {
		to, toField = g.Validate.OVNTo, groupPath(r.pe.Config(), g)+".validate.ovn_to"
	}
	return from, to, toField
}

// ovnTraffic is the OVN traffic check of group g: an ICMP echo request
// from one of the group's logical ports to another logical port (on this
// chassis or another), sent into the integration bridge at the source's
// representor (OpenFlow packet-out through OVN's tables, as if its VF had
// sent it) and its reply watched for going out of that representor. With
// no reply, the request's ofproto/trace on this chassis and the logical
// flow of its last OpenFlow flow say where it stops; with replies, the
// offload check classifies the datapath flows that carried them.
func (r *run) ovnTraffic(ctx context.Context, g *config.Group, gh pipeline.Group) validate.Check {
	start := time.Now()
	c := r.ovnTrafficCheck(ctx, g, gh)
	c.Duration = time.Since(start)
	return c
}

func (r *run) ovnTrafficCheck(ctx context.Context, g *config.Group, gh pipeline.Group) validate.Check {
	from, to, toField := r.ovnTrafficEnds(g)
	if to == "" {
		return validate.Check{Name: validate.OVNTrafficName, Verdict: validate.Skip,
			Detail: fmt.Sprintf("no destination port: name one with --ovn-to or %s.validate.ovn_to (a logical switch port on this chassis or another)", groupPath(r.pe.Config(), g))}
	}
	if from == "" {
		return validate.Check{Name: validate.OVNTrafficName + "/" + to, Verdict: validate.Skip,
			Detail: "the group binds no logical port: the probe enters br-int at one of its representors (give a vfs[] or attachments[] entry an ovn_port)"}
	}
	st := ReadOVN(ctx, r.pe.Config(), r.h, g, to)
	w := validate.OVNTrafficWant{Chassis: st.Want.Chassis, Bridge: st.Want.Bridge, From: from, To: to, ToField: toField}
	for _, p := range st.Want.Ports {
		if p.LSP == from {
			w.FromIface = p.Interface
		}
	}
	path := validate.PlanOVNTraffic(w, st.Facts)
	var f validate.OVNTrafficFacts
	if path.Reason != "" || r.h.Simulated() {
		if r.h.Simulated() && path.Reason == "" {
			return validate.Check{Name: validate.OVNTrafficName + "/" + to, Verdict: validate.Skip, Detail: "the simulated host runs no OVN datapath to send the probe through"}
		}
		return validate.OVNTrafficCheck(w, path, f)
	}
	runDir := ovs.RunDirOf(r.h.OVSDB)
	ofport, err := r.ofport(ctx, w.Bridge, w.FromIface)
	if err != nil {
		f.Probe = &validate.OVNProbe{Err: err}
		return validate.OVNTrafficCheck(w, path, f)
	}
	f.Probe = ovnProbe(ctx, ovs.BridgeMgmtSocket(runDir, w.Bridge), ofport, w.FromIface, path.Src, path.Dst)
	switch {
	case f.Probe.Err != nil:
	case f.Probe.Replies > 0:
		// The replies came in on the tunnel (or the destination's
		// interface) and went out of the source's representor: those
		// datapath flows.
		in := ovnTunnelOffload(r.h.Kernel, g, st).VPort
		if path.Tunnel == "" {
			in = ifaceOf(st.Facts, to)
		}
		keep := func(fl []ovs.DPFlow) []ovs.DPFlow {
			var out []ovs.DPFlow
			for _, x := range validate.FlowsOutTo(fl, w.FromIface) {
				if x.InPort == in {
					out = append(out, x)
				}
			}
			return out
		}
		if d, ok := validate.OffloadCheck(r.offloadFacts(ctx, g, gh, keep)).Data.(validate.OffloadData); ok {
			f.Flows = d.Flows
		}
	default:
		f.Trace, f.TraceErr = traceRequest(runDir, w.Bridge, validate.TraceFlow(ofport, path.Src, path.Dst))
		if f.Trace != nil && f.Trace.Cookie != "" {
			sctx, cancel := context.WithTimeout(ctx, sbReadTimeout)
			lfs, err := ovnsb.LogicalFlowsByCookie(sctx, st.Want.Remote, sbTLS(g.OVN), []string{f.Trace.Cookie})
			cancel()
			if err == nil {
				f.Logical = lfs[f.Trace.Cookie]
			}
		}
	}
	return validate.OVNTrafficCheck(w, path, f)
}

// ofport is iface's OpenFlow port number on bridge (OVSDB's Interface
// ofport).
func (r *run) ofport(ctx context.Context, bridge, iface string) (int, error) {
	c, err := r.h.OVS(ctx)
	if err != nil {
		return 0, err
	}
	bs, err := c.Status(ctx, bridge)
	if err != nil {
		return 0, err
	}
	for _, p := range bs.Ports {
		if p.Name == iface && p.OFPort > 0 {
			return p.OFPort, nil
		}
	}
	return 0, fmt.Errorf("%s has no OpenFlow port number on %s", iface, bridge)
}

// ovnProbe sends ovnProbes echo requests from src to dst into br-int (its
// management socket sock) at OpenFlow port ofport, and waits ovnProbeWait
// for each one's reply going out of the representor rep. The first reply
// is executed by ovs-vswitchd as it installs the datapath flows of its
// path (their counters do not count it); the later ones go through those
// flows, which the check then classifies (a reply through a flow in the
// NIC's hardware does not reach the host and is not seen).
var ovnProbe = func(ctx context.Context, sock string, ofport int, rep string, src, dst validate.OVNEndpoint) *validate.OVNProbe {
	p := &validate.OVNProbe{Wait: ovnProbeWait}
	capt, err := eswitch.OpenCapture(rep)
	if err != nil {
		p.Err = err
		return p
	}
	defer func() { _ = capt.Close() }()
	id := uint16(os.Getpid())
	for seq := uint16(1); seq <= ovnProbes && ctx.Err() == nil; seq++ {
		sent := time.Now()
		if err := ovs.PacketOut(ctx, sock, ofport, validate.EchoFrame(src, dst, id, seq)); err != nil {
			p.Err = err
			return p
		}
		p.Sent++
		deadline := sent.Add(ovnProbeWait)
		for {
			fr, err := capt.Next(deadline)
			if errors.Is(err, eswitch.ErrCaptureTimeout) {
				break
			}
			if err != nil {
				p.Err = err
				return p
			}
			if got, ok := validate.IsEchoReply(fr, src, dst, id); ok && got == seq {
				if p.Replies == 0 {
					p.RTT = time.Since(sent)
				}
				p.Replies++
				break
			}
		}
	}
	return p
}

// traceRequest is ovs-vswitchd's trace of flow through bridge's OpenFlow
// tables ("ovs-appctl ofproto/trace BRIDGE FLOW").
func traceRequest(runDir, bridge, flow string) (*validate.OVNTrace, error) {
	sock, err := ovs.VswitchdSocket(runDir)
	if err != nil {
		return nil, err
	}
	out, err := ovs.Appctl(sock, "ofproto/trace", []string{bridge, flow}, 10*time.Second)
	if err != nil {
		return nil, err
	}
	t := validate.ParseTrace(out)
	return &t, nil
}

// ifaceOf is the interface of the integration bridge bound to logical
// port lsp (external_ids:iface-id), "" none.
func ifaceOf(f validate.OVNFacts, lsp string) string {
	for name, i := range f.Interfaces {
		if i.ExternalIDs["iface-id"] == lsp {
			return name
		}
	}
	return ""
}
