package config

import (
	"slices"
	"strings"
	"testing"
)

// validConfig is a minimal valid two-port switchdev group.
func validConfig() *Config {
	c := &Config{
		OVSDB:   "unix:/run/openvswitch/db.sock",
		Libvirt: "qemu:///system",
		Groups: []Group{{
			Name:   "lag0",
			PFs:    []string{"ens1f0np0", "0000:61:00.1"},
			NumVFs: 4,
			Bond:   Bond{Name: "bond0", Mode: "802.3ad", LacpRate: "fast", XmitHashPolicy: "layer3+4"},
			VFs:    []VFConfig{{PF: 0, VF: 0, MAC: "52:54:00:00:00:01", VLAN: 10}},
			OVS:    OVSConfig{Bridge: "br-lag"},
			Attachments: []Attachment{
				{Domain: "vm1", PF: 0, VF: 0},
			},
		}},
	}
	c.ApplyDefaults()
	return c
}

func TestValidateAcceptsValidConfig(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
}

func TestValidateAcceptsBondOptions(t *testing.T) {
	c := validConfig()
	b := &c.Groups[0].Bond
	b.UpDelay, b.DownDelay, b.MinLinks, b.AdSelect = 200, 100, 1, "bandwidth"
	if err := c.Validate(); err != nil {
		t.Fatalf("802.3ad options rejected: %v", err)
	}
	b.Mode, b.LacpRate, b.XmitHashPolicy, b.AdSelect = "active-backup", "", "", ""
	for _, p := range []string{"ens1f0np0", "0000:61:00.1", "0000:61:00.1"} { // a pfs entry as written (PCI case-insensitive)
		b.Primary = p
		if err := c.Validate(); err != nil {
			t.Fatalf("primary %s rejected: %v", p, err)
		}
	}
	if got := c.Groups[0].PrimaryIndex(); got != 1 {
		t.Errorf("PrimaryIndex %d, want 1", got)
	}
}

