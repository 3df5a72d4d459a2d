package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// Hint is what `vflag plan` and `vflag up` print when their preflight fails
// on the host rather than on the config.
const Hint = "run `vflag doctor` to see what this host lacks and how to fix it"

// Defaults used for discovered NICs (no config), as vflag's config has them.
const (
	DefaultOVSDB   = "unix:/var/run/openvswitch/db.sock"
	DefaultLibvirt = "qemu:///system"
)

// Status is a check's outcome.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail" // the host is not ready: Fix says what to change
	Warn Status = "warn" // ready, but something will bite (Fix says what to change)
	Skip Status = "skip" // not applicable or not checkable here (Detail says why)
)

// Areas, in report order.
const (
	AreaConfig    = "config"
	AreaPlatform  = "platform"
	AreaFirmware  = "firmware"
	AreaNIC       = "nic"
	AreaKernel    = "kernel"
	AreaDaemons   = "daemons"
	AreaConflicts = "conflicts"
)

// Areas lists the areas in report order.
var Areas = []string{AreaConfig, AreaPlatform, AreaFirmware, AreaNIC, AreaKernel, AreaDaemons, AreaConflicts}

// Check is one prerequisite's verdict. Name is "<area>/<check>", followed
// by the port, NIC or endpoint it is about when there are several
// ("nic/eswitch ens1f0np0").
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
	Area   string `json:"area"`
	Group  string `json:"group,omitempty"` // the config group (or discovered NIC) it belongs to; "" host-wide
}

// Report is every check and the verdict: ready when no check failed
// (warnings allowed).
type Report struct {
	Checks []Check `json:"checks"`
	Ready  bool    `json:"ready"`
}

// Count returns how many checks have status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

