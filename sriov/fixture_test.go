package sriov_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// fixture builds a kernel-like /sys tree of real files and symlinks under a
// temporary root, laid out as on a real host: /sys/bus/pci/devices/<bdf> and
// /sys/class/net/<if> are relative symlinks into /sys/devices.
type fixture struct {
	t    *testing.T
	root string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	return fixture{t: t, root: t.TempDir()}
}

func (x fixture) fs() sysfs.Dir { return sysfs.Dir(x.root) }

func (x fixture) real(p string) string { return filepath.Join(x.root, p) }

func (x fixture) file(p, content string) {
	x.t.Helper()
	if err := os.MkdirAll(filepath.Dir(x.real(p)), 0o755); err != nil {
		x.t.Fatal(err)
	}
	if err := os.WriteFile(x.real(p), []byte(content), 0o644); err != nil {
		x.t.Fatal(err)
	}
}

func (x fixture) dir(p string) {
	x.t.Helper()
	if err := os.MkdirAll(x.real(p), 0o755); err != nil {
		x.t.Fatal(err)
	}
}

func (x fixture) link(p, target string) {
	x.t.Helper()
	if err := os.MkdirAll(filepath.Dir(x.real(p)), 0o755); err != nil {
		x.t.Fatal(err)
	}
	if err := os.Symlink(target, x.real(p)); err != nil {
		x.t.Fatal(err)
	}
}

func (x fixture) content(p string) string {
	x.t.Helper()
	b, err := os.ReadFile(x.real(p))
	if err != nil {
		x.t.Fatal(err)
	}
	return string(b)
}

const (
	bridge = "/sys/devices/pci0000:60/0000:60:01.0"
	pf0    = sriov.Addr("0000:61:00.0")
	pf1    = sriov.Addr("0000:61:00.1")
)

// pciDev creates /sys/devices/.../<a> and its /sys/bus/pci/devices link.
func (x fixture) pciDev(a string) string {
	x.t.Helper()
	d := bridge + "/" + a
	x.dir(d)
	x.link("/sys/bus/pci/devices/"+a, "../../../devices/pci0000:60/0000:60:01.0/"+a)
	return d
}

// bindTo adds the driver link of a PCI device, with the kernel's relative target.
func (x fixture) bindTo(a, drv string) {
	x.t.Helper()
	x.dir("/sys/bus/pci/drivers/" + drv)
	x.link(bridge+"/"+a+"/driver", "../../../../bus/pci/drivers/"+drv)
}

// netdev creates /sys/devices/.../<a>/net/<name> with its device link and
// the /sys/class/net link.
func (x fixture) netdev(a, name string) {
	x.t.Helper()
	d := bridge + "/" + a + "/net/" + name
	x.file(d+"/address", "b8:ce:f6:00:00:01\n")
	x.link(d+"/device", "../../../"+a)
	x.link("/sys/class/net/"+name, "../../devices/pci0000:60/0000:60:01.0/"+a+"/net/"+name)
}

// vfAddr is VF i of PF0: offset 2, stride 1 (61:00.2 ... 61:00.7, 61:01.0 ...).
func vfAddr(i int) string {
	devfn := 2 + i
	return fmt.Sprintf("0000:61:%02x.%x", devfn>>3, devfn&7)
}