func TestValidateAcceptsVLANModes(t *testing.T) {
	for _, v := range []VFConfig{
		{VLAN: 10},
		{VLAN: 10, VLANMode: "access"},
		{VLANMode: "access"}, // untagged frames only
		{VLANMode: "trunk", Trunks: []int{20, 30}},
		{VLANMode: "trunk"},
		{VLAN: 10, VLANMode: "native-untagged", Trunks: []int{20, 30}},
		{VLAN: 10, VLANMode: "native-tagged"},
	} {
		c := validConfig()
		c.Groups[0].VFs[0].VLAN, c.Groups[0].VFs[0].VLANMode, c.Groups[0].VFs[0].Trunks = v.VLAN, v.VLANMode, v.Trunks
		if err := c.Validate(); err != nil {
			t.Errorf("%+v rejected: %v", v, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		path   string // the field path the error must name
		value  string // the bad value it must quote
	}{
		{"bond mode outside 1/2/4", func(c *Config) { c.Groups[0].Bond.Mode = "balance-rr" }, "groups[0].bond.mode", "balance-rr"},
		{"bond mode tlb", func(c *Config) { c.Groups[0].Bond.Mode = "balance-tlb" }, "groups[0].bond.mode", "balance-tlb"},
		{"numvfs above 64 with LAG", func(c *Config) { c.Groups[0].NumVFs = 65 }, "groups[0].numvfs", "65"},
		{"numvfs zero", func(c *Config) { c.Groups[0].NumVFs = 0 }, "groups[0].numvfs", "0"},
		{"interface name with a slash", func(c *Config) { c.Groups[0].PFs[0] = "ens1/../../x" }, "groups[0].pfs[0]", "ens1/../../x"},
		{"interface name too long", func(c *Config) { c.Groups[0].PFs[0] = "abcdefghijklmnop" }, "groups[0].pfs[0]", "abcdefghijklmnop"},
		{"malformed PCI address", func(c *Config) { c.Groups[0].PFs[1] = "0000:61:00.9" }, "groups[0].pfs[1]", "0000:61:00.9"},
		{"malformed PCI address short", func(c *Config) { c.Groups[0].PFs[1] = "61:0.1" }, "groups[0].pfs[1]", "61:0.1"},
		{"same PF twice", func(c *Config) { c.Groups[0].PFs[1] = "ens1f0np0" }, "groups[0].pfs[1]", "ens1f0np0"},
		{"one PF with switchdev", func(c *Config) { c.Groups[0].PFs = c.Groups[0].PFs[:1] }, "groups[0].pfs", "ens1f0np0"},
		{"malformed MAC", func(c *Config) { c.Groups[0].VFs[0].MAC = "52:54:00:zz:00:01" }, "groups[0].vfs[0].mac", "52:54:00:zz:00:01"},
		{"multicast MAC", func(c *Config) { c.Groups[0].VFs[0].MAC = "01:00:5e:00:00:01" }, "groups[0].vfs[0].mac", "01:00:5e:00:00:01"},
		{"VF index beyond numvfs", func(c *Config) { c.Groups[0].VFs[0].VF = 4 }, "groups[0].vfs[0].vf", "4"},
		{"VF of unknown PF", func(c *Config) { c.Groups[0].VFs[0].PF = 2 }, "groups[0].vfs[0].pf", "2"},
		{"VLAN out of range", func(c *Config) { c.Groups[0].VFs[0].VLAN = 4095 }, "groups[0].vfs[0].vlan", "4095"},
		{"attachment to domain ..", func(c *Config) { c.Groups[0].Attachments[0].Domain = ".." }, "groups[0].attachments[0].domain", ".."},
		{"attachment to unknown VF", func(c *Config) { c.Groups[0].Attachments[0].VF = 9 }, "groups[0].attachments[0].vf", "9"},
		{"attachment to unknown PF", func(c *Config) { c.Groups[0].Attachments[0].PF = -1 }, "groups[0].attachments[0].pf", "-1"},
		{"attachment without MAC", func(c *Config) { c.Groups[0].VFs = nil }, "groups[0].attachments[0].mac", ""},
		{"bad domain name", func(c *Config) { c.Groups[0].Attachments[0].Domain = "vm 1" }, "groups[0].attachments[0].domain", "vm 1"},
		{"lacp_rate with xor", func(c *Config) { c.Groups[0].Bond.Mode = "balance-xor" }, "groups[0].bond.lacp_rate", "fast"},
		{"hash policy with active-backup", func(c *Config) {
			c.Groups[0].Bond.Mode = "active-backup"
			c.Groups[0].Bond.LacpRate = ""
		}, "groups[0].bond.xmit_hash_policy", "layer3+4"},
		{"bad hash policy", func(c *Config) { c.Groups[0].Bond.XmitHashPolicy = "layer5" }, "groups[0].bond.xmit_hash_policy", "layer5"},
		{"updelay not a multiple of miimon", func(c *Config) { c.Groups[0].Bond.UpDelay = 150 }, "groups[0].bond.updelay", "150"},
		{"updelay negative", func(c *Config) { c.Groups[0].Bond.UpDelay = -100 }, "groups[0].bond.updelay", "-100"},
		{"downdelay not a multiple of miimon", func(c *Config) { c.Groups[0].Bond.DownDelay = 50 }, "groups[0].bond.downdelay", "50"},
		{"downdelay too long", func(c *Config) { c.Groups[0].Bond.DownDelay = 600000 }, "groups[0].bond.downdelay", "600000"},
		{"min_links above the PFs", func(c *Config) { c.Groups[0].Bond.MinLinks = 3 }, "groups[0].bond.min_links", "3"},
		{"min_links negative", func(c *Config) { c.Groups[0].Bond.MinLinks = -1 }, "groups[0].bond.min_links", "-1"},
		{"primary outside active-backup", func(c *Config) { c.Groups[0].Bond.Primary = "ens1f0np0" }, "groups[0].bond.primary", "ens1f0np0"},
		{"primary not a PF of the group", func(c *Config) {
			c.Groups[0].Bond.Mode, c.Groups[0].Bond.LacpRate, c.Groups[0].Bond.XmitHashPolicy = "active-backup", "", ""
			c.Groups[0].Bond.Primary = "ens2f0np0"
		}, "groups[0].bond.primary", "ens2f0np0"},
		{"ad_select outside 802.3ad", func(c *Config) {
			c.Groups[0].Bond.Mode, c.Groups[0].Bond.LacpRate = "balance-xor", ""
			c.Groups[0].Bond.AdSelect = "count"
		}, "groups[0].bond.ad_select", "count"},
		{"trunks with access", func(c *Config) { c.Groups[0].VFs[0].Trunks = []int{20} }, "groups[0].vfs[0].trunks", "[20]"},
		{"trunk with a tag", func(c *Config) { c.Groups[0].VFs[0].VLANMode = "trunk" }, "groups[0].vfs[0].vlan", "10"},
		{"native without tag", func(c *Config) { c.Groups[0].VFs[0].VLAN, c.Groups[0].VFs[0].VLANMode = 0, "native-untagged" }, "groups[0].vfs[0].vlan", "0"},
		{"bad vlan_mode", func(c *Config) { c.Groups[0].VFs[0].VLANMode = "dot1q-tunnel" }, "groups[0].vfs[0].vlan_mode", "dot1q-tunnel"},
		{"trunk VLAN out of range", func(c *Config) {
			c.Groups[0].VFs[0].VLANMode, c.Groups[0].VFs[0].Trunks = "native-tagged", []int{20, 4095}
		}, "groups[0].vfs[0].trunks[1]", "4095"},
		{"trunk VLAN twice", func(c *Config) {
			c.Groups[0].VFs[0].VLAN, c.Groups[0].VFs[0].VLANMode, c.Groups[0].VFs[0].Trunks = 0, "trunk", []int{20, 30, 20}
		}, "groups[0].vfs[0].trunks[2]", "20"},
		{"vlan_mode in a legacy group", func(c *Config) {
			g := &c.Groups[0]
			g.Eswitch, g.Bond, g.OVS.Bridge = "legacy", Bond{}, ""
			g.VFs[0].VLAN, g.VFs[0].VLANMode = 0, "trunk"
		}, "groups[0].vfs[0].vlan_mode", "trunk"},
		{"bad tc_policy", func(c *Config) { c.Groups[0].OVS.TCPolicy = "skip-sw" }, "groups[0].ovs.tc_policy", "skip-sw"},
		{"max_idle too small", func(c *Config) { c.Groups[0].OVS.MaxIdle = 100 }, "groups[0].ovs.max_idle", "100"},
		{"two groups with other tc_policy", func(c *Config) {
			g := c.Groups[0]
			g.Name, g.Bond.Name, g.OVS.Bridge, g.PFs = "lag1", "bond1", "br-lag1", []string{"ens2f0np0", "ens2f1np1"}
			g.VFs, g.Attachments = nil, nil
			c.Groups[0].OVS.TCPolicy, g.OVS.TCPolicy = "skip_sw", "skip_hw"
			c.Groups = append(c.Groups, g)
		}, "groups[1].ovs.tc_policy", `skip_hw" differs from groups[0].ovs.tc_policy "skip_sw`}, // names both
		{"two groups with other max_idle", func(c *Config) {
			g := c.Groups[0]
			g.Name, g.Bond.Name, g.OVS.Bridge, g.PFs = "lag1", "bond1", "br-lag1", []string{"ens2f0np0", "ens2f1np1"}
			g.VFs, g.Attachments = nil, nil
			c.Groups[0].OVS.MaxIdle, g.OVS.MaxIdle = 10000, 2000
			c.Groups = append(c.Groups, g)
		}, "groups[1].ovs.max_idle", `2000" differs from groups[0].ovs.max_idle "10000`}, // names both
		{"tc_policy in a legacy group", func(c *Config) {
			g := &c.Groups[0]
			g.Eswitch, g.Bond, g.OVS.Bridge, g.VFs[0].VLAN = "legacy", Bond{}, "", 0
			g.OVS.TCPolicy = "skip_sw"
		}, "groups[0].ovs.tc_policy", "skip_sw"},
		{"bad ad_select", func(c *Config) { c.Groups[0].Bond.AdSelect = "best" }, "groups[0].bond.ad_select", "best"},
		{"mtu too small", func(c *Config) { c.Groups[0].MTU = 67 }, "groups[0].mtu", "67"},
		{"mtu above jumbo", func(c *Config) { c.Groups[0].MTU = 9217 }, "groups[0].mtu", "9217"},
		{"bond name with slash", func(c *Config) { c.Groups[0].Bond.Name = "bo/nd" }, "groups[0].bond.name", "bo/nd"},
		{"bridge named ..", func(c *Config) { c.Groups[0].OVS.Bridge = ".." }, "groups[0].ovs.bridge", ".."},
		{"bridge named .", func(c *Config) { c.Groups[0].OVS.Bridge = "." }, "groups[0].ovs.bridge", "."},
		{"bond named ..", func(c *Config) { c.Groups[0].Bond.Name = ".." }, "groups[0].bond.name", ".."},
		{"pf named ..", func(c *Config) { c.Groups[0].PFs[1] = ".." }, "groups[0].pfs[1]", ".."},
		{"bridge name too long", func(c *Config) { c.Groups[0].OVS.Bridge = "br-much-too-long-name" }, "groups[0].ovs.bridge", "br-much-too-long-name"},
		{"bad group name", func(c *Config) { c.Groups[0].Name = "Lag 0" }, "groups[0].name", "Lag 0"},
		{"bad eswitch mode", func(c *Config) { c.Groups[0].Eswitch = "offload" }, "groups[0].eswitch", "offload"},
		{"bad flow steering", func(c *Config) { c.Groups[0].FlowSteeringMode = "hmfs" }, "groups[0].flow_steering_mode", "hmfs"},
		{"bad ovsdb endpoint", func(c *Config) { c.OVSDB = "/run/db.sock" }, "ovsdb", "/run/db.sock"},
		{"bad datapath", func(c *Config) { c.Groups[0].OVS.DatapathType = "dpdk" }, "groups[0].ovs.datapath_type", "dpdk"},
		{"no groups", func(c *Config) { c.Groups = nil }, "groups", ""},
		{"duplicate MAC", func(c *Config) {
			c.Groups[0].VFs = append(c.Groups[0].VFs, VFConfig{PF: 1, VF: 0, MAC: "52:54:00:00:00:01"})
		}, "groups[0].vfs[1].mac", "52:54:00:00:00:01"},
		{"VF configured twice", func(c *Config) {
			c.Groups[0].VFs = append(c.Groups[0].VFs, VFConfig{PF: 0, VF: 0})
		}, "groups[0].vfs[1]", "pf 0 vf 0"},
		{"legacy group with a bond", func(c *Config) { c.Groups[0].Eswitch = "legacy" }, "groups[0].bond.name", "bond0"},
		{"two groups share a PF", func(c *Config) {
			g := c.Groups[0]
			g.Name, g.Bond.Name, g.OVS.Bridge = "lag1", "bond1", "br-lag1"
			g.VFs, g.Attachments = nil, nil
			c.Groups = append(c.Groups, g)
		}, "groups[1].pfs[0]", "ens1f0np0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			want := tt.path + ": \"" + tt.value + "\""
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error does not name %s: %v", want, err)
			}
		})
	}
}

