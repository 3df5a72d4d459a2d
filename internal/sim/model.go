package sim

import (
	"fmt"
	"net"
	"slices"
	"syscall"

	"github.com/vflag/vflag/eswitch"
)

// This file holds the rules of the model. Every function works on a loaded
// state at time now (Unix nanoseconds) and validates before it mutates.

func devPrefix(drv, addr string) string { return drv + " " + addr + ": " }

// --- SR-IOV (KERNEL-FACTS §1) ---

// setNumVFs implements sriov_numvfs_store. changed reports a state change
// (including a log line written for a refusal).
func (st *state) setNumVFs(now int64, nic *nicState, pf *pfState, n int) (bool, *opError) {
	pre := devPrefix(nic.Driver, pf.PCI)
	if pf.Driver == "" {
		st.log(now, "", "pci %s: no driver bound to device; cannot configure SR-IOV", pf.PCI)
		return true, fail(syscall.ENOENT, "no driver bound to device; cannot configure SR-IOV")
	}
	if n > nic.TotalVFs {
		return false, fail(syscall.ERANGE, "%d VFs requested, sriov_totalvfs is %d", n, nic.TotalVFs)
	}
	if n == pf.NumVFs {
		return false, nil
	}
	if pf.NumVFs != 0 && n != 0 {
		st.log(now, "", pre+"%d VFs already enabled. Disable before enabling %d VFs", pf.NumVFs, n)
		return true, fail(syscall.EBUSY, "%d VFs already enabled. Disable before enabling %d VFs", pf.NumVFs, n)
	}
	if n == 0 {
		if e := st.refuseHeldVFs(now, nic, pf); e != nil { // vfio.go
			return true, e
		}
		st.disableVFs(now, nic, pf)
	} else {
		st.enableVFs(now, nic, pf, n)
	}
	// 6.x eswitch.c mlx5_eswitch_enable toggles the LAG only while no FDB
	// exists: in switchdev the offloads FDB exists from the mode change on,
	// so an SR-IOV change leaves the LAG alone (5.x re-evaluated it).
	if pf.Mode != eswitch.ModeSwitchdev {
		st.lagDisableChange(now, nic)
	}
	return true, nil
}

func (st *state) enableVFs(now int64, nic *nicState, pf *pfState, n int) {
	lat := int64(st.Spec.Latency.VFCreate)
	a, _ := parseBDF(pf.PCI)
	pf.NumVFs = n
	pf.VFs = make([]*vfState, n)
	for i := range n {
		addr, _ := vfBDF(a, pf.Offset, pf.Stride, i)
		pf.VFs[i] = &vfState{Index: i, PCI: addr.String(), ReadyAt: now + lat*int64(i+1), MAC: "00:00:00:00:00:00"}
	}
	mode := "LEGACY"
	if pf.Mode == eswitch.ModeSwitchdev {
		mode = "OFFLOADS"
		// The eswitch loads the VF vports (and their representors) before
		// the VFs probe.
		for _, vf := range pf.VFs {
			st.addRep(nic, pf, vf, vf.ReadyAt)
		}
	}
	st.log(now, "", devPrefix(nic.Driver, pf.PCI)+"E-Switch: Enable: mode(%s), nvfs(%d), active vports(%d)", mode, n, n+1)
	if pf.Autoprobe {
		for _, vf := range pf.VFs {
			st.attach(now, nic, pf, vf, nic.Driver)
		}
	}
}

func (st *state) disableVFs(now int64, nic *nicState, pf *pfState) {
	for i := len(pf.VFs) - 1; i >= 0; i-- {
		vf := pf.VFs[i]
		st.detach(now, vf) // force-unbind: "in use" is not checked
		if vf.Rep != "" {
			st.removeNetdev(now, vf.Rep)
			vf.Rep = ""
		}
	}
	mode := "LEGACY"
	if pf.Mode == eswitch.ModeSwitchdev {
		mode = "OFFLOADS"
	}
	st.log(now, "", devPrefix(nic.Driver, pf.PCI)+"E-Switch: Disable: mode(%s), nvfs(%d), active vports(%d)", mode, pf.NumVFs, pf.NumVFs+1)
	pf.VFs = nil
	pf.NumVFs = 0
	if pf.Mode == eswitch.ModeSwitchdev {
		// mlx5_eswitch_disable_sriov: devl_rate_nodes_destroy in offloads
		// mode; every rate node of the PF's devlink goes with the VFs.
		pf.RateNodes = nil
	}
}

// knownDrivers lists the PCI drivers of /sys/bus/pci/drivers.
func (st *state) knownDrivers() []string {
	ds := []string{vfioDriver}
	for _, nic := range st.NICs {
		if !slices.Contains(ds, nic.Driver) {
			ds = append(ds, nic.Driver)
		}
	}
	slices.Sort(ds)
	return ds
}

// matches is driver_match_device: driver_override decides when set; else the
// NIC driver's ID table matches the NIC's functions and vfio-pci (no static
// IDs, no new_id here) matches nothing.
func matches(d pciDev, drv string) bool {
	if ov := d.override(); ov != "" {
		return ov == drv
	}
	return drv == d.nic.Driver
}

// bind implements drivers/<drv>/bind.
func (st *state) bind(now int64, drv, addr string) (bool, *opError) {
	d, ok := st.pci(addr, now)
	if !ok || !matches(d, drv) {
		return false, fail(syscall.ENODEV, "no such device or no match")
	}
	if d.driver() != "" {
		return false, fail(syscall.EBUSY, "already bound")
	}
	st.attach(now, d.nic, d.pf, d.vf, drv)
	return true, nil
}

// unbind implements drivers/<drv>/unbind.
func (st *state) unbind(now int64, drv, addr string) (bool, *opError) {
	d, ok := st.pci(addr, now)
	if !ok || d.driver() != drv {
		return false, fail(syscall.ENODEV, "not bound to %s", drv)
	}
	if d.vf == nil {
		// Unbinding a PF would remove its netdev, representors and devlink
		// instance; vflag never does it and the model does not cover it.
		st.log(now, "", "sim: unbinding PF %s is not modelled", addr)
		return true, fail(syscall.EPERM, "unbinding a PF is not modelled")
	}
	if e := st.refuseHeld(now, d); e != nil { // vfio.go
		return true, e
	}
	st.detach(now, d.vf)
	return true, nil
}

