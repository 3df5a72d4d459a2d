package validate

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// Target is what a group should look like on the host.
type Target struct {
	Group     string
	Switchdev bool         // VF-LAG group; legacy groups have no bond, LAG or bridge
	PFs       []eswitch.PF // resolved, in config order
	Owners    []int        // indexes of the PFs that own VFs
	NumVFs    int
	BondName  string
	BondMode  string
	Bridge    string
	HWOffload bool
	// DatapathType is the bridge's datapath_type: "" and "system" run on
	// the kernel datapath ovs-system, whose upcalls are checked; "netdev"
	// (userspace) has none.
	DatapathType string
	RoCE         RoCEExpect
	// BondOnly is a bare bond (vflag validate --bond): PFs are the bond's
	// slaves, BondMode "" accepts any mode, the RDMA devices are also found
	// by netdev (RDMANetdevs), and a bond without one has no RDMA checks.
	BondOnly    bool
	RDMANetdevs []string
	// MTU is the group's mtu (0: not configured, no mtu check); VFNetdevs
	// are the host netdevs of its VFs on a host netdev driver (legacy
	// groups), which carry it too.
	MTU       int
	VFNetdevs []string
	// VFPolicies are the legacy VF settings the config sets (legacy groups).
	VFPolicies []VFPolicyWant
	// RateNodes and RateLeaves are the configured devlink-rate objects
	// (switchdev groups).
	RateNodes  []RateNode
	RateLeaves []RateLeaf
	// AcceptUnverifiedLAG (config accept_unverified_lag): an mlx5 PF's LAG
	// state that cannot be read is a skip, not a failure.
	AcceptUnverifiedLAG bool
	// Tunnel is the group's overlay (tunnel.go); nil: the bond is a port
	// of the bridge.
	Tunnel *TunnelWant
}

// VFPolicyWant is one VF's configured legacy policy: only the fields Set
// names are compared.
type VFPolicyWant struct {
	PF   int // index into PFs
	VF   int
	Want eswitch.VFPolicy
	Set  []string // of "vlan", "trust", "spoofchk", "link_state", "rate"
}

// RoCEExpect is what the RDMA checks expect.
type RoCEExpect struct {
	Required bool   // fail (not skip) when the PFs have no RDMA device
	Mode     string // expected default RoCE mode; "" accepts either
}

// Bridge is the group's OVS bridge as the caller read it from OVSDB.
type Bridge struct {
	Exists    bool
	HWOffload string // "true", "false", "" unset
	Ports     map[string]BridgePort
}

// BridgePort is one port of the bridge.
type BridgePort struct {
	OFPort int
	Error  string
	MTU    int // Interface.mtu as ovs-vswitchd reports it (0: not reported)
	// Type and Options are the interface's (a tunnel port's).
	Type    string
	Options map[string]string
	// Tag, VLANMode and Trunks are the port's VLAN columns (Trunks sorted).
	Tag      int
	VLANMode string
	Trunks   []int
}

// Attachment is one configured attachment as the caller found it.
type Attachment struct {
	Domain  string
	PF      int
	VF      int
	Present bool   // the domain's persistent XML has vflag's interface for the VF
	Err     string // why it could not be read
	// Teaming is the pair of a migratable attachment; nil otherwise.
	Teaming *Teaming
}

// VLAN is a port's VLAN columns: OVS's tag, vlan_mode and trunks (sorted).
type VLAN struct {
	Tag    int
	Mode   string
	Trunks []int
}

// Teaming is a migratable attachment's pair as the caller found it.
type Teaming struct {
	MAC, Alias string // the pair's MAC and the standby's alias
	Bridge     string // the group's bridge
	// Standby: the persistent definition's interface with Alias.
	StandbyFound          bool
	StandbyMAC            string
	StandbyBridge         string
	StandbyOVS, Virtio    bool
	StandbyVLANOK         bool   // its <vlan> gives the VF's VLAN columns
	StandbyVLAN, WantVLAN string // both in words, for the message
	// VFTeam is the alias the VF's <teaming type='transient'> names ("" none).
	VFTeam string
	// VFVLAN is the VLAN the VF's <vlan> gives it (-1: not one tag),
	// WantVFVLAN the pair's: a legacy group's VF's vlan, 0 in a switchdev
	// group (the VLAN is its representor port's there).
	VFVLAN, WantVFVLAN int
	// VFNotHotplug: the VF sits on a guest bus that takes no hotplug.
	VFNotHotplug bool
	// Running: the domain runs; Port is its standby's OVS port then (the
	// tap), and PortWant the VLAN columns libvirt gives it.
	Running  bool
	Port     string
	PortWant VLAN
	// Plugged: QEMU holds the VF (the guest negotiated the standby feature
	// and QEMU plugged it); PluggedErr: who holds it could not be read.
	Plugged    bool
	PluggedErr string
}

// Facts are what the caller read from OVSDB and libvirt.
type Facts struct {
	Bridge      *Bridge
	BridgeErr   error
	Attachments []Attachment
}