// legacyConfig is validConfig as a legacy group: no bond, no bridge.
func legacyConfig() *Config {
	c := validConfig()
	g := &c.Groups[0]
	g.Eswitch, g.Bond, g.OVS.Bridge = "legacy", Bond{}, ""
	g.VFs[0].VLAN = 0
	return c
}

func TestValidateVFPolicy(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name      string
		switchdev bool
		vf        VFConfig
		path      string // "" = accepted
		value     string
		msg       string // a part of the message
	}{
		{"legacy: every setting", false, VFConfig{Trust: &on, Spoofchk: &off, LinkState: "disable", MinTxRate: 100, MaxTxRate: 1000, VLAN: 100, QoS: 3}, "", "", ""},
		{"legacy: max rate alone", false, VFConfig{MaxTxRate: 1000}, "", "", ""},
		{"legacy: min rate alone", false, VFConfig{MinTxRate: 10}, "", "", ""},
		{"legacy: vlan without qos", false, VFConfig{VLAN: 4094}, "", "", ""},
		{"switchdev: vlan is the OVS tag", true, VFConfig{VLAN: 100}, "", "", ""},
		{"bad link state", false, VFConfig{LinkState: "up"}, "groups[0].vfs[0].link_state", "up", "auto, enable or disable"},
		{"qos out of range", false, VFConfig{VLAN: 100, QoS: 8}, "groups[0].vfs[0].qos", "8", "0-7"},
		{"negative qos", false, VFConfig{VLAN: 100, QoS: -1}, "groups[0].vfs[0].qos", "-1", "0-7"},
		{"qos without vlan", false, VFConfig{QoS: 3}, "groups[0].vfs[0].qos", "3", "needs vlan"},
		{"vlan out of range", false, VFConfig{VLAN: 4095}, "groups[0].vfs[0].vlan", "4095", "1-4094"},
		{"min above max", false, VFConfig{MinTxRate: 2000, MaxTxRate: 1000}, "groups[0].vfs[0].min_tx_rate", "2000", "above max_tx_rate 1000"},
		{"negative max rate", false, VFConfig{MaxTxRate: -1}, "groups[0].vfs[0].max_tx_rate", "-1", "Mbit/s"},
		{"negative min rate", false, VFConfig{MinTxRate: -5}, "groups[0].vfs[0].min_tx_rate", "-5", "Mbit/s"},
		{"rate above u32", false, VFConfig{MaxTxRate: 1 << 32}, "groups[0].vfs[0].max_tx_rate", "4294967296", "Mbit/s"},
		{"switchdev: trust", true, VFConfig{Trust: &on}, "groups[0].vfs[0].trust", "true", "EOPNOTSUPP"},
		{"switchdev: spoofchk", true, VFConfig{Spoofchk: &off}, "groups[0].vfs[0].spoofchk", "false", "OVS flows decide"},
		{"switchdev: link_state", true, VFConfig{LinkState: "enable"}, "groups[0].vfs[0].link_state", "enable", "representor's link state is the VF's"},
		{"switchdev: max rate", true, VFConfig{MaxTxRate: 1000}, "groups[0].vfs[0].max_tx_rate", "1000", "groups[0].vfs[0].tx_max"},
		{"switchdev: min rate", true, VFConfig{MinTxRate: 100}, "groups[0].vfs[0].min_tx_rate", "100", "groups[0].vfs[0].tx_share"},
		{"switchdev: qos", true, VFConfig{VLAN: 100, QoS: 3}, "groups[0].vfs[0].qos", "3", "representor's OVS port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := legacyConfig()
			if tt.switchdev {
				c = validConfig()
			}
			tt.vf.PF, tt.vf.VF, tt.vf.MAC = 0, 0, "52:54:00:00:00:01"
			c.Groups[0].VFs[0] = tt.vf
			// VF 0 stays the host's: the domain takes VF 1
			// (TestLegacyVLANOnAttachedVF covers an attached VF).
			c.Groups[0].Attachments[0].VF, c.Groups[0].Attachments[0].MAC = 1, "52:54:00:00:00:02"
			err := c.Validate()
			if tt.path == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			want := tt.path + ": \"" + tt.value + "\""
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error does not name %s with %q: %v", want, tt.msg, err)
			}
		})
	}
}

