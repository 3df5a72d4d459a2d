package eswitch

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// The mlx5 rules that decide whether a bond of two ConnectX PFs becomes
// VF-LAG, as vflag checks them before and after it builds one
// (KERNEL-FACTS §5 and §12; the simulated NIC models each, internal/sim).

// LAGMaxTotalVFs is mlx5's VF-LAG limit on the firmware's VF count: a PF
// whose firmware is configured with more than 64 VFs (mstconfig
// NUM_OF_VFS, which the PF shows as sriov_totalvfs) never enters VF-LAG,
// whatever numvfs is. lag/lag.c answers the enslave with "Can't activate
// LAG offload, PF is configured with more than 64 VFs" and leaves the LAG
// disabled; NVIDIA's own VF-LAG test (Mellanox ovs-tests, Feature #2101052)
// sets NUM_OF_VFS=65, creates 2 VFs and expects exactly that.
const LAGMaxTotalVFs = 64

// LAGDriver is the driver whose LAG rules these are.
const LAGDriver = "mlx5_core"

// FirmwareNumVFsFix is the fix for a PF whose firmware has more than 64
// VFs: NUM_OF_VFS=64 with mstconfig, then a firmware reset (mstconfig's
// settings take effect only then).
func FirmwareNumVFsFix(pci string) string {
	return fmt.Sprintf("mstconfig -d %s -y set NUM_OF_VFS=%d, %s", pci, LAGMaxTotalVFs, FirmwareReset(pci))
}

// FirmwareReset says how the firmware takes a new mstconfig setting.
func FirmwareReset(pci string) string {
	return fmt.Sprintf("then reset the firmware: mstfwreset -d %s -y reset (package mstflint; mlxfwreset with NVIDIA MFT) or reboot the host; sriov_totalvfs follows the firmware's NUM_OF_VFS", pci)
}

// TotalVFsProblem says why a switchdev group's PF cannot enter VF-LAG
// because of its firmware's VF count, or "" when it can: only mlx5 PFs
// (driver) are held to the limit.
func TotalVFsProblem(netdev, pci, driver string, total int) string {
	if driver != LAGDriver || total <= LAGMaxTotalVFs {
		return ""
	}
	return fmt.Sprintf("%s (%s) has sriov_totalvfs %d: its firmware is configured with more than %d VFs (NUM_OF_VFS), and mlx5 never activates VF-LAG on such a PF, whatever numvfs is (\"Can't activate LAG offload, PF is configured with more than %d VFs\")",
		netdev, pci, total, LAGMaxTotalVFs, LAGMaxTotalVFs)
}

// Unverified says why the hardware LAG of a group whose first PF is pf0
// reads "unverified" (mlx5's lag/ state is not in debugfs), and what to do.
type Unverified struct {
	// MLX5: pf0 is driven by mlx5_core, which shows the LAG state in
	// debugfs on kernels >= 5.19: its absence is a problem to fix (or to
	// accept in the config), never a working LAG. Elsewhere (netdevsim,
	// another driver) no LAG state exists to read.
	MLX5 bool
	Why  string
	Fix  string
}

const debugfsDir = "/sys/kernel/debug"

