package doctor

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
)

type modState int

const (
	modMissing modState = iota
	modAvailable
	modLoaded
	modBuiltin
)

type modInfo struct {
	state  modState
	detail string
}

// modName is a module's name as /sys/module and modules.dep compare it.
func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// module tells whether a kernel module is loaded, built in, installed or
// missing, from /sys/module, /proc/modules and /lib/modules/<release>.
func (d *doctor) module(name string) modInfo {
	sysName := modName(name)
	if sysfs.Exists(d.env.Host, path.Join("/sys/module", sysName)) {
		if _, err := d.readHost(path.Join("/sys/module", sysName, "initstate")); err == nil {
			return modInfo{modLoaded, fmt.Sprintf("module loaded (/sys/module/%s)", sysName)}
		}
		return modInfo{modBuiltin, fmt.Sprintf("built into the kernel (/sys/module/%s)", sysName)}
	}
	rel, _ := d.readHost("/proc/sys/kernel/osrelease")
	dir := path.Join("/lib/modules", rel)
	if rel != "" {
		if b, err := d.env.Host.ReadFile(path.Join(dir, "modules.builtin")); err == nil && modListed(string(b), sysName) != "" {
			return modInfo{modBuiltin, fmt.Sprintf("built into the kernel (%s/modules.builtin)", dir)}
		}
	}
	if _, err := d.env.Host.ReadFile("/proc/modules"); notExist(err) {
		return modInfo{modMissing, fmt.Sprintf("not built into kernel %s, which has no loadable module support (/proc/modules absent)", orDash(rel))}
	}
	if rel == "" {
		return modInfo{modMissing, "not loaded, and the kernel release is unreadable (/proc/sys/kernel/osrelease)"}
	}
	b, err := d.env.Host.ReadFile(path.Join(dir, "modules.dep"))
	if err != nil {
		return modInfo{modMissing, fmt.Sprintf("not loaded, and %s/modules.dep is unreadable (%v): the kernel's modules are not installed", dir, err)}
	}
	if f := modListed(string(b), sysName); f != "" {
		return modInfo{modAvailable, fmt.Sprintf("not loaded, installed as %s/%s (modprobe %s)", dir, f, name)}
	}
	return modInfo{modMissing, fmt.Sprintf("not loaded and not in %s/modules.dep", dir)}
}

// modListed finds a module in modules.dep or modules.builtin text: the
// file ("kernel/drivers/net/bonding/bonding.ko.xz") whose base name is it.
func modListed(text, sysName string) string {
	for _, l := range strings.Split(text, "\n") {
		f, _, _ := strings.Cut(l, ":")
		f = strings.TrimSpace(f)
		base := path.Base(f)
		i := strings.Index(base, ".ko")
		if i < 0 {
			continue
		}
		if modName(base[:i]) == sysName {
			return f
		}
	}
	return ""
}

func (d *doctor) kernel(gs []*groupState) {
	if d.env.Simulated {
		d.add(AreaKernel, "kernel/version", "", Skip, "simulated NICs (--sim): the simulated mlx5 follows the 6.1 sources (internal/sim), whatever this machine runs", "")
		d.add(AreaKernel, "kernel/bonding", "", Skip, "simulated NICs (--sim): the simulated host models bonding itself", "")
	} else {
		d.checkKernelVersion(gs)
		d.checkBonding(gs)
	}
	d.checkOVSModule(gs)
}

// kernelVersion parses "6.1.0-18-amd64" into 6, 1.
func kernelVersion(rel string) (int, int, bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	minStr := parts[1]
	if i := strings.IndexFunc(minStr, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minStr = minStr[:i]
	}
	mnr, err2 := strconv.Atoi(minStr)
	return maj, mnr, err1 == nil && err2 == nil
}

func atLeast(maj, mnr, wantMaj, wantMin int) bool {
	return maj > wantMaj || maj == wantMaj && mnr >= wantMin
}

