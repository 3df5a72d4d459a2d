package eswitch

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"
)

// dpReply builds an OVS_DP_CMD_GET reply as the kernel's
// ovs_dp_cmd_fill_info lays it out: genlmsghdr, ovs_header, NAME, STATS,
// MEGAFLOW_STATS, USER_FEATURES.
func dpReply(name string, stats []uint64, features uint32, withStats bool) []byte {
	b := []byte{ovsDPCmdGet, ovsDatapathVersion, 0, 0, 7, 0, 0, 0} // cmd, version, reserved; dp_ifindex 7
	b = append(b, nl.NewRtAttr(ovsDPAttrName, nl.ZeroTerminated(name)).Serialize()...)
	if withStats {
		v := make([]byte, 8*len(stats))
		for i, s := range stats {
			binary.NativeEndian.PutUint64(v[8*i:], s)
		}
		b = append(b, nl.NewRtAttr(ovsDPAttrStats, v).Serialize()...)
	}
	b = append(b, nl.NewRtAttr(4, make([]byte, 32)).Serialize()...) // OVS_DP_ATTR_MEGAFLOW_STATS
	f := make([]byte, 4)
	binary.NativeEndian.PutUint32(f, features)
	return append(b, nl.NewRtAttr(ovsDPAttrUserFeature, f).Serialize()...)
}

func TestParseDatapath(t *testing.T) {
	tests := []struct {
		name    string
		msg     []byte
		want    DatapathStats
		wantErr string
	}{
		{"per-cpu, all upcalls lost", dpReply("ovs-system", []uint64{0, 13, 13, 0}, 1<<0|1<<3, true),
			DatapathStats{Name: "ovs-system", Missed: 13, Lost: 13, PerCPUDispatch: true}, ""},
		{"per-vport, healthy", dpReply("ovs-system", []uint64{900, 10, 0, 4}, 1<<0|1<<1, true),
			DatapathStats{Name: "ovs-system", Hit: 900, Missed: 10, Flows: 4}, ""},
		{"no stats attribute", dpReply("ovs-system", nil, 0, false), DatapathStats{}, "without OVS_DP_ATTR_STATS"},
		{"short stats", dpReply("ovs-system", []uint64{1, 2}, 0, true), DatapathStats{}, "stats attribute of 16 bytes"},
		{"short reply", []byte{3, 2, 0}, DatapathStats{}, "short reply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDatapath("ovs-system", tt.msg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadDatapathNeedsReader(t *testing.T) {
	var k Kernel = kernelOnly{}
	if _, err := ReadDatapath(k, SystemDatapath); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("err = %v, want ErrNotSupported from a Kernel without Datapath", err)
	}
}

// kernelOnly is a Kernel that cannot read datapaths.
type kernelOnly struct{ Kernel }
