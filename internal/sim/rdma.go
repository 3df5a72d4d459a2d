package sim

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// RDMA (KERNEL-FACTS §5 "RDMA device name", §6). A NIC with rdma: true has
// one mlx5_ib device per PF, named mlx5_<k> by the PF's position among all
// RDMA PFs of the host. While the NIC's hardware LAG is active (the model's
// LAG is always switchdev with shared_fdb), both are replaced by one device
// on PF0, mlx5_bond_<n> (n counts the bonded NICs before it), whose netdev is
// the bond. SetRDMABondFault makes a NIC's devices stay unbonded (a fault
// for tests: the RDMA device that did not bond).
//
// Files: /sys/class/infiniband/<dev> (a link to the PF's
// /sys/devices/.../<bdf>/infiniband/<dev>) with device, node_type,
// ports/1/{state, phys_state, link_layer, gids/N, gid_attrs/types/N,
// gid_attrs/ndevs/N} and the MLNX_OFED-only tc/1/{traffic_class, ttl}
// (modelled on every RDMA NIC: "Global tclass=N" or empty when unset, write
// N or tclass=-1; ttl the same with "ttl", an unconfirmed format). The GID
// table has 16 slots: 0 and 1 hold the netdev's EUI-64 link-local GID as
// IB/RoCE v1 and RoCE v2, the others read as the zero GID and their
// gid_attrs give EINVAL. Port state follows the netdev's operstate.
//
// configfs /sys/kernel/config/rdma_cm: Mkdir <dev> (ENODEV for an unknown
// device, EEXIST twice) creates ports/1/default_roce_mode (RoCE v2 until
// written; exactly "RoCE v2" or "IB/RoCE v1", one trailing newline allowed,
// else EINVAL) and default_roce_tos (u8). A group whose device went away
// (renamed by bonding) is hidden.

type rdmaState struct {
	CM     map[string]*cmGroup `json:"cm,omitempty"`      // configfs rdma_cm groups, by device name
	TC     map[string]*tcState `json:"tc,omitempty"`      // "<dev>/<port>"
	NoBond map[string]bool     `json:"no_bond,omitempty"` // NIC name: devices do not bond (fault)
}

type cmGroup struct {
	RoCEMode string `json:"roce_mode"`
	TOS      int    `json:"tos"`
}

type tcState struct {
	TClass *int `json:"tclass,omitempty"`
	TTL    *int `json:"ttl,omitempty"`
}

const (
	roceV1      = "IB/RoCE v1"
	roceV2      = "RoCE v2"
	gidSlots    = 16
	ibPortCount = 1
)

func (st *state) rdma() *rdmaState {
	if st.RDMA == nil {
		st.RDMA = &rdmaState{}
	}
	if st.RDMA.CM == nil {
		st.RDMA.CM = map[string]*cmGroup{}
	}
	if st.RDMA.TC == nil {
		st.RDMA.TC = map[string]*tcState{}
	}
	if st.RDMA.NoBond == nil {
		st.RDMA.NoBond = map[string]bool{}
	}
	return st.RDMA
}

// ibDev is one RDMA device as of now.
type ibDev struct {
	Name   string
	nic    *nicState
	pf     *pfState // the PCI function it hangs off
	ndev   string   // the netdev of port 1
	bonded bool
}

func (st *state) ibDevs(now int64) []ibDev {
	var out []ibDev
	k, bonds := 0, 0
	for _, nic := range st.NICs {
		if !nic.RDMA {
			continue
		}
		noBond := st.RDMA != nil && st.RDMA.NoBond[nic.Name]
		if len(nic.PFs) == 2 && st.lagActive(nic, now) && nic.LAG.Mode == "" && !noBond {
			out = append(out, ibDev{Name: fmt.Sprintf("mlx5_bond_%d", bonds), nic: nic, pf: nic.PFs[0], ndev: nic.LAG.Bond, bonded: true})
			bonds++
		} else {
			for j, pf := range nic.PFs {
				out = append(out, ibDev{Name: fmt.Sprintf("mlx5_%d", k+j), nic: nic, pf: pf, ndev: pf.Netdev})
			}
		}
		k += len(nic.PFs)
	}
	return out
}

func (st *state) ibDev(name string, now int64) (ibDev, bool) {
	for _, d := range st.ibDevs(now) {
		if d.Name == name {
			return d, true
		}
	}
	return ibDev{}, false
}

