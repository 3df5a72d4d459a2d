package validate

import (
	"fmt"

	"github.com/vflag/vflag/eswitch"
)

// RateLeaf is one VF's configured devlink rate leaf (rates in bytes per
// second, as devlink has them).
type RateLeaf struct {
	PF      int // index into Target.PFs
	VF      int
	TxMax   uint64
	TxShare uint64
	Parent  string // the rate group, "" none
}

// RateNode is one configured rate group: a node on each owning PF's devlink.
type RateNode struct {
	Name    string
	TxMax   uint64
	TxShare uint64
}

func mbit(b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%dMbit", b/eswitch.BytesPerMbit)
}

// rateChecks: each rate group's node on each owning devlink, each VF's
// leaf, as devlink shows them ("devlink port function rate show"), against
// the config.
func rateChecks(k eswitch.Kernel, t Target) []Check {
	if len(t.RateLeaves) == 0 && len(t.RateNodes) == 0 {
		return nil
	}
	rates, err := k.Rates()
	if err != nil {
		return []Check{failed("rate", "cannot read the devlink rate objects: %v", err)}
	}
	var out []Check
	seen := map[eswitch.Devlink]bool{}
	for _, i := range t.Owners {
		d := t.PFs[i].Devlink
		if seen[d] {
			continue
		}
		seen[d] = true
		for _, n := range t.RateNodes {
			name := fmt.Sprintf("rate/%s/%s", d, n.Name)
			var cur *eswitch.Rate
			for j := range rates {
				if r := rates[j]; r.Devlink == d && r.Type == eswitch.RateNode && r.Name == n.Name {
					cur = &rates[j]
				}
			}
			switch {
			case cur == nil:
				out = append(out, failed(name, "no rate node %s on %s", n.Name, d))
			case cur.TxMax != n.TxMax || cur.TxShare != n.TxShare:
				out = append(out, failed(name, "rate node %s/%s has tx_max %s tx_share %s, want tx_max %s tx_share %s", d, n.Name, mbit(cur.TxMax), mbit(cur.TxShare), mbit(n.TxMax), mbit(n.TxShare)))
			default:
				out = append(out, pass(name, "rate node %s/%s tx_max %s tx_share %s", d, n.Name, mbit(cur.TxMax), mbit(cur.TxShare)))
			}
		}
	}
	var ports []eswitch.Port
	if len(t.RateLeaves) > 0 {
		if ports, err = k.Ports(); err != nil {
			return append(out, failed("rate", "cannot read the devlink ports: %v", err))
		}
	}
	for _, l := range t.RateLeaves {
		if l.PF < 0 || l.PF >= len(t.PFs) {
			continue
		}
		pf := t.PFs[l.PF]
		name := fmt.Sprintf("rate/%s/vf%d", pf.Netdev, l.VF)
		var port *eswitch.Port
		for j := range ports {
			p := ports[j]
			if p.Flavour == eswitch.FlavourPCIVF && p.Devlink == pf.Devlink && p.PfNumber == pf.PfNumber && int(p.VfNumber) == l.VF {
				port = &ports[j]
			}
		}
		if port == nil {
			out = append(out, failed(name, "VF %d of %s has no devlink port (eswitch not in switchdev, or the VF does not exist)", l.VF, pf.Netdev))
			continue
		}
		var cur *eswitch.Rate
		for j := range rates {
			if r := rates[j]; r.Devlink == pf.Devlink && r.Type == eswitch.RateLeaf && r.PortIndex == port.Index {
				cur = &rates[j]
			}
		}
		switch {
		case cur == nil:
			out = append(out, failed(name, "no rate leaf for port %s/%d", pf.Devlink, port.Index))
		case cur.TxMax != l.TxMax || cur.TxShare != l.TxShare || cur.Parent != l.Parent:
			out = append(out, failed(name, "leaf %s/%d has tx_max %s tx_share %s parent %s, want tx_max %s tx_share %s parent %s", pf.Devlink, port.Index,
				mbit(cur.TxMax), mbit(cur.TxShare), orDash(cur.Parent), mbit(l.TxMax), mbit(l.TxShare), orDash(l.Parent)))
		default:
			out = append(out, pass(name, "leaf %s/%d tx_max %s tx_share %s parent %s", pf.Devlink, port.Index, mbit(cur.TxMax), mbit(cur.TxShare), orDash(cur.Parent)))
		}
	}
	return out
}
