package config

import (
	"strings"
	"testing"
)

// rateConfig is validConfig with a rate group and per-VF limits.
func rateConfig() *Config {
	c := validConfig()
	g := &c.Groups[0]
	g.RateGroups = []RateGroup{{Name: "tenant1", TxMax: 1000}, {Name: "tenant2", TxMax: 2000, TxShare: 500}}
	g.VFs[0].TxMax, g.VFs[0].TxShare, g.VFs[0].RateGroup = 100, 10, "tenant1"
	g.VFs = append(g.VFs, VFConfig{PF: 0, VF: 1, TxMax: 300})
	return c
}

func TestValidateAcceptsRates(t *testing.T) {
	if err := rateConfig().Validate(); err != nil {
		t.Fatalf("rate config rejected: %v", err)
	}
}

func TestValidateRejectsRates(t *testing.T) {
	legacy := func(c *Config) {
		g := &c.Groups[0]
		g.Eswitch, g.Bond, g.OVS.Bridge = "legacy", Bond{}, ""
		g.VFs[0].VLAN = 0
		g.RateGroups = nil
		g.VFs[0].RateGroup = ""
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		path   string
		value  string
		msg    string
	}{
		{"rate group name with a capital", func(c *Config) { c.Groups[0].RateGroups[1].Name = "Tenant2" }, "groups[0].rate_groups[1].name", "Tenant2", "[a-z0-9_-]"},
		{"rate group name all digits", func(c *Config) { c.Groups[0].RateGroups[1].Name = "12" }, "groups[0].rate_groups[1].name", "12", "starting with a letter"},
		{"rate group name with a slash", func(c *Config) { c.Groups[0].RateGroups[1].Name = "a/b" }, "groups[0].rate_groups[1].name", "a/b", ""},
		{"rate group declared twice", func(c *Config) { c.Groups[0].RateGroups[1].Name = "tenant1" }, "groups[0].rate_groups[1].name", "tenant1", "declared twice"},
		{"rate group tx_share above tx_max", func(c *Config) { c.Groups[0].RateGroups[1].TxShare = 2001 }, "groups[0].rate_groups[1].tx_share", "2001", "exceeds tx_max"},
		{"rate group tx_max above 400G", func(c *Config) { c.Groups[0].RateGroups[0].TxMax = 400001 }, "groups[0].rate_groups[0].tx_max", "400001", "400000"},
		{"VF tx_max negative", func(c *Config) { c.Groups[0].VFs[1].TxMax = -1 }, "groups[0].vfs[1].tx_max", "-1", ""},
		{"VF tx_share above tx_max", func(c *Config) { c.Groups[0].VFs[0].TxShare = 101 }, "groups[0].vfs[0].tx_share", "101", "exceeds tx_max (100"},
		{"VF tx_share above 400G", func(c *Config) { c.Groups[0].VFs[1].TxShare = 500000 }, "groups[0].vfs[1].tx_share", "500000", ""},
		{"VF unknown rate group", func(c *Config) { c.Groups[0].VFs[1].RateGroup = "tenant9" }, "groups[0].vfs[1].rate_group", "tenant9", "is not a rate group of groups[0].rate_groups"},
		{"legacy VF tx_max", legacy, "groups[0].vfs[1].tx_max", "300", "needs eswitch switchdev (legacy groups: min_tx_rate/max_tx_rate through the PF)"},
		{"legacy VF tx_share", func(c *Config) { legacy(c) }, "groups[0].vfs[0].tx_share", "10", "needs eswitch switchdev"},
		{"legacy VF rate_group", func(c *Config) { legacy(c); c.Groups[0].VFs[1].RateGroup = "tenant1" }, "groups[0].vfs[1].rate_group", "tenant1", "needs eswitch switchdev"},
		{"legacy rate_groups", func(c *Config) {
			rg := c.Groups[0].RateGroups
			legacy(c)
			c.Groups[0].RateGroups = rg
		}, "groups[0].rate_groups[0]", "tenant1", "needs eswitch switchdev (legacy groups: min_tx_rate/max_tx_rate through the PF)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rateConfig()
			tt.mutate(c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			want := tt.path + ": \"" + tt.value + "\""
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error does not name %s (%s): %v", want, tt.msg, err)
			}
		})
	}
}
