package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// Mbit converts a config rate (Mbit/s) to devlink-rate's bytes per second.
func Mbit(m int) uint64 { return uint64(m) * eswitch.BytesPerMbit }

// ToMbit converts devlink-rate's bytes per second to Mbit/s.
func ToMbit(b uint64) int { return int(b / eswitch.BytesPerMbit) }

// rateNodeKind creates a group's rate group as a devlink rate node on the
// devlink instance of each PF that owns VFs (devlink-rate is per eswitch),
// and keeps its tx_max/tx_share. A node of that name that vflag did not
// create (no journal entry) is an error naming it: vflag never takes over
// or deletes it. The undo first takes out of the node the leaves still
// under it (vflag put them there; the kernel refuses to delete a node with
// children, EBUSY), then deletes it.
//
//	devlink port function rate add pci/0000:61:00.0/tenant1 tx_share 0 tx_max 1gbit
//	devlink port function rate set pci/0000:61:00.0/tenant1 tx_max 2gbit
//	devlink port function rate del pci/0000:61:00.0/tenant1
type rateNodeKind struct{}

type rateNodeRecord struct {
	Devlink eswitch.Devlink `json:"devlink"`
	Name    string          `json:"name"`
	TxMax   uint64          `json:"tx_max"` // bytes per second, the target
	TxShare uint64          `json:"tx_share"`
}

func (rateNodeKind) Name() string { return "devlink.rate-node" }

// DependsOn: an eswitch that left switchdev has no nodes.
func (rateNodeKind) DependsOn() []string { return []string{modeKind{}.Name()} }

func (k rateNodeKind) id(d eswitch.Devlink, name string) string {
	return fmt.Sprintf("%s/%s/%s", k.Name(), d, name)
}

// findRate returns the rate object of d named by node name or leaf port.
func findRate(rates []eswitch.Rate, d eswitch.Devlink, typ string, name string, port uint32) (eswitch.Rate, bool) {
	for _, r := range rates {
		if r.Devlink != d || r.Type != typ {
			continue
		}
		if typ == eswitch.RateNode && r.Name == name || typ == eswitch.RateLeaf && r.PortIndex == port {
			return r, true
		}
	}
	return eswitch.Rate{}, false
}

func journaled(j *teardown.Journal, id string) bool {
	if j == nil {
		return false
	}
	for _, en := range j.Entries() {
		if en.ID == id {
			return true
		}
	}
	return false
}

// step: made tells whether the journal has an entry of id (vflag made the node).
func (k rateNodeKind) step(e *Env, made func(id string) bool, d eswitch.Devlink, name string, txMax, txShare int) teardown.Step {
	id := k.id(d, name)
	rec := rateNodeRecord{Devlink: d, Name: name, TxMax: Mbit(txMax), TxShare: Mbit(txShare)}
	return teardown.Step{
		Kind: k.Name(), ID: id,
		Check: func(context.Context) (teardown.Change, error) {
			rates, err := e.k.Rates()
			if err != nil {
				return teardown.Change{}, err
			}
			cur, ok := findRate(rates, d, eswitch.RateNode, name, 0)
			if !ok {
				return teardown.Change{Needed: true, Record: rec, Revert: fmt.Sprintf("rate node %s/%s: delete", d, name),
					Summary: fmt.Sprintf("rate node %s/%s: add, tx_max %s tx_share %s", d, name, mbitStr(txMax), mbitStr(txShare))}, nil
			}
			if !made(id) {
				return teardown.Change{}, fmt.Errorf("rate node %s/%s exists and vflag did not create it (no journal entry): vflag does not take over a node it did not make; rename the rate group or delete the node (devlink port function rate del %s/%s)", d, name, d, name)
			}
			// The record's undo deletes the node: a rollback of a change of
			// its rates does the node again.
			return teardown.Change{Needed: cur.TxMax != rec.TxMax || cur.TxShare != rec.TxShare, Record: rec, Revert: fmt.Sprintf("rate node %s/%s: delete", d, name),
				Rollback: teardown.RollbackRedo,
				Summary: fmt.Sprintf("rate node %s/%s: tx_max %s -> %s, tx_share %s -> %s", d, name,
					mbitStr(ToMbit(cur.TxMax)), mbitStr(txMax), mbitStr(ToMbit(cur.TxShare)), mbitStr(txShare))}, nil
		},
		Apply: func(context.Context) error {
			rates, err := e.k.Rates()
			if err != nil {
				return err
			}
			if _, ok := findRate(rates, d, eswitch.RateNode, name, 0); ok {
				return e.k.SetRateNode(d, name, rec.TxShare, rec.TxMax)
			}
			return e.k.AddRateNode(d, name, rec.TxShare, rec.TxMax)
		},
	}
}

