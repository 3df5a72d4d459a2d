package validate

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// SlowPathName is the name of the slow-path probe (validate --traffic).
const SlowPathName = "offload/slow-path"

// The probe's bound on the packets a representor's software counters may
// count during the traffic run: the larger of SlowPathFloor and
// SlowPathShare of the packets the bond's slaves counted. Offloaded traffic
// still sends the first packets of each new flow up the slow path (the
// kernel datapath's miss, ovs-vswitchd's upcall) until ovs-vswitchd has put
// the flow into tc and the NIC: per TCP connection its handshake and the
// first window (an initial cwnd of 10 segments) in each direction, some
// tens of packets; iperf3 -P 4 opens 5 connections, and ARP/ND add a few.
// 200 covers that; 1 % of the run keeps the bound proportionate in a long
// run, where revalidation or a re-learned MAC may send a few more. Traffic
// that does not run in the NIC crosses the representor with every packet
// (about the slaves' count, ~100 %), so the two cases stay far apart.
const (
	SlowPathFloor = 200
	SlowPathShare = 0.01
)

// RepSample is one representor's counters at one instant, both directions
// summed.
type RepSample struct {
	// SW counts the packets that crossed the representor's netdev: the slow
	// path through the kernel and ovs-vswitchd.
	SW uint64
	// HW counts every packet of the VF at its eswitch vport (mlx5
	// vport_rx_packets + vport_tx_packets), offloaded or not; HasHW false:
	// the driver has no such counters.
	HW    uint64
	HasHW bool
	// Source names where SW came from.
	Source string
}

// RepCounters reads a representor's counters.
type RepCounters interface {
	ReadRep(name string) (RepSample, error)
}

// StatsRepCounters reads a representor's counters from the driver's
// statistics ("ethtool -S") where they have both the software and the
// vport counters (mlx5: rx_packets/tx_packets, the representor's own rings,
// and vport_rx_packets/vport_tx_packets), else from the generic
// statistics. An mlx5 representor's generic statistics are its VF's vport
// counters (mlx5e_rep_get_stats copies vf_vport), which move with
// offloaded traffic too: they are never taken as its software counters.
type StatsRepCounters struct {
	// Stats reads "ethtool -S" (eswitch.EthtoolStats); nil: none.
	Stats func(name string) (map[string]uint64, error)
	Sysfs SysfsCounters
}

// ReadRep implements RepCounters.
func (c StatsRepCounters) ReadRep(name string) (RepSample, error) {
	if c.Stats != nil {
		if st, err := c.Stats(name); err == nil {
			rx, ok1 := st["rx_packets"]
			tx, ok2 := st["tx_packets"]
			vrx, ok3 := st["vport_rx_packets"]
			vtx, ok4 := st["vport_tx_packets"]
			switch {
			case ok1 && ok2 && ok3 && ok4:
				return RepSample{SW: rx + tx, HW: vrx + vtx, HasHW: true, Source: "ethtool -S rx/tx_packets"}, nil
			case ok3 && ok4:
				// The generic statistics may be the vport's here too:
				// no software counter to trust.
				return RepSample{}, fmt.Errorf("ethtool -S %s: vport_rx/tx_packets without rx/tx_packets: no software counters", name)
			}
		}
	}
	s, err := c.Sysfs.Read(name)
	if err != nil {
		return RepSample{}, err
	}
	return RepSample{SW: s.Packets, Source: "statistics"}, nil
}

// SlowPathProbe samples the representors of the group's VFs before and
// after the traffic check's run (TrafficConfig.Probe); its Check judges the
// samples (JudgeSlowPath).
type SlowPathProbe struct {
	Reps     []string
	Counters RepCounters
	// NA, when set, makes the check n/a with this reason (hw-offload not
	// wanted, a userspace datapath): nothing is read.
	NA string
	// ListErr, when set, is why the representors could not be listed: the
	// check fails with it.
	ListErr error

	before, after map[string]RepSample
	err           error
	sent          uint64
	ran           bool
	notRun        string
}

func (p *SlowPathProbe) read() map[string]RepSample {
	out := map[string]RepSample{}
	for _, r := range p.Reps {
		s, err := p.Counters.ReadRep(r)
		if err != nil {
			p.err = errors.Join(p.err, fmt.Errorf("representor %s: %w", r, err))
			continue
		}
		out[r] = s
	}
	return out
}

// begin takes the samples before the run.
func (p *SlowPathProbe) begin() {
	if p.NA == "" && p.ListErr == nil {
		p.before = p.read()
	}
}

// end takes the samples after a run in which the slaves counted sent packets.
func (p *SlowPathProbe) end(sent uint64) {
	if p.NA == "" && p.ListErr == nil {
		p.after, p.sent, p.ran = p.read(), sent, true
	}
}

// failed records why the run did not happen (p nil: no probe).
func (p *SlowPathProbe) failed(why string) {
	if p != nil {
		p.notRun = why
	}
}

// RepDelta is what one representor counted during the run.
type RepDelta struct {
	Rep    string `json:"rep"`
	SW     uint64 `json:"sw_packets"`
	HW     uint64 `json:"hw_packets"`
	HasHW  bool   `json:"has_hw_counters"`
	Source string `json:"sw_counters"`
}

