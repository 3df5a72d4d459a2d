package sim

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// This file models who holds a VF through VFIO (internal/holders reads it):
// IOMMU groups, /dev/vfio, and processes with their open files in /proc.
//
//   - Every PCI function is alone in its IOMMU group (as the igb bed's
//     intel-iommu gives each VF its own): the PFs of all NICs take groups 0..P-1
//     in NIC and port order, then VF i of a PF takes P + (the total_vfs of the
//     PFs before it) + i, so a VF's group does not change while VFs come and
//     go. /sys/bus/pci/devices/<bdf>/iommu_group links to
//     /sys/kernel/iommu_groups/<N>, whose devices/ links back.
//   - /dev/vfio holds the container file "vfio" and one file per group with a
//     device bound to vfio-pci (vfio_group_fops: no read, EINVAL).
//   - A process (Host.Spawn) has a pid, a comm and a command line and opens
//     files (Host.Open): /proc/<pid>/{comm, cmdline, fd/<n>} with fd links to
//     the paths opened. Opening /dev/vfio/<N> fails with ENOENT unless the
//     group's device is bound to vfio-pci, and with EBUSY while a process
//     holds the group (vfio_group_fops_open lets one opener at a time). Host.Exit
//     ends a process and closes its files.
//   - While a process holds a VF's group, unbinding the VF from vfio-pci and
//     a sriov_numvfs write of 0 on its PF fail with EBUSY and the log line
//     "vfio-pci <bdf>: Relaying device request to user (#0)". The kernel
//     logs that line too, but blocks the write in vfio-pci's remove until
//     the holder lets go (for ever, for one that ignores the request): the
//     model answers at once instead of hanging the caller.
//   - The function's class file reads 0x020000 (Ethernet controller).

// simProc is one simulated process.
type simProc struct {
	PID   int            `json:"pid"`
	Comm  string         `json:"comm"`
	Args  []string       `json:"args,omitempty"`
	Files map[int]string `json:"files,omitempty"` // fd -> path
}

// firstPID is the first simulated pid: far from the real ones of a small
// test machine, so a simulated pid is not taken for a real process.
const firstPID = 40000

// iommuGroup is d's IOMMU group number.
func (st *state) iommuGroup(d pciDev) int {
	n := 0
	for _, nic := range st.NICs {
		for _, pf := range nic.PFs {
			if d.vf == nil && pf == d.pf {
				return n
			}
			n++
		}
	}
	for _, nic := range st.NICs {
		for _, pf := range nic.PFs {
			if pf == d.pf {
				return n + d.vf.Index
			}
			n += nic.TotalVFs
		}
	}
	return -1
}

// vfioGroups maps each group with a device bound to vfio-pci to that device.
func (st *state) vfioGroups(now int64) map[int]pciDev {
	out := map[int]pciDev{}
	for _, d := range st.pciDevs(now) {
		if d.driver() == vfioDriver {
			out[st.iommuGroup(d)] = d
		}
	}
	return out
}

// groupHolder is the process holding /dev/vfio/<g> open, or nil.
func (st *state) groupHolder(g int) *simProc {
	want := "/dev/vfio/" + strconv.Itoa(g)
	for _, p := range st.Procs {
		for _, f := range p.Files {
			if f == want {
				return p
			}
		}
	}
	return nil
}

// refuseHeld is the model's answer to removing d from vfio-pci while a
// process holds its group (see the file comment): nil when none does.
func (st *state) refuseHeld(now int64, d pciDev) *opError {
	if d.driver() != vfioDriver {
		return nil
	}
	p := st.groupHolder(st.iommuGroup(d))
	if p == nil {
		return nil
	}
	st.log(now, "", "vfio-pci %s: Relaying device request to user (#0)", d.addr())
	return fail(syscall.EBUSY, "vfio-pci %s: held by pid %d (%s) through /dev/vfio/%d (the kernel blocks until it lets go)", d.addr(), p.PID, p.Comm, st.iommuGroup(d))
}

// refuseHeldVFs is refuseHeld for every VF of pf.
func (st *state) refuseHeldVFs(now int64, nic *nicState, pf *pfState) *opError {
	for _, vf := range pf.VFs {
		if e := st.refuseHeld(now, pciDev{nic: nic, pf: pf, vf: vf}); e != nil {
			return e
		}
	}
	return nil
}

func (st *state) proc(pid int) *simProc {
	for _, p := range st.Procs {
		if p.PID == pid {
			return p
		}
	}
	return nil
}

// Spawn starts a simulated process that holds no file: comm is what
// /proc/<pid>/comm shows (the kernel cuts it to 15 bytes), args its command
// line. It returns the pid.
func (h *Host) Spawn(comm string, args ...string) (int, error) {
	var pid int
	err := h.update(func(st *state, _ int64) (bool, error) {
		if st.NextPID < firstPID {
			st.NextPID = firstPID
		}
		pid = st.NextPID
		st.NextPID++
		short := comm
		if len(short) > 15 {
			short = short[:15]
		}
		st.Procs = append(st.Procs, &simProc{PID: pid, Comm: short, Args: append([]string{comm}, args...)})
		return true, nil
	})
	return pid, err
}

// Open opens p in process pid, as open(2) would, and returns the fd (the
// lowest free from 3). Under /dev/vfio: the container "vfio", a group with
// a device on vfio-pci (else ENOENT), one opener per group (else EBUSY).
// Any other path is taken as it is.
func (h *Host) Open(pid int, p string) (int, error) {
	var fd int
	err := h.update(func(st *state, now int64) (bool, error) {
		pr := st.proc(pid)
		if pr == nil {
			return false, fmt.Errorf("sim: open %s: no process %d: %w", p, pid, syscall.ESRCH)
		}
		if e := st.checkOpen(now, path.Clean(p)); e != nil {
			return false, fmt.Errorf("sim: pid %d: open %s: %w", pid, p, e)
		}
		if pr.Files == nil {
			pr.Files = map[int]string{}
		}
		for fd = 3; pr.Files[fd] != ""; fd++ {
		}
		pr.Files[fd] = path.Clean(p)
		return true, nil
	})
	return fd, err
}

