package virttest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// FakeVFs makes libvirtd see the given PCI addresses ("0000:61:00.2") as
// SR-IOV virtual functions. libvirt refuses to define a hostdev network
// whose <forward> lists an <address> that is not one: it checks that
// /sys/bus/pci/devices/<address>/physfn exists. In the daemon's private
// mount namespace, /sys/bus/pci/devices is replaced by a directory that
// holds an absolute symlink to every real device of the host and, for each
// fake address, a directory with a physfn link to a fake physical function
// (<address> with function 0). Nothing else of a fake device exists: a
// domain that starts with one fails, but networks define and start, and
// network ports (virsh net-port-create) are allocated from them.
func FakeVFs(pcis ...string) Option {
	return func(o *options) { o.fakeVFs = append(o.fakeVFs, pcis...) }
}

const (
	pciDevicesDir = "/sys/bus/pci/devices"
	fakePCIDir    = "fake-pci-devices" // under the daemon's root
)

var pciRE = regexp.MustCompile(`^([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2})\.[0-7]$`)

func (d *Daemon) prepareFakeVFs(pcis []string) error {
	dir := filepath.Join(d.base, fakePCIDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(pciDevicesDir)
	if err != nil {
		return err
	}
	real := map[string]bool{}
	for _, e := range entries {
		real[e.Name()] = true
		target, err := filepath.EvalSymlinks(filepath.Join(pciDevicesDir, e.Name()))
		if err != nil {
			return err
		}
		if err := os.Symlink(target, filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	for _, pci := range pcis {
		m := pciRE.FindStringSubmatch(pci)
		if m == nil {
			return fmt.Errorf("bad PCI address %q: want dddd:bb:ss.f, lower case", pci)
		}
		if real[pci] {
			return fmt.Errorf("PCI address %s exists on this host", pci)
		}
		// The fake PF of a fake VF may be another fake VF's directory
		// (0000:61:01.0 for 0000:61:01.3): any order of pcis works.
		vf := filepath.Join(dir, pci)
		pf := filepath.Join(dir, m[1]+".0")
		if err := os.MkdirAll(pf, 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(vf, 0o755); err != nil {
			return err
		}
		if err := os.Symlink(pf, filepath.Join(vf, "physfn")); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}
