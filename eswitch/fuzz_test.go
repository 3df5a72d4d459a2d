package eswitch

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/vishvananda/netlink/nl"
)

// FuzzValidIfName: an accepted interface name is what the kernel takes
// (dev_valid_name: 1-15 bytes, no '/', ':' or white space, not "." or
// "..") and one path element under /sys/class/net.
func FuzzValidIfName(f *testing.F) {
	for _, s := range []string{"ens1f0np0", "bond0", "eth0.100", "abcdefghijklmno", "abcdefghijklmnop", ".", "..", "...", "a/b", "eth0:1", "p0\n", " p0", "é", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidIfName(name)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(name)) {
				t.Fatalf("ValidIfName(%q): the error does not quote the name: %v", name, err)
			}
			return
		}
		if len(name) < 1 || len(name) > 15 || name == "." || name == ".." || strings.ContainsAny(name, "/:\x00") {
			t.Fatalf("ValidIfName(%q) accepted a name the kernel refuses", name)
		}
		for _, r := range name {
			if unicode.IsSpace(r) || r > unicode.MaxASCII || !unicode.IsPrint(r) {
				t.Fatalf("ValidIfName(%q) accepted the character %q", name, r)
			}
		}
		if p := netFile(name, ""); path.Dir(p) != "/sys/class/net" || path.Base(p) != name {
			t.Fatalf("ValidIfName(%q) accepted a name that is not one path element: %s", name, p)
		}
	})
}

// FuzzParseRepName: ParseRepName takes a representor's phys_port_name,
// "[c<n>]pf<p>vf<v>", exactly when its numbers fit devlink's u16, and gives
// those numbers back.
func FuzzParseRepName(f *testing.F) {
	for _, s := range []string{"pf0vf0", "pf1vf63", "c1pf0vf3", "p0", "pf0", "pf0vf", "pf0vf65535", "pf0vf65536", "pf0vf99999999999999999999", "pf007vf0010", "pf0vf1 ", "pf٣vf1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ppn string) {
		pf, vf, ok := ParseRepName(ppn)
		m := repNameRE().FindStringSubmatch(ppn)
		if m == nil {
			if ok {
				t.Fatalf("ParseRepName(%q) = %d, %d: not a representor name", ppn, pf, vf)
			}
			return
		}
		fits := func(digits string) (uint16, bool) {
			digits = strings.TrimLeft(digits, "0")
			if digits == "" {
				return 0, true
			}
			n, err := strconv.ParseUint(digits, 10, 64)
			return uint16(n), err == nil && len(digits) <= 5 && n <= 65535
		}
		wantPF, okPF := fits(m[1])
		wantVF, okVF := fits(m[2])
		if ok != (okPF && okVF) || ok && (pf != wantPF || vf != wantVF) {
			t.Fatalf("ParseRepName(%q) = %d, %d, %v", ppn, pf, vf, ok)
		}
		if ok {
			if p, v, ok := ParseRepName(fmt.Sprintf("pf%dvf%d", pf, vf)); !ok || p != pf || v != vf {
				t.Fatalf("ParseRepName(pf%dvf%d) = %d, %d, %v", pf, vf, p, v, ok)
			}
		}
	})
}

// rateMsg encodes r as the kernel's DEVLINK_CMD_RATE_GET reply would.
func rateMsg(r Rate) []byte {
	b := (&nl.Genlmsg{Command: devlinkCmdRateGet, Version: nl.GENL_DEVLINK_VERSION}).Serialize()
	add := func(typ int, v []byte) { b = append(b, nl.NewRtAttr(typ, v).Serialize()...) }
	add(devlinkAttrBusName, nl.ZeroTerminated(r.Devlink.Bus))
	add(devlinkAttrDevName, nl.ZeroTerminated(r.Devlink.Device))
	switch {
	case r.Type == RateLeaf:
		add(devlinkAttrRateType, nl.Uint16Attr(devlinkRateTypeLeaf))
	case r.Type == RateNode:
		add(devlinkAttrRateType, nl.Uint16Attr(devlinkRateTypeNode))
	case strings.HasPrefix(r.Type, "type"):
		n, _ := strconv.ParseUint(strings.TrimPrefix(r.Type, "type"), 10, 16)
		add(devlinkAttrRateType, nl.Uint16Attr(uint16(n)))
	}
	add(devlinkAttrPortIndex, nl.Uint32Attr(r.PortIndex))
	add(devlinkAttrRateTxShare, nl.Uint64Attr(r.TxShare))
	add(devlinkAttrRateTxMax, nl.Uint64Attr(r.TxMax))
	add(devlinkAttrRateNodeName, nl.ZeroTerminated(r.Name))
	add(devlinkAttrRateParentNodeName, nl.ZeroTerminated(r.Parent))
	return b
}

// FuzzParseRate: whatever the bytes, parseRate does not panic; what it
// reads, encoded again as the kernel does, reads the same.
func FuzzParseRate(f *testing.F) {
	f.Add(rateMsg(Rate{Devlink: Devlink{"pci", "0000:61:00.0"}, Type: RateLeaf, PortIndex: 2, TxShare: 1250000, TxMax: 12500000, Parent: "tenant1"}))
	f.Add(rateMsg(Rate{Devlink: Devlink{"netdevsim", "netdevsim10"}, Type: RateNode, Name: "tenant1", TxMax: 125000000}))
	f.Add(rateMsg(Rate{Type: "type7"}))
	f.Add([]byte{1})
	f.Add(append((&nl.Genlmsg{Command: devlinkCmdRateGet}).Serialize(), 5, 0, 1, 0, 'x', 0, 0, 0)) // a name without its NUL
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := parseRate(msg)
		if err != nil {
			return
		}
		back, err := parseRate(rateMsg(r))
		if err != nil || back != r {
			t.Fatalf("parseRate(%x) = %+v; encoded again it reads %+v, %v", msg, r, back, err)
		}
	})
}

