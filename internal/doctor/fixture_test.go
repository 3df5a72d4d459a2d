package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/sysfs"
)

// tree is a fixture filesystem: files, directories and symlinks under a
// temp directory, read through sysfs.Dir like the real root.
type tree struct {
	t    *testing.T
	root string
}

func newTree(t *testing.T) *tree { return &tree{t: t, root: t.TempDir()} }

func (x *tree) fs() sysfs.FS { return sysfs.Dir(x.root) }

func (x *tree) file(p, content string) *tree {
	x.t.Helper()
	full := filepath.Join(x.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		x.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		x.t.Fatal(err)
	}
	return x
}

func (x *tree) dir(p string) *tree {
	x.t.Helper()
	if err := os.MkdirAll(filepath.Join(x.root, p), 0o755); err != nil {
		x.t.Fatal(err)
	}
	return x
}

func (x *tree) link(p, target string) *tree {
	x.t.Helper()
	full := filepath.Join(x.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		x.t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		x.t.Fatal(err)
	}
	return x
}

func (x *tree) remove(p string) *tree {
	x.t.Helper()
	if err := os.RemoveAll(filepath.Join(x.root, p)); err != nil {
		x.t.Fatal(err)
	}
	return x
}

// statLine is /proc/<pid>/stat with starttime (field 22) in clock ticks.
func statLine(pid int, comm string, startTicks int) string {
	return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 1000 0 0 0 10 5 0 0 20 0 3 0 %d 123456 789 18446744073709551615\n", pid, comm, pid, pid, startTicks)
}

// readyMachine is the machine side of a ready mlx5 hypervisor: IOMMU
// (DMAR units and groups, intel_iommu=on iommu=pt), vfio-pci, bonding and
// openvswitch loaded, max_bonds=0, debugfs mounted, kernel 6.1, and an
// ovs-vswitchd started 60 s after boot.
func readyMachine(t *testing.T) *tree {
	x := newTree(t)
	x.file("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=1234 ro intel_iommu=on iommu=pt quiet\n").
		file("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n").
		file("/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n").
		file("/proc/modules", "bonding 200704 0 - Live 0x0000000000000000\nopenvswitch 188416 4 - Live 0x0000000000000000\nvfio_pci 16384 0 - Live 0x0000000000000000\n").
		file("/sys/module/bonding/initstate", "live\n").
		file("/sys/module/openvswitch/initstate", "live\n").
		file("/sys/module/vfio_pci/initstate", "live\n").
		dir("/sys/class/iommu/dmar0").dir("/sys/class/iommu/dmar1").
		dir("/sys/kernel/iommu_groups/0").dir("/sys/kernel/iommu_groups/1").dir("/sys/kernel/iommu_groups/2").
		dir("/sys/bus/pci/drivers/vfio-pci").
		file("/proc/mounts", "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\ndebugfs /sys/kernel/debug debugfs rw,nosuid,nodev,noexec,relatime 0 0\n").
		file("/etc/modprobe.d/vflag-bonding.conf", "options bonding max_bonds=0\n").
		file("/proc/4242/comm", "ovs-vswitchd\n").
		file("/proc/4242/stat", statLine(4242, "ovs-vswitchd", 6000)).
		file("/proc/4242/cmdline", "ovs-vswitchd\x00unix:/var/run/openvswitch/db.sock\x00--pidfile\x00--detach\x00").
		link("/proc/4242/ns/net", "net:[4026531840]").
		link("/proc/self/ns/net", "net:[4026531840]").
		file("/var/run/openvswitch/ovs-vswitchd.pid", "4242\n").
		file("/proc/1/comm", "systemd\n").
		file("/proc/1/stat", statLine(1, "systemd", 1))
	return x
}

const (
	pf0 = "0000:61:00.0"
	pf1 = "0000:61:00.1"
)

