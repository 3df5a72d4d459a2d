package eswitch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// PF is one resolved physical function: its netdev, PCI address (empty for
// a non-PCI device such as netdevsim), devlink instance and PF number.
type PF struct {
	Dev      sriov.Device `json:"device"` // the SR-IOV device: pci/<addr>; two netdevsim ports share one
	Netdev   string       `json:"netdev"`
	Addr     sriov.Addr   `json:"pci,omitempty"`
	Devlink  Devlink      `json:"devlink"`
	PfNumber uint16       `json:"pfnum"`
	SwitchID string       `json:"switch_id,omitempty"`
}

var ifnameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.@+-]{1,15}$`) })

// ValidIfName checks an interface name before it reaches a sysfs path or
// netlink: 1-15 characters, no slash, colon or whitespace (dev_valid_name),
// not "." or "..".
func ValidIfName(name string) error {
	if name == "." || name == ".." || !ifnameRE().MatchString(name) {
		return fmt.Errorf("invalid interface name %q: 1-15 characters of [A-Za-z0-9_.@+-], no '/', ':' or spaces", name)
	}
	return nil
}

func netFile(name, file string) string { return path.Join("/sys/class/net", name, file) }

// PhysPortName reads "cat /sys/class/net/$if/phys_port_name"; "" when the
// device has none (EOPNOTSUPP).
func PhysPortName(f sysfs.FS, name string) (string, error) {
	return optionalNetFile(f, name, "phys_port_name")
}

// PhysSwitchID reads "cat /sys/class/net/$if/phys_switch_id"; "" when none.
func PhysSwitchID(f sysfs.FS, name string) (string, error) {
	return optionalNetFile(f, name, "phys_switch_id")
}

// optionalNetFile reads an attribute of netdev name that a device may lack:
// "" when reading it fails with EOPNOTSUPP or the netdev has no such file.
func optionalNetFile(f sysfs.FS, name, file string) (string, error) {
	s, err := sysfs.ReadString(f, netFile(name, file))
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, fs.ErrNotExist) && sysfs.Exists(f, netFile(name, "")) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s of %s: %w", file, name, err)
	}
	return s, nil
}

var repNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:c\d+)?pf(\d+)vf(\d+)$`) })

// ParseRepName reads a VF representor's phys_port_name, "pf<p>vf<n>" (with
// a "c<controller>" prefix on a SmartNIC's host side): the PF and VF
// numbers, which devlink carries as u16. ok is false for any other name
// and for a number beyond 65535.
func ParseRepName(ppn string) (pf, vf uint16, ok bool) {
	m := repNameRE().FindStringSubmatch(ppn)
	if m == nil {
		return 0, 0, false
	}
	p, perr := strconv.ParseUint(m[1], 10, 16)
	v, verr := strconv.ParseUint(m[2], 10, 16)
	if perr != nil || verr != nil {
		return 0, 0, false
	}
	return uint16(p), uint16(v), true
}

// IsRepresentorName tells whether a phys_port_name is a VF representor's
// ("pf0vf3", with a controller prefix "c1pf0vf3" on a SmartNIC): the one
// rule, used by preflight, doctor and the PF lookup.
func IsRepresentorName(ppn string) bool {
	_, _, ok := ParseRepName(ppn)
	return ok
}

