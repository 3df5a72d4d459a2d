package sim

import (
	"strings"
	"syscall"
	"testing"

	"github.com/vflag/vflag/eswitch"
)

// TestTCInHW: where a flower rule runs follows the devices bound to its
// block and their driver's capability, as the kernel replays a shared
// block's rules to a device that binds.
func TestTCInHW(t *testing.T) {
	tests := []struct {
		name      string
		driver    string // "" mlx5_core
		bind      []string
		hwtcOff   string // this device's hw-tc-offload off
		skipHW    bool
		skipSW    bool
		addOn     string
		wantCount uint32
		wantErr   syscall.Errno
	}{
		{name: "both uplinks and the bond share the block", bind: []string{"bond0", "p0", "p1"}, addOn: "bond0", wantCount: 2},
		{name: "one PF left the block", bind: []string{"bond0", "p0"}, addOn: "bond0", wantCount: 1},
		{name: "only the bond", bind: []string{"bond0"}, addOn: "bond0", wantCount: 0},
		{name: "hw-tc-offload off on one PF", bind: []string{"bond0", "p0", "p1"}, hwtcOff: "p1", addOn: "bond0", wantCount: 1},
		{name: "skip_hw stays in software", bind: []string{"bond0", "p0", "p1"}, skipHW: true, addOn: "bond0", wantCount: 0},
		{name: "skip_sw with no hardware is refused", bind: []string{"bond0"}, skipSW: true, addOn: "bond0", wantErr: syscall.EINVAL},
		{name: "skip_sw in hardware", bind: []string{"bond0", "p0", "p1"}, skipSW: true, addOn: "bond0", wantCount: 2},
		{name: "a representor", bind: []string{"rep"}, addOn: "rep", wantCount: 1},
		{name: "another driver offloads no flower", driver: "igb", bind: []string{"bond0", "p0", "p1"}, addOn: "bond0", wantCount: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			spec.NICs[0].Driver = tt.driver
			x := newTH(t, spec)
			x.setupLAG(lagSetup{mode: "active-backup"})
			x.settle()
			rep := x.reps(pf0)[0]
			ifx, err := x.h.Link("bond0")
			x.ok(err)
			block := uint32(ifx.Index)
			name := func(n string) string {
				if n == "rep" {
					return rep
				}
				return n
			}
			if tt.hwtcOff != "" {
				x.ok(x.h.SetFeature(tt.hwtcOff, featureHWTC, false))
			}
			for _, n := range tt.bind {
				b := block
				if n == "rep" {
					b = 0
				}
				x.ok(x.h.SetIngressBlock(name(n), b))
			}
			err = x.h.AddFlower(name(tt.addOn), 1, tt.skipHW, tt.skipSW)
			if tt.wantErr != 0 {
				checkErrno(t, err, tt.wantErr, "")
				return
			}
			x.ok(err)
			fs, err := x.h.Filters(name(tt.addOn))
			x.ok(err)
			if len(fs) != 1 {
				t.Fatalf("filters of %s: %+v, want 1", tt.addOn, fs)
			}
			if f := fs[0]; f.InHWCount != tt.wantCount || f.InHW != (tt.wantCount > 0) || f.NotInHW == f.InHW {
				t.Errorf("filter %+v: want in_hw_count %d", f, tt.wantCount)
			}
		})
	}
}

