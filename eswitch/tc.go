package eswitch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Ingress is a link's ingress qdisc ("tc qdisc show dev $name ingress").
type Ingress struct {
	Present bool `json:"present"`
	// Block is the shared block the qdisc's filters live in
	// (TCA_INGRESS_BLOCK, "ingress_block N"); 0: a block of its own.
	Block uint32 `json:"block,omitempty"`
}

func (i Ingress) String() string {
	switch {
	case !i.Present:
		return "no ingress qdisc"
	case i.Block == 0:
		return "ingress qdisc without a shared block"
	}
	return fmt.Sprintf("ingress_block %d", i.Block)
}

// TCFilter is one classifier of an ingress hook or shared block, with where
// it runs ("tc -s -j filter show dev $name ingress": "in_hw",
// "not_in_hw", "in_hw_count", "skip_hw", "skip_sw").
type TCFilter struct {
	Kind    string `json:"kind"` // "flower", "matchall", ...
	Chain   uint32 `json:"chain"`
	Prio    uint16 `json:"prio"`
	Handle  uint32 `json:"handle"`
	SkipHW  bool   `json:"skip_hw,omitempty"`
	SkipSW  bool   `json:"skip_sw,omitempty"`
	InHW    bool   `json:"in_hw"`
	NotInHW bool   `json:"not_in_hw,omitempty"`
	// InHWCount is how many devices hold the rule (TCA_FLOWER_IN_HW_COUNT):
	// 2 for a rule of a VF-LAG's shared block in both ports' hardware.
	InHWCount uint32 `json:"in_hw_count"`
}

// TC is what a Kernel may add to read and bind tc ingress qdiscs and read
// their filters. The real Netlink and the simulated host do.
type TC interface {
	// Ingress reads a link's ingress qdisc ("tc qdisc show dev $name ingress").
	Ingress(link string) (Ingress, error)
	// SetIngressBlock gives a link an ingress qdisc on shared block block,
	// deleting an ingress qdisc it has first, as ovs-vswitchd binds a bond
	// member (lib/netdev-linux.c netdev_linux_update_lag)
	// ("tc qdisc del dev $name ingress; tc qdisc add dev $name ingress_block $block ingress").
	// block 0 makes a plain ingress qdisc ("tc qdisc add dev $name ingress").
	SetIngressBlock(link string, block uint32) error
	// DelIngress deletes a link's ingress qdisc, with its filters; none is
	// success ("tc qdisc del dev $name ingress").
	DelIngress(link string) error
	// Filters lists the filters of a link's ingress hook, its shared
	// block's where it has one ("tc -s filter show dev $name ingress").
	Filters(link string) ([]TCFilter, error)
	// BlockFilters lists the filters of a shared block ("tc -s filter show block $block").
	BlockFilters(block uint32) ([]TCFilter, error)
}

// AsTC returns k's TC, or an error wrapping ErrNotSupported.
func AsTC(k Kernel) (TC, error) {
	t, ok := k.(TC)
	if !ok {
		return nil, fmt.Errorf("tc: %w", ErrNotSupported)
	}
	return t, nil
}

var _ TC = Netlink{}

// tcIfindexMagicBlock in tcm_ifindex asks for a shared block, whose index
// is then tcm_parent (TCM_IFINDEX_MAGIC_BLOCK, include/uapi/linux/rtnetlink.h).
const tcIfindexMagicBlock int32 = -1 // 0xFFFFFFFF

// TCA_FLOWER_FLAGS bits (include/uapi/linux/pkt_cls.h).
const (
	tcaClsFlagsSkipHW  = 1 << 0
	tcaClsFlagsSkipSW  = 1 << 1
	tcaClsFlagsInHW    = 1 << 2
	tcaClsFlagsNotInHW = 1 << 3
)

// Ingress implements TC.
func (n Netlink) Ingress(link string) (Ingress, error) {
	h, done, err := n.handle()
	if err != nil {
		return Ingress{}, err
	}
	defer done()
	l, err := linkByName(h, link)
	if err != nil {
		return Ingress{}, err
	}
	return ingressOf(h, l)
}