// ResolvePF finds a PF given as a netdev name or a PCI address. Given a PCI
// address it picks, among the function's netdevs, the uplink (not a
// pf<p>vf<n> representor). The devlink instance is pci/<addr> when the
// kernel has one, else the instance of the netdev's devlink port.
func ResolvePF(k Kernel, f sysfs.FS, ref string) (PF, error) {
	pci := sriov.Host{FS: f}
	var pf PF
	if a, err := sriov.ParseAddr(ref); err == nil && strings.Contains(ref, ":") {
		if !pci.Exists(a) {
			return PF{}, fmt.Errorf("PF %s: no such PCI device", a)
		}
		names, err := pci.Netdevs(a)
		if err != nil {
			return PF{}, err
		}
		for _, n := range names {
			ppn, err := PhysPortName(f, n)
			if err != nil {
				return PF{}, err
			}
			if !repNameRE().MatchString(ppn) {
				pf.Netdev = n
				break
			}
		}
		if pf.Netdev == "" {
			return PF{}, fmt.Errorf("PF %s: no network interface", a)
		}
		pf.Addr = a
	} else {
		if err := ValidIfName(ref); err != nil {
			return PF{}, err
		}
		a, ok, err := pci.AddrOfNetdev(ref)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return PF{}, fmt.Errorf("PF %s: no such network interface", ref)
			}
			return PF{}, err
		}
		pf.Netdev = ref
		if ok {
			pf.Addr = a
		}
	}
	if pf.Addr != "" {
		pf.Dev = sriov.PCIDevice(pf.Addr)
	} else if d, err := pci.DeviceOfNetdev(pf.Netdev); err == nil {
		pf.Dev = d
	} else {
		return PF{}, fmt.Errorf("PF %s: %w", pf.Netdev, err)
	}
	ports, err := k.Ports()
	if err != nil {
		return PF{}, err
	}
	var own *Port
	for i := range ports {
		if ports[i].Netdev == pf.Netdev && ports[i].Flavour == FlavourPhysical {
			own = &ports[i]
		}
	}
	switch {
	case pf.Addr != "" && hasDevlink(ports, Devlink{Bus: "pci", Device: string(pf.Addr)}):
		pf.Devlink = Devlink{Bus: "pci", Device: string(pf.Addr)}
	case own != nil:
		pf.Devlink = own.Devlink
	case pf.Addr != "":
		pf.Devlink = Devlink{Bus: "pci", Device: string(pf.Addr)}
	default:
		return PF{}, fmt.Errorf("PF %s: no devlink instance", pf.Netdev)
	}
	if pf.Addr != "" {
		pf.PfNumber = uint16(pf.Addr.Function())
	}
	pf.SwitchID, err = PhysSwitchID(f, pf.Netdev)
	if err != nil {
		return PF{}, err
	}
	return pf, nil
}

func hasDevlink(ports []Port, d Devlink) bool {
	for _, p := range ports {
		if p.Devlink == d {
			return true
		}
	}
	return false
}

// Representors maps VF index to representor netdev for one PF: first by
// devlink port (flavour pcivf on the PF's instance, pfnum, vfnum), then by
// phys_port_name pf<p>vf<n> with the PF's phys_switch_id. Missing VFs are
// absent from the map.
func Representors(k Kernel, f sysfs.FS, pf PF) (map[int]string, error) {
	return representors(k, f, pf, 0)
}

// RepresentorsOf is Representors for VFs 0..n-1: the phys_port_name scan
// of every netdev runs only when devlink does not name all of them.
func RepresentorsOf(k Kernel, f sysfs.FS, pf PF, n int) (map[int]string, error) {
	return representors(k, f, pf, n)
}

// representors is Representors; with need > 0 it skips the sysfs scan (one
// read per netdev on the host) when devlink already mapped VFs 0..need-1.
func representors(k Kernel, f sysfs.FS, pf PF, need int) (map[int]string, error) {
	reps := map[int]string{}
	ports, err := k.Ports()
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		if p.Flavour == FlavourPCIVF && p.Devlink == pf.Devlink && p.PfNumber == pf.PfNumber && p.Netdev != "" {
			reps[int(p.VfNumber)] = p.Netdev
		}
	}
	if pf.SwitchID == "" || need > 0 && missingReps(reps, need) == 0 {
		return reps, nil
	}
	names, err := f.ReadDir("/sys/class/net")
	if err != nil {
		return nil, fmt.Errorf("list netdevs: %w", err)
	}
	for _, n := range names {
		ppn, err := PhysPortName(f, n)
		if err != nil {
			continue // the netdev went away meanwhile
		}
		p, vf, ok := ParseRepName(ppn)
		if !ok || p != pf.PfNumber {
			continue
		}
		if _, ok := reps[int(vf)]; ok {
			continue
		}
		if id, _ := PhysSwitchID(f, n); id == pf.SwitchID {
			reps[int(vf)] = n
		}
	}
	return reps, nil
}

// WaitRepresentors waits, with a short bounded poll, until every VF in
// 0..n-1 has a representor.
func WaitRepresentors(ctx context.Context, k Kernel, f sysfs.FS, pf PF, n int, interval time.Duration) (map[int]string, error) {
	if interval <= 0 {
		interval = 5 * time.Millisecond
	}
	for {
		reps, err := representors(k, f, pf, n)
		if err != nil {
			return nil, err
		}
		missing := missingReps(reps, n)
		if missing == 0 {
			return reps, nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return reps, fmt.Errorf("wait for representors of %s: %d of %d missing: %w", pf.Netdev, missing, n, ctx.Err())
		case <-t.C:
		}
	}
}