// eswitchCheck is pf/<pf>/eswitch: the PF's eswitch is in the group's mode
// ("devlink dev eswitch show pci/$pf"). In a legacy group, a PF whose driver
// has no devlink instance or no eswitch (igb, ixgbe: legacy SR-IOV only)
// passes: it cannot be anything but legacy.
func eswitchCheck(k eswitch.Kernel, pf eswitch.PF, switchdev bool) Check {
	name := "pf/" + pf.Netdev + "/eswitch"
	want := eswitch.ModeLegacy
	if switchdev {
		want = eswitch.ModeSwitchdev
	}
	m, err := k.EswitchMode(pf.Devlink)
	switch {
	case err != nil && !switchdev && (errors.Is(err, syscall.ENODEV) || errors.Is(err, eswitch.ErrNotSupported)):
		return pass(name, "%s has no devlink eswitch: its driver has legacy SR-IOV only", pf.Devlink)
	case err != nil:
		return failed(name, "cannot read the eswitch mode of %s: %v", pf.Devlink, err)
	case m != want:
		return failed(name, "%s is in %s mode, want %s", pf.Devlink, m, want)
	}
	return pass(name, "%s in %s mode", pf.Devlink, m)
}

// Static runs the static checks of one group.
func Static(k eswitch.Kernel, f sysfs.FS, t Target, facts Facts) []Check {
	var out []Check
	add := func(c ...Check) { out = append(out, c...) }

	for _, pf := range t.PFs {
		add(eswitchCheck(k, pf, t.Switchdev))
	}
	add(numVFsChecks(f, t)...)
	if t.MTU != 0 {
		add(MTUCheck(k, f, t, facts))
	}
	if !t.Switchdev {
		add(vfPolicyChecks(k, t)...)
		add(attachmentChecks(facts.Attachments)...)
		add(teamingChecks(facts.Attachments, facts.Bridge)...)
		return append(out, rdmaChecks(f, t, eswitch.LAGStatus{State: eswitch.LAGUnverified})...)
	}

	add(bondChecks(k, f, t)...)

	lag := eswitch.LAGStatus{State: eswitch.LAGUnverified}
	if len(t.PFs) > 0 {
		st, err := eswitch.ReadLAG(f, t.PFs[0].Addr)
		switch {
		case err != nil:
			add(failed("lag", "%v", err))
		case st.State == eswitch.LAGActive && eswitch.LAGTypeProblem(st, t.PFs[0].Addr) != "":
			lag = eswitch.LAGStatus{State: eswitch.LAGInactive} // not the bond's: its RDMA device does not bond
			add(failed("lag", "hardware LAG active but not the bond's: %s", eswitch.LAGTypeProblem(st, t.PFs[0].Addr)))
		case st.State == eswitch.LAGActive:
			lag = st
			add(pass("lag", "hardware LAG active: type %s, port_sel_mode %s, shared_fdb %v%s", orDash(st.Type), orDash(st.PortSelMode), st.SharedFDB, portSelNote(f, t, st)))
		case st.State == eswitch.LAGInactive:
			lag = st
			add(failed("lag", "hardware LAG is inactive (/sys/kernel/debug/mlx5/%s/lag/state is not active; dmesg tells why, e.g. VFs bound at activation)", t.PFs[0].Addr))
		default:
			lag = st
			add(unverifiedLAG(f, t))
		}
	}

	if lag.State == eswitch.LAGActive {
		add(lagPortsCheck(k, f, t)...)
	}
	add(ovsChecks(k, f, t, facts)...)
	add(rateChecks(k, t)...)
	add(attachmentChecks(facts.Attachments)...)
	add(teamingChecks(facts.Attachments, facts.Bridge)...)
	return append(out, rdmaChecks(f, t, lag)...)
}

// portSelNote says what queue_affinity means for a bond that hashes
// (balance-xor, 802.3ad): the NIC lacks the port_select_flow_table
// capability (mlx5_lag_set_port_sel_mode_offloads), so each VF sends on
// its own PF's port and its flows are not spread over both.
func portSelNote(f sysfs.FS, t Target, st eswitch.LAGStatus) string {
	if st.PortSelMode != "queue_affinity" {
		return ""
	}
	if b, err := eswitch.ReadBond(f, t.BondName); err != nil || b.Mode == "active-backup" {
		return ""
	}
	return "; queue_affinity for a hash bond: the NIC has no port_select_flow_table capability, so each VF sends on its own PF's port (no spreading of a VF's flows; both ports still carry VF traffic)"
}

// LAGPortsName is the check that every up slave carries VF traffic.
const LAGPortsName = "lag/ports"

// lagPortsCheck: in an active LAG of a bond that spreads (balance-xor,
// 802.3ad), every PF that is an up slave carries VF traffic by mlx5's
// lag/mapping (eswitch.LAGIdleSlaves); an active-backup bond's backup
// idles by design (no check).
func lagPortsCheck(k eswitch.Kernel, f sysfs.FS, t Target) []Check {
	b, err := eswitch.ReadBond(f, t.BondName)
	if err != nil || b.Mode == "active-backup" {
		return nil // the bond checks say what is wrong with it
	}
	idle, mapping, err := eswitch.LAGIdleSlaves(k, f, t.PFs, b, eswitch.ReadLACP(f, b))
	switch {
	case err != nil:
		return []Check{failed(LAGPortsName, "%v", err)}
	case len(idle) > 0:
		lines := make([]string, len(idle))
		for i, s := range idle {
			lines[i] = s.String()
		}
		return []Check{failed(LAGPortsName, "%s (lag/mapping: %s)", strings.Join(lines, "; "), mapping)}
	}
	return []Check{pass(LAGPortsName, "every up slave of %s carries VF traffic (lag/mapping: %s)", b.Name, mapping)}
}