// ExplainUnverified reads why pf0 shows no LAG state: not an mlx5 PF,
// debugfs not mounted, or mlx5 set up no LAG state for the PF (an
// mlx5_core older than 5.19, or firmware that gives the PF no LAG
// capability).
func ExplainUnverified(f sysfs.FS, pf0 sriov.Addr) Unverified {
	if pf0 == "" {
		return Unverified{Why: "the first PF is not a PCI function (no mlx5 LAG state to read)"}
	}
	drv, err := sriov.Host{FS: f}.Driver(pf0)
	if err != nil || drv != LAGDriver {
		return Unverified{Why: fmt.Sprintf("%s is not driven by %s (driver %q): no mlx5 LAG state to read", pf0, LAGDriver, drv)}
	}
	u := Unverified{MLX5: true}
	lag := path.Join(debugfsDir, "mlx5", string(pf0), "lag")
	switch {
	case !sysfs.Exists(f, path.Join(debugfsDir, "mlx5")) && debugfsEmpty(f):
		u.Why = fmt.Sprintf("debugfs is not mounted on %s, so mlx5's LAG state (%s/state) cannot be read", debugfsDir, lag)
		u.Fix = fmt.Sprintf("mount -t debugfs none %s (at boot: the /etc/fstab line `debugfs %s debugfs defaults 0 0`)", debugfsDir, debugfsDir)
	case !sysfs.Exists(f, lag):
		u.Why = fmt.Sprintf("mlx5_core set up no LAG state for %s (%s is missing): a kernel older than 5.19, or firmware that gives the PF no LAG capability", pf0, lag)
		u.Fix = fmt.Sprintf("run a kernel >= 5.19 (or MLNX_OFED's mlx5_core), and check the firmware: mstconfig -d %s q", pf0)
		if total, err := (sriov.Host{FS: f}).TotalVFs(pf0); err == nil && total > LAGMaxTotalVFs {
			u.Why += fmt.Sprintf("; its sriov_totalvfs is %d, above the %d VF-LAG allows", total, LAGMaxTotalVFs)
			u.Fix = FirmwareNumVFsFix(string(pf0))
		}
	default:
		u.Why = fmt.Sprintf("%s/state cannot be read", lag)
		u.Fix = "run vflag as root; with kernel lockdown in confidentiality mode debugfs is closed: boot with lockdown=integrity or none"
	}
	return u
}

// debugfsEmpty: nothing is mounted on /sys/kernel/debug (the mount point
// is an empty directory, or absent). A mounted debugfs is never empty.
func debugfsEmpty(f sysfs.FS) bool {
	names, err := f.ReadDir(debugfsDir)
	return err != nil || len(names) == 0
}

// String is the reason and the fix, for a report line.
func (u Unverified) String() string {
	if u.Fix == "" {
		return u.Why
	}
	return u.Why + "; fix: " + u.Fix
}

// ReadLAGPorts reads "cat /sys/kernel/debug/mlx5/$pf0/lag/mapping": the
// 1-based NIC ports that carry VF traffic. In hash mode the file lists
// them one a line ("1\n2\n"; only the tx-enabled ports, mlx5_infer_tx_enabled);
// in queue affinity it maps each port to the port its VFs send on
// ("1:1\n2:1\n": port 2's VFs go out on port 1). The raw text is
// returned for reports. EINVAL while the LAG is not active.
func ReadLAGPorts(f sysfs.FS, pf0 sriov.Addr) (map[int]bool, string, error) {
	p := path.Join(debugfsDir, "mlx5", string(pf0), "lag", "mapping")
	b, err := f.ReadFile(p)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", p, err)
	}
	ports := map[int]bool{}
	for _, l := range strings.Fields(string(b)) {
		_, to, _ := strings.Cut(l, ":")
		if to == "" {
			to = l
		}
		n, err := strconv.Atoi(to)
		if err != nil || n < 1 {
			return nil, "", fmt.Errorf("read %s: bad line %q", p, l)
		}
		ports[n] = true
	}
	return ports, strings.Join(strings.Fields(string(b)), " "), nil
}

// IdleSlave is a PF that is an up slave of the group's bond and yet
// carries no VF traffic: mlx5 maps no VF traffic to its port.
type IdleSlave struct {
	PF   string // netdev
	Port int    // mlx5's 1-based port
	Why  string // what the bond shows about it
}

