package sim

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/vflag/vflag/internal/crashpoint"
)

// hostFS serves the host's /sys as a tree of nodes built from the state on
// each call. The layout follows the kernel's: /sys/bus/pci/devices/<bdf> and
// /sys/class/net/<if> are symlinks into /sys/devices, so relative link targets
// such as "../../../0000:61:00.0" resolve as on a real host.
type hostFS struct{ h *Host }

type node struct {
	kids   func() map[string]*node // directory
	lookup func(name string) *node // optional fast path for kids()[name]
	target string                  // symlink
	read   func() ([]byte, *opError)
	write  func(data []byte) (bool, *opError) // nil: read-only (EACCES)
}

func (n *node) isDir() bool  { return n.kids != nil }
func (n *node) isLink() bool { return n.target != "" }

func dirNode(kids func() map[string]*node) *node { return &node{kids: kids} }
func linkNode(target string) *node               { return &node{target: target} }

func textNode(s string) *node {
	return &node{read: func() ([]byte, *opError) { return []byte(s), nil }}
}

func errNode(e syscall.Errno) *node {
	return &node{read: func() ([]byte, *opError) { return nil, fail(e, "") }}
}

func rwNode(read func() ([]byte, *opError), write func([]byte) (bool, *opError)) *node {
	return &node{read: read, write: write}
}

func writeOnlyNode(write func([]byte) (bool, *opError)) *node {
	return &node{write: write}
}

// rel computes a symlink target as sysfs does (kernfs_get_target_path): go
// up from the link's directory until reaching an ancestor of the target's
// parent, then down to the target. dir and target are absolute and clean.
func rel(dir, target string) string {
	tparent := path.Dir(target)
	up := ""
	base := dir
	for base != "/" && tparent != base && !strings.HasPrefix(tparent, base+"/") {
		up += "../"
		base = path.Dir(base)
	}
	return up + strings.TrimPrefix(strings.TrimPrefix(target, base), "/")
}

// tree is the filesystem of one state at one instant.
type tree struct {
	st  *state
	now int64
}

const maxLinkHops = 40

// walk resolves p. Symlinks are followed in the middle of the path, and at
// the end when followLast.
func (t tree) walk(p string, followLast bool) (*node, syscall.Errno) {
	if !strings.HasPrefix(p, "/") {
		return nil, syscall.ENOENT
	}
	for hops := 0; ; hops++ {
		if hops > maxLinkHops {
			return nil, syscall.ELOOP
		}
		clean := path.Clean(p)
		var comps []string
		if clean != "/" {
			comps = strings.Split(clean[1:], "/")
		}
		n := t.root()
		restarted := false
		for i, c := range comps {
			if !n.isDir() {
				return nil, syscall.ENOTDIR
			}
			var child *node
			if n.lookup != nil {
				child = n.lookup(c)
			} else {
				child = n.kids()[c]
			}
			if child == nil {
				return nil, syscall.ENOENT
			}
			if child.isLink() && (i < len(comps)-1 || followLast) {
				base := "/" + strings.Join(comps[:i], "/")
				p = path.Join(append([]string{base, child.target}, comps[i+1:]...)...)
				restarted = true
				break
			}
			n = child
		}
		if !restarted {
			return n, 0
		}
	}
}

// namedDir is a directory of fixed names: listing it makes every child,
// looking one name up makes that child alone (child returns nil for a name
// the directory does not hold). A read walks through a few of these
// levels; building each level's whole map made most of a read's cost.
func namedDir(names []string, child func(name string) *node) *node {
	return &node{
		kids: func() map[string]*node {
			m := make(map[string]*node, len(names))
			for _, n := range names {
				if c := child(n); c != nil {
					m[n] = c
				}
			}
			return m
		},
		lookup: child,
	}
}

func (t tree) root() *node {
	return namedDir([]string{"sys", "proc", "dev"}, func(name string) *node {
		switch name {
		case "sys":
			return t.sys()
		case "proc":
			return t.procDir() // vfio.go; sys/kernel/random/boot_id
		case "dev":
			return t.devDir()
		}
		return nil
	})
}