// standard builds a dual-port NIC: PF0 bound to mlx5_core with 12 VFs
// (VF0 bound to mlx5_core, VF1 to vfio-pci through driver_override), a
// representor listed under PF0's function, PF1 unbound without VFs or
// netdevs, a bond and a non-PCI netdev.
func standard(t *testing.T) fixture {
	x := newFixture(t)
	d0 := x.pciDev(string(pf0))
	x.file(d0+"/sriov_totalvfs", "16\n")
	x.file(d0+"/sriov_numvfs", "12\n")
	x.file(d0+"/sriov_drivers_autoprobe", "0\n")
	x.file(d0+"/driver_override", "(null)\n")
	x.bindTo(string(pf0), "mlx5_core")
	x.netdev(string(pf0), "p0")
	x.netdev(string(pf0), "eth7") // a representor: mlx5 registers it on the PF's function
	for i := 0; i < 12; i++ {
		a := vfAddr(i)
		vd := x.pciDev(a)
		x.file(vd+"/driver_override", "(null)\n")
		x.link(vd+"/physfn", "../"+string(pf0))
		x.link(d0+fmt.Sprintf("/virtfn%d", i), "../"+a)
	}
	x.bindTo(vfAddr(0), "mlx5_core")
	x.file(bridge+"/"+vfAddr(1)+"/driver_override", "vfio-pci\n")
	x.bindTo(vfAddr(1), "vfio-pci")

	d1 := x.pciDev(string(pf1))
	x.file(d1+"/sriov_totalvfs", "8\n")
	x.file(d1+"/sriov_numvfs", "0\n")
	x.file(d1+"/sriov_drivers_autoprobe", "1\n")

	x.file("/sys/devices/virtual/net/bond0/bonding/mode", "802.3ad 4\n")
	x.link("/sys/class/net/bond0", "../../devices/virtual/net/bond0")

	x.dir("/sys/devices/netdevsim1/net/eni1")
	x.link("/sys/devices/netdevsim1/net/eni1/device", "../../../netdevsim1")
	x.link("/sys/class/net/eni1", "../../devices/netdevsim1/net/eni1")
	return x
}

func TestParseAddr(t *testing.T) {
	valid := []struct{ in, want string }{
		{"0000:61:00.0", "0000:61:00.0"},
		{"0000:61:00.7", "0000:61:00.7"},
		{"0000:AF:1F.3", "0000:af:1f.3"},
		{"ABCD:ef:0a.1", "abcd:ef:0a.1"},
		{"61:00.1", "0000:61:00.1"},         // missing domain means 0000
		{"3B:02.4", "0000:3b:02.4"},         // missing domain and upper case
		{" 0000:61:00.0\n", "0000:61:00.0"}, // as read from a file
		{"ffff:ff:1f.7", "ffff:ff:1f.7"},
	}
	for _, c := range valid {
		a, err := sriov.ParseAddr(c.in)
		if err != nil {
			t.Errorf("ParseAddr(%q): %v", c.in, err)
			continue
		}
		if string(a) != c.want {
			t.Errorf("ParseAddr(%q) = %q, want %q", c.in, a, c.want)
		}
	}
	invalid := []string{
		"",
		"p0",
		"0000:61:00",       // no function
		"0000:61:00.8",     // function above 7
		"0000:61:20.0",     // device above 1f
		"0000:61:0.0",      // one-digit device
		"0000:061:00.0",    // three-digit bus
		"00000:61:00.0",    // five-digit domain
		"1:61:00.0",        // short domain
		"0000:6g:00.0",     // not hex
		"0000-61-00.0",     // wrong separators
		"0000:61:00.0.1",   // trailing junk
		"0000:61:00.0/..",  // a path
		"pci/0000:61:00.0", // a devlink handle
		"61.00.0",
	}
	for _, in := range invalid {
		a, err := sriov.ParseAddr(in)
		if err == nil {
			t.Errorf("ParseAddr(%q) = %q, want an error", in, a)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParseAddr(%q) error %q does not quote the input", in, err)
		}
	}
}