func (rateNodeKind) Undo(ctx context.Context, e *Env, r rateNodeRecord) (string, error) {
	rates, err := e.k.Rates()
	if err != nil {
		return "", err
	}
	if _, ok := findRate(rates, r.Devlink, eswitch.RateNode, r.Name, 0); !ok {
		return "", nil
	}
	var left []string
	for _, l := range rates {
		if l.Devlink == r.Devlink && l.Type == eswitch.RateLeaf && l.Parent == r.Name {
			if err := e.k.SetRateLeafParent(l.Devlink, l.PortIndex, ""); err != nil && !rateGone(err) {
				return "", fmt.Errorf("take leaf %s out of rate node %s before deleting it: %w", l, r.Name, err)
			}
			left = append(left, fmt.Sprint(l.PortIndex))
		}
	}
	if err := e.k.DelRateNode(r.Devlink, r.Name); err != nil && !rateGone(err) {
		return "", err
	}
	if len(left) > 0 {
		return fmt.Sprintf("rate node %s/%s: leaves %s left it; deleted", r.Devlink, r.Name, strings.Join(left, " ")), nil
	}
	return fmt.Sprintf("rate node %s/%s: deleted", r.Devlink, r.Name), nil
}

// rateGone: the devlink instance, port or node is no longer there.
func rateGone(err error) bool { return errors.Is(err, syscall.ENODEV) || gone(err) }

func mbitStr(m int) string {
	if m == 0 {
		return "-"
	}
	return fmt.Sprintf("%dMbit", m)
}

// rateLeafKind sets a VF port's devlink rate leaf: tx_max, tx_share and
// its parent node (the VF's rate_group). The record keeps the leaf's prior
// values; the undo puts them back. A parent is changed in two calls (the
// kernel refuses a new parent while one is set: EBUSY): leave the old
// node, join the new.
//
//	devlink port function rate set pci/0000:61:00.0/1 tx_max 100mbit tx_share 10mbit
//	devlink port function rate set pci/0000:61:00.0/1 noparent
//	devlink port function rate set pci/0000:61:00.0/1 parent tenant1
type rateLeafKind struct{}

type rateLeafRecord struct {
	Devlink eswitch.Devlink `json:"devlink"`
	Port    uint32          `json:"port"` // devlink port index of the VF
	PF      string          `json:"pf"`   // PF netdev, for the reader
	VF      int             `json:"vf"`
	Prior   leafRates       `json:"prior"`
}

type leafRates struct {
	TxMax   uint64 `json:"tx_max"` // bytes per second
	TxShare uint64 `json:"tx_share"`
	Parent  string `json:"parent,omitempty"`
}

func (rateLeafKind) Name() string { return "devlink.rate-leaf" }

// DependsOn: new VFs, or VF ports made again by a mode change, have new
// leaves; a node made again has no children.
func (rateLeafKind) DependsOn() []string {
	return []string{numVFsKind{}.Name(), modeKind{}.Name(), rateNodeKind{}.Name()}
}

func (k rateLeafKind) id(pf string, vf int) string { return fmt.Sprintf("%s/%s/%d", k.Name(), pf, vf) }

func leafSummary(l leafRates) string {
	return fmt.Sprintf("tx_max %s tx_share %s parent %s", mbitStr(ToMbit(l.TxMax)), mbitStr(ToMbit(l.TxShare)), orDash(l.Parent))
}

