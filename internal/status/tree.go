package status

// `vflag status --tree`: each group drawn as a tree on the terminal, along
// the path of the traffic: PFs, the bond over them, its bridge, the
// representors in it, their VFs and the domains holding them.

import (
	"fmt"
	"io"
	"strings"
)

// treeNode is one line of the picture and what hangs below it.
type treeNode struct {
	label string
	kids  []*treeNode
}

func (n *treeNode) add(label string) *treeNode {
	k := &treeNode{label: label}
	n.kids = append(n.kids, k)
	return k
}

// draw writes n's children below prefix with box-drawing branches.
func (n *treeNode) draw(w io.Writer, prefix string) {
	for i, k := range n.kids {
		branch, next := "├─ ", "│  "
		if i == len(n.kids)-1 {
			branch, next = "└─ ", "   "
		}
		fmt.Fprintf(w, "%s%s%s\n", prefix, branch, k.label)
		k.draw(w, prefix+next)
	}
}

// WriteTree draws every group of hs.
func WriteTree(w io.Writer, hs HostStatus) {
	for _, g := range hs.Groups {
		root := groupTree(g)
		fmt.Fprintln(w, root.label)
		root.draw(w, "")
	}
}

// groupTree is one group's picture. A switchdev group: the PFs, the bond
// over them, its bridge, each representor in the bridge with its VF and
// domain; a VF whose representor is not in the bridge hangs under its PF,
// as does every VF of a legacy group.
func groupTree(g GroupStatus) *treeNode {
	head := fmt.Sprintf("group %s (%s", g.Name, g.Eswitch)
	if g.LAG != nil {
		head += ", lag " + g.LAG.State
	}
	root := &treeNode{label: head + ")"}
	pfs := map[string]*treeNode{}
	for _, p := range g.PFs {
		state := "down"
		if p.OperState == "up" {
			state = "up"
		}
		pfs[p.Netdev] = root.add(fmt.Sprintf("pf %s (%s, %s, numvfs %d)", p.Netdev, dash(p.PCI), state, p.NumVFs))
	}
	var bridge *treeNode
	if b := g.Bond; b != nil {
		var label string
		if b.Mode == "absent" {
			label = fmt.Sprintf("bond %s absent", b.Name)
		} else {
			label = fmt.Sprintf("bond %s over %s (%s, %d/%d slaves up)", b.Name, dash(strings.Join(b.Slaves, " + ")), b.Mode, len(g.SlavesUp), len(b.Slaves))
		}
		parent := root.add(label)
		if b.Mode == "absent" {
			parent = root
		}
		if g.Bridge != "" {
			bridge = parent.add(fmt.Sprintf("bridge %s (hw-offload %s)", g.Bridge, dash(g.HWOffload)))
		}
	}
	for _, v := range g.VFs {
		vf := fmt.Sprintf("vf %s/%d (%s, %s, %s)", v.PF, v.Index, dash(v.PCI), dash(v.Driver), dash(v.MAC))
		var n *treeNode
		switch {
		case bridge != nil && v.OVSPort != "":
			port := strings.Join(append([]string{fmt.Sprintf("ofport %d", v.OFPort)}, portVLAN(v)...), ", ")
			n = bridge.add(fmt.Sprintf("rep %s (%s)", v.OVSPort, port)).add(vf)
		case pfs[v.PF] != nil:
			if v.Representor != "" {
				vf += fmt.Sprintf(", rep %s not in a bridge", v.Representor)
			}
			n = pfs[v.PF].add(vf)
		default:
			n = root.add(vf)
		}
		if v.Domain != "" {
			n.add("domain " + v.Domain)
		}
		for _, h := range v.Holders {
			n.add("held by " + h.Who())
		}
	}
	for _, p := range g.Problems {
		root.add("problem: " + p)
	}
	return root
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
