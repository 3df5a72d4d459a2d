// Package holders answers, from the kernel, who holds a VF: the question the
// disruption gate asks before a change destroys VFs (a numvfs change, down)
// or rebinds them (an unbind before an eswitch mode change, a bind to the
// config's host driver).
//
// The kernel's answer, read through a sysfs.FS (the real /sys and /proc, or
// the simulated host's model of them):
//
//   - A VF bound to vfio-pci (or a vendor's vfio-pci variant driver) is held
//     while a process has its IOMMU group's /dev/vfio/<group> (no-IOMMU mode:
//     /dev/vfio/noiommu-<group>) or its vfio cdev /dev/vfio/devices/vfio<N>
//     (kernels with VFIO_DEVICE_CDEV: /sys/bus/pci/devices/<vf>/vfio-dev/)
//     open: a QEMU that libvirt started or not, a DPDK application. Found by
//     reading every /proc/<pid>/fd/* link. The kernel lets one process open a
//     group at a time (vfio_group_fops_open: EBUSY), and an unbind or a
//     sriov_numvfs write of 0 blocks in vfio-pci's remove until the holder
//     lets go of it.
//   - A VF bound to a host netdev driver is held while one of its netdevs is
//     administratively up, has an address of global or site scope, or is
//     enslaved (a bond, a bridge). A network-class VF bound to a host driver
//     whose netdev this network namespace cannot see was moved into another
//     one (a container's): held too.
//   - An unbound VF is held by nobody.
//
// libvirt's answer (which running domain holds a VF, from the live domain
// XML) is not read here: the caller merges it (Merge), which names the
// domain a holding QEMU runs. The kernel's answer does not depend on
// libvirtd running.
package holders

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
)

// Holder is one user of a VF.
type Holder struct {
	VF string `json:"vf"` // PCI address
	// A process holding the VF's vfio group or cdev open.
	PID     int    `json:"pid,omitempty"`
	Command string `json:"command,omitempty"` // /proc/<pid>/comm
	Through string `json:"through,omitempty"` // the file it holds: /dev/vfio/12
	// Domain is the libvirt domain that holds the VF (libvirt's answer):
	// the one the process runs, or, without a process, a running domain
	// whose live XML has the VF.
	Domain string `json:"domain,omitempty"`
	// A host netdev that uses the VF, and how: "is up", "is enslaved to
	// br0", "has 192.0.2.1/24"; without Netdev, "a netdev in another
	// network namespace (bound to igbvf)".
	Netdev string   `json:"netdev,omitempty"`
	Uses   []string `json:"uses,omitempty"`
}

// Who names the holder, in the words plan, up, down, the hook and status
// share: "running domain vm1 (pid 4242 qemu-system-x86 through
// /dev/vfio/12)", "pid 4242 (dpdk-testpmd) through /dev/vfio/12", "the host:
// netdev eth5 is up, has 192.0.2.1/24", "a netdev in another network
// namespace (bound to igbvf)".
func (h Holder) Who() string {
	switch {
	case h.Domain != "" && h.PID != 0:
		return fmt.Sprintf("running domain %s (pid %d %s through %s)", h.Domain, h.PID, orUnknown(h.Command), h.Through)
	case h.Domain != "":
		return "running domain " + h.Domain
	case h.PID != 0:
		return fmt.Sprintf("pid %d (%s) through %s", h.PID, orUnknown(h.Command), h.Through)
	case h.Netdev != "":
		return fmt.Sprintf("the host: netdev %s %s", h.Netdev, strings.Join(h.Uses, ", "))
	}
	return strings.Join(h.Uses, ", ")
}

// String is the holder with its VF: "VF 0000:61:00.2 is held by ...".
func (h Holder) String() string { return fmt.Sprintf("VF %s is held by %s", h.VF, h.Who()) }

func orUnknown(s string) string {
	if s == "" {
		return "command unknown"
	}
	return s
}

// Set maps a VF's PCI address to its holders; a VF nobody holds is absent.
type Set map[string][]Holder