func ingressOf(h *netlink.Handle, l netlink.Link) (Ingress, error) {
	qs, err := retryDump("tc qdisc show dev "+l.Attrs().Name, func() ([]netlink.Qdisc, error) { return h.QdiscList(l) })
	if err != nil {
		return Ingress{}, err
	}
	for _, q := range qs {
		a := q.Attrs()
		if a.Parent != netlink.HANDLE_INGRESS || a.LinkIndex != l.Attrs().Index {
			continue
		}
		in := Ingress{Present: true}
		if a.IngressBlock != nil {
			in.Block = *a.IngressBlock
		}
		return in, nil
	}
	return Ingress{}, nil
}

func ingressQdisc(l netlink.Link, block uint32) *netlink.Ingress {
	q := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_INGRESS, Handle: netlink.MakeHandle(0xffff, 0),
	}}
	if block != 0 {
		q.IngressBlock = &block
	}
	return q
}

// SetIngressBlock implements TC.
func (n Netlink) SetIngressBlock(link string, block uint32) error {
	h, done, err := n.handle()
	if err != nil {
		return err
	}
	defer done()
	l, err := linkByName(h, link)
	if err != nil {
		return err
	}
	// ovs-vswitchd makes the same two calls for the bond and its members
	// (netdev_tc_init_flow_api, netdev_linux_update_lag) while it applies
	// a bridge, maybe between ours: an add that finds an ingress qdisc
	// already there (EEXIST) is done when that qdisc is on the block, and
	// tried again otherwise.
	for range 10 {
		if err := h.QdiscDel(ingressQdisc(l, 0)); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("tc qdisc del dev %s ingress: %w", link, err)
		}
		err = h.QdiscAdd(ingressQdisc(l, block))
		if !errors.Is(err, syscall.EEXIST) {
			break
		}
		if in, rerr := ingressOf(h, l); rerr == nil && in.Present && in.Block == block {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("tc qdisc add dev %s ingress_block %d ingress: %w", link, block, err)
	}
	return nil
}

// DelIngress implements TC. The kernel answers EINVAL ("Cannot find
// specified qdisc on specified device") or ENOENT when there is none.
func (n Netlink) DelIngress(link string) error {
	h, done, err := n.handle()
	if err != nil {
		return err
	}
	defer done()
	l, err := linkByName(h, link)
	if err != nil {
		return err
	}
	if err := h.QdiscDel(ingressQdisc(l, 0)); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("tc qdisc del dev %s ingress: %w", link, err)
	}
	return nil
}

// Filters implements TC: a link on a shared block lists the block's.
func (n Netlink) Filters(link string) ([]TCFilter, error) {
	h, done, err := n.handle()
	if err != nil {
		return nil, err
	}
	l, err := linkByName(h, link)
	if err != nil {
		done()
		return nil, err
	}
	in, err := ingressOf(h, l)
	done()
	switch {
	case err != nil:
		return nil, err
	case !in.Present:
		return nil, nil
	case in.Block != 0:
		return n.BlockFilters(in.Block)
	}
	return dumpFilters("tc filter show dev "+link+" ingress", int32(l.Attrs().Index), netlink.HANDLE_INGRESS)
}

// BlockFilters implements TC.
func (n Netlink) BlockFilters(block uint32) ([]TCFilter, error) {
	return dumpFilters(fmt.Sprintf("tc filter show block %d", block), tcIfindexMagicBlock, block)
}

// dumpFilters asks RTM_GETTFILTER for every filter of (ifindex, parent)
// through a socket of its own in the calling thread's namespace (the
// library's FilterList neither reads shared blocks nor the in_hw flags).
func dumpFilters(op string, ifindex int32, parent uint32) ([]TCFilter, error) {
	return retryDump(op, func() ([]TCFilter, error) {
		req := nl.NewNetlinkRequest(unix.RTM_GETTFILTER, unix.NLM_F_DUMP)
		req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: ifindex, Parent: parent})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWTFILTER)
		if err != nil {
			return nil, err
		}
		var out []TCFilter
		for _, m := range msgs {
			f, ok, err := parseFilter(m)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, f)
			}
		}
		return out, nil
	})
}

