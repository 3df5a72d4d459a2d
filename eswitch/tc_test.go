package eswitch

import (
	"testing"

	"github.com/vishvananda/netlink/nl"
)

// filterMsg builds an RTM_NEWTFILTER message as the kernel sends it in a
// dump (tcf_fill_node): struct tcmsg, TCA_KIND, TCA_CHAIN, and for a
// filter (not a chain or prio header) TCA_OPTIONS with the flower
// attributes fl_dump puts: TCA_FLOWER_FLAGS and TCA_FLOWER_IN_HW_COUNT.
func filterMsg(kind string, prio uint16, handle uint32, flags, inHWCount uint32, withOptions bool) []byte {
	tcm := nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: tcIfindexMagicBlock, Handle: handle, Parent: 12, Info: uint32(prio)<<16 | 0x0008}
	b := append([]byte{}, tcm.Serialize()...)
	b = append(b, nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated(kind)).Serialize()...)
	b = append(b, nl.NewRtAttr(nl.TCA_CHAIN, nl.Uint32Attr(0)).Serialize()...)
	if withOptions {
		// fl_dump: nla_nest_start_noflag(skb, TCA_OPTIONS), no NLA_F_NESTED.
		opts := nl.NewRtAttr(nl.TCA_OPTIONS, nil)
		opts.AddRtAttr(nl.TCA_FLOWER_FLAGS, nl.Uint32Attr(flags))
		opts.AddRtAttr(nl.TCA_FLOWER_IN_HW_COUNT, nl.Uint32Attr(inHWCount))
		b = append(b, opts.Serialize()...)
	}
	return b
}

// TestParseFilter reads the flags tc prints as skip_hw/skip_sw/in_hw/
// not_in_hw and in_hw_count ("tc -s -j filter show block 12").
func TestParseFilter(t *testing.T) {
	tests := []struct {
		name string
		msg  []byte
		ok   bool
		want TCFilter
	}{
		{name: "in both PFs' hardware (VF-LAG shared block)", msg: filterMsg("flower", 2, 1, tcaClsFlagsInHW, 2, true), ok: true,
			want: TCFilter{Kind: "flower", Prio: 2, Handle: 1, InHW: true, InHWCount: 2}},
		{name: "skip_sw in one device", msg: filterMsg("flower", 3, 7, tcaClsFlagsSkipSW|tcaClsFlagsInHW, 1, true), ok: true,
			want: TCFilter{Kind: "flower", Prio: 3, Handle: 7, SkipSW: true, InHW: true, InHWCount: 1}},
		{name: "software only (netdevsim of 6.1)", msg: filterMsg("flower", 2, 1, tcaClsFlagsNotInHW, 0, true), ok: true,
			want: TCFilter{Kind: "flower", Prio: 2, Handle: 1, NotInHW: true}},
		{name: "skip_hw", msg: filterMsg("flower", 2, 1, tcaClsFlagsSkipHW|tcaClsFlagsNotInHW, 0, true), ok: true,
			want: TCFilter{Kind: "flower", Prio: 2, Handle: 1, SkipHW: true, NotInHW: true}},
		{name: "a prio's header is no filter", msg: filterMsg("flower", 2, 0, 0, 0, false), ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := parseFilter(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok || ok && got != tt.want {
				t.Errorf("parseFilter = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	if _, _, err := parseFilter([]byte{1, 2, 3}); err == nil {
		t.Error("a short message: no error")
	}
}
