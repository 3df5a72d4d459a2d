package config

import (
	"os"
	"strings"
	"testing"
)

// ovnConfig is validConfig made an OVN chassis: vfs[0] (untagged) bound to
// lsp-vm1 and given to vm1.
func ovnConfig() *Config {
	c := validConfig()
	g := &c.Groups[0]
	g.OVS.Bridge = ""
	g.VFs[0].VLAN = 0
	g.VFs[0].OVNPort = "lsp-vm1"
	g.MTU = 1500
	g.OVN = &OVN{Remote: "tcp:192.0.2.1:6642", EncapIP: "192.0.2.11/24", UnderlayMTU: 1558}
	c.ApplyDefaults()
	return c
}

// The defaults (br-int, geneve, 30s, ovs.bridge from ovn.bridge), the
// bound ports and the values the Open_vSwitch row gets.
func TestOVNDefaultsAndPorts(t *testing.T) {
	c := ovnConfig()
	g := &c.Groups[0]
	g.Attachments[0].OVNPort = ""
	g.VFs = append(g.VFs, VFConfig{PF: 1, VF: 2, MAC: "52:54:00:00:00:02"})
	g.Attachments = append(g.Attachments, Attachment{Domain: "vm2", PF: 1, VF: 2, OVNPort: "lsp-vm2"})
	g.OVN.BridgeMappings = map[string]string{"physnet2": "br-p2", "physnet1": "br-p1"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if o := g.OVN; o.Bridge != "br-int" || o.EncapType != "geneve" || o.InstallTimeout != OVNInstallTimeoutDefault || g.OVS.Bridge != "br-int" {
		t.Fatalf("defaults: %+v, ovs.bridge %s", o, g.OVS.Bridge)
	}
	if m := g.OVN.Mappings(); m != "physnet1:br-p1,physnet2:br-p2" {
		t.Fatalf("mappings %q", m)
	}
	ports := g.OVNPorts("groups[0]")
	if len(ports) != 2 || ports[1].LSP != "lsp-vm2" || ports[1].MAC != "52:54:00:00:00:02" || ports[1].Domain != "vm2" || ports[0].Domain != "" {
		t.Fatalf("ports %+v", ports)
	}
	if g.BondInBridge() || g.UnderlayDev() != "bond0" {
		t.Fatalf("bond in bridge %v, underlay %q", g.BondInBridge(), g.UnderlayDev())
	}
}

// A VF bound without a MAC (a driver whose VF MACs vflag cannot set, as
// netdevsim's) is accepted and bound without attached-mac: ovn-controller
// binds by iface-id.
func TestOVNPortWithoutMAC(t *testing.T) {
	c := ovnConfig()
	g := &c.Groups[0]
	g.Attachments = nil // an attachment needs a MAC of its own
	g.VFs[0].MAC = ""
	if err := c.Validate(); err != nil {
		t.Fatalf("refused: %v", err)
	}
	if ports := g.OVNPorts("groups[0]"); len(ports) != 1 || ports[0].LSP != "lsp-vm1" || ports[0].MAC != "" {
		t.Fatalf("ports %+v", ports)
	}
}

// OVN's overhead: Geneve with OVN's 8-byte option, 58 over IPv4 and 78
// over IPv6; VXLAN as a tunnel's, 50 and 70.
func TestOVNOverhead(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		ipv6 bool
		want int
	}{{"geneve", false, 58}, {"geneve", true, 78}, {"vxlan", false, 50}, {"vxlan", true, 70}} {
		if got := OVNOverhead(tc.typ, tc.ipv6); got != tc.want {
			t.Errorf("%s ipv6=%v: %d, want %d", tc.typ, tc.ipv6, got, tc.want)
		}
	}
}