// unverifiedLAG is the lag check when the LAG state is not in debugfs: on
// an mlx5 PF, which shows it, a failure naming why and the fix (a skip
// when the config accepts it); elsewhere a skip.
func unverifiedLAG(f sysfs.FS, t Target) Check {
	u := eswitch.ExplainUnverified(f, t.PFs[0].Addr)
	switch {
	case !u.MLX5:
		return skip("lag", "unverified: %s", u.Why)
	case t.AcceptUnverifiedLAG:
		return skip("lag", "unverified, accepted by accept_unverified_lag (never counted as active): %s", u.Why)
	}
	return failed("lag", "hardware LAG unverified: %s; a host without debugfs may set accept_unverified_lag: true", u)
}

// attachmentChecks: each configured attachment is in its domain's
// persistent XML (libvirt/<domain>/pf<n>vf<m>).
func attachmentChecks(as []Attachment) []Check {
	var out []Check
	for _, a := range as {
		name := fmt.Sprintf("libvirt/%s/pf%dvf%d", a.Domain, a.PF, a.VF)
		switch {
		case a.Err != "":
			out = append(out, failed(name, "%s", a.Err))
		case a.Present:
			out = append(out, pass(name, "domain %s has VF %d of PF %d", a.Domain, a.VF, a.PF))
		default:
			out = append(out, failed(name, "domain %s lacks its interface for VF %d of PF %d", a.Domain, a.VF, a.PF))
		}
	}
	return out
}

// vlanNum says a VF's VLAN: "vlan 42", "none", "not one tag".
func vlanNum(v int) string {
	switch {
	case v == 0:
		return "none"
	case v < 0:
		return "not one tag"
	}
	return fmt.Sprintf("vlan %d", v)
}

// teamingChecks: each migratable attachment's pair is consistent (the
// standby with the VF's MAC, a virtio port of the group's bridge with the
// VF's VLAN, the VF's teaming naming it), its standby's port is on the
// bridge with that VLAN while the domain runs, and the VF is plugged (the
// guest negotiated the standby feature) rather than hidden
// (teaming/<domain>/pf<n>vf<m>).
func teamingChecks(as []Attachment, b *Bridge) []Check {
	var out []Check
	for _, a := range as {
		t := a.Teaming
		if t == nil {
			continue
		}
		name := fmt.Sprintf("teaming/%s/pf%dvf%d", a.Domain, a.PF, a.VF)
		var problems []string
		switch {
		case a.Err != "":
			out = append(out, skip(name, "domain %s not read: %s", a.Domain, a.Err))
			continue
		case !a.Present:
			problems = append(problems, fmt.Sprintf("the VF is missing from the persistent definition (libvirt/%s/pf%dvf%d)", a.Domain, a.PF, a.VF))
		case t.VFTeam != t.Alias:
			problems = append(problems, fmt.Sprintf("the VF is not the transient half of %s (its <teaming> names %q)", t.Alias, t.VFTeam))
		case t.VFVLAN != t.WantVFVLAN:
			problems = append(problems, fmt.Sprintf("the VF's <vlan> is %s, the pair's %s (libvirt sets it on the VF through the PF)", vlanNum(t.VFVLAN), vlanNum(t.WantVFVLAN)))
		case t.VFNotHotplug:
			problems = append(problems, "the VF sits on a guest PCI bus that takes no hotplug (not a PCIe root port, or one with hotplug='off'): QEMU cannot unplug it at a migration; remove its guest <address> (libvirt then puts it on a free root port) or set hotplug on that port")
		}
		switch {
		case !t.StandbyFound:
			problems = append(problems, fmt.Sprintf("no standby %s in the persistent definition", t.Alias))
		default:
			if t.StandbyMAC != t.MAC {
				problems = append(problems, fmt.Sprintf("the standby's MAC is %s, the VF's %s (the guest pairs them by MAC)", t.StandbyMAC, t.MAC))
			}
			if t.StandbyBridge != t.Bridge || !t.StandbyOVS {
				problems = append(problems, fmt.Sprintf("the standby is not an openvswitch port of %s (bridge %q)", t.Bridge, t.StandbyBridge))
			}
			if !t.Virtio {
				problems = append(problems, "the standby's model is not virtio")
			}
			if !t.StandbyVLANOK {
				problems = append(problems, fmt.Sprintf("the standby's VLAN is %s, the VF's %s", orDash(t.StandbyVLAN), orDash(t.WantVLAN)))
			}
		}
		if len(problems) > 0 {
			out = append(out, failed(name, "domain %s: %s; `vflag up` makes the pair again (a running domain takes it at its next start)", a.Domain, strings.Join(problems, "; ")))
			continue
		}
		if !t.Running {
			out = append(out, pass(name, "domain %s (not running): standby %s on %s%s with the VF's MAC %s", a.Domain, t.Alias, t.Bridge, vlanSuffix(t.WantVLAN), t.MAC))
			continue
		}
		if t.Port != "" && b != nil && b.Exists {
			p, ok := b.Ports[t.Port]
			switch {
			case !ok:
				out = append(out, failed(name, "domain %s: the standby's port %s is not on bridge %s: the VM has no network while its VF is away (a migration); restart the domain, or `virsh domif-setlink` it down and up", a.Domain, t.Port, t.Bridge))
				continue
			case p.Tag != t.PortWant.Tag || p.VLANMode != t.PortWant.Mode || !slices.Equal(p.Trunks, t.PortWant.Trunks):
				out = append(out, failed(name, "domain %s: the standby's port %s has tag %d vlan_mode %s trunks %v, its <vlan> wants tag %d vlan_mode %s trunks %v: restart the domain (libvirt sets the port's VLAN when QEMU starts)", a.Domain, t.Port, p.Tag, orDash(p.VLANMode), p.Trunks, t.PortWant.Tag, orDash(t.PortWant.Mode), t.PortWant.Trunks))
				continue
			}
		}
		switch {
		case t.PluggedErr != "":
			out = append(out, skip(name, "domain %s: pair consistent; whether its VF is plugged not read: %s", a.Domain, t.PluggedErr))
		case !t.Plugged:
			out = append(out, failed(name, "domain %s: pair consistent, but the VF is hidden: the guest has not negotiated the standby feature, and the VM runs on the standby, in software. Fix: a guest kernel 4.18 or later with virtio_net and net_failover (CONFIG_NET_FAILOVER) in its initramfs; a guest still in its firmware or boot loader plugs it when virtio_net loads", a.Domain))
		default:
			out = append(out, pass(name, "domain %s: standby %s (port %s) on %s%s, VF plugged", a.Domain, t.Alias, orDash(t.Port), t.Bridge, vlanSuffix(t.WantVLAN)))
		}
	}
	return out
}