// mstconfigReady is `mstconfig -e -d 0000:61:00.0 q` on a ConnectX-6 Dx set up for VF-LAG.
const mstconfigReady = `
Device #1:
----------

Device type:        ConnectX6DX
Name:               MCX623106AN-CDA_Ax
Description:        ConnectX-6 Dx EN adapter card; 100GbE; Dual-port QSFP56; PCIe 4.0 x16
Device:             0000:61:00.0

Configurations:                                          Default             Current             Next Boot
        MEMIC_BAR_SIZE                              0                   0                   0
        SRIOV_EN                                    False(0)            True(1)             True(1)
        NUM_OF_VFS                                  0                   8                   8
        LINK_TYPE_P1                                ETH(2)              ETH(2)              ETH(2)
        LINK_TYPE_P2                                ETH(2)              ETH(2)              ETH(2)
        LAG_RESOURCE_ALLOCATION                     DEVICE_DEFAULT(0)   DEVICE_DEFAULT(0)   DEVICE_DEFAULT(0)
`

const devlinkInfoReady = `{"info":{"pci/0000:61:00.0":{"driver":"mlx5_core","serial_number":"MT2146X12345","versions":{"fixed":{"fw.psid":"MT_0000000359"},"running":{"fw.version":"22.39.1002","fw":"22.39.1002"},"stored":{"fw.version":"22.39.1002","fw":"22.39.1002"}}}}}`

func roceParam(pci string, on bool) string {
	return fmt.Sprintf(`{"param":{"pci/%s":[{"name":"enable_roce","type":"generic","values":[{"cmode":"driverinit","value":%t}]}]}}`, pci, on)
}

// fakeRunner answers commands from a table; it checks every argv is made of
// safe words (no shell, no interpolated names).
type fakeRunner struct {
	t     *testing.T
	mu    sync.Mutex
	tools map[string]bool
	out   map[string]string
	errs  map[string]error
	calls []string
}

var safeArg = regexp.MustCompile(`^[A-Za-z0-9_./:,=-]+$`)

func (r *fakeRunner) LookPath(name string) (string, error) {
	if r.tools[name] {
		return "/usr/sbin/" + name, nil
	}
	return "", fmt.Errorf("%s: %w", name, ErrNoTool)
}

func (r *fakeRunner) Output(_ context.Context, argv ...string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := strings.Join(argv, " ")
	r.calls = append(r.calls, key)
	for _, a := range argv {
		if !safeArg.MatchString(a) {
			r.t.Errorf("unsafe argv word %q in %q", a, key)
		}
	}
	if argv[0] == "sh" || argv[0] == "bash" {
		r.t.Errorf("ran a shell: %q", key)
	}
	if !r.tools[argv[0]] {
		return nil, fmt.Errorf("%s: %w", argv[0], ErrNoTool)
	}
	if err, ok := r.errs[key]; ok {
		return nil, err
	}
	if out, ok := r.out[key]; ok {
		return []byte(out), nil
	}
	return nil, fmt.Errorf("%s: exit status 1: unexpected command in the test", key)
}

func readyRunner(t *testing.T) *fakeRunner {
	return &fakeRunner{t: t,
		tools: map[string]bool{"mstconfig": true, "devlink": true, "ovs-vswitchd": true, "journalctl": true, "dmesg": true},
		out: map[string]string{
			"journalctl -k -b -q --no-pager -o cat":                      "DMAR: IOMMU enabled\nDMAR: Host address width 46\npci 0000:61:00.0: Adding to iommu group 42\n",
			"mstconfig -e -d " + pf0 + " q":                              mstconfigReady,
			"devlink -j dev info pci/" + pf0:                             devlinkInfoReady,
			"devlink -j dev param show pci/" + pf0 + " name enable_roce": roceParam(pf0, true),
			"devlink -j dev param show pci/" + pf1 + " name enable_roce": roceParam(pf1, true),
			"ovs-vswitchd --version":                                     "ovs-vswitchd (Open vSwitch) 3.3.1\n",
			"nmcli -t -f RUNNING general":                                "running\n",
			"nmcli -t -f DEVICE,STATE device":                            "p0:unmanaged\np1:unmanaged\nlo:unmanaged\n",
		},
		errs: map[string]error{},
	}
}

// fakeProber answers from two errors.
type fakeProber struct{ ovsdb, libvirt error }

func (p fakeProber) OVSDB(context.Context, string) error   { return p.ovsdb }
func (p fakeProber) Libvirt(context.Context, string) error { return p.libvirt }

// dpKernel adds a kernel datapath to a Kernel (the simulated host has none).
type dpKernel struct {
	eswitch.Kernel
	st  eswitch.DatapathStats
	err error
}

func (k dpKernel) Datapath(string) (eswitch.DatapathStats, error) { return k.st, k.err }