// probe implements /sys/bus/pci/drivers_probe.
func (st *state) probe(now int64, addr string) (bool, *opError) {
	d, ok := st.pci(addr, now)
	if !ok {
		return false, fail(syscall.ENODEV, "no such device")
	}
	if d.driver() != "" || d.vf == nil {
		return false, nil
	}
	drv := d.override()
	if drv == "" {
		drv = d.nic.Driver
	}
	if !slices.Contains(st.knownDrivers(), drv) {
		return false, nil // no driver matches: still success
	}
	st.attach(now, d.nic, d.pf, d.vf, drv)
	return true, nil
}

// attach binds a VF to drv; the NIC driver creates the VF netdev.
func (st *state) attach(now int64, nic *nicState, pf *pfState, vf *vfState, drv string) {
	vf.Driver = drv
	if drv != nic.Driver {
		return
	}
	mac := vf.MAC
	if mac == "" || mac == "00:00:00:00:00:00" {
		mac = st.randomMAC("vf/" + vf.PCI)
	}
	nd := &netdev{
		Name: st.allocEthName(nic), Role: roleVF, NIC: st.nicIndex(nic), PF: pf.Index, VF: vf.Index,
		MAC: mac, PermMAC: mac, MTU: 1500, ReadyAt: max(now, vf.ReadyAt),
	}
	st.addNetdev(nd)
	vf.Netdev = nd.Name
}

// detach unbinds a VF from its driver, removing its netdev.
func (st *state) detach(now int64, vf *vfState) {
	if vf.Netdev != "" {
		st.removeNetdev(now, vf.Netdev)
		vf.Netdev = ""
	}
	vf.Driver = ""
}

func (st *state) addRep(nic *nicState, pf *pfState, vf *vfState, readyAt int64) {
	nd := &netdev{
		Name: st.allocEthName(nic), Role: roleRep, NIC: st.nicIndex(nic), PF: pf.Index, VF: vf.Index,
		MTU: 1500, HWTC: true, ReadyAt: readyAt,
	}
	nd.MAC = st.randomMAC("rep/" + vf.PCI)
	nd.PermMAC = nd.MAC
	st.addNetdev(nd)
	vf.Rep = nd.Name
	vf.Leaf = rateLeaf{} // a new VF port gets a new rate leaf: no limits, no parent
}

// removeNetdev unregisters a netdev: it leaves its master, a bond releases its slaves.
func (st *state) removeNetdev(now int64, name string) {
	nd := st.Netdevs[name]
	if nd == nil {
		return
	}
	if nd.Master != "" {
		st.release(now, nd)
	}
	if nd.Bond != nil {
		for len(nd.Bond.Slaves) > 0 {
			st.release(now, st.Netdevs[nd.Bond.Slaves[len(nd.Bond.Slaves)-1]])
		}
	}
	st.removeUnderlay(now, name)
	delete(st.Netdevs, name)
}

// --- devlink (KERNEL-FACTS §3) ---

// checkModeChange validates "devlink dev eswitch set pci/<pf> mode <mode>".
// noop is true when the PF is already in that mode.
func (st *state) checkModeChange(now int64, nic *nicState, pf *pfState, mode string) (noop, changed bool, err *opError) {
	if mode != eswitch.ModeLegacy && mode != eswitch.ModeSwitchdev {
		return false, false, fail(syscall.EINVAL, "Unsupported eswitch mode %q", mode)
	}
	if pf.Busy != nil && pf.Busy.Until > now {
		return false, false, fail(syscall.EBUSY, "Can't change mode, E-Switch is busy")
	}
	if pf.Mode == mode {
		return true, false, nil
	}
	if len(pf.RateNodes) > 0 {
		// devlink core, devlink_rate_nodes_check (eswitch set).
		return false, false, fail(syscall.EBUSY, "Rate node(s) exists.")
	}
	if pf.Mode == eswitch.ModeSwitchdev && st.eswitchRules(pf, now) > 0 {
		// eswitch_offloads.c mlx5_devlink_eswitch_mode_set: mlx5_esw_try_lock
		// fails while the eswitch has users (offloaded tc rules hold it).
		return false, false, fail(syscall.EBUSY, "Can't change mode, E-Switch is busy")
	}
	if mode == eswitch.ModeSwitchdev {
		for _, vf := range pf.VFs {
			if vf.Driver != "" {
				// The kernel does not check; the firmware fails the change.
				msg := "MODIFY_ESW_VPORT_CONTEXT(0x752) op_mod(0x0) failed, status bad resource state(0x9), syndrome (0x3c5a2b), err(-22)"
				st.log(now, "", devPrefix(nic.Driver, pf.PCI)+"mlx5_cmd_out_err: %s", msg)
				st.log(now, "", devPrefix(nic.Driver, pf.PCI)+"%s", "Failed setting eswitch to offloads")
				return false, true, fail(syscall.EINVAL, "Failed setting eswitch to offloads: %s (VF %s is bound to %s)", msg, vf.PCI, vf.Driver)
			}
		}
	}
	return false, false, nil
}

// unloadReps is the first half of a change to legacy: the eswitch leaves
// offloads mode and the representors vanish.
func (st *state) unloadReps(now int64, nic *nicState, pf *pfState) {
	st.log(now, "", devPrefix(nic.Driver, pf.PCI)+"E-Switch: Disable: mode(OFFLOADS), nvfs(%d), active vports(%d)", pf.NumVFs, pf.NumVFs+1)
	for _, vf := range pf.VFs {
		if vf.Rep != "" {
			st.removeNetdev(now, vf.Rep)
			vf.Rep = ""
		}
	}
}

