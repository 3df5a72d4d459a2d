package doctor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/install"
)

// NMRulesPath is where `vflag install` writes the NetworkManager udev rules.
const NMRulesPath = "/" + install.NMRulesPath

// NMUnmanagedRules are udev rules that keep NetworkManager off the named
// interfaces (PFs, bond) and off every VF representor, as os-net-config and
// the SR-IOV Network Operator write them (ENV{NM_UNMANAGED}="1").
func NMUnmanagedRules(names []string) string {
	var b strings.Builder
	b.WriteString("# vflag: NetworkManager must not manage the PFs, the bond or the representors\n")
	for _, n := range names {
		if eswitch.ValidIfName(n) != nil {
			continue
		}
		fmt.Fprintf(&b, "ACTION!=\"remove\", SUBSYSTEM==\"net\", KERNEL==\"%s\", ENV{NM_UNMANAGED}=\"1\"\n", n)
	}
	b.WriteString("ACTION!=\"remove\", SUBSYSTEM==\"net\", ATTR{phys_port_name}==\"pf*vf*\", ENV{NM_UNMANAGED}=\"1\"\n")
	return b.String()
}

func (d *doctor) conflicts(g *groupState) {
	d.checkNetworkManager(g)
	for _, p := range g.Ports {
		d.checkForeignBond(g, p)
	}
	if g.Switchdev && g.BondName != "" {
		d.checkBondName(g)
		d.checkSharedBlock(g)
	}
	for _, p := range g.Ports {
		d.checkVFCount(g, p)
	}
}

// ours tells whether the netdev is a slave of the group's vflag bond.
func (d *doctor) ours(g *groupState, netdev string) (master string, mine bool) {
	l, err := d.env.Kernel.Link(netdev)
	if err != nil || l.Master == "" {
		return "", false
	}
	m, err := d.env.Kernel.Link(l.Master)
	if err != nil {
		return l.Master, false
	}
	if g.discovered {
		return l.Master, strings.HasPrefix(m.Alias, "vflag:")
	}
	return l.Master, l.Master == g.BondName && m.Alias == "vflag:"+g.Name
}

func (d *doctor) checkNetworkManager(g *groupState) {
	const name = "conflicts/networkmanager"
	if d.env.Simulated {
		d.add(AreaConflicts, name, "", Skip, "simulated netdevs (--sim): NetworkManager cannot see them", "")
		return
	}
	var names []string
	for _, p := range g.Ports {
		if p.Err == nil && p.Netdev != "" {
			names = append(names, p.Netdev)
		}
	}
	if g.Switchdev && g.BondName != "" {
		names = append(names, g.BondName)
	}
	if len(names) == 0 {
		d.add(AreaConflicts, name, "", Skip, "no interface to look at (see platform/sriov)", "")
		return
	}
	fix := func(managed []string) string {
		var now []string
		for _, n := range managed {
			now = append(now, fmt.Sprintf("nmcli device set %s managed no", n))
		}
		return fmt.Sprintf("now: %s; for good (also for the representors and VFs vflag creates), `vflag install` writes the NM_UNMANAGED udev rules in %s, such as:\n%sthen: udevadm control --reload && udevadm trigger --subsystem-match=net --action=change",
			strings.Join(now, "; "), NMRulesPath, NMUnmanagedRules(names))
	}
	if !d.tool("nmcli") {
		if len(d.procs("NetworkManager")) > 0 {
			d.add(AreaConflicts, name, "", Warn, "NetworkManager is running but nmcli is not installed: which interfaces it manages is unknown",
				"apt-get install network-manager (for nmcli) and run vflag doctor again, or keep NetworkManager off vflag's interfaces anyway: "+fix(names))
			return
		}
		d.add(AreaConflicts, name, "", Pass, "NetworkManager is not running (no NetworkManager process; nmcli not installed)", "")
		return
	}
	running, err := d.output("nmcli", "-t", "-f", "RUNNING", "general")
	if err != nil {
		if len(d.procs("NetworkManager")) == 0 {
			d.add(AreaConflicts, name, "", Pass, fmt.Sprintf("NetworkManager is not running (no NetworkManager process; nmcli general: %v)", firstLine(err.Error())), "")
			return
		}
		d.add(AreaConflicts, name, "", Warn, fmt.Sprintf("nmcli general: %v", firstLine(err.Error())), "keep NetworkManager off vflag's interfaces: "+fix(names))
		return
	}
	if running != "running" {
		d.add(AreaConflicts, name, "", Pass, fmt.Sprintf("NetworkManager is not running (nmcli general: %s)", running), "")
		return
	}
	out, err := d.output("nmcli", "-t", "-f", "DEVICE,STATE", "device")
	if err != nil {
		d.add(AreaConflicts, name, "", Warn, fmt.Sprintf("NetworkManager runs; nmcli device: %v", firstLine(err.Error())), "keep NetworkManager off vflag's interfaces: "+fix(names))
		return
	}
	state := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if dev, st, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			state[dev] = st
		}
	}
	var managed, managedSt, seen []string
	for _, n := range names {
		st, ok := state[n]
		if !ok {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s (%s)", n, st))
		if st != "unmanaged" {
			managed = append(managed, n)
			managedSt = append(managedSt, fmt.Sprintf("%s (%s)", n, st))
		}
	}
	if len(managed) > 0 {
		d.add(AreaConflicts, name, "", Fail,
			fmt.Sprintf("NetworkManager manages %s (nmcli device: %s): it takes such interfaces over, resets their qdiscs (offload needs the ingress qdisc) and, with an sriov setting, their VF count",
				strings.Join(managedSt, ", "), strings.Join(seen, ", ")),
			fix(managed))
		return
	}
	if len(seen) == 0 {
		d.add(AreaConflicts, name, "", Pass, fmt.Sprintf("NetworkManager runs and does not list %s", strings.Join(names, ", ")), "")
		return
	}
	d.add(AreaConflicts, name, "", Pass, fmt.Sprintf("NetworkManager runs and leaves %s alone", strings.Join(seen, ", ")), "")
}

