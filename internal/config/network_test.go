package config

import (
	"reflect"
	"strings"
	"testing"
)

func withNetwork(c *Config, n Network) *Config {
	c.Groups[0].Network = &n
	return c
}

// The default pool: every VF no vfs entry gives to the host and no
// attachment takes, PF by PF; a configured pool as written.
func TestPoolVFs(t *testing.T) {
	c := validConfig() // attachment pf 0 vf 0
	g := &c.Groups[0]
	if got := g.PoolVFs(); got != nil {
		t.Errorf("no network: pool %v, want none", got)
	}
	g.Network = &Network{}
	g.VFs = append(g.VFs, VFConfig{PF: 1, VF: 2, Driver: "mlx5_core"}, VFConfig{PF: 1, VF: 3, VLAN: 7})
	want := []VFRef{{0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 3}}
	if got := g.PoolVFs(); !reflect.DeepEqual(got, want) {
		t.Errorf("default pool %v, want %v (not pf0 vf0: attached; not pf1 vf2: the host's)", got, want)
	}
	if got := g.NetworkName(); got != "vflag-lag0" {
		t.Errorf("default name %q", got)
	}
	g.Network = &Network{Name: "pool-a", VFs: []NetworkVF{{1, 1}, {0, 3}}}
	if got, want := g.PoolVFs(), []VFRef{{1, 1}, {0, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("configured pool %v, want %v", got, want)
	}
	if got := g.NetworkName(); got != "pool-a" {
		t.Errorf("name %q", got)
	}
}

func TestValidateNetwork(t *testing.T) {
	good := []Portgroup{{Name: "tenant-a", Default: true, VLAN: 100}, {Name: "trunk", VLANMode: "trunk", Trunks: []int{10, 20}}}
	if err := withNetwork(validConfig(), Network{Portgroups: good}).Validate(); err != nil {
		t.Fatalf("valid network refused: %v", err)
	}
	if err := withNetwork(legacyConfig(), Network{Portgroups: []Portgroup{{Name: "a", VLAN: 5}}}).Validate(); err != nil {
		t.Fatalf("valid legacy network refused: %v", err)
	}
	// A pool VF's own VLAN is the VLAN of a port that names no portgroup
	// when there is no default one: kept.
	unshadowed := withNetwork(validConfig(), Network{Portgroups: []Portgroup{{Name: "a", VLAN: 5}}})
	unshadowed.Groups[0].VFs = append(unshadowed.Groups[0].VFs, VFConfig{PF: 1, VF: 2, VLAN: 7})
	if err := unshadowed.Validate(); err != nil {
		t.Fatalf("pool VF's VLAN without a default portgroup refused: %v", err)
	}
	tests := []struct {
		name  string
		c     *Config
		path  string
		value string
	}{
		{"name ..", withNetwork(validConfig(), Network{Name: ".."}), "groups[0].network.name", ".."},
		{"name with a slash", withNetwork(validConfig(), Network{Name: "a/b"}), "groups[0].network.name", "a/b"},
		{"VF beyond numvfs", withNetwork(validConfig(), Network{VFs: []NetworkVF{{0, 4}}}), "groups[0].network.vfs[0].vf", "4"},
		{"VF of no PF", withNetwork(validConfig(), Network{VFs: []NetworkVF{{2, 0}}}), "groups[0].network.vfs[0].pf", "2"},
		{"VF twice", withNetwork(validConfig(), Network{VFs: []NetworkVF{{0, 1}, {0, 1}}}), "groups[0].network.vfs[1]", "pf 0 vf 1"},
		{"VF an attachment takes", withNetwork(validConfig(), Network{VFs: []NetworkVF{{0, 0}}}), "groups[0].network.vfs[0]", "pf 0 vf 0"},
		{"VF the host takes", func() *Config {
			c := withNetwork(validConfig(), Network{VFs: []NetworkVF{{1, 1}}})
			c.Groups[0].VFs = append(c.Groups[0].VFs, VFConfig{PF: 1, VF: 1, Driver: "mlx5_core"})
			return c
		}(), "groups[0].network.vfs[0]", "pf 1 vf 1"},
		{"empty pool", func() *Config {
			c := withNetwork(validConfig(), Network{})
			c.Groups[0].NumVFs = 1
			c.Groups[0].VFs = append(c.Groups[0].VFs, VFConfig{PF: 1, VF: 0, Driver: "mlx5_core"})
			return c
		}(), "groups[0].network.vfs", ""},
		{"portgroup without a name", withNetwork(validConfig(), Network{Portgroups: []Portgroup{{VLAN: 3}}}), "groups[0].network.portgroups[0].name", ""},
		{"portgroup twice", withNetwork(validConfig(), Network{Portgroups: []Portgroup{{Name: "a"}, {Name: "a"}}}), "groups[0].network.portgroups[1].name", "a"},
		{"two defaults", withNetwork(validConfig(), Network{Portgroups: []Portgroup{{Name: "a", Default: true}, {Name: "b", Default: true}}}), "groups[0].network.portgroups[1].default", "true"},
		{"VLAN 4095", withNetwork(validConfig(), Network{Portgroups: []Portgroup{{Name: "a", VLAN: 4095}}}), "groups[0].network.portgroups[0].vlan", "4095"},
		{"trunk with a VLAN", withNetwork(validConfig(), Network{Portgroups: []Portgroup{{Name: "a", VLANMode: "trunk", VLAN: 3}}}), "groups[0].network.portgroups[0].vlan", "3"},
		{"trunk VLAN out of range", withNetwork(validConfig(), Network{Portgroups: []Portgroup{{Name: "a", VLANMode: "trunk", Trunks: []int{5000}}}}), "groups[0].network.portgroups[0].trunks[0]", "5000"},
		{"legacy trunks", withNetwork(legacyConfig(), Network{Portgroups: []Portgroup{{Name: "a", Trunks: []int{5}}}}), "groups[0].network.portgroups[0].trunks", "[5]"},
		{"legacy vlan_mode", withNetwork(legacyConfig(), Network{Portgroups: []Portgroup{{Name: "a", VLANMode: "trunk"}}}), "groups[0].network.portgroups[0].vlan_mode", "trunk"},
		{"VLAN a default portgroup shadows", func() *Config {
			c := withNetwork(validConfig(), Network{Portgroups: []Portgroup{{Name: "a", Default: true, VLAN: 5}}})
			c.Groups[0].VFs = append(c.Groups[0].VFs, VFConfig{PF: 1, VF: 2, VLAN: 7})
			return c
		}(), "groups[0].vfs[1].vlan", "7"},
		{"trunks a default portgroup shadows", func() *Config {
			c := withNetwork(validConfig(), Network{Portgroups: []Portgroup{{Name: "a", Default: true, VLAN: 5}}})
			c.Groups[0].VFs = append(c.Groups[0].VFs, VFConfig{PF: 1, VF: 2, VLANMode: "trunk", Trunks: []int{8}})
			return c
		}(), "groups[0].vfs[1].vlan_mode", "trunk"},
		{"two groups, one network name", func() *Config {
			c := withNetwork(validConfig(), Network{Name: "pool"})
			g2 := c.Groups[0]
			g2.Name, g2.PFs, g2.Bond.Name, g2.OVS.Bridge = "lag1", []string{"ens2f0np0", "ens2f1np1"}, "bond1", "br-lag1"
			g2.Attachments, g2.VFs = nil, nil
			c.Groups = append(c.Groups, g2)
			return c
		}(), "groups[1].network.name", "pool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if want := tt.path + ": \"" + tt.value + "\""; !strings.Contains(err.Error(), want) {
				t.Fatalf("error does not name %s: %v", want, err)
			}
		})
	}
}

func TestParseNetwork(t *testing.T) {
	text := strings.Replace(exampleText(t), "    attachments:", `    network:
      vfs: [{pf: 0, vf: 2}, {pf: 1, vf: 2}]   # not pf 0 vf 1: its own vlan would be shadowed
      portgroups:
        - {name: tenant-a, vlan: 100, default: true}
        - {name: trunk, vlan_mode: trunk, trunks: [10, 20]}
    attachments:`, 1)
	c, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Groups[0]
	if g.Network == nil || len(g.Network.Portgroups) != 2 || g.Network.Portgroups[1].Trunks[1] != 20 || !g.Network.Portgroups[0].Default {
		t.Fatalf("network decoded as %+v", g.Network)
	}
	if _, err := Parse([]byte(strings.Replace(text, "vlan: 100, default", "vlan: 100, defualt", 1))); err == nil || !strings.Contains(err.Error(), "groups[0].network.portgroups[0].defualt") {
		t.Errorf("misspelt key: %v", err)
	}
}