// applyMode switches the eswitch mode: representors appear in switchdev
// (a change to legacy removed them first: unloadReps); an active LAG is
// torn down and re-evaluated.
func (st *state) applyMode(now int64, nic *nicState, pf *pfState, mode string) {
	pfnd := st.Netdevs[pf.Netdev]
	pre := devPrefix(nic.Driver, pf.PCI)
	if mode == eswitch.ModeSwitchdev {
		st.log(now, "", pre+"E-Switch: Disable: mode(LEGACY), nvfs(%d), active vports(%d)", pf.NumVFs, pf.NumVFs+1)
		pf.Mode = mode
		pfnd.HWTC = true // the uplink representor has hw-tc-offload on
		for _, vf := range pf.VFs {
			st.addRep(nic, pf, vf, max(now, vf.ReadyAt))
		}
		st.log(now, "", pre+"E-Switch: Enable: mode(OFFLOADS), nvfs(%d), active vports(%d)", pf.NumVFs, pf.NumVFs+1)
	} else {
		pf.Mode = mode
		pfnd.HWTC = false // back to the NIC profile: legacy default
		st.log(now, "", pre+"E-Switch: Enable: mode(LEGACY), nvfs(%d), active vports(%d)", pf.NumVFs, pf.NumVFs+1)
	}
	st.lagDisableChange(now, nic)
}

// --- links and bonds (KERNEL-FACTS §2, §4, §8) ---

func (st *state) operUp(nd *netdev, now int64) bool {
	return st.operState(nd, now) == "up" || (nd.Role == roleLo && nd.AdminUp)
}

// operState is RFC 2863 operstate as sysfs and rtnetlink print it.
func (st *state) operState(nd *netdev, now int64) string {
	if !nd.AdminUp {
		return "down"
	}
	switch nd.Role {
	case roleLo:
		return "unknown"
	case roleVLAN:
		if p := st.Netdevs[nd.Parent]; p == nil || !st.operUp(p, now) {
			return "lowerlayerdown"
		}
		return "up"
	case roleBond:
		if nd.Bond.Mode == "802.3ad" && nd.Bond.MinLinks > 0 {
			// bond_3ad_set_carrier: carrier off while the active
			// aggregator has fewer ports than min_links.
			if st.lacp(nd, now).Ports < nd.Bond.MinLinks {
				return "down"
			}
		}
		for _, s := range nd.Bond.Slaves {
			if sl := st.Netdevs[s]; sl != nil && sl.visible(now) && st.operUp(sl, now) {
				return "up"
			}
		}
		return "down"
	}
	return "up"
}

// lacpView is an 802.3ad bond's negotiation as the bonding driver settles
// it (measured on Linux 6.1 with veth pairs, e2e validate.sh): slaves whose
// link partner is the same LACP system share one aggregator, the first such
// slave's; a slave whose switch port runs no LACP is an individual port in
// an aggregator of its own with partner 00:00:00:00:00:00. A slave with link
// down keeps its aggregator ID but is not counted in ad_num_ports. The
// active aggregator (ad_select stable, computed rather than remembered here)
// is the one with the most up slaves, the lowest ID on a tie; with no slave
// up or the bond down there is none: ad_aggregator and ad_num_ports read 0
// and ad_partner_mac is empty.
type lacpView struct {
	Aggregator int
	Ports      int
	PartnerMAC string
	SlaveAgg   map[string]int
}

func (st *state) lacp(bond *netdev, now int64) lacpView {
	v := lacpView{SlaveAgg: map[string]int{}}
	partnerOf := map[int]string{} // aggregator -> partner system
	aggOf := map[string]int{}     // partner system -> aggregator
	up := map[int]int{}
	for i, name := range bond.Bond.Slaves {
		sl := st.Netdevs[name]
		if sl == nil {
			continue
		}
		id, partner := i+1, st.lacpPartner(sl)
		if partner != "" {
			if a, ok := aggOf[partner]; ok {
				id = a
			} else {
				aggOf[partner] = id
			}
		}
		v.SlaveAgg[name] = id
		partnerOf[id] = partner
		if sl.visible(now) && st.operUp(sl, now) {
			up[id]++
		}
	}
	if !bond.AdminUp {
		return v
	}
	for id, n := range up {
		if n > v.Ports || (n == v.Ports && id < v.Aggregator) {
			v.Aggregator, v.Ports = id, n
		}
	}
	if v.Aggregator == 0 {
		return v
	}
	v.PartnerMAC = partnerOf[v.Aggregator]
	if v.PartnerMAC == "" {
		v.PartnerMAC = eswitch.NoLACPPartner
	}
	return v
}

// lacpPartner is the LACP system MAC of the switch behind a PF slave, ""
// when its switch port runs no LACP. One switch per NIC: its MAC is derived
// from the NIC's switch ID, locally administered.
func (st *state) lacpPartner(sl *netdev) string {
	if sl.Role != rolePF || sl.NIC >= len(st.NICs) {
		return ""
	}
	nic := st.NICs[sl.NIC]
	if nic.NoSwitchLACP {
		return ""
	}
	id := nic.SwitchID + "0000000000"
	return fmt.Sprintf("02:%s:%s:%s:%s:%s", id[0:2], id[2:4], id[4:6], id[6:8], id[8:10])
}

func (st *state) notFound(name string) *opError {
	return fail(syscall.ENODEV, "Cannot find device %q", name).with(eswitch.ErrLinkNotFound)
}

// setMTU is dev_set_mtu: min_mtu 68, max_mtu 9978 on mlx5e netdevs
// (PF, VF, representor), 65535 on a bond; a bond's new MTU goes to every
// slave first (bond_change_mtu; a slave's failure undoes the others).
func (st *state) setMTU(now int64, name string, mtu int) (bool, *opError) {
	nd := st.link(name, now)
	if nd == nil {
		return false, st.notFound(name)
	}
	lo, hi := 68, 9978 // mlx5e max MTU
	if nd.Role == roleBond || nd.Role == roleLo || nd.Role == roleVLAN {
		hi = 65535
	}
	if mtu < lo || mtu > hi {
		return false, fail(syscall.EINVAL, "mtu %d out of range %d-%d", mtu, lo, hi)
	}
	if p := st.Netdevs[nd.Parent]; nd.Role == roleVLAN && p != nil && mtu > p.MTU {
		return false, fail(syscall.ERANGE, "mtu %d above its parent %s's %d", mtu, p.Name, p.MTU)
	}
	if nd.MTU == mtu {
		return false, nil
	}
	st.lowerVLANMTU(name, mtu)
	if nd.Bond != nil {
		for _, s := range nd.Bond.Slaves {
			if sl := st.Netdevs[s]; sl != nil {
				if _, e := st.setMTU(now, s, mtu); e != nil {
					return false, e
				}
			}
		}
	}
	nd.MTU = mtu
	return true, nil
}