// Find returns the first check whose name is name, and whether there is one.
func (r *Report) Find(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// Target is what to check: the config's groups, or (no groups) every
// SR-IOV capable NIC found under /sys/class/net.
type Target struct {
	Groups []Group
	// ConfigError is the reason the config could not be used (it exists
	// but does not parse or validate); doctor then reports it and
	// discovers the NICs.
	ConfigError error
	// StateDir is vflag's state directory: a VF count its journal records
	// (sriov.numvfs entries) was set by vflag, not by another tool. "" none.
	StateDir string
}

// Group is one LAG group of the config (or one discovered NIC).
type Group struct {
	Name         string
	PFs          []string // netdev names or PCI addresses
	NumVFs       int      // per PF; 0: not asked (discovery)
	Switchdev    bool     // VF-LAG (bond, OVS); false: legacy SR-IOV only
	BondName     string   // "" unknown (discovery)
	BondMode     string   // active-backup, balance-xor, 802.3ad; "" unknown
	DatapathType string   // the bridge's datapath_type: "", "system" or "netdev"
	HWOffload    bool     // the bridge wants hw-offload: the bond's shared tc block is checked
	Tunnel       string   // the group's tunnel type (vxlan, geneve); "" none: the eswitch's encap mode is checked
	// AcceptUnverifiedLAG: the config's accept_unverified_lag (a LAG state
	// that cannot be read is a warning, not a failure).
	AcceptUnverifiedLAG bool
	OVSDB               string // OVSDB endpoint ("" DefaultOVSDB)
	Libvirt             string // libvirt URI ("" DefaultLibvirt)
	// OVN is the group's ovn section (ovn.go); nil without one.
	OVN        *OVNGroup
	discovered bool
}

// Runner runs external commands with a fixed argv, never through a shell.
type Runner interface {
	// LookPath tells where a tool is installed; an error wrapping
	// ErrNoTool when it is not.
	LookPath(name string) (string, error)
	// Output runs argv and returns its standard output. A non-zero exit is
	// an error carrying the command's stderr; a tool that is not installed
	// is an error wrapping ErrNoTool.
	Output(ctx context.Context, argv ...string) ([]byte, error)
}

// ErrNoTool marks a tool that is not installed.
var ErrNoTool = errors.New("not installed")

// Prober tells whether the daemons vflag talks to answer.
type Prober interface {
	// OVSDB connects to an OVSDB endpoint ("unix:/path", "tcp:host:port").
	OVSDB(ctx context.Context, endpoint string) error
	// Libvirt connects to a libvirt URI ("qemu:///system").
	Libvirt(ctx context.Context, uri string) error
}

// Env is how doctor reads the host.
type Env struct {
	// Sys is the NIC side: /sys/class/net, /sys/bus/pci, /sys/devices,
	// /sys/class/infiniband, /sys/kernel/debug/mlx5 (the simulated host's
	// with --sim).
	Sys sysfs.FS
	// Host is the machine: /proc, /sys/module, /sys/class/iommu,
	// /sys/kernel/iommu_groups, /sys/bus/pci/drivers, /lib/modules,
	// /etc/modprobe.d. nil: Sys.
	Host sysfs.FS
	// Kernel answers devlink and rtnetlink.
	Kernel eswitch.Kernel
	// Run runs external tools (mstconfig, devlink, ovs-vswitchd, nmcli,
	// journalctl, dmesg). nil: no tool is installed.
	Run Runner
	// Probe checks OVSDB and libvirt. nil: both unreachable.
	Probe Prober
	// OVN asks ovn-controller and the Open_vSwitch row what the OVN
	// checks need. nil: neither answers.
	OVN OVNProber
	// Simulated says the NICs are simulated (internal/sim): the checks of
	// the machine's platform, firmware tools, kernel modules and
	// NetworkManager say nothing about them and skip; the daemons are real
	// and are checked.
	Simulated bool
	// ClockTicks is the kernel's USER_HZ for /proc/<pid>/stat (default 100).
	ClockTicks int
}

// doctor is one run.
type doctor struct {
	ctx    context.Context
	env    Env
	pci    sriov.Host
	checks []Check
	group  string // the group of the checks being added

	klog     []string // the kernel log, read once
	klogFrom string
	klogRead bool

	journaled map[sriov.Device]bool // PFs whose VF count vflag's journal records
	// pendingBonds: bonds a pending entry of vflag's journal was creating
	// (a run stopped between the bond's creation and its alias).
	pendingBonds map[string]bool

	ovsVersion string // ovs-vswitchd --version's x.y.z, "" unknown
}

// Run checks the host for t and returns the report. It never writes.
func Run(ctx context.Context, env Env, t Target) *Report {
	if env.Host == nil {
		env.Host = env.Sys
	}
	if env.Run == nil {
		env.Run = noTools{}
	}
	if env.Probe == nil {
		env.Probe = noProber{}
	}
	if env.OVN == nil {
		env.OVN = noOVN{}
	}
	if env.ClockTicks <= 0 {
		env.ClockTicks = 100
	}
	d := &doctor{ctx: ctx, env: env, pci: sriov.Host{FS: env.Sys}}
	d.journaled, d.pendingBonds = readJournal(t.StateDir)
	if t.ConfigError != nil {
		d.add(AreaConfig, "config/valid", "", Fail, fmt.Sprintf("%v; checking every SR-IOV NIC found instead", t.ConfigError),
			"fix the field the error names (`vflag example-config` prints a valid config), then run `vflag doctor` again")
	}
	groups := t.Groups
	if len(groups) == 0 {
		groups = d.discover()
	}
	var gs []*groupState
	for i := range groups {
		g := groups[i]
		if g.OVSDB == "" {
			g.OVSDB = DefaultOVSDB
		}
		if g.Libvirt == "" {
			g.Libvirt = DefaultLibvirt
		}
		gs = append(gs, d.resolveGroup(g))
	}

	d.platform(gs)
	for _, g := range gs {
		d.group = g.Name
		d.firmware(g)
		d.nic(g)
	}
	d.group = ""
	d.kernel(gs)
	d.daemons(gs)
	for _, g := range gs {
		if g.OVN != nil {
			d.group = g.Name
			d.ovn(g)
		}
	}
	d.group = ""
	for _, g := range gs {
		d.group = g.Name
		d.conflicts(g)
	}

	rep := &Report{Checks: d.sorted(), Ready: true}
	for _, c := range rep.Checks {
		if c.Status == Fail {
			rep.Ready = false
		}
	}
	return rep
}

// add records one check. subject ("ens1f0np0", an endpoint) is appended
// to the name when the check exists once per subject.
func (d *doctor) add(area, name, subject string, st Status, detail, fix string) {
	if subject != "" {
		name += " " + subject
	}
	if st == Pass {
		fix = ""
	}
	d.checks = append(d.checks, Check{Name: name, Status: st, Detail: detail, Fix: fix, Area: area, Group: d.group})
}

func (d *doctor) sorted() []Check {
	order := map[string]int{}
	for i, a := range Areas {
		order[a] = i
	}
	out := append([]Check(nil), d.checks...)
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Area] < order[out[j].Area] })
	return out
}