// missingReps counts the VFs in 0..n-1 without a representor.
func missingReps(reps map[int]string, n int) int {
	missing := 0
	for i := 0; i < n; i++ {
		if _, ok := reps[i]; !ok {
			missing++
		}
	}
	return missing
}

// BondInfo is a bond as sysfs shows it ("cat /sys/class/net/$bond/bonding/*").
type BondInfo struct {
	Name           string   `json:"name"`
	Mode           string   `json:"mode"`
	Slaves         []string `json:"slaves"`
	ActiveSlave    string   `json:"active_slave,omitempty"`
	MIIStatus      string   `json:"mii_status"`
	Miimon         int      `json:"miimon"`
	LacpRate       string   `json:"lacp_rate,omitempty"`
	XmitHashPolicy string   `json:"xmit_hash_policy,omitempty"`
	AdSelect       string   `json:"ad_select,omitempty"` // stable | bandwidth | count (802.3ad only)
	MinLinks       int      `json:"min_links"`
	UpDelay        int      `json:"updelay"`           // ms
	DownDelay      int      `json:"downdelay"`         // ms
	Primary        string   `json:"primary,omitempty"` // the primary slave (active-backup only), "" none
	// LACP is the 802.3ad negotiation: ReadBond leaves it nil (the
	// pipeline's converged checks need none of it), ReadLACP fills it.
	LACP *LACPInfo `json:"lacp,omitempty"`
}

// LACPInfo is what an 802.3ad bond negotiated with its link partner (the
// switch): the active aggregator, how many slaves it holds, the partner's
// system MAC. A partner MAC of all zeros means no LACP partner answered (the
// switch ports are not an LACP port-channel): each slave is then an
// individual port in its own aggregator and the bond uses one of them.
type LACPInfo struct {
	Aggregator int    `json:"aggregator"`  // active aggregator ID, 0: none (no slave up, bond down)
	Ports      int    `json:"ports"`       // slaves in it (a slave with link down is not)
	PartnerMAC string `json:"partner_mac"` // "" with no active aggregator
	// SlaveAggregator is each slave's aggregator ID; 0 where the kernel
	// says N/A.
	SlaveAggregator map[string]int `json:"slave_aggregator,omitempty"`
}

// NoLACPPartner is the partner MAC of an aggregator without an LACP partner.
const NoLACPPartner = "00:00:00:00:00:00"

// ReadBond reads a bond's state from sysfs; fs.ErrNotExist when it is not a bond.
func ReadBond(f sysfs.FS, name string) (BondInfo, error) {
	b := BondInfo{Name: name}
	dir := netFile(name, "bonding")
	word := func(file string) (string, error) {
		s, err := sysfs.ReadString(f, path.Join(dir, file))
		if err != nil {
			return "", err
		}
		if i := strings.IndexByte(s, ' '); i >= 0 {
			s = s[:i] // "802.3ad 4" -> "802.3ad"
		}
		return s, nil
	}
	var err error
	if b.Mode, err = word("mode"); err != nil {
		return BondInfo{}, fmt.Errorf("read bond %s: %w", name, err)
	}
	slaves, err := sysfs.ReadString(f, path.Join(dir, "slaves"))
	if err != nil {
		return BondInfo{}, fmt.Errorf("read slaves of %s: %w", name, err)
	}
	b.Slaves = strings.Fields(slaves)
	b.ActiveSlave, _ = sysfs.ReadString(f, path.Join(dir, "active_slave"))
	b.MIIStatus, _ = sysfs.ReadString(f, path.Join(dir, "mii_status"))
	if s, err := sysfs.ReadString(f, path.Join(dir, "miimon")); err == nil {
		b.Miimon, _ = strconv.Atoi(s)
	}
	for file, v := range map[string]*int{"min_links": &b.MinLinks, "updelay": &b.UpDelay, "downdelay": &b.DownDelay} {
		if s, err := sysfs.ReadString(f, path.Join(dir, file)); err == nil {
			*v, _ = strconv.Atoi(s)
		}
	}
	if b.Mode == "active-backup" {
		// sysfs shows the primary slave: empty while none (or the recorded
		// name is not enslaved).
		b.Primary, _ = sysfs.ReadString(f, path.Join(dir, "primary"))
	}
	if b.Mode == "802.3ad" {
		b.LacpRate, _ = word("lacp_rate")
		b.AdSelect, _ = word("ad_select")
	}
	if b.Mode != "active-backup" {
		b.XmitHashPolicy, _ = word("xmit_hash_policy")
	}
	return b, nil
}

