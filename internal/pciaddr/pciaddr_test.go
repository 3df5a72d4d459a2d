package pciaddr

import (
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	valid := []struct{ in, want string }{
		{"0000:61:00.0", "0000:61:00.0"},
		{"0000:61:00.7", "0000:61:00.7"},
		{"0000:00:00.0", "0000:00:00.0"},
		{"ffff:ff:1f.7", "ffff:ff:1f.7"},
		{"0000:AF:1F.3", "0000:af:1f.3"},    // upper case is normalised, as sriov always did
		{"ABCD:ef:0a.1", "abcd:ef:0a.1"},    // mixed case
		{"61:00.1", "0000:61:00.1"},         // a missing domain means 0000
		{"3B:02.4", "0000:3b:02.4"},         // missing domain and upper case
		{" 0000:61:00.0\n", "0000:61:00.0"}, // as read from a file
		{"\t61:00.2 ", "0000:61:00.2"},
	}
	for _, c := range valid {
		a, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if string(a) != c.want {
			t.Errorf("Parse(%q) = %q, want %q", c.in, a, c.want)
		}
		// The canonical form parses to itself.
		if b, err := Parse(string(a)); err != nil || b != a {
			t.Errorf("Parse(%q) = %q, %v; want it unchanged", a, b, err)
		}
	}
	invalid := []struct{ in, why string }{
		{"", "empty"},
		{"   ", "blank"},
		{"p0", "a netdev name"},
		{"0000:61:00", "no function"},
		{"0000:61:00.", "empty function"},
		{"0000:61:00.8", "function above 7"},
		{"0000:61:00.9", "function above 7"},
		{"0000:61:00.a", "function above 7 (hex)"},
		{"0000:61:00.f", "function above 7 (hex)"},
		{"0000:61:00.00", "two-digit function"},
		{"0000:61:20.0", "device above 1f"},
		{"0000:61:ff.0", "device above 1f"},
		{"0000:61:0.0", "one-digit device"},
		{"0000:061:00.0", "three-digit bus"},
		{"0000:1:00.0", "one-digit bus"},
		{"00000:61:00.0", "five-digit domain"},
		{"000:61:00.0", "three-digit domain"},
		{"1:61:00.0", "one-digit domain"},
		{"000g:61:00.0", "domain not hex"},
		{"-001:61:00.0", "domain with a sign"},
		{"0x00:61:00.0", "domain with a 0x prefix"},
		{"0000:6g:00.0", "bus not hex"},
		{"0000:61:0g.0", "device not hex"},
		{"0000-61-00.0", "wrong separators"},
		{"0000:61.00.0", "wrong separator"},
		{"0000:61:00:0", "colon before the function"},
		{"0000:61:00.0.1", "trailing junk"},
		{"0000:61:00.0/../x", "slash injection"},
		{"0000:61:00.0/..", "a path"},
		{"../0000:61:00.0", "a path"},
		{"0000:61:00.0\x00", "a NUL"},
		{"0000:61:00.0 0000:61:00.1", "two addresses"},
		{"pci/0000:61:00.0", "a devlink handle"},
		{"pci_0000_61_00_2", "a libvirt node device name"},
		{"0000:61:00.\u0660", "a non-ASCII digit"},
		{"61.00.0", "no colon"},
		{"0:0:0:61:00.0", "too many colons"},
	}
	for _, c := range invalid {
		a, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) (%s) = %q, want an error", c.in, c.why, a)
			continue
		}
		if a != "" {
			t.Errorf("Parse(%q) returned %q with its error", c.in, a)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", c.in)) {
			t.Errorf("Parse(%q) error %q does not quote the value", c.in, err)
		}
	}
}

func TestAddrParts(t *testing.T) {
	for _, c := range []struct {
		in                      string
		slot                    string
		fn                      int
		dom, bus, dev, function uint
	}{
		{"0000:61:00.0", "0000:61:00", 0, 0, 0x61, 0, 0},
		{"0000:61:00.1", "0000:61:00", 1, 0, 0x61, 0, 1},
		{"0000:3b:1f.7", "0000:3b:1f", 7, 0, 0x3b, 0x1f, 7},
		{"abcd:ef:0a.2", "abcd:ef:0a", 2, 0xabcd, 0xef, 0x0a, 2},
		{"ffff:ff:1f.7", "ffff:ff:1f", 7, 0xffff, 0xff, 0x1f, 7},
	} {
		a, err := Parse(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if a.Slot() != c.slot || a.Function() != c.fn || a.String() != c.in {
			t.Errorf("%s: Slot %q Function %d String %q, want %q %d %q", c.in, a.Slot(), a.Function(), a.String(), c.slot, c.fn, c.in)
		}
		if d := a.Dir(); d != "/sys/bus/pci/devices/"+c.in {
			t.Errorf("%s: Dir %q", c.in, d)
		}
		dom, bus, dev, fn := a.Parts()
		if dom != c.dom || bus != c.bus || dev != c.dev || fn != c.function {
			t.Errorf("%s: Parts %#x %#x %#x %#x, want %#x %#x %#x %#x", c.in, dom, bus, dev, fn, c.dom, c.bus, c.dev, c.function)
		}
		b, err := FromParts(dom, bus, dev, fn)
		if err != nil || b != a {
			t.Errorf("FromParts(Parts(%s)) = %q, %v", c.in, b, err)
		}
	}
	// An Addr converted from an unchecked string: no panic, nothing that
	// looks like a real address.
	for _, s := range []Addr{"", "x", "<vf 3 of p0>", "0000:61:00.9"} {
		if d, b, v, f := s.Parts(); d|b|v|f != 0 {
			t.Errorf("Addr(%q).Parts() = %d %d %d %d, want zeros", s, d, b, v, f)
		}
		if f := s.Function(); f != -1 {
			t.Errorf("Addr(%q).Function() = %d, want -1", s, f)
		}
		_ = s.Slot()
	}
	if Addr("<vf 3 of p0>").Slot() == Addr("<vf 4 of p0>").Slot() {
		t.Error("two different invalid addresses share a slot")
	}
}

func TestFromParts(t *testing.T) {
	if a, err := FromParts(0, 0x61, 0, 2); err != nil || a != "0000:61:00.2" {
		t.Errorf("FromParts(0, 0x61, 0, 2) = %q, %v", a, err)
	}
	for _, p := range [][4]uint{
		{0x10000, 0, 0, 0},
		{0, 0x100, 0, 0},
		{0, 0, 0x20, 0},
		{0, 0, 0, 8},
	} {
		a, err := FromParts(p[0], p[1], p[2], p[3])
		if err == nil {
			t.Errorf("FromParts(%#x) = %q, want an error", p, a)
		} else if !strings.Contains(err.Error(), "out of range") {
			t.Errorf("FromParts(%#x): %v does not say what is wrong", p, err)
		}
	}
}