func healthyDatapath() eswitch.DatapathStats {
	return eswitch.DatapathStats{Name: "ovs-system", Hit: 1200, Missed: 30, Lost: 0, Flows: 4, PerCPUDispatch: true}
}

// simNIC is one dual-port ConnectX-6 Dx: p0/p1 at 0000:61:00.0/.1, 8 VFs each.
func simNIC(t *testing.T) *sim.Host {
	t.Helper()
	h, err := sim.Open(t.TempDir(), &sim.Spec{NICs: []sim.NICSpec{{
		Name: "cx6dx", TotalVFs: 8,
		PFs: []sim.PFSpec{{PCI: pf0, Netdev: "p0"}, {PCI: pf1, Netdev: "p1"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func lagGroup() Group {
	return Group{Name: "lag0", PFs: []string{"p0", "p1"}, NumVFs: 4, Switchdev: true, BondName: "bond0", BondMode: "802.3ad"}
}

// hideFS hides every path under one of its prefixes (ENOENT).
type hideFS struct {
	sysfs.FS
	prefixes []string
}

func (h hideFS) hidden(p string) error {
	for _, pre := range h.prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return &fs.PathError{Op: "open", Path: p, Err: syscall.ENOENT}
		}
	}
	return nil
}

func (h hideFS) ReadFile(p string) ([]byte, error) {
	if err := h.hidden(p); err != nil {
		return nil, err
	}
	return h.FS.ReadFile(p)
}

func (h hideFS) ReadDir(p string) ([]string, error) {
	if err := h.hidden(p); err != nil {
		return nil, err
	}
	return h.FS.ReadDir(p)
}

func (h hideFS) Readlink(p string) (string, error) {
	if err := h.hidden(p); err != nil {
		return "", err
	}
	return h.FS.Readlink(p)
}

// buildMachine is this build machine as shared/DESIGN.md §4 and issue 12
// describe it: a virtio NIC (eth0, PCI 0000:00:03.0 through virtio2), ifb
// devices, no SR-IOV, no IOMMU, a kernel without loadable modules (no
// bonding, no openvswitch, no vfio-pci), no debugfs, ovs-vswitchd 3.1.0
// installed but not running, no libvirtd.
func buildMachine(t *testing.T) *tree {
	x := newTree(t)
	virtio := "/sys/devices/pci0000:00/0000:00:03.0/virtio2"
	x.file("/proc/cmdline", "console=ttyS0 quiet reboot=k panic=1 nomodule -- --firecracker-init\n").
		file("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\n").
		file("/proc/sys/kernel/osrelease", "6.18.44-fc-v657\n").
		file("/proc/mounts", "sysfs /sys sysfs rw 0 0\nproc /proc proc rw 0 0\n").
		dir("/sys/class/iommu").dir("/sys/kernel/iommu_groups").dir("/sys/kernel/debug").
		file("/sys/module/kvm/parameters/nx_huge_pages", "never\n").
		file("/proc/1/comm", "process_api\n").file("/proc/1/stat", statLine(1, "process_api", 24)).
		file("/sys/devices/pci0000:00/0000:00:03.0/vendor", "0x1af4\n").
		link("/sys/bus/pci/devices/0000:00:03.0", "../../../devices/pci0000:00/0000:00:03.0").
		link("/sys/devices/pci0000:00/0000:00:03.0/driver", "../../../bus/pci/drivers/virtio-pci").
		link(virtio+"/driver", "../../../../bus/virtio/drivers/virtio_net").
		link(virtio+"/subsystem", "../../../../bus/virtio").
		file(virtio+"/net/eth0/address", "02:fc:00:00:00:01\n").
		link(virtio+"/net/eth0/device", "../../../virtio2").
		link("/sys/class/net/eth0", "../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0").
		file("/sys/devices/virtual/net/ifb0/address", "aa:bb:cc:00:00:01\n").
		link("/sys/class/net/ifb0", "../../devices/virtual/net/ifb0").
		file("/sys/devices/virtual/net/lo/address", "00:00:00:00:00:00\n").
		link("/sys/class/net/lo", "../../devices/virtual/net/lo")
	return x
}

// plainKernel is a kernel without devlink, bonds or an Open vSwitch datapath.
type plainKernel struct{ links []string }

func (k plainKernel) EswitchMode(d eswitch.Devlink) (string, error) {
	return "", fmt.Errorf("devlink dev %s: %w", d, syscall.ENOENT)
}
func (plainKernel) SetEswitchMode(eswitch.Devlink, string) error { return errors.New("read only") }
func (plainKernel) Ports() ([]eswitch.Port, error)               { return nil, nil }
func (plainKernel) Param(d eswitch.Devlink, n string) (string, error) {
	return "", fmt.Errorf("devlink param %s on %s: %w", n, d, eswitch.ErrNotSupported)
}
func (plainKernel) SetParam(eswitch.Devlink, string, string) error { return errors.New("read only") }
func (k plainKernel) Link(name string) (eswitch.Link, error) {
	for _, l := range k.links {
		if l == name {
			return eswitch.Link{Name: name, AdminUp: true, OperState: "up"}, nil
		}
	}
	return eswitch.Link{}, fmt.Errorf("link %s: %w", name, eswitch.ErrLinkNotFound)
}
func (k plainKernel) Links() ([]eswitch.Link, error) {
	var out []eswitch.Link
	for _, l := range k.links {
		out = append(out, eswitch.Link{Name: l})
	}
	return out, nil
}
func (plainKernel) SetLinkUp(string, bool) error                 { return errors.New("read only") }
func (plainKernel) SetVFMAC(string, int, net.HardwareAddr) error { return errors.New("read only") }
func (plainKernel) SetVFVlan(string, int, int) error             { return errors.New("read only") }
func (plainKernel) SetVFVlanQos(string, int, int, int) error     { return errors.New("read only") }
func (plainKernel) SetVFTrust(string, int, bool) error           { return errors.New("read only") }
func (plainKernel) SetVFSpoofchk(string, int, bool) error        { return errors.New("read only") }
func (plainKernel) SetVFLinkState(string, int, string) error     { return errors.New("read only") }
func (plainKernel) SetVFRate(string, int, int, int) error        { return errors.New("read only") }
func (plainKernel) SetLinkMTU(string, int) error                 { return errors.New("read only") }
func (plainKernel) AddBond(eswitch.BondSpec) error               { return errors.New("read only") }
func (plainKernel) DeleteLink(string) error                      { return errors.New("read only") }
func (plainKernel) SetMaster(string, string) error               { return errors.New("read only") }
func (plainKernel) Feature(string, string) (bool, error)         { return false, eswitch.ErrNotSupported }
func (plainKernel) SetFeature(string, string, bool) error        { return errors.New("read only") }
func (plainKernel) Datapath(n string) (eswitch.DatapathStats, error) {
	return eswitch.DatapathStats{}, fmt.Errorf("datapath %s: generic netlink family ovs_datapath absent: %w", n, eswitch.ErrNoDatapath)
}

func buildRunner(t *testing.T) *fakeRunner {
	return &fakeRunner{t: t,
		tools: map[string]bool{"devlink": true, "ovs-vswitchd": true, "journalctl": true, "dmesg": true},
		out: map[string]string{
			"journalctl -k -b -q --no-pager -o cat": "-- No entries --\n",
			"dmesg":                                 "[    0.000000] Linux version 6.18.44-fc-v657\n[    0.000000] Command line: console=ttyS0 quiet\n",
			"ovs-vswitchd --version":                "ovs-vswitchd (Open vSwitch) 3.1.0\n",
		},
		errs: map[string]error{
			"devlink -j dev info pci/0000:00:03.0": errors.New("devlink -j dev info pci/0000:00:03.0: exit status 1: Failed to connect to devlink Netlink"),
		},
	}
}

func (plainKernel) Rates() ([]eswitch.Rate, error) { return nil, nil }
func (plainKernel) SetRateLeaf(eswitch.Devlink, uint32, uint64, uint64) error {
	return errors.New("read only")
}
func (plainKernel) SetRateLeafParent(eswitch.Devlink, uint32, string) error {
	return errors.New("read only")
}
func (plainKernel) AddRateNode(eswitch.Devlink, string, uint64, uint64) error {
	return errors.New("read only")
}
func (plainKernel) SetRateNode(eswitch.Devlink, string, uint64, uint64) error {
	return errors.New("read only")
}
func (plainKernel) DelRateNode(eswitch.Devlink, string) error { return errors.New("read only") }