// TestLegacyVLANOnAttachedVF: a legacy VF's VLAN (and QoS) through the PF
// does not hold on a VF a domain takes through <interface type='hostdev'>
// (libvirt sets the VF's VLAN itself, and drops the QoS at release): refused
// at the VF's vlan, naming the attachment; the same VLAN on a VF the host
// keeps is accepted, as is a switchdev group's vlan (the representor's tag).
func TestLegacyVLANOnAttachedVF(t *testing.T) {
	for _, tt := range []struct {
		name      string
		switchdev bool
		attachVF  int
		vf        VFConfig
		want      string // "" = accepted
	}{
		{"vlan on the attached VF", false, 0, VFConfig{VLAN: 100}, `groups[0].vfs[0].vlan: "100" cannot hold on a VF attached to a domain (groups[0].attachments[0])`},
		{"vlan and qos on the attached VF", false, 0, VFConfig{VLAN: 100, QoS: 3}, `groups[0].vfs[0].vlan: "100" cannot hold on a VF attached to a domain`},
		{"vlan on a VF the host keeps", false, 1, VFConfig{VLAN: 100, QoS: 3}, ""},
		{"trust on the attached VF", false, 0, VFConfig{Trust: new(bool)}, ""},
		{"switchdev: the representor's tag", true, 0, VFConfig{VLAN: 100}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := legacyConfig()
			if tt.switchdev {
				c = validConfig()
			}
			tt.vf.PF, tt.vf.VF, tt.vf.MAC = 0, 0, "52:54:00:00:00:01"
			c.Groups[0].VFs[0] = tt.vf
			c.Groups[0].Attachments[0].VF, c.Groups[0].Attachments[0].MAC = tt.attachVF, "52:54:00:00:00:02"
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

// TestAttachmentDomains: each domain once, in config order.
func TestAttachmentDomains(t *testing.T) {
	g := Group{Attachments: []Attachment{{Domain: "vm2"}, {Domain: "vm1"}, {Domain: "vm2"}}}
	if got := g.AttachmentDomains(); !slices.Equal(got, []string{"vm2", "vm1"}) {
		t.Errorf("AttachmentDomains = %q, want [vm2 vm1]", got)
	}
	if got := (&Group{}).AttachmentDomains(); len(got) != 0 {
		t.Errorf("no attachments: %q", got)
	}
}

// TestMigratable: an attachment may be migratable in a switchdev group, or
// in a legacy group with standby_bridge (its VF's vlan then allowed); a
// legacy group without it (no bridge for the standby), standby_bridge in a
// switchdev group or not a bridge name, QoS on a legacy pair's VF, a second
// interface of the domain with the pair's MAC and a pool's migratable are
// refused, each naming its field.
func TestMigratable(t *testing.T) {
	c := validConfig()
	c.Groups[0].Attachments[0].Migratable = true
	if err := c.Validate(); err != nil {
		t.Fatalf("migratable attachment refused: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"legacy group without standby_bridge", func(c *Config) {
			*c = *legacyConfig()
			c.Groups[0].Attachments[0].Migratable = true
		}, `groups[0].attachments[0].migratable: "true" needs standby_bridge in a legacy group`},
		{"standby_bridge in a switchdev group", func(c *Config) {
			c.Groups[0].Attachments[0].Migratable = true
			c.Groups[0].StandbyBridge = "br-host"
		}, `groups[0].standby_bridge: "br-host" is not allowed with eswitch switchdev`},
		{"standby_bridge not a bridge name", func(c *Config) {
			*c = *legacyConfig()
			c.Groups[0].Attachments[0].Migratable = true
			c.Groups[0].StandbyBridge = "br/host"
		}, `groups[0].standby_bridge: "br/host" must be 1-15 characters`},
		{"legacy: qos on a migratable attachment's VF", func(c *Config) {
			*c = *legacyConfig()
			c.Groups[0].Attachments[0].Migratable = true
			c.Groups[0].StandbyBridge = "br-host"
			c.Groups[0].VFs[0].VLAN, c.Groups[0].VFs[0].QoS = 42, 3
		}, `groups[0].vfs[0].qos: "3" cannot hold on a VF attached to a domain (groups[0].attachments[0])`},
		{"legacy: vlan on a plain attachment's VF", func(c *Config) {
			*c = *legacyConfig()
			c.Groups[0].VFs[0].VLAN = 42
		}, `groups[0].vfs[0].vlan: "42" cannot hold on a VF attached to a domain`},
		{"the MAC of another attachment of the domain", func(c *Config) {
			c.Groups[0].Attachments[0].Migratable = true
			c.Groups[0].Attachments = append(c.Groups[0].Attachments, Attachment{Domain: "vm1", PF: 1, VF: 0, MAC: "52:54:00:00:00:01", Migratable: true})
		}, `groups[0].attachments[1].mac: "52:54:00:00:00:01" is also the MAC of groups[0].attachments[0] in domain vm1`},
		{"ovn group", func(c *Config) {
			*c = *ovnConfig()
			c.Groups[0].Attachments[0].Migratable = true
		}, `groups[0].attachments[0].migratable: "true" is refused with ovn`},
		{"pool", func(c *Config) {
			on := true
			c.Groups[0].Network = &Network{Migratable: &on}
		}, `groups[0].network.migratable: "true" is not a setting of a VF pool`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	// A legacy group's pair: the standby on the host's bridge, the VF's
	// VLAN in both interfaces (libvirt sets it through the PF).
	c = legacyConfig()
	c.Groups[0].Attachments[0].Migratable = true
	c.Groups[0].StandbyBridge = "br-host"
	c.Groups[0].VFs[0].VLAN = 42
	if err := c.Validate(); err != nil {
		t.Fatalf("legacy migratable attachment with standby_bridge refused: %v", err)
	}
	// The same MAC in two domains is two pairs, one per guest.
	c = validConfig()
	c.Groups[0].Attachments = append(c.Groups[0].Attachments, Attachment{Domain: "vm2", PF: 1, VF: 0, MAC: "52:54:00:00:00:01", Migratable: true})
	c.Groups[0].Attachments[0].Migratable = true
	if err := c.Validate(); err != nil {
		t.Fatalf("one MAC in two domains refused: %v", err)
	}
}