// Lines are the holders' String()s, sorted by VF.
func (s Set) Lines() []string {
	var out []string
	for _, vf := range s.VFs() {
		for _, h := range s[vf] {
			out = append(out, h.String())
		}
	}
	return out
}

// VFs are the held VFs, sorted.
func (s Set) VFs() []string {
	out := make([]string, 0, len(s))
	for vf := range s {
		out = append(out, vf)
	}
	sort.Strings(out)
	return out
}

// Domains are the libvirt domains among the holders, sorted, once each.
func (s Set) Domains() []string {
	seen := map[string]bool{}
	var out []string
	for _, hs := range s {
		for _, h := range hs {
			if h.Domain != "" && !seen[h.Domain] {
				seen[h.Domain] = true
				out = append(out, h.Domain)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Merge adds libvirt's answer, the running domain holding each VF
// (libvirtx.Conn.HoldingDomains), to s: it names the domain of the
// processes that hold the VF (the kernel lets one process hold a vfio
// group, so the process holding a domain's VF is that domain's QEMU); a VF
// held by a domain that the kernel shows no process for gets the domain
// alone as its holder.
func (s Set) Merge(domains map[string]string) {
	for vf, dom := range domains {
		named := false
		for i := range s[vf] {
			if s[vf][i].PID != 0 {
				s[vf][i].Domain, named = dom, true
			}
		}
		if !named {
			s[vf] = append(s[vf], Holder{VF: vf, Domain: dom})
		}
	}
}

// Links is what the netdev rule reads of an interface ("ip link show $name").
type Links interface {
	Link(name string) (eswitch.Link, error)
}

// AddrLister lists an interface's addresses of global or site scope
// (eswitch.Netlink; the simulated host's model). A Links without it: the
// "has an address" rule is not applied.
type AddrLister interface {
	Addrs(name string) ([]string, error)
}

// Kernel reads the kernel's answer.
type Kernel struct {
	FS    sysfs.FS // /sys and /proc
	Links Links
	// Except are processes not counted as holders (the hook's caller,
	// libvirtd, which may open a VF for the domain it starts).
	Except []int
}

// Read answers who holds each of vfs (PCI addresses). A VF that is gone
// holds nothing. An error means the kernel's view could not be read (a
// /proc/<pid>/fd that is not readable, a vfio-bound VF without an IOMMU
// group): the caller cannot tell, and fails closed.
func (k Kernel) Read(vfs []string) (Set, error) {
	out := Set{}
	watch := map[string]string{} // /dev path -> VF
	for _, vf := range vfs {
		drv, err := k.driver(vf)
		if err != nil {
			return nil, err
		}
		switch {
		case drv == "":
		case isVFIO(k.FS, vf, drv):
			paths, err := k.vfioPaths(vf)
			if err != nil {
				return nil, err
			}
			for _, p := range paths {
				watch[p] = vf
			}
		default:
			h, err := k.netdevHolders(vf, drv)
			if err != nil {
				return nil, err
			}
			if len(h) > 0 {
				out[vf] = h
			}
		}
	}
	if len(watch) == 0 {
		return out, nil
	}
	procs, err := k.openers(watch)
	if err != nil {
		return nil, err
	}
	for _, h := range procs {
		out[h.VF] = append(out[h.VF], h)
	}
	return out, nil
}

func devDir(vf string) string { return path.Join("/sys/bus/pci/devices", vf) }

// driver is the VF's driver, "" when unbound or when the VF is gone.
func (k Kernel) driver(vf string) (string, error) {
	target, err := k.FS.Readlink(devDir(vf) + "/driver")
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the driver of VF %s: %w", vf, err)
	}
	return path.Base(target), nil
}

// isVFIO tells whether drv is vfio-pci, a vendor's variant of it
// (mlx5_vfio_pci), or any driver that gave the VF a vfio cdev.
func isVFIO(f sysfs.FS, vf, drv string) bool {
	if drv == "vfio-pci" || strings.HasSuffix(drv, "vfio-pci") || strings.HasSuffix(drv, "vfio_pci") {
		return true
	}
	_, err := f.ReadDir(devDir(vf) + "/vfio-dev")
	return err == nil
}

// vfioPaths are the device files through which a process holds a
// vfio-bound VF: its IOMMU group's and its cdevs.
func (k Kernel) vfioPaths(vf string) ([]string, error) {
	target, err := k.FS.Readlink(devDir(vf) + "/iommu_group")
	if err != nil {
		return nil, fmt.Errorf("VF %s is bound to a vfio driver, but its IOMMU group cannot be read: %w", vf, err)
	}
	g := path.Base(target)
	out := []string{"/dev/vfio/" + g, "/dev/vfio/noiommu-" + g}
	cdevs, err := k.FS.ReadDir(devDir(vf) + "/vfio-dev")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read the vfio cdev of VF %s: %w", vf, err)
	}
	for _, c := range cdevs {
		out = append(out, "/dev/vfio/devices/"+c)
	}
	return out, nil
}

// openers scans every process's open files for the paths of watch.
//
//	ls -l /proc/[0-9]*/fd/
func (k Kernel) openers(watch map[string]string) ([]Holder, error) {
	names, err := k.FS.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list the processes (/proc): %w", err)
	}
	except := map[int]bool{}
	for _, p := range k.Except {
		except[p] = true
	}
	var out []Holder
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 || except[pid] {
			continue
		}
		dir := "/proc/" + name
		fds, err := k.FS.ReadDir(dir + "/fd")
		if exited(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the open files of pid %d (%s/fd): %w", pid, dir, err)
		}
		seen := map[string]bool{}
		for _, fd := range fds {
			target, err := k.FS.Readlink(dir + "/fd/" + fd)
			if err != nil {
				continue // closed meanwhile (or the process exited)
			}
			target = strings.TrimSuffix(target, " (deleted)")
			vf, ok := watch[target]
			if !ok || seen[target] {
				continue
			}
			seen[target] = true
			comm, _ := sysfs.ReadString(k.FS, dir+"/comm")
			out = append(out, Holder{VF: vf, PID: pid, Command: comm, Through: target})
		}
	}
	return out, nil
}