func (t tree) sys() *node {
	return namedDir([]string{"bus", "class", "devices", "kernel"}, func(name string) *node {
		switch name {
		case "bus":
			return namedDir([]string{"pci"}, func(name string) *node {
				if name == "pci" {
					return t.busPCI()
				}
				return nil
			})
		case "class":
			return namedDir([]string{"net", "infiniband"}, func(name string) *node {
				switch name {
				case "net":
					return t.classNet()
				case "infiniband":
					return t.classInfiniband()
				}
				return nil
			})
		case "devices":
			return t.devices()
		case "kernel":
			return namedDir([]string{"debug", "config", "iommu_groups"}, func(name string) *node {
				switch name {
				case "iommu_groups":
					return t.iommuGroups() // vfio.go
				case "debug":
					if t.st.Spec.Debugfs == "off" {
						return dirNode(func() map[string]*node { return map[string]*node{} }) // the empty mount point
					}
					return namedDir([]string{"mlx5"}, func(name string) *node {
						if name == "mlx5" {
							return t.debugMLX5()
						}
						return nil
					})
				case "config":
					return t.configfs()
				}
				return nil
			})
		}
		return nil
	})
}

// --- /sys/bus/pci ---

func (t tree) busPCI() *node {
	return namedDir([]string{"devices", "drivers", "drivers_probe"}, func(name string) *node {
		switch name {
		case "devices":
			return &node{
				kids: func() map[string]*node {
					m := map[string]*node{}
					for _, d := range t.st.pciDevs(t.now) {
						m[d.addr()] = linkNode(rel("/sys/bus/pci/devices", t.devPath(d)))
					}
					return m
				},
				lookup: func(name string) *node {
					if d, ok := t.st.pci(name, t.now); ok {
						return linkNode(rel("/sys/bus/pci/devices", t.devPath(d)))
					}
					return nil
				},
			}
		case "drivers":
			return dirNode(func() map[string]*node {
				m := map[string]*node{}
				for _, drv := range t.st.knownDrivers() {
					m[drv] = t.driverDir(drv)
				}
				return m
			})
		case "drivers_probe":
			return writeOnlyNode(func(b []byte) (bool, *opError) {
				return t.st.probe(t.now, sysfsLine(b))
			})
		}
		return nil
	})
}

// sysfsLine drops the one trailing newline "echo" adds, as sysfs_streq ignores it.
func sysfsLine(b []byte) string { return strings.TrimSuffix(string(b), "\n") }

func (t tree) driverDir(drv string) *node {
	return dirNode(func() map[string]*node {
		m := map[string]*node{
			"bind": writeOnlyNode(func(b []byte) (bool, *opError) {
				return t.st.bind(t.now, drv, sysfsLine(b))
			}),
			"unbind": writeOnlyNode(func(b []byte) (bool, *opError) {
				return t.st.unbind(t.now, drv, sysfsLine(b))
			}),
		}
		for _, d := range t.st.pciDevs(t.now) {
			if d.driver() == drv {
				m[d.addr()] = linkNode(rel("/sys/bus/pci/drivers/"+drv, t.devPath(d)))
			}
		}
		return m
	})
}

// --- /sys/devices ---

func (t tree) devPath(d pciDev) string { return t.st.home(d.nic) + "/" + d.addr() }

func (t tree) devices() *node {
	virtual := func() *node {
		return namedDir([]string{"net"}, func(name string) *node {
			if name != "net" {
				return nil
			}
			return &node{
				kids: func() map[string]*node {
					m := map[string]*node{}
					for _, nd := range t.st.visibleNetdevs(t.now) {
						if nd.Role == roleLo || nd.Role == roleBond || nd.Role == roleVLAN {
							m[nd.Name] = t.netdevDir(nd)
						}
					}
					return m
				},
				// One netdev, without sorting every netdev (a bond's
				// files are read through here).
				lookup: func(name string) *node {
					if nd := t.st.link(name, t.now); nd != nil && (nd.Role == roleLo || nd.Role == roleBond || nd.Role == roleVLAN) {
						return t.netdevDir(nd)
					}
					return nil
				},
			}
		})
	}
	nicDir := func(home string) *node {
		return &node{
			kids: func() map[string]*node {
				m := map[string]*node{}
				for _, d := range t.st.pciDevs(t.now) {
					if t.st.home(d.nic) == home {
						m[d.addr()] = t.pciDir(d)
					}
				}
				return m
			},
			lookup: func(name string) *node {
				if d, ok := t.st.pci(name, t.now); ok && t.st.home(d.nic) == home {
					return t.pciDirFast(d)
				}
				return nil
			},
		}
	}
	return &node{
		kids: func() map[string]*node {
			m := map[string]*node{"virtual": virtual()}
			for _, nic := range t.st.NICs {
				home := t.st.home(nic)
				m[path.Base(home)] = nicDir(home)
			}
			return m
		},
		lookup: func(name string) *node {
			// A NIC's home, else "virtual" (as the map above: the NICs'
			// entries are set after it).
			for _, nic := range t.st.NICs {
				if home := t.st.home(nic); path.Base(home) == name {
					return nicDir(home)
				}
			}
			if name == "virtual" {
				return virtual()
			}
			return nil
		},
	}
}

