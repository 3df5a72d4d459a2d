package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

func (d *doctor) platform(gs []*groupState) {
	if d.env.Simulated {
		d.add(AreaPlatform, "platform/iommu", "", Skip, "simulated NICs (--sim): `vflag up --sim` passes no VF to a VM, so this machine's IOMMU does not matter", "")
		d.add(AreaPlatform, "platform/vfio-pci", "", Skip, "simulated NICs (--sim): the simulated host has its own vfio-pci driver", "")
	} else {
		d.checkIOMMU()
		d.checkVFIO()
	}
	for _, g := range gs {
		d.group = g.Name
		for _, p := range g.Ports {
			d.checkSRIOV(g, p)
		}
	}
	d.group = ""
}

// kernelLog reads the kernel's messages once: journalctl -k for this boot,
// else dmesg.
func (d *doctor) kernelLog() ([]string, string) {
	if d.klogRead {
		return d.klog, d.klogFrom
	}
	d.klogRead = true
	for _, argv := range [][]string{
		{"journalctl", "-k", "-b", "-q", "--no-pager", "-o", "cat"},
		{"dmesg"},
	} {
		out, err := d.output(argv...)
		if err != nil || out == "" || strings.HasPrefix(out, "-- No entries --") {
			continue
		}
		d.klog, d.klogFrom = strings.Split(out, "\n"), argv[0]
		if argv[0] == "journalctl" {
			d.klogFrom = "journalctl -k"
		}
		return d.klog, d.klogFrom
	}
	return nil, ""
}

// cmdlineParams returns the kernel command line's name=value words.
func cmdlineParams(cmdline string) map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(cmdline) {
		if w == "--" {
			break // the rest goes to init
		}
		k, v, _ := strings.Cut(w, "=")
		m[k] = v
	}
	return m
}

func (d *doctor) cpuVendor() string {
	info, _ := d.readHost("/proc/cpuinfo")
	for _, l := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "vendor_id" {
			switch strings.TrimSpace(v) {
			case "GenuineIntel":
				return "intel"
			case "AuthenticAMD", "HygonGenuine":
				return "amd"
			}
		}
	}
	return ""
}

func (d *doctor) checkIOMMU() {
	const name = "platform/iommu"
	units, _ := d.env.Host.ReadDir("/sys/class/iommu")
	groups, _ := d.env.Host.ReadDir("/sys/kernel/iommu_groups")
	cmdline, cerr := d.readHost("/proc/cmdline")
	params := cmdlineParams(cmdline)
	var onCmdline []string
	for _, k := range []string{"intel_iommu", "amd_iommu", "iommu"} {
		if v, ok := params[k]; ok {
			onCmdline = append(onCmdline, k+"="+v)
		}
	}
	cmd := "/proc/cmdline: " + orNoneWord(onCmdline, "no intel_iommu=, amd_iommu= or iommu=")
	if cerr != nil {
		cmd = fmt.Sprintf("/proc/cmdline: %v", cerr)
	}
	logLines, from := d.kernelLog()
	var hits []string
	for _, l := range logLines {
		if strings.Contains(l, "DMAR") || strings.Contains(l, "AMD-Vi") || strings.Contains(l, "IOMMU") {
			hits = append(hits, strings.TrimSpace(l))
		}
	}
	klog := "kernel log: unreadable (neither journalctl -k nor dmesg answered)"
	switch {
	case from != "" && len(hits) == 0:
		klog = fmt.Sprintf("kernel log (%s): no DMAR, AMD-Vi or IOMMU line", from)
	case from != "":
		if len(hits) > 3 {
			hits = append(hits[:3], "...")
		}
		klog = fmt.Sprintf("kernel log (%s): %s", from, strings.Join(quoteAll(hits), "; "))
	}
	detail := fmt.Sprintf("/sys/class/iommu: %s; /sys/kernel/iommu_groups: %s; %s; %s",
		orNone(units), plural(len(groups), "group", "groups"), cmd, klog)

	vendor := d.cpuVendor()
	enableArg := "intel_iommu=on iommu=pt"
	bios := "enable VT-d (Intel Virtualization Technology for Directed I/O) in the BIOS/UEFI"
	vm := "QEMU: -machine q35,kernel-irqchip=split -device intel-iommu,intremap=on"
	if vendor == "amd" {
		enableArg = "iommu=pt (the AMD IOMMU is on by default; drop any amd_iommu=off)"
		bios = "enable the IOMMU (AMD-Vi) and SVM in the BIOS/UEFI"
		vm = "QEMU: -device amd-iommu"
	}
	grub := fmt.Sprintf("add %s to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub (RHEL: grubby --update-kernel=ALL --args=...), reboot", enableArg)

	active := len(units) > 0 || len(groups) > 0
	switch {
	case !active:
		var off []string
		for _, k := range []string{"intel_iommu", "amd_iommu"} {
			if params[k] == "off" {
				off = append(off, k+"=off")
			}
		}
		why := "no IOMMU is active: VFs cannot be passed to VMs (vfio-pci needs an IOMMU group per VF)"
		if len(off) > 0 {
			why += "; the command line disables it (" + strings.Join(off, " ") + ")"
		}
		d.add(AreaPlatform, name, "", Fail, why+". Read: "+detail,
			fmt.Sprintf("%s; %s; in a virtual machine give it a virtual IOMMU (%s)", bios, grub, vm))
	case params["iommu"] != "pt":
		d.add(AreaPlatform, name, "", Warn, "the IOMMU is active without iommu=pt: host-owned devices' DMA is translated too (slower; NVIDIA's SR-IOV setup uses iommu=pt). Read: "+detail,
			"add iommu=pt to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot")
	default:
		d.add(AreaPlatform, name, "", Pass, detail, "")
	}
}

