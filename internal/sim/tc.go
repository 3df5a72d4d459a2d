package sim

import (
	"fmt"
	"sort"
	"syscall"

	"github.com/vflag/vflag/eswitch"
)

// tc (KERNEL-FACTS §9, §10): a netdev's ingress qdisc, on a block of its
// own or on a shared block, and flower filters in either. Where a filter
// runs is decided when it is read, from the devices bound to its block
// now, as the kernel replays a block's rules to a device that binds to it
// (tcf_block_playback_offloads): a device takes a flower rule into its
// hardware when its driver offloads flower and its hw-tc-offload is on.

// ingressState is a netdev's ingress qdisc.
type ingressState struct {
	Block   uint32      `json:"block,omitempty"`   // shared block; 0: its own
	Filters []simFilter `json:"filters,omitempty"` // its own block's filters
}

// simFilter is a flower rule as added (flags skip_hw / skip_sw).
type simFilter struct {
	Prio   uint16 `json:"prio"`
	Handle uint32 `json:"handle"`
	SkipHW bool   `json:"skip_hw,omitempty"`
	SkipSW bool   `json:"skip_sw,omitempty"`
}

// offloadsFlower is the driver's capability: mlx5 uplink representors (a PF
// in switchdev) and VF representors take flower rules into the eswitch;
// a bond (no ndo_setup_tc), a legacy PF's NIC-mode rules (not modelled),
// VF netdevs, and any other driver (veth, igb's narrow subset, netdevsim
// of 6.1) do not.
func (st *state) offloadsFlower(nd *netdev) bool {
	if !nd.HWTC {
		return false
	}
	switch nd.Role {
	case roleRep:
	case rolePF:
		if _, pf := st.pfOf(nd); pf.Mode != eswitch.ModeSwitchdev {
			return false
		}
	default:
		return false
	}
	nic, _ := st.pfOf(nd)
	return nic.Driver == defaultDriver
}

// bound returns the netdevs visible at now whose ingress qdisc is on
// shared block b.
func (st *state) bound(b uint32, now int64) []*netdev {
	var out []*netdev
	for _, nd := range st.visibleNetdevs(now) {
		if nd.Ingress != nil && nd.Ingress.Block == b {
			out = append(out, nd)
		}
	}
	return out
}

// filterView is a filter as the kernel reports it, with its devices.
func (st *state) filterView(f simFilter, devs []*netdev) eswitch.TCFilter {
	out := eswitch.TCFilter{Kind: "flower", Prio: f.Prio, Handle: f.Handle, SkipHW: f.SkipHW, SkipSW: f.SkipSW}
	if !f.SkipHW {
		for _, nd := range devs {
			if st.offloadsFlower(nd) {
				out.InHWCount++
			}
		}
	}
	out.InHW, out.NotInHW = out.InHWCount > 0, out.InHWCount == 0
	return out
}

// Ingress implements eswitch.TC.
func (h *Host) Ingress(link string) (eswitch.Ingress, error) {
	var in eswitch.Ingress
	err := h.view(func(st *state, now int64) error {
		nd := st.link(link, now)
		if nd == nil {
			return kernelErr("tc qdisc show dev "+link, st.notFound(link))
		}
		if nd.Ingress != nil {
			in = eswitch.Ingress{Present: true, Block: nd.Ingress.Block}
		}
		return nil
	})
	return in, err
}

// SetIngressBlock implements eswitch.TC. Binding to a block no device
// holds any more starts it empty (the kernel freed it with its last qdisc).
// A device that takes no flower rule into hardware (a bond: no
// ndo_setup_tc; a device with hw-tc-offload off) cannot bind to a block
// that holds a rule in hardware: EOPNOTSUPP (net/sched/cls_api.c
// tcf_block_offload_bind, "Bind to offloaded block failed as dev has
// offload disabled"), after the old qdisc is gone (the del came first).
func (h *Host) SetIngressBlock(link string, block uint32) error {
	op := fmt.Sprintf("tc qdisc add dev %s ingress_block %d ingress", link, block)
	return h.update(func(st *state, now int64) (bool, error) {
		nd := st.link(link, now)
		if nd == nil {
			return false, kernelErr(op, st.notFound(link))
		}
		nd.Ingress = nil
		if block != 0 && len(st.bound(block, now)) == 0 {
			delete(st.Blocks, block)
		}
		if block != 0 && !st.offloadsFlower(nd) && st.blockInHW(block, now) {
			return true, kernelErr(op, fail(syscall.EOPNOTSUPP, "Bind to offloaded block failed as dev has offload disabled"))
		}
		nd.Ingress = &ingressState{Block: block}
		return true, nil
	})
}

// blockInHW: a rule of shared block b is in some bound device's hardware
// (the kernel's block->offloadcnt > 0).
func (st *state) blockInHW(b uint32, now int64) bool {
	for _, f := range st.blockFilters(b, now) {
		if f.InHW {
			return true
		}
	}
	return false
}

// DelIngress implements eswitch.TC.
func (h *Host) DelIngress(link string) error {
	return h.update(func(st *state, now int64) (bool, error) {
		nd := st.link(link, now)
		if nd == nil {
			return false, kernelErr("tc qdisc del dev "+link+" ingress", st.notFound(link))
		}
		if nd.Ingress == nil {
			return false, nil
		}
		b := nd.Ingress.Block
		nd.Ingress = nil
		if b != 0 && len(st.bound(b, now)) == 0 {
			delete(st.Blocks, b)
		}
		return true, nil
	})
}