func hexID(v int) string { return fmt.Sprintf("0x%04x\n", v) }

func (t tree) pciDir(d pciDev) *node {
	return dirNode(func() map[string]*node { return t.pciEntries(d, true) })
}

// pciEntries are the entries of a PCI function's directory; without all,
// only its files and its driver and physfn links: not net/, infiniband/
// and the virtfn links, whose making scans the netdevs or the VFs (a
// lookup of another name need not pay for them).
func (t tree) pciEntries(d pciDev, all bool) map[string]*node {
	st, now := t.st, t.now
	me := t.devPath(d)
	m := map[string]*node{
		"vendor":          textNode(hexID(mlxVendor)),
		"driver_override": t.overrideNode(d),
	}
	if drv := d.driver(); drv != "" {
		m["driver"] = linkNode(rel(me, "/sys/bus/pci/drivers/"+drv))
	}
	t.pciIOMMU(d, m) // vfio.go
	if all {
		if net := t.pciNetDir(d); net != nil {
			m["net"] = net
		}
	}
	if d.vf != nil {
		m["device"] = textNode(hexID(mlxVFDevice))
		m["physfn"] = linkNode("../" + d.pf.PCI)
		return m
	}
	pf, nic := d.pf, d.nic
	if all {
		if ib := t.pciInfiniband(pf); ib != nil {
			m["infiniband"] = ib // rdma.go
		}
	}
	m["device"] = textNode(hexID(mlxPFDevice))
	m["sriov_totalvfs"] = textNode(fmt.Sprintf("%d\n", nic.TotalVFs))
	m["sriov_offset"] = textNode(fmt.Sprintf("%d\n", pf.Offset))
	m["sriov_stride"] = textNode(fmt.Sprintf("%d\n", pf.Stride))
	m["sriov_vf_device"] = textNode(fmt.Sprintf("%x\n", mlxVFDevice))
	m["sriov_numvfs"] = rwNode(
		func() ([]byte, *opError) { return fmt.Appendf(nil, "%d\n", pf.NumVFs), nil },
		func(b []byte) (bool, *opError) {
			n, ok := parseKstrtou16(string(b))
			if !ok {
				return false, fail(syscall.EINVAL, "")
			}
			return st.setNumVFs(now, nic, pf, n)
		})
	m["sriov_drivers_autoprobe"] = rwNode(
		func() ([]byte, *opError) { return []byte(boolDigit(pf.Autoprobe) + "\n"), nil },
		func(b []byte) (bool, *opError) {
			v, ok := kstrtobool(string(b))
			if !ok {
				return false, fail(syscall.EINVAL, "")
			}
			if v == pf.Autoprobe {
				return false, nil
			}
			pf.Autoprobe = v
			return true, nil
		})
	if !all {
		return m
	}
	for _, vf := range pf.VFs {
		if vf.ready(now) {
			m["virtfn"+strconv.Itoa(vf.Index)] = linkNode("../" + vf.PCI)
		}
	}
	return m
}

// pciNetDir is a PCI function's net/ directory: nil when no netdev's
// parent is the function.
func (t tree) pciNetDir(d pciDev) *node {
	net := t.pciNetdevs(d)
	if len(net) == 0 {
		return nil
	}
	return dirNode(func() map[string]*node {
		m := map[string]*node{}
		for _, nd := range net {
			m[nd.Name] = t.netdevDir(nd)
		}
		return m
	})
}

func (t tree) overrideNode(d pciDev) *node {
	return rwNode(
		func() ([]byte, *opError) {
			if ov := d.override(); ov != "" {
				return []byte(ov + "\n"), nil
			}
			return []byte("(null)\n"), nil
		},
		func(b []byte) (bool, *opError) {
			if len(b) >= 4096-1 {
				return false, fail(syscall.EINVAL, "")
			}
			s, _, _ := strings.Cut(string(b), "\n")
			if d.vf != nil {
				d.vf.Override = s
			} else {
				d.pf.Override = s
			}
			return true, nil
		})
}

