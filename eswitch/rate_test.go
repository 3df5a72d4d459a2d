package eswitch

import (
	"testing"

	"github.com/vishvananda/netlink/nl"
)

// TestParseRate decodes DEVLINK_CMD_RATE_GET replies as the 6.1 kernel
// builds them (devlink_nl_rate_fill: bus, dev, type, port index or node
// name, u64 rates with a pad attribute before them, parent name).
func TestParseRate(t *testing.T) {
	msg := func(attrs ...*nl.RtAttr) []byte {
		b := (&nl.Genlmsg{Command: devlinkCmdRateGet, Version: nl.GENL_DEVLINK_VERSION}).Serialize()
		for _, a := range attrs {
			b = append(b, a.Serialize()...)
		}
		return b
	}
	pad := nl.NewRtAttr(61, nil) // DEVLINK_ATTR_PAD
	tests := []struct {
		name string
		msg  []byte
		want Rate
	}{
		{"leaf under a node", msg(
			nl.NewRtAttr(devlinkAttrBusName, nl.ZeroTerminated("pci")),
			nl.NewRtAttr(devlinkAttrDevName, nl.ZeroTerminated("0000:61:00.0")),
			nl.NewRtAttr(devlinkAttrPortIndex, nl.Uint32Attr(2)),
			nl.NewRtAttr(devlinkAttrRateType, nl.Uint16Attr(devlinkRateTypeLeaf)),
			pad, nl.NewRtAttr(devlinkAttrRateTxShare, nl.Uint64Attr(10*BytesPerMbit)),
			pad, nl.NewRtAttr(devlinkAttrRateTxMax, nl.Uint64Attr(100*BytesPerMbit)),
			nl.NewRtAttr(devlinkAttrRateParentNodeName, nl.ZeroTerminated("tenant1")),
		), Rate{Devlink: Devlink{"pci", "0000:61:00.0"}, Type: RateLeaf, PortIndex: 2, TxShare: 1250000, TxMax: 12500000, Parent: "tenant1"}},
		{"node", msg(
			nl.NewRtAttr(devlinkAttrBusName, nl.ZeroTerminated("netdevsim")),
			nl.NewRtAttr(devlinkAttrDevName, nl.ZeroTerminated("netdevsim10")),
			nl.NewRtAttr(devlinkAttrRateType, nl.Uint16Attr(devlinkRateTypeNode)),
			nl.NewRtAttr(devlinkAttrRateNodeName, nl.ZeroTerminated("tenant1")),
			pad, nl.NewRtAttr(devlinkAttrRateTxShare, nl.Uint64Attr(0)),
			pad, nl.NewRtAttr(devlinkAttrRateTxMax, nl.Uint64Attr(1000*BytesPerMbit)),
		), Rate{Devlink: Devlink{"netdevsim", "netdevsim10"}, Type: RateNode, Name: "tenant1", TxMax: 125000000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRate(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := parseRate([]byte{1}); err == nil {
		t.Error("a short message parsed")
	}
	if got := (Rate{Devlink: Devlink{"pci", "0000:61:00.0"}, Type: RateLeaf, PortIndex: 1}).String(); got != "pci/0000:61:00.0/1" {
		t.Errorf("leaf name %s", got)
	}
}
