package eswitch_test

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
)

func TestValidIfName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"p0", true},
		{"bond0", true},
		{"a", true},
		{"eth0.100", true}, // VLAN-style dots
		{"br-int", true},   // dashes
		{"ens1f0np0", true},
		{"vf_rep.1-2", true},
		{"abcdefghijklmno", true}, // 15 characters: IFNAMSIZ-1
		{"...", true},             // only "." and ".." are reserved

		{"", false},
		{".", false},
		{"..", false},
		{"abcdefghijklmnop", false}, // 16 characters
		{"a/b", false},
		{"/", false},
		{"../p0", false},
		{"p0/../../etc", false},
		{"bond 0", false},
		{" p0", false},
		{"p0 ", false},
		{"p0\t", false},
		{"p0\n", false},
		{"eth0:1", false}, // dev_valid_name refuses ':' (an IPv4 alias label, never a netdev)
	}
	for _, c := range cases {
		err := eswitch.ValidIfName(c.name)
		if c.ok && err != nil {
			t.Errorf("ValidIfName(%q): %v, want ok", c.name, err)
		}
		if !c.ok {
			if err == nil {
				t.Errorf("ValidIfName(%q) = nil, want an error", c.name)
			} else if !strings.Contains(err.Error(), "invalid interface name") {
				t.Errorf("ValidIfName(%q): %q does not say what is wrong", c.name, err)
			}
		}
	}
}