func (d *doctor) checkForeignBond(g *groupState, p *port) {
	const name = "conflicts/bond"
	if p.Err != nil || p.Netdev == "" {
		return
	}
	master, mine := d.ours(g, p.Netdev)
	switch {
	case master == "":
		d.add(AreaConflicts, name, p.Netdev, Pass, fmt.Sprintf("%s has no master", p.Netdev), "")
	case mine:
		d.add(AreaConflicts, name, p.Netdev, Pass, fmt.Sprintf("%s is a slave of %s, vflag's bond of this group", p.Netdev, master), "")
	default:
		alias := ""
		if m, err := d.env.Kernel.Link(master); err == nil {
			alias = m.Alias
		}
		d.add(AreaConflicts, name, p.Netdev, Fail, fmt.Sprintf("%s is already a slave of %s (alias %q), which vflag did not create: vflag up refuses it", p.Netdev, master, alias),
			fmt.Sprintf("release it: ip link set %s nomaster; and remove what made %s (ifupdown /etc/network/interfaces, netplan, a NetworkManager connection, systemd-networkd .netdev) so it does not come back", p.Netdev, master))
	}
}

func (d *doctor) checkBondName(g *groupState) {
	const name = "conflicts/bond-name"
	l, err := d.env.Kernel.Link(g.BondName)
	switch {
	case errors.Is(err, eswitch.ErrLinkNotFound):
		d.add(AreaConflicts, name, g.BondName, Pass, fmt.Sprintf("no interface %s yet: vflag up creates it", g.BondName), "")
	case err != nil:
		d.add(AreaConflicts, name, g.BondName, Skip, fmt.Sprintf("ip link show %s: %v", g.BondName, err), "")
	case l.Alias == "vflag:"+g.Name:
		d.add(AreaConflicts, name, g.BondName, Pass, fmt.Sprintf("%s exists and is vflag's (alias %q)", g.BondName, l.Alias), "")
	case l.Alias == "" && d.pendingBonds[g.BondName]:
		d.add(AreaConflicts, name, g.BondName, Warn, fmt.Sprintf("%s exists without vflag's alias, and vflag's journal has a pending entry creating it: a run stopped between the bond's creation and its mark; vflag up takes it over (and marks it) if that run made it (this boot, after the entry, still down and without slaves), and refuses it otherwise", g.BondName),
			fmt.Sprintf("run vflag up to carry on (or vflag down to remove what the run made); if up refuses %s, it is not vflag's: remove it (ip link del %s) or choose another groups[].bond.name", g.BondName, g.BondName))
	default:
		kind := l.Kind
		if kind == "" {
			kind = "device"
		}
		fix := fmt.Sprintf("choose another groups[].bond.name, or remove %s if nothing needs it (ip link del %s)", g.BondName, g.BondName)
		if g.BondName == "bond0" && l.Kind == "bond" {
			fix += "; an empty bond0 comes from the bonding module's max_bonds=1: echo 'options bonding max_bonds=0' > /etc/modprobe.d/vflag-bonding.conf"
		}
		d.add(AreaConflicts, name, g.BondName, Fail, fmt.Sprintf("%s exists (%s, alias %q) and was not created by vflag: vflag up refuses it", g.BondName, kind, l.Alias), fix)
	}
}