func TestValidateOVN(t *testing.T) {
	second := func(c *Config) *Group {
		g2 := c.Groups[0]
		g2.Name, g2.PFs, g2.Bond.Name = "lag1", []string{"ens2f0np0", "ens2f1np1"}, "bond1"
		g2.Attachments, g2.VFs, g2.OVN, g2.OVS.Bridge = nil, nil, nil, "br-lag1"
		c.Groups = append(c.Groups, g2)
		return &c.Groups[1]
	}
	tests := []struct {
		name        string
		edit        func(c *Config)
		path, value string
		msg         string
	}{
		{"with a tunnel", func(c *Config) {
			c.Groups[0].Tunnel = &Tunnel{Type: "vxlan", Local: "192.0.2.21/24", Remotes: []string{"192.0.2.12"}, VNI: 5}
		},
			"groups[0].ovn", "tcp:192.0.2.1:6642", "exclusive with groups[0].tunnel"},
		{"bond-in-bridge layout", func(c *Config) { c.Groups[0].OVS.Bridge = "br-lag" }, "groups[0].ovs.bridge", "br-lag", "VLAN layout's bridge"},
		{"pool portgroup VLAN", func(c *Config) {
			c.Groups[0].Network = &Network{VFs: []NetworkVF{{PF: 1, VF: 3}}, Portgroups: []Portgroup{{Name: "web", VLAN: 10}}}
		}, "groups[0].network.portgroups[0].vlan", "10", "not allowed with ovn"},
		{"pool VF bound by vfs", func(c *Config) { c.Groups[0].Network = &Network{VFs: []NetworkVF{{PF: 0, VF: 0}}} },
			"groups[0].vfs[0].ovn_port", "lsp-vm1", "binds pf 0 vf 0, a VF of the pool vflag-lag0"},
		{"pool portgroup trunks", func(c *Config) {
			c.Groups[0].Network = &Network{VFs: []NetworkVF{{PF: 1, VF: 3}}, Portgroups: []Portgroup{{Name: "web", VLANMode: "trunk", Trunks: []int{10, 20}}}}
		}, "groups[0].network.portgroups[0].trunks", "[10 20]", "not allowed with ovn"},
		{"legacy", func(c *Config) {
			o := c.Groups[0].OVN
			*c = *legacyConfig()
			c.Groups[0].OVN = o
		}, "groups[0].ovn", "tcp:192.0.2.1:6642", "switchdev"},
		{"no remote", func(c *Config) { c.Groups[0].OVN.Remote = "" }, "groups[0].ovn.remote", "", "is required"},
		{"bad remote", func(c *Config) { c.Groups[0].OVN.Remote = "tcp:192.0.2.1:6642,http://x" }, "groups[0].ovn.remote", "tcp:192.0.2.1:6642,http://x", `"http://x" is not a Southbound endpoint`},
		{"ssl without files", func(c *Config) { c.Groups[0].OVN.Remote = "ssl:192.0.2.1:6642" }, "groups[0].ovn.ssl", "", "required with an ssl: remote"},
		{"ssl relative", func(c *Config) {
			c.Groups[0].OVN.Remote = "ssl:192.0.2.1:6642"
			c.Groups[0].OVN.SSL = &OVNSSL{PrivateKey: "/etc/ovn/key.pem", Certificate: "cert.pem", CACert: "/etc/ovn/ca.pem"}
		}, "groups[0].ovn.ssl.certificate", "cert.pem", "absolute"},
		{"ssl with tcp", func(c *Config) { c.Groups[0].OVN.SSL = &OVNSSL{PrivateKey: "/k"} }, "groups[0].ovn.ssl", "/k", "only used with an ssl: remote"},
		{"encap type", func(c *Config) { c.Groups[0].OVN.EncapType = "stt" }, "groups[0].ovn.encap_type", "stt", "geneve or vxlan"},
		{"encap_ip without prefix", func(c *Config) { c.Groups[0].OVN.EncapIP = "192.0.2.11" }, "groups[0].ovn.encap_ip", "192.0.2.11", "prefix"},
		{"route without gateway", func(c *Config) { c.Groups[0].OVN.Routes = []string{"198.51.100.0/24"} }, "groups[0].ovn.routes[0]", "198.51.100.0/24", "needs ovn.gateway"},
		{"gateway outside", func(c *Config) { c.Groups[0].OVN.Gateway = "10.0.0.1" }, "groups[0].ovn.gateway", "10.0.0.1", "inside encap_ip's prefix"},
		{"MTU chain geneve", func(c *Config) { c.Groups[0].OVN.UnderlayMTU = 1550 }, "groups[0].ovn.underlay_mtu", "1550",
			"mtu 1500 plus 58 bytes of OVN Geneve (with OVN's option) over IPv4 headers needs 1558"},
		{"MTU chain geneve IPv6", func(c *Config) { c.Groups[0].OVN.EncapIP, c.Groups[0].OVN.UnderlayMTU = "2001:db8::11/64", 1558 }, "groups[0].ovn.underlay_mtu", "1558",
			"plus 78 bytes of OVN Geneve (with OVN's option) over IPv6 headers needs 1578"},
		{"underlay VLAN", func(c *Config) { c.Groups[0].OVN.UnderlayVLAN = 5000 }, "groups[0].ovn.underlay_vlan", "5000", "1-4094"},
		{"system_id", func(c *Config) { c.Groups[0].OVN.SystemID = "a b" }, "groups[0].ovn.system_id", "a b", "chassis name"},
		{"bridge", func(c *Config) { c.Groups[0].OVN.Bridge, c.Groups[0].OVS.Bridge = "br/int", "br/int" }, "groups[0].ovn.bridge", "br/int", "15 characters"},
		{"mapping to br-int", func(c *Config) { c.Groups[0].OVN.BridgeMappings = map[string]string{"physnet1": "br-int"} },
			"groups[0].ovn.bridge_mappings.physnet1", "br-int", "integration bridge"},
		{"timeout", func(c *Config) { c.Groups[0].OVN.InstallTimeout = -1 }, "groups[0].ovn.install_timeout", "-1ns", "positive"},
		{"ovn_port twice", func(c *Config) {
			c.Groups[0].VFs = append(c.Groups[0].VFs, VFConfig{PF: 0, VF: 1, MAC: "52:54:00:00:00:02", OVNPort: "lsp-vm1"})
		}, "groups[0].vfs[1].ovn_port", "lsp-vm1", "already used at groups[0].vfs[0].ovn_port"},
		{"ovn_port twice across vfs and attachments", func(c *Config) { c.Groups[0].Attachments[0].OVNPort = "lsp-vm1" },
			"groups[0].attachments[0].ovn_port", "lsp-vm1", "already used at groups[0].vfs[0].ovn_port"},
		{"one VF two ports", func(c *Config) { c.Groups[0].Attachments[0].OVNPort = "lsp-other" },
			"groups[0].attachments[0].ovn_port", "lsp-other", "already bound at groups[0].vfs[0].ovn_port"},
		{"ovn_port name", func(c *Config) { c.Groups[0].VFs[0].OVNPort = "a port" }, "groups[0].vfs[0].ovn_port", "a port", "not a logical switch port name"},
		{"VLAN on a bound port", func(c *Config) { c.Groups[0].VFs[0].VLAN = 10 }, "groups[0].vfs[0].vlan", "10", "not allowed with ovn"},
		{"ovn_port without ovn", func(c *Config) { c.Groups[0].OVN = nil; c.Groups[0].OVS.Bridge = "br-lag" }, "groups[0].vfs[0].ovn_port", "lsp-vm1", "needs groups[0].ovn"},
		{"two chassis sections", func(c *Config) {
			g2 := second(c)
			g2.OVN = &OVN{Remote: "tcp:192.0.2.1:6642", EncapIP: "192.0.2.12/24", Bridge: "br-int2"}
			g2.OVS.Bridge = "br-int2"
		}, "groups[1].ovn", "tcp:192.0.2.1:6642", "one OVN chassis"},
		{"encap address used by a tunnel", func(c *Config) {
			g2 := second(c)
			g2.Tunnel = &Tunnel{Type: "vxlan", Local: "192.0.2.11/24", Remotes: []string{"192.0.2.12"}, VNI: 5}
		}, "groups[1].tunnel.local", "192.0.2.11", "already used at groups[0].ovn.encap_ip"},
		{"br-int used by another group", func(c *Config) { second(c).OVS.Bridge = "br-int" }, "groups[1].ovs.bridge", "br-int", "already used at groups[0].ovs.bridge"},
		{"validate.ovn_from not a port of the group", func(c *Config) { c.Groups[0].Validate.OVNFrom = "lsp-vm9" },
			"groups[0].validate.ovn_from", "lsp-vm9", "is not an ovn_port of the group (lsp-vm1)"},
		{"validate.ovn_to name", func(c *Config) { c.Groups[0].Validate.OVNTo = "vm 2" }, "groups[0].validate.ovn_to", "vm 2", "not a logical switch port name"},
		{"validate.ovn_to is ovn_from", func(c *Config) { c.Groups[0].Validate.OVNFrom, c.Groups[0].Validate.OVNTo = "lsp-vm1", "lsp-vm1" },
			"groups[0].validate.ovn_to", "lsp-vm1", "is ovn_from too"},
		{"validate.ovn_to without ovn", func(c *Config) { second(c).Validate.OVNTo = "lsp-vm2" }, "groups[1].validate.ovn_to", "lsp-vm2", "needs groups[1].ovn"},
	}
	if err := ovnConfig().Validate(); err != nil {
		t.Fatalf("valid ovn config refused: %v", err)
	}
	ok := ovnConfig()
	ok.Groups[0].Validate.OVNFrom, ok.Groups[0].Validate.OVNTo = "lsp-vm1", "lsp-on-hv2"
	if err := ok.Validate(); err != nil {
		t.Fatalf("validate.ovn_from/ovn_to refused: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ovnConfig()
			tt.edit(c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			want := tt.path + ": \"" + tt.value + "\""
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error does not name %s ... %s: %v", want, tt.msg, err)
			}
		})
	}
}