func TestAddrSlotFunction(t *testing.T) {
	for _, c := range []struct {
		in   string
		slot string
		fn   int
	}{
		{"0000:61:00.0", "0000:61:00", 0},
		{"0000:61:00.1", "0000:61:00", 1},
		{"0000:3b:1f.7", "0000:3b:1f", 7},
	} {
		a, err := sriov.ParseAddr(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if a.Slot() != c.slot || a.Function() != c.fn || a.String() != c.in {
			t.Errorf("%s: Slot %q Function %d String %q, want %q %d %q", c.in, a.Slot(), a.Function(), a.String(), c.slot, c.fn, c.in)
		}
	}
}

func TestCountsParsing(t *testing.T) {
	cases := []struct {
		name     string
		content  string // "" and missing: no file
		missing  bool
		want     int
		wantErr  string
		notExist bool
	}{
		{name: "newline", content: "8\n", want: 8},
		{name: "no newline", content: "64", want: 64},
		{name: "zero", content: "0\n", want: 0},
		{name: "spaces", content: " 127 \n", want: 127},
		{name: "garbage", content: "eight\n", wantErr: "parse"},
		{name: "empty", content: "", wantErr: "parse"},
		{name: "missing", missing: true, notExist: true},
	}
	for _, c := range cases {
		for _, file := range []string{"sriov_totalvfs", "sriov_numvfs"} {
			t.Run(c.name+"/"+file, func(t *testing.T) {
				x := newFixture(t)
				d := x.pciDev(string(pf0))
				if !c.missing {
					x.file(d+"/"+file, c.content)
				}
				h := sriov.Host{FS: x.fs()}
				get, what := h.TotalVFs, "totalvfs"
				if file == "sriov_numvfs" {
					get, what = h.NumVFs, "numvfs"
				}
				n, err := get(pf0)
				switch {
				case c.wantErr == "" && !c.notExist:
					if err != nil || n != c.want {
						t.Fatalf("got %d, %v; want %d", n, err, c.want)
					}
				default:
					if err == nil {
						t.Fatalf("got %d, want an error", n)
					}
					if !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), string(pf0)) {
						t.Errorf("error %q does not say what was read of which PF", err)
					}
					if c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr) {
						t.Errorf("error %q does not mention %q", err, c.wantErr)
					}
					if c.notExist && !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("error %v does not wrap fs.ErrNotExist", err)
					}
				}
			})
		}
	}
}

func TestFixtureCountsAndPF(t *testing.T) {
	x := standard(t)
	h := sriov.Host{FS: x.fs()}
	if n, err := h.TotalVFs(pf0); err != nil || n != 16 {
		t.Errorf("TotalVFs(pf0) = %d, %v; want 16", n, err)
	}
	if n, err := h.NumVFs(pf0); err != nil || n != 12 {
		t.Errorf("NumVFs(pf0) = %d, %v; want 12", n, err)
	}
	if n, err := h.NumVFs(pf1); err != nil || n != 0 {
		t.Errorf("NumVFs(pf1) = %d, %v; want 0", n, err)
	}
	for _, c := range []struct {
		a            sriov.Addr
		exists, isPF bool
	}{
		{pf0, true, true},
		{pf1, true, true},
		{sriov.Addr(vfAddr(3)), true, false},
		{"0000:99:00.0", false, false},
	} {
		if got := h.Exists(c.a); got != c.exists {
			t.Errorf("Exists(%s) = %v, want %v", c.a, got, c.exists)
		}
		if got := h.IsPF(c.a); got != c.isPF {
			t.Errorf("IsPF(%s) = %v, want %v", c.a, got, c.isPF)
		}
	}
}

func TestFixtureAutoprobe(t *testing.T) {
	x := standard(t)
	h := sriov.Host{FS: x.fs()}
	if on, err := h.Autoprobe(pf0); err != nil || on {
		t.Errorf("Autoprobe(pf0) = %v, %v; want false", on, err)
	}
	if on, err := h.Autoprobe(pf1); err != nil || !on {
		t.Errorf("Autoprobe(pf1) = %v, %v; want true", on, err)
	}
	if _, err := h.Autoprobe(sriov.Addr("0000:99:00.0")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Autoprobe of a missing device: %v, want fs.ErrNotExist", err)
	}
	// The kernel attribute takes "0" or "1"; check what is written.
	p := bridge + "/" + string(pf1) + "/sriov_drivers_autoprobe"
	x.file(p, "")
	if err := h.SetAutoprobe(pf1, false); err != nil {
		t.Fatal(err)
	}
	if got := x.content(p); got != "0" {
		t.Errorf("SetAutoprobe(false) wrote %q, want \"0\"", got)
	}
	x.file(p, "")
	if err := h.SetAutoprobe(pf1, true); err != nil {
		t.Fatal(err)
	}
	if got := x.content(p); got != "1" {
		t.Errorf("SetAutoprobe(true) wrote %q, want \"1\"", got)
	}
}