// switchdevGroups tells whether any group needs the VF-LAG stack (bond,
// OVS). No group at all (nothing configured, nothing discovered) counts as
// VF-LAG wanted: the report then says what VF-LAG would need.
func switchdevGroups(gs []*groupState) bool {
	if len(gs) == 0 {
		return true
	}
	for _, g := range gs {
		if g.Switchdev {
			return true
		}
	}
	return false
}

// noTools is the Runner of a host without any tool.
type noTools struct{}

func (noTools) LookPath(name string) (string, error) {
	return "", fmt.Errorf("%s: %w", name, ErrNoTool)
}

func (noTools) Output(_ context.Context, argv ...string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", argv[0], ErrNoTool)
}

// noProber reaches nothing.
type noProber struct{}

func (noProber) OVSDB(context.Context, string) error   { return errors.New("no prober") }
func (noProber) Libvirt(context.Context, string) error { return errors.New("no prober") }

// tool tells whether a tool is installed.
func (d *doctor) tool(name string) bool {
	_, err := d.env.Run.LookPath(name)
	return err == nil
}

// output runs a tool and returns its trimmed stdout.
func (d *doctor) output(argv ...string) (string, error) {
	b, err := d.env.Run.Output(d.ctx, argv...)
	return strings.TrimSpace(string(b)), err
}

// readHost reads a machine file, trimmed.
func (d *doctor) readHost(p string) (string, error) { return sysfs.ReadString(d.env.Host, p) }

// readSys reads a NIC-side file, trimmed.
func (d *doctor) readSys(p string) (string, error) { return sysfs.ReadString(d.env.Sys, p) }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// readJournal reads vflag's journal (read only) for the PFs whose VF count
// vflag set (entries of kind sriov.numvfs, id "sriov.numvfs/<device>") and
// the bonds a pending bond.create entry names.
func readJournal(stateDir string) (vfs map[sriov.Device]bool, bonds map[string]bool) {
	vfs, bonds = map[sriov.Device]bool{}, map[string]bool{}
	if stateDir == "" {
		return vfs, bonds
	}
	j, err := teardown.OpenJournal(stateDir)
	if err != nil {
		return vfs, bonds
	}
	for _, e := range j.Entries() {
		if dev, ok := strings.CutPrefix(e.ID, "sriov.numvfs/"); ok && e.Kind == "sriov.numvfs" {
			if dv, err := sriov.ParseDevice(dev); err == nil {
				vfs[dv] = true
			}
		}
		if e.Kind == "bond.create" && e.State == teardown.StatePending {
			var r struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(e.Record, &r) == nil && r.Name != "" {
				bonds[r.Name] = true
			}
		}
	}
	return vfs, bonds
}