func vlanSuffix(words string) string {
	if words == "" {
		return ""
	}
	return " " + words
}

// numVFsChecks: each PF that owns VFs has the configured number
// (sriov_numvfs; pf/<netdev>/numvfs).
func numVFsChecks(f sysfs.FS, t Target) []Check {
	var out []Check
	for _, i := range t.Owners {
		if i < 0 || i >= len(t.PFs) {
			continue
		}
		pf := t.PFs[i]
		name := "pf/" + pf.Netdev + "/numvfs"
		n, err := sriov.Host{FS: f}.NumVFs(pf.Dev)
		switch {
		case err != nil:
			out = append(out, failed(name, "cannot read the VF count of %s: %v", pf.Netdev, err))
		case n != t.NumVFs:
			out = append(out, failed(name, "%s has %d VFs (sriov_numvfs), want %d", pf.Netdev, n, t.NumVFs))
		default:
			out = append(out, pass(name, "%s has %d VFs", pf.Netdev, n))
		}
	}
	return out
}

// vfPolicyChecks: every configured VF policy is what the PF reports
// ("ip link show $pf", the "vf N" lines), one check per VF: vf/<pf>/<n>/policy.
func vfPolicyChecks(k eswitch.Kernel, t Target) []Check {
	var out []Check
	links := map[string]eswitch.Link{}
	for _, w := range t.VFPolicies {
		if w.PF < 0 || w.PF >= len(t.PFs) {
			continue
		}
		pf := t.PFs[w.PF].Netdev
		name := fmt.Sprintf("vf/%s/%d/policy", pf, w.VF)
		l, ok := links[pf]
		if !ok {
			var err error
			if l, err = k.Link(pf); err != nil {
				out = append(out, failed(name, "cannot read the VFs of %s: %v", pf, err))
				continue
			}
			links[pf] = l
		}
		var cur *eswitch.VFPolicy
		for _, v := range l.VFs {
			if v.ID == w.VF {
				cur = &v.VFPolicy
			}
		}
		if cur == nil {
			out = append(out, failed(name, "%s does not list VF %d (ip link show %s)", pf, w.VF, pf))
			continue
		}
		var got, bad []string
		for _, field := range w.Set {
			c, want := cur.Field(field), w.Want.Field(field)
			got = append(got, c)
			if c != want {
				bad = append(bad, fmt.Sprintf("%s, want %s", c, want))
			}
		}
		if len(bad) > 0 {
			out = append(out, failed(name, "%s vf %d: %s", pf, w.VF, strings.Join(bad, "; ")))
		} else {
			out = append(out, pass(name, "%s vf %d: %s", pf, w.VF, strings.Join(got, ", ")))
		}
	}
	return out
}

