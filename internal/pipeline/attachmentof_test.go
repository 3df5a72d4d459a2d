package pipeline

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/libvirtx"
)

// TestAttachmentOf: a migratable attachment's pair takes its standby's
// bridge and VLAN from the group's mode: a switchdev group's ovs.bridge
// with the representor port's VLAN columns (the VF's <vlan> empty: the
// VLAN is the port's), a legacy group's standby_bridge with the VF's vlan,
// which the VF's <vlan> gets too (libvirt sets it through the PF); a plain
// attachment has neither.
func TestAttachmentOf(t *testing.T) {
	vfs := []config.VFConfig{{PF: 0, VF: 1, VLAN: 42, VLANMode: "native-untagged", Trunks: []int{42, 43}}}
	sw := &config.Group{Name: "lag0", Eswitch: "switchdev", OVS: config.OVSConfig{Bridge: "br-lag"}, VFs: vfs}
	leg := &config.Group{Name: "igb0", Eswitch: "legacy", StandbyBridge: "br-host", VFs: []config.VFConfig{{PF: 0, VF: 1, VLAN: 42}}}
	const pci, mac = "0000:61:00.3", "52:54:00:00:00:01"
	tests := []struct {
		name string
		g    *config.Group
		a    config.Attachment
		want libvirtx.Attachment
	}{
		{"switchdev pair", sw, config.Attachment{Domain: "vm1", VF: 1, MAC: mac, Migratable: true},
			libvirtx.Attachment{Domain: "vm1", PCI: pci, MAC: mac, Owner: "lag0", Migratable: true,
				Standby: libvirtx.Standby{Bridge: "br-lag", VLAN: 42, VLANMode: "native-untagged", Trunks: []int{42, 43}}}},
		{"legacy pair", leg, config.Attachment{Domain: "vm1", VF: 1, MAC: mac, Migratable: true},
			libvirtx.Attachment{Domain: "vm1", PCI: pci, MAC: mac, Owner: "igb0", Migratable: true,
				Standby: libvirtx.Standby{Bridge: "br-host", VLAN: 42}, VFVLAN: 42}},
		{"legacy pair without a VLAN", leg, config.Attachment{Domain: "vm1", VF: 0, MAC: mac, Migratable: true},
			libvirtx.Attachment{Domain: "vm1", PCI: pci, MAC: mac, Owner: "igb0", Migratable: true,
				Standby: libvirtx.Standby{Bridge: "br-host"}}},
		{"legacy plain", leg, config.Attachment{Domain: "vm1", VF: 1, MAC: mac, Live: true},
			libvirtx.Attachment{Domain: "vm1", PCI: pci, MAC: mac, Owner: "igb0", Live: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, AttachmentOf(tt.g, tt.a, pci)); diff != "" {
				t.Errorf("AttachmentOf (-want +got):\n%s", diff)
			}
		})
	}
}
