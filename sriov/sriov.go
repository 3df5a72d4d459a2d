package sriov

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vflag/vflag/internal/pciaddr"
	"github.com/vflag/vflag/internal/sysfs"
)

// Addr is a validated PCI address in domain:bus:device.function form, lower
// case: "0000:61:00.0". It is the project's one PCI address type.
type Addr = pciaddr.Addr

// ParseAddr validates a PCI address ("0000:61:00.0"; a missing domain means
// 0000; upper case is made lower): pciaddr.Parse.
func ParseAddr(s string) (Addr, error) { return pciaddr.Parse(s) }

// VF is one virtual function of a PF.
type VF struct {
	Index int  `json:"index"`
	Addr  Addr `json:"pci"`
}

// Host is the PCI side of the host, through its kernel filesystem.
type Host struct {
	FS sysfs.FS
	// PollInterval bounds the wait loops (default 5ms); waits never sleep longer.
	PollInterval time.Duration
}

// Function is a device whose sysfs directory vflag reads: a PCI address, or
// a Device on any bus (netdevsim's PFs share one non-PCI device).
type Function interface {
	Dir() string // "/sys/bus/pci/devices/0000:61:00.0"
	String() string
}

// An Addr is a Function: its Dir is /sys/bus/pci/devices/<addr>.
var _ Function = Addr("")

// Device is a device named by bus and name: "pci/0000:61:00.0",
// "netdevsim/netdevsim10". It is what a PF netdev's "device" link points to.
type Device string

var devicePartRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`) })

// ParseDevice validates "<bus>/<name>" (no other slash, no "..", neither
// part "."): Dir is then the device's own directory.
func ParseDevice(s string) (Device, error) {
	bus, name, ok := strings.Cut(s, "/")
	if !ok || !devicePartRE().MatchString(bus) || !devicePartRE().MatchString(name) || strings.Contains(s, "..") || bus == "." || name == "." {
		return "", fmt.Errorf("invalid device %q: want <bus>/<name>, e.g. pci/0000:61:00.0", s)
	}
	return Device(s), nil
}

// PCIDevice is the Device of a PCI function.
func PCIDevice(a Addr) Device { return Device("pci/" + string(a)) }

// Dir implements Function.
func (d Device) Dir() string {
	bus, name, _ := strings.Cut(string(d), "/")
	return path.Join("/sys/bus", bus, "devices", name)
}

func (d Device) String() string { return string(d) }

// PCI returns the device's PCI address, if it is a PCI function.
func (d Device) PCI() (Addr, bool) {
	bus, name, _ := strings.Cut(string(d), "/")
	if bus != "pci" {
		return "", false
	}
	a, err := ParseAddr(name)
	return a, err == nil
}

// DeviceOfNetdev returns the device behind a netdev
// ("readlink /sys/class/net/$if/device; readlink .../device/subsystem").
func (h Host) DeviceOfNetdev(name string) (Device, error) {
	target, err := h.FS.Readlink(path.Join("/sys/class/net", name, "device"))
	if err != nil {
		return "", fmt.Errorf("device of %s: %w", name, err)
	}
	base := path.Base(target)
	if a, err := ParseAddr(base); err == nil && strings.Count(base, ":") == 2 {
		return PCIDevice(a), nil
	}
	subsys, err := h.FS.Readlink(path.Join("/sys/class/net", name, "device", "subsystem"))
	if err != nil {
		return "", fmt.Errorf("bus of %s's device %s: %w", name, base, err)
	}
	return ParseDevice(path.Base(subsys) + "/" + base)
}

// HasPCIVFs tells whether a device creates PCI VFs (it has
// sriov_totalvfs, and virtfn links once VFs exist). netdevsim has
// sriov_numvfs only: its VFs exist in the PF's netlink VF list alone.
func (h Host) HasPCIVFs(pf Function) bool {
	_, err := h.FS.ReadFile(path.Join(pf.Dir(), "sriov_totalvfs"))
	return err == nil
}

// HasSRIOV tells whether a device has sriov_numvfs.
func (h Host) HasSRIOV(pf Function) bool {
	_, err := h.FS.ReadFile(path.Join(pf.Dir(), "sriov_numvfs"))
	return err == nil
}

func dev(f Function, file string) string { return path.Join(f.Dir(), file) }

func (h Host) readInt(p string) (int, error) {
	s, err := sysfs.ReadString(h.FS, p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", p, err)
	}
	return n, nil
}

// Exists tells whether a PCI device is present ("test -e /sys/bus/pci/devices/$a").
func (h Host) Exists(a Function) bool { return sysfs.Exists(h.FS, dev(a, "")) }

// IsPF tells whether the device can have VFs (it has sriov_totalvfs).
func (h Host) IsPF(a Function) bool {
	_, err := h.FS.ReadFile(dev(a, "sriov_totalvfs"))
	return err == nil
}

// TotalVFs reads the PF's VF limit ("cat /sys/bus/pci/devices/$pf/sriov_totalvfs").
func (h Host) TotalVFs(pf Function) (int, error) {
	n, err := h.readInt(dev(pf, "sriov_totalvfs"))
	if err != nil {
		return 0, fmt.Errorf("read totalvfs of %s: %w", pf, err)
	}
	return n, nil
}

// NumVFs reads the PF's enabled VF count ("cat /sys/bus/pci/devices/$pf/sriov_numvfs").
func (h Host) NumVFs(pf Function) (int, error) {
	n, err := h.readInt(dev(pf, "sriov_numvfs"))
	if err != nil {
		return 0, fmt.Errorf("read numvfs of %s: %w", pf, err)
	}
	return n, nil
}

// SetNumVFs sets the VF count ("echo 0 > sriov_numvfs; echo $n > sriov_numvfs"):
// a change between two non-zero counts goes through 0, as the kernel demands.
func (h Host) SetNumVFs(pf Function, n int) error {
	cur, err := h.NumVFs(pf)
	if err != nil {
		return err
	}
	if cur == n {
		return nil
	}
	p := dev(pf, "sriov_numvfs")
	if cur != 0 && n != 0 {
		// The kernel checks the range first (ERANGE): refuse before the
		// write of 0 removes the VFs that are there.
		if total, terr := h.TotalVFs(pf); terr == nil && n > total {
			return fmt.Errorf("set numvfs of %s to %d: above sriov_totalvfs %d: %w", pf, n, total, syscall.ERANGE)
		}
		if err := h.FS.WriteFile(p, []byte("0")); err != nil {
			return fmt.Errorf("reset numvfs of %s to 0: %w", pf, err)
		}
	}
	if err := h.FS.WriteFile(p, []byte(strconv.Itoa(n))); err != nil {
		return fmt.Errorf("set numvfs of %s to %d: %w", pf, n, err)
	}
	return nil
}

// Autoprobe reads sriov_drivers_autoprobe ("cat .../sriov_drivers_autoprobe").
func (h Host) Autoprobe(pf Function) (bool, error) {
	n, err := h.readInt(dev(pf, "sriov_drivers_autoprobe"))
	if err != nil {
		return false, fmt.Errorf("read drivers_autoprobe of %s: %w", pf, err)
	}
	return n != 0, nil
}

// SetAutoprobe writes it ("echo 0|1 > .../sriov_drivers_autoprobe").
func (h Host) SetAutoprobe(pf Function, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	if err := h.FS.WriteFile(dev(pf, "sriov_drivers_autoprobe"), []byte(v)); err != nil {
		return fmt.Errorf("set drivers_autoprobe of %s to %s: %w", pf, v, err)
	}
	return nil
}

// VFs lists the VFs whose virtfn links exist ("ls -l /sys/bus/pci/devices/$pf/virtfn*"), by index.
func (h Host) VFs(pf Function) ([]VF, error) {
	names, err := h.FS.ReadDir(dev(pf, ""))
	if err != nil {
		return nil, fmt.Errorf("list VFs of %s: %w", pf, err)
	}
	var vfs []VF
	for _, n := range names {
		idx, ok := strings.CutPrefix(n, "virtfn")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(idx)
		if err != nil {
			continue
		}
		target, err := h.FS.Readlink(dev(pf, n))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("read %s of %s: %w", n, pf, err)
		}
		a, err := ParseAddr(path.Base(target))
		if err != nil {
			return nil, fmt.Errorf("%s of %s: %w", n, pf, err)
		}
		vfs = append(vfs, VF{Index: i, Addr: a})
	}
	sort.Slice(vfs, func(i, j int) bool { return vfs[i].Index < vfs[j].Index })
	return vfs, nil
}

// CountVFs counts the VFs of a PF that exist: its virtfn links, as VFs
// lists them, without resolving each ("ls .../virtfn*").
func (h Host) CountVFs(pf Function) (int, error) {
	names, err := h.FS.ReadDir(dev(pf, ""))
	if err != nil {
		return 0, fmt.Errorf("list VFs of %s: %w", pf, err)
	}
	n := 0
	for _, name := range names {
		if idx, ok := strings.CutPrefix(name, "virtfn"); ok {
			if _, err := strconv.Atoi(idx); err == nil {
				n++
			}
		}
	}
	return n, nil
}

// VF returns the address of VF index of a PF ("readlink .../virtfn$index");
// ok is false when that VF does not exist (yet).
func (h Host) VF(pf Function, index int) (a Addr, ok bool, err error) {
	target, err := h.FS.Readlink(dev(pf, "virtfn"+strconv.Itoa(index)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read virtfn%d of %s: %w", index, pf, err)
	}
	a, err = ParseAddr(path.Base(target))
	if err != nil {
		return "", false, fmt.Errorf("virtfn%d of %s: %w", index, pf, err)
	}
	return a, true, nil
}

// PredictVF is the address VF index of PCI PF pf will have once made, by
// the PCI routing-ID rule the kernel uses (rid = rid(pf) + sriov_offset +
// index * sriov_stride, "cat .../sriov_offset .../sriov_stride"); ok is
// false where the PF does not say (no sriov_offset: netdevsim) or the
// address would fall outside the PF's bus range.
func (h Host) PredictVF(pf Addr, index int) (a Addr, ok bool) {
	off, err1 := h.readInt(dev(pf, "sriov_offset"))
	stride, err2 := h.readInt(dev(pf, "sriov_stride"))
	if err1 != nil || err2 != nil || stride <= 0 || index < 0 {
		return "", false
	}
	d, b, s, f := pf.Parts()
	rid := int(b<<8|s<<3|f) + off + index*stride
	if rid < 0 || rid > 0xffff {
		return "", false
	}
	a, err := pciaddr.FromParts(d, uint(rid>>8), uint(rid>>3&0x1f), uint(rid&7))
	if err != nil {
		return "", false
	}
	return a, true
}

// WaitVFs waits until the PF has exactly n VFs with their virtfn links
// (VF creation is asynchronous). It polls with a short bounded interval and
// gives up when ctx ends.
func (h Host) WaitVFs(ctx context.Context, pf Function, n int) ([]VF, error) {
	return h.WaitVFsReport(ctx, pf, n, nil)
}

// WaitVFsReport is WaitVFs telling report each new count of VFs seen
// (progress on a terminal: a ConnectX creates 64 VFs in seconds).
func (h Host) WaitVFsReport(ctx context.Context, pf Function, n int, report func(have int)) ([]VF, error) {
	seen := -1
	interval := h.PollInterval
	if interval <= 0 {
		interval = 5 * time.Millisecond
	}
	for {
		vfs, err := h.VFs(pf)
		if err != nil {
			return nil, err
		}
		if len(vfs) == n {
			return vfs, nil
		}
		if report != nil && len(vfs) != seen {
			seen = len(vfs)
			report(seen)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return vfs, fmt.Errorf("wait for %d VFs on %s (have %d): %w", n, pf, len(vfs), ctx.Err())
		case <-t.C:
		}
	}
}

// Driver returns the driver bound to a device, "" when unbound ("readlink .../driver").
func (h Host) Driver(a Addr) (string, error) {
	target, err := h.FS.Readlink(dev(a, "driver"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read driver of %s: %w", a, err)
	}
	return path.Base(target), nil
}

// Unbind detaches a device from its driver ("echo $a > /sys/bus/pci/drivers/$drv/unbind").
// An unbound device is success.
func (h Host) Unbind(a Addr) error {
	drv, err := h.Driver(a)
	if err != nil || drv == "" {
		return err
	}
	if err := ValidDriver(drv); err != nil {
		return err
	}
	err = h.FS.WriteFile(path.Join("/sys/bus/pci/drivers", drv, "unbind"), []byte(a))
	if err != nil && !errors.Is(err, errNoDev) {
		return fmt.Errorf("unbind %s from %s: %w", a, drv, err)
	}
	return nil
}

// Bind binds a device to a driver
// ("echo $drv > .../driver_override; echo $a > /sys/bus/pci/drivers/$drv/bind").
// Binding to the driver it already has is success.
func (h Host) Bind(a Addr, drv string) error {
	if err := ValidDriver(drv); err != nil {
		return err
	}
	cur, err := h.Driver(a)
	if err != nil {
		return err
	}
	if cur == drv {
		return nil
	}
	if cur != "" {
		if err := h.Unbind(a); err != nil {
			return err
		}
	}
	if err := h.SetDriverOverride(a, drv); err != nil {
		return err
	}
	if err := h.FS.WriteFile(path.Join("/sys/bus/pci/drivers", drv, "bind"), []byte(a)); err != nil {
		return fmt.Errorf("bind %s to %s: %w", a, drv, err)
	}
	return nil
}

// DriverOverride reads driver_override, "" when unset ("(null)").
func (h Host) DriverOverride(a Addr) (string, error) {
	s, err := sysfs.ReadString(h.FS, dev(a, "driver_override"))
	if err != nil {
		return "", fmt.Errorf("read driver_override of %s: %w", a, err)
	}
	if s == "(null)" {
		return "", nil
	}
	return s, nil
}

// SetDriverOverride sets driver_override ("echo $drv > .../driver_override");
// "" clears it.
func (h Host) SetDriverOverride(a Addr, drv string) error {
	if drv == "" {
		return h.ClearDriverOverride(a)
	}
	if err := ValidDriver(drv); err != nil {
		return err
	}
	if err := h.FS.WriteFile(dev(a, "driver_override"), []byte(drv)); err != nil {
		return fmt.Errorf("set driver_override of %s to %s: %w", a, drv, err)
	}
	return nil
}

// ClearDriverOverride empties driver_override ("echo > .../driver_override").
func (h Host) ClearDriverOverride(a Addr) error {
	if err := h.FS.WriteFile(dev(a, "driver_override"), []byte("\n")); err != nil {
		return fmt.Errorf("clear driver_override of %s: %w", a, err)
	}
	return nil
}

// Netdevs lists the network interfaces of a PCI function ("ls /sys/bus/pci/devices/$a/net").
// On mlx5 in switchdev mode the PF's function also lists its VF representors.
func (h Host) Netdevs(a Addr) ([]string, error) {
	names, err := h.FS.ReadDir(dev(a, "net"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list netdevs of %s: %w", a, err)
	}
	return names, nil
}

// AddrOfNetdev returns the PCI address behind a netdev ("readlink /sys/class/net/$if/device");
// ok is false for a netdev with no PCI device (bond, veth, netdevsim).
func (h Host) AddrOfNetdev(name string) (a Addr, ok bool, err error) {
	target, err := h.FS.Readlink(path.Join("/sys/class/net", name, "device"))
	if errors.Is(err, fs.ErrNotExist) {
		if !sysfs.Exists(h.FS, path.Join("/sys/class/net", name)) {
			return "", false, fmt.Errorf("netdev %s: %w", name, fs.ErrNotExist)
		}
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read device of %s: %w", name, err)
	}
	a, perr := ParseAddr(path.Base(target))
	if perr != nil {
		return "", false, nil
	}
	return a, true, nil
}

var driverRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`) })

// ValidDriver checks a driver name before it becomes part of a sysfs path
// (/sys/bus/pci/drivers/$drv/bind): the one rule, used by the config too.
func ValidDriver(d string) error {
	if !driverRE().MatchString(d) || d == "." || d == ".." {
		return fmt.Errorf("invalid driver name %q", d)
	}
	return nil
}
