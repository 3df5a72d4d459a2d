package sim

import (
	"fmt"
	"syscall"
)

// Per-netdev traffic counters: /sys/class/net/<if>/statistics/* (the
// generic rtnl_link_stats64 counters; mlx5's ethtool -S *_phy counters are
// not modelled; an mlx5 representor's statistics are its VF's vport
// counters and its ethtool -S has its software and vport counters, see
// Stats and TrafficReps). The simulated host carries no traffic by itself:
// tests advance the counters with AddCounters, Traffic or TrafficReps.

// netStats is one netdev's counters (state.go: netdev.Stats).
type netStats struct {
	RxPackets uint64 `json:"rx_packets,omitempty"`
	TxPackets uint64 `json:"tx_packets,omitempty"`
	RxBytes   uint64 `json:"rx_bytes,omitempty"`
	TxBytes   uint64 `json:"tx_bytes,omitempty"`
}

// Counters is a change of one netdev's counters.
type Counters struct {
	RxPackets, TxPackets, RxBytes, TxBytes uint64
}

func (s *netStats) add(c Counters) {
	s.RxPackets += c.RxPackets
	s.TxPackets += c.TxPackets
	s.RxBytes += c.RxBytes
	s.TxBytes += c.TxBytes
}

// stats returns nd's counters; a bond's are the sum of its slaves' (as
// bond_get_stats accumulates them).
func (st *state) stats(nd *netdev) netStats {
	var out netStats
	if nd.Stats != nil {
		out = *nd.Stats
	}
	if nd.Bond != nil {
		for _, s := range nd.Bond.Slaves {
			if sl := st.Netdevs[s]; sl != nil && sl.Stats != nil {
				out.add(Counters(*sl.Stats))
			}
		}
	}
	return out
}

func (t tree) statsDir(nd *netdev) *node {
	return dirNode(func() map[string]*node {
		s := t.st.stats(nd)
		num := func(v uint64) *node { return textNode(fmt.Sprintf("%d\n", v)) }
		return map[string]*node{
			"rx_packets": num(s.RxPackets), "tx_packets": num(s.TxPackets),
			"rx_bytes": num(s.RxBytes), "tx_bytes": num(s.TxBytes),
			"rx_errors": num(0), "tx_errors": num(0), "rx_dropped": num(0), "tx_dropped": num(0),
			"multicast": num(0), "collisions": num(0),
		}
	})
}

// AddCounters advances the counters of the netdev name (a bond's are its
// slaves' sum: add to the slaves).
func (h *Host) AddCounters(name string, c Counters) error {
	return h.update(func(st *state, now int64) (bool, error) {
		nd := st.link(name, now)
		if nd == nil {
			return false, st.notFound(name)
		}
		if nd.Stats == nil {
			nd.Stats = &netStats{}
		}
		nd.Stats.add(c)
		return true, nil
	})
}

// Traffic sends packets of size bytes each way through bond, as the bond
// would spread them: active-backup puts all on the active slave, the other
// modes split them evenly over the slaves that are up. Traffic through a
// bond without an up slave is lost (nothing is counted); it reports how many
// packets were carried.
func (h *Host) Traffic(bond string, packets, size uint64) (carried uint64, err error) {
	err = h.update(func(st *state, now int64) (bool, error) {
		b := st.link(bond, now)
		if b == nil {
			return false, st.notFound(bond)
		}
		if b.Bond == nil {
			return false, fail(syscall.EINVAL, "%s is not a bond", bond)
		}
		var carriers []*netdev
		if b.AdminUp {
			for _, s := range b.Bond.Slaves {
				sl := st.link(s, now)
				if sl == nil || !st.operUp(sl, now) {
					continue
				}
				if b.Bond.Mode == "active-backup" && b.Bond.ActiveSlave != s {
					continue
				}
				carriers = append(carriers, sl)
			}
		}
		if len(carriers) == 0 || packets == 0 {
			return false, nil
		}
		n := uint64(len(carriers))
		for i, sl := range carriers {
			p := packets / n
			if uint64(i) < packets%n {
				p++
			}
			if sl.Stats == nil {
				sl.Stats = &netStats{}
			}
			sl.Stats.add(Counters{RxPackets: p, TxPackets: p, RxBytes: p * size, TxBytes: p * size})
		}
		carried = packets
		return true, nil
	})
	return carried, err
}

