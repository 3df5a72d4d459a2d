package status

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vflag/vflag/eswitch"
)

// WriteText prints the status for people: per group, one line per PF,
// the bond, LAG, OVS bridge and datapath, one line per VF, the VF pool,
// the rate groups, then the problems.
func WriteText(w io.Writer, hs HostStatus) {
	for _, g := range hs.Groups {
		fmt.Fprintf(w, "group %s\n", g.Name)
		writePFsText(w, g)
		writeBondText(w, g)
		writeLAGOVSText(w, g)
		for _, v := range g.VFs {
			writeVFText(w, g, v)
		}
		if g.HoldersError != "" {
			fmt.Fprintf(w, "  vf holders unknown: %s\n", g.HoldersError)
		}
		writeNetworkText(w, g.Network)
		for _, r := range g.RateGroups {
			if !r.Present {
				fmt.Fprintf(w, "  rate group %s on %s absent\n", r.Name, r.Devlink)
				continue
			}
			fmt.Fprintf(w, "  rate group %s on %s tx_max %s tx_share %s leaves %d\n", r.Name, r.Devlink, mbit(r.TxMax), mbit(r.TxShare), r.Leaves)
		}
		for _, p := range g.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
	}
}

func writePFsText(w io.Writer, g GroupStatus) {
	for _, p := range g.PFs {
		master := ""
		if p.Master != "" {
			master = " master " + p.Master
		}
		total := "?"
		if p.TotalVFs > 0 {
			total = fmt.Sprint(p.TotalVFs)
		}
		fmt.Fprintf(w, "  pf %-12s %s driver %s numvfs %d/%s eswitch %s mtu %d%s\n", p.Netdev, dash(p.PCI), dash(p.Driver), p.NumVFs, total, p.Eswitch, p.MTU, master)
	}
}

func writeBondText(w io.Writer, g GroupStatus) {
	if g.Bond != nil && g.Bond.Mode == "absent" {
		fmt.Fprintf(w, "  bond %s absent\n", g.Bond.Name)
		return
	}
	if g.Bond == nil {
		return
	}
	b := g.Bond
	fmt.Fprintf(w, "  bond %s mode %s slaves [%s] active %s mii %s\n", b.Name, b.Mode, strings.Join(b.Slaves, " "), dash(b.ActiveSlave), dash(b.MIIStatus))
	opts := fmt.Sprintf("mtu %d miimon %d updelay %d downdelay %d min_links %d", g.BondMTU, b.Miimon, b.UpDelay, b.DownDelay, b.MinLinks)
	if g.MTU != 0 {
		opts = fmt.Sprintf("mtu %d (ovs %s) miimon %d updelay %d downdelay %d min_links %d", g.BondMTU, ovsMTU(g.BondOVSMTU), b.Miimon, b.UpDelay, b.DownDelay, b.MinLinks)
	}
	if b.LacpRate != "" {
		opts += " lacp_rate " + b.LacpRate
	}
	if b.AdSelect != "" {
		opts += " ad_select " + b.AdSelect
	}
	if b.XmitHashPolicy != "" {
		opts += " xmit_hash_policy " + b.XmitHashPolicy
	}
	if b.Mode == "active-backup" {
		opts += " primary " + dash(b.Primary)
	}
	fmt.Fprintf(w, "  bond options %s\n", opts)
	if l := b.LACP; l != nil {
		fmt.Fprintf(w, "  lacp aggregator %d ports %d partner %s\n", l.Aggregator, l.Ports, dash(l.PartnerMAC))
	}
}

// writeLAGOVSText prints the hardware LAG, the OVS bridge and datapath,
// the shared tc block and where the flows run.
func writeLAGOVSText(w io.Writer, g GroupStatus) {
	if g.LAG != nil {
		l := g.LAG
		extra := ""
		if l.State == eswitch.LAGActive {
			extra = fmt.Sprintf(" type %s port_sel_mode %s shared_fdb %v", l.Type, l.PortSelMode, l.SharedFDB)
		}
		if l.Why != "" {
			extra = " (" + l.Why + ")"
		}
		fmt.Fprintf(w, "  lag %s%s\n", l.State, extra)
	}
	if g.Bridge != "" {
		extra := ""
		if g.TCPolicy != "" {
			extra += " tc-policy " + g.TCPolicy
		}
		if g.MaxIdle != 0 {
			extra += fmt.Sprintf(" max-idle %dms", g.MaxIdle)
		}
		fmt.Fprintf(w, "  ovs bridge %s hw-offload %s%s\n", g.Bridge, dash(g.HWOffload), extra)
	}
	if d := g.Datapath; d != nil {
		fmt.Fprintf(w, "  ovs datapath %s hit %d missed %d lost %d flows %d upcall dispatch %s\n", d.Name, d.Hit, d.Missed, d.Lost, d.Flows, d.Dispatch())
	}
	if sb := g.SharedBlock; sb != nil {
		fmt.Fprintf(w, "  tc shared block %s\n", sb)
	}
	if g.Tunnel != "" {
		fmt.Fprintf(w, "  tunnel %s\n", g.Tunnel)
	}
	if o := g.OVN; o != nil {
		reg := "registered"
		switch {
		case o.SouthboundErr != "":
			reg = "Southbound unreadable"
		case !o.Registered:
			reg = "NOT registered"
		}
		fmt.Fprintf(w, "  ovn chassis %s (%s) %s at %s; ports: %d bound here, %d ovn-installed of %d\n", dash(o.Chassis), o.Encap, reg, o.Remote, o.Bound, o.Installed, o.Ports)
	}
	if fc := g.Flows; fc != nil {
		fmt.Fprintf(w, "  ovs flows with traffic: %d in hardware, %d in tc software, %d in the kernel datapath (%d idle)\n", fc.Hardware, fc.TCSoftware, fc.KernelDP, fc.Idle)
	}
}