// BondOptions are the bonding options SetBondOption writes, with the
// kernel's rule for each (bond_options.c, Linux 6.1): mode needs the bond
// without slaves (ENOTEMPTY) and down (EBUSY); lacp_rate (802.3ad only,
// EACCES elsewhere) and ad_select need the bond down (EBUSY); miimon,
// xmit_hash_policy, min_links, updelay, downdelay and primary change live.
// primary (BOND_OPTFLAG_RAWVAL; active-backup, tlb and alb only, EACCES
// elsewhere) takes an interface name, kept even when it is not (yet) a
// slave, or an empty value to clear it; sysfs shows it only while that
// interface is a slave.
var BondOptions = []string{"mode", "miimon", "lacp_rate", "xmit_hash_policy", "ad_select", "min_links", "updelay", "downdelay", "primary"}

// SetBondOption sets one option of a bond through sysfs.
//
//	echo $value > /sys/class/net/$bond/bonding/$option
//
// The bond name and the option are checked (ValidIfName, BondOptions)
// before the path is built; the value must be one word, as the kernel reads
// it (a name such as "active-backup" or its number "1"); only primary takes
// an empty value (no primary). Errors wrap the
// kernel's errno (errors.Is(err, syscall.EBUSY)).
func SetBondOption(f sysfs.FS, bond, option, value string) error {
	if err := ValidIfName(bond); err != nil {
		return fmt.Errorf("set bond option %s: %w", option, err)
	}
	if !slices.Contains(BondOptions, option) {
		return fmt.Errorf("set option %q of bond %s: not one of %s", option, bond, strings.Join(BondOptions, ", "))
	}
	if value == "" && option != "primary" || strings.ContainsFunc(value, unicode.IsSpace) {
		return fmt.Errorf("set option %s of bond %s: invalid value %q: one word expected", option, bond, value)
	}
	p := netFile(bond, path.Join("bonding", option))
	if err := f.WriteFile(p, []byte(value+"\n")); err != nil {
		hint := ""
		switch {
		case errors.Is(err, syscall.ENOTEMPTY):
			hint = " (the bond has slaves: release them first)"
		case errors.Is(err, syscall.EBUSY):
			hint = " (the bond is up: take it down first)"
		case errors.Is(err, syscall.EACCES):
			hint = " (not supported in the bond's mode, or not root)"
		case errors.Is(err, fs.ErrNotExist):
			hint = " (no such bond)"
		}
		return fmt.Errorf("echo %s > %s%s: %w", value, p, hint, err)
	}
	return nil
}

// ReadBondOption reads one bonding option as the kernel keeps it, whatever
// the bond's mode ("cat /sys/class/net/$bond/bonding/$option", first word:
// "layer3+4 1" -> "layer3+4"). ReadBond leaves out the options that do not
// apply to the bond's mode; the kernel keeps them, and they apply again
// after a mode change.
func ReadBondOption(f sysfs.FS, bond, option string) (string, error) {
	if err := ValidIfName(bond); err != nil {
		return "", fmt.Errorf("read bond option %s: %w", option, err)
	}
	if !slices.Contains(BondOptions, option) {
		return "", fmt.Errorf("read option %q of bond %s: not one of %s", option, bond, strings.Join(BondOptions, ", "))
	}
	s, err := sysfs.ReadString(f, netFile(bond, path.Join("bonding", option)))
	if err != nil {
		return "", fmt.Errorf("read option %s of bond %s: %w", option, bond, err)
	}
	w, _, _ := strings.Cut(s, " ")
	return w, nil
}