func (d *doctor) checkVFIO() {
	const name = "platform/vfio-pci"
	if _, err := d.env.Host.ReadDir("/sys/bus/pci/drivers/vfio-pci"); err == nil {
		d.add(AreaPlatform, name, "", Pass, "the vfio-pci driver is registered (/sys/bus/pci/drivers/vfio-pci)", "")
		return
	}
	m := d.module("vfio-pci")
	switch m.state {
	case modLoaded, modBuiltin:
		d.add(AreaPlatform, name, "", Pass, "vfio-pci: "+m.detail, "")
	case modAvailable:
		d.add(AreaPlatform, name, "", Pass, "vfio-pci: "+m.detail+"; libvirt loads it for <hostdev managed='yes'>", "")
	default:
		d.add(AreaPlatform, name, "", Fail, "vfio-pci is not available: "+m.detail+" (libvirt hands VFs to VMs through it)",
			"boot a kernel with CONFIG_VFIO_PCI (Debian's linux-image-amd64 has it as a module), then: modprobe vfio-pci; echo vfio-pci > /etc/modules-load.d/vfio-pci.conf")
	}
}

func (d *doctor) checkSRIOV(g *groupState, p *port) {
	const name = "platform/sriov"
	n := vfsWanted(g)
	fw := func(a string) string {
		return fmt.Sprintf("enable SR-IOV in the BIOS/UEFI (SR-IOV support, under PCI settings) and in the NIC firmware: mstconfig -d %s -y set SRIOV_EN=1 NUM_OF_VFS=%d (package mstflint), then reboot", a, n)
	}
	switch {
	case p.Err != nil:
		d.add(AreaPlatform, name, p.Ref, Fail, fmt.Sprintf("%s: %v", p.Ref, p.Err),
			"name an existing port in groups[].pfs: `ip -br link` lists the interfaces, `ls /sys/bus/pci/devices/*/sriov_totalvfs` the PCI functions that offer SR-IOV")
	case p.Addr == "" && p.HasSRIOV:
		d.add(AreaPlatform, name, p.name(), Pass, fmt.Sprintf("%s: sriov_numvfs present (a device without PCI VFs, such as netdevsim)", p.where()), "")
	case p.Addr == "":
		d.add(AreaPlatform, name, p.name(), Fail, fmt.Sprintf("%s is not a PCI function (%s): it has no SR-IOV", p.name(), p.What),
			"use the ports of a dual-port ConnectX NIC (mlx5_core) in groups[].pfs; in a virtual machine pass the NIC's PFs through (a virtio NIC has no SR-IOV)")
	case !p.HasTotal:
		d.add(AreaPlatform, name, p.name(), Fail, fmt.Sprintf("%s has no sriov_totalvfs: the device, its firmware or the platform offers no SR-IOV", p.where()), fw(string(p.Addr)))
	case p.TotalErr != nil:
		d.add(AreaPlatform, name, p.name(), Fail, fmt.Sprintf("%s: %v", p.where(), p.TotalErr), fw(string(p.Addr)))
	case p.Total == 0:
		d.add(AreaPlatform, name, p.name(), Fail, fmt.Sprintf("%s: sriov_totalvfs is 0 (SRIOV_EN or NUM_OF_VFS is 0 in the firmware)", p.where()), fw(string(p.Addr)))
	default:
		d.add(AreaPlatform, name, p.name(), Pass, fmt.Sprintf("%s: sriov_totalvfs %d", p.where(), p.Total), "")
	}
}

func orNoneWord(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, " ")
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		if s == "..." {
			out[i] = s
			continue
		}
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
