package doctor

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var mstKeyRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(?:\[\d+\])?$`)

// FuzzParseMstconfig: whatever mstconfig prints, its settings have
// mstconfig's names and one-word values, and read the same printed again
// in `mstconfig -e q` columns; mstNumber reads each value without panic.
func FuzzParseMstconfig(f *testing.F) {
	for _, s := range []string{
		mstconfigReady,
		"Configurations:                              Next Boot\n         SRIOV_EN                            True(1)\n         NUM_OF_VFS                          8\n",
		"Configurations:\n  *  NUM_OF_VFS   0   16   16\n  PF_BAR2_SIZE[1]  0 0 0\n  bad row\n",
		"Device #1:\nConfigurations:\n\tA\tB\tC\tD\tE\n",
		"No device\n",
		"Configurations:\nX (1)\nY ()\nZ 9999999999999999999999(1)\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		cfg := parseMstconfig(out)
		if len(cfg) == 0 {
			return
		}
		var b strings.Builder
		b.WriteString("Configurations:              Default    Current    Next Boot\n")
		for k, v := range cfg {
			if !mstKeyRE.MatchString(k) {
				t.Fatalf("parseMstconfig(%q): setting %q", out, k)
			}
			for _, s := range []string{v.Default, v.Current, v.Next} {
				if s == "" || strings.IndexFunc(s, isSpaceRune) >= 0 {
					t.Fatalf("parseMstconfig(%q): %s = %+v", out, k, v)
				}
				if n, err := strconv.Atoi(s); err == nil && mstNumber(s) != n {
					t.Fatalf("mstNumber(%q) = %d", s, mstNumber(s))
				}
				_ = mstNumber(s)
			}
			fmt.Fprintf(&b, "        %s    %s    %s    %s\n", k, v.Default, v.Current, v.Next)
		}
		back := parseMstconfig(b.String())
		if len(back) != len(cfg) {
			t.Fatalf("parseMstconfig(%q) = %v; printed again it reads %v", out, cfg, back)
		}
		for k, v := range cfg {
			if back[k] != v {
				t.Fatalf("parseMstconfig(%q): %s = %+v; printed again it reads %+v", out, k, v, back[k])
			}
		}
	})
}

// isSpaceRune is what \s matches (RE2: [\t\n\f\r ]).
func isSpaceRune(r rune) bool { return strings.ContainsRune("\t\n\f\r ", r) }

// FuzzParseDevlinkBoolParam: whatever devlink prints, the reading does not
// panic, is the same every time (not an accident of map order), and a
// value it reads reads the same in devlink's own form.
func FuzzParseDevlinkBoolParam(f *testing.F) {
	for _, s := range []string{
		roceParam(pf0, true), roceParam(pf0, false), `{"param":{}}`, ``, `{"param":{"pci/0000:61:00.0":[{"name":"enable_roce","values":[{"cmode":"runtime","value":"true"}]}]}}`,
		`{"param":{"pci/0000:61:00.0":[{"name":"enable_roce","values":[{"cmode":"driverinit","value":1}]}]}}`,
		`{"param":{"pci/0000:61:00.0":[{"name":"enable_roce","values":[]},{"name":"enable_roce","values":[{"value":"maybe"},{"value":true}]}]}}`,
		`{"param":{"pci/0000:61:00.0":[{"name":"enable_roce","values":[{"value":true}]}],"pci/0000:61:00.1":[{"name":"enable_roce","values":[{"value":false}]}]}}`,
	} {
		f.Add(s, "enable_roce")
	}
	f.Fuzz(func(t *testing.T, out, name string) {
		v, ok := parseDevlinkBoolParam(out, name)
		for range 32 {
			if v2, ok2 := parseDevlinkBoolParam(out, name); v2 != v || ok2 != ok {
				t.Fatalf("parseDevlinkBoolParam(%q, %q) = %v, %v, then %v, %v", out, name, v, ok, v2, ok2)
			}
		}
		if !ok {
			return
		}
		q := strconv.Quote(name)
		for _, again := range []string{
			fmt.Sprintf(`{"param":{"pci/0000:61:00.0":[{"name":%s,"type":"generic","values":[{"cmode":"driverinit","value":%t}]}]}}`, q, v),
			fmt.Sprintf(`{"param":{"pci/0000:61:00.0":[{"name":%s,"values":[{"cmode":"runtime","value":"%t"}]}]}}`, q, v),
		} {
			if v2, ok2 := parseDevlinkBoolParam(again, name); !ok2 || v2 != v {
				t.Fatalf("parseDevlinkBoolParam(%q, %q) = %v; %q reads %v, %v", out, name, v, again, v2, ok2)
			}
		}
	})
}
