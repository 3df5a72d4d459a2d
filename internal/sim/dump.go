package sim

import (
	"fmt"
	"sort"
	"strings"
)

// Dump renders the whole host as deterministic text, as of now: NICs, PFs,
// VFs, links, bonds, LAG state, then the kernel log after a line "dmesg:".
// Counters and timestamps are left out, so a host returned to a previous
// state dumps the same text as before (the dmesg section aside).
func (h *Host) Dump() string {
	var out string
	err := h.view(func(st *state, now int64) error {
		out = st.dump(now)
		return nil
	})
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func (st *state) dump(now int64) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	for _, nic := range st.NICs {
		w("nic %s driver=%s switch_id=%s total_vfs=%d rdma=%v\n", nic.Name, nic.Driver, nic.SwitchID, nic.TotalVFs, nic.RDMA)
		for _, pf := range nic.PFs {
			mode := pf.Mode
			if pf.Busy != nil && pf.Busy.Until > now {
				mode += " (changing to " + pf.Busy.Target + ")"
			}
			ov := pf.Override
			if ov == "" {
				ov = "(null)"
			}
			encap := "" // only where not the default (basic)
			if pf.EncapMode != "" {
				encap = " encap_mode=" + pf.EncapMode
			}
			w("  pf %s port=%d netdev=%s driver=%s override=%s mode=%s numvfs=%d ready=%d/%d autoprobe=%s flow_steering_mode=%s offset=%d stride=%d%s\n",
				pf.PCI, pf.Index, pf.Netdev, orDash(pf.Driver), ov, mode, pf.NumVFs, pf.readyVFs(now), pf.NumVFs,
				boolDigit(pf.Autoprobe), pf.FlowSteering, pf.Offset, pf.Stride, encap)
			for _, vf := range pf.VFs {
				if !vf.ready(now) {
					w("    vf %d %s creating\n", vf.Index, vf.PCI)
					continue
				}
				ov := vf.Override
				if ov == "" {
					ov = "(null)"
				}
				in := vf.info()
				w("    vf %d %s driver=%s override=%s mac=%s vlan=%d qos=%d trust=%s spoofchk=%s link-state=%s rate=%d-%d netdev=%s rep=%s\n",
					vf.Index, vf.PCI, orDash(vf.Driver), ov, vf.MAC, vf.Vlan, vf.Qos, onOff(vf.Trust), onOff(vf.Spoofchk), in.LinkState, vf.MinTxRate, vf.MaxTxRate,
					orDash(st.visibleName(vf.Netdev, now)), orDash(st.visibleName(vf.Rep, now)))
				if vf.Rep != "" && vf.Leaf != (rateLeaf{}) {
					w("      rate leaf tx_share=%d tx_max=%d parent=%s\n", vf.Leaf.TxShare, vf.Leaf.TxMax, orDash(vf.Leaf.Parent))
				}
			}
			for _, n := range pf.RateNodes {
				w("    rate node %s tx_share=%d tx_max=%d\n", n.Name, n.TxShare, n.TxMax)
			}
		}
		if len(nic.PFs) == 2 {
			l := nic.LAG
			switch {
			case l.Mode != "":
				w("  lag state=active type=%s port_sel_mode=%s flags=%s\n", st.lagType(nic), st.lagPortSel(nic),
					strings.ReplaceAll(strings.TrimSpace(st.lagFlags(nic)), "\n", ","))
			case l.Bond == "":
				w("  lag state=disabled\n")
			case l.Failed:
				w("  lag state=disabled bond=%s failed=VFs bound at activation\n", l.Bond)
			case !st.lagActive(nic, now):
				w("  lag state=disabled bond=%s activating\n", l.Bond)
			default:
				hash := ""
				if st.lagPortSel(nic) == "hash" {
					hash = " hash=" + l.Hash // not in debugfs: what mlx5 took at the enslave
				}
				w("  lag state=active bond=%s type=%s port_sel_mode=%s flags=shared_fdb:on mapping=%s%s\n",
					l.Bond, st.lagType(nic), st.lagPortSel(nic),
					strings.ReplaceAll(strings.TrimSpace(st.lagMapping(nic, now)), "\n", ","), hash)
			}
		}
	}
	nds := st.visibleNetdevs(now)
	sort.Slice(nds, func(i, j int) bool { return nds[i].Name < nds[j].Name })
	w("links:\n")
	for _, nd := range nds {
		what := nd.Role
		switch nd.Role {
		case rolePF:
			_, pf := st.pfOf(nd)
			what += " " + pf.PCI
		case roleVF:
			_, pf := st.pfOf(nd)
			what += " " + pf.VFs[nd.VF].PCI
		case roleRep:
			_, pf := st.pfOf(nd)
			what += fmt.Sprintf(" pf%dvf%d of %s", pf.Index, nd.VF, pf.PCI)
		}
		feat := "-"
		switch nd.Role {
		case rolePF, roleVF, roleRep:
			feat = onOff(nd.HWTC)
		}
		w("  %s %s master=%s alias=%q admin=%s oper=%s mac=%s mtu=%d hw-tc-offload=%s\n",
			nd.Name, what, orDash(nd.Master), nd.Alias, map[bool]string{true: "up", false: "down"}[nd.AdminUp],
			st.operState(nd, now), nd.MAC, nd.MTU, feat)
	}
	st.dumpTC(w, nds, now)
	st.dumpUnderlay(w, nds)
	w("bonds:\n")
	for _, nd := range nds {
		if nd.Bond == nil {
			continue
		}
		bo := nd.Bond
		w("  %s mode=%s miimon=%d lacp_rate=%s xmit_hash_policy=%s ad_select=%s min_links=%d updelay=%d downdelay=%d primary=%s slaves=%s active_slave=%s\n",
			nd.Name, bo.Mode, bo.Miimon, bo.LacpRate, bo.XmitHashPolicy, bo.adSelect(), bo.MinLinks, bo.UpDelay*bo.Miimon, bo.DownDelay*bo.Miimon, orDash(bo.Primary),
			orDash(strings.Join(bo.Slaves, ",")), orDash(bo.ActiveSlave))
	}
	st.dumpProcs(w) // vfio.go
	w("dmesg:\n")
	for _, line := range st.dmesg(now) {
		w("  %s\n", line)
	}
	return b.String()
}

func (st *state) visibleName(name string, now int64) string {
	if name == "" || st.link(name, now) == nil {
		return ""
	}
	return name
}
