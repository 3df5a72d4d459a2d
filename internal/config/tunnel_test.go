package config

import (
	"reflect"
	"strings"
	"testing"
)

func withTunnel(c *Config, t Tunnel) *Config {
	c.Groups[0].Tunnel = &t
	return c
}

func goodTunnel() Tunnel {
	return Tunnel{Type: TunnelVXLAN, Local: "192.0.2.11/24", Remotes: []string{"192.0.2.12"}, VNI: 5000, UnderlayMTU: 9000}
}

// A tunnel group: its segments (the default one untagged, each vni of a
// VF or portgroup with its VLAN as tag) and one port per remote and
// segment with its options.
func TestTunnelPorts(t *testing.T) {
	c := withTunnel(validConfig(), goodTunnel()) // vfs[0]: vlan 10, no vni
	g := &c.Groups[0]
	g.VFs[0].VNI = 5010
	g.Tunnel.Remotes = append(g.Tunnel.Remotes, "192.0.2.13")
	g.Network = &Network{Portgroups: []Portgroup{{Name: "b", VLAN: 20, VNI: 5020}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := g.Segments(), []Segment{{5000, 0}, {5010, 10}, {5020, 20}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	ports := g.TunnelPorts()
	var names []string
	for _, p := range ports {
		names = append(names, p.Name)
	}
	if want := []string{"vx5000r0", "vx5000r1", "vx5010r0", "vx5010r1", "vx5020r0", "vx5020r1"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("ports %v, want %v", names, want)
	}
	want := map[string]string{"remote_ip": "192.0.2.13", "local_ip": "192.0.2.11", "key": "5010", "dst_port": "4789"}
	if p := ports[3]; p.Tag != 10 || p.Type != "vxlan" || !reflect.DeepEqual(p.Options, want) {
		t.Fatalf("port %+v, want tag 10 options %v", p, want)
	}
	g.Tunnel.Type, g.Tunnel.Remotes, g.Tunnel.UnderlayVLAN = TunnelGeneve, []string{"flow"}, 30
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := g.TunnelPorts()[0]; p.Name != "gnv5000" || p.Options["remote_ip"] != "flow" || p.Options["dst_port"] != "6081" {
		t.Fatalf("flow port %+v", p)
	}
	if d := g.UnderlayDev(); d != "bond0.30" {
		t.Fatalf("underlay device %q", d)
	}
}

// TestUntaggedTrunks: with a segment tagged in the bridge, the ports
// without a tag carry untagged frames and the default segment's own VLANs,
// never a tagged segment's; without a tagged segment, nil (OVS's trunk of
// every VLAN, as without a tunnel).
func TestUntaggedTrunks(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(g *Group)
		want []int
	}{
		{"no tunnel", func(g *Group) { g.Tunnel = nil }, nil},
		{"only the default segment (vfs[0] tagged on it)", func(g *Group) {}, nil},
		{"vfs[0] a segment of its own", func(g *Group) { g.VFs[0].VNI = 5010 }, []int{0}},
		{"a portgroup segment, vfs[0] tagged on the default", func(g *Group) {
			g.Network = &Network{Portgroups: []Portgroup{{Name: "b", VLAN: 20, VNI: 5020}}}
		}, []int{0, 10}},
		{"a default-segment trunk lists a segment's VLAN", func(g *Group) {
			g.VFs[0].VNI = 5010
			g.Network = &Network{Portgroups: []Portgroup{{Name: "t", VLANMode: "trunk", Trunks: []int{40, 10, 30}}}}
		}, []int{0, 30, 40}},
		{"no default segment", func(g *Group) { g.Tunnel.VNI, g.VFs[0].VNI = 0, 5010 }, []int{0}},
	} {
		c := withTunnel(validConfig(), goodTunnel()) // vfs[0]: vlan 10, no vni
		g := &c.Groups[0]
		tc.edit(g)
		if got := g.UntaggedTrunks(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTunnelInnerVLANTag: a port tagged in the bridge on the default
// segment (a vlan, a trunk) puts a VLAN tag inside the tunnel, 4 bytes
// more of the underlay's MTU; a segment's own port (vni) does not.
func TestTunnelInnerVLANTag(t *testing.T) {
	c := withTunnel(validConfig(), goodTunnel()) // vfs[0]: vlan 10, no vni
	g := &c.Groups[0]
	for _, tc := range []struct {
		name string
		edit func()
		at   string
		over int
	}{
		{"access VLAN on the default segment", func() {}, "vfs[0]", 54},
		{"the VLAN is a segment's tag", func() { g.VFs[0].VNI = 5010 }, "", 50},
		{"untagged portgroup", func() { g.Network = &Network{Portgroups: []Portgroup{{Name: "u"}}} }, "", 50},
		{"trunk portgroup", func() { g.Network.Portgroups[0].VLANMode, g.Network.Portgroups[0].Trunks = "trunk", []int{20} }, "network.portgroups[0]", 54},
		{"IPv6", func() { g.Tunnel.Local, g.Tunnel.Remotes = "2001:db8::11/64", []string{"2001:db8::12"} }, "network.portgroups[0]", 74},
		{"no tunnel", func() { g.Tunnel = nil }, "", 0},
	} {
		tc.edit()
		if at, over := g.InnerVLANTag(), g.TunnelOverhead(); at != tc.at || over != tc.over {
			t.Errorf("%s: inner tag at %q, overhead %d; want %q, %d", tc.name, at, over, tc.at, tc.over)
		}
	}
	c = withTunnel(validConfig(), goodTunnel())
	c.Groups[0].MTU, c.Groups[0].Tunnel.UnderlayMTU = 9000, 9054
	if err := c.Validate(); err != nil {
		t.Fatalf("9000 + 54 on 9054: %v", err)
	}
}

func TestValidateTunnel(t *testing.T) {
	tests := []struct {
		name        string
		edit        func(c *Config)
		path, value string
		msg         string
	}{
		{"type", func(c *Config) { c.Groups[0].Tunnel.Type = "gre" }, "groups[0].tunnel.type", "gre", "vxlan or geneve"},
		{"local without a prefix", func(c *Config) { c.Groups[0].Tunnel.Local = "192.0.2.11" }, "groups[0].tunnel.local", "192.0.2.11", "prefix"},
		{"VNI above 24 bits", func(c *Config) { c.Groups[0].Tunnel.VNI = 1 << 24 }, "groups[0].tunnel.vni", "16777216", "24 bits"},
		{"Geneve VNI above 24 bits", func(c *Config) { c.Groups[0].Tunnel.Type = TunnelGeneve; c.Groups[0].Tunnel.VNI = 1 << 25 },
			"groups[0].tunnel.vni", "33554432", "Geneve VNI is 24 bits"},
		{"VF VNI out of range", func(c *Config) { c.Groups[0].VFs[0].VNI = -1 }, "groups[0].vfs[0].vni", "-1", "24 bits"},
		{"VNI without a tunnel", func(c *Config) { c.Groups[0].Tunnel = nil; c.Groups[0].VFs[0].VNI = 7 }, "groups[0].vfs[0].vni", "7", "needs groups[0].tunnel"},
		{"one VLAN two VNIs", func(c *Config) {
			c.Groups[0].VFs[0].VNI = 7
			c.Groups[0].VFs = append(c.Groups[0].VFs, VFConfig{PF: 0, VF: 1, VLAN: 10, VNI: 8})
		}, "groups[0].vfs[1].vni", "8", "one VLAN in the bridge, one segment"},
		{"MTU chain does not fit", func(c *Config) { c.Groups[0].MTU, c.Groups[0].VFs[0].VNI = 9000, 5010 }, "groups[0].tunnel.underlay_mtu", "9000",
			"mtu 9000 plus 50 bytes of VXLAN over IPv4 headers needs 9050"},
		{"MTU chain IPv6", func(c *Config) {
			c.Groups[0].MTU, c.Groups[0].Tunnel.UnderlayMTU, c.Groups[0].VFs[0].VNI = 1500, 1550, 5010
			c.Groups[0].Tunnel.Local, c.Groups[0].Tunnel.Remotes = "2001:db8::11/64", []string{"2001:db8::12"}
		}, "groups[0].tunnel.underlay_mtu", "1550", "plus 70 bytes of VXLAN over IPv6 headers needs 1570"},
		{"MTU chain with an inner VLAN tag", func(c *Config) { c.Groups[0].MTU, c.Groups[0].Tunnel.UnderlayMTU = 9000, 9050 }, "groups[0].tunnel.underlay_mtu", "9050",
			"mtu 9000 plus 54 bytes of VXLAN over IPv4 headers and an inner VLAN tag (vfs[0] is tagged on the default segment) needs 9054"},
		{"MTU chain with a trunk portgroup", func(c *Config) {
			c.Groups[0].MTU, c.Groups[0].Tunnel.UnderlayMTU, c.Groups[0].VFs[0].VNI = 9000, 9050, 5010
			c.Groups[0].Network = &Network{Portgroups: []Portgroup{{Name: "t", VLANMode: "trunk", Trunks: []int{20, 30}}}}
		}, "groups[0].tunnel.underlay_mtu", "9050", "and an inner VLAN tag (network.portgroups[0] is tagged on the default segment) needs 9054"},
		{"remote unreachable", func(c *Config) { c.Groups[0].Tunnel.Remotes = []string{"198.51.100.7"} }, "groups[0].tunnel.remotes[0]", "198.51.100.7", "no route"},
		{"route without a gateway", func(c *Config) { c.Groups[0].Tunnel.Routes = []string{"198.51.100.0/24"} }, "groups[0].tunnel.routes[0]", "198.51.100.0/24", "needs tunnel.gateway"},
		{"gateway outside the prefix", func(c *Config) { c.Groups[0].Tunnel.Gateway = "10.0.0.1" }, "groups[0].tunnel.gateway", "10.0.0.1", "inside local's prefix"},
		{"remote of another family", func(c *Config) { c.Groups[0].Tunnel.Remotes = []string{"2001:db8::1"} }, "groups[0].tunnel.remotes[0]", "2001:db8::1", "family"},
		{"flow with others", func(c *Config) { c.Groups[0].Tunnel.Remotes = []string{"192.0.2.12", "flow"} }, "groups[0].tunnel.remotes[1]", "flow", "only entry"},
		{"no segment", func(c *Config) { c.Groups[0].Tunnel.VNI = 0 }, "groups[0].tunnel.vni", "0", "no segment"},
		{"trunk VF on a segment", func(c *Config) {
			c.Groups[0].VFs[0].VNI, c.Groups[0].VFs[0].VLANMode, c.Groups[0].VFs[0].VLAN, c.Groups[0].VFs[0].Trunks = 7, "trunk", 0, []int{5}
		}, "groups[0].vfs[0].vni", "7", "access port"},
		{"legacy group", func(c *Config) { *c = *withTunnel(legacyConfig(), goodTunnel()) }, "groups[0].tunnel", "vxlan", "switchdev"},
		{"dst_port", func(c *Config) { c.Groups[0].Tunnel.DstPort = 70000 }, "groups[0].tunnel.dst_port", "70000", "UDP port"},
		{"two groups, one local address", func(c *Config) {
			g2 := c.Groups[0]
			g2.Name, g2.PFs, g2.Bond.Name, g2.OVS.Bridge = "lag1", []string{"ens2f0np0", "ens2f1np1"}, "bond1", "br-lag1"
			g2.Attachments, g2.VFs = nil, nil
			tn := *g2.Tunnel
			tn.PortPrefix = "vy"
			g2.Tunnel = &tn
			c.Groups = append(c.Groups, g2)
		}, "groups[1].tunnel.local", "192.0.2.11", "already used at groups[0].tunnel.local"},
		{"two groups, one port name", func(c *Config) {
			g2 := c.Groups[0]
			g2.Name, g2.PFs, g2.Bond.Name, g2.OVS.Bridge = "lag1", []string{"ens2f0np0", "ens2f1np1"}, "bond1", "br-lag1"
			g2.Attachments, g2.VFs = nil, nil
			tn := *g2.Tunnel
			tn.Local = "192.0.2.21/24"
			g2.Tunnel = &tn
			c.Groups = append(c.Groups, g2)
		}, "groups[1].tunnel.port_prefix", "vx5000r0", "already used"},
	}
	if err := withTunnel(validConfig(), goodTunnel()).Validate(); err != nil {
		t.Fatalf("valid tunnel refused: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := withTunnel(validConfig(), goodTunnel())
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

func TestParseTunnel(t *testing.T) {
	text := strings.Replace(exampleText(t), "    attachments:", `    tunnel:
      type: vxlan
      local: 192.0.2.11/24
      underlay_vlan: 30
      underlay_mtu: 9100
      remotes: [192.0.2.12]
      vni: 5000
    attachments:`, 1)
	c, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if tn := c.Groups[0].Tunnel; tn == nil || tn.UnderlayVLAN != 30 || tn.Remotes[0] != "192.0.2.12" {
		t.Fatalf("tunnel decoded as %+v", tn)
	}
}