// step: pruned tells, in a plan, whether a node is one of vflag's that the
// prune before the forward pass deletes (taking its leaves out first): a
// leaf under it then has no parent.
func (k rateLeafKind) step(e *Env, pf eswitch.PF, vf int, port uint32, want leafRates, pruned func(d eswitch.Devlink, node string) bool) teardown.Step {
	d := pf.Devlink
	read := func() (leafRates, error) {
		rates, err := e.k.Rates()
		if err != nil {
			return leafRates{}, err
		}
		cur, ok := findRate(rates, d, eswitch.RateLeaf, "", port)
		if !ok {
			return leafRates{}, fmt.Errorf("VF %d of %s: devlink shows no rate leaf for port %s/%d (the driver has no devlink-rate support?): %w", vf, pf.Netdev, d, port, eswitch.ErrNotSupported)
		}
		return leafRates{TxMax: cur.TxMax, TxShare: cur.TxShare, Parent: cur.Parent}, nil
	}
	return teardown.Step{
		Kind: k.Name(), ID: k.id(pf.Netdev, vf),
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := read()
			if err != nil {
				return teardown.Change{}, err
			}
			if cur.Parent != "" && pruned != nil && pruned(d, cur.Parent) {
				cur.Parent = ""
			}
			return teardown.Change{Needed: cur != want, Record: rateLeafRecord{Devlink: d, Port: port, PF: pf.Netdev, VF: vf, Prior: cur},
				Summary: fmt.Sprintf("%s vf %d (%s/%d): %s -> %s", pf.Netdev, vf, d, port, leafSummary(cur), leafSummary(want)),
				Revert:  fmt.Sprintf("%s vf %d (%s/%d): %s -> %s", pf.Netdev, vf, d, port, leafSummary(want), leafSummary(cur))}, nil
		},
		Apply: func(context.Context) error {
			cur, err := read()
			if err != nil {
				return err
			}
			return setLeaf(e.k, d, port, cur, want)
		},
	}
}

// setLeaf takes a leaf from cur to want: rates, then parent (leave, join).
func setLeaf(k eswitch.Kernel, d eswitch.Devlink, port uint32, cur, want leafRates) error {
	if cur.TxMax != want.TxMax || cur.TxShare != want.TxShare {
		if err := k.SetRateLeaf(d, port, want.TxShare, want.TxMax); err != nil {
			return err
		}
	}
	if cur.Parent == want.Parent {
		return nil
	}
	if cur.Parent != "" {
		if err := k.SetRateLeafParent(d, port, ""); err != nil {
			return err
		}
	}
	if want.Parent != "" {
		return k.SetRateLeafParent(d, port, want.Parent)
	}
	return nil
}

func (rateLeafKind) Undo(ctx context.Context, e *Env, r rateLeafRecord) (string, error) {
	rates, err := e.k.Rates()
	if err != nil {
		return "", err
	}
	l, ok := findRate(rates, r.Devlink, eswitch.RateLeaf, "", r.Port)
	if !ok {
		return "", nil // the VF port is gone: its leaf went with it
	}
	cur := leafRates{TxMax: l.TxMax, TxShare: l.TxShare, Parent: l.Parent}
	prior := r.Prior
	if prior.Parent != "" {
		if _, ok := findRate(rates, r.Devlink, eswitch.RateNode, prior.Parent, 0); !ok {
			prior.Parent = "" // the node it was under is gone: it cannot go back there
		}
	}
	if cur == prior {
		return "", nil
	}
	if err := setLeaf(e.k, r.Devlink, r.Port, cur, prior); err != nil && !rateGone(err) {
		return "", err
	}
	return fmt.Sprintf("%s vf %d (%s/%d): %s", r.PF, r.VF, r.Devlink, r.Port, leafSummary(prior)), nil
}

// rateNodes: the group's rate groups, as nodes on each owning PF's devlink.
func (run *groupRun) rateNodes(context.Context) ([]batch, error) {
	g := run.g
	if len(g.RateGroups) == 0 {
		return nil, nil
	}
	var s []teardown.Step
	for _, d := range devlinks(run.owners()) {
		for _, rg := range g.RateGroups {
			if run.nodesRemade(d) {
				s = append(s, predicted(rateNodeKind{}.Name(), rateNodeKind{}.id(d, rg.Name),
					fmt.Sprintf("rate node %s/%s tx_max %d Mbit/s tx_share %d Mbit/s (again: mlx5 destroys every rate node when numvfs goes to 0 in switchdev)", d, rg.Name, rg.TxMax, rg.TxShare)))
				continue
			}
			s = append(s, rateNodeKind{}.step(run.e, func(id string) bool { return journaled(run.r.Journal, id) }, d, rg.Name, rg.TxMax, rg.TxShare))
		}
	}
	return one(s...), nil
}