// LAGIdleSlaves lists the PFs of pfs that are up slaves of bond b while
// lag/mapping of the active LAG sends no VF traffic through their port
// (KERNEL-FACTS §12: tx_enabled follows bond_is_active_slave; in 802.3ad
// a slave outside the active aggregator is inactive). In active-backup
// the backup idles by design: none. mapping is the file's text.
func LAGIdleSlaves(k Kernel, f sysfs.FS, pfs []PF, b BondInfo, lacp *LACPInfo) (idle []IdleSlave, mapping string, err error) {
	if len(pfs) == 0 || b.Mode == "active-backup" {
		return nil, "", nil
	}
	ports, mapping, err := ReadLAGPorts(f, pfs[0].Addr)
	if err != nil {
		return nil, "", err
	}
	for _, pf := range pfs {
		port := int(pf.PfNumber) + 1
		l, err := k.Link(pf.Netdev)
		if err != nil || l.OperState != "up" || l.Master != b.Name || ports[port] {
			continue
		}
		why := "mlx5 maps no VF traffic to its port"
		switch {
		case b.Mode != "802.3ad" || lacp == nil:
		case lacp.PartnerMAC == NoLACPPartner:
			why = fmt.Sprintf("no LACP partner answers: every slave is an individual aggregator and only aggregator %d is active (802.3ad sends on the active aggregator only)", lacp.Aggregator)
		case lacp.SlaveAggregator[pf.Netdev] != lacp.Aggregator:
			why = fmt.Sprintf("it is in aggregator %d, not the bond's active aggregator %d (partner %s): the switch put it in another port-channel", lacp.SlaveAggregator[pf.Netdev], lacp.Aggregator, lacp.PartnerMAC)
		}
		idle = append(idle, IdleSlave{PF: pf.Netdev, Port: port, Why: why})
	}
	return idle, mapping, nil
}

// String is one line for a report: "ens1f1np1 (port 2): why".
func (s IdleSlave) String() string {
	return fmt.Sprintf("%s (port %d) is up but carries no VF traffic: %s", s.PF, s.Port, s.Why)
}

// LAG types (debugfs lag/type) other than the bond's VF-LAG, "switchdev".
const (
	LAGTypeSwitchdev = "switchdev"
	LAGTypeMultipath = "multipath"
	LAGTypeMPESW     = "multiport_eswitch"
)

// LAGTypeProblem says why an active LAG of type st.Type is not the VF-LAG
// the bond asked for, with the fix; "" when it is (type switchdev, or not
// shown). pf0 names the devlink instance in the fix.
func LAGTypeProblem(st LAGStatus, pf0 sriov.Addr) string {
	if st.State != LAGActive || st.Type == "" || st.Type == LAGTypeSwitchdev {
		return ""
	}
	switch st.Type {
	case LAGTypeMultipath:
		return "the NIC's LAG is a multipath LAG (lag/type multipath), not the bond's: an IPv4 route with a nexthop through each PF made mlx5 use it for multipath routing before the bond could, and mlx5 ignores the bond from then on (lag/mp.c); " +
			"fix: delete that route (ip route show, the entry with a nexthop via each PF), then `vflag down` and `vflag up`: only an eswitch mode change ends a multipath LAG"
	case LAGTypeMPESW:
		return fmt.Sprintf("the NIC runs a multiport eswitch (lag/type multiport_eswitch, devlink param esw_multiport true), not the bond's LAG: tc cannot forward to the bond there (\"can't forward to bond in mpesw mode\", lag/mpesw.c); "+
			"fix: devlink dev param set pci/%s name esw_multiport value false cmode runtime, then `vflag down` and `vflag up`", pf0)
	}
	return fmt.Sprintf("the NIC's LAG is of type %s, not the bond's switchdev VF-LAG", st.Type)
}

// HashTakenAtEnslave tells whether a bond with these slaves has an mlx5 PF
// among them: mlx5 takes the bond's xmit_hash_policy into its LAG's hash
// port selection when the PF is enslaved (lag/lag.c
// mlx5_handle_changeupper_event, on linking) and nowhere else, so a live
// write of the option reaches the kernel's bond but not the NIC until the
// PFs are enslaved again (KERNEL-FACTS §12).
func HashTakenAtEnslave(f sysfs.FS, slaves []string) bool {
	for _, s := range slaves {
		if ValidIfName(s) != nil {
			continue
		}
		if t, err := f.Readlink(netFile(s, "device/driver")); err == nil && path.Base(t) == LAGDriver {
			return true
		}
	}
	return false
}
