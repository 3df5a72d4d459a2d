package sriov_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/vflag/vflag/sriov"
)

func TestParseDevice(t *testing.T) {
	for _, s := range []string{"pci/0000:61:00.0", "netdevsim/netdevsim10", "auxiliary/mlx5_core.eth.0"} {
		d, err := sriov.ParseDevice(s)
		if err != nil || string(d) != s || d.String() != s {
			t.Errorf("ParseDevice(%q) = %q, %v", s, d, err)
		}
	}
	for _, s := range []string{
		"", "pci", "pci/", "/0000:61:00.0", "pci/0000:61:00.0/net",
		"pci/..", "../pci", "netdevsim/..x", "pci/a b", "pci/a\n",
		"pci/.", "./0000:61:00.0", // Dir would be /sys/bus/pci/devices, /sys/bus/devices/... (FuzzParseDevice)
		"pci/" + strings.Repeat("a", 65),
	} {
		if d, err := sriov.ParseDevice(s); err == nil {
			t.Errorf("ParseDevice(%q) = %q, want an error", s, d)
		} else if !strings.Contains(err.Error(), "invalid device") {
			t.Errorf("ParseDevice(%q): %q", s, err)
		}
	}
}

func TestDeviceDirAndPCI(t *testing.T) {
	for _, c := range []struct {
		dev sriov.Device
		dir string
		pci sriov.Addr
		ok  bool
	}{
		{sriov.PCIDevice(pf0), "/sys/bus/pci/devices/0000:61:00.0", pf0, true},
		{"netdevsim/netdevsim10", "/sys/bus/netdevsim/devices/netdevsim10", "", false},
		{"pci/not-an-address", "/sys/bus/pci/devices/not-an-address", "", false},
	} {
		if got := c.dev.Dir(); got != c.dir {
			t.Errorf("%s.Dir() = %q, want %q", c.dev, got, c.dir)
		}
		a, ok := c.dev.PCI()
		if a != c.pci || ok != c.ok {
			t.Errorf("%s.PCI() = %q, %v; want %q, %v", c.dev, a, ok, c.pci, c.ok)
		}
	}
	if sriov.PCIDevice(pf0) != "pci/0000:61:00.0" || pf0.Dir() != sriov.PCIDevice(pf0).Dir() {
		t.Errorf("PCIDevice(%s) = %q, Dir %q vs %q", pf0, sriov.PCIDevice(pf0), pf0.Dir(), sriov.PCIDevice(pf0).Dir())
	}
}

// netdevsimFixture adds a netdevsim device with two port netdevs sharing it
// (no sriov_totalvfs, no virtfn links: netdevsim's VFs are not PCI functions).
func netdevsimFixture(t *testing.T) fixture {
	x := standard(t)
	x.link("/sys/devices/netdevsim1/subsystem", "../../bus/netdevsim")
	x.link("/sys/bus/netdevsim/devices/netdevsim1", "../../../devices/netdevsim1")
	x.file("/sys/devices/netdevsim1/sriov_numvfs", "2\n")
	x.dir("/sys/devices/netdevsim1/net/eni2")
	x.link("/sys/devices/netdevsim1/net/eni2/device", "../../../netdevsim1")
	x.link("/sys/class/net/eni2", "../../devices/netdevsim1/net/eni2")
	// A device without a subsystem link (broken or unknown bus).
	x.dir("/sys/devices/odd0/net/odd0")
	x.link("/sys/devices/odd0/net/odd0/device", "../../../odd0")
	x.link("/sys/class/net/odd0", "../../devices/odd0/net/odd0")
	return x
}

func TestDeviceOfNetdev(t *testing.T) {
	x := netdevsimFixture(t)
	h := sriov.Host{FS: x.fs()}
	for _, c := range []struct {
		name string
		want sriov.Device
	}{
		{"p0", "pci/0000:61:00.0"},
		{"eth7", "pci/0000:61:00.0"}, // a representor sits on its PF's function
		{"eni1", "netdevsim/netdevsim1"},
		{"eni2", "netdevsim/netdevsim1"}, // both ports share one device
	} {
		d, err := h.DeviceOfNetdev(c.name)
		if err != nil || d != c.want {
			t.Errorf("DeviceOfNetdev(%s) = %q, %v; want %q", c.name, d, err, c.want)
		}
	}
	for _, c := range []struct {
		name     string
		notExist bool
	}{
		{"bond0", true},   // no device link
		{"nosuch0", true}, // no netdev
		{"odd0", true},    // no subsystem link
	} {
		d, err := h.DeviceOfNetdev(c.name)
		if err == nil {
			t.Errorf("DeviceOfNetdev(%s) = %q, want an error", c.name, d)
			continue
		}
		if !strings.Contains(err.Error(), c.name) {
			t.Errorf("DeviceOfNetdev(%s): %q does not name the netdev", c.name, err)
		}
		if c.notExist && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("DeviceOfNetdev(%s): %v, want fs.ErrNotExist", c.name, err)
		}
	}
}

func TestHasPCIVFsAndSRIOV(t *testing.T) {
	x := netdevsimFixture(t)
	h := sriov.Host{FS: x.fs()}
	nsim := sriov.Device("netdevsim/netdevsim1")
	for _, c := range []struct {
		f           sriov.Function
		pciVFs, any bool
	}{
		{pf0, true, true},
		{sriov.PCIDevice(pf1), true, true},
		{sriov.Addr(vfAddr(0)), false, false},
		{nsim, false, true},
		{sriov.Addr("0000:99:00.0"), false, false},
	} {
		if got := h.HasPCIVFs(c.f); got != c.pciVFs {
			t.Errorf("HasPCIVFs(%s) = %v, want %v", c.f, got, c.pciVFs)
		}
		if got := h.HasSRIOV(c.f); got != c.any {
			t.Errorf("HasSRIOV(%s) = %v, want %v", c.f, got, c.any)
		}
	}
	// The counting functions take any Function.
	if n, err := h.NumVFs(nsim); err != nil || n != 2 {
		t.Errorf("NumVFs(%s) = %d, %v; want 2", nsim, n, err)
	}
	if n, err := h.NumVFs(sriov.PCIDevice(pf0)); err != nil || n != 12 {
		t.Errorf("NumVFs(pci/%s) = %d, %v; want 12", pf0, n, err)
	}
	if _, err := h.TotalVFs(nsim); err == nil || !strings.Contains(err.Error(), string(nsim)) {
		t.Errorf("TotalVFs(%s): %v, want an error naming the device", nsim, err)
	}
	if vfs, err := h.VFs(nsim); err != nil || len(vfs) != 0 {
		t.Errorf("VFs(%s) = %v, %v; want none (no virtfn links)", nsim, vfs, err)
	}
	if !h.Exists(nsim) || h.Exists(sriov.Device("netdevsim/netdevsim9")) {
		t.Errorf("Exists on netdevsim devices is wrong")
	}
}
