package pciaddr

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// canonicalRE is the canonical form, written out independently of valid.
var canonicalRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$`)

// FuzzParse: Parse accepts exactly what canonicalizes (lower case, trimmed,
// a missing domain 0000) to dddd:bb:dd.f with device <= 1f and function
// <= 7; what it accepts is a fixed point of Parse, of FromParts(Parts())
// and of its Slot and Function; a canonical input comes back unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0000:61:00.0", "0000:AF:1F.3", "61:00.1", " 0000:61:00.2\n", "0000:61:20.0", "0000:61:00.8",
		"0000:61:00.0/..", "pci/0000:61:00.0", "ffff:ff:1f.7", "0:0:0.0", "0000:61:00.0 ", "0000:6g:00.0",
		"0000:61:00.٣", ":00.0", "0000::00.0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		c := strings.ToLower(strings.TrimSpace(s))
		if strings.Count(c, ":") == 1 {
			c = "0000:" + c
		}
		if want := canonicalRE.MatchString(c); (err == nil) != want {
			t.Fatalf("Parse(%q) = %q, %v; want accepted %v", s, a, err, want)
		}
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("Parse(%q): the error does not quote the value: %v", s, err)
			}
			return
		}
		if string(a) != c || a.String() != c {
			t.Fatalf("Parse(%q) = %q, want %q", s, a, c)
		}
		if s == c && a.String() != s {
			t.Fatalf("Parse(%q) changed a canonical address to %q", s, a)
		}
		if b, err := Parse(a.String()); err != nil || b != a {
			t.Fatalf("Parse(Parse(%q)) = %q, %v", s, b, err)
		}
		d, b, dev, fn := a.Parts()
		if back, err := FromParts(d, b, dev, fn); err != nil || back != a {
			t.Fatalf("FromParts(Parts(%q)) = %q, %v", a, back, err)
		}
		if a.Slot() != string(a[:10]) || a.Function() != int(fn) || a.Dir() != "/sys/bus/pci/devices/"+string(a) {
			t.Fatalf("%q: slot %q, function %d, dir %q", a, a.Slot(), a.Function(), a.Dir())
		}
	})
}
