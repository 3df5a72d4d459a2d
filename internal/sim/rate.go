package sim

import (
	"fmt"
	"sort"
	"syscall"

	"github.com/vflag/vflag/eswitch"
)

// This file models devlink-rate (devlink port function rate): one leaf per
// VF port in switchdev and the nodes an operator creates. The rules, from
// net/core/devlink.c (Linux 6.1, devlink_nl_cmd_rate_*_doit,
// devlink_nl_rate_parent_node_set, devlink_rate_nodes_check) and mlx5
// (esw/qos.c, devlink rate ops):
//
//   - a leaf exists for each VF port while the eswitch is in switchdev; it
//     is born with tx_share 0, tx_max 0 and no parent, and goes with the VF
//     (numvfs 0, back to legacy), dropping its parent reference;
//   - rates are bytes per second; mlx5 (and netdevsim) take only whole
//     Mbit/s: a rate that is not a multiple of 125000 is EINVAL "Provided
//     rate is not in link speed units of 1Mbps". Neither the devlink core
//     nor mlx5 compares tx_share with tx_max: tx_share > tx_max is accepted
//     (from the source: the core sets each on its own, netdevsim's and
//     mlx5's setters compare nothing; not tried on the real kernel, as the
//     devlink tool refuses it itself, reading the other value; vflag's
//     config refuses it);
//   - a node is created in switchdev only (mlx5: EOPNOTSUPP "Rate node
//     creation supported only in switchdev mode"); a second node of the same
//     name is EEXIST; an unknown node, leaf or parent is ENODEV (the core
//     maps a failed lookup of the parent to -ENODEV, not ENOENT);
//   - a parent is set only on an object without one: naming a parent while
//     one is set, even the same, is EBUSY "Rate object already has parent.";
//     "" (noparent) unsets it, and is a no-op without one;
//   - a node with children (its reference count above one) cannot be
//     deleted: EBUSY "Node has children. Cannot delete node.";
//   - the eswitch mode cannot change while a rate node exists: EBUSY "Rate
//     node(s) exists." (checkModeChange).
//
// netdevsim (the e2e bed) implements the same leaf and node objects in 6.1
// with the same core rules (e2e switchdev.sh: a second parent and deleting
// a node with a child are EBUSY there); its units check caps rates at its
// 5000 Mbit/s link (EINVAL "TX rate value exceed link maximum speed
// 5000Mbps", seen there), which mlx5 does not.

type rateLeaf struct {
	TxShare uint64 `json:"tx_share,omitempty"`
	TxMax   uint64 `json:"tx_max,omitempty"`
	Parent  string `json:"parent,omitempty"`
}

type rateNode struct {
	Name    string `json:"name"`
	TxShare uint64 `json:"tx_share,omitempty"`
	TxMax   uint64 `json:"tx_max,omitempty"`
}

const rateUnit = eswitch.BytesPerMbit

func checkRates(txShare, txMax uint64) *opError {
	for _, r := range []uint64{txShare, txMax} {
		if r%rateUnit != 0 {
			return fail(syscall.EINVAL, "Provided rate is not in link speed units of 1Mbps")
		}
	}
	return nil
}

// rateDevlink resolves a devlink instance that has rate objects: a PF in switchdev.
func (st *state) rateDevlink(d eswitch.Devlink) (*pfState, *opError) {
	_, pf, e := st.devlinkPF(d)
	if e != nil {
		return nil, e
	}
	return pf, nil
}

func (pf *pfState) leaf(now int64, port uint32) (*vfState, *opError) {
	vhca := uint32(pf.Index) << 16
	if pf.Mode == eswitch.ModeSwitchdev && port&0xffff0000 == vhca {
		for _, vf := range pf.VFs {
			if vhca|uint32(vf.Index+1) == port && vf.Rep != "" && vf.ready(now) {
				return vf, nil
			}
		}
	}
	return nil, fail(syscall.ENODEV, "devlink port %d not found", port)
}

func (pf *pfState) node(name string) (int, *opError) {
	for i, n := range pf.RateNodes {
		if n.Name == name {
			return i, nil
		}
	}
	return -1, fail(syscall.ENODEV, "rate node %q not found", name)
}

// children counts the leaves whose parent is the node.
func (pf *pfState) children(name string) int {
	n := 0
	for _, vf := range pf.VFs {
		if vf.Rep != "" && vf.Leaf.Parent == name {
			n++
		}
	}
	return n
}

// Rates implements eswitch.Kernel: the leaves (by port index) and nodes of
// every PF in switchdev, sorted as Ports.
func (h *Host) Rates() ([]eswitch.Rate, error) {
	var out []eswitch.Rate
	err := h.view(func(st *state, now int64) error {
		for _, nic := range st.NICs {
			for _, pf := range nic.PFs {
				if pf.Mode != eswitch.ModeSwitchdev {
					continue
				}
				dl := eswitch.Devlink{Bus: "pci", Device: pf.PCI}
				for _, vf := range pf.VFs {
					if vf.Rep == "" || !vf.ready(now) {
						continue
					}
					out = append(out, eswitch.Rate{Devlink: dl, Type: eswitch.RateLeaf, PortIndex: uint32(pf.Index)<<16 | uint32(vf.Index+1),
						TxShare: vf.Leaf.TxShare, TxMax: vf.Leaf.TxMax, Parent: vf.Leaf.Parent})
				}
				for _, n := range pf.RateNodes {
					out = append(out, eswitch.Rate{Devlink: dl, Type: eswitch.RateNode, Name: n.Name, TxShare: n.TxShare, TxMax: n.TxMax})
				}
			}
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].Devlink.String() < out[j].Devlink.String() })
		return nil
	})
	return out, err
}

