package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vflag/vflag/internal/cfgdecode"
)

// FuzzParse: whatever the bytes, Parse does not panic; a config it accepts
// has groups that each have a valid name and PFs, and is a fixed point of
// ApplyDefaults and Validate; an error it returns says something and, as a
// list of field errors, names each field's path.
func FuzzParse(f *testing.F) {
	examples, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range examples {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"groups: []\n",
		"groups:\n  - name: g\n    eswitch: legacy\n    pfs: [eth0]\n    numvfs: 2\n",
		"groups:\n  - name: g\n    pfs: [\"0000:61:00.0\", \"61:00.1\"]\n    numvfs: 4\n    bond: {name: bond0, mode: 802.3ad}\n    ovs: {bridge: br0}\n",
		"groups:\n  - name: g\n    pfs: eth0,eth1\n    numvfs: \"4\"\n    lag_timeout: 30\n",
		"lag_timeout: 30\ngroups:\n- {name: x, pfs: [a, b], numvfs: 4.5}\n",
		"groups:\n  - name: g\n   pfs: [a]\n",
		"groups: &a [*a]\n",
		"groups:\n  - name: g\n    eswitch: legacy\n    pfs: [eth0]\n    numvfs: 2\n    vfs:\n      - {pf: 0, vf: 1, mac: \"52:54:00:00:00:01\", vlan: 4095, qos: 9, trust: yes}\n    rate_groups: [{name: t1, tx_max: 100}]\n",
		"sim: {nics: [{name: a}]}\ngroups: [{name: g}]\n",
		"{1: 2, [3]: {4: 5}}\n",
		"groups:\n  - name: g\n    1: x\n", // mapstructure panicked on a key that is not a string
		"groups:\n  - ~: 0\n    name: g\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("Parse(%q): an error without text", data)
			}
			var es Errors
			if errors.As(err, &es) {
				if len(es) == 0 {
					t.Fatalf("Parse(%q): an empty error list", data)
				}
				for _, e := range es {
					if e.Path == "" || e.Msg == "" {
						t.Fatalf("Parse(%q): a field error without its path or message: %#v", data, e)
					}
				}
			}
			var se *cfgdecode.SyntaxError
			if errors.As(err, &se) && (se.Line < 1 || se.Msg == "") {
				t.Fatalf("Parse(%q): syntax error without its line: %#v", data, se)
			}
			return
		}
		if c == nil {
			t.Fatalf("Parse(%q): no config and no error", data)
		}
		if len(c.Groups) == 0 {
			t.Fatalf("Parse(%q): accepted a config without groups", data)
		}
		for i, g := range c.Groups {
			if !groupNameRE().MatchString(g.Name) {
				t.Fatalf("Parse(%q): groups[%d] has the name %q", data, i, g.Name)
			}
			if len(g.PFs) == 0 {
				t.Fatalf("Parse(%q): groups[%d] has no pfs", data, i)
			}
			for _, ref := range g.PFs {
				if err := validPFRef(ref); err != nil {
					t.Fatalf("Parse(%q): groups[%d] pf %q: %v", data, i, ref, err)
				}
			}
		}
		again := *c
		again.Groups = append([]Group(nil), c.Groups...)
		again.ApplyDefaults()
		if !reflect.DeepEqual(&again, c) {
			t.Fatalf("Parse(%q): defaults applied twice differ:\n%#v\n%#v", data, c, &again)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse(%q): the accepted config does not validate again: %v", data, err)
		}
	})
}