func (st *state) setLinkUp(now int64, name string, up bool) (bool, *opError) {
	nd := st.link(name, now)
	if nd == nil {
		return false, st.notFound(name)
	}
	if nd.AdminUp == up {
		return false, nil
	}
	nd.AdminUp = up
	st.refreshBonds(now)
	return true, nil
}

// refreshBonds re-selects the active slave of every active-backup bond.
func (st *state) refreshBonds(now int64) {
	for _, nd := range st.Netdevs {
		if nd.Bond == nil {
			continue
		}
		b := nd.Bond
		if b.Mode != "active-backup" {
			b.ActiveSlave = ""
			continue
		}
		// primary_reselect always (the default): an up primary slave is
		// the active one.
		if p := st.Netdevs[b.primarySlave()]; p != nil && nd.AdminUp && p.visible(now) && st.operUp(p, now) {
			b.ActiveSlave = p.Name
			continue
		}
		if cur := st.Netdevs[b.ActiveSlave]; cur != nil && cur.Master == nd.Name && st.operUp(cur, now) {
			continue
		}
		b.ActiveSlave = ""
		if !nd.AdminUp {
			continue
		}
		for _, s := range b.Slaves {
			if sl := st.Netdevs[s]; sl != nil && sl.visible(now) && st.operUp(sl, now) {
				b.ActiveSlave = s
				break
			}
		}
	}
}

var bondModes = map[string]int{
	"balance-rr": 0, "active-backup": 1, "balance-xor": 2, "broadcast": 3,
	"802.3ad": 4, "balance-tlb": 5, "balance-alb": 6,
}

var xmitPolicies = map[string]int{
	"layer2": 0, "layer3+4": 1, "layer2+3": 2, "encap2+3": 3, "encap3+4": 4, "vlan+srcmac": 5,
}

var lacpRates = map[string]int{"slow": 0, "fast": 1}

func (st *state) addBond(now int64, b eswitch.BondSpec) (bool, *opError) {
	if !ifnameOK(b.Name) {
		return false, fail(syscall.EINVAL, "invalid interface name %q", b.Name)
	}
	if _, exists := st.Netdevs[b.Name]; exists {
		return false, fail(syscall.EEXIST, "File exists")
	}
	mode := b.Mode
	if mode == "" {
		mode = "balance-rr"
	}
	if _, ok := bondModes[mode]; !ok {
		return false, fail(syscall.EINVAL, "option mode: invalid value (%s)", b.Mode)
	}
	if b.Miimon < 0 {
		return false, fail(syscall.EINVAL, "option miimon: invalid value (%d)", b.Miimon)
	}
	rate := "slow"
	if b.LacpRate != "" {
		if _, ok := lacpRates[b.LacpRate]; !ok {
			return false, fail(syscall.EINVAL, "option lacp_rate: invalid value (%s)", b.LacpRate)
		}
		if mode != "802.3ad" {
			return false, fail(syscall.EACCES, "option lacp_rate: mode dependency failed, not supported in mode %s(%d)", mode, bondModes[mode])
		}
		rate = b.LacpRate
	}
	policy := "layer2"
	if b.XmitHashPolicy != "" {
		if _, ok := xmitPolicies[b.XmitHashPolicy]; !ok {
			return false, fail(syscall.EINVAL, "option xmit_hash_policy: invalid value (%s)", b.XmitHashPolicy)
		}
		policy = b.XmitHashPolicy
	}
	nd := &netdev{
		Name: b.Name, Role: roleBond, MTU: 1500, Alias: b.Alias, ReadyAt: now,
		Bond: &bondState{Mode: mode, Miimon: b.Miimon, LacpRate: rate, XmitHashPolicy: policy, RandomMAC: true},
	}
	nd.MAC = st.randomMAC("bond/" + b.Name)
	nd.PermMAC = nd.MAC
	st.addNetdev(nd)
	return true, nil
}

func (st *state) deleteLink(now int64, name string) (bool, *opError) {
	nd := st.link(name, now)
	if nd == nil {
		return false, st.notFound(name)
	}
	if nd.Role != roleBond && nd.Role != roleVLAN {
		return false, fail(syscall.EOPNOTSUPP, "Operation not supported")
	}
	st.removeNetdev(now, name)
	return true, nil
}

// setMaster implements IFLA_MASTER (do_set_master + bond_enslave/bond_release).
func (st *state) setMaster(now int64, slave, master string) (bool, *opError) {
	s := st.link(slave, now)
	if s == nil {
		return false, st.notFound(slave)
	}
	if master == "" {
		if s.Master == "" {
			return false, nil
		}
		st.release(now, s)
		return true, nil
	}
	m := st.link(master, now)
	if m == nil {
		return false, st.notFound(master)
	}
	if s.Master == master {
		return false, nil
	}
	if m.Role != roleBond {
		return false, fail(syscall.EOPNOTSUPP, "%s does not support enslaving", master)
	}
	if s.Name == m.Name {
		return false, fail(syscall.EPERM, "Cannot enslave bond to itself.")
	}
	if s.Role == roleLo {
		return false, fail(syscall.EPERM, "Cannot enslave a loopback device")
	}
	for up := m; up != nil && up.Master != ""; up = st.Netdevs[up.Master] {
		if up.Master == s.Name {
			return false, fail(syscall.EBUSY, "%s is an upper device of %s", s.Name, m.Name)
		}
	}
	changed := false
	if s.Master != "" { // do_set_master releases from the old master first
		st.release(now, s)
		changed = true
	}
	if s.AdminUp {
		return changed, fail(syscall.EPERM, "Device can not be enslaved while up")
	}
	b := m.Bond
	if len(b.Slaves) == 0 && b.RandomMAC {
		m.MAC = s.MAC // the bond takes its first slave's address
		b.RandomMAC = false
	}
	// bond_enslave: the slave's MTU is saved and set to the bond's.
	s.OrigMTU = s.MTU
	if s.MTU != m.MTU {
		if _, e := st.setMTU(now, s.Name, m.MTU); e != nil {
			return changed, e
		}
	}
	b.Slaves = append(b.Slaves, s.Name)
	s.Master = m.Name
	s.MAC = m.MAC // fail_over_mac none: every slave gets the bond's address
	st.refreshBonds(now)
	link := map[bool]string{true: "an up", false: "a down"}[st.operUp(s, now)]
	st.log(now, "", "%s: (slave %s): Enslaving as %s interface with %s link", m.Name, s.Name, st.slaveRole(now, m, s, "an active", "a backup"), link)
	st.lagEnslaveWarning(now, s.Name)
	st.lagTrackHash(m, s)
	st.lagEvalFor(now, m.Name, s.Name)
	return true, nil
}

