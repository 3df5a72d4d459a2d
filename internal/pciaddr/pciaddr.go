// Package pciaddr is the PCI address type of vflag, shared by sriov (sysfs)
// and libvirtx (domain XML). It is a leaf: it imports the standard library
// only.
package pciaddr

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Addr is a validated PCI address in domain:bus:device.function form, lower
// case: "0000:61:00.0". Parse and FromParts make one; a conversion from an
// unchecked string does not validate it.
type Addr string

// Parse validates a PCI address and returns it in canonical form: lower
// case ("0000:AF:1F.3" -> "0000:af:1f.3"), surrounding white space dropped
// (as read from a file), and a missing domain meaning 0000 ("61:00.1" ->
// "0000:61:00.1"). It wants a 4-digit hex domain, 2-digit hex bus, 2-digit
// hex device from 00 to 1f and a function from 0 to 7, and nothing else: no
// path ("0000:61:00.0/.."), no bus prefix ("pci/0000:61:00.0"). The error
// quotes the value.
func Parse(s string) (Addr, error) {
	a := strings.ToLower(strings.TrimSpace(s))
	if strings.Count(a, ":") == 1 {
		a = "0000:" + a
	}
	if !valid(a) {
		return "", fmt.Errorf("invalid PCI address %q: want dddd:bb:dd.f, e.g. 0000:61:00.0", s)
	}
	return Addr(a), nil
}

// valid checks the canonical form "dddd:bb:dd.f" (lower-case hex, device
// up to 1f, function up to 7).
func valid(a string) bool {
	if len(a) != len("0000:00:00.0") || a[4] != ':' || a[7] != ':' || a[10] != '.' {
		return false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9} {
		if !isHex(a[i]) {
			return false
		}
	}
	return a[8] <= '1' && a[11] >= '0' && a[11] <= '7'
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// FromParts makes the address of domain, bus, device and function, as libvirt
// spells them out (<address domain='0x0000' bus='0x61' slot='0x00'
// function='0x2'/>); an error when one is out of range.
func FromParts(domain, bus, device, function uint) (Addr, error) {
	if domain > 0xffff || bus > 0xff || device > 0x1f || function > 7 {
		return "", fmt.Errorf("invalid PCI address domain %#x bus %#x device %#x function %#x: out of range (ffff, ff, 1f, 7)", domain, bus, device, function)
	}
	return Addr(fmt.Sprintf("%04x:%02x:%02x.%x", domain, bus, device, function)), nil
}

// Parts splits the address into its numbers; all zero when a is not valid.
func (a Addr) Parts() (domain, bus, device, function uint) {
	if !valid(string(a)) {
		return 0, 0, 0, 0
	}
	num := func(s string) uint {
		n, _ := strconv.ParseUint(s, 16, 16)
		return uint(n)
	}
	return num(string(a[0:4])), num(string(a[5:7])), num(string(a[8:10])), num(string(a[11:12]))
}

// Slot is the address without its function, "0000:61:00": the functions of
// one device (both ports of a NIC) share it. For a string that is not a
// valid address it is the string up to its last '.' (all of it without
// one), so that two different invalid strings do not look like one slot.
func (a Addr) Slot() string {
	if i := strings.LastIndexByte(string(a), '.'); i >= 0 {
		return string(a[:i])
	}
	return string(a)
}

// Function is the PCI function number, 0 to 7; -1 when a is not valid.
func (a Addr) Function() int {
	if !valid(string(a)) {
		return -1
	}
	return int(a[len(a)-1] - '0')
}

// Dir is the device's sysfs directory, "/sys/bus/pci/devices/0000:61:00.0".
func (a Addr) Dir() string { return path.Join("/sys/bus/pci/devices", string(a)) }

func (a Addr) String() string { return string(a) }
