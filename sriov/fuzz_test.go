package sriov_test

import (
	"path"
	"strings"
	"testing"

	"github.com/vflag/vflag/sriov"
)

// FuzzParseDevice: a Device that ParseDevice accepts is "<bus>/<name>",
// two path elements whose Dir is the device's own directory under
// /sys/bus/<bus>/devices (never a parent, never another bus); its PCI
// address, when it has one, is canonical.
func FuzzParseDevice(f *testing.F) {
	for _, s := range []string{
		"pci/0000:61:00.0", "netdevsim/netdevsim10", "auxiliary/mlx5_core.eth.0", "pci/61:00.1",
		"pci/..", "../pci", "pci/0000:61:00.0/net", "pci/a b", "pci/" + strings.Repeat("a", 65),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := sriov.ParseDevice(s)
		if err != nil {
			if !strings.Contains(err.Error(), "invalid device") {
				t.Fatalf("ParseDevice(%q): %v", s, err)
			}
			return
		}
		if string(d) != s || d.String() != s {
			t.Fatalf("ParseDevice(%q) = %q", s, d)
		}
		bus, name, ok := strings.Cut(s, "/")
		if !ok || bus == "" || name == "" || strings.Contains(name, "/") {
			t.Fatalf("ParseDevice(%q) accepted what is not <bus>/<name>", s)
		}
		for _, part := range []string{bus, name} {
			if part == "." || part == ".." || len(part) > 64 || strings.ContainsAny(part, " \t\n\x00") {
				t.Fatalf("ParseDevice(%q) accepted the path element %q", s, part)
			}
		}
		if dir := d.Dir(); dir != "/sys/bus/"+bus+"/devices/"+name || path.Clean(dir) != dir {
			t.Fatalf("ParseDevice(%q).Dir() = %q: not the device's directory", s, dir)
		}
		if a, ok := d.PCI(); ok {
			if b, err := sriov.ParseAddr(string(a)); err != nil || b != a || bus != "pci" {
				t.Fatalf("ParseDevice(%q).PCI() = %q (%v)", s, a, err)
			}
		}
	})
}
