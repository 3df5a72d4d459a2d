package status

// `vflag status -o prometheus`: the status as Prometheus text exposition
// format 0.0.4, for node_exporter's textfile collector. Gauges only, every
// family with HELP and TYPE, one family's samples together (the format
// requires it), labels escaped. Families about the bond, the hardware LAG
// and OVS have samples for switchdev groups only: a legacy group has none
// of them, and an absent series is not a zero.

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vflag/vflag/eswitch"
)

// metricFamily is one metric name with its samples.
type metricFamily struct {
	name, help string
	samples    []metricSample
}

type metricSample struct {
	labels [][2]string // name, value; in this order
	value  float64
}

func (f *metricFamily) add(v float64, labels ...string) {
	s := metricSample{value: v}
	for i := 0; i+1 < len(labels); i += 2 {
		s.labels = append(s.labels, [2]string{labels[i], labels[i+1]})
	}
	f.samples = append(f.samples, s)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricFamilies are the families of the status, each with its help.
type metricFamilies struct {
	groupInfo  *metricFamily
	problems   *metricFamily
	pfUp       *metricFamily
	pfMTU      *metricFamily
	bondMTU    *metricFamily
	numVFs     *metricFamily
	lagActive  *metricFamily
	lagInfo    *metricFamily
	slaves     *metricFamily
	slavesUp   *metricFamily
	lacpPorts  *metricFamily
	lacpPeer   *metricFamily
	minLinks   *metricFamily
	upDelay    *metricFamily
	downDelay  *metricFamily
	offload    *metricFamily
	dpMissed   *metricFamily
	dpLost     *metricFamily
	maxIdle    *metricFamily
	ovsMTUFam  *metricFamily
	bridgePort *metricFamily
	vfs        *metricFamily
	poolVFs    *metricFamily
	poolUp     *metricFamily
	attached   *metricFamily
	vfTxMax    *metricFamily
	vfTxShare  *metricFamily
	rgTxMax    *metricFamily
	rgTxShare  *metricFamily
	rgLeaves   *metricFamily
	vfInfo     *metricFamily
	vfMaxRate  *metricFamily
	vfMinRate  *metricFamily
	blockOK    *metricFamily
	blockOn    *metricFamily
	flowsFam   *metricFamily
	blockRules *metricFamily
	ovnReg     *metricFamily
	ovnPorts   *metricFamily
}

func newMetricFamilies() *metricFamilies {
	fam := func(name, help string) *metricFamily { return &metricFamily{name: name, help: help} }
	return &metricFamilies{
		groupInfo:  fam("vflag_group_info", "A group of the config, with its configured eswitch mode (value always 1)."),
		problems:   fam("vflag_group_problems", "Problems vflag status found in the group: each static check of vflag validate that fails (a PF missing, eswitch mode, VF count, bond, LAG inactive, a representor without an ofport, no LACP partner, the kernel datapath lost every upcall...), each change vflag plan would make, an unreadable journal, a failed boot unit, the one \"not up\" of a group never brought up or brought down; 0 when none."),
		pfUp:       fam("vflag_pf_up", "1 when the PF's link is up (operstate up), 0 otherwise."),
		pfMTU:      fam("vflag_pf_mtu", "The PF's MTU."),
		bondMTU:    fam("vflag_bond_mtu", "The MTU of the group's bond; switchdev groups only."),
		numVFs:     fam("vflag_pf_vfs", "VFs the PF has (sriov_numvfs)."),
		lagActive:  fam("vflag_lag_active", "1 when the group's hardware LAG is active, 0 when inactive or not visible (no mlx5 debugfs); switchdev groups only."),
		lagInfo:    fam("vflag_lag_info", "The group's hardware LAG state (active, inactive, unverified), type and port selection mode (value always 1); switchdev groups only."),
		slaves:     fam("vflag_bond_slaves", "Slaves of the group's bond; 0 when the bond does not exist; switchdev groups only."),
		slavesUp:   fam("vflag_bond_slaves_up", "Slaves of the group's bond whose link is up (operstate up); switchdev groups only."),
		lacpPorts:  fam("vflag_bond_lacp_ports", "Slaves in the active aggregator of the group's 802.3ad bond (below vflag_bond_slaves_up: a slave with link was left out)."),
		lacpPeer:   fam("vflag_bond_lacp_partner", "1 when an LACP partner (the switch) answers on the group's 802.3ad bond, 0 when none does (the switch ports are no LACP port-channel: the bond sends on one port)."),
		minLinks:   fam("vflag_bond_min_links", "The bond's min_links: it has carrier only with at least this many slaves up (0: one is enough); switchdev groups only."),
		upDelay:    fam("vflag_bond_updelay_seconds", "The bond's updelay: how long a slave's link must be up before the bond uses it; switchdev groups only."),
		downDelay:  fam("vflag_bond_downdelay_seconds", "The bond's downdelay: how long a slave's link must be down before the bond stops using it; switchdev groups only."),
		offload:    fam("vflag_ovs_hw_offload", "1 when Open vSwitch has other_config:hw-offload=true, 0 otherwise; switchdev groups only."),
		dpMissed:   fam("vflag_ovs_datapath_upcalls", "Packets the kernel datapath of the group's bridge (ovs-system) sent up to ovs-vswitchd since it was created (lookups missed); bridges of datapath_type system only."),
		dpLost:     fam("vflag_ovs_datapath_upcalls_lost", "Of those, upcalls the kernel could not hand to ovs-vswitchd (lookups lost); equal to vflag_ovs_datapath_upcalls and above 0: no handler is reading, the bridge forwards nothing new."),
		maxIdle:    fam("vflag_ovs_max_idle_seconds", "Open_vSwitch other_config:max-idle: how long idle datapath flows stay; only where it is set; switchdev groups only."),
		ovsMTUFam:  fam("vflag_ovs_interface_mtu", "The MTU Open vSwitch reports for the interface of the bond's and each representor's port (it applies the group's mtu as mtu_request); groups with an mtu only."),
		bridgePort: fam("vflag_ovs_bridge_ports", "VF representors that are ports of the group's bridge with an OpenFlow port number; switchdev groups only."),
		vfs:        fam("vflag_vfs", "VFs of the group's PFs."),
		poolVFs:    fam("vflag_network_vfs", "VFs of the group's libvirt hostdev network (its pool), by state: used (a domain's port holds it) or free; groups with a network only."),
		poolUp:     fam("vflag_network_active", "1 when the group's libvirt hostdev network exists and is active, 0 otherwise; groups with a network only."),
		attached:   fam("vflag_vfs_attached", "VFs of the group that a domain of the config's attachments has in its persistent XML."),
		vfTxMax:    fam("vflag_vf_tx_max_mbps", "The VF port's devlink rate leaf tx_max in Mbit/s (0: no limit); switchdev VFs with a leaf only."),
		vfTxShare:  fam("vflag_vf_tx_share_mbps", "The VF port's devlink rate leaf tx_share in Mbit/s (0: no guarantee); switchdev VFs with a leaf only."),
		rgTxMax:    fam("vflag_rate_group_tx_max_mbps", "A rate group's devlink rate node tx_max in Mbit/s (0: no limit), per owning PF's devlink instance; absent nodes are left out."),
		rgTxShare:  fam("vflag_rate_group_tx_share_mbps", "A rate group's devlink rate node tx_share in Mbit/s (0: no guarantee); absent nodes are left out."),
		rgLeaves:   fam("vflag_rate_group_vfs", "VF rate leaves under a rate group's node."),
		vfInfo:     fam("vflag_vf_info", "One VF: PF, index, PCI address, host driver, MAC set through the PF, representor, OVS port and domain (\"\" when none; value always 1)."),
		vfMaxRate:  fam("vflag_vf_max_tx_rate_mbps", "The VF's transmit rate limit set through the PF (max_tx_rate, Mbit/s; 0: no limit); legacy groups only."),
		vfMinRate:  fam("vflag_vf_min_tx_rate_mbps", "The VF's guaranteed transmit rate set through the PF (min_tx_rate, Mbit/s; 0: none); legacy groups only."),
		blockOK:    fam("vflag_shared_block_ok", "1 when the bond and each of its PFs are on the bond's shared tc ingress block (ingress_block = the bond's ifindex), where ovs-vswitchd keeps the bond port's rules; 0 when one is off it (what arrives on that PF is not offloaded; vflag up binds it again); switchdev groups with hw-offload only."),
		blockOn:    fam("vflag_shared_block_member", "1 when this device (the bond or one of its PFs) is on the bond's shared tc ingress block, 0 when not."),
		flowsFam:   fam("vflag_ovs_flows", "ovs-vswitchd's datapath flows with traffic whose in_port is the bond or a representor of the group's bridge, by where they run: hardware (offloaded:yes or partial), tc_software (dp:tc, not in hardware), kernel_datapath (dp:ovs); idle: flows without packets. vflag validate --offload says why a flow is not in hardware."),
		ovnReg:     fam("vflag_ovn_chassis_registered", "1 when the OVN Southbound has this host's chassis (the group's system-id) with an Encap of the configured type and address, 0 when not or when the Southbound cannot be read; groups with an ovn section only."),
		ovnPorts:   fam("vflag_ovn_ports", "The group's OVN ports (ovn_port, and the pool ports domains bound), by state: configured (all of them), bound (the Southbound's Port_Binding is bound to this chassis), installed (the representor's Interface has external_ids:ovn-installed=true: ovn-controller's flows are in); groups with an ovn section only."),
		blockRules: fam("vflag_shared_block_rules", "Rules (tc filters) in the bond's shared block, by where they run: hw (some device holds it in hardware), hw_all_pfs (every PF of the bond does: in_hw_count), sw (no device does: software only)."),
	}
}

// MetricNames are the metric families `vflag status -o prometheus` can
// write, in output order (docs/monitoring.md, the dashboard and the alert
// rules may name no other).
func MetricNames() []string {
	var out []string
	for _, f := range newMetricFamilies().ordered() {
		out = append(out, f.name)
	}
	return out
}

// ordered are the families in output order.
func (m *metricFamilies) ordered() []*metricFamily {
	return []*metricFamily{m.groupInfo, m.problems, m.pfUp, m.numVFs, m.pfMTU, m.lagActive, m.lagInfo, m.slaves, m.slavesUp, m.bondMTU, m.minLinks, m.upDelay, m.downDelay, m.lacpPorts, m.lacpPeer, m.offload, m.maxIdle, m.dpMissed, m.dpLost, m.blockOK, m.blockOn, m.blockRules, m.flowsFam, m.ovnReg, m.ovnPorts, m.bridgePort, m.ovsMTUFam, m.vfs, m.attached, m.poolUp, m.poolVFs, m.vfInfo, m.vfMaxRate, m.vfMinRate, m.vfTxMax, m.vfTxShare, m.rgTxMax, m.rgTxShare, m.rgLeaves}
}

// statusMetrics turns a status into metric families, in output order.
func statusMetrics(hs HostStatus) []*metricFamily {
	m := newMetricFamilies()
	for _, g := range hs.Groups {
		m.addGroup(g)
		m.addOVS(g)
		m.addOVN(g)
		m.addVFs(g)
	}
	return m.ordered()
}

// addGroup adds the group's PFs, hardware LAG, bond and VF pool.
func (m *metricFamilies) addGroup(g GroupStatus) {
	m.groupInfo.add(1, "group", g.Name, "eswitch", g.Eswitch)
	m.problems.add(float64(len(g.Problems)), "group", g.Name)
	for _, p := range g.PFs {
		m.pfUp.add(boolGauge(p.OperState == "up"), "group", g.Name, "pf", p.Netdev, "pci", p.PCI)
		m.numVFs.add(float64(p.NumVFs), "group", g.Name, "pf", p.Netdev, "pci", p.PCI)
		if p.MTU > 0 {
			m.pfMTU.add(float64(p.MTU), "group", g.Name, "pf", p.Netdev, "pci", p.PCI)
		}
	}
	if g.LAG != nil {
		m.lagActive.add(boolGauge(g.LAG.State == eswitch.LAGActive), "group", g.Name)
		m.lagInfo.add(1, "group", g.Name, "state", g.LAG.State, "type", g.LAG.Type, "port_sel_mode", g.LAG.PortSelMode)
	}
	if g.Bond != nil {
		n := len(g.Bond.Slaves)
		if g.Bond.Mode == "absent" {
			n = 0
		}
		m.slaves.add(float64(n), "group", g.Name, "bond", g.Bond.Name)
		m.slavesUp.add(float64(len(g.SlavesUp)), "group", g.Name, "bond", g.Bond.Name)
		if g.Bond.Mode != "absent" {
			m.minLinks.add(float64(g.Bond.MinLinks), "group", g.Name, "bond", g.Bond.Name)
			m.bondMTU.add(float64(g.BondMTU), "group", g.Name, "bond", g.Bond.Name)
			m.upDelay.add(float64(g.Bond.UpDelay)/1000, "group", g.Name, "bond", g.Bond.Name)
			m.downDelay.add(float64(g.Bond.DownDelay)/1000, "group", g.Name, "bond", g.Bond.Name)
		}
		if l := g.Bond.LACP; l != nil {
			m.lacpPorts.add(float64(l.Ports), "group", g.Name, "bond", g.Bond.Name)
			m.lacpPeer.add(boolGauge(l.PartnerMAC != "" && l.PartnerMAC != eswitch.NoLACPPartner), "group", g.Name, "bond", g.Bond.Name)
		}
	}
	if n := g.Network; n != nil {
		m.poolUp.add(boolGauge(n.Exists && n.Active), "group", g.Name, "network", n.Name)
		m.poolVFs.add(float64(n.Used()), "group", g.Name, "network", n.Name, "state", "used")
		m.poolVFs.add(float64(len(n.VFs)-n.Used()), "group", g.Name, "network", n.Name, "state", "free")
	}
}

// addOVS adds the group's bridge: hw-offload, ports, MTUs, flows, the
// shared tc block and the datapath's upcalls.
func (m *metricFamilies) addOVS(g GroupStatus) {
	if g.Bridge == "" {
		return
	}
	m.offload.add(boolGauge(g.HWOffload == "true"), "group", g.Name, "bridge", g.Bridge)
	if g.MaxIdle != 0 {
		m.maxIdle.add(float64(g.MaxIdle)/1000, "group", g.Name, "bridge", g.Bridge)
	}
	ports := 0
	for _, v := range g.VFs {
		if v.OVSPort != "" && v.OFPort > 0 {
			ports++
		}
	}
	m.bridgePort.add(float64(ports), "group", g.Name, "bridge", g.Bridge)
	if g.MTU != 0 {
		if g.BondOVSMTU != 0 && g.Bond != nil {
			m.ovsMTUFam.add(float64(g.BondOVSMTU), "group", g.Name, "bridge", g.Bridge, "port", g.Bond.Name)
		}
		for _, v := range g.VFs {
			if v.OVSPort != "" && v.OVSMTU != 0 {
				m.ovsMTUFam.add(float64(v.OVSMTU), "group", g.Name, "bridge", g.Bridge, "port", v.OVSPort)
			}
		}
	}
	if fc := g.Flows; fc != nil {
		for _, w := range []struct {
			where string
			n     int
		}{{"hardware", fc.Hardware}, {"tc_software", fc.TCSoftware}, {"kernel_datapath", fc.KernelDP}, {"idle", fc.Idle}} {
			m.flowsFam.add(float64(w.n), "group", g.Name, "bridge", g.Bridge, "where", w.where)
		}
	}
	if sb := g.SharedBlock; sb != nil {
		m.blockOK.add(boolGauge(sb.OK), "group", g.Name, "bond", sb.Bond)
		for _, mb := range sb.Members {
			m.blockOn.add(boolGauge(mb.OK), "group", g.Name, "bond", sb.Bond, "netdev", mb.Netdev)
		}
		if sb.RulesErr == "" {
			m.blockRules.add(float64(sb.InHW), "group", g.Name, "bond", sb.Bond, "where", "hw")
			m.blockRules.add(float64(sb.AllPFs), "group", g.Name, "bond", sb.Bond, "where", "hw_all_pfs")
			m.blockRules.add(float64(sb.Rules-sb.InHW), "group", g.Name, "bond", sb.Bond, "where", "sw")
		}
	}
	if d := g.Datapath; d != nil {
		m.dpMissed.add(float64(d.Missed), "group", g.Name, "bridge", g.Bridge, "datapath", d.Name)
		m.dpLost.add(float64(d.Lost), "group", g.Name, "bridge", g.Bridge, "datapath", d.Name)
	}
}

// addOVN adds the group's OVN chassis: registered, ports bound and installed.
func (m *metricFamilies) addOVN(g GroupStatus) {
	o := g.OVN
	if o == nil {
		return
	}
	m.ovnReg.add(boolGauge(o.Registered), "group", g.Name, "chassis", o.Chassis)
	m.ovnPorts.add(float64(o.Ports), "group", g.Name, "chassis", o.Chassis, "state", "configured")
	m.ovnPorts.add(float64(o.Bound), "group", g.Name, "chassis", o.Chassis, "state", "bound")
	m.ovnPorts.add(float64(o.Installed), "group", g.Name, "chassis", o.Chassis, "state", "installed")
}

// addVFs adds the group's VFs (info, rates, attachments) and rate groups.
func (m *metricFamilies) addVFs(g GroupStatus) {
	nAttached := 0
	for _, v := range g.VFs {
		if v.Domain != "" {
			nAttached++
		}
		if r := v.Rate; r != nil {
			m.vfTxMax.add(float64(r.TxMax), "group", g.Name, "pf", v.PF, "vf", strconv.Itoa(v.Index), "rate_group", r.Parent)
			m.vfTxShare.add(float64(r.TxShare), "group", g.Name, "pf", v.PF, "vf", strconv.Itoa(v.Index), "rate_group", r.Parent)
		}
		m.vfInfo.add(1, "group", g.Name, "pf", v.PF, "vf", strconv.Itoa(v.Index), "pci", v.PCI, "driver", v.Driver,
			"mac", v.MAC, "representor", v.Representor, "ovs_port", v.OVSPort, "domain", v.Domain)
		if p := v.Policy; p != nil {
			m.vfMaxRate.add(float64(p.MaxTxRate), "group", g.Name, "pf", v.PF, "vf", strconv.Itoa(v.Index))
			m.vfMinRate.add(float64(p.MinTxRate), "group", g.Name, "pf", v.PF, "vf", strconv.Itoa(v.Index))
		}
	}
	for _, r := range g.RateGroups {
		if r.Present {
			m.rgTxMax.add(float64(r.TxMax), "group", g.Name, "rate_group", r.Name, "devlink", r.Devlink)
			m.rgTxShare.add(float64(r.TxShare), "group", g.Name, "rate_group", r.Name, "devlink", r.Devlink)
			m.rgLeaves.add(float64(r.Leaves), "group", g.Name, "rate_group", r.Name, "devlink", r.Devlink)
		}
	}
	m.vfs.add(float64(len(g.VFs)), "group", g.Name)
	m.attached.add(float64(nAttached), "group", g.Name)
}

// WritePrometheus writes the status in the text exposition format.
// Families without samples are left out.
func WritePrometheus(w io.Writer, hs HostStatus) error {
	bw := bufio.NewWriter(w)
	for _, f := range statusMetrics(hs) {
		if len(f.samples) == 0 {
			continue
		}
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s gauge\n", f.name, escapeHelp(f.help), f.name)
		for _, s := range f.samples {
			bw.WriteString(f.name)
			if len(s.labels) > 0 {
				bw.WriteByte('{')
				for i, l := range s.labels {
					if i > 0 {
						bw.WriteByte(',')
					}
					fmt.Fprintf(bw, "%s=\"%s\"", l[0], escapeLabel(l[1]))
				}
				bw.WriteByte('}')
			}
			bw.WriteByte(' ')
			bw.WriteString(strconv.FormatFloat(s.value, 'g', -1, 64))
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

// escapeLabel escapes a label value: backslash, double quote, line feed.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// escapeHelp escapes a HELP text: backslash and line feed.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}