// ReadLACP reads an 802.3ad bond's negotiation ("cat
// /sys/class/net/$bond/bonding/{ad_aggregator,ad_num_ports,ad_partner_mac}
// /sys/class/net/$slave/bonding_slave/ad_aggregator_id"); nil for other
// modes or when the bond does not show them.
func ReadLACP(f sysfs.FS, b BondInfo) *LACPInfo {
	if b.Mode != "802.3ad" {
		return nil
	}
	dir, slaves := netFile(b.Name, "bonding"), b.Slaves
	num := func(p string) (int, bool) {
		s, err := sysfs.ReadString(f, p)
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(s)
		return n, err == nil
	}
	var l LACPInfo
	var ok1, ok2 bool
	l.Aggregator, ok1 = num(path.Join(dir, "ad_aggregator"))
	l.Ports, ok2 = num(path.Join(dir, "ad_num_ports"))
	mac, err := sysfs.ReadString(f, path.Join(dir, "ad_partner_mac"))
	if !ok1 || !ok2 || err != nil {
		return nil
	}
	l.PartnerMAC = mac
	for _, s := range slaves {
		if id, ok := num(netFile(s, "bonding_slave/ad_aggregator_id")); ok {
			if l.SlaveAggregator == nil {
				l.SlaveAggregator = map[string]int{}
			}
			l.SlaveAggregator[s] = id
		}
	}
	return &l
}

// LAG states. "unverified" means the kernel exposes no LAG state (no mlx5
// debugfs): vflag never reports a LAG it cannot see as active.
const (
	LAGActive     = "active"
	LAGInactive   = "inactive"
	LAGUnverified = "unverified"
)

// LAGStatus is the hardware LAG as mlx5's debugfs shows it.
type LAGStatus struct {
	State       string   `json:"state"`
	Type        string   `json:"type,omitempty"`
	PortSelMode string   `json:"port_sel_mode,omitempty"`
	SharedFDB   bool     `json:"shared_fdb,omitempty"`
	Members     []string `json:"members,omitempty"`
	// Why: for "unverified", why the state cannot be read (readers fill it
	// in with ExplainUnverified).
	Why string `json:"why,omitempty"`
}

// ReadLAG reads "cat /sys/kernel/debug/mlx5/$pf0/lag/{state,type,port_sel_mode,flags,members}".
func ReadLAG(f sysfs.FS, pf0 sriov.Addr) (LAGStatus, error) {
	if pf0 == "" {
		return LAGStatus{State: LAGUnverified}, nil
	}
	dir := path.Join("/sys/kernel/debug/mlx5", string(pf0), "lag")
	state, err := sysfs.ReadString(f, path.Join(dir, "state"))
	if errors.Is(err, fs.ErrNotExist) {
		return LAGStatus{State: LAGUnverified}, nil
	}
	if err != nil {
		return LAGStatus{}, fmt.Errorf("read LAG state of %s: %w", pf0, err)
	}
	if state != "active" {
		return LAGStatus{State: LAGInactive}, nil
	}
	st := LAGStatus{State: LAGActive}
	st.Type, _ = sysfs.ReadString(f, path.Join(dir, "type"))
	st.PortSelMode, _ = sysfs.ReadString(f, path.Join(dir, "port_sel_mode"))
	if flags, err := sysfs.ReadString(f, path.Join(dir, "flags")); err == nil {
		st.SharedFDB = strings.Contains(flags, "shared_fdb:on")
	}
	if m, err := sysfs.ReadString(f, path.Join(dir, "members")); err == nil {
		st.Members = strings.Fields(m)
	}
	return st, nil
}

// WaitLAG waits until the LAG is active or unverified, with a short bounded
// poll; it returns the last status when ctx ends.
func WaitLAG(ctx context.Context, f sysfs.FS, pf0 sriov.Addr, interval time.Duration) (LAGStatus, error) {
	if interval <= 0 {
		interval = 10 * time.Millisecond
	}
	for {
		st, err := ReadLAG(f, pf0)
		if err != nil {
			return st, err
		}
		if st.State != LAGInactive {
			return st, nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, fmt.Errorf("wait for hardware LAG on %s: still %s: %w", pf0, st.State, ctx.Err())
		case <-t.C:
		}
	}
}

// SetAlias sets a link's alias, vflag's ownership mark on the links it
// creates ("ip link set $name alias $alias", through
// /sys/class/net/$name/ifalias).
func SetAlias(f sysfs.FS, name, alias string) error {
	if err := ValidIfName(name); err != nil {
		return fmt.Errorf("set alias: %w", err)
	}
	if strings.ContainsAny(alias, "\n") || len(alias) >= 256 {
		return fmt.Errorf("set alias of %s: invalid alias %q", name, alias)
	}
	if err := f.WriteFile(netFile(name, "ifalias"), []byte(alias+"\n")); err != nil {
		return fmt.Errorf("ip link set %s alias %s: %w", name, alias, err)
	}
	return nil
}