// A pool in a group with ovn is accepted (the hook binds its ports to
// the logical ports the domains name), and OVNPortField finds the config
// field of a logical port in any group.
func TestOVNPool(t *testing.T) {
	c := ovnConfig()
	c.Groups[0].Network = &Network{VFs: []NetworkVF{{PF: 1, VF: 3}}, Portgroups: []Portgroup{{Name: "any", Default: true}}}
	if err := c.Validate(); err != nil {
		t.Fatalf("pool with ovn refused: %v", err)
	}
	if f := c.OVNPortField("lsp-vm1"); f != "groups[0].vfs[0].ovn_port" {
		t.Errorf("OVNPortField(lsp-vm1) = %q", f)
	}
	if f := c.OVNPortField("lsp-none"); f != "" {
		t.Errorf("OVNPortField(lsp-none) = %q", f)
	}
	for name, ok := range map[string]bool{"lsp-a": true, "sw0/port_1:x@y+z": true, "": false, "-lsp": false, "a b": false, "a\x00b": false, strings.Repeat("a", 256): false} {
		if ValidOVNPort(name) != ok {
			t.Errorf("ValidOVNPort(%q) = %v, want %v", name, !ok, ok)
		}
	}
}

func TestParseOVN(t *testing.T) {
	b, err := os.ReadFile("../../examples/ovn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Groups[0].OVN
	if o == nil || o.SSL == nil || o.SSL.CACert != "/etc/ovn/cacert.pem" || o.UnderlayVLAN != 30 || o.BridgeMappings["physnet1"] != "br-phys" || o.InstallTimeout.Seconds() != 30 {
		t.Fatalf("ovn decoded as %+v", o)
	}
	if ports := c.Groups[0].OVNPorts("g"); len(ports) != 2 || ports[1].Domain != "vm2" || ports[1].MAC != "52:54:00:20:01:00" {
		t.Fatalf("ports %+v", ports)
	}
}