// pciNetdevs are the netdevs whose parent device is d: a PF's own netdev and
// its representors (mlx5 registers them on the PF), or a bound VF's netdev.
func (t tree) pciNetdevs(d pciDev) []*netdev {
	var out []*netdev
	if d.vf != nil {
		if nd := t.st.link(d.vf.Netdev, t.now); nd != nil && d.vf.Netdev != "" {
			out = append(out, nd)
		}
		return out
	}
	out = append(out, t.st.Netdevs[d.pf.Netdev])
	for _, vf := range d.pf.VFs {
		if nd := t.st.link(vf.Rep, t.now); nd != nil && vf.Rep != "" {
			out = append(out, nd)
		}
	}
	return out
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// parseKstrtou16 accepts what kstrtou16(buf, 0, ...) does: an optional '+',
// decimal, 0x hex or 0 octal, one trailing newline; the C string ends at
// the first NUL (the kernel reads "4\x00x" as 4).
func parseKstrtou16(s string) (int, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(s, "\n")
	s = strings.TrimPrefix(s, "+")
	digits := s
	hex := len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X")
	if hex {
		digits = s[2:]
	}
	if digits == "" {
		return 0, false
	}
	for _, r := range digits {
		isHexLetter := (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F')
		if !(r >= '0' && r <= '9') && !(hex && isHexLetter) {
			return 0, false // strconv also knows 0o, 0b and '_'; the kernel does not
		}
	}
	v, err := strconv.ParseUint(s, 0, 16)
	if err != nil {
		return 0, false
	}
	return int(v), true
}

// kstrtobool: y/Y/1/on → true, n/N/0/off → false.
func kstrtobool(s string) (bool, bool) {
	if s == "" {
		return false, false
	}
	switch s[0] {
	case 'y', 'Y', '1':
		return true, true
	case 'n', 'N', '0':
		return false, true
	case 'o', 'O':
		if len(s) > 1 {
			switch s[1] {
			case 'n', 'N':
				return true, true
			case 'f', 'F':
				return false, true
			}
		}
	}
	return false, false
}

// --- /sys/class/net ---

func (t tree) netdevPath(nd *netdev) string {
	switch nd.Role {
	case roleLo, roleBond, roleVLAN:
		return "/sys/devices/virtual/net/" + nd.Name
	}
	nic, pf := t.st.pfOf(nd)
	if nd.Role == roleVF {
		return t.st.home(nic) + "/" + pf.VFs[nd.VF].PCI + "/net/" + nd.Name
	}
	return t.st.home(nic) + "/" + pf.PCI + "/net/" + nd.Name
}

func (t tree) classNet() *node {
	return &node{
		kids: func() map[string]*node {
			m := map[string]*node{}
			for _, nd := range t.st.visibleNetdevs(t.now) {
				m[nd.Name] = linkNode(rel("/sys/class/net", t.netdevPath(nd)))
			}
			return m
		},
		lookup: func(name string) *node {
			if nd := t.st.link(name, t.now); nd != nil {
				return linkNode(rel("/sys/class/net", t.netdevPath(nd)))
			}
			return nil
		},
	}
}

func (t tree) netdevDir(nd *netdev) *node {
	return dirNode(func() map[string]*node {
		st, now := t.st, t.now
		m := map[string]*node{
			"address":      textNode(nd.MAC + "\n"),
			"operstate":    textNode(st.operState(nd, now) + "\n"),
			"ifindex":      textNode(fmt.Sprintf("%d\n", nd.Ifindex)),
			"phys_port_id": errNode(syscall.EOPNOTSUPP),
			"carrier": &node{read: func() ([]byte, *opError) {
				if !nd.AdminUp {
					return nil, fail(syscall.EINVAL, "")
				}
				return []byte(boolDigit(st.operUp(nd, now)) + "\n"), nil
			}},
			"ifalias": rwNode(
				func() ([]byte, *opError) {
					if nd.Alias == "" {
						return nil, nil
					}
					return []byte(nd.Alias + "\n"), nil
				},
				func(b []byte) (bool, *opError) {
					if len(b) >= 256 {
						return false, fail(syscall.EINVAL, "")
					}
					s, _, _ := strings.Cut(string(b), "\n")
					nd.Alias = s
					return true, nil
				}),
			"mtu": rwNode(
				func() ([]byte, *opError) { return fmt.Appendf(nil, "%d\n", nd.MTU), nil },
				func(b []byte) (bool, *opError) {
					v, err := strconv.Atoi(strings.TrimSpace(string(b)))
					if err != nil {
						return false, fail(syscall.EINVAL, "")
					}
					return st.setMTU(t.now, nd.Name, v)
				}),
		}
		switch nd.Role {
		case rolePF:
			nic, pf := st.pfOf(nd)
			m["phys_port_name"] = textNode(fmt.Sprintf("p%d\n", pf.Index))
			m["phys_switch_id"] = textNode(nic.SwitchID + "\n")
		case roleRep:
			nic, pf := st.pfOf(nd)
			m["phys_port_name"] = textNode(fmt.Sprintf("pf%dvf%d\n", pf.Index, nd.VF))
			m["phys_switch_id"] = textNode(nic.SwitchID + "\n")
		default:
			m["phys_port_name"] = errNode(syscall.EOPNOTSUPP)
			m["phys_switch_id"] = errNode(syscall.EOPNOTSUPP)
		}
		m["statistics"] = t.statsDir(nd) // counters.go
		me := t.netdevPath(nd)
		switch nd.Role {
		case rolePF, roleRep, roleVF:
			m["device"] = linkNode(rel(me, path.Dir(path.Dir(me)))) // "../../../<bdf>"
		}
		if nd.Master != "" {
			if mst := st.Netdevs[nd.Master]; mst != nil {
				m["master"] = linkNode(rel(me, t.netdevPath(mst)))
			}
		}
		if nd.Bond != nil {
			m["bonding"] = t.bondingDir(nd)
		}
		if mst := st.Netdevs[nd.Master]; mst != nil && mst.Bond != nil {
			m["bonding_slave"] = t.bondingSlaveDir(mst, nd)
		}
		return m
	})
}

func (t tree) bondingDir(nd *netdev) *node {
	return dirNode(func() map[string]*node {
		b := nd.Bond
		slaves := ""
		if len(b.Slaves) > 0 {
			slaves = strings.Join(b.Slaves, " ") + "\n"
		}
		active := ""
		if b.ActiveSlave != "" {
			active = b.ActiveSlave + "\n"
		}
		mii := "down\n"
		if t.st.operState(nd, t.now) == "up" {
			mii = "up\n"
		}
		ro := func(s string) *node { return textNode(s) }
		// The 802.3ad files read empty (nothing printed) in other modes.
		agg, ports, partner := "", "", ""
		if b.Mode == "802.3ad" {
			l := t.st.lacp(nd, t.now)
			agg, ports = fmt.Sprintf("%d\n", l.Aggregator), fmt.Sprintf("%d\n", l.Ports)
			if l.PartnerMAC != "" {
				partner = l.PartnerMAC + "\n"
			}
		}
		m := map[string]*node{
			"ad_aggregator":  ro(agg),
			"ad_num_ports":   ro(ports),
			"ad_partner_mac": ro(partner),
			"slaves":         ro(slaves),
			"active_slave":   ro(active),
			"mii_status":     ro(mii),
		}
		// The options the model writes (bondopts.go), 0644 as in bond_sysfs.c.
		st, now := t.st, t.now
		for name, o := range bondOpts {
			m[name] = rwNode(
				func() ([]byte, *opError) { return []byte(o.show(b)), nil },
				func(data []byte) (bool, *opError) { return st.setBondOption(now, nd, name, string(data)) })
		}
		return m
	})
}

// bondingSlaveDir is /sys/class/net/<slave>/bonding_slave: the slave's
// aggregator ("N/A" outside 802.3ad).
func (t tree) bondingSlaveDir(bond, slave *netdev) *node {
	return dirNode(func() map[string]*node {
		agg := "N/A\n"
		if bond.Bond.Mode == "802.3ad" {
			if id, ok := t.st.lacp(bond, t.now).SlaveAgg[slave.Name]; ok {
				agg = fmt.Sprintf("%d\n", id)
			}
		}
		return map[string]*node{"ad_aggregator_id": textNode(agg)}
	})
}

// --- /sys/kernel/debug/mlx5 ---

func (t tree) debugMLX5() *node {
	return dirNode(func() map[string]*node {
		m := map[string]*node{}
		for _, nic := range t.st.NICs {
			for _, pf := range nic.PFs {
				m[pf.PCI] = dirNode(func() map[string]*node {
					if len(nic.PFs) != 2 || nic.NoLAGDebugfs {
						return map[string]*node{}
					}
					return map[string]*node{"lag": t.lagDir(nic)}
				})
			}
		}
		return m
	})
}

func (t tree) lagDir(nic *nicState) *node {
	return dirNode(func() map[string]*node {
		st, now := t.st, t.now
		active := st.lagActive(nic, now)
		onlyActive := func(s string) *node {
			if !active {
				return errNode(syscall.EINVAL)
			}
			return textNode(s)
		}
		state := "disabled\n"
		mapping := ""
		if active {
			state = "active\n"
			mapping = st.lagMapping(nic, now)
		}
		members := ""
		for _, pf := range nic.PFs {
			members += pf.PCI + "\n"
		}
		return map[string]*node{
			"state":         textNode(state),
			"type":          onlyActive(st.lagType(nic) + "\n"),
			"port_sel_mode": onlyActive(st.lagPortSel(nic) + "\n"),
			"flags":         onlyActive(st.lagFlags(nic)),
			"mapping":       onlyActive(mapping),
			"members":       textNode(members),
		}
	})
}

// --- sysfs.FS ---

func pathErr(op, p string, e syscall.Errno) error {
	return &fs.PathError{Op: op, Path: p, Err: e}
}

// ReadFile implements sysfs.FS.
func (f hostFS) ReadFile(p string) ([]byte, error) {
	var out []byte
	err := f.h.view(func(st *state, now int64) error {
		n, e := tree{st, now}.walk(p, true)
		switch {
		case e != 0:
			return pathErr("open", p, e)
		case n.isDir():
			return pathErr("read", p, syscall.EISDIR)
		case n.read == nil:
			return pathErr("open", p, syscall.EACCES)
		}
		b, oe := n.read()
		if oe != nil {
			return pathErr("read", p, oe.errno)
		}
		out = append([]byte(nil), b...)
		return nil
	})
	if err != nil && !isPathErr(err) {
		err = &fs.PathError{Op: "read", Path: p, Err: err}
	}
	return out, err
}

// WriteFile implements sysfs.FS: one write(2) to an existing attribute.
func (f hostFS) WriteFile(p string, data []byte) error {
	what := ""
	if crashpoint.Armed() {
		what = "kernel: write " + p
	}
	err := f.h.updateAs(what, func(st *state, now int64) (bool, error) {
		n, e := tree{st, now}.walk(p, true)
		switch {
		case e != 0:
			return false, pathErr("open", p, e)
		case n.isDir():
			return false, pathErr("open", p, syscall.EISDIR)
		case n.write == nil:
			return false, pathErr("open", p, syscall.EACCES)
		}
		changed, oe := n.write(data)
		if oe != nil {
			return changed, pathErr("write", p, oe.errno)
		}
		return changed, nil
	})
	if err != nil && !isPathErr(err) {
		err = &fs.PathError{Op: "write", Path: p, Err: err}
	}
	return err
}

// ReadDir implements sysfs.FS: sorted names.
func (f hostFS) ReadDir(p string) ([]string, error) {
	var names []string
	err := f.h.view(func(st *state, now int64) error {
		n, e := tree{st, now}.walk(p, true)
		switch {
		case e != 0:
			return pathErr("open", p, e)
		case !n.isDir():
			return pathErr("readdirent", p, syscall.ENOTDIR)
		}
		for name := range n.kids() {
			names = append(names, name)
		}
		sort.Strings(names)
		return nil
	})
	if err != nil && !isPathErr(err) {
		err = &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return names, err
}

// Readlink implements sysfs.FS.
func (f hostFS) Readlink(p string) (string, error) {
	var target string
	err := f.h.view(func(st *state, now int64) error {
		n, e := tree{st, now}.walk(p, false)
		switch {
		case e != 0:
			return pathErr("readlink", p, e)
		case !n.isLink():
			return pathErr("readlink", p, syscall.EINVAL)
		}
		target = n.target
		return nil
	})
	if err != nil && !isPathErr(err) {
		err = &fs.PathError{Op: "readlink", Path: p, Err: err}
	}
	return target, err
}

func isPathErr(err error) bool {
	_, ok := err.(*fs.PathError)
	return ok
}
