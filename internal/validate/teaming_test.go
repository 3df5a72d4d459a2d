package validate

import (
	"strings"
	"testing"
)

// TestTeamingChecks: a migratable attachment's pair passes when it is
// consistent and its VF plugged; each inconsistency, a standby port
// missing or on another VLAN, and a hidden VF fail with the fix.
func TestTeamingChecks(t *testing.T) {
	good := func() Attachment {
		return Attachment{Domain: "vm1", PF: 0, VF: 3, Present: true, Teaming: &Teaming{
			MAC: "52:54:00:00:00:01", Alias: "ua-vflag-525400000001", Bridge: "br-vf",
			StandbyFound: true, StandbyMAC: "52:54:00:00:00:01", StandbyBridge: "br-vf", StandbyOVS: true, Virtio: true,
			StandbyVLANOK: true, StandbyVLAN: "vlan 10", WantVLAN: "vlan 10", VFTeam: "ua-vflag-525400000001",
			Running: true, Port: "vnet3", PortWant: VLAN{Tag: 10}, Plugged: true,
		}}
	}
	bridge := &Bridge{Exists: true, Ports: map[string]BridgePort{"vnet3": {OFPort: 7, Tag: 10}}}
	tests := []struct {
		name    string
		mod     func(a *Attachment, b *Bridge)
		verdict Verdict
		want    string
	}{
		{"consistent and plugged", func(*Attachment, *Bridge) {}, Pass, "VF plugged"},
		{"not running", func(a *Attachment, _ *Bridge) { a.Teaming.Running = false }, Pass, "not running"},
		{"hidden", func(a *Attachment, _ *Bridge) { a.Teaming.Plugged = false }, Fail, "the VF is hidden: the guest has not negotiated the standby feature"},
		{"no standby", func(a *Attachment, _ *Bridge) { a.Teaming.StandbyFound = false }, Fail, "no standby ua-vflag-525400000001"},
		{"standby MAC", func(a *Attachment, _ *Bridge) { a.Teaming.StandbyMAC = "52:54:00:00:00:02" }, Fail, "the standby's MAC is 52:54:00:00:00:02"},
		{"standby VLAN", func(a *Attachment, _ *Bridge) { a.Teaming.StandbyVLANOK, a.Teaming.StandbyVLAN = false, "vlan 20" }, Fail, "the standby's VLAN is vlan 20, the VF's vlan 10"},
		{"VF not teamed", func(a *Attachment, _ *Bridge) { a.Teaming.VFTeam = "" }, Fail, "the VF is not the transient half"},
		{"VF on a bus without hotplug", func(a *Attachment, _ *Bridge) { a.Teaming.VFNotHotplug = true }, Fail, "takes no hotplug"},
		{"other bridge", func(a *Attachment, _ *Bridge) { a.Teaming.StandbyBridge = "br-x" }, Fail, "not an openvswitch port of br-vf"},
		{"legacy: the VF's VLAN", func(a *Attachment, _ *Bridge) { a.Teaming.WantVFVLAN = 10 }, Fail, "the VF's <vlan> is none, the pair's vlan 10"},
		{"legacy: the VF's VLAN as the pair's", func(a *Attachment, _ *Bridge) { a.Teaming.WantVFVLAN, a.Teaming.VFVLAN = 10, 10 }, Pass, "VF plugged"},
		{"a VF's VLAN in a switchdev pair", func(a *Attachment, _ *Bridge) { a.Teaming.VFVLAN = 10 }, Fail, "the VF's <vlan> is vlan 10, the pair's none"},
		{"port missing", func(_ *Attachment, b *Bridge) { delete(b.Ports, "vnet3") }, Fail, "the standby's port vnet3 is not on bridge br-vf"},
		{"port VLAN", func(_ *Attachment, b *Bridge) { b.Ports["vnet3"] = BridgePort{OFPort: 7, Tag: 20} }, Fail, "has tag 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := good()
			b := &Bridge{Exists: true, Ports: map[string]BridgePort{}}
			for k, v := range bridge.Ports {
				b.Ports[k] = v
			}
			tt.mod(&a, b)
			cs := teamingChecks([]Attachment{a}, b)
			if len(cs) != 1 || cs[0].Name != "teaming/vm1/pf0vf3" {
				t.Fatalf("checks = %+v", cs)
			}
			if cs[0].Verdict != tt.verdict || !strings.Contains(cs[0].Detail, tt.want) {
				t.Errorf("got %s %q, want %s with %q", cs[0].Verdict, cs[0].Detail, tt.verdict, tt.want)
			}
		})
	}
	if cs := teamingChecks([]Attachment{{Domain: "vm2", Present: true}}, bridge); len(cs) != 0 {
		t.Errorf("an attachment that is not migratable got %+v", cs)
	}
}