// exited tells whether a /proc read failed because the process is gone.
func exited(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// netdevHolders applies the netdev rule to a VF bound to a host driver.
func (k Kernel) netdevHolders(vf, drv string) ([]Holder, error) {
	names, err := k.FS.ReadDir(devDir(vf) + "/net")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list the netdevs of VF %s: %w", vf, err)
	}
	if len(names) == 0 {
		// A network function's driver made a netdev this namespace does
		// not see: it was moved into another one.
		if class, err := sysfs.ReadString(k.FS, devDir(vf)+"/class"); err == nil && strings.HasPrefix(class, "0x02") {
			return []Holder{{VF: vf, Uses: []string{fmt.Sprintf("a netdev in another network namespace (bound to %s)", drv)}}}, nil
		}
		return nil, nil
	}
	var out []Holder
	for _, n := range names {
		uses, err := k.netdevUses(n)
		if err != nil {
			return nil, err
		}
		if len(uses) > 0 {
			out = append(out, Holder{VF: vf, Netdev: n, Uses: uses})
		}
	}
	return out, nil
}

// netdevUses says how the host uses a netdev: up, enslaved, addressed.
func (k Kernel) netdevUses(name string) ([]string, error) {
	l, err := k.Links.Link(name)
	if errors.Is(err, eswitch.ErrLinkNotFound) {
		return nil, nil // gone meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("read netdev %s: %w", name, err)
	}
	var uses []string
	if l.AdminUp {
		uses = append(uses, "is up")
	}
	if l.Master != "" {
		uses = append(uses, "is enslaved to "+l.Master)
	}
	if al, ok := k.Links.(AddrLister); ok {
		addrs, err := al.Addrs(name)
		if err != nil && !errors.Is(err, eswitch.ErrLinkNotFound) {
			return nil, fmt.Errorf("read the addresses of netdev %s: %w", name, err)
		}
		if len(addrs) > 0 {
			uses = append(uses, "has "+strings.Join(addrs, " "))
		}
	}
	return uses, nil
}