func (d *doctor) checkKernelVersion(gs []*groupState) {
	const name = "kernel/version"
	if !switchdevGroups(gs) {
		d.add(AreaKernel, name, "", Skip, "no switchdev group: no hardware LAG to depend on the kernel", "")
		return
	}
	rel, err := d.readHost("/proc/sys/kernel/osrelease")
	if err != nil {
		d.add(AreaKernel, name, "", Warn, fmt.Sprintf("/proc/sys/kernel/osrelease: %v", err), "run vflag doctor on the hypervisor with /proc mounted")
		return
	}
	maj, mnr, ok := kernelVersion(rel)
	if !ok {
		d.add(AreaKernel, name, "", Warn, fmt.Sprintf("cannot parse the kernel release %q", rel), "run a Linux kernel >= 6.1")
		return
	}
	ofed := ""
	if v, err := d.readHost("/sys/module/mlx5_core/version"); err == nil && v != "" {
		ofed = fmt.Sprintf("; mlx5_core reports version %s (an out-of-tree driver such as MLNX_OFED: its VF-LAG features follow that driver, not the kernel)", v)
	}
	const facts = "switchdev VF-LAG with shared FDB (lag/flags shared_fdb:on), hash port selection for balance-xor and 802.3ad where the NIC has the port_select_flow_table capability " +
		"(else queue_affinity: each VF on its own PF's port; lag/port_sel_mode shows which once the LAG is active), the LAG state in debugfs (lag/state), RoCE state alike on both ports (as read in the 6.1 and 6.12 sources; docs/real-host.md says what the host needs)"
	switch {
	case atLeast(maj, mnr, 6, 1):
		extra := ""
		if atLeast(maj, mnr, 6, 7) {
			extra = "; from about 6.7 the uplink devlink port sits on an auxiliary instance (unconfirmed; vflag maps ports by PCI instance and netdev)"
		}
		d.add(AreaKernel, name, "", Pass, fmt.Sprintf("kernel %s: %s%s%s", rel, facts, extra, ofed), "")
	case atLeast(maj, mnr, 5, 19):
		d.add(AreaKernel, name, "", Warn, fmt.Sprintf("kernel %s: it has the mlx5 LAG state in debugfs (since 5.19), but vflag's kernel facts come from 6.1 and 6.12; "+
			"shared FDB and hash port selection are unconfirmed here%s", rel, ofed),
			"run a kernel >= 6.1 (Debian bookworm's linux-image-amd64 is 6.1), or MLNX_OFED's mlx5_core")
	default:
		d.add(AreaKernel, name, "", Warn, fmt.Sprintf("kernel %s: older than 5.19, so mlx5 shows no LAG state in debugfs (vflag reports the LAG \"unverified\": up ends degraded unless the config sets accept_unverified_lag); "+
			"shared FDB and hash port selection are unconfirmed%s", rel, ofed),
			"run a kernel >= 6.1 (Debian bookworm's linux-image-amd64 is 6.1), or MLNX_OFED's mlx5_core")
	}
}

// maxBonds finds the bonding module's max_bonds: the kernel command line
// (bonding.max_bonds=N) over modprobe.d's "options bonding max_bonds=N";
// 1 (the module's default) when neither sets it.
func (d *doctor) maxBonds() (int, string) {
	cmdline, _ := d.readHost("/proc/cmdline")
	if v, ok := cmdlineParams(cmdline)["bonding.max_bonds"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n, "bonding.max_bonds=" + v + " on /proc/cmdline"
		}
	}
	n, where := 1, "the module's default (no options bonding max_bonds= in modprobe.d)"
	for _, dir := range []string{"/lib/modprobe.d", "/usr/lib/modprobe.d", "/run/modprobe.d", "/etc/modprobe.d"} {
		files, err := d.env.Host.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, f := range files {
			if !strings.HasSuffix(f, ".conf") {
				continue
			}
			b, err := d.env.Host.ReadFile(path.Join(dir, f))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				w := strings.Fields(l)
				if len(w) < 3 || w[0] != "options" || modName(w[1]) != "bonding" {
					continue
				}
				for _, o := range w[2:] {
					if v, ok := strings.CutPrefix(o, "max_bonds="); ok {
						if x, err := strconv.Atoi(v); err == nil {
							n, where = x, fmt.Sprintf("options bonding max_bonds=%d in %s", x, path.Join(dir, f))
						}
					}
				}
			}
		}
	}
	return n, where
}