// SlowPathData is the probe's evidence (Check.Data).
type SlowPathData struct {
	Sent    uint64     `json:"sent_packets"`       // the bond's slaves counted
	Allowed uint64     `json:"allowed_sw_packets"` // per representor
	Reps    []RepDelta `json:"reps"`
}

// Check judges the samples.
func (p *SlowPathProbe) Check() Check {
	switch {
	case p.NA != "":
		return notApplicable(SlowPathName, "%s", p.NA)
	case p.ListErr != nil:
		return failed(SlowPathName, "cannot list the group's representors: %v", p.ListErr)
	case p.notRun != "":
		return skip(SlowPathName, "the traffic run did not happen: %s", p.notRun)
	case !p.ran:
		return skip(SlowPathName, "the traffic run did not happen")
	case p.err != nil:
		return failed(SlowPathName, "cannot read the representors' counters: %v", p.err)
	}
	var ds []RepDelta
	for _, r := range p.Reps {
		a, b := p.after[r], p.before[r]
		d := RepDelta{Rep: r, HasHW: a.HasHW && b.HasHW, Source: a.Source}
		if a.SW >= b.SW {
			d.SW = a.SW - b.SW
		}
		if d.HasHW && a.HW >= b.HW {
			d.HW = a.HW - b.HW
		}
		ds = append(ds, d)
	}
	v, detail, data := JudgeSlowPath(ds, p.sent)
	return Check{Name: SlowPathName, Verdict: v, Detail: detail, Data: data}
}

// SlowPathAllowed is the bound on one representor's software packets
// during a run in which the slaves counted sent packets.
func SlowPathAllowed(sent uint64) uint64 {
	return max(SlowPathFloor, uint64(float64(sent)*SlowPathShare))
}

// JudgeSlowPath judges what the representors counted during a run in
// which the bond's slaves counted sent packets: pass when no
// representor's software counters moved by more than SlowPathAllowed and,
// where the driver has vport counters, they moved (the traffic crossed a
// VF of the group, in the NIC); fail naming each representor over the
// bound, or the still vport counters; skip when nothing can be judged (no
// representor, no packet on the slaves, no counter moved and no vport
// counters to tell whether the traffic crossed a VF).
func JudgeSlowPath(ds []RepDelta, sent uint64) (Verdict, string, SlowPathData) {
	allowed := SlowPathAllowed(sent)
	data := SlowPathData{Sent: sent, Allowed: allowed, Reps: ds}
	if data.Reps == nil {
		data.Reps = []RepDelta{}
	}
	if len(ds) == 0 {
		return Skip, "no representor of the group's VFs in the bridge: nothing to probe", data
	}
	if sent == 0 {
		return Skip, "the bond's slaves counted no packets during the run: nothing to judge", data
	}
	bound := fmt.Sprintf("at most %d per representor: the larger of %d and %.0f%% of the %d packets on the slaves", allowed, SlowPathFloor, SlowPathShare*100, sent)
	var over []string
	var hwReps, hwMoved int
	var swSum, hwSum uint64
	for _, d := range ds {
		swSum += d.SW
		if d.SW > allowed {
			over = append(over, fmt.Sprintf("%s %d packets in software (%s)", d.Rep, d.SW, d.Source))
		}
		if d.HasHW {
			hwReps++
			hwSum += d.HW
			if d.HW > 0 {
				hwMoved++
			}
		}
	}
	moved := movedReps(ds)
	switch {
	case len(over) > 0:
		return Fail, fmt.Sprintf("the traffic crossed %d representor(s) in software, not in the NIC (%s):\n%s\nmoved: %s",
			len(over), bound, strings.Join(over, "\n"), moved), data
	case hwReps > 0 && hwSum == 0:
		return Fail, fmt.Sprintf("the vport counters (vport_rx/tx_packets) of none of the %d representors moved: the traffic crossed no VF of the group; software %d packets in all (%s)",
			hwReps, swSum, bound), data
	case hwReps == 0 && swSum == 0:
		return Skip, fmt.Sprintf("no representor counted a packet and none has vport counters (driver without vport_rx/tx_packets in ethtool -S): cannot tell whether the traffic crossed a VF of the group (%d representors)", len(ds)), data
	case hwReps == 0:
		return Pass, fmt.Sprintf("the representors' software counters stayed still (%s; no vport counters on this driver): %s", bound, moved), data
	}
	return Pass, fmt.Sprintf("the representors' software counters stayed still (%s) while the vport counters of %d moved: %s", bound, hwMoved, moved), data
}

// movedReps lists the representors whose counters moved, most packets
// first, at most 8 and how many more.
func movedReps(ds []RepDelta) string {
	var ms []RepDelta
	for _, d := range ds {
		if d.SW > 0 || d.HW > 0 {
			ms = append(ms, d)
		}
	}
	if len(ms) == 0 {
		return "no counter moved"
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].SW+ms[i].HW > ms[j].SW+ms[j].HW })
	var parts []string
	for i, d := range ms {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ms)-8))
			break
		}
		if d.HasHW {
			parts = append(parts, fmt.Sprintf("%s sw +%d hw +%d", d.Rep, d.SW, d.HW))
		} else {
			parts = append(parts, fmt.Sprintf("%s sw +%d", d.Rep, d.SW))
		}
	}
	return strings.Join(parts, ", ")
}