func (d *doctor) checkVFCount(g *groupState, p *port) {
	const name = "conflicts/numvfs"
	if p.Err != nil || !p.HasSRIOV || p.NumErr != nil {
		return
	}
	if p.NumVFs == 0 {
		d.add(AreaConflicts, name, p.name(), Pass, fmt.Sprintf("%s: sriov_numvfs 0 (no VF yet)", p.where()), "")
		return
	}
	if d.journaled[p.Dev] {
		d.add(AreaConflicts, name, p.name(), Pass, fmt.Sprintf("%s: sriov_numvfs %d, set by vflag (its journal records it)", p.where(), p.NumVFs), "")
		return
	}
	if master, mine := d.ours(g, p.Netdev); mine {
		d.add(AreaConflicts, name, p.name(), Pass, fmt.Sprintf("%s: sriov_numvfs %d, set by vflag (the PF is in %s, vflag's bond)", p.where(), p.NumVFs, master), "")
		return
	}
	want := ""
	if g.NumVFs > 0 && g.NumVFs != p.NumVFs {
		want = fmt.Sprintf("; the group wants %d, so vflag up writes 0 and then %d, removing every VF (a VM holding one loses it)", g.NumVFs, g.NumVFs)
	}
	d.add(AreaConflicts, name, p.name(), Warn,
		fmt.Sprintf("%s: sriov_numvfs is already %d and neither vflag's journal nor a vflag bond claims it: another tool sets VFs (NetworkManager sriov.total-vfs, systemd-networkd [SR-IOV], a udev rule or boot script) and may fight vflag%s", p.where(), p.NumVFs, want),
		"find who sets it: grep -rs sriov_numvfs /etc/udev/rules.d /etc/systemd /etc/rc.local /etc/network; nmcli -f NAME,sriov.total-vfs connection show; "+
			"remove that setting and let vflag own the VF count (groups[].numvfs)")
}

// checkSharedBlock: once vflag's bond exists and hw-offload is wanted, the
// bond and its PFs must be on the bond's shared tc block (vflag validate's
// tc/shared-block): a PF off it offloads nothing that arrives on it.
func (d *doctor) checkSharedBlock(g *groupState) {
	const name = "tc/shared-block"
	if !g.HWOffload {
		return
	}
	if _, err := d.env.Kernel.Link(g.BondName); err != nil {
		d.add(AreaConflicts, name, "", Skip, fmt.Sprintf("bond %s does not exist yet: `vflag up` makes it and binds its PFs to its block", g.BondName), "")
		return
	}
	var pfs []string
	for _, p := range g.Ports {
		if p.Netdev != "" {
			pfs = append(pfs, p.Netdev)
		}
	}
	s, err := eswitch.ReadSharedBlock(d.env.Kernel, g.BondName, pfs)
	switch {
	case errors.Is(err, eswitch.ErrNotSupported):
		d.add(AreaConflicts, name, "", Skip, "this host's kernel interface has no tc", "")
	case err != nil:
		d.add(AreaConflicts, name, "", Warn, err.Error(), "")
	case s.OK:
		d.add(AreaConflicts, name, "", Pass, s.String(), "")
	default:
		d.add(AreaConflicts, name, "", Warn, s.String()+": traffic arriving on a PF off the block is not offloaded",
			"`vflag up` binds them again (it shows as drift in `vflag plan`); it happens after an OVS restart or a deleted ingress qdisc")
	}
}