// filterMsgOf encodes tf as the kernel's RTM_NEWTFILTER of a dump would.
func filterMsgOf(tf TCFilter) []byte {
	tcm := nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: tcIfindexMagicBlock, Handle: tf.Handle, Parent: 12, Info: uint32(tf.Prio)<<16 | 0x0008}
	b := append([]byte{}, tcm.Serialize()...)
	b = append(b, nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated(tf.Kind)).Serialize()...)
	b = append(b, nl.NewRtAttr(nl.TCA_CHAIN, nl.Uint32Attr(tf.Chain)).Serialize()...)
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, nil)
	if tf.Kind == "flower" {
		var fl uint32
		for bit, on := range map[uint32]bool{tcaClsFlagsSkipHW: tf.SkipHW, tcaClsFlagsSkipSW: tf.SkipSW, tcaClsFlagsInHW: tf.InHW, tcaClsFlagsNotInHW: tf.NotInHW} {
			if on {
				fl |= bit
			}
		}
		opts.AddRtAttr(nl.TCA_FLOWER_FLAGS, nl.Uint32Attr(fl))
		opts.AddRtAttr(nl.TCA_FLOWER_IN_HW_COUNT, nl.Uint32Attr(tf.InHWCount))
	}
	return append(b, opts.Serialize()...)
}

// FuzzParseFilter: whatever the bytes, parseFilter does not panic; a
// filter it reads, encoded again as the kernel does, reads the same.
func FuzzParseFilter(f *testing.F) {
	f.Add(filterMsg("flower", 2, 1, tcaClsFlagsInHW, 2, true))
	f.Add(filterMsg("flower", 3, 7, tcaClsFlagsSkipSW|tcaClsFlagsInHW, 1, true))
	f.Add(filterMsg("flower", 2, 0, 0, 0, false))
	f.Add(filterMsg("matchall", 1, 1, 0, 0, true))
	f.Add(filterMsgOf(TCFilter{Kind: "flower", Chain: 3, Prio: 9, Handle: 0x800, SkipHW: true, NotInHW: true}))
	f.Add([]byte{1, 2, 3})
	noNUL := append(append([]byte{}, (&nl.TcMsg{Info: 2 << 16}).Serialize()...), nl.NewRtAttr(nl.TCA_KIND, []byte("flower")).Serialize()...)
	f.Add(append(noNUL, nl.NewRtAttr(nl.TCA_OPTIONS, nil).Serialize()...)) // a kind without its NUL
	f.Fuzz(func(t *testing.T, msg []byte) {
		tf, ok, err := parseFilter(msg)
		if err != nil || !ok {
			return
		}
		back, ok, err := parseFilter(filterMsgOf(tf))
		if err != nil || !ok || back != tf {
			t.Fatalf("parseFilter(%x) = %+v; encoded again it reads %+v, %v, %v", msg, tf, back, ok, err)
		}
	})
}

// datapathMsg encodes st as the kernel's OVS_DP_CMD_GET reply would.
func datapathMsg(st DatapathStats) []byte {
	var features uint32 = 1 << 0 // OVS_DP_F_UNALIGNED
	if st.PerCPUDispatch {
		features |= ovsDPFPerCPU
	}
	return dpReply(st.Name, []uint64{st.Hit, st.Missed, st.Lost, st.Flows}, features, true)
}

// FuzzParseDatapath: whatever the bytes, parseDatapath does not panic;
// what it reads, encoded again as the kernel does, reads the same.
func FuzzParseDatapath(f *testing.F) {
	f.Add(dpReply("ovs-system", []uint64{0, 13, 13, 0}, 1<<0|1<<3, true))
	f.Add(dpReply("ovs-system", []uint64{900, 10, 0, 4}, 1<<0|1<<1, true))
	f.Add(dpReply("ovs-system", nil, 0, false))
	f.Add(dpReply("ovs-system", []uint64{1, 2}, 0, true))
	f.Add([]byte{3, 2, 0})
	noNUL := append([]byte{ovsDPCmdGet, ovsDatapathVersion, 0, 0, 7, 0, 0, 0}, nl.NewRtAttr(ovsDPAttrName, []byte("ovs")).Serialize()...)
	f.Add(append(noNUL, nl.NewRtAttr(ovsDPAttrStats, make([]byte, 32)).Serialize()...)) // a name without its NUL
	f.Fuzz(func(t *testing.T, msg []byte) {
		st, err := parseDatapath("ovs-system", msg)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "datapath ovs-system: ") {
				t.Fatalf("parseDatapath(%x): the error does not name the datapath: %v", msg, err)
			}
			return
		}
		back, err := parseDatapath("ovs-system", datapathMsg(st))
		if err != nil || back != st {
			t.Fatalf("parseDatapath(%x) = %+v; encoded again it reads %+v, %v", msg, st, back, err)
		}
	})
}