func TestFixtureVFsSortedByIndex(t *testing.T) {
	x := standard(t)
	// Entries that are not virtfn links must be ignored.
	x.file(bridge+"/"+string(pf0)+"/virtfn_notes", "x\n")
	x.dir(bridge + "/" + string(pf0) + "/virtfnX")
	h := sriov.Host{FS: x.fs()}

	// The directory order is lexical (virtfn1, virtfn10, virtfn11, virtfn2...).
	names, err := x.fs().ReadDir("/sys/bus/pci/devices/" + string(pf0))
	if err != nil {
		t.Fatal(err)
	}
	if i, j := indexOf(names, "virtfn10"), indexOf(names, "virtfn9"); i < 0 || j < 0 || i > j {
		t.Fatalf("fixture listing %v is not lexical: the sort test would prove nothing", names)
	}

	vfs, err := h.VFs(pf0)
	if err != nil {
		t.Fatal(err)
	}
	var want []sriov.VF
	for i := 0; i < 12; i++ {
		want = append(want, sriov.VF{Index: i, Addr: sriov.Addr(vfAddr(i))})
	}
	if !reflect.DeepEqual(vfs, want) {
		t.Errorf("VFs(pf0) =\n%v\nwant\n%v", vfs, want)
	}
	if want[9].Addr != "0000:61:01.3" || want[10].Addr != "0000:61:01.4" {
		t.Fatalf("vfAddr is wrong: %v", want[9:11])
	}

	if vfs, err := h.VFs(pf1); err != nil || len(vfs) != 0 {
		t.Errorf("VFs(pf1) = %v, %v; want none", vfs, err)
	}
	if _, err := h.VFs(sriov.Addr("0000:99:00.0")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("VFs of a missing device: %v, want fs.ErrNotExist", err)
	}
}