// checkOpen is vfio_group_fops_open's answer for a /dev/vfio path.
func (st *state) checkOpen(now int64, p string) *opError {
	rest, ok := strings.CutPrefix(p, "/dev/vfio/")
	if !ok || rest == "vfio" {
		return nil
	}
	g, err := strconv.Atoi(rest)
	if _, bound := st.vfioGroups(now)[g]; err != nil || !bound {
		return fail(syscall.ENOENT, "no such vfio group")
	}
	if holder := st.groupHolder(g); holder != nil {
		return fail(syscall.EBUSY, "group %d is held by pid %d", g, holder.PID)
	}
	return nil
}

// Exit ends process pid: its files are closed.
func (h *Host) Exit(pid int) error {
	return h.update(func(st *state, _ int64) (bool, error) {
		for i, p := range st.Procs {
			if p.PID == pid {
				st.Procs = slices.Delete(st.Procs, i, i+1)
				return true, nil
			}
		}
		return false, fmt.Errorf("sim: exit: no process %d: %w", pid, syscall.ESRCH)
	})
}

// IOMMUGroup is the IOMMU group of the PCI function at addr (one that
// exists now).
func (h *Host) IOMMUGroup(addr string) (int, error) {
	g := -1
	err := h.view(func(st *state, now int64) error {
		d, ok := st.pci(addr, now)
		if !ok {
			return fmt.Errorf("sim: no PCI function %s: %w", addr, syscall.ENODEV)
		}
		g = st.iommuGroup(d)
		return nil
	})
	return g, err
}

// dumpProcs writes the processes, when there are any (Dump).
func (st *state) dumpProcs(w func(string, ...any)) {
	if len(st.Procs) == 0 {
		return
	}
	w("processes:\n")
	for _, p := range st.Procs {
		fds := make([]int, 0, len(p.Files))
		for fd := range p.Files {
			fds = append(fds, fd)
		}
		sort.Ints(fds)
		var files []string
		for _, fd := range fds {
			files = append(files, fmt.Sprintf("%d=%s", fd, p.Files[fd]))
		}
		w("  %d %s files=%s\n", p.PID, p.Comm, orDash(strings.Join(files, ",")))
	}
}

// --- the filesystem: /proc, /dev/vfio, /sys/kernel/iommu_groups ---

func (t tree) procDir() *node {
	return &node{
		kids: func() map[string]*node {
			m := map[string]*node{}
			for _, p := range t.st.Procs {
				m[strconv.Itoa(p.PID)] = t.pidDir(p)
			}
			return m
		},
		lookup: func(name string) *node {
			if name == "sys" && t.st.BootID != "" {
				return t.procSys()
			}
			if pid, err := strconv.Atoi(name); err == nil {
				if p := t.st.proc(pid); p != nil && strconv.Itoa(pid) == name {
					return t.pidDir(p)
				}
			}
			return nil
		},
	}
}

// procSys is /proc/sys as far as vflag reads it: kernel/random/boot_id.
func (t tree) procSys() *node {
	one := func(name string, child func() *node) *node {
		return namedDir([]string{name}, func(n string) *node {
			if n != name {
				return nil
			}
			return child()
		})
	}
	return one("kernel", func() *node {
		return one("random", func() *node {
			return one("boot_id", func() *node { return textNode(t.st.BootID + "\n") })
		})
	})
}

func (t tree) pidDir(p *simProc) *node {
	return dirNode(func() map[string]*node {
		return map[string]*node{
			"comm":    textNode(p.Comm + "\n"),
			"cmdline": textNode(strings.Join(p.Args, "\x00") + "\x00"),
			"fd": dirNode(func() map[string]*node {
				m := map[string]*node{}
				for fd, f := range p.Files {
					m[strconv.Itoa(fd)] = linkNode(f)
				}
				return m
			}),
		}
	})
}

func (t tree) devDir() *node {
	return namedDir([]string{"vfio"}, func(name string) *node {
		if name != "vfio" {
			return nil
		}
		return dirNode(func() map[string]*node {
			m := map[string]*node{"vfio": errNode(syscall.EINVAL)}
			for g := range t.st.vfioGroups(t.now) {
				m[strconv.Itoa(g)] = errNode(syscall.EINVAL)
			}
			return m
		})
	})
}

func (t tree) iommuGroups() *node {
	return dirNode(func() map[string]*node {
		m := map[string]*node{}
		for _, d := range t.st.pciDevs(t.now) {
			dev := t.devPath(d)
			base := "/sys/kernel/iommu_groups/" + strconv.Itoa(t.st.iommuGroup(d))
			m[path.Base(base)] = namedDir([]string{"devices"}, func(name string) *node {
				if name != "devices" {
					return nil
				}
				return namedDir([]string{d.addr()}, func(name string) *node {
					if name != d.addr() {
						return nil
					}
					return linkNode(rel(base+"/devices", dev))
				})
			})
		}
		return m
	})
}

// pciIOMMU adds a PCI function's iommu_group link and class file to its
// directory's entries m.
func (t tree) pciIOMMU(d pciDev, m map[string]*node) {
	m["iommu_group"] = linkNode(rel(t.devPath(d), "/sys/kernel/iommu_groups/"+strconv.Itoa(t.st.iommuGroup(d))))
	m["class"] = textNode("0x020000\n")
}