// TestTCBlockLifetime: a shared block lives while a qdisc holds it; the
// last qdisc's deletion frees it with its rules; qdiscs show their block
// (7 is the ifindex of eth3 here, and the dump names it so).
func TestTCBlockLifetime(t *testing.T) {
	x := newTH(t, testSpec())
	x.setupLAG(lagSetup{mode: "active-backup"})
	x.settle()
	in, err := x.h.Ingress("p0")
	x.ok(err)
	if in.Present {
		t.Fatalf("p0 before any qdisc: %v", in)
	}
	x.ok(x.h.SetIngressBlock("p0", 7))
	x.ok(x.h.SetIngressBlock("p1", 7))
	x.ok(x.h.AddFlower("p0", 2, false, false))
	if in, _ := x.h.Ingress("p1"); in != (eswitch.Ingress{Present: true, Block: 7}) {
		t.Errorf("p1: %v, want ingress_block 7", in)
	}
	if !strings.Contains(x.h.Dump(), "p1 ingress block=ifindex-of-eth3 filters=1 [prio 2 in_hw_count 2]") {
		t.Errorf("dump lacks p1's block:\n%s", x.h.Dump())
	}
	x.ok(x.h.DelIngress("p0"))
	if fs, _ := x.h.BlockFilters(7); len(fs) != 1 || fs[0].InHWCount != 1 {
		t.Errorf("block 7 held by p1 only: %+v, want its rule in 1 device", fs)
	}
	x.ok(x.h.DelIngress("p1"))
	if _, err := x.h.BlockFilters(7); err == nil {
		t.Errorf("block 7 after its last qdisc went: no error")
	}
	x.ok(x.h.SetIngressBlock("p0", 7))
	if fs, _ := x.h.BlockFilters(7); len(fs) != 0 {
		t.Errorf("block 7 made again: %+v, want no rules", fs)
	}
	x.ok(x.h.DelIngress("p0")) // idempotent
	x.ok(x.h.DelIngress("p0"))
}

// TestTrafficRepsCounters: traffic through a representor moves its VF's
// vport counters (an mlx5 representor's statistics and ethtool -S
// vport_*) always, and its software rings (ethtool -S rx/tx_packets) only
// when no rule of its ingress is in hardware; another driver's
// representor counts every packet in its statistics and has no ethtool -S.
func TestTrafficRepsCounters(t *testing.T) {
	tests := []struct {
		name     string
		driver   string // "" mlx5_core
		rule     bool   // a flower rule on the representor's ingress
		skipHW   bool
		hwtcOff  bool
		wantSW   uint64 // ethtool -S rx_packets + tx_packets
		wantStat uint64 // /sys/class/net/<rep>/statistics rx_packets + tx_packets
		noStats  bool   // ethtool -S EOPNOTSUPP
	}{
		{name: "rule in hardware: the eswitch forwards", rule: true, wantSW: 0, wantStat: 2000},
		{name: "no rule: every packet through the rings", wantSW: 2000, wantStat: 2000},
		{name: "skip_hw rule: tc software", rule: true, skipHW: true, wantSW: 2000, wantStat: 2000},
		{name: "hw-tc-offload off", rule: true, hwtcOff: true, wantSW: 2000, wantStat: 2000},
		{name: "another driver: software only", driver: "igb", rule: true, wantStat: 2000, noStats: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			spec.NICs[0].Driver = tt.driver
			x := newTH(t, spec)
			x.setupLAG(lagSetup{mode: "active-backup"})
			x.settle()
			rep := x.reps(pf0)[0]
			if tt.hwtcOff {
				x.ok(x.h.SetFeature(rep, featureHWTC, false))
			}
			if tt.rule {
				x.ok(x.h.SetIngressBlock(rep, 0))
				x.ok(x.h.AddFlower(rep, 1, tt.skipHW, false))
			}
			x.ok(x.h.TrafficReps([]string{rep}, 1000, 100))
			stat := x.read("/sys/class/net/" + rep + "/statistics/rx_packets")
			if got := stat + "+" + x.read("/sys/class/net/"+rep+"/statistics/tx_packets"); got != "1000\n+1000\n" {
				t.Errorf("statistics rx+tx %q, want 1000+1000 (%d)", got, tt.wantStat)
			}
			st, err := x.h.Stats(rep)
			if tt.noStats {
				checkErrno(t, err, syscall.EOPNOTSUPP, "")
				return
			}
			x.ok(err)
			if sw := st["rx_packets"] + st["tx_packets"]; sw != tt.wantSW {
				t.Errorf("ethtool -S rx/tx_packets %d, want %d (%v)", sw, tt.wantSW, st)
			}
			if vp := st["vport_rx_packets"] + st["vport_tx_packets"]; vp != 2000 {
				t.Errorf("ethtool -S vport_rx/tx_packets %d, want 2000 (%v)", vp, st)
			}
		})
	}
}
