package validate

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/vflag/vflag/internal/sysfs"
)

// RoCE modes as configfs rdma_cm default_roce_mode and gid_attrs/types spell them.
const (
	RoCEv1 = "IB/RoCE v1"
	RoCEv2 = "RoCE v2"
)

const (
	ibClass   = "/sys/class/infiniband"
	rdmaCMDir = "/sys/kernel/config/rdma_cm"
	zeroGID   = "0000:0000:0000:0000:0000:0000:0000:0000"
)

// RDMADevice is one RDMA device and the PCI function it belongs to.
type RDMADevice struct {
	Name   string `json:"name"`
	PCI    string `json:"pci"`
	Bonded bool   `json:"bonded"` // named mlx5_bond_<n>
	Ports  []int  `json:"ports"`
	Netdev string `json:"netdev,omitempty"` // found on this netdev (RDMADevicesFor)
}

// RDMADevicesOf lists the RDMA devices under the PCI functions pcis
// ("ls /sys/bus/pci/devices/<bdf>/infiniband"), in that order.
func RDMADevicesOf(f sysfs.FS, pcis []string) ([]RDMADevice, error) {
	var out []RDMADevice
	for _, pci := range pcis {
		if pci == "" {
			continue
		}
		names, err := f.ReadDir(path.Join("/sys/bus/pci/devices", pci, "infiniband"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list RDMA devices of %s: %w", pci, err)
		}
		for _, n := range names {
			d := RDMADevice{Name: n, PCI: pci, Bonded: strings.HasPrefix(n, "mlx5_bond_")}
			d.Ports, err = Ports(f, n)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// RDMADevicesFor lists the RDMA devices under the PCI functions pcis and,
// when netdevs is not empty, those running on one of netdevs: a software
// device whose parent is one (rxe, siw: /sys/class/infiniband/<dev>/parent)
// or any device with a GID on one (gid_attrs/ndevs: the bond's IPs). Each
// device once, in that order.
func RDMADevicesFor(f sysfs.FS, pcis, netdevs []string) ([]RDMADevice, error) {
	out, err := RDMADevicesOf(f, pcis)
	if err != nil || len(netdevs) == 0 {
		return out, err
	}
	all, err := AllRDMADevices(f)
	if err != nil {
		return nil, err
	}
	on := func(n string) bool { return n != "" && slices.Contains(netdevs, n) }
	for _, d := range all {
		if slices.ContainsFunc(out, func(o RDMADevice) bool { return o.Name == d.Name }) {
			continue
		}
		if parent, _ := sysfs.ReadString(f, path.Join(ibClass, d.Name, "parent")); on(parent) {
			d.Netdev = parent
		}
		for _, p := range d.Ports {
			if d.Netdev != "" {
				break
			}
			gids, err := GIDs(f, d.Name, p)
			if err != nil {
				return nil, err
			}
			if i := slices.IndexFunc(gids, func(g GID) bool { return on(g.Netdev) }); i >= 0 {
				d.Netdev = gids[i].Netdev
			}
		}
		if d.Netdev != "" {
			out = append(out, d)
		}
	}
	return out, nil
}

// AllRDMADevices lists /sys/class/infiniband.
func AllRDMADevices(f sysfs.FS) ([]RDMADevice, error) {
	names, err := f.ReadDir(ibClass)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	var out []RDMADevice
	for _, n := range names {
		d := RDMADevice{Name: n, Bonded: strings.HasPrefix(n, "mlx5_bond_")}
		if t, err := f.Readlink(path.Join(ibClass, n, "device")); err == nil {
			d.PCI = path.Base(t)
		}
		if d.Ports, err = Ports(f, n); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Ports lists a device's port numbers ("ls /sys/class/infiniband/$dev/ports").
func Ports(f sysfs.FS, dev string) ([]int, error) {
	if err := validDevName(dev); err != nil {
		return nil, err
	}
	names, err := f.ReadDir(path.Join(ibClass, dev, "ports"))
	if err != nil {
		return nil, fmt.Errorf("ports of RDMA device %s: %w", dev, err)
	}
	var out []int
	for _, n := range names {
		if p, err := strconv.Atoi(n); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func validDevName(dev string) error {
	if dev == "" || dev == "." || dev == ".." || strings.ContainsAny(dev, "/ \n%") || len(dev) > 63 {
		return fmt.Errorf("device: %q is not an RDMA device name", dev)
	}
	return nil
}

// GID is one entry of a port's GID table, as show_gids prints it.
type GID struct {
	Dev    string `json:"dev"`
	Port   int    `json:"port"`
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	IPv4   string `json:"ipv4,omitempty"` // for ::ffff:a.b.c.d GIDs
	Type   string `json:"type"`           // "IB/RoCE v1", "RoCE v2"
	Netdev string `json:"netdev"`
}

// GIDs reads the non-empty entries of a port's GID table
// (ports/<p>/gids/N, gid_attrs/types/N, gid_attrs/ndevs/N).
func GIDs(f sysfs.FS, dev string, port int) ([]GID, error) {
	if err := validDevName(dev); err != nil {
		return nil, err
	}
	base := path.Join(ibClass, dev, "ports", strconv.Itoa(port))
	names, err := f.ReadDir(path.Join(base, "gids"))
	if err != nil {
		return nil, fmt.Errorf("GID table of %s port %d: %w", dev, port, err)
	}
	var out []GID
	for _, n := range names {
		idx, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		g, err := sysfs.ReadString(f, path.Join(base, "gids", n))
		if err != nil {
			return nil, fmt.Errorf("GID %d of %s port %d: %w", idx, dev, port, err)
		}
		if g == zeroGID || g == "" {
			continue // an empty slot reads as the zero GID
		}
		typ, err := sysfs.ReadString(f, path.Join(base, "gid_attrs", "types", n))
		if errors.Is(err, syscall.EINVAL) {
			continue // emptied meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("GID %d type of %s port %d: %w", idx, dev, port, err)
		}
		ndev, _ := sysfs.ReadString(f, path.Join(base, "gid_attrs", "ndevs", n))
		out = append(out, GID{Dev: dev, Port: port, Index: idx, GID: g, IPv4: gidIPv4(g), Type: typ, Netdev: ndev})
	}
	return out, nil
}

// gidIPv4 returns a.b.c.d for an IPv4-mapped GID (::ffff:a.b.c.d).
func gidIPv4(g string) string {
	const prefix = "0000:0000:0000:0000:0000:ffff:"
	if !strings.HasPrefix(g, prefix) {
		return ""
	}
	rest := strings.Split(strings.TrimPrefix(g, prefix), ":")
	if len(rest) != 2 {
		return ""
	}
	hi, err1 := strconv.ParseUint(rest[0], 16, 16)
	lo, err2 := strconv.ParseUint(rest[1], 16, 16)
	if err1 != nil || err2 != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d.%d", hi>>8, hi&0xff, lo>>8, lo&0xff)
}

// FormatGIDs renders a table like show_gids.
func FormatGIDs(gs []GID) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %-4s %-5s %-39s %-15s %-3s %s", "DEV", "PORT", "INDEX", "GID", "IPv4", "VER", "DEV")
	for _, g := range gs {
		ver := "v1"
		if g.Type == RoCEv2 {
			ver = "v2"
		}
		fmt.Fprintf(&b, "\n%-12s %-4d %-5d %-39s %-15s %-3s %s", g.Dev, g.Port, g.Index, g.GID, g.IPv4, ver, g.Netdev)
	}
	return b.String()
}

// PortState reads ports/<p>/state ("4: ACTIVE").
func PortState(f sysfs.FS, dev string, port int) (string, error) {
	return sysfs.ReadString(f, path.Join(ibClass, dev, "ports", strconv.Itoa(port), "state"))
}

func roceModeFile(dev string, port int) string {
	return path.Join(rdmaCMDir, dev, "ports", strconv.Itoa(port), "default_roce_mode")
}

// ErrNoCMGroup means the configfs rdma_cm group of a device does not exist
// (it is made by mkdir, which ReadRoCEMode does not do).
var ErrNoCMGroup = errors.New("no configfs rdma_cm group")

// ReadRoCEMode reads the default RoCE mode of dev's port without creating
// anything; ErrNoCMGroup when the configfs group was never made.
func ReadRoCEMode(f sysfs.FS, dev string, port int) (string, error) {
	if err := validDevName(dev); err != nil {
		return "", err
	}
	s, err := sysfs.ReadString(f, roceModeFile(dev, port))
	if errors.Is(err, fs.ErrNotExist) && !sysfs.Exists(f, path.Join(rdmaCMDir, dev)) {
		return "", fmt.Errorf("%s: %w", path.Join(rdmaCMDir, dev), ErrNoCMGroup)
	}
	if err != nil {
		return "", fmt.Errorf("default RoCE mode of %s port %d: %w", dev, port, err)
	}
	return s, nil
}

// EnsureCMGroup makes /sys/kernel/config/rdma_cm/<dev> unless it exists.
func EnsureCMGroup(f sysfs.FS, dev string) error {
	if err := validDevName(dev); err != nil {
		return err
	}
	dir := path.Join(rdmaCMDir, dev)
	if sysfs.Exists(f, dir) {
		return nil
	}
	if err := sysfs.Mkdir(f, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("mkdir %s: %w (is configfs mounted and rdma_cm loaded?)", dir, err)
		}
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	return nil
}

// ParseRoCEMode accepts v1, v2, "IB/RoCE v1", "RoCE v2" (any case).
func ParseRoCEMode(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "v1", "1", "roce v1", "ib/roce v1":
		return RoCEv1, nil
	case "v2", "2", "roce v2":
		return RoCEv2, nil
	}
	return "", fmt.Errorf("mode: %q is not a RoCE mode (v1, v2, \"IB/RoCE v1\" or \"RoCE v2\")", s)
}

// SetRoCEMode makes the configfs group and writes default_roce_mode.
func SetRoCEMode(f sysfs.FS, dev string, port int, mode string) error {
	m, err := ParseRoCEMode(mode)
	if err != nil {
		return err
	}
	if err := EnsureCMGroup(f, dev); err != nil {
		return err
	}
	if err := f.WriteFile(roceModeFile(dev, port), []byte(m)); err != nil {
		return fmt.Errorf("set default RoCE mode of %s port %d to %q: %w", dev, port, m, err)
	}
	return nil
}

// TC is a port's MLNX_OFED traffic settings (/sys/class/infiniband/<dev>/tc/<port>/).
type TC struct {
	TrafficClass *int `json:"traffic_class"` // nil: unset
	TTL          *int `json:"ttl"`
	Supported    bool `json:"supported"` // the tc directory exists (MLNX_OFED)
}

func tcFile(dev string, port int, name string) string {
	return path.Join(ibClass, dev, "tc", strconv.Itoa(port), name)
}

// parseTCRead parses "Global tclass=106", "106" or "" (unset).
func parseTCRead(s string) (*int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if i := strings.LastIndexByte(s, '='); i >= 0 {
		s = s[i+1:]
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("unparsable value %q", s)
	}
	if v < 0 {
		return nil, nil
	}
	return &v, nil
}

// ReadTC reads traffic_class and ttl of dev's port.
func ReadTC(f sysfs.FS, dev string, port int) (TC, error) {
	if err := validDevName(dev); err != nil {
		return TC{}, err
	}
	var tc TC
	if !sysfs.Exists(f, path.Dir(tcFile(dev, port, "x"))) {
		return tc, nil
	}
	tc.Supported = true
	for _, a := range []struct {
		name string
		dst  **int
	}{{"traffic_class", &tc.TrafficClass}, {"ttl", &tc.TTL}} {
		s, err := sysfs.ReadString(f, tcFile(dev, port, a.name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return tc, fmt.Errorf("read %s: %w", tcFile(dev, port, a.name), err)
		}
		v, err := parseTCRead(s)
		if err != nil {
			return tc, fmt.Errorf("read %s: %w", tcFile(dev, port, a.name), err)
		}
		*a.dst = v
	}
	return tc, nil
}

// TCChange is what `vflag roce set` writes; nil fields are left alone.
type TCChange struct {
	TrafficClass *int // 0-255; -1 clears
	DSCP         *int // 0-63; written as traffic class DSCP*4
	TTL          *int // 0-255
}

// Validate checks every value before anything is written; errors name the
// field and the value.
func (c TCChange) Validate() error {
	var errs []string
	if c.TrafficClass != nil && c.DSCP != nil {
		errs = append(errs, fmt.Sprintf("--tclass %d and --dscp %d: give one of them", *c.TrafficClass, *c.DSCP))
	}
	if c.TrafficClass != nil && (*c.TrafficClass < -1 || *c.TrafficClass > 255) {
		errs = append(errs, fmt.Sprintf("traffic_class: %d is out of range 0-255 (-1 clears)", *c.TrafficClass))
	}
	if c.DSCP != nil && (*c.DSCP < 0 || *c.DSCP > 63) {
		errs = append(errs, fmt.Sprintf("dscp: %d is out of range 0-63 (it is written as traffic class dscp*4)", *c.DSCP))
	}
	if c.TTL != nil && (*c.TTL < 0 || *c.TTL > 255) {
		errs = append(errs, fmt.Sprintf("ttl: %d is out of range 0-255", *c.TTL))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// TClass is the traffic class to write, if any.
func (c TCChange) TClass() *int {
	if c.DSCP != nil {
		v := *c.DSCP * 4
		return &v
	}
	return c.TrafficClass
}

// ApplyTC validates c and then writes it.
func ApplyTC(f sysfs.FS, dev string, port int, c TCChange) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := validDevName(dev); err != nil {
		return err
	}
	if (c.TClass() != nil || c.TTL != nil) && !sysfs.Exists(f, path.Dir(tcFile(dev, port, "x"))) {
		return fmt.Errorf("%s: %w (traffic_class and ttl are MLNX_OFED-only files)", path.Dir(tcFile(dev, port, "x")), fs.ErrNotExist)
	}
	if tc := c.TClass(); tc != nil {
		data := strconv.Itoa(*tc)
		if *tc < 0 {
			data = "tclass=-1"
		}
		if err := f.WriteFile(tcFile(dev, port, "traffic_class"), []byte(data)); err != nil {
			return fmt.Errorf("set traffic_class of %s port %d to %s: %w", dev, port, data, err)
		}
	}
	if c.TTL != nil {
		if err := f.WriteFile(tcFile(dev, port, "ttl"), []byte(strconv.Itoa(*c.TTL))); err != nil {
			return fmt.Errorf("set ttl of %s port %d to %d: %w", dev, port, *c.TTL, err)
		}
	}
	return nil
}

// PickGID chooses the GID index for verbs traffic of RoCE version mode
// (RoCEv1 or RoCEv2) on a device's port, as NVIDIA's RoCE documentation
// has operators pick it by hand from show_gids: the GID of that version
// that carries an IPv4 address (the bond's), else the first of that
// version. It returns -1 and why when there is none.
func PickGID(f sysfs.FS, dev string, port int, mode string) (int, string) {
	gids, err := GIDs(f, dev, port)
	if err != nil {
		return -1, err.Error()
	}
	first := -1
	for _, g := range gids {
		if g.Type != mode {
			continue
		}
		if g.IPv4 != "" {
			return g.Index, fmt.Sprintf("%s GID of %s on %s", mode, g.IPv4, orDash(g.Netdev))
		}
		if first < 0 {
			first = g.Index
		}
	}
	if first >= 0 {
		return first, fmt.Sprintf("the first %s GID of %s port %d (none with an IPv4 address)", mode, dev, port)
	}
	return -1, fmt.Sprintf("%s port %d has no %s GID (show it with vflag roce gids)", dev, port, mode)
}
