package eswitch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// SystemDatapath is the kernel datapath every ovs-vswitchd bridge of
// datapath_type "system" (the default) shares.
const SystemDatapath = "ovs-system"

// ErrNoDatapath is returned by ReadDatapath when the kernel has no such Open
// vSwitch datapath (openvswitch module not loaded, or no ovs-vswitchd has
// created it).
var ErrNoDatapath = errors.New("no such Open vSwitch kernel datapath")

// DatapathStats are a kernel datapath's lookup counters since it was
// created ("ovs-dpctl show -s": lookups hit/missed/lost, flows). Missed
// packets are the ones sent up to ovs-vswitchd (upcalls); lost ones are
// upcalls the kernel could not queue to any handler.
type DatapathStats struct {
	Name   string `json:"name"`
	Hit    uint64 `json:"hit"`
	Missed uint64 `json:"missed"`
	Lost   uint64 `json:"lost"`
	Flows  uint64 `json:"flows"`
	// PerCPUDispatch: upcalls go to one handler socket per CPU
	// (OVS_DP_F_DISPATCH_UPCALL_PER_CPU), Open vSwitch >= 2.16 on Linux >= 5.14.
	PerCPUDispatch bool `json:"per_cpu_dispatch"`
}

// Dispatch names the upcall dispatch mode: "per-cpu" or "per-vport".
func (d DatapathStats) Dispatch() string {
	if d.PerCPUDispatch {
		return "per-cpu"
	}
	return "per-vport"
}

// DatapathReader is what a Kernel may add to read Open vSwitch kernel
// datapaths. The real Netlink does; the simulated host has no datapath.
type DatapathReader interface {
	// Datapath reads one datapath ("ovs-dpctl show -s $name");
	// ErrNoDatapath when it does not exist.
	Datapath(name string) (DatapathStats, error)
}

// ReadDatapath reads datapath name through k, or returns ErrNotSupported
// when k cannot read datapaths.
func ReadDatapath(k Kernel, name string) (DatapathStats, error) {
	r, ok := k.(DatapathReader)
	if !ok {
		return DatapathStats{}, fmt.Errorf("read datapath %s: %w", name, ErrNotSupported)
	}
	return r.Datapath(name)
}

// Generic netlink family "ovs_datapath" (include/uapi/linux/openvswitch.h).
const (
	ovsDatapathFamily    = "ovs_datapath"
	ovsDatapathVersion   = 2
	ovsDPCmdGet          = 3
	ovsDPAttrName        = 1
	ovsDPAttrStats       = 3
	ovsDPAttrUserFeature = 5
	ovsDPFPerCPU         = 1 << 3 // OVS_DP_F_DISPATCH_UPCALL_PER_CPU
	ovsDPStatsLen        = 32     // struct ovs_dp_stats: n_hit, n_missed, n_lost, n_flows (u64 each)
)

// ovsHeader is struct ovs_header: the datapath's ifindex, 0 to look it up
// by OVS_DP_ATTR_NAME.
type ovsHeader struct{ dpIfindex int32 }

func (h ovsHeader) Len() int { return 4 }
func (h ovsHeader) Serialize() []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, uint32(h.dpIfindex))
	return b
}

var _ DatapathReader = Netlink{}

// Datapath implements DatapathReader ("ovs-dpctl show -s $name") with
// OVS_DP_CMD_GET on the ovs_datapath generic netlink family. The family is
// looked up through the Netlink's handle; the request itself, which the
// library has no handle method for, goes through a socket of its own, in the
// calling thread's network namespace.
func (n Netlink) Datapath(name string) (DatapathStats, error) {
	h, done, err := n.handle()
	if err != nil {
		return DatapathStats{}, fmt.Errorf("datapath %s: %w", name, err)
	}
	fam, err := h.GenlFamilyGet(ovsDatapathFamily)
	done()
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return DatapathStats{}, fmt.Errorf("datapath %s: generic netlink family %s absent (openvswitch module not loaded): %w", name, ovsDatapathFamily, ErrNoDatapath)
		}
		return DatapathStats{}, fmt.Errorf("datapath %s: generic netlink family %s: %w", name, ovsDatapathFamily, err)
	}
	req := nl.NewNetlinkRequest(int(fam.ID), unix.NLM_F_REQUEST)
	req.AddData(&nl.Genlmsg{Command: ovsDPCmdGet, Version: ovsDatapathVersion})
	req.AddData(ovsHeader{})
	req.AddData(nl.NewRtAttr(ovsDPAttrName, nl.ZeroTerminated(name)))
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		if errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENOENT) {
			return DatapathStats{}, fmt.Errorf("datapath %s: %w", name, ErrNoDatapath)
		}
		return DatapathStats{}, fmt.Errorf("datapath %s: OVS_DP_CMD_GET: %w", name, err)
	}
	if len(msgs) != 1 {
		return DatapathStats{}, fmt.Errorf("datapath %s: %d replies to OVS_DP_CMD_GET, want 1", name, len(msgs))
	}
	return parseDatapath(name, msgs[0])
}

// parseDatapath decodes one OVS_DP_CMD_GET reply: genlmsghdr, ovs_header,
// then attributes.
func parseDatapath(name string, msg []byte) (DatapathStats, error) {
	const hdr = nl.SizeofGenlmsg + 4
	if len(msg) < hdr {
		return DatapathStats{}, fmt.Errorf("datapath %s: short reply (%d bytes)", name, len(msg))
	}
	attrs, err := parseAttrs(msg[hdr:])
	if err != nil {
		return DatapathStats{}, fmt.Errorf("datapath %s: %w", name, err)
	}
	st := DatapathStats{Name: name}
	seen := false
	for _, a := range attrs {
		switch a.Attr.Type {
		case ovsDPAttrName:
			st.Name = cString(a.Value)
		case ovsDPAttrStats:
			if len(a.Value) < ovsDPStatsLen {
				return DatapathStats{}, fmt.Errorf("datapath %s: stats attribute of %d bytes, want %d", name, len(a.Value), ovsDPStatsLen)
			}
			st.Hit = binary.NativeEndian.Uint64(a.Value[0:])
			st.Missed = binary.NativeEndian.Uint64(a.Value[8:])
			st.Lost = binary.NativeEndian.Uint64(a.Value[16:])
			st.Flows = binary.NativeEndian.Uint64(a.Value[24:])
			seen = true
		case ovsDPAttrUserFeature:
			if len(a.Value) >= 4 {
				st.PerCPUDispatch = binary.NativeEndian.Uint32(a.Value)&ovsDPFPerCPU != 0
			}
		}
	}
	if !seen {
		return DatapathStats{}, fmt.Errorf("datapath %s: reply without OVS_DP_ATTR_STATS", name)
	}
	return st, nil
}