// release removes s from its bond, restoring its permanent address.
func (st *state) release(now int64, s *netdev) {
	m := st.Netdevs[s.Master]
	if m != nil && m.Bond != nil {
		st.log(now, "", "%s: (slave %s): Releasing %s interface", m.Name, s.Name, st.slaveRole(now, m, s, "active", "backup"))
	}
	s.Master = ""
	s.MAC = s.PermMAC
	if s.OrigMTU != 0 { // __bond_release_one: back to the MTU before the enslave
		s.MTU, s.OrigMTU = s.OrigMTU, 0
	}
	if m == nil || m.Bond == nil {
		return
	}
	m.Bond.Slaves = slices.DeleteFunc(m.Bond.Slaves, func(n string) bool { return n == s.Name })
	if len(m.Bond.Slaves) == 0 {
		m.MAC = st.randomMAC("bond/" + m.Name) // bonding: eth_hw_addr_random on the last release
		m.Bond.RandomMAC = true
	}
	st.refreshBonds(now)
	st.lagEvalFor(now, m.Name, s.Name)
}

// slaveRole is bond_is_active_slave for the kernel's enslave and release
// log lines: in active-backup the active slave, elsewhere a slave whose
// link is up.
func (st *state) slaveRole(now int64, bond, s *netdev, active, backup string) string {
	if bond.Bond.Mode == "active-backup" && bond.Bond.ActiveSlave == s.Name ||
		bond.Bond.Mode != "active-backup" && st.operUp(s, now) {
		return active
	}
	return backup
}

func (st *state) vfOf(pfName string, vf int, now int64) (*nicState, *pfState, *vfState, *opError) {
	nd := st.link(pfName, now)
	if nd == nil {
		return nil, nil, nil, st.notFound(pfName)
	}
	if nd.Role != rolePF {
		return nil, nil, nil, fail(syscall.EOPNOTSUPP, "%s has no VFs (no ndo_set_vf_*)", pfName)
	}
	nic, pf := st.pfOf(nd)
	if vf < 0 || vf >= pf.NumVFs {
		return nil, nil, nil, fail(syscall.EINVAL, "VF %d out of range (%d VFs)", vf, pf.NumVFs)
	}
	return nic, pf, pf.VFs[vf], nil
}

func (st *state) setVFMAC(now int64, pfName string, vfi int, mac net.HardwareAddr) (bool, *opError) {
	_, _, vf, err := st.vfOf(pfName, vfi, now)
	if err != nil {
		return false, err
	}
	if len(mac) != 6 || mac[0]&1 != 0 {
		return false, fail(syscall.EINVAL, "invalid MAC %s", mac)
	}
	if vf.MAC == mac.String() {
		return false, nil
	}
	vf.MAC = mac.String()
	return true, nil
}

func (st *state) setVFVlan(now int64, pfName string, vfi, vlan int) (bool, *opError) {
	return st.setVFVlanQos(now, pfName, vfi, vlan, 0)
}

// vfPolicyOf finds the VF for a policy setting (op, as in NICSpec.NoVFOps):
// rtnetlink's do_setlink answers EOPNOTSUPP when the driver has no ndo for
// it, before the driver sees the VF index.
func (st *state) vfPolicyOf(now int64, pfName string, vfi int, op string) (*pfState, *vfState, *opError) {
	nd := st.link(pfName, now)
	if nd != nil && nd.Role == rolePF {
		nic, _ := st.pfOf(nd)
		for _, o := range nic.NoVFOps {
			if o == op {
				return nil, nil, fail(syscall.EOPNOTSUPP, "")
			}
		}
	}
	_, pf, vf, err := st.vfOf(pfName, vfi, now)
	return pf, vf, err
}

// setVFVlanQos: mlx5_eswitch_set_vport_vlan (esw/legacy.c): vlan > 4095 or
// qos > 7 EINVAL; in switchdev vlan 0 succeeds doing nothing ("compatibility
// with libvirt"), any other vlan EOPNOTSUPP.
func (st *state) setVFVlanQos(now int64, pfName string, vfi, vlan, qos int) (bool, *opError) {
	pf, vf, err := st.vfPolicyOf(now, pfName, vfi, "vlan")
	if err != nil {
		return false, err
	}
	if vlan < 0 || vlan > 4095 || qos < 0 || qos > 7 {
		return false, fail(syscall.EINVAL, "invalid VLAN %d qos %d", vlan, qos)
	}
	if pf.Mode == eswitch.ModeSwitchdev {
		if vlan != 0 {
			return false, fail(syscall.EOPNOTSUPP, "VF VLAN is not supported in switchdev mode")
		}
		return false, nil // vlan 0: success, no-op (libvirt compatibility)
	}
	if vf.Vlan == vlan && vf.Qos == qos {
		return false, nil
	}
	vf.Vlan, vf.Qos = vlan, qos
	return true, nil
}

// legacyOnly: mlx5_eswitch_set_vport_trust/_spoofchk and
// mlx5_eswitch_set_vport_state answer EOPNOTSUPP outside legacy mode.
func legacyOnly(pf *pfState) *opError {
	if pf.Mode == eswitch.ModeSwitchdev {
		return fail(syscall.EOPNOTSUPP, "")
	}
	return nil
}