// parseFilter decodes one RTM_NEWTFILTER message (struct tcmsg, then
// attributes). A message without TCA_OPTIONS is a chain's or prio's
// header, not a filter: ok is false.
func parseFilter(msg []byte) (TCFilter, bool, error) {
	if len(msg) < nl.SizeofTcMsg {
		return TCFilter{}, false, fmt.Errorf("short RTM_NEWTFILTER message (%d bytes)", len(msg))
	}
	tcm := nl.DeserializeTcMsg(msg)
	attrs, err := parseAttrs(msg[nl.SizeofTcMsg:])
	if err != nil {
		return TCFilter{}, false, fmt.Errorf("RTM_NEWTFILTER attributes: %w", err)
	}
	f := TCFilter{Prio: uint16(tcm.Info >> 16), Handle: tcm.Handle}
	var opts []byte
	for _, a := range attrs {
		switch a.Attr.Type & nl.NLA_TYPE_MASK {
		case nl.TCA_KIND:
			f.Kind = cString(a.Value)
		case nl.TCA_CHAIN:
			if len(a.Value) >= 4 {
				f.Chain = binary.NativeEndian.Uint32(a.Value)
			}
		case nl.TCA_OPTIONS:
			opts = a.Value
		}
	}
	if opts == nil {
		return TCFilter{}, false, nil
	}
	if f.Kind != "flower" {
		return f, true, nil
	}
	fa, err := parseAttrs(opts)
	if err != nil {
		return TCFilter{}, false, fmt.Errorf("flower options: %w", err)
	}
	for _, a := range fa {
		switch a.Attr.Type & nl.NLA_TYPE_MASK {
		case nl.TCA_FLOWER_FLAGS:
			if len(a.Value) >= 4 {
				fl := binary.NativeEndian.Uint32(a.Value)
				f.SkipHW, f.SkipSW = fl&tcaClsFlagsSkipHW != 0, fl&tcaClsFlagsSkipSW != 0
				f.InHW, f.NotInHW = fl&tcaClsFlagsInHW != 0, fl&tcaClsFlagsNotInHW != 0
			}
		case nl.TCA_FLOWER_IN_HW_COUNT:
			if len(a.Value) >= 4 {
				f.InHWCount = binary.NativeEndian.Uint32(a.Value)
			}
		}
	}
	return f, true, nil
}

// BindBondToBlock puts a bond on its shared block when members already on
// the block hold its rules in hardware:
//
//	tc qdisc add dev $bond ingress_block $block ingress
//	# EOPNOTSUPP: then, for each member on the block:
//	tc qdisc del dev $pf ingress
//	tc qdisc add dev $bond ingress_block $block ingress
//	tc qdisc add dev $pf ingress_block $block ingress
//
// A bond takes no tc rule into hardware (no ndo_setup_tc), and the kernel
// binds no such device to a block that holds a rule in some device's
// hardware (net/sched/cls_api.c tcf_block_offload_bind: EOPNOTSUPP). That is
// the state an ovs-vswitchd restart can leave: the PFs on the bond's block,
// the bond off it. ovs-vswitchd binds the bond before its members for that
// reason. The members leave, which frees the block with its rules (no
// device holds it); the bond binds a new one of the same index; the
// members bind again. ovs-vswitchd puts the rules back as packets miss
// (they name the block, not a device: tc_make_tcf_id), so until then the
// uplink's flows take the slow path once each. left names the members that
// left and came back. Without members on the block the first error is
// returned as it is.
func BindBondToBlock(t TC, bond string, members []string, block uint32) (left []string, err error) {
	first := t.SetIngressBlock(bond, block)
	if first == nil || !errors.Is(first, syscall.EOPNOTSUPP) {
		return nil, first
	}
	for _, m := range members {
		in, err := t.Ingress(m)
		if err != nil {
			return left, errors.Join(first, rebind(t, left, block), err)
		}
		if !in.Present || in.Block != block {
			continue
		}
		if err := t.DelIngress(m); err != nil {
			return left, errors.Join(first, rebind(t, left, block), err)
		}
		left = append(left, m)
	}
	if len(left) == 0 {
		return nil, first
	}
	err = t.SetIngressBlock(bond, block)
	return left, errors.Join(err, rebind(t, left, block))
}

// rebind puts members back on block, trying each.
func rebind(t TC, members []string, block uint32) error {
	var errs []error
	for _, m := range members {
		if err := t.SetIngressBlock(m, block); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