func TestFixtureVFsBadLink(t *testing.T) {
	x := standard(t)
	x.link(bridge+"/"+string(pf1)+"/virtfn0", "../not-a-pci-address")
	_, err := sriov.Host{FS: x.fs()}.VFs(pf1)
	if err == nil || !strings.Contains(err.Error(), "virtfn0") {
		t.Errorf("VFs with a bad virtfn0 target: %v, want an error naming virtfn0", err)
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func TestFixtureDriver(t *testing.T) {
	x := standard(t)
	h := sriov.Host{FS: x.fs()}
	for _, c := range []struct {
		a    sriov.Addr
		want string
	}{
		{pf0, "mlx5_core"},
		{pf1, ""}, // no driver link: unbound
		{sriov.Addr(vfAddr(0)), "mlx5_core"},
		{sriov.Addr(vfAddr(1)), "vfio-pci"},
		{sriov.Addr(vfAddr(2)), ""},
	} {
		got, err := h.Driver(c.a)
		if err != nil || got != c.want {
			t.Errorf("Driver(%s) = %q, %v; want %q", c.a, got, err, c.want)
		}
	}
}

func TestFixtureDriverOverride(t *testing.T) {
	x := standard(t)
	h := sriov.Host{FS: x.fs()}
	for _, c := range []struct {
		a    sriov.Addr
		want string
	}{
		{pf0, ""}, // "(null)\n"
		{sriov.Addr(vfAddr(1)), "vfio-pci"},
		{sriov.Addr(vfAddr(2)), ""},
	} {
		got, err := h.DriverOverride(c.a)
		if err != nil || got != c.want {
			t.Errorf("DriverOverride(%s) = %q, %v; want %q", c.a, got, err, c.want)
		}
	}
	if _, err := h.DriverOverride(pf1); err == nil || !strings.Contains(err.Error(), string(pf1)) {
		t.Errorf("DriverOverride without the file: %v, want an error naming %s", err, pf1)
	}

	// Clearing writes one newline (an empty write clears the override).
	p := bridge + "/" + vfAddr(1) + "/driver_override"
	x.file(p, "")
	if err := h.ClearDriverOverride(sriov.Addr(vfAddr(1))); err != nil {
		t.Fatal(err)
	}
	if got := x.content(p); got != "\n" {
		t.Errorf("ClearDriverOverride wrote %q, want \"\\n\"", got)
	}
}

func TestFixtureUnbind(t *testing.T) {
	x := standard(t)
	h := sriov.Host{FS: x.fs()}
	// The kernel's unbind attribute is write-only; an empty file stands in.
	x.file("/sys/bus/pci/drivers/mlx5_core/unbind", "")
	if err := h.Unbind(sriov.Addr(vfAddr(0))); err != nil {
		t.Fatal(err)
	}
	if got := x.content("/sys/bus/pci/drivers/mlx5_core/unbind"); got != vfAddr(0) {
		t.Errorf("Unbind wrote %q to mlx5_core/unbind, want %q", got, vfAddr(0))
	}
	// An unbound device: success, and nothing is written (there is no
	// driver whose unbind file could be written; a write would fail).
	if err := h.Unbind(sriov.Addr(vfAddr(2))); err != nil {
		t.Errorf("Unbind of an unbound VF: %v", err)
	}
}

func TestFixtureBindRefusesBadDriverName(t *testing.T) {
	x := standard(t)
	h := sriov.Host{FS: x.fs()}
	p := bridge + "/" + vfAddr(2) + "/driver_override"
	x.file(p, "")
	for _, drv := range []string{"", "../../../../etc", "vfio pci", "a/b", strings.Repeat("x", 65)} {
		if err := h.Bind(sriov.Addr(vfAddr(2)), drv); err == nil {
			t.Errorf("Bind(%q) succeeded", drv)
		}
	}
	if got := x.content(p); got != "" {
		t.Errorf("a refused Bind wrote %q to driver_override", got)
	}
}

func TestFixtureNetdevs(t *testing.T) {
	x := standard(t)
	h := sriov.Host{FS: x.fs()}
	for _, c := range []struct {
		a    sriov.Addr
		want []string
	}{
		{pf0, []string{"eth7", "p0"}}, // the uplink and a representor, sorted
		{pf1, nil},                    // no net directory
		{sriov.Addr(vfAddr(2)), nil},
	} {
		got, err := h.Netdevs(c.a)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Netdevs(%s) = %q, %v; want %q", c.a, got, err, c.want)
		}
	}
}

func TestFixtureAddrOfNetdev(t *testing.T) {
	x := standard(t)
	h := sriov.Host{FS: x.fs()}
	for _, c := range []struct {
		name     string
		want     sriov.Addr
		ok       bool
		notExist bool
	}{
		{name: "p0", want: pf0, ok: true},
		{name: "eth7", want: pf0, ok: true}, // a representor's device is its PF's function
		{name: "bond0", ok: false},          // no device link
		{name: "eni1", ok: false},           // a device that is not PCI (netdevsim)
		{name: "nosuch0", notExist: true},
	} {
		a, ok, err := h.AddrOfNetdev(c.name)
		if c.notExist {
			if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), c.name) {
				t.Errorf("AddrOfNetdev(%s) = %q, %v, %v; want an fs.ErrNotExist error naming it", c.name, a, ok, err)
			}
			continue
		}
		if err != nil || ok != c.ok || a != c.want {
			t.Errorf("AddrOfNetdev(%s) = %q, %v, %v; want %q, %v", c.name, a, ok, err, c.want, c.ok)
		}
	}
}