// MTUCheck compares every interface that carries the group's mtu with it:
// the PFs, the bond, the representors and their OVS Interface mtu column
// (switchdev), the host VF netdevs (legacy); it names each one that
// differs.
//
//	ip -o link show $if; ovs-vsctl get Interface $if mtu
func MTUCheck(k eswitch.Kernel, f sysfs.FS, t Target, facts Facts) Check {
	var differ []string
	n := 0
	link := func(name string) {
		n++
		l, err := k.Link(name)
		switch {
		case err != nil:
			differ = append(differ, fmt.Sprintf("%s (%v)", name, err))
		case l.MTU != t.MTU:
			differ = append(differ, fmt.Sprintf("%s %d", name, l.MTU))
		}
	}
	var ovsNames []string
	for _, pf := range t.PFs {
		if t.Tunnel == nil { // with a tunnel they carry the underlay's MTU (tunnel/mtu)
			link(pf.Netdev)
		}
	}
	if t.Switchdev {
		if t.Tunnel == nil {
			link(t.BondName)
			ovsNames = append(ovsNames, t.BondName)
		}
		for _, i := range t.Owners {
			if i >= len(t.PFs) {
				continue
			}
			reps, err := eswitch.RepresentorsOf(k, f, t.PFs[i], t.NumVFs)
			if err != nil {
				differ = append(differ, fmt.Sprintf("representors of %s (%v)", t.PFs[i].Netdev, err))
				continue
			}
			for vf := 0; vf < t.NumVFs; vf++ {
				rep, ok := reps[vf]
				if !ok {
					differ = append(differ, fmt.Sprintf("VF %d of %s (no representor)", vf, t.PFs[i].Netdev))
					continue
				}
				link(rep)
				ovsNames = append(ovsNames, rep)
			}
		}
	}
	for _, nd := range t.VFNetdevs {
		link(nd)
	}
	switch br := facts.Bridge; {
	case !t.Switchdev:
	case facts.BridgeErr != nil:
		differ = append(differ, fmt.Sprintf("OVS (%v)", facts.BridgeErr))
	case br == nil || !br.Exists:
		differ = append(differ, fmt.Sprintf("OVS bridge %s (missing)", t.Bridge))
	default:
		for _, name := range ovsNames {
			n++
			p, ok := br.Ports[name]
			switch {
			case !ok:
				differ = append(differ, fmt.Sprintf("ovs:%s (no port)", name))
			case p.MTU != t.MTU:
				differ = append(differ, fmt.Sprintf("ovs:%s %s", name, orDash(mtuString(p.MTU))))
			}
		}
	}
	if len(differ) > 0 {
		return failed("mtu", "want mtu %d; differ: %s", t.MTU, strings.Join(differ, ", "))
	}
	return pass("mtu", "mtu %d on %d interfaces", t.MTU, n)
}

func mtuString(m int) string {
	if m == 0 {
		return ""
	}
	return fmt.Sprint(m)
}

// BondStatic runs the static checks of a bare bond (vflag validate --bond):
// the bond, each slave up with link, and the RDMA devices on the bond or a
// slave (GID table, RoCE mode). There are no eswitch, LAG, OVS or libvirt
// checks: such a bond needs no devlink device (veths, NICs without
// switchdev). mode "" accepts any bond mode.
func BondStatic(k eswitch.Kernel, f sysfs.FS, bond, mode string, roce RoCEExpect) []Check {
	t := Target{Group: bond, BondName: bond, BondMode: mode, RoCE: roce, BondOnly: true, RDMANetdevs: []string{bond}}
	b, err := eswitch.ReadBond(f, bond)
	if err != nil {
		return bondChecks(k, f, t) // "does not exist" or the read error
	}
	for _, s := range b.Slaves {
		t.PFs = append(t.PFs, eswitch.PF{Netdev: s, Addr: sriov.Addr(NetdevPCI(f, s))})
		t.RDMANetdevs = append(t.RDMANetdevs, s)
	}
	out := bondChecks(k, f, t)
	if len(b.Slaves) < 2 && len(out) > 0 && out[0].Name == "bond" && out[0].Verdict == Pass {
		out[0] = failed("bond", "bond %s has %d slave(s) [%s]: no redundancy (a LAG needs 2)", bond, len(b.Slaves), strings.Join(b.Slaves, " "))
	}
	return append(out, rdmaChecks(f, t, eswitch.LAGStatus{State: eswitch.LAGUnverified})...)
}

