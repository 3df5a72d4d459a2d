package sim

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestVFIOHolders: a VF on vfio-pci gets its IOMMU group's /dev/vfio file;
// a process opens it (one at a time: EBUSY for a second), /proc shows the
// fd link, comm and cmdline; while it holds the group, unbinding the VF and
// sriov_numvfs 0 are refused (the kernel blocks), and once it exits both
// go through.
func TestVFIOHolders(t *testing.T) {
	x := newTH(t, testSpec())
	pfDir := "/sys/bus/pci/devices/0000:61:00.0"
	x.write(pfDir+"/sriov_drivers_autoprobe", "0")
	x.write(pfDir+"/sriov_numvfs", "2")
	x.settle()
	vf := "0000:61:00.3" // VF 1 of PF 0
	vfDir := "/sys/bus/pci/devices/" + vf

	// Groups: the two PFs take 0 and 1, PF 0's VFs 2.. (total_vfs 8).
	if got := x.readlink(vfDir + "/iommu_group"); !strings.HasSuffix(got, "/kernel/iommu_groups/3") {
		t.Fatalf("iommu_group of VF 1 -> %q, want .../kernel/iommu_groups/3", got)
	}
	if got := x.readlink("/sys/kernel/iommu_groups/3/devices/" + vf); !strings.HasSuffix(got, "/"+vf) {
		t.Fatalf("iommu_groups/3/devices/%s -> %q", vf, got)
	}
	if g, err := x.h.IOMMUGroup(vf); err != nil || g != 3 {
		t.Fatalf("IOMMUGroup(%s) = %d, %v; want 3", vf, g, err)
	}
	if got := x.read(vfDir + "/class"); got != "0x020000\n" {
		t.Fatalf("class %q", got)
	}
	if got := x.ls("/dev/vfio"); strings.Join(got, " ") != "vfio" {
		t.Fatalf("/dev/vfio before the bind: %v, want the container alone", got)
	}

	pid, err := x.h.Spawn("dpdk-testpmd-with-a-long-name", "-a", vf)
	x.ok(err)
	if _, err := x.h.Open(pid, "/dev/vfio/3"); !strings.Contains(errString(err), "no such vfio group") {
		t.Fatalf("open /dev/vfio/3 before the bind: %v, want ENOENT", err)
	}
	x.write(vfDir+"/driver_override", "vfio-pci")
	x.write("/sys/bus/pci/drivers_probe", vf)
	if got := x.ls("/dev/vfio"); strings.Join(got, " ") != "3 vfio" {
		t.Fatalf("/dev/vfio after the bind: %v", got)
	}
	fd, err := x.h.Open(pid, "/dev/vfio/3")
	x.ok(err)
	other, err := x.h.Spawn("qemu-system-x86")
	x.ok(err)
	if _, err := x.h.Open(other, "/dev/vfio/3"); err == nil || !strings.Contains(err.Error(), "device or resource busy") {
		t.Fatalf("a second open of the group: %v, want EBUSY", err)
	}
	p := "/proc/" + itoa(pid)
	if got := x.readlink(p + "/fd/" + itoa(fd)); got != "/dev/vfio/3" {
		t.Fatalf("fd link -> %q", got)
	}
	if got := x.read(p + "/comm"); got != "dpdk-testpmd-wi\n" {
		t.Fatalf("comm %q, want the kernel's 15 bytes", got)
	}
	if got := x.read(p + "/cmdline"); got != "dpdk-testpmd-with-a-long-name\x00-a\x00"+vf+"\x00" {
		t.Fatalf("cmdline %q", got)
	}
	if procs := x.ls("/proc"); len(procs) != 2 {
		t.Fatalf("/proc lists %v, want the two processes", procs)
	}

	x.writeErr("/sys/bus/pci/drivers/vfio-pci/unbind", vf, syscall.EBUSY)
	x.writeErr(pfDir+"/sriov_numvfs", "0", syscall.EBUSY)
	if !strings.Contains(x.h.Dump(), "vfio-pci "+vf+": Relaying device request to user (#0)") {
		t.Fatalf("no vfio request line in dmesg")
	}
	if !strings.Contains(x.h.Dump(), itoa(pid)+" dpdk-testpmd-wi files=3=/dev/vfio/3") {
		t.Fatalf("the dump does not show the process:\n%s", x.h.Dump())
	}

	x.ok(x.h.Exit(pid))
	x.readErr(p+"/comm", syscall.ENOENT)
	x.write("/sys/bus/pci/drivers/vfio-pci/unbind", vf)
	x.write(pfDir+"/sriov_numvfs", "0")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func itoa(i int) string { return strconv.Itoa(i) }