// nodesRemade tells a plan that the VFs of devlink d's mlx5 PF are made
// again while it is in switchdev: the write of 0 destroys every rate node
// of the instance (6.x eswitch.c mlx5_eswitch_disable_sriov:
// devl_rate_nodes_destroy), so up makes them again. (netdevsim keeps its
// nodes.)
func (run *groupRun) nodesRemade(d eswitch.Devlink) bool {
	for _, pf := range run.owners() {
		if pf.Devlink != d || !run.fresh(pf) || pf.Addr == "" {
			continue
		}
		drv, _ := run.e.pci.Driver(pf.Addr)
		mode, err := run.e.k.EswitchMode(d)
		return drv == eswitch.LAGDriver && err == nil && mode == eswitch.ModeSwitchdev
	}
	return false
}

// rateLeaves: each VF with a rate setting, on its devlink port's leaf
// (after the nodes: a leaf's parent must exist).
func (run *groupRun) rateLeaves(context.Context) ([]batch, error) {
	g := run.g
	owner := map[int]bool{}
	for _, i := range g.Owners {
		owner[i] = true
	}
	var pruned func(eswitch.Devlink, string) bool
	if run.dry {
		wanted := map[string]bool{}
		for _, rg := range g.RateGroups {
			wanted[rg.Name] = true
		}
		pruned = func(d eswitch.Devlink, node string) bool {
			return !wanted[node] && journaled(run.r.Journal, rateNodeKind{}.id(d, node))
		}
	}
	var ports []eswitch.Port
	var s []teardown.Step
	for _, v := range g.VFs {
		if !v.HasRate() || !owner[v.PF] {
			continue
		}
		if ports == nil {
			var err error
			if ports, err = run.e.k.Ports(); err != nil {
				return nil, err
			}
		}
		pf := g.PFs[v.PF]
		want := leafRates{TxMax: Mbit(v.TxMax), TxShare: Mbit(v.TxShare), Parent: v.RateGroup}
		port, ok := vfPort(ports, pf, v.VF)
		switch {
		case run.fresh(pf):
			// A VF port made again has a new leaf: no rates, no parent.
			if want == (leafRates{}) {
				s = append(s, unchanged(rateLeafKind{}.Name(), rateLeafKind{}.id(pf.Netdev, v.VF),
					fmt.Sprintf("%s vf %d: rate leaf %s (a new VF's)", pf.Netdev, v.VF, leafSummary(want))))
				continue
			}
			s = append(s, predicted(rateLeafKind{}.Name(), rateLeafKind{}.id(pf.Netdev, v.VF),
				fmt.Sprintf("%s vf %d: rate leaf %s -> %s (after the VFs are made again)", pf.Netdev, v.VF, leafSummary(leafRates{}), leafSummary(want))))
		case ok:
			s = append(s, rateLeafKind{}.step(run.e, pf, v.VF, port, want, pruned))
		case run.dry:
			s = append(s, predicted(rateLeafKind{}.Name(), rateLeafKind{}.id(pf.Netdev, v.VF),
				fmt.Sprintf("%s vf %d: rate leaf %s (after switchdev)", pf.Netdev, v.VF, leafSummary(want))))
		default:
			return nil, fmt.Errorf("VF %d of %s has no devlink port: no rate leaf to set", v.VF, pf.Netdev)
		}
	}
	return one(s...), nil
}

// vfPort is the devlink port index of VF vf of pf (switchdev).
func vfPort(ports []eswitch.Port, pf eswitch.PF, vf int) (uint32, bool) {
	for _, p := range ports {
		if p.Flavour == eswitch.FlavourPCIVF && p.Devlink == pf.Devlink && p.PfNumber == pf.PfNumber && int(p.VfNumber) == vf {
			return p.Index, true
		}
	}
	return 0, false
}

// rateNodesOn names the rate nodes of devlink instance d.
func rateNodesOn(k eswitch.Kernel, d eswitch.Devlink) []string {
	rates, err := k.Rates()
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range rates {
		if r.Devlink == d && r.Type == eswitch.RateNode {
			out = append(out, r.Name)
		}
	}
	return out
}