// NetdevPCI is the PCI function of a netdev ("" for a virtual one: veth,
// bond, netdevsim).
func NetdevPCI(f sysfs.FS, netdev string) string {
	a, ok, err := sriov.Host{FS: f}.AddrOfNetdev(netdev)
	if err != nil || !ok {
		return ""
	}
	return string(a)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func bondChecks(k eswitch.Kernel, f sysfs.FS, t Target) []Check {
	var out []Check
	b, err := eswitch.ReadBond(f, t.BondName)
	if errors.Is(err, fs.ErrNotExist) {
		out = append(out, failed("bond", "bond %s does not exist", t.BondName))
		for _, pf := range t.PFs {
			out = append(out, failed("bond/slave/"+pf.Netdev, "no bond %s to be a slave of", t.BondName))
		}
		return out
	}
	if err != nil {
		return append(out, failed("bond", "%v", err))
	}
	var problems []string
	if t.BondMode != "" && b.Mode != t.BondMode {
		problems = append(problems, fmt.Sprintf("mode %s, want %s", b.Mode, t.BondMode))
	}
	var want []string
	for _, pf := range t.PFs {
		want = append(want, pf.Netdev)
	}
	got := append([]string(nil), b.Slaves...)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("slaves [%s], want exactly [%s]", strings.Join(b.Slaves, " "), strings.Join(want, " ")))
	}
	if len(problems) > 0 {
		out = append(out, failed("bond", "bond %s: %s", t.BondName, strings.Join(problems, "; ")))
	} else {
		extra := ""
		if b.ActiveSlave != "" {
			extra = ", active slave " + b.ActiveSlave
		}
		out = append(out, pass("bond", "bond %s mode %s slaves [%s] mii %s%s", b.Name, b.Mode, strings.Join(b.Slaves, " "), orDash(b.MIIStatus), extra))
	}
	for _, pf := range t.PFs {
		name := "bond/slave/" + pf.Netdev
		l, err := k.Link(pf.Netdev)
		switch {
		case err != nil:
			out = append(out, failed(name, "%v", err))
		case l.Master != t.BondName:
			out = append(out, failed(name, "%s is not a slave of %s (master %s)", pf.Netdev, t.BondName, orDash(l.Master)))
		case !l.AdminUp:
			out = append(out, failed(name, "%s is down (admin down): the bond runs on one port", pf.Netdev))
		case l.OperState != "up":
			out = append(out, failed(name, "%s has no link (operstate %s): the bond runs on one port", pf.Netdev, l.OperState))
		default:
			role := ""
			if b.Mode == "active-backup" {
				role = " (backup)"
				if b.ActiveSlave == pf.Netdev {
					role = " (active)"
				}
			}
			out = append(out, pass(name, "%s up%s", pf.Netdev, role))
		}
	}
	if b.Mode == "802.3ad" {
		out = append(out, LACPCheck(k, b, eswitch.ReadLACP(f, b)))
	}
	return out
}

// LACPCheck judges what an 802.3ad bond negotiated: the bond comes up and
// passes traffic without an LACP partner too, on one port, so a switch
// whose ports are not an LACP port-channel is found only here (or by a
// traffic share). Slaves without link are the slave checks' business: they
// are not expected in the aggregator.
func LACPCheck(k eswitch.Kernel, b eswitch.BondInfo, l *eswitch.LACPInfo) Check {
	const name = "bond/lacp"
	if l == nil {
		return skip(name, "bond %s shows no 802.3ad state (bonding/ad_aggregator, ad_num_ports, ad_partner_mac)", b.Name)
	}
	var up, down []string
	for _, sl := range b.Slaves {
		if li, err := k.Link(sl); err == nil && li.OperState == "up" {
			up = append(up, sl)
		} else {
			down = append(down, sl)
		}
	}
	var aggs []string
	for _, sl := range b.Slaves {
		if id, ok := l.SlaveAggregator[sl]; ok {
			aggs = append(aggs, fmt.Sprintf("%s:%d", sl, id))
		}
	}
	perSlave := ""
	if len(aggs) > 0 {
		perSlave = " (aggregator per slave: " + strings.Join(aggs, " ") + ")"
	}
	switch {
	case l.Aggregator == 0 || l.PartnerMAC == "":
		return failed(name, "bond %s has no active aggregator: no slave has link, or the bond is down", b.Name)
	case l.PartnerMAC == eswitch.NoLACPPartner:
		return failed(name, "no LACP partner answers on bond %s: the switch ports behind [%s] are not one LACP (802.3ad) port-channel, or run LACP off or passive; every slave is an individual port and the bond sends on one of them%s",
			b.Name, strings.Join(b.Slaves, " "), perSlave)
	case l.Ports < len(up):
		return failed(name, "only %d of the %d slaves with link are in bond %s's active aggregator %d (partner %s): the others negotiated with another partner or key (switch ports in different port-channels?)%s",
			l.Ports, len(up), b.Name, l.Aggregator, l.PartnerMAC, perSlave)
	}
	note := ""
	if len(down) > 0 {
		note = fmt.Sprintf("; without link, not aggregated: %s", strings.Join(down, " "))
	}
	return pass(name, "aggregator %d holds %d slave(s), LACP partner %s%s", l.Aggregator, l.Ports, l.PartnerMAC, note)
}

