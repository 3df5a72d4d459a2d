package pipeline

import (
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// BridgeRef is a bridge holding vflag's ports, as the journal records it.
type BridgeRef struct {
	Endpoint string // OVSDB
	Owner    string // the group
	Bridge   string
}

// JournalDevices are the SR-IOV devices whose VFs the journal says vflag
// created (the hook treats their VFs as vflag's without a config).
func JournalDevices(j *teardown.Journal) []sriov.Device {
	var out []sriov.Device
	for _, en := range j.Entries() {
		if en.Kind != KindNumVFs {
			continue
		}
		if r, err := decode[numVFsRecord](en.Record); err == nil && validDevice(r.PF) == nil {
			out = append(out, r.PF)
		}
	}
	return out
}

// JournalBridges are the bridges the journal says hold vflag's ports.
func JournalBridges(j *teardown.Journal) []BridgeRef {
	var out []BridgeRef
	for _, en := range j.Entries() {
		if en.Kind != KindOVSBridge {
			continue
		}
		if r, err := decode[ovsRecord](en.Record); err == nil {
			out = append(out, BridgeRef{Endpoint: r.Endpoint, Owner: r.Bridge.Owner, Bridge: r.Bridge.Bridge})
		}
	}
	return out
}