// portVLAN are the VLAN columns of a VF's OVS port as status shows them,
// in the flat text and the tree alike: vlan_mode, tag, trunks.
func portVLAN(v VFStatus) []string {
	var out []string
	if v.VLANMode != "" {
		out = append(out, "vlan_mode "+v.VLANMode)
	}
	if v.Tag != 0 {
		out = append(out, fmt.Sprintf("tag %d", v.Tag))
	}
	if len(v.Trunks) > 0 {
		out = append(out, "trunks "+strings.Trim(strings.Join(strings.Fields(fmt.Sprint(v.Trunks)), ","), "[]"))
	}
	return out
}

func writeVFText(w io.Writer, g GroupStatus, v VFStatus) {
	port := "-"
	if v.OVSPort != "" {
		extra := ""
		for _, c := range portVLAN(v) {
			extra += " " + c
		}
		if v.OVSMTURequest != 0 {
			extra += fmt.Sprintf(" mtu %s/%d", ovsMTU(v.OVSMTU), v.OVSMTURequest)
		}
		port = fmt.Sprintf("%s(ofport %d%s)", v.OVSPort, v.OFPort, extra)
	}
	rep := dash(v.Representor)
	if v.RepMTU != 0 {
		rep += fmt.Sprintf(" (mtu %d)", v.RepMTU)
	}
	if v.Netdev != "" && g.MTU != 0 {
		rep += fmt.Sprintf(" netdev %s (mtu %d)", v.Netdev, v.NetdevMTU)
	}
	policy := ""
	if p := v.Policy; p != nil {
		policy = " " + p.String()
	}
	rate := ""
	if r := v.Rate; r != nil && (r.TxMax != 0 || r.TxShare != 0 || r.Parent != "") {
		rate = fmt.Sprintf(" rate tx_max %s tx_share %s group %s", mbit(r.TxMax), mbit(r.TxShare), dash(r.Parent))
	}
	held := ""
	for i, h := range v.Holders {
		if i == 0 {
			held = " held by " + h.Who()
		} else {
			held += "; " + h.Who()
		}
	}
	fmt.Fprintf(w, "  vf %s/%d %s driver %s mac %s rep %s ovs %s domain %s%s%s%s\n", v.PF, v.Index, dash(v.PCI), dash(v.Driver), dash(v.MAC), rep, port, dash(v.Domain), policy, rate, held)
}

func writeNetworkText(w io.Writer, n *NetworkStatus) {
	switch {
	case n == nil:
	case n.Error != "":
		fmt.Fprintf(w, "  network %s: %s\n", n.Name, n.Error)
	case !n.Exists:
		fmt.Fprintf(w, "  network %s absent\n", n.Name)
	default:
		state := "inactive"
		if n.Active {
			state = "active"
		}
		if n.Autostart {
			state += ", autostart"
		}
		if !n.Owned {
			state += ", not vflag's"
		}
		fmt.Fprintf(w, "  network %s (%s): pool of %d VF(s), %d held, %d free\n", n.Name, state, len(n.VFs), n.Used(), len(n.VFs)-n.Used())
		for _, v := range n.VFs {
			if v.Domain != "" {
				fmt.Fprintf(w, "    %s held by domain %s portgroup %s mac %s\n", v.PCI, v.Domain, dash(v.Portgroup), dash(v.MAC))
			}
		}
	}
}

// ovsMTU is the mtu ovs-vswitchd reports, "-" before it did.
func ovsMTU(m int) string {
	if m == 0 {
		return "-"
	}
	return strconv.Itoa(m)
}

// mbit prints a rate in Mbit/s, "-" for none.
func mbit(m int) string {
	if m == 0 {
		return "-"
	}
	return fmt.Sprintf("%dMbit", m)
}