func ovsChecks(k eswitch.Kernel, f sysfs.FS, t Target, facts Facts) []Check {
	var out []Check
	if facts.BridgeErr != nil {
		return append(out, failed("ovs/bridge", "cannot read OVSDB: %v", facts.BridgeErr))
	}
	br := facts.Bridge
	if br == nil || !br.Exists {
		return append(out, failed("ovs/bridge", "bridge %s does not exist", t.Bridge))
	}
	out = append(out, pass("ovs/bridge", "bridge %s exists", t.Bridge))
	port := func(name, what, netdev string) Check {
		p, ok := br.Ports[netdev]
		switch {
		case !ok:
			return failed(name, "%s %s is not a port of bridge %s", what, netdev, t.Bridge)
		case p.OFPort <= 0:
			return failed(name, "%s %s is in bridge %s without an ofport (%d): %s", what, netdev, t.Bridge, p.OFPort, orDash(p.Error))
		}
		return pass(name, "%s %s: ofport %d", what, netdev, p.OFPort)
	}
	if t.Tunnel == nil {
		out = append(out, port("ovs/port/"+t.BondName, "bond", t.BondName))
	}
	for _, i := range t.Owners {
		if i >= len(t.PFs) {
			continue
		}
		pf := t.PFs[i]
		reps, err := eswitch.RepresentorsOf(k, f, pf, t.NumVFs)
		if err != nil {
			out = append(out, failed(fmt.Sprintf("ovs/reps/pf%d", i), "representors of %s: %v", pf.Netdev, err))
			continue
		}
		for vf := 0; vf < t.NumVFs; vf++ {
			name := fmt.Sprintf("ovs/port/pf%dvf%d", i, vf)
			rep, ok := reps[vf]
			if !ok {
				out = append(out, failed(name, "VF %d of %s has no representor", vf, pf.Netdev))
				continue
			}
			out = append(out, port(name, fmt.Sprintf("representor of VF %d of %s", vf, pf.Netdev), rep))
		}
	}
	switch {
	case !t.HWOffload:
		out = append(out, notApplicable("ovs/hw-offload", "not wanted by the config (hw_offload: false; hw-offload is %s)", orDash(br.HWOffload)))
	case br.HWOffload == "true":
		out = append(out, pass("ovs/hw-offload", "other_config:hw-offload=true"))
	default:
		out = append(out, failed("ovs/hw-offload", "other_config:hw-offload is %s, want true (flows are not offloaded to the NIC)", orDash(br.HWOffload)))
	}
	if t.DatapathType == "" || t.DatapathType == "system" {
		st, err := eswitch.ReadDatapath(k, eswitch.SystemDatapath)
		out = append(out, DatapathCheck(st, err))
	}
	pfs := make([]string, len(t.PFs))
	for i, pf := range t.PFs {
		pfs[i] = pf.Netdev
	}
	if t.Tunnel != nil {
		return append(out, tunnelChecks(k, t, facts)...) // the bond is no port: no shared block
	}
	c, _ := SharedBlockCheck(k, t.BondName, pfs, t.HWOffload)
	return append(out, c)
}

// DatapathCheck judges the kernel datapath's lookup counters: a datapath
// that lost every upcall forwards nothing that needs ovs-vswitchd (every
// first packet of a flow, ARP, flooding), however right the bridge looks in
// OVSDB.
func DatapathCheck(st eswitch.DatapathStats, err error) Check {
	const name = "ovs/datapath"
	dp := eswitch.SystemDatapath
	switch {
	case errors.Is(err, eswitch.ErrNotSupported):
		return skip(name, "the kernel datapath %s cannot be read here (simulated host)", dp)
	case errors.Is(err, eswitch.ErrNoDatapath):
		return failed(name, "no kernel datapath %s: bridges of datapath_type system forward nothing (openvswitch module not loaded, or ovs-vswitchd not running): %v", dp, err)
	case err != nil:
		return failed(name, "%v", err)
	}
	c := Check{Name: name, Data: st}
	counts := fmt.Sprintf("hit %d, missed %d, lost %d, %d flows, %s upcall dispatch", st.Hit, st.Missed, st.Lost, st.Flows, st.Dispatch())
	switch {
	case st.Missed > 0 && st.Lost >= st.Missed:
		c.Verdict = Fail
		c.Detail = fmt.Sprintf("%s lost every upcall since it was created (%s): no packet that missed the kernel flow table reached ovs-vswitchd, so no new flow is ever set up; "+
			"no upcall handler is reading (ovs-vswitchd stopped or running no handler thread)", dp, counts)
		if st.PerCPUDispatch {
			c.Detail += `. Open vSwitch 3.1.0 started within 10 s of boot runs none in per-cpu dispatch (its log says "Overriding n-handler-threads to 0"): restart ovs-vswitchd`
		}
	case st.Lost > 0:
		c.Verdict, c.Detail = Pass, fmt.Sprintf("%s: %s (some upcalls were lost under load; the slow path works)", dp, counts)
	default:
		c.Verdict, c.Detail = Pass, fmt.Sprintf("%s: %s", dp, counts)
	}
	return c
}