func (st *state) setVFTrust(now int64, pfName string, vfi int, on bool) (bool, *opError) {
	pf, vf, err := st.vfPolicyOf(now, pfName, vfi, "trust")
	if err == nil {
		err = legacyOnly(pf)
	}
	if err != nil || vf.Trust == on {
		return false, err
	}
	vf.Trust = on
	return true, nil
}

func (st *state) setVFSpoofchk(now int64, pfName string, vfi int, on bool) (bool, *opError) {
	pf, vf, err := st.vfPolicyOf(now, pfName, vfi, "spoofchk")
	if err == nil {
		err = legacyOnly(pf)
	}
	if err != nil || vf.Spoofchk == on {
		return false, err
	}
	vf.Spoofchk = on
	return true, nil
}

func (st *state) setVFLinkState(now int64, pfName string, vfi int, ls string) (bool, *opError) {
	pf, vf, err := st.vfPolicyOf(now, pfName, vfi, "link_state")
	if err != nil {
		return false, err
	}
	if _, ok := eswitch.VFLinkStateNumber(ls); !ok {
		return false, fail(syscall.EINVAL, "invalid VF link state %q", ls)
	}
	if err := legacyOnly(pf); err != nil {
		return false, err
	}
	if ls == eswitch.VFLinkAuto {
		ls = ""
	}
	if vf.LinkState == ls {
		return false, nil
	}
	vf.LinkState = ls
	return true, nil
}

// setVFRate: mlx5_eswitch_set_vport_rate works in both modes (KERNEL-FACTS
// §8: it is the vport's QoS, the one devlink-rate sets in switchdev).
func (st *state) setVFRate(now int64, pfName string, vfi, minRate, maxRate int) (bool, *opError) {
	_, vf, err := st.vfPolicyOf(now, pfName, vfi, "rate")
	if err != nil {
		return false, err
	}
	if minRate < 0 || maxRate < 0 {
		return false, fail(syscall.EINVAL, "invalid rate")
	}
	if vf.MinTxRate == minRate && vf.MaxTxRate == maxRate {
		return false, nil
	}
	vf.MinTxRate, vf.MaxTxRate = minRate, maxRate
	return true, nil
}

// --- hardware LAG (KERNEL-FACTS §5) ---

var lagBondModes = map[string]bool{"active-backup": true, "balance-xor": true, "802.3ad": true}

// lagReady is mlx5_lag_is_ready (lag/lag.h): the NIC's LAG device has
// both PFs. A PF whose firmware is configured with more than 64 VFs
// (mstconfig NUM_OF_VFS, which the PF shows as sriov_totalvfs) leaves it
// unready for good: lag/lag.c mlx5_handle_changeupper_event then answers
// the enslave with "Can't activate LAG offload, PF is configured with more
// than 64 VFs" and mlx5_do_bond never bonds. The source has no VF count
// check of its own; the limit is NVIDIA's (Mellanox ovs-tests, Feature
// #2101052: NUM_OF_VFS=65, 2 VFs, no VF LAG). numvfs plays no part.
func (st *state) lagReady(nic *nicState) bool {
	return len(nic.PFs) == 2 && nic.TotalVFs <= lagMaxVFs
}

// lagInLag is is_in_lag of mlx5_handle_changeupper_event: both PFs of the
// NIC, and nothing else, are the slaves of one bond; it returns the bond.
func (st *state) lagInLag(nic *nicState) *netdev {
	if len(nic.PFs) != 2 {
		return nil
	}
	p0, p1 := st.Netdevs[nic.PFs[0].Netdev], st.Netdevs[nic.PFs[1].Netdev]
	if p0.Master == "" || p0.Master != p1.Master {
		return nil
	}
	b := st.Netdevs[p0.Master]
	if b == nil || b.Bond == nil || len(b.Bond.Slaves) != 2 {
		return nil
	}
	return b
}

// lagEligible tells whether the NIC's LAG may activate (mlx5_do_bond:
// ready, is_bonded, mlx5_lag_check_prereq): the LAG device is ready, both
// PFs and nothing else are the slaves of one bond in a LAG-capable mode
// (tx_type activebackup or hash), both PFs are in switchdev.
func (st *state) lagEligible(nic *nicState) (string, bool) {
	b := st.lagInLag(nic)
	if b == nil || !lagBondModes[b.Bond.Mode] || !st.lagReady(nic) {
		return "", false
	}
	for _, pf := range nic.PFs {
		if pf.Mode != eswitch.ModeSwitchdev {
			return "", false
		}
	}
	return b.Name, true
}

// lagTrackHash takes the bond's xmit_hash_policy into the tracker of the
// NIC whose PF s was just enslaved to bond b (the CHANGEUPPER linking
// event carries it; nothing else does).
func (st *state) lagTrackHash(b, s *netdev) {
	if s.Role == rolePF {
		nic, _ := st.pfOf(s)
		nic.TrackerHash = b.Bond.XmitHashPolicy
	}
}

// lagEnslaveWarning is the extack mlx5_handle_changeupper_event sets on
// an enslave that makes both PFs of a NIC, and nothing else, a bond's
// slaves while the LAG cannot follow: the enslave itself succeeds, and
// `ip link set ... master` prints it as a "Warning:" line. The simulated
// host has no extack channel for a call that succeeds, so the line goes to
// its dmesg, as iproute2 prints it.
func (st *state) lagEnslaveWarning(now int64, slave string) {
	for _, nic := range st.NICs {
		if nic.PFs[0].Netdev != slave && (len(nic.PFs) < 2 || nic.PFs[1].Netdev != slave) {
			continue
		}
		b := st.lagInLag(nic)
		switch {
		case b == nil:
		case !st.lagReady(nic):
			st.log(now, "", "Warning: %s: Can't activate LAG offload, PF is configured with more than %d VFs.", defaultDriver, lagMaxVFs)
		case !lagBondModes[b.Bond.Mode]:
			st.log(now, "", "Warning: %s: Can't activate LAG offload, TX type isn't supported.", defaultDriver)
		}
	}
}