const maxBondsFix = "ip link del bond0 (if it is the module's empty bond0); echo 'options bonding max_bonds=0' > /etc/modprobe.d/vflag-bonding.conf so loading bonding creates no bond0"

func (d *doctor) checkBonding(gs []*groupState) {
	const name = "kernel/bonding"
	if !switchdevGroups(gs) {
		d.add(AreaKernel, name, "", Skip, "no switchdev group: no bond", "")
		return
	}
	m := d.module("bonding")
	if m.state == modMissing {
		d.add(AreaKernel, name, "", Fail, "bonding: "+m.detail,
			"install the running kernel's modules (Debian: apt-get install linux-image-$(uname -r); Ubuntu: linux-modules-extra-$(uname -r)) or boot a kernel with CONFIG_BONDING; then modprobe bonding")
		return
	}
	usesBond0 := false
	for _, g := range gs {
		if g.Switchdev && (g.BondName == "bond0" || g.BondName == "" && g.discovered) {
			usesBond0 = true
		}
	}
	n, where := d.maxBonds()
	detail := fmt.Sprintf("bonding: %s; max_bonds %d (%s)", m.detail, n, where)
	if l, err := d.env.Kernel.Link("bond0"); err == nil && l.Kind == "bond" && !strings.HasPrefix(l.Alias, "vflag:") {
		slaves := "no slaves"
		if b, err := eswitch.ReadBond(d.env.Sys, "bond0"); err == nil && len(b.Slaves) > 0 {
			slaves = "slaves " + strings.Join(b.Slaves, " ")
		}
		if slaves == "no slaves" {
			why := "it would clash with a group's bond named bond0"
			if usesBond0 {
				why = "the group's bond0 clashes with it (see conflicts/bond-name)"
			}
			origin := "the bonding module made it at load (max_bonds defaults to 1)"
			fix := maxBondsFix
			if n == 0 {
				origin = "made before max_bonds=0 was set, or by another tool"
				fix = "ip link del bond0 (if nothing uses it)"
			}
			d.add(AreaKernel, name, "", Warn, fmt.Sprintf("%s; bond0 exists with no slaves and no vflag mark: %s; %s", detail, origin, why), fix)
			return
		}
		detail += fmt.Sprintf("; bond0 exists (%s, not vflag's: see conflicts)", slaves)
	} else if n != 0 && usesBond0 {
		d.add(AreaKernel, name, "", Warn, fmt.Sprintf("%s; no bond0 now, but loading bonding (at boot, or when vflag up creates its bond) makes an empty bond0 that clashes with the group's bond0", detail), maxBondsFix)
		return
	}
	d.add(AreaKernel, name, "", Pass, detail, "")
}

func (d *doctor) checkOVSModule(gs []*groupState) {
	const name = "kernel/openvswitch"
	need := len(gs) == 0
	for _, g := range gs {
		if g.Switchdev && g.DatapathType != "netdev" {
			need = true
		}
	}
	if !need {
		d.add(AreaKernel, name, "", Skip, "no switchdev group with a kernel datapath (datapath_type system)", "")
		return
	}
	m := d.module("openvswitch")
	switch m.state {
	case modLoaded, modBuiltin:
		d.add(AreaKernel, name, "", Pass, "openvswitch: "+m.detail, "")
	case modAvailable:
		d.add(AreaKernel, name, "", Warn, "openvswitch: "+m.detail+"; Open vSwitch's start script loads it, so ovs-vswitchd is not running with a kernel datapath",
			"systemctl restart openvswitch-switch (it loads the module), or modprobe openvswitch")
	default:
		d.add(AreaKernel, name, "", Fail, "openvswitch: "+m.detail+": bridges of datapath_type system (the only ones the NIC offloads) cannot exist",
			"install the running kernel's modules or boot a kernel with CONFIG_OPENVSWITCH (Debian's linux-image-amd64 has it); then modprobe openvswitch")
	}
}
