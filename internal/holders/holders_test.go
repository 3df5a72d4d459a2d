package holders

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/sysfs"
)

// simHost is a simulated dual-port NIC with VFs 0..3 on PF 0, unbound.
func simHost(t *testing.T) (*sim.Host, sysfs.FS) {
	t.Helper()
	h, err := sim.Open(t.TempDir(), &sim.Spec{
		NICs: []sim.NICSpec{{Name: "nic0", TotalVFs: 8,
			PFs: []sim.PFSpec{{PCI: "0000:61:00.0", Netdev: "p0"}, {PCI: "0000:61:00.1", Netdev: "p1"}}}},
		Latency: sim.Latency{VFCreate: time.Microsecond, ModeChange: time.Millisecond, LAGActivation: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	f := h.FS()
	must(t, f.WriteFile("/sys/bus/pci/devices/0000:61:00.0/sriov_drivers_autoprobe", []byte("0")))
	must(t, f.WriteFile("/sys/bus/pci/devices/0000:61:00.0/sriov_numvfs", []byte("4")))
	time.Sleep(time.Millisecond)
	return h, f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func bind(t *testing.T, f sysfs.FS, vf, drv string) {
	t.Helper()
	must(t, f.WriteFile("/sys/bus/pci/devices/"+vf+"/driver_override", []byte(drv)))
	must(t, f.WriteFile("/sys/bus/pci/drivers_probe", []byte(vf)))
}

// TestKernelOnSimulatedHost: on the simulated host, an unbound VF and a VF
// on vfio-pci that no process holds are free; a VF whose group a process
// holds names that process; a VF on the NIC driver is held while its
// netdev is up; and once the process exits and the netdev is down, nobody
// holds any.
func TestKernelOnSimulatedHost(t *testing.T) {
	h, f := simHost(t)
	vfs := []string{"0000:61:00.2", "0000:61:00.3", "0000:61:00.4", "0000:61:00.5"}
	k := Kernel{FS: f, Links: h}
	got, err := k.Read(vfs)
	if err != nil || len(got) != 0 {
		t.Fatalf("unbound VFs: %v, %v; want none held", got, err)
	}
	bind(t, f, vfs[1], "vfio-pci")
	bind(t, f, vfs[2], "vfio-pci")
	bind(t, f, vfs[3], "mlx5_core")
	if got, err := k.Read(vfs); err != nil || len(got) != 0 {
		t.Fatalf("vfio-pci and a down netdev, nobody holding: %v, %v; want none held", got, err)
	}
	g, err := h.IOMMUGroup(vfs[1])
	must(t, err)
	pid, err := h.Spawn("dpdk-testpmd")
	must(t, err)
	_, err = h.Open(pid, "/dev/vfio/"+itoa(g))
	must(t, err)
	nd, err := f.ReadDir("/sys/bus/pci/devices/" + vfs[3] + "/net")
	must(t, err)
	must(t, h.SetLinkUp(nd[0], true))

	got, err = k.Read(vfs)
	must(t, err)
	want := []string{
		"VF 0000:61:00.3 is held by pid " + itoa(pid) + " (dpdk-testpmd) through /dev/vfio/" + itoa(g),
		"VF 0000:61:00.5 is held by the host: netdev " + nd[0] + " is up",
	}
	if strings.Join(got.Lines(), "\n") != strings.Join(want, "\n") {
		t.Fatalf("holders:\n%s\nwant:\n%s", strings.Join(got.Lines(), "\n"), strings.Join(want, "\n"))
	}
	if h := got[vfs[1]][0]; h.PID != pid || h.Command != "dpdk-testpmd" || h.Through != "/dev/vfio/"+itoa(g) {
		t.Errorf("holder %+v", h)
	}
	// Excepted (the hook's libvirtd): not a holder.
	if got, err := (Kernel{FS: f, Links: h, Except: []int{pid}}).Read(vfs[1:2]); err != nil || len(got) != 0 {
		t.Errorf("with pid %d excepted: %v, %v", pid, got, err)
	}

	must(t, h.Exit(pid))
	must(t, h.SetLinkUp(nd[0], false))
	if got, err := k.Read(vfs); err != nil || len(got) != 0 {
		t.Fatalf("after the process exited and the netdev went down: %v, %v", got, err)
	}
	// A VF that is gone holds nothing.
	if got, err := k.Read([]string{"0000:61:01.7"}); err != nil || len(got) != 0 {
		t.Fatalf("a VF that does not exist: %v, %v", got, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// tree builds a fake /sys and /proc under a directory.
type tree struct {
	t    *testing.T
	root string
}

func (x tree) link(p, target string) {
	x.t.Helper()
	full := filepath.Join(x.root, p)
	must(x.t, os.MkdirAll(filepath.Dir(full), 0o755))
	must(x.t, os.Symlink(target, full))
}

func (x tree) file(p, content string) {
	x.t.Helper()
	full := filepath.Join(x.root, p)
	must(x.t, os.MkdirAll(filepath.Dir(full), 0o755))
	must(x.t, os.WriteFile(full, []byte(content), 0o644))
}

func (x tree) dir(p string) { must(x.t, os.MkdirAll(filepath.Join(x.root, p), 0o755)) }

// links are the netdevs of a fixture host (Links).
type links map[string]eswitch.Link

func (l links) Link(name string) (eswitch.Link, error) {
	if x, ok := l[name]; ok {
		return x, nil
	}
	return eswitch.Link{}, eswitch.ErrLinkNotFound
}

// addrLinks adds their addresses (AddrLister).
type addrLinks struct {
	links
	addrs map[string][]string
}

func (a addrLinks) Addrs(name string) ([]string, error) { return a.addrs[name], nil }

// TestKernelOnFixture: the real layout, as the kernel shows it: a group
// held through its vfio cdev (/dev/vfio/devices/vfio0) and one in no-IOMMU
// mode, a VF on a vfio-pci variant driver, a netdev enslaved and one with
// an address, a network VF whose netdev is in another namespace; an fd link
// to a deleted file; a process that vanished while read.
func TestKernelOnFixture(t *testing.T) {
	x := tree{t, t.TempDir()}
	dev := func(vf, drv, group string) {
		d := "/sys/devices/pci0000:00/" + vf
		x.link("/sys/bus/pci/devices/"+vf, "../../.."+strings.TrimPrefix(d, "/sys"))
		if drv != "" {
			x.link(d+"/driver", "../../../bus/pci/drivers/"+drv)
		}
		x.link(d+"/iommu_group", "../../../kernel/iommu_groups/"+group)
		x.file(d+"/class", "0x020000\n")
	}
	dev("0000:00:13.0", "vfio-pci", "12")
	x.dir("/sys/devices/pci0000:00/0000:00:13.0/vfio-dev/vfio0")
	dev("0000:00:13.2", "vfio-pci", "13")
	dev("0000:00:13.4", "mlx5_vfio_pci", "14")
	dev("0000:00:13.6", "igbvf", "15")
	x.dir("/sys/devices/pci0000:00/0000:00:13.6/net/eth3")
	dev("0000:00:14.0", "igbvf", "16")
	x.dir("/sys/devices/pci0000:00/0000:00:14.0/net/eth4")
	dev("0000:00:14.2", "igbvf", "17") // its netdev moved to another namespace
	dev("0000:00:14.4", "igbvf", "18")
	x.dir("/sys/devices/pci0000:00/0000:00:14.4/net/eth6") // down, no address
	x.file("/proc/100/comm", "qemu-system-x86\n")
	x.link("/proc/100/fd/0", "/dev/null")
	x.link("/proc/100/fd/17", "/dev/vfio/devices/vfio0")
	x.file("/proc/200/comm", "dpdk-testpmd\n")
	x.link("/proc/200/fd/5", "/dev/vfio/noiommu-13 (deleted)")
	x.link("/proc/200/fd/6", "/dev/vfio/noiommu-13")
	x.dir("/proc/300") // exited: no fd/
	x.file("/proc/self", "")
	lk := addrLinks{links: links{"eth3": {Name: "eth3", Master: "br0"}, "eth4": {Name: "eth4"}, "eth6": {Name: "eth6"}},
		addrs: map[string][]string{"eth4": {"192.0.2.1/24"}}}
	vfs := []string{"0000:00:13.0", "0000:00:13.2", "0000:00:13.4", "0000:00:13.6", "0000:00:14.0", "0000:00:14.2", "0000:00:14.4"}
	got, err := Kernel{FS: sysfs.Dir(x.root), Links: lk}.Read(vfs)
	must(t, err)
	want := []string{
		"VF 0000:00:13.0 is held by pid 100 (qemu-system-x86) through /dev/vfio/devices/vfio0",
		"VF 0000:00:13.2 is held by pid 200 (dpdk-testpmd) through /dev/vfio/noiommu-13",
		"VF 0000:00:13.6 is held by the host: netdev eth3 is enslaved to br0",
		"VF 0000:00:14.0 is held by the host: netdev eth4 has 192.0.2.1/24",
		"VF 0000:00:14.2 is held by a netdev in another network namespace (bound to igbvf)",
	}
	if strings.Join(got.Lines(), "\n") != strings.Join(want, "\n") {
		t.Fatalf("holders:\n%s\nwant:\n%s", strings.Join(got.Lines(), "\n"), strings.Join(want, "\n"))
	}
	// Without an address lister, eth4's address is not read: not held.
	if got, err := (Kernel{FS: sysfs.Dir(x.root), Links: lk.links}).Read([]string{"0000:00:14.0"}); err != nil || len(got) != 0 {
		t.Errorf("without Addrs: %v, %v", got, err)
	}

	// libvirt names the domain of the process holding a VF, and a domain
	// the kernel shows no process for is a holder of its own.
	got.Merge(map[string]string{"0000:00:13.0": "vm1", "0000:00:14.4": "vm2"})
	want = []string{
		"VF 0000:00:13.0 is held by running domain vm1 (pid 100 qemu-system-x86 through /dev/vfio/devices/vfio0)",
		want[1], want[2], want[3], want[4],
		"VF 0000:00:14.4 is held by running domain vm2",
	}
	if strings.Join(got.Lines(), "\n") != strings.Join(want, "\n") {
		t.Fatalf("merged:\n%s\nwant:\n%s", strings.Join(got.Lines(), "\n"), strings.Join(want, "\n"))
	}
	if d := strings.Join(got.Domains(), ","); d != "vm1,vm2" {
		t.Errorf("Domains %q", d)
	}
}

// denyFD makes one process's fd directory unreadable.
type denyFD struct {
	sysfs.FS
	dir string
}

func (d denyFD) ReadDir(p string) ([]string, error) {
	if p == d.dir {
		return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EACCES}
	}
	return d.FS.ReadDir(p)
}

// TestKernelUnreadable: what cannot be read is an error (the gate fails
// closed): a process's open files, a vfio-bound VF's IOMMU group, a
// netdev. Nothing is read of /proc when no VF is on vfio.
func TestKernelUnreadable(t *testing.T) {
	x := tree{t, t.TempDir()}
	x.link("/sys/bus/pci/devices/0000:00:13.0/driver", "../../../bus/pci/drivers/vfio-pci")
	x.link("/sys/bus/pci/devices/0000:00:13.0/iommu_group", "../../../kernel/iommu_groups/12")
	x.link("/sys/bus/pci/devices/0000:00:13.2/driver", "../../../bus/pci/drivers/vfio-pci") // no iommu_group
	x.link("/sys/bus/pci/devices/0000:00:13.4/driver", "../../../bus/pci/drivers/igbvf")
	x.dir("/sys/bus/pci/devices/0000:00:13.4/net/eth9")
	x.dir("/proc/100/fd")
	f := sysfs.Dir(x.root)
	_, err := Kernel{FS: denyFD{f, "/proc/100/fd"}, Links: links{}}.Read([]string{"0000:00:13.0"})
	if !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), "open files of pid 100") {
		t.Errorf("unreadable fd directory: %v", err)
	}
	if _, err := (Kernel{FS: f, Links: links{}}).Read([]string{"0000:00:13.2"}); err == nil || !strings.Contains(err.Error(), "IOMMU group cannot be read") {
		t.Errorf("vfio-bound VF without a group: %v", err)
	}
	if _, err := (Kernel{FS: f, Links: failLinks{}}).Read([]string{"0000:00:13.4"}); err == nil || !strings.Contains(err.Error(), "read netdev eth9") {
		t.Errorf("unreadable netdev: %v", err)
	}
	if got, err := (Kernel{FS: denyFD{f, "/proc/100/fd"}, Links: links{}}).Read([]string{"0000:00:14.0"}); err != nil || len(got) != 0 {
		t.Errorf("no VF on vfio: %v, %v; want /proc not read", got, err)
	}
}

type failLinks struct{}

func (failLinks) Link(string) (eswitch.Link, error) { return eswitch.Link{}, syscall.EIO }

// TestOpenersOnThisHost: the /proc scan on the real kernel finds this test
// process holding a file open (as it would find a QEMU holding
// /dev/vfio/12), with its comm; excepted, it is not found.
func TestOpenersOnThisHost(t *testing.T) {
	p := filepath.Join(t.TempDir(), "held")
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	k := Kernel{FS: sysfs.Dir("/")}
	got, err := k.openers(map[string]string{p: "0000:00:13.0"})
	must(t, err)
	comm, _ := os.ReadFile("/proc/self/comm")
	want := Holder{VF: "0000:00:13.0", PID: os.Getpid(), Command: strings.TrimSpace(string(comm)), Through: p}
	if len(got) != 1 || got[0].VF != want.VF || got[0].PID != want.PID || got[0].Command != want.Command || got[0].Through != want.Through {
		t.Fatalf("openers = %+v, want [%+v]", got, want)
	}
	k.Except = []int{os.Getpid()}
	if got, err := k.openers(map[string]string{p: "0000:00:13.0"}); err != nil || len(got) != 0 {
		t.Fatalf("excepted: %+v, %v", got, err)
	}
}