// linkLocalGID is the EUI-64 link-local GID of a MAC, "%pI6" style.
func linkLocalGID(mac string) string {
	var b [6]byte
	parts := strings.Split(mac, ":")
	for i := 0; i < 6 && i < len(parts); i++ {
		v, _ := strconv.ParseUint(parts[i], 16, 8)
		b[i] = byte(v)
	}
	return fmt.Sprintf("fe80:0000:0000:0000:%02x%02x:%02xff:fe%02x:%02x%02x", b[0]^2, b[1], b[2], b[3], b[4], b[5])
}

const zeroGID = "0000:0000:0000:0000:0000:0000:0000:0000"

func (t tree) ibDevPath(d ibDev) string {
	return t.devPath(pciDev{nic: d.nic, pf: d.pf}) + "/infiniband/" + d.Name
}

func (t tree) classInfiniband() *node {
	return dirNode(func() map[string]*node {
		m := map[string]*node{}
		for _, d := range t.st.ibDevs(t.now) {
			m[d.Name] = linkNode(rel("/sys/class/infiniband", t.ibDevPath(d)))
		}
		return m
	})
}

// pciInfiniband is a PF's infiniband/ directory, nil when it has no device.
func (t tree) pciInfiniband(pf *pfState) *node {
	var mine []ibDev
	for _, d := range t.st.ibDevs(t.now) {
		if d.pf == pf {
			mine = append(mine, d)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	return dirNode(func() map[string]*node {
		m := map[string]*node{}
		for _, d := range mine {
			m[d.Name] = t.ibDevDir(d)
		}
		return m
	})
}

func (t tree) ibDevDir(d ibDev) *node {
	return dirNode(func() map[string]*node {
		me := t.ibDevPath(d)
		return map[string]*node{
			"device":    linkNode(rel(me, path.Dir(path.Dir(me)))),
			"node_type": textNode("1: CA\n"),
			"ports": dirNode(func() map[string]*node {
				return map[string]*node{"1": t.ibPortDir(d)}
			}),
			"tc": dirNode(func() map[string]*node {
				return map[string]*node{"1": t.ibTCDir(d, 1)}
			}),
		}
	})
}

func (t tree) ibPortDir(d ibDev) *node {
	return dirNode(func() map[string]*node {
		st, now := t.st, t.now
		nd := st.Netdevs[d.ndev]
		up := nd != nil && st.operUp(nd, now)
		state, phys := "1: DOWN\n", "3: Disabled\n"
		if up {
			state, phys = "4: ACTIVE\n", "5: LinkUp\n"
		}
		gid := ""
		if nd != nil {
			gid = linkLocalGID(nd.MAC)
		}
		slot := func(i int) (string, string, bool) {
			if gid == "" || i > 1 {
				return zeroGID, "", false
			}
			if i == 0 {
				return gid, roceV1, true
			}
			return gid, roceV2, true
		}
		gids, types, ndevs := map[string]*node{}, map[string]*node{}, map[string]*node{}
		for i := range gidSlots {
			g, typ, ok := slot(i)
			n := strconv.Itoa(i)
			gids[n] = textNode(g + "\n")
			if ok {
				types[n] = textNode(typ + "\n")
				ndevs[n] = textNode(d.ndev + "\n")
			} else {
				types[n] = errNode(syscall.EINVAL)
				ndevs[n] = errNode(syscall.EINVAL)
			}
		}
		return map[string]*node{
			"state":      textNode(state),
			"phys_state": textNode(phys),
			"link_layer": textNode("Ethernet\n"),
			"gids":       dirNode(func() map[string]*node { return gids }),
			"gid_attrs": dirNode(func() map[string]*node {
				return map[string]*node{
					"types": dirNode(func() map[string]*node { return types }),
					"ndevs": dirNode(func() map[string]*node { return ndevs }),
				}
			}),
		}
	})
}

// parseTCValue accepts "N" or "<key>=N" with N in -1..255 (-1 clears).
func parseTCValue(b []byte, key string) (int, bool) {
	s := strings.TrimSpace(string(b))
	s = strings.TrimPrefix(s, key+"=")
	v, err := strconv.Atoi(s)
	if err != nil || v < -1 || v > 255 {
		return 0, false
	}
	return v, true
}

func (t tree) ibTCDir(d ibDev, port int) *node {
	return dirNode(func() map[string]*node {
		st := t.st
		key := fmt.Sprintf("%s/%d", d.Name, port)
		cur := func() *tcState {
			if st.RDMA == nil || st.RDMA.TC[key] == nil {
				return &tcState{}
			}
			return st.RDMA.TC[key]
		}
		attr := func(label string, get func(*tcState) *int, set func(*tcState, *int)) *node {
			return rwNode(
				func() ([]byte, *opError) {
					if v := get(cur()); v != nil {
						return fmt.Appendf(nil, "Global %s=%d\n", label, *v), nil
					}
					return nil, nil
				},
				func(b []byte) (bool, *opError) {
					v, ok := parseTCValue(b, label)
					if !ok {
						return false, fail(syscall.EINVAL, "")
					}
					tc := st.rdma().TC[key]
					if tc == nil {
						tc = &tcState{}
						st.rdma().TC[key] = tc
					}
					if v < 0 {
						set(tc, nil)
					} else {
						set(tc, &v)
					}
					return true, nil
				})
		}
		return map[string]*node{
			"traffic_class": attr("tclass", func(s *tcState) *int { return s.TClass }, func(s *tcState, v *int) { s.TClass = v }),
			"ttl":           attr("ttl", func(s *tcState) *int { return s.TTL }, func(s *tcState, v *int) { s.TTL = v }),
		}
	})
}

// --- configfs rdma_cm ---

func (t tree) configfs() *node {
	return dirNode(func() map[string]*node {
		return map[string]*node{"rdma_cm": dirNode(func() map[string]*node {
			m := map[string]*node{}
			if t.st.RDMA == nil {
				return m
			}
			for name, g := range t.st.RDMA.CM {
				if _, ok := t.st.ibDev(name, t.now); ok {
					m[name] = t.cmGroupDir(g)
				}
			}
			return m
		})}
	})
}

func (t tree) cmGroupDir(g *cmGroup) *node {
	port := dirNode(func() map[string]*node {
		return map[string]*node{
			"default_roce_mode": rwNode(
				func() ([]byte, *opError) { return []byte(g.RoCEMode + "\n"), nil },
				func(b []byte) (bool, *opError) {
					s := strings.TrimSuffix(string(b), "\n")
					if s != roceV1 && s != roceV2 {
						return false, fail(syscall.EINVAL, "")
					}
					changed := g.RoCEMode != s
					g.RoCEMode = s
					return changed, nil
				}),
			"default_roce_tos": rwNode(
				func() ([]byte, *opError) { return fmt.Appendf(nil, "%d\n", g.TOS), nil },
				func(b []byte) (bool, *opError) {
					v, ok := parseKstrtou16(string(b))
					if !ok || v > 255 {
						return false, fail(syscall.EINVAL, "")
					}
					changed := g.TOS != v
					g.TOS = v
					return changed, nil
				}),
		}
	})
	return dirNode(func() map[string]*node {
		ports := map[string]*node{}
		for p := 1; p <= ibPortCount; p++ {
			ports[strconv.Itoa(p)] = port
		}
		return map[string]*node{"ports": dirNode(func() map[string]*node { return ports })}
	})
}

// Mkdir creates a configfs directory: only /sys/kernel/config/rdma_cm/<ibdev>
// ("mkdir /sys/kernel/config/rdma_cm/mlx5_bond_0").
func (f hostFS) Mkdir(p string) error {
	clean := path.Clean(p)
	dir, name := path.Split(clean)
	err := f.h.update(func(st *state, now int64) (bool, error) {
		if _, e := (tree{st, now}).walk(clean, false); e == 0 {
			return false, pathErr("mkdir", p, syscall.EEXIST)
		}
		if dir != "/sys/kernel/config/rdma_cm/" {
			return false, pathErr("mkdir", p, syscall.EPERM)
		}
		if _, ok := st.ibDev(name, now); !ok {
			return false, pathErr("mkdir", p, syscall.ENODEV)
		}
		st.rdma().CM[name] = &cmGroup{RoCEMode: roceV2}
		return true, nil
	})
	if err != nil && !isPathErr(err) {
		err = &fs.PathError{Op: "mkdir", Path: p, Err: err}
	}
	return err
}

// SetRDMABondFault makes the RDMA devices of NIC nic stay unbonded while
// its LAG is active (on), or behave again (off).
func (h *Host) SetRDMABondFault(nic string, on bool) error {
	return h.update(func(st *state, now int64) (bool, error) {
		for _, n := range st.NICs {
			if n.Name == nic {
				if st.rdma().NoBond[nic] == on {
					return false, nil
				}
				if on {
					st.RDMA.NoBond[nic] = true
				} else {
					delete(st.RDMA.NoBond, nic)
				}
				return true, nil
			}
		}
		return false, fail(syscall.ENODEV, "no NIC %q", nic)
	})
}