func rdmaChecks(f sysfs.FS, t Target, lag eswitch.LAGStatus) []Check {
	var pcis []string
	for _, pf := range t.PFs {
		pcis = append(pcis, string(pf.Addr))
	}
	devs, err := RDMADevicesFor(f, pcis, t.RDMANetdevs)
	if err != nil {
		return []Check{failed("rdma/devices", "%v", err)}
	}
	if len(devs) == 0 {
		if t.BondOnly {
			if t.RoCE.Required {
				return []Check{failed("rdma/devices", "no RDMA device on %s (no GID on them, no device under their PCI functions; Soft-RoCE: rdma link add rxe0 type rxe netdev %s)", strings.Join(t.RDMANetdevs, " "), t.BondName)}
			}
			// A plain Ethernet bond: nothing to check, and none asked for.
			return []Check{notApplicable("rdma/devices", "no RDMA device on %s, and no RoCE asked for (--rdma, --roce-mode)", strings.Join(t.RDMANetdevs, " "))}
		}
		switch {
		case t.RoCE.Required:
			return []Check{failed("rdma/devices", "no RDMA device behind %s (mlx5_ib not loaded, or RoCE disabled)", strings.Join(pcis, " "))}
		case t.RoCE.Mode != "":
			// RoCE is configured (a mode to check), but there is nothing to check it on.
			return []Check{skip("rdma/devices", "no RDMA device behind %s, so the configured RoCE mode %q cannot be checked (mlx5_ib not loaded, or RoCE disabled; validate.roce: true makes this a failure)", strings.Join(pcis, " "), t.RoCE.Mode)}
		}
		return []Check{notApplicable("rdma/devices", "no RDMA device behind the PFs, and the config asks for no RoCE (validate.roce, validate.roce_mode)")}
	}
	var list []string
	for _, d := range devs {
		where := d.PCI
		if where == "" {
			where = "on " + d.Netdev
		}
		list = append(list, fmt.Sprintf("%s (%s)", d.Name, where))
	}
	var out []Check
	if t.Switchdev && len(t.PFs) == 2 {
		ofed := roceLagEnable(f, pcis)
		switch {
		case lag.State == eswitch.LAGInactive:
			out = append(out, skip("rdma/devices", "hardware LAG is inactive (see check lag): %s not expected to bond", strings.Join(list, ", ")))
		case len(devs) == 1:
			note := ""
			if !devs[0].Bonded {
				note = " (renamed from mlx5_bond_<n>?)"
			}
			out = append(out, pass("rdma/devices", "one bonded RDMA device for both ports: %s%s", list[0], note))
		default:
			out = append(out, failed("rdma/devices", "RDMA devices did not bond: %s; with the hardware LAG %s both ports should share one device (mlx5_bond_<n>)%s",
				strings.Join(list, ", "), lag.State, ofed))
		}
	} else {
		out = append(out, pass("rdma/devices", "%s", strings.Join(list, ", ")))
	}
	for _, d := range devs {
		for _, p := range d.Ports {
			prefix := fmt.Sprintf("rdma/%s/port%d/", d.Name, p)
			out = append(out, roceModeCheck(f, prefix+"roce-mode", d.Name, p, t.RoCE.Mode))
			out = append(out, gidCheck(f, prefix+"gids", d, p, t))
		}
	}
	return out
}

// roceLagEnable reports MLNX_OFED's roce_lag_enable=0 on any PF.
func roceLagEnable(f sysfs.FS, pcis []string) string {
	var off []string
	for _, pci := range pcis {
		s, err := sysfs.ReadString(f, path.Join("/sys/bus/pci/devices", pci, "roce_lag_enable"))
		if err == nil && s == "0" {
			off = append(off, pci)
		}
	}
	if len(off) == 0 {
		return ""
	}
	return fmt.Sprintf("; roce_lag_enable is 0 on %s", strings.Join(off, " "))
}

func roceModeCheck(f sysfs.FS, name, dev string, port int, want string) Check {
	m, err := ReadRoCEMode(f, dev, port)
	switch {
	case errors.Is(err, ErrNoCMGroup) && want == "":
		return notApplicable(name, "no RoCE mode configured (validate.roce_mode, --roce-mode), and configfs rdma_cm/%s is not created, so the default RoCE mode is not read (`vflag roce show` creates it)", dev)
	case errors.Is(err, ErrNoCMGroup):
		return skip(name, "configfs rdma_cm/%s not created, so the default RoCE mode is not readable without a change (`vflag roce set %s --mode v2` creates it)", dev, dev)
	case err != nil:
		return failed(name, "%v", err)
	case want != "" && m != want:
		return failed(name, "default RoCE mode of %s port %d is %q, want %q", dev, port, m, want)
	}
	return pass(name, "default RoCE mode %q", m)
}

func gidCheck(f sysfs.FS, name string, d RDMADevice, port int, t Target) Check {
	gids, err := GIDs(f, d.Name, port)
	if err != nil {
		return failed(name, "%v", err)
	}
	state, _ := PortState(f, d.Name, port)
	c := Check{Name: name, Data: gids}
	if len(gids) == 0 {
		c.Verdict, c.Detail = Fail, fmt.Sprintf("empty GID table on %s port %d (port state %s)", d.Name, port, orDash(state))
		return c
	}
	v2 := 0
	var wrong []string
	for _, g := range gids {
		if g.Type == RoCEv2 {
			v2++
		}
		if t.Switchdev && len(t.PFs) == 2 && d.Bonded && g.Netdev != t.BondName && !slices.Contains(wrong, g.Netdev) {
			wrong = append(wrong, g.Netdev)
		}
	}
	table := FormatGIDs(gids)
	switch {
	case len(wrong) > 0:
		c.Verdict, c.Detail = Fail, fmt.Sprintf("GIDs of bonded %s are on %s, want %s\n%s", d.Name, strings.Join(wrong, " "), t.BondName, table)
	case v2 == 0:
		c.Verdict, c.Detail = Fail, fmt.Sprintf("no RoCE v2 GID on %s port %d\n%s", d.Name, port, table)
	default:
		c.Verdict, c.Detail = Pass, fmt.Sprintf("%d GIDs (%d RoCE v2), port state %s\n%s", len(gids), v2, orDash(state), table)
	}
	return c
}