// lagEvalFor re-evaluates the LAG of every NIC that a change of bond's
// slaves (slave joining or leaving) concerns.
func (st *state) lagEvalFor(now int64, bond, slave string) {
	for _, nic := range st.NICs {
		involved := nic.LAG.Bond == bond
		for _, pf := range nic.PFs {
			if pf.Netdev == slave || st.Netdevs[pf.Netdev].Master == bond {
				involved = true
			}
		}
		if involved {
			st.lagEval(now, nic, true)
		}
	}
}

// lagDisableChange is mlx5_lag_disable_change + mlx5_lag_enable_change
// around an eswitch mode or SR-IOV change: any active LAG (multipath and
// multiport eswitch included) is torn down, then the bond's is
// re-evaluated.
func (st *state) lagDisableChange(now int64, nic *nicState) {
	if len(nic.PFs) != 2 {
		return
	}
	if nic.LAG.Mode != "" {
		st.lagDeactivate(now, nic)
	}
	st.lagEval(now, nic, true)
}

// lagEval re-evaluates the NIC's LAG. With force, an eligible LAG is
// (re)activated: that is what the driver does on a bonding change, a mode
// change or an SR-IOV change. A multipath or multiport-eswitch LAG ignores
// the bond (mlx5_do_bond: "VF LAG is in multipath mode, ignore bond change
// requests"; an MPESW LAG is active, so the bond's is not created).
func (st *state) lagEval(now int64, nic *nicState, force bool) {
	if len(nic.PFs) != 2 || nic.LAG.Mode != "" {
		return
	}
	bond, ok := st.lagEligible(nic)
	l := &nic.LAG
	if !ok {
		if l.Bond != "" {
			st.lagDeactivate(now, nic)
		}
		return
	}
	if l.Bond == bond && !force {
		return
	}
	if l.Bond != "" {
		st.lagDeactivate(now, nic)
	}
	*l = lagState{Bond: bond, EligibleAt: now, Hash: nic.TrackerHash}
	pre := devPrefix(nic.Driver, nic.PFs[0].PCI)
	for _, pf := range nic.PFs {
		for _, vf := range pf.VFs {
			if vf.Driver != "" {
				l.Failed = true
			}
		}
	}
	if l.Failed {
		st.log(now, "", pre+"%s", "mlx5_activate_lag: Failed to activate VF LAG")
		st.log(now, "", pre+"%s", "mlx5_activate_lag: Make sure all VFs are unbound prior to VF LAG activation or deactivation")
		return
	}
	l.ActiveAt = now + int64(st.Spec.Latency.LAGActivation)
	tag := "lag/" + nic.Name
	sel := st.lagPortSel(nic)
	if sel == "hash" {
		st.log(l.ActiveAt, tag, pre+"%s", "lag map active ports: 1, 2")
	} else {
		st.log(l.ActiveAt, tag, pre+"%s", "lag map: port 1:1 port 2:2")
	}
	st.log(l.ActiveAt, tag, pre+"shared_fdb:1 mode:%s", sel)
	st.log(l.ActiveAt, tag, pre+"%s", "Operation mode is single FDB")
}

func (st *state) lagDeactivate(now int64, nic *nicState) {
	if st.lagActive(nic, now) {
		st.log(now, "", devPrefix(nic.Driver, nic.PFs[0].PCI)+"%s", "lag deactivated (sim)")
	}
	st.withdraw(now, "lag/"+nic.Name)
	nic.LAG = lagState{}
}

func (st *state) lagActive(nic *nicState, now int64) bool {
	l := nic.LAG
	return (l.Bond != "" || l.Mode != "") && !l.Failed && now >= l.ActiveAt
}

// lagType is debugfs lag/type (debugfs.c get_str_mode_type).
func (st *state) lagType(nic *nicState) string {
	if nic.LAG.Mode != "" {
		return nic.LAG.Mode
	}
	return eswitch.ModeSwitchdev
}

// lagFlags is debugfs lag/flags: shared FDB and native FDB selection for
// the bond's LAG and MPESW (mlx5_lag_set_flags), neither for multipath
// (activated without shared FDB).
func (st *state) lagFlags(nic *nicState) string {
	if nic.LAG.Mode == lagMultipath {
		return "shared_fdb:off\nfdb_selection_mode:affinity\n"
	}
	return "shared_fdb:on\nfdb_selection_mode:native\n"
}

// lagPortSel is debugfs lag/port_sel_mode (get_port_sel_mode,
// mlx5_lag_set_port_sel_mode_offloads): mpesw for a multiport eswitch;
// hash when the NIC has the port_select_flow_table capability and the
// bond's tx_type is hash (balance-xor, 802.3ad); queue_affinity otherwise
// (active-backup, multipath, or no such capability).
func (st *state) lagPortSel(nic *nicState) string {
	switch nic.LAG.Mode {
	case lagMPESW:
		return "mpesw"
	case lagMultipath:
		return "queue_affinity"
	}
	if nic.NoPortSelFT {
		return "queue_affinity"
	}
	b := st.Netdevs[nic.LAG.Bond]
	if b != nil && b.Bond != nil && b.Bond.Mode == "active-backup" {
		return "queue_affinity"
	}
	return "hash"
}

// lagTxEnabled is the lag_lower_state mlx5 tracks for a PF (bonding's
// bond_lower_state_changed: link_up, and tx_enabled = bond_is_active_slave):
// its link is up and it is an active slave: in active-backup the active
// slave; in 802.3ad a slave of the bond's active aggregator (a slave in
// another aggregator, as every port but one without an LACP partner, is
// inactive: bond_3ad.c __disable_port); in balance-xor every slave.
func (st *state) lagTxEnabled(b *netdev, pf *pfState, now int64) bool {
	if !st.operUp(st.Netdevs[pf.Netdev], now) {
		return false
	}
	if b == nil || b.Bond == nil {
		return true
	}
	switch b.Bond.Mode {
	case "active-backup":
		return b.Bond.ActiveSlave == pf.Netdev
	case "802.3ad":
		v := st.lacp(b, now)
		return v.Aggregator != 0 && v.SlaveAgg[pf.Netdev] == v.Aggregator
	}
	return true
}