// vportStats tells whether nd's statistics are its VF's vport counters and
// its ethtool -S has both the software and the vport counters: an mlx5
// representor.
func (st *state) vportStats(nd *netdev) bool {
	if nd.Role != roleRep {
		return false
	}
	nic, _ := st.pfOf(nd)
	return nic.Driver == defaultDriver
}

// ingressInHW tells whether a rule of nd's ingress (its shared block's
// when it has one) is in some device's hardware: the eswitch then forwards
// the representor's traffic without the representor's rings.
func (st *state) ingressInHW(nd *netdev, now int64) bool {
	if nd.Ingress == nil {
		return false
	}
	fs, devs := nd.Ingress.Filters, []*netdev{nd}
	if b := nd.Ingress.Block; b != 0 {
		fs, devs = st.Blocks[b], st.bound(b, now)
	}
	for _, f := range fs {
		if st.filterView(f, devs).InHW {
			return true
		}
	}
	return false
}

// Stats implements eswitch.EthtoolStats ("ethtool -S $name"): an mlx5
// representor's software (rx_packets, ...) and vport (vport_rx_packets,
// ...) counters; any other device: EOPNOTSUPP.
func (h *Host) Stats(name string) (map[string]uint64, error) {
	var out map[string]uint64
	err := h.view(func(st *state, now int64) error {
		nd := st.link(name, now)
		switch {
		case nd == nil:
			return kernelErr("ethtool -S "+name, st.notFound(name))
		case !st.vportStats(nd):
			return kernelErr("ethtool -S "+name, fail(syscall.EOPNOTSUPP, "no driver statistics modelled"))
		}
		var sw, vp netStats
		if nd.SWStats != nil {
			sw = *nd.SWStats
		}
		if nd.Stats != nil {
			vp = *nd.Stats
		}
		out = map[string]uint64{
			"rx_packets": sw.RxPackets, "rx_bytes": sw.RxBytes, "tx_packets": sw.TxPackets, "tx_bytes": sw.TxBytes,
			"vport_rx_packets": vp.RxPackets, "vport_rx_bytes": vp.RxBytes, "vport_tx_packets": vp.TxPackets, "vport_tx_bytes": vp.TxBytes,
		}
		return nil
	})
	return out, err
}

// TrafficReps sends packets of size bytes each way between the VFs of reps
// and the uplink, spread evenly over reps. Each packet moves the VF's vport
// counters (an mlx5 representor's statistics); it crosses the
// representor's own rings (ethtool -S rx_packets/tx_packets) only when no
// rule of the representor's ingress is in hardware. A representor of
// another driver counts every packet in its statistics.
func (h *Host) TrafficReps(reps []string, packets, size uint64) error {
	return h.update(func(st *state, now int64) (bool, error) {
		if len(reps) == 0 || packets == 0 {
			return false, nil
		}
		n := uint64(len(reps))
		for i, name := range reps {
			nd := st.link(name, now)
			if nd == nil {
				return false, st.notFound(name)
			}
			p := packets / n
			if uint64(i) < packets%n {
				p++
			}
			c := Counters{RxPackets: p, TxPackets: p, RxBytes: p * size, TxBytes: p * size}
			if nd.Stats == nil {
				nd.Stats = &netStats{}
			}
			nd.Stats.add(c)
			if st.vportStats(nd) && !st.ingressInHW(nd, now) {
				if nd.SWStats == nil {
					nd.SWStats = &netStats{}
				}
				nd.SWStats.add(c)
			}
		}
		return true, nil
	})
}