// SetRateLeaf implements eswitch.Kernel.
func (h *Host) SetRateLeaf(d eswitch.Devlink, port uint32, txShare, txMax uint64) error {
	op := fmt.Sprintf("devlink port function rate set %s/%d tx_share %d tx_max %d", d, port, txShare, txMax)
	return h.update(func(st *state, now int64) (bool, error) {
		pf, e := st.rateDevlink(d)
		if e != nil {
			return false, kernelErr(op, e)
		}
		vf, e := pf.leaf(now, port)
		if e == nil {
			e = checkRates(txShare, txMax)
		}
		if e != nil {
			return false, kernelErr(op, e)
		}
		vf.Leaf.TxShare, vf.Leaf.TxMax = txShare, txMax
		return true, nil
	})
}

// SetRateLeafParent implements eswitch.Kernel.
func (h *Host) SetRateLeafParent(d eswitch.Devlink, port uint32, parent string) error {
	op := fmt.Sprintf("devlink port function rate set %s/%d parent %q", d, port, parent)
	return h.update(func(st *state, now int64) (bool, error) {
		pf, e := st.rateDevlink(d)
		if e != nil {
			return false, kernelErr(op, e)
		}
		vf, e := pf.leaf(now, port)
		if e != nil {
			return false, kernelErr(op, e)
		}
		switch {
		case vf.Leaf.Parent != "" && parent != "":
			return false, kernelErr(op, fail(syscall.EBUSY, "Rate object already has parent."))
		case parent == "":
			changed := vf.Leaf.Parent != ""
			vf.Leaf.Parent = ""
			return changed, nil
		}
		if _, e := pf.node(parent); e != nil {
			return false, kernelErr(op, e)
		}
		vf.Leaf.Parent = parent
		return true, nil
	})
}

// AddRateNode implements eswitch.Kernel.
func (h *Host) AddRateNode(d eswitch.Devlink, name string, txShare, txMax uint64) error {
	op := fmt.Sprintf("devlink port function rate add %s/%s tx_share %d tx_max %d", d, name, txShare, txMax)
	return h.update(func(st *state, now int64) (bool, error) {
		pf, e := st.rateDevlink(d)
		if e != nil {
			return false, kernelErr(op, e)
		}
		if pf.Mode != eswitch.ModeSwitchdev {
			return false, kernelErr(op, fail(syscall.EOPNOTSUPP, "Rate node creation supported only in switchdev mode"))
		}
		if name == "" { // devlink_rate_node_get_from_attrs: an empty name is EINVAL, any other is taken
			return false, kernelErr(op, fail(syscall.EINVAL, "empty rate node name"))
		}
		if _, e := pf.node(name); e == nil {
			return false, kernelErr(op, fail(syscall.EEXIST, "rate node %q exists", name))
		}
		if e := checkRates(txShare, txMax); e != nil {
			return false, kernelErr(op, e)
		}
		pf.RateNodes = append(pf.RateNodes, &rateNode{Name: name, TxShare: txShare, TxMax: txMax})
		return true, nil
	})
}

// SetRateNode implements eswitch.Kernel.
func (h *Host) SetRateNode(d eswitch.Devlink, name string, txShare, txMax uint64) error {
	op := fmt.Sprintf("devlink port function rate set %s/%s tx_share %d tx_max %d", d, name, txShare, txMax)
	return h.update(func(st *state, now int64) (bool, error) {
		pf, e := st.rateDevlink(d)
		if e != nil {
			return false, kernelErr(op, e)
		}
		i, e := pf.node(name)
		if e == nil {
			e = checkRates(txShare, txMax)
		}
		if e != nil {
			return false, kernelErr(op, e)
		}
		pf.RateNodes[i].TxShare, pf.RateNodes[i].TxMax = txShare, txMax
		return true, nil
	})
}

// DelRateNode implements eswitch.Kernel.
func (h *Host) DelRateNode(d eswitch.Devlink, name string) error {
	op := fmt.Sprintf("devlink port function rate del %s/%s", d, name)
	return h.update(func(st *state, now int64) (bool, error) {
		pf, e := st.rateDevlink(d)
		if e != nil {
			return false, kernelErr(op, e)
		}
		i, e := pf.node(name)
		if e != nil {
			return false, kernelErr(op, e)
		}
		if pf.children(name) > 0 {
			return false, kernelErr(op, fail(syscall.EBUSY, "Node has children. Cannot delete node."))
		}
		pf.RateNodes = append(pf.RateNodes[:i], pf.RateNodes[i+1:]...)
		return true, nil
	})
}