// lagMapping renders debugfs lag/mapping (mlx5_infer_tx_affinity_mapping,
// mlx5_infer_tx_enabled) from each port's lagTxEnabled.
func (st *state) lagMapping(nic *nicState, now int64) string {
	if nic.LAG.Mode != "" {
		return "1:1\n2:2\n" // normal affinity (multipath); MPESW: the v2p map left as it was (unconfirmed)
	}
	b := st.Netdevs[nic.LAG.Bond]
	var enabled []int
	for i, pf := range nic.PFs {
		if st.lagTxEnabled(b, pf, now) {
			enabled = append(enabled, i)
		}
	}
	out := ""
	if st.lagPortSel(nic) == "hash" {
		if len(enabled) == 0 {
			enabled = []int{0, 1}
		}
		for _, i := range enabled {
			out += fmt.Sprintf("%d\n", i+1)
		}
		return out
	}
	for i := range nic.PFs {
		to := i
		if len(enabled) > 0 && !slices.Contains(enabled, i) {
			to = enabled[0]
		}
		out += fmt.Sprintf("%d:%d\n", i+1, to+1)
	}
	return out
}

// GiveNames makes names the names of the next netdevs (representors, VF
// netdevs) that NIC nic's driver registers, in that order, instead of the
// lowest free eth%d; no other NIC's netdev takes them meanwhile. It stands
// for a boot whose probe order differs (other netdevs first, the cards in
// another order): the kernel hands a card's representors the eth names
// another card's had before the reboot. A name already in use, or not of
// the eth%d form a driver registers, is refused.
func (h *Host) GiveNames(nic string, names ...string) error {
	return h.update(func(st *state, now int64) (bool, error) {
		n := st.nicByName(nic)
		if n == nil {
			return false, fail(syscall.ENODEV, "no NIC %q", nic)
		}
		for _, name := range names {
			var i int
			if _, err := fmt.Sscanf(name, "eth%d", &i); err != nil || fmt.Sprintf("eth%d", i) != name {
				return false, fail(syscall.EINVAL, "name %q is not eth%%d", name)
			}
			if _, taken := st.Netdevs[name]; taken {
				return false, fail(syscall.EEXIST, "netdev %s exists", name)
			}
		}
		n.Names = append(n.Names, names...)
		return len(names) > 0, nil
	})
}

// SetSwitchLACP makes the switch ports behind NIC nic's PFs run LACP (on,
// one port-channel) or not (off): an 802.3ad bond of the PFs then finds no
// partner. The spec's switch_lacp sets it at start.
func (h *Host) SetSwitchLACP(nic string, on bool) error {
	return h.update(func(st *state, now int64) (bool, error) {
		for _, n := range st.NICs {
			if n.Name == nic {
				if n.NoSwitchLACP == !on {
					return false, nil
				}
				n.NoSwitchLACP = !on
				return true, nil
			}
		}
		return false, fail(syscall.ENODEV, "no NIC %q", nic)
	})
}

// SetMultipathRoute adds (on) or deletes an IPv4 route of NIC nic with
// one nexthop through each of its PFs. mlx5 (lag/mp.c
// mlx5_lag_fib_route_event) turns such a route into a multipath LAG when
// its LAG device is ready, both PFs are in switchdev and no LAG is active;
// from then on it ignores the bond. Deleting the route only stops the
// tracking: the multipath LAG stays until an eswitch mode or SR-IOV change
// (mlx5_lag_disable_change).
func (h *Host) SetMultipathRoute(nic string, on bool) error {
	return h.update(func(st *state, now int64) (bool, error) {
		n := st.nicByName(nic)
		if n == nil {
			return false, fail(syscall.ENODEV, "no NIC %q", nic)
		}
		if !on || n.LAG.Mode != "" || len(n.PFs) != 2 || !st.lagReady(n) || st.lagActive(n, now) || n.LAG.Bond != "" {
			return false, nil
		}
		for _, pf := range n.PFs {
			if pf.Mode != eswitch.ModeSwitchdev {
				return false, nil // mlx5_esw_multipath_prereq
			}
		}
		n.LAG = lagState{Mode: lagMultipath, EligibleAt: now, ActiveAt: now}
		pre := devPrefix(n.Driver, n.PFs[0].PCI)
		st.log(now, "", "%slag map: port 1:1 port 2:2", pre)
		st.log(now, "", "%sshared_fdb:0 mode:queue_affinity", pre)
		return true, nil
	})
}

func (st *state) nicByName(name string) *nicState {
	for _, n := range st.NICs {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// setMultiportEswitch is the devlink param esw_multiport (runtime, bool)
// of a PF (lag/mpesw.c enable_mpesw, disable_mpesw): true needs no LAG
// active (EINVAL), the eswitch in switchdev, the port_select_flow_table
// capability and mlx5_lag_check_prereq (EOPNOTSUPP); false tears an MPESW
// LAG down (the bond's LAG comes back only at the next bond event).
func (st *state) setMultiportEswitch(now int64, nic *nicState, on bool) (bool, *opError) {
	if !on {
		if nic.LAG.Mode != lagMPESW {
			return false, nil
		}
		st.lagDeactivate(now, nic)
		return true, nil
	}
	if nic.LAG.Mode == lagMPESW {
		return false, nil
	}
	if len(nic.PFs) != 2 || !st.lagReady(nic) {
		return false, nil // no LAG device: mlx5_lag_mpesw_queue_work does nothing
	}
	if st.lagActive(nic, now) || nic.LAG.Bond != "" {
		return false, fail(syscall.EINVAL, "LAG is active in another mode")
	}
	for _, pf := range nic.PFs {
		if pf.Mode != eswitch.ModeSwitchdev || nic.NoPortSelFT {
			return false, fail(syscall.EOPNOTSUPP, "multiport eswitch needs both PFs in switchdev and the port_select_flow_table capability")
		}
	}
	nic.LAG = lagState{Mode: lagMPESW, EligibleAt: now, ActiveAt: now}
	st.log(now, "", "%sshared_fdb:1 mode:mpesw", devPrefix(nic.Driver, nic.PFs[0].PCI))
	return true, nil
}
