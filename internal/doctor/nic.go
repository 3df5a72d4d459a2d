package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// port is one PF the group names, as far as the host shows it.
type port struct {
	Ref    string     // as the config names it
	Netdev string     // "" when the PCI function has no netdev
	Addr   sriov.Addr // "" when not a PCI function
	Dev    sriov.Device
	Driver string // the PF's driver, "" unbound
	What   string // for a port that is not a PCI function: what it is
	Err    error  // the port does not exist or its name is invalid

	PF    eswitch.PF // eswitch.ResolvePF's view (devlink instance, switch id)
	PFErr error

	HasSRIOV bool // sriov_numvfs (netdevsim: without sriov_totalvfs)
	HasTotal bool // sriov_totalvfs
	Total    int
	TotalErr error
	NumVFs   int
	NumErr   error
}

func (p *port) name() string {
	if p.Netdev != "" {
		return p.Netdev
	}
	return p.Ref
}

// where is "ens1f0np0 (0000:61:00.0, mlx5_core)".
func (p *port) where() string {
	var in []string
	if p.Addr != "" && p.Netdev != "" {
		in = append(in, string(p.Addr))
	} else if p.Dev != "" && p.Addr == "" {
		in = append(in, string(p.Dev))
	}
	if p.Driver != "" {
		in = append(in, p.Driver)
	}
	if len(in) == 0 {
		return p.name()
	}
	return fmt.Sprintf("%s (%s)", p.name(), strings.Join(in, ", "))
}

// groupState is a group with its ports resolved.
type groupState struct {
	Group
	Ports []*port
}

var pciAddrRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`) })

func (d *doctor) resolveGroup(g Group) *groupState {
	gs := &groupState{Group: g}
	for _, ref := range g.PFs {
		gs.Ports = append(gs.Ports, d.resolvePort(ref))
	}
	return gs
}

// resolvePort finds what the host shows of one PF reference. Every name is
// validated before it reaches a path.
func (d *doctor) resolvePort(ref string) *port {
	p := &port{Ref: ref}
	if strings.Contains(ref, ":") {
		a, err := sriov.ParseAddr(ref)
		if err != nil {
			p.Err = err
			return p
		}
		if !d.pci.Exists(a) {
			p.Err = fmt.Errorf("no PCI device %s", a)
			return p
		}
		p.Addr = a
		names, _ := d.pci.Netdevs(a)
		for _, n := range names {
			if eswitch.ValidIfName(n) != nil {
				continue
			}
			if ppn, _ := eswitch.PhysPortName(d.env.Sys, n); !eswitch.IsRepresentorName(ppn) {
				p.Netdev = n
				break
			}
		}
	} else {
		if err := eswitch.ValidIfName(ref); err != nil {
			p.Err = err
			return p
		}
		if !sysfs.Exists(d.env.Sys, path.Join("/sys/class/net", ref)) {
			p.Err = fmt.Errorf("no network interface %s", ref)
			return p
		}
		p.Netdev = ref
		if a, ok, err := d.pci.AddrOfNetdev(ref); err == nil && ok {
			p.Addr = a
		}
	}
	if p.Addr != "" {
		p.Dev = sriov.PCIDevice(p.Addr)
		p.Driver, _ = d.pci.Driver(p.Addr)
	} else {
		p.What = d.describeNetdev(p.Netdev)
		if dev, err := d.pci.DeviceOfNetdev(p.Netdev); err == nil {
			p.Dev = dev
			if t, err := d.env.Sys.Readlink(path.Join("/sys/class/net", p.Netdev, "device", "driver")); err == nil {
				p.Driver = path.Base(t)
			}
		}
	}
	if p.Dev != "" {
		p.HasSRIOV = d.pci.HasSRIOV(p.Dev)
		p.HasTotal = d.pci.HasPCIVFs(p.Dev)
		if p.HasTotal {
			p.Total, p.TotalErr = d.pci.TotalVFs(p.Dev)
		}
		if p.HasSRIOV {
			p.NumVFs, p.NumErr = d.pci.NumVFs(p.Dev)
		}
	}
	p.PF, p.PFErr = eswitch.ResolvePF(d.env.Kernel, d.env.Sys, ref)
	return p
}

// describeNetdev says what a netdev without a PCI function is: "driver
// virtio_net, device virtio2 on PCI 0000:00:03.0" or "a virtual interface".
func (d *doctor) describeNetdev(name string) string {
	if name == "" {
		return ""
	}
	target, err := d.env.Sys.Readlink(path.Join("/sys/class/net", name))
	if err == nil && strings.Contains(target, "/devices/virtual/") {
		return "virtual, no device"
	}
	var parts []string
	if t, err := d.env.Sys.Readlink(path.Join("/sys/class/net", name, "device", "driver")); err == nil {
		parts = append(parts, "driver "+path.Base(t))
	}
	dev := ""
	if t, err := d.env.Sys.Readlink(path.Join("/sys/class/net", name, "device")); err == nil {
		dev = "device " + path.Base(t)
	}
	parent := ""
	for _, c := range strings.Split(target, "/") {
		if pciAddrRE().MatchString(c) {
			parent = c
		}
	}
	switch {
	case dev != "" && parent != "":
		parts = append(parts, dev+" on PCI "+parent)
	case dev != "":
		parts = append(parts, dev)
	case parent != "":
		parts = append(parts, "on PCI "+parent)
	}
	if len(parts) == 0 {
		return "no device"
	}
	return strings.Join(parts, ", ")
}

// discover finds every SR-IOV capable NIC (a PCI function with
// sriov_totalvfs behind a netdev that is not a representor) and makes one
// group per PCI slot.
func (d *doctor) discover() []Group {
	names, err := d.env.Sys.ReadDir("/sys/class/net")
	if err != nil {
		d.add(AreaNIC, "nic/discovery", "", Fail, fmt.Sprintf("cannot list /sys/class/net: %v", err),
			"run vflag doctor as root on the hypervisor, with /sys mounted")
		return nil
	}
	bySlot := map[string][]string{}
	addrOf := map[string]sriov.Addr{} // netdev -> PCI address
	seen := map[sriov.Addr]bool{}
	var others []string
	for _, n := range names {
		if eswitch.ValidIfName(n) != nil || n == "lo" {
			continue
		}
		a, ok, err := d.pci.AddrOfNetdev(n)
		if err != nil {
			continue
		}
		if !ok {
			others = append(others, fmt.Sprintf("%s (%s)", n, d.describeNetdev(n)))
			continue
		}
		if ppn, _ := eswitch.PhysPortName(d.env.Sys, n); eswitch.IsRepresentorName(ppn) {
			continue // a VF representor of a PF found on its own
		}
		if !d.pci.IsPF(a) {
			drv, _ := d.pci.Driver(a)
			if _, err := d.env.Sys.Readlink(path.Join(a.Dir(), "physfn")); err == nil {
				continue // a VF
			}
			others = append(others, fmt.Sprintf("%s (PCI %s, driver %s: no sriov_totalvfs)", n, a, orDash(drv)))
			continue
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		addrOf[n] = a
		bySlot[a.Slot()] = append(bySlot[a.Slot()], n)
	}
	if len(bySlot) == 0 {
		d.add(AreaNIC, "nic/discovery", "", Fail,
			fmt.Sprintf("no SR-IOV capable NIC: no network interface is a PCI function with sriov_totalvfs (looked at %s)", orNone(others)),
			"vflag needs a dual-port NVIDIA/Mellanox ConnectX NIC (mlx5_core) with SR-IOV enabled: in the BIOS/UEFI (SR-IOV support) and in the NIC firmware "+
				"(mstconfig -d <pci> -y set SRIOV_EN=1 NUM_OF_VFS=8, then reboot); in a virtual machine pass both PFs through (a virtio NIC has no SR-IOV). "+
				"With a config, `vflag doctor --config FILE` checks the ports it names")
		return nil
	}
	slots := make([]string, 0, len(bySlot))
	for s := range bySlot {
		slots = append(slots, s)
	}
	sort.Strings(slots)
	var groups []Group
	var found []string
	for _, s := range slots {
		ports := bySlot[s]
		sort.Slice(ports, func(i, j int) bool { return addrOf[ports[i]] < addrOf[ports[j]] })
		groups = append(groups, Group{Name: s, PFs: ports, Switchdev: true, discovered: true})
		found = append(found, fmt.Sprintf("%s (%s)", s, strings.Join(ports, ", ")))
	}
	d.add(AreaNIC, "nic/discovery", "", Pass, fmt.Sprintf("no config: checking every SR-IOV capable NIC found: %s", strings.Join(found, "; ")), "")
	return groups
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nic runs the NIC checks of one group.
func (d *doctor) nic(g *groupState) {
	if g.Switchdev {
		d.checkSameNIC(g)
	}
	for _, p := range g.Ports {
		d.checkDriver(g, p)
	}
	if !g.Switchdev {
		return
	}
	for _, p := range g.Ports {
		d.checkEswitch(g, p)
		if g.Tunnel != "" {
			d.checkEncap(g, p)
		}
	}
	d.checkDebugfs(g)
	d.checkRoCE(g)
}

func (d *doctor) checkSameNIC(g *groupState) {
	const name = "nic/same-nic"
	if len(g.Ports) != 2 {
		var list []string
		for _, p := range g.Ports {
			list = append(list, p.where())
		}
		if g.discovered {
			d.add(AreaNIC, name, "", Fail, fmt.Sprintf("single-port NIC %s: %s; VF-LAG bonds the two ports of one dual-port NIC", g.Name, strings.Join(list, ", ")),
				"use a dual-port ConnectX NIC (both ports as functions .0 and .1 of one PCI slot); a single port can serve a legacy group (eswitch: legacy)")
			return
		}
		d.add(AreaNIC, name, "", Fail, fmt.Sprintf("the group names %s: %s; VF-LAG bonds the two ports of one dual-port NIC", plural(len(g.Ports), "port", "ports"), orNone(list)),
			"name exactly the two ports of one NIC in groups[].pfs (functions .0 and .1 of one PCI slot: `ls -l /sys/class/net/*/device` shows each port's PCI address)")
		return
	}
	a, b := g.Ports[0], g.Ports[1]
	if a.Err != nil || b.Err != nil {
		d.add(AreaNIC, name, "", Skip, "a port does not exist (see platform/sriov)", "")
		return
	}
	if a.name() == b.name() {
		d.add(AreaNIC, name, "", Fail, fmt.Sprintf("both entries name %s", a.name()), "name the two different ports of one NIC in groups[].pfs")
		return
	}
	same := a.Addr != "" && b.Addr != "" && a.Addr.Slot() == b.Addr.Slot() ||
		a.Addr == "" && b.Addr == "" && a.PFErr == nil && b.PFErr == nil && a.PF.Devlink == b.PF.Devlink
	sw := ""
	if a.PF.SwitchID != "" && b.PF.SwitchID != "" {
		if a.PF.SwitchID != b.PF.SwitchID {
			same = false
		}
		sw = ", phys_switch_id " + a.PF.SwitchID
		if a.PF.SwitchID != b.PF.SwitchID {
			sw = fmt.Sprintf(", phys_switch_id %s and %s", a.PF.SwitchID, b.PF.SwitchID)
		}
	}
	if !same {
		d.add(AreaNIC, name, "", Fail, fmt.Sprintf("%s and %s are not the two ports of one NIC (PCI slot or devlink instance differ%s)", a.where(), b.where(), sw),
			"name the two ports of one NIC in groups[].pfs: functions .0 and .1 of one PCI slot (`ls -l /sys/class/net/*/device` shows each port's PCI address)")
		return
	}
	slot := ""
	if a.Addr != "" {
		slot = "PCI slot " + a.Addr.Slot()
	} else {
		slot = "devlink instance " + a.PF.Devlink.String()
	}
	d.add(AreaNIC, name, "", Pass, fmt.Sprintf("%s and %s: one %s%s", a.where(), b.where(), slot, sw), "")
}

func (d *doctor) checkDriver(g *groupState, p *port) {
	name := "nic/driver"
	switch {
	case p.Err != nil:
		return // platform/sriov says it
	case p.Driver == "" && p.Addr != "":
		d.add(AreaNIC, name, p.name(), Fail, fmt.Sprintf("%s: no driver bound to the PF", p.Addr),
			fmt.Sprintf("load the ConnectX driver: modprobe mlx5_core (and echo mlx5_core > /etc/modules-load.d/mlx5.conf); check `readlink /sys/bus/pci/devices/%s/driver`", p.Addr))
	case p.Driver == "mlx5_core":
		d.add(AreaNIC, name, p.name(), Pass, p.where(), "")
	case !g.Switchdev:
		d.add(AreaNIC, name, p.name(), Pass, p.where()+" (legacy SR-IOV group: any PF driver)", "")
	default:
		what := p.Driver
		if what == "" {
			what = "no driver"
		}
		detail := fmt.Sprintf("%s: %s, not mlx5_core; vflag's VF-LAG is built for ConnectX (mlx5) NICs", p.where(), what)
		if p.What != "" {
			detail = fmt.Sprintf("%s (%s) is not an mlx5_core PF; vflag's VF-LAG is built for ConnectX (mlx5) NICs", p.name(), p.What)
		}
		d.add(AreaNIC, name, p.name(), Warn, detail,
			"use the ports of a ConnectX-5 or later NIC (driver mlx5_core) in groups[].pfs; other drivers (netdevsim, igb) serve vflag's tests only")
	}
}

func (d *doctor) checkEswitch(g *groupState, p *port) {
	name := "nic/eswitch"
	if p.Err != nil {
		return
	}
	fwFix := fmt.Sprintf("the PF must manage its eswitch, with SR-IOV on in firmware: mstconfig -d %s -y set SRIOV_EN=1 NUM_OF_VFS=%d, then reboot", orPCI(p), vfsWanted(g))
	if p.PFErr != nil {
		fix := "mlx5_core registers one devlink instance per PF: load it (modprobe mlx5_core) on a kernel with devlink, then `devlink dev show` lists pci/<pf>; " +
			"a NIC without devlink (virtio, most 1G NICs) cannot run an eswitch in switchdev mode"
		d.add(AreaNIC, name, p.name(), Fail, fmt.Sprintf("%s: %v", p.where(), p.PFErr), fix)
		return
	}
	mode, err := d.env.Kernel.EswitchMode(p.PF.Devlink)
	switch {
	case err == nil:
		d.add(AreaNIC, name, p.name(), Pass, fmt.Sprintf("devlink dev eswitch show %s: mode %s", p.PF.Devlink, mode), "")
	case errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, eswitch.ErrNotSupported):
		d.add(AreaNIC, name, p.name(), Fail, fmt.Sprintf("devlink dev eswitch show %s: not supported (%v): the PF is not an eswitch manager", p.PF.Devlink, err), fwFix)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV):
		d.add(AreaNIC, name, p.name(), Fail, fmt.Sprintf("devlink dev eswitch show %s: no such devlink instance (%v)", p.PF.Devlink, err),
			fmt.Sprintf("load mlx5_core (modprobe mlx5_core) and check `devlink dev show` lists %s; a NIC without devlink cannot run switchdev", p.PF.Devlink))
	default:
		d.add(AreaNIC, name, p.name(), Fail, fmt.Sprintf("devlink dev eswitch show %s: %v", p.PF.Devlink, err),
			fmt.Sprintf("make `devlink dev eswitch show %s` answer: mlx5_core loaded, iproute2's devlink installed, running as root", p.PF.Devlink))
	}
}

// checkEncap: a tunnel group's PFs need the eswitch's encap mode basic
// (mlx5 offloads tunnel encap and decap rules only then, its default where
// the FDB has reformat and decap). up sets it before switchdev; in
// switchdev mlx5 refuses the change while a flow is offloaded. A driver
// that reports no encap mode (netdevsim) has nothing to check.
func (d *doctor) checkEncap(g *groupState, p *port) {
	const name = "nic/encap-mode"
	if p.Err != nil || p.PFErr != nil {
		return // platform/sriov and nic/eswitch say it
	}
	em, ok := d.env.Kernel.(eswitch.EncapModer)
	if !ok {
		d.add(AreaNIC, name, p.name(), Skip, "the kernel interface reads no encap mode", "")
		return
	}
	dl := p.PF.Devlink
	mode, err := em.EncapMode(dl)
	switch {
	case errors.Is(err, eswitch.ErrNotSupported) || errors.Is(err, syscall.EOPNOTSUPP):
		d.add(AreaNIC, name, p.name(), Skip, fmt.Sprintf("devlink dev eswitch show %s reports no encap-mode (driver %s): nothing to check", dl, orDash(p.Driver)), "")
	case err != nil:
		d.add(AreaNIC, name, p.name(), Fail, fmt.Sprintf("devlink dev eswitch show %s: %v", dl, err),
			fmt.Sprintf("make `devlink dev eswitch show %s` answer: mlx5_core loaded, iproute2's devlink installed, running as root", dl))
	case mode == eswitch.EncapBasic:
		d.add(AreaNIC, name, p.name(), Pass, fmt.Sprintf("devlink dev eswitch show %s: encap-mode basic (the %s tunnel's rules can be offloaded)", dl, g.Tunnel), "")
	default:
		esw, _ := d.env.Kernel.EswitchMode(dl)
		if esw == eswitch.ModeSwitchdev {
			d.add(AreaNIC, name, p.name(), Warn, fmt.Sprintf("devlink dev eswitch show %s: encap-mode %s in switchdev: mlx5 offloads no %s rule, and refuses the change while a flow is offloaded", dl, mode, g.Tunnel),
				fmt.Sprintf("vflag down, then vflag up (it sets encap-mode basic before switchdev); or devlink dev eswitch set %s encap-mode basic while no flow is offloaded", dl))
			return
		}
		d.add(AreaNIC, name, p.name(), Pass, fmt.Sprintf("devlink dev eswitch show %s: encap-mode %s in %s mode: vflag up sets basic before switchdev", dl, mode, orDash(esw)), "")
	}
}

func orPCI(p *port) string {
	if p.Addr != "" {
		return string(p.Addr)
	}
	return "<pci>"
}

// vfsWanted is the VF count a firmware fix should ask for.
func vfsWanted(g *groupState) int {
	if g.NumVFs > 0 {
		return g.NumVFs
	}
	return 8
}

// firstPCI is the group's first port with a PCI address.
func firstPCI(g *groupState) *port {
	for _, p := range g.Ports {
		if p.Err == nil && p.Addr != "" {
			return p
		}
	}
	return nil
}

func (d *doctor) lagState(a sriov.Addr) (string, error) {
	return d.readSys(path.Join("/sys/kernel/debug/mlx5", string(a), "lag", "state"))
}

func (d *doctor) checkDebugfs(g *groupState) {
	const name = "nic/debugfs"
	p := firstPCI(g)
	if p == nil {
		d.add(AreaNIC, name, "", Skip, "no PF with a PCI address (see platform/sriov)", "")
		return
	}
	// On an mlx5 PF of a switchdev group, a LAG state vflag cannot read is
	// no working LAG: up ends degraded and validate fails, unless the
	// config accepts it (accept_unverified_lag).
	sev, then := Warn, ": vflag reports the LAG \"unverified\", never active"
	if g.Switchdev && p.Driver == eswitch.LAGDriver {
		if g.AcceptUnverifiedLAG {
			then += " (accepted by accept_unverified_lag)"
		} else {
			sev, then = Fail, ": up ends degraded and validate fails the lag check until the LAG state can be read (a host without debugfs may set accept_unverified_lag: true)"
		}
	}
	dir := path.Join("/sys/kernel/debug/mlx5", string(p.Addr))
	if sysfs.Exists(d.env.Sys, dir) {
		state, err := d.lagState(p.Addr)
		switch {
		case err == nil:
			d.add(AreaNIC, name, "", Pass, fmt.Sprintf("%s/lag/state reads %q: the hardware LAG can be verified", dir, state), "")
		case errors.Is(err, fs.ErrNotExist):
			u := eswitch.ExplainUnverified(d.env.Sys, p.Addr)
			d.add(AreaNIC, name, "", sev, fmt.Sprintf("%s exists but has no lag/state: %s%s", dir, u.Why, then), u.Fix)
		default:
			d.add(AreaNIC, name, "", Warn, fmt.Sprintf("%s/lag/state: %v: the LAG state is unverifiable", dir, err),
				"run vflag as root; with kernel lockdown in confidentiality mode debugfs is closed: boot with lockdown=integrity or none")
		}
		return
	}
	mounts, _ := d.readHost("/proc/mounts")
	mounted := false
	for _, l := range strings.Split(mounts, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[1] == "/sys/kernel/debug" && f[2] == "debugfs" {
			mounted = true
		}
	}
	if !mounted || d.env.Simulated {
		u := eswitch.ExplainUnverified(d.env.Sys, p.Addr)
		if !mounted || strings.HasPrefix(u.Why, "debugfs is not mounted") {
			d.add(AreaNIC, name, "", sev, "debugfs is not mounted on /sys/kernel/debug (/proc/mounts): the hardware LAG state is unverifiable"+then,
				"mount -t debugfs none /sys/kernel/debug; at boot: add `debugfs /sys/kernel/debug debugfs defaults 0 0` to /etc/fstab")
			return
		}
	}
	d.add(AreaNIC, name, "", sev, fmt.Sprintf("debugfs is mounted but has no %s: the PF is not driven by an mlx5_core with LAG debugfs, so the LAG state is unverifiable%s", dir, then),
		"use the ConnectX PFs (driver mlx5_core) on a kernel >= 5.19, or MLNX_OFED's mlx5_core")
}

// roce is one port's RoCE state and where it was read.
type roce struct {
	on, known bool
	from      string
}

func (d *doctor) roceOf(p *port) roce {
	if !d.env.Simulated && d.tool("devlink") {
		out, err := d.output("devlink", "-j", "dev", "param", "show", "pci/"+string(p.Addr), "name", "enable_roce")
		if err == nil {
			if v, ok := parseDevlinkBoolParam(out, "enable_roce"); ok {
				return roce{on: v, known: true, from: fmt.Sprintf("devlink param enable_roce %t", v)}
			}
		}
	}
	devs, err := d.env.Sys.ReadDir(path.Join(p.Addr.Dir(), "infiniband"))
	if err == nil && len(devs) > 0 {
		return roce{on: true, known: true, from: "RDMA device " + strings.Join(devs, ", ")}
	}
	return roce{from: "no RDMA device"}
}

// parseDevlinkBoolParam reads `devlink -j dev param show DEV name NAME`:
// {"param":{"pci/...":[{"name":"enable_roce","values":[{"cmode":"driverinit","value":true}]}]}}.
func parseDevlinkBoolParam(out, name string) (bool, bool) {
	var doc struct {
		Param map[string][]struct {
			Name   string `json:"name"`
			Values []struct {
				Cmode string `json:"cmode"`
				Value any    `json:"value"`
			} `json:"values"`
		} `json:"param"`
	}
	if json.Unmarshal([]byte(out), &doc) != nil {
		return false, false
	}
	// The first device in name order: one answer, whatever the map's order,
	// should devlink list more than the one asked for.
	devs := make([]string, 0, len(doc.Param))
	for d := range doc.Param {
		devs = append(devs, d)
	}
	sort.Strings(devs)
	for _, d := range devs {
		for _, p := range doc.Param[d] {
			if p.Name != name {
				continue
			}
			for _, v := range p.Values {
				switch x := v.Value.(type) {
				case bool:
					return x, true
				case string:
					return x == "true", x == "true" || x == "false"
				}
			}
		}
	}
	return false, false
}

func (d *doctor) checkRoCE(g *groupState) {
	const name = "nic/roce"
	if len(g.Ports) != 2 || g.Ports[0].Err != nil || g.Ports[1].Err != nil || g.Ports[0].Addr == "" || g.Ports[1].Addr == "" {
		d.add(AreaNIC, name, "", Skip, "needs two PCI ports (see nic/same-nic, platform/sriov)", "")
		return
	}
	if st, err := d.lagState(g.Ports[0].Addr); err == nil && st == "active" {
		d.add(AreaNIC, name, "", Pass, "the hardware LAG is active: the kernel found both ports alike (RoCE included)", "")
		return
	}
	a, b := d.roceOf(g.Ports[0]), d.roceOf(g.Ports[1])
	detail := fmt.Sprintf("%s: %s; %s: %s", g.Ports[0].name(), a.from, g.Ports[1].name(), b.from)
	switch {
	case a.on == b.on && !a.known && !b.known:
		d.add(AreaNIC, name, "", Pass, detail+" (mlx5_ib not loaded, or RoCE off on both): alike", "")
	case a.on == b.on:
		d.add(AreaNIC, name, "", Pass, detail+": alike", "")
	default:
		off := g.Ports[1]
		if !a.on {
			off = g.Ports[0]
		}
		d.add(AreaNIC, name, "", Fail, detail+": RoCE differs between the ports, and the kernel refuses the LAG unless both have the same RoCE state (kernel 51ef9305b8f4)",
			fmt.Sprintf("enable RoCE on %s too: devlink dev param set pci/%s name enable_roce value true cmode driverinit && devlink dev reload pci/%s "+
				"(and load mlx5_ib); or disable it on both ports", off.name(), off.Addr, off.Addr))
	}
}