// Filters implements eswitch.TC.
func (h *Host) Filters(link string) ([]eswitch.TCFilter, error) {
	var out []eswitch.TCFilter
	err := h.view(func(st *state, now int64) error {
		nd := st.link(link, now)
		switch {
		case nd == nil:
			return kernelErr("tc filter show dev "+link+" ingress", st.notFound(link))
		case nd.Ingress == nil:
			return nil
		case nd.Ingress.Block != 0:
			out = st.blockFilters(nd.Ingress.Block, now)
			return nil
		}
		for _, f := range nd.Ingress.Filters {
			out = append(out, st.filterView(f, []*netdev{nd}))
		}
		return nil
	})
	return out, err
}

// BlockFilters implements eswitch.TC; a block no device holds is ENOENT.
func (h *Host) BlockFilters(block uint32) ([]eswitch.TCFilter, error) {
	var out []eswitch.TCFilter
	err := h.view(func(st *state, now int64) error {
		if len(st.bound(block, now)) == 0 {
			return kernelErr(fmt.Sprintf("tc filter show block %d", block), fail(syscall.ENOENT, "Cannot find block"))
		}
		out = st.blockFilters(block, now)
		return nil
	})
	return out, err
}

func (st *state) blockFilters(b uint32, now int64) []eswitch.TCFilter {
	devs := st.bound(b, now)
	var out []eswitch.TCFilter
	for _, f := range st.Blocks[b] {
		out = append(out, st.filterView(f, devs))
	}
	return out
}

// AddFlower adds a flower rule to link's ingress (its shared block's when
// it has one), as ovs-vswitchd does for a datapath flow with hw-offload on
// ("tc filter add dev $link ingress prio $prio flower [skip_hw|skip_sw] ...").
// No ingress qdisc: EINVAL; skip_sw where no bound device takes the rule
// into hardware: EINVAL, as cls_flower refuses it.
func (h *Host) AddFlower(link string, prio uint16, skipHW, skipSW bool) error {
	op := fmt.Sprintf("tc filter add dev %s ingress prio %d flower", link, prio)
	return h.update(func(st *state, now int64) (bool, error) {
		nd := st.link(link, now)
		switch {
		case nd == nil:
			return false, kernelErr(op, st.notFound(link))
		case nd.Ingress == nil:
			return false, kernelErr(op, fail(syscall.EINVAL, "Parent Qdisc doesn't exists"))
		}
		devs := []*netdev{nd}
		list := &nd.Ingress.Filters
		if b := nd.Ingress.Block; b != 0 {
			devs = st.bound(b, now)
			if st.Blocks == nil {
				st.Blocks = map[uint32][]simFilter{}
			}
			l := st.Blocks[b]
			list = &l
			defer func() { st.Blocks[b] = l }()
		}
		f := simFilter{Prio: prio, Handle: uint32(len(*list) + 1), SkipHW: skipHW, SkipSW: skipSW}
		if skipSW && st.filterView(f, devs).InHWCount == 0 {
			return false, kernelErr(op+" skip_sw", fail(syscall.EINVAL, "no device of the block takes the rule into hardware (skip_sw)"))
		}
		*list = append(*list, f)
		sort.SliceStable(*list, func(i, j int) bool { return (*list)[i].Prio < (*list)[j].Prio })
		return true, nil
	})
}

// dumpTC prints the ingress qdiscs and their filters (Dump's "tc:"
// section, only when some netdev has an ingress qdisc).
func (st *state) dumpTC(w func(string, ...any), nds []*netdev, now int64) {
	head := false
	for _, nd := range nds {
		if nd.Ingress == nil {
			continue
		}
		if !head {
			w("tc:\n")
			head = true
		}
		fs := st.Blocks[nd.Ingress.Block]
		devs := st.bound(nd.Ingress.Block, now)
		if nd.Ingress.Block == 0 {
			fs, devs = nd.Ingress.Filters, []*netdev{nd}
		}
		w("  %s ingress block=%s filters=%d", nd.Name, st.blockName(nd.Ingress.Block, now), len(fs))
		for _, f := range fs {
			v := st.filterView(f, devs)
			w(" [prio %d in_hw_count %d]", v.Prio, v.InHWCount)
		}
		w("\n")
	}
}

// blockName shows a block by the netdev whose ifindex it is ("ifindex of
// bond0"), which stays the same when the bond is made again with another
// index; else by number.
func (st *state) blockName(b uint32, now int64) string {
	if b == 0 {
		return "own"
	}
	for _, nd := range st.visibleNetdevs(now) {
		if uint32(nd.Ifindex) == b {
			return "ifindex-of-" + nd.Name
		}
	}
	return fmt.Sprint(b)
}

// eswitchRules counts the flower rules in the hardware of pf's eswitch: on
// its uplink or one of its representors, through their own or a shared
// block (the users that keep a mode change out: checkModeChange).
func (st *state) eswitchRules(pf *pfState, now int64) int {
	n := 0
	for _, nd := range st.visibleNetdevs(now) {
		if nd.Ingress == nil || !st.offloadsFlower(nd) {
			continue
		}
		if _, owner := st.pfOf(nd); owner != pf {
			continue
		}
		fs := nd.Ingress.Filters
		if b := nd.Ingress.Block; b != 0 {
			fs = st.Blocks[b]
		}
		for _, f := range fs {
			if !f.SkipHW {
				n++
			}
		}
	}
	return n
}
