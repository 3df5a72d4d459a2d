// Package config is vflag's configuration: the schema, its defaults and
// its validation. Every error names the field path and the value. It reads
// nothing from the host and knows neither viper (cmd/vflag loads the file)
// nor the simulator (the sim: section is kept raw and decoded by internal/sim).
package config

import (
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/cfgdecode"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/sriov"
)

// Config is vflag's configuration file (YAML), after viper has merged flags
// and VFLAG_* environment variables.
type Config struct {
	OVSDB   string `mapstructure:"ovsdb"`   // "unix:/var/run/openvswitch/db.sock"
	Libvirt string `mapstructure:"libvirt"` // "qemu:///system"
	// OVSLog is ovs-vswitchd's log (its --log-file), read by up for what
	// ovs-vswitchd said of the bond's tc flow API and by validate's offload
	// check; "" is where Debian's and Red Hat's packages put it
	// (/var/log/openvswitch/ovs-vswitchd.log).
	OVSLog string  `mapstructure:"ovs_log"`
	Groups []Group `mapstructure:"groups"`
	// LAGTimeout bounds the wait for hardware LAG activation (default 30s).
	LAGTimeout time.Duration `mapstructure:"lag_timeout"`
	// VFTimeout bounds the wait for VF creation per PF (default 5m: ~0.5 s per VF on ConnectX).
	VFTimeout time.Duration `mapstructure:"vf_timeout"`
	// PFWait bounds the wait of `vflag up` for the PFs to appear (default
	// 60s): at boot the NIC's driver may probe after vflag-pre.service starts.
	PFWait time.Duration `mapstructure:"pf_wait"`
	// AcceptUnverifiedLAG lets an mlx5 group's hardware LAG be
	// "unverified" (its state not in debugfs: debugfs not mounted, or an
	// mlx5_core that shows no lag/ state) without up ending degraded or
	// validate failing: for hosts without debugfs. It is never reported
	// as active. Default false.
	AcceptUnverifiedLAG bool `mapstructure:"accept_unverified_lag"`
	// Sim is the simulated host's spec (`vflag --sim DIR`), decoded by
	// internal/sim; a real host ignores it.
	Sim map[string]any `mapstructure:"sim"`
}

// Group is one LAG group: the two ports of one NIC, bonded.
type Group struct {
	Name string `mapstructure:"name"`
	// Eswitch is "switchdev" (VF-LAG, default) or "legacy" (VFs only: no
	// representors, no bond requirement).
	Eswitch string   `mapstructure:"eswitch"`
	PFs     []string `mapstructure:"pfs"` // netdev names or PCI addresses
	NumVFs  int      `mapstructure:"numvfs"`
	// FlowSteeringMode is "", "smfs" or "dmfs". Empty in a switchdev group:
	// smfs, applied only while the eswitch is legacy at the time of the
	// step (never cycles an eswitch already in switchdev); an explicit
	// value is enforced. Left alone where the driver has no such param.
	FlowSteeringMode string `mapstructure:"flow_steering_mode"`
	// MTU goes on the bond (its PFs follow it), every representor and the
	// OVS Interface mtu_request of the bond's and representors' ports, or a
	// legacy group's PFs and the host netdevs of its VFs bound to a netdev
	// driver (0: leave the MTUs alone).
	MTU  int        `mapstructure:"mtu"`
	Bond Bond       `mapstructure:"bond"`
	VFs  []VFConfig `mapstructure:"vfs"`
	// RateGroups are devlink rate nodes (switchdev only): the VFs whose
	// rate_group names one share its tx_max (a tenant's VFs).
	RateGroups []RateGroup `mapstructure:"rate_groups"`
	OVS        OVSConfig   `mapstructure:"ovs"`
	// StandbyBridge is, in a legacy group, the host's Open vSwitch bridge
	// the standbys of its migratable attachments go on (a legacy group has
	// no bridge of its own): a bridge vflag neither makes nor changes
	// (libvirt adds and removes the standbys' ports), whose uplink reaches
	// the network the group's PFs are on. Switchdev groups put the standby
	// on ovs.bridge.
	StandbyBridge string       `mapstructure:"standby_bridge"`
	Attachments   []Attachment `mapstructure:"attachments"`
	// Network, when given, is the group's VF pool for libvirt: a hostdev
	// network domains take a VF from at start (<interface type='network'>).
	Network *Network `mapstructure:"network"`
	// Validate holds the settings of `vflag validate` (validate.go).
	Validate ValidateConfig `mapstructure:"validate"`
	// Tunnel, when given, makes the group an overlay (tunnel.go): the bond
	// carries the tunnel endpoint's address instead of being a bridge port.
	Tunnel *Tunnel `mapstructure:"tunnel"`
	// OVN, when given, makes the host an OVN chassis (ovn.go): the bond
	// carries the encap address, the representors are ports of br-int
	// bound to the logical ports that vfs and attachments name.
	OVN *OVN `mapstructure:"ovn"`
}

// Bond is the bond over the group's PFs.
type Bond struct {
	Name           string `mapstructure:"name"`
	Mode           string `mapstructure:"mode"`
	Miimon         int    `mapstructure:"miimon"`
	LacpRate       string `mapstructure:"lacp_rate"`
	XmitHashPolicy string `mapstructure:"xmit_hash_policy"`
	// UpDelay and DownDelay (ms, multiples of miimon) delay the use of a
	// slave whose link came up or went down; changed live.
	UpDelay   int `mapstructure:"updelay"`
	DownDelay int `mapstructure:"downdelay"`
	// MinLinks: the bond has carrier only with this many slaves up (0..2).
	MinLinks int `mapstructure:"min_links"`
	// Primary is the preferred slave of an active-backup bond: one of the
	// group's pfs, as written there; "" none.
	Primary string `mapstructure:"primary"`
	// AdSelect is the 802.3ad aggregator selection: stable (default),
	// bandwidth or count; a change takes the bond down.
	AdSelect string `mapstructure:"ad_select"`
}

// PrimaryIndex is the index in pfs of the bond's primary, -1 when none.
func (g *Group) PrimaryIndex() int {
	if g.Bond.Primary == "" {
		return -1
	}
	for i, ref := range g.PFs {
		if strings.EqualFold(ref, g.Bond.Primary) {
			return i
		}
	}
	return -1
}

// VFConfig holds one VF's settings.
type VFConfig struct {
	PF     int    `mapstructure:"pf"` // index into pfs
	VF     int    `mapstructure:"vf"`
	MAC    string `mapstructure:"mac"`
	Driver string `mapstructure:"driver"` // host driver bound after LAG is active
	// VLAN: in a switchdev group the access tag on the representor's OVS
	// port; in a legacy group the VF's VLAN set through the PF, with QoS
	// its 802.1p priority ("ip link set $pf vf $n vlan $vlan qos $qos");
	// there 0 leaves the VF's VLAN alone.
	VLAN int `mapstructure:"vlan"`
	QoS  int `mapstructure:"qos"` // 0-7, legacy only, needs vlan

	// Legacy per-VF policy through the PF (rtnetlink IFLA_VF_*; mlx5
	// answers EOPNOTSUPP for these in switchdev). Unset (nil, "", 0)
	// leaves the VF's value alone.
	Trust     *bool  `mapstructure:"trust"`       // ip link set $pf vf $n trust on|off
	Spoofchk  *bool  `mapstructure:"spoofchk"`    // ip link set $pf vf $n spoofchk on|off
	LinkState string `mapstructure:"link_state"`  // auto, enable, disable: ip link set $pf vf $n state ...
	MinTxRate int    `mapstructure:"min_tx_rate"` // Mbit/s guaranteed; 0 none
	MaxTxRate int    `mapstructure:"max_tx_rate"` // Mbit/s limit; 0 none

	// VLANMode is the representor port's OVS vlan_mode (switchdev groups):
	// "" (access with vlan, else OVS's default), access, trunk,
	// native-tagged or native-untagged; with native-*, vlan is the native
	// VLAN.
	VLANMode string `mapstructure:"vlan_mode"`
	// Trunks are the VLANs a trunk or native-* port carries (1-4094, unique;
	// empty: all VLANs).
	Trunks []int `mapstructure:"trunks"`

	// TxMax and TxShare (Mbit/s, 0 = none) go on the VF port's devlink
	// rate leaf; RateGroup puts the leaf under one of the group's
	// rate_groups (switchdev only).
	TxMax     int    `mapstructure:"tx_max"`
	TxShare   int    `mapstructure:"tx_share"`
	RateGroup string `mapstructure:"rate_group"`

	// VNI puts the VF on the overlay segment of that key (groups with a
	// tunnel; vlan is then the segment's tag in the bridge). 0: the
	// tunnel's default segment.
	VNI int `mapstructure:"vni"`

	// OVNPort is the logical switch port the VF's representor is bound to
	// (groups with ovn: Interface external_ids:iface-id).
	OVNPort string `mapstructure:"ovn_port"`
}

// HasRate tells whether the VF has a devlink-rate setting.
func (v VFConfig) HasRate() bool { return v.TxMax != 0 || v.TxShare != 0 || v.RateGroup != "" }

// RateGroup is a devlink rate node of a switchdev group, created on the
// devlink instance of each PF that owns VFs.
type RateGroup struct {
	Name    string `mapstructure:"name"`
	TxMax   int    `mapstructure:"tx_max"`   // Mbit/s, 0 = none
	TxShare int    `mapstructure:"tx_share"` // Mbit/s, 0 = none
}

// MaxRateMbit bounds tx_max and tx_share: 400 Gbit/s, the fastest
// ConnectX port; beyond it is a typo (the unit is Mbit/s).
const MaxRateMbit = 400000

// rateGroupNameRE: devlink node names; the first character is a letter,
// since the devlink tool reads an all-digit name as a port index.
var rateGroupNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`) })

const legacyRateMsg = "needs eswitch switchdev (legacy groups: min_tx_rate/max_tx_rate through the PF)"

// validRates checks a tx_max/tx_share pair at path p.
func validRates(p string, txMax, txShare int, add func(string, any, string, ...any)) {
	if txMax < 0 || txMax > MaxRateMbit {
		add(p+".tx_max", txMax, "must be 0 (no limit) to %d Mbit/s", MaxRateMbit)
	}
	if txShare < 0 || txShare > MaxRateMbit {
		add(p+".tx_share", txShare, "must be 0 (no guarantee) to %d Mbit/s", MaxRateMbit)
	}
	if txMax > 0 && txShare > txMax {
		add(p+".tx_share", txShare, "exceeds tx_max (%d Mbit/s)", txMax)
	}
}

// OVSConfig is the group's bridge.
type OVSConfig struct {
	Bridge       string `mapstructure:"bridge"`
	DatapathType string `mapstructure:"datapath_type"`
	HWOffload    *bool  `mapstructure:"hw_offload"` // default true
	// TCPolicy is Open_vSwitch other_config:tc-policy (skip_sw, skip_hw,
	// none; "" leaves it): set only before hw-offload is on (it is read
	// when offload starts). A global setting: every group giving it must
	// agree.
	TCPolicy string `mapstructure:"tc_policy"`
	// MaxIdle is other_config:max-idle in ms (0 leaves it; at least 500):
	// how long idle datapath flows stay. Global, applied live.
	MaxIdle int `mapstructure:"max_idle"`
}

// Attachment puts one VF into one libvirt domain.
type Attachment struct {
	Domain string `mapstructure:"domain"`
	PF     int    `mapstructure:"pf"`
	VF     int    `mapstructure:"vf"`
	MAC    string `mapstructure:"mac"`  // default: the VF's configured MAC
	Live   bool   `mapstructure:"live"` // also attach to the running domain
	// OVNPort is the logical switch port of the domain's VF (groups with
	// ovn): its representor's iface-id, with the domain's UUID as vm-uuid.
	OVNPort string `mapstructure:"ovn_port"`
	// Migratable makes the VF live-migratable (libvirt teaming): vflag
	// gives the domain a persistent virtio interface on the group's bridge
	// (the standby, with the VF's VLAN and MAC) and attaches the VF as its
	// transient partner. A legacy group's standby goes on standby_bridge,
	// and the VF's vlan (vfs) goes into both interfaces' <vlan>.
	Migratable bool `mapstructure:"migratable"`
}

// VFRef names a VF by the index of its PF in the group's pfs and its index.
type VFRef struct{ PF, VF int }

// Network is a group's libvirt hostdev network: a pool of VFs that libvirt
// hands to domains at start, one per <interface type='network'>.
type Network struct {
	// Name of the libvirt network (default vflag-<group>).
	Name string `mapstructure:"name"`
	// VFs of the pool; empty: every VF of the group that no vfs entry
	// gives to the host (driver) and no attachment takes.
	VFs []NetworkVF `mapstructure:"vfs"`
	// Portgroups a domain's interface names (<source portgroup=...>), each
	// with the VLAN its ports get: on the representor's OVS port in a
	// switchdev group (the network hook), on the VF through the PF by
	// libvirt in a legacy group (one access VLAN there).
	Portgroups []Portgroup `mapstructure:"portgroups"`
	// Migratable is refused: vflag does not write the interfaces of a
	// pool's domains (they name the network themselves), so it has no
	// pair to make for them; the field exists to say so (see
	// docs/migration.md for the pair a pool's domain carries itself).
	Migratable *bool `mapstructure:"migratable"`
}

// NetworkVF is one VF of a pool.
type NetworkVF struct {
	PF int `mapstructure:"pf"`
	VF int `mapstructure:"vf"`
}

// Portgroup is a VLAN setting of a pool's ports.
type Portgroup struct {
	Name string `mapstructure:"name"`
	// Default: the portgroup of an interface that names none.
	Default  bool   `mapstructure:"default"`
	VLAN     int    `mapstructure:"vlan"`
	VLANMode string `mapstructure:"vlan_mode"` // as vfs[].vlan_mode (switchdev)
	Trunks   []int  `mapstructure:"trunks"`    // as vfs[].trunks (switchdev)
	VNI      int    `mapstructure:"vni"`       // as vfs[].vni (groups with a tunnel)
}

// NetworkName is the group's libvirt network name, "" when it has none.
func (g *Group) NetworkName() string {
	if g.Network == nil {
		return ""
	}
	if g.Network.Name != "" {
		return g.Network.Name
	}
	return "vflag-" + g.Name
}

// PoolVFs lists the VFs of the group's network, in order: the configured
// ones, or every VF (pf by pf) that no vfs entry gives to the host and no
// attachment takes. nil without a network.
func (g *Group) PoolVFs() []VFRef {
	if g.Network == nil {
		return nil
	}
	var out []VFRef
	if len(g.Network.VFs) > 0 {
		for _, v := range g.Network.VFs {
			out = append(out, VFRef(v))
		}
		return out
	}
	taken := map[VFRef]bool{}
	for _, v := range g.VFs {
		if v.Driver != "" {
			taken[VFRef{v.PF, v.VF}] = true
		}
	}
	for _, a := range g.Attachments {
		taken[VFRef{a.PF, a.VF}] = true
	}
	for pf := range g.PFs {
		for vf := 0; vf < g.NumVFs; vf++ {
			if !taken[VFRef{pf, vf}] {
				out = append(out, VFRef{pf, vf})
			}
		}
	}
	return out
}

// FieldError is a config error naming the field path and the bad value.
type FieldError = cfgdecode.FieldError

// Errors is every error found in a config.
type Errors = cfgdecode.Errors

// MinMTU and MaxMTU bound a group's mtu: the kernel's minimum for
// Ethernet and the usual jumbo frame limit of switches (mlx5 takes up to 9978).
const (
	MinMTU = 68
	MaxMTU = 9216
)

// maxBondDelay bounds updelay and downdelay: a minute, far beyond any use
// (the kernel takes up to INT_MAX).
const maxBondDelay = 60000

// DefaultVFTimeout is vf_timeout's default: ~0.5 s per VF on ConnectX, with
// room for a slow firmware.
const DefaultVFTimeout = 5 * time.Minute

// MaxVFsLAG bounds numvfs in a switchdev group: mlx5 refuses VF-LAG on a
// PF whose firmware has more than 64 VFs (eswitch.LAGMaxTotalVFs), so no
// PF in VF-LAG has more; preflight and doctor check sriov_totalvfs itself.
const MaxVFsLAG = eswitch.LAGMaxTotalVFs

// isDotName: "." and "..", which every name pattern with '.' lets through
// and which leave their directory in any path.
func isDotName(s string) bool { return s == "." || s == ".." }

var (
	groupNameRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`) })
	bridgeNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`) })
	domainNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.+-]{1,64}$`) })
	endpointRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(unix:/\S+|tcp:\S+:\d+|ssl:\S+:\d+)$`) })
	bondModes    = map[string]bool{"active-backup": true, "balance-xor": true, "802.3ad": true}
	hashPolicies = map[string]bool{"layer2": true, "layer2+3": true, "layer3+4": true, "encap2+3": true, "encap3+4": true, "vlan+srcmac": true}
)

// ApplyDefaults fills in what the config leaves empty.
func (c *Config) ApplyDefaults() {
	if c.OVSDB == "" {
		c.OVSDB = "unix:/var/run/openvswitch/db.sock"
	}
	if c.Libvirt == "" {
		c.Libvirt = "qemu:///system"
	}
	if c.LAGTimeout == 0 {
		c.LAGTimeout = 30 * time.Second
	}
	if c.VFTimeout == 0 {
		c.VFTimeout = DefaultVFTimeout
	}
	if c.PFWait == 0 {
		c.PFWait = 60 * time.Second
	}
	for i := range c.Groups {
		g := &c.Groups[i]
		if g.Eswitch == "" {
			g.Eswitch = eswitch.ModeSwitchdev
		}
		if g.Bond.Miimon == 0 {
			g.Bond.Miimon = 100
		}
		if g.OVS.HWOffload == nil {
			on := true
			g.OVS.HWOffload = &on
		}
		g.applyOVNDefaults()
	}
}

// Switchdev tells whether the group is a VF-LAG group.
func (g *Group) Switchdev() bool { return g.Eswitch == eswitch.ModeSwitchdev }

// AttachmentDomains are the domains the group's attachments name, each
// once, in config order.
func (g *Group) AttachmentDomains() []string {
	var out []string
	for _, a := range g.Attachments {
		if !slices.Contains(out, a.Domain) {
			out = append(out, a.Domain)
		}
	}
	return out
}

// VFMAC returns the configured MAC of a VF, "" when none.
func (g *Group) VFMAC(pf, vf int) string {
	for _, v := range g.VFs {
		if v.PF == pf && v.VF == vf {
			return v.MAC
		}
	}
	return ""
}

func validMAC(s string) error {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return fmt.Errorf("is not a MAC address (want aa:bb:cc:dd:ee:ff)")
	}
	if hw[0]&1 == 1 {
		return fmt.Errorf("is a multicast MAC address")
	}
	if hw.String() == "00:00:00:00:00:00" {
		return fmt.Errorf("is the zero MAC address")
	}
	return nil
}

func validPFRef(s string) error {
	if strings.Contains(s, ":") && !strings.ContainsAny(s, "/ ") && regexp.MustCompile(`^[0-9A-Fa-f:.]+$`).MatchString(s) {
		if _, err := sriov.ParseAddr(s); err != nil {
			return fmt.Errorf("is not a PCI address (want dddd:bb:dd.f)")
		}
		return nil
	}
	if err := eswitch.ValidIfName(s); err != nil {
		return fmt.Errorf("is neither a PCI address nor a valid interface name (1-15 characters, no '/')")
	}
	return nil
}

// Validate checks the whole config without touching the host and returns
// every error, each naming its field path and value.
func (c *Config) Validate() error {
	v := newValidator()
	c.validateSettings(v.add)
	for gi := range c.Groups {
		c.validateGroup(v, gi)
	}
	if len(v.errs) > 0 {
		return v.errs
	}
	return nil
}

// validator collects Validate's errors and the names claimed across groups.
type validator struct {
	errs Errors
	// reported keeps the first error of each field: its root cause (the
	// checks run from the cause to what depends on it, and skip what only
	// follows from an error already found).
	reported map[string]bool
	// seen maps kind/name to the path claiming it, across groups: PFs,
	// bonds, bridges, group names.
	seen map[string]string
	// global holds the Open_vSwitch settings: the first group giving each.
	global map[string]globalSetting
}

// globalSetting is an Open_vSwitch-wide setting and the field that gave it.
type globalSetting struct{ path, value string }

// newValidator returns an empty validator.
func newValidator() *validator {
	return &validator{reported: map[string]bool{}, seen: map[string]string{}, global: map[string]globalSetting{}}
}

// add records an error for path unless that path already has one.
func (v *validator) add(path string, val any, format string, args ...any) {
	if v.reported[path] {
		return
	}
	v.reported[path] = true
	v.errs = append(v.errs, FieldError{Path: path, Value: val, Msg: fmt.Sprintf(format, args...)})
}

// claim records that path uses name of kind, or reports that an earlier
// path already does.
func (v *validator) claim(kind, name, path string) {
	key := kind + "/" + name
	if prev, ok := v.seen[key]; ok {
		v.add(path, name, "is already used at %s", prev)
		return
	}
	v.seen[key] = path
}

// validateSettings checks the top-level settings: endpoints, timeouts and
// that there is a group at all.
func (c *Config) validateSettings(add func(string, any, string, ...any)) {
	if !endpointRE().MatchString(c.OVSDB) {
		add("ovsdb", c.OVSDB, "is not an OVSDB endpoint (unix:/path, tcp:host:port or ssl:host:port)")
	}
	if c.Libvirt == "" || strings.ContainsAny(c.Libvirt, " \n") || !strings.Contains(c.Libvirt, ":") {
		add("libvirt", c.Libvirt, "is not a libvirt URI (e.g. qemu:///system)")
	}
	if c.OVSLog != "" && (!filepath.IsAbs(c.OVSLog) || filepath.Clean(c.OVSLog) != c.OVSLog) {
		add("ovs_log", c.OVSLog, "must be an absolute, clean path to ovs-vswitchd's log (its --log-file)")
	}
	if c.LAGTimeout < 0 {
		add("lag_timeout", c.LAGTimeout, "must be positive")
	}
	if c.VFTimeout < 0 {
		add("vf_timeout", c.VFTimeout, "must be positive")
	}
	if c.PFWait < 0 {
		add("pf_wait", c.PFWait, "must be positive")
	}
	if len(c.Groups) == 0 {
		add("groups", "", "must list at least one LAG group")
	}
}

// groupCheck is what the section checks of one group share: the group,
// its field path, its eswitch mode and whether the fields the VF indexes
// are checked against (pfs, numvfs) are valid.
type groupCheck struct {
	g *Group
	p string
	// With an unknown eswitch mode (modeOK false) only the checks that
	// hold in both modes run: the others would report what follows from
	// the mode.
	switchdev, legacy, modeOK bool
	// pfsOK, numvfsOK: the pf and vf indexes of vfs and attachments are
	// checked against pfs and numvfs only when those are valid.
	pfsOK, numvfsOK bool
}

// validateGroup checks group gi section by section, from the fields the
// others depend on (mode, pfs, numvfs) to those depending on them.
func (c *Config) validateGroup(v *validator, gi int) {
	gc := v.validateGroupBasics(&c.Groups[gi], fmt.Sprintf("groups[%d]", gi))
	g, p := gc.g, gc.p
	if gc.switchdev {
		c.validateBond(g, p, gc.pfsOK, v.add)
		if g.Bond.Name != "" {
			v.claim("netdev", g.Bond.Name, p+".bond.name")
		}
		v.validateOVS(gc)
	}
	if gc.legacy {
		v.validateLegacyNoBridge(gc)
	}
	v.validateStandbyBridge(gc)
	rateGroups := v.validateRateGroups(gc)
	v.validateVFs(gc, rateGroups)
	if g.Network != nil {
		validateNetwork(g, p, gc.switchdev, gc.legacy, gc.pfsOK, gc.numvfsOK, v.claim, v.add)
	}
	g.Validate.Check(p+".validate", v.add)
	v.validateOVNTraffic(gc)
	v.validateAttachments(gc)
	if g.Tunnel != nil {
		v.validateTunnel(gc)
	} else {
		v.validateSegments(gc)
	}
	if g.OVN != nil {
		v.validateOVN(gc)
	} else {
		v.validateOVNPortsWithout(gc)
	}
}

// validateGroupBasics checks a group's own fields (name, eswitch, pfs,
// numvfs, mtu, flow steering) and returns what the other checks need of
// them.
func (v *validator) validateGroupBasics(g *Group, p string) groupCheck {
	if !groupNameRE().MatchString(g.Name) {
		v.add(p+".name", g.Name, "must be 1-32 characters of [a-z0-9_-], starting with a letter or digit")
	} else {
		v.claim("group", g.Name, p+".name")
	}
	gc := groupCheck{g: g, p: p, switchdev: g.Eswitch == eswitch.ModeSwitchdev, legacy: g.Eswitch == eswitch.ModeLegacy}
	gc.modeOK = gc.switchdev || gc.legacy
	if !gc.modeOK {
		v.add(p+".eswitch", g.Eswitch, "must be switchdev or legacy")
	}
	gc.pfsOK = true
	switch {
	case gc.switchdev && len(g.PFs) != 2:
		v.add(p+".pfs", strings.Join(g.PFs, ","), "must name exactly the two ports of one NIC")
		gc.pfsOK = false
	case !gc.switchdev && (len(g.PFs) < 1 || len(g.PFs) > 2):
		v.add(p+".pfs", strings.Join(g.PFs, ","), "must name one or two PFs")
		gc.pfsOK = false
	}
	for i, ref := range g.PFs {
		if err := validPFRef(ref); err != nil {
			v.add(fmt.Sprintf("%s.pfs[%d]", p, i), ref, "%v", err)
			continue
		}
		v.claim("pf", strings.ToLower(ref), fmt.Sprintf("%s.pfs[%d]", p, i))
	}
	gc.numvfsOK = g.NumVFs >= 1 && g.NumVFs <= 4096
	if !gc.numvfsOK {
		v.add(p+".numvfs", g.NumVFs, "must be between 1 and the PF's sriov_totalvfs")
	} else if gc.switchdev && g.NumVFs > MaxVFsLAG {
		v.add(p+".numvfs", g.NumVFs, "exceeds %d: a PF in VF-LAG has at most %d VFs (mlx5 needs its firmware's NUM_OF_VFS, the PF's sriov_totalvfs, at %d or less)", MaxVFsLAG, MaxVFsLAG, MaxVFsLAG)
	}
	if g.MTU != 0 && (g.MTU < MinMTU || g.MTU > MaxMTU) {
		v.add(p+".mtu", g.MTU, "must be %d-%d (or 0 to leave the MTUs alone)", MinMTU, MaxMTU)
	}
	switch g.FlowSteeringMode {
	case "", "smfs", "dmfs":
	default:
		v.add(p+".flow_steering_mode", g.FlowSteeringMode, "must be smfs or dmfs (or empty to leave it)")
	}
	return gc
}

// validateOVS checks a switchdev group's ovs section: the bridge name and
// the Open_vSwitch-wide settings, which every group giving them must agree
// on.
func (v *validator) validateOVS(gc groupCheck) {
	g, p := gc.g, gc.p
	if !bridgeNameRE().MatchString(g.OVS.Bridge) || isDotName(g.OVS.Bridge) {
		v.add(p+".ovs.bridge", g.OVS.Bridge, "must be 1-15 characters of [A-Za-z0-9_.-], not \".\" or \"..\"")
	} else {
		v.claim("bridge", g.OVS.Bridge, p+".ovs.bridge")
	}
	switch g.OVS.DatapathType {
	case "", "system", "netdev":
	default:
		v.add(p+".ovs.datapath_type", g.OVS.DatapathType, "must be system or netdev")
	}
	switch g.OVS.TCPolicy {
	case "", "skip_sw", "skip_hw", "none":
		if prev, ok := v.global["tc_policy"]; ok && g.OVS.TCPolicy != "" && prev.value != g.OVS.TCPolicy {
			v.add(p+".ovs.tc_policy", g.OVS.TCPolicy, "differs from %s %q: tc-policy is one Open_vSwitch setting for every bridge", prev.path, prev.value)
		} else if g.OVS.TCPolicy != "" && !ok {
			v.global["tc_policy"] = globalSetting{p + ".ovs.tc_policy", g.OVS.TCPolicy}
		}
	default:
		v.add(p+".ovs.tc_policy", g.OVS.TCPolicy, "must be skip_sw, skip_hw or none")
	}
	if g.OVS.MaxIdle != 0 && (g.OVS.MaxIdle < 500 || g.OVS.MaxIdle > 3600000) {
		v.add(p+".ovs.max_idle", g.OVS.MaxIdle, "must be 500-3600000 ms (or 0 to leave it)")
	} else if g.OVS.MaxIdle != 0 {
		val := fmt.Sprint(g.OVS.MaxIdle)
		if prev, ok := v.global["max_idle"]; ok && prev.value != val {
			v.add(p+".ovs.max_idle", g.OVS.MaxIdle, "differs from %s %q: max-idle is one Open_vSwitch setting for every bridge", prev.path, prev.value)
		} else if !ok {
			v.global["max_idle"] = globalSetting{p + ".ovs.max_idle", val}
		}
	}
}

// validateLegacyNoBridge reports the bond and ovs fields a legacy group
// cannot have: it has no VF-LAG, no representors and no bridge.
func (v *validator) validateLegacyNoBridge(gc groupCheck) {
	g, p := gc.g, gc.p
	if g.Bond.Name != "" {
		v.add(p+".bond.name", g.Bond.Name, "is not allowed with eswitch legacy (no VF-LAG)")
	}
	if g.OVS.Bridge != "" {
		v.add(p+".ovs.bridge", g.OVS.Bridge, "is not allowed with eswitch legacy (no representors)")
	}
	if g.OVS.TCPolicy != "" {
		v.add(p+".ovs.tc_policy", g.OVS.TCPolicy, "is not allowed with eswitch legacy (no bridge)")
	}
	if g.OVS.MaxIdle != 0 {
		v.add(p+".ovs.max_idle", g.OVS.MaxIdle, "is not allowed with eswitch legacy (no bridge)")
	}
}

// validateStandbyBridge checks standby_bridge: a legacy group's, named
// like a bridge (a host that only receives migrated domains, or whose
// pool's domains carry their own pairs, gives it without a migratable
// attachment); a switchdev group's standbys go on ovs.bridge.
func (v *validator) validateStandbyBridge(gc groupCheck) {
	g, p := gc.g, gc.p
	if g.StandbyBridge == "" {
		return
	}
	switch {
	case gc.switchdev:
		v.add(p+".standby_bridge", g.StandbyBridge, "is not allowed with eswitch switchdev: the standbys of its migratable attachments go on ovs.bridge")
	case !bridgeNameRE().MatchString(g.StandbyBridge) || isDotName(g.StandbyBridge):
		v.add(p+".standby_bridge", g.StandbyBridge, "must be 1-15 characters of [A-Za-z0-9_.-], not \".\" or \"..\"")
	}
}

// validateRateGroups checks a group's rate groups (switchdev only) and
// returns the names declared, for the VFs' rate_group.
func (v *validator) validateRateGroups(gc groupCheck) map[string]bool {
	rateGroups := map[string]bool{}
	for ri, r := range gc.g.RateGroups {
		rp := fmt.Sprintf("%s.rate_groups[%d]", gc.p, ri)
		if !gc.switchdev {
			if gc.legacy {
				v.add(rp, r.Name, legacyRateMsg)
			}
			continue
		}
		switch {
		case !rateGroupNameRE().MatchString(r.Name):
			v.add(rp+".name", r.Name, "must be 1-32 characters of [a-z0-9_-], starting with a letter")
		case rateGroups[r.Name]:
			v.add(rp+".name", r.Name, "is declared twice")
		}
		rateGroups[r.Name] = true
		validRates(rp, r.TxMax, r.TxShare, v.add)
	}
	return rateGroups
}

// validateVFs checks a group's vfs: indexes, duplicates, MACs, driver,
// policy, VLAN and rates (rateGroups: the names validateRateGroups found).
func (v *validator) validateVFs(gc groupCheck, rateGroups map[string]bool) {
	g, p := gc.g, gc.p
	vfSeen := map[VFRef]bool{}
	macSeen := map[string]string{}
	for vi, vf := range g.VFs {
		vp := fmt.Sprintf("%s.vfs[%d]", p, vi)
		checkIndexes(vp, vf.PF, vf.VF, g, gc.pfsOK, gc.numvfsOK, v.add)
		if vfSeen[VFRef{vf.PF, vf.VF}] {
			v.add(vp, fmt.Sprintf("pf %d vf %d", vf.PF, vf.VF), "is configured twice")
		}
		vfSeen[VFRef{vf.PF, vf.VF}] = true
		if vf.MAC != "" {
			if err := validMAC(vf.MAC); err != nil {
				v.add(vp+".mac", vf.MAC, "%v", err)
			} else if prev, ok := macSeen[strings.ToLower(vf.MAC)]; ok {
				v.add(vp+".mac", vf.MAC, "is already used at %s", prev)
			} else {
				macSeen[strings.ToLower(vf.MAC)] = vp + ".mac"
			}
		}
		if vf.Driver != "" && sriov.ValidDriver(vf.Driver) != nil {
			v.add(vp+".driver", vf.Driver, "is not a driver name")
		}
		validateVFPolicy(g.Eswitch, vp, vf, v.add)
		if gc.modeOK {
			validateVLANMode(vf, vp, gc.switchdev, v.add)
		}
		switch {
		case gc.legacy:
			if vf.TxMax != 0 {
				v.add(vp+".tx_max", vf.TxMax, legacyRateMsg)
			}
			if vf.TxShare != 0 {
				v.add(vp+".tx_share", vf.TxShare, legacyRateMsg)
			}
			if vf.RateGroup != "" {
				v.add(vp+".rate_group", vf.RateGroup, legacyRateMsg)
			}
		case gc.switchdev:
			validRates(vp, vf.TxMax, vf.TxShare, v.add)
			if vf.RateGroup != "" && !rateGroups[vf.RateGroup] {
				v.add(vp+".rate_group", vf.RateGroup, "is not a rate group of %s.rate_groups", p)
			}
		}
	}
}

// validateAttachments checks a group's attachments: domain, indexes, one
// attachment per VF, no host VLAN on a legacy attached VF, and a MAC.
func (v *validator) validateAttachments(gc groupCheck) {
	g, p := gc.g, gc.p
	attSeen := map[VFRef]string{}
	for ai, a := range g.Attachments {
		ap := fmt.Sprintf("%s.attachments[%d]", p, ai)
		if !domainNameRE().MatchString(a.Domain) || isDotName(a.Domain) {
			v.add(ap+".domain", a.Domain, "is not a domain name (1-64 characters of [A-Za-z0-9_.+-], not \".\" or \"..\")")
		}
		checkIndexes(ap, a.PF, a.VF, g, gc.pfsOK, gc.numvfsOK, v.add)
		if prev, ok := attSeen[VFRef{a.PF, a.VF}]; ok {
			v.add(ap+".vf", a.VF, "is already attached at %s", prev)
		}
		attSeen[VFRef{a.PF, a.VF}] = ap
		if gc.legacy {
			// libvirt sets the VF's VLAN itself when the domain takes it
			// through <interface type='hostdev'> (VLAN 0 without a <vlan>
			// in the domain XML) and puts back only the VLAN, without the
			// QoS, at release: seen on igb in the e2e bed. A migratable
			// attachment's pair carries the VLAN in its <vlan>s, so
			// libvirt sets that one.
			for vi, vf := range g.VFs {
				if vf.PF == a.PF && vf.VF == a.VF && a.Migratable && vf.QoS != 0 {
					v.add(fmt.Sprintf("%s.vfs[%d].qos", p, vi), vf.QoS, "cannot hold on a VF attached to a domain (%s): libvirt sets the VF's VLAN from the teaming pair's <vlan> when the domain starts and drops the QoS at release", ap)
					continue
				}
				if vf.PF == a.PF && vf.VF == a.VF && !a.Migratable && (vf.VLAN != 0 || vf.QoS != 0) {
					v.add(fmt.Sprintf("%s.vfs[%d].vlan", p, vi), vf.VLAN, "cannot hold on a VF attached to a domain (%s): libvirt sets the VF's VLAN itself when the domain starts (0 without a <vlan> in its interface) and drops the QoS at release; give the VLAN to a VF the host keeps, or attach another VF", ap)
				}
			}
		}
		// A MAC taken from vfs is checked there.
		if a.MAC != "" {
			if err := validMAC(a.MAC); err != nil {
				v.add(ap+".mac", a.MAC, "%v", err)
			}
		} else if g.VFMAC(a.PF, a.VF) == "" && !badVFEntryFor(gc, a.PF, a.VF) {
			v.add(ap+".mac", "", "is required: set it here or in vfs for pf %d vf %d", a.PF, a.VF)
		}
		if a.Migratable {
			v.validateMigratable(gc, ap, a)
		}
	}
}

// validateMigratable checks a migratable attachment: a switchdev group
// (the standby is a port of the group's bridge) and a MAC no earlier
// attachment of its domain has (the guest's net_failover pairs the VF and
// the standby by MAC: a second interface with it breaks the pair).
func (v *validator) validateMigratable(gc groupCheck, ap string, a Attachment) {
	g := gc.g
	if gc.legacy && g.StandbyBridge == "" {
		v.add(ap+".migratable", true, "needs standby_bridge in a legacy group: the standby virtio interface of the teaming pair is a port of an Open vSwitch bridge, and a legacy group has none of its own; name the host's bridge whose uplink reaches the network of the group's PFs (groups[].standby_bridge), or use a switchdev group")
		return
	}
	if g.OVN != nil {
		v.add(ap+".migratable", true, "is refused with ovn: the standby virtio interface would have to be bound to the same logical port as the VF's representor, and ovn-controller binds one interface per logical port on a chassis; keep the domain's VF without the pair, or put it in a group without ovn")
		return
	}
	mac := strings.ToLower(a.MAC)
	if mac == "" {
		mac = strings.ToLower(g.VFMAC(a.PF, a.VF))
	}
	if mac == "" {
		return
	}
	for ai, o := range g.Attachments {
		op := fmt.Sprintf("%s.attachments[%d]", gc.p, ai)
		if op == ap {
			break
		}
		omac := strings.ToLower(o.MAC)
		if omac == "" {
			omac = strings.ToLower(g.VFMAC(o.PF, o.VF))
		}
		if o.Domain == a.Domain && omac == mac {
			v.add(ap+".mac", mac, "is also the MAC of %s in domain %s: the guest pairs a teaming pair's VF and virtio standby by MAC, so each pair needs a MAC of its own", op, a.Domain)
			return
		}
	}
}

// badVFEntryFor tells whether a vfs entry with a MAC, whose pf or vf is
// not a valid index (its own error), may be meant for VF pf/vf: it shares
// the other index. Its MAC is then not reported missing at the attachment
// too: one error per field, the root one.
func badVFEntryFor(gc groupCheck, pf, vf int) bool {
	g := gc.g
	for _, e := range g.VFs {
		if e.MAC == "" {
			continue
		}
		badPF := e.PF < 0 || gc.pfsOK && e.PF >= len(g.PFs)
		badVF := e.VF < 0 || gc.numvfsOK && e.VF >= g.NumVFs
		if badPF && e.VF == vf || badVF && e.PF == pf {
			return true
		}
	}
	return false
}

var networkNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$`) })

// validateNetwork checks a group's network: its name, that each pool VF
// exists and is neither the host's (driver) nor an attachment's, and the
// portgroups' VLANs (one access VLAN in a legacy group, where libvirt puts
// it on the VF through the PF).
func validateNetwork(g *Group, p string, switchdev, legacy, pfsOK, numvfsOK bool, claim func(kind, name, path string), add func(string, any, string, ...any)) {
	n := g.Network
	np := p + ".network"
	if n.Name != "" && (!networkNameRE().MatchString(n.Name) || isDotName(n.Name)) {
		add(np+".name", n.Name, "is not a libvirt network name (1-64 characters of [A-Za-z0-9_.+-], starting with a letter or digit)")
	} else {
		claim("network", g.NetworkName(), np+".name")
	}
	host := map[VFRef]string{}
	for vi, v := range g.VFs {
		if v.Driver != "" {
			host[VFRef{v.PF, v.VF}] = fmt.Sprintf("%s.vfs[%d].driver", p, vi)
		}
	}
	for ai, a := range g.Attachments {
		host[VFRef{a.PF, a.VF}] = fmt.Sprintf("%s.attachments[%d]", p, ai)
	}
	seen := map[VFRef]int{}
	for i, v := range n.VFs {
		vp := fmt.Sprintf("%s.vfs[%d]", np, i)
		checkIndexes(vp, v.PF, v.VF, g, pfsOK, numvfsOK, add)
		r := VFRef(v)
		if j, ok := seen[r]; ok {
			add(vp, fmt.Sprintf("pf %d vf %d", v.PF, v.VF), "is already in the pool at %s.vfs[%d]", np, j)
		}
		seen[r] = i
		if by, ok := host[r]; ok {
			add(vp, fmt.Sprintf("pf %d vf %d", v.PF, v.VF), "is not free for the pool: %s takes it", by)
		}
	}
	// A pool left with VFs only on a PF that has none of its own (one
	// device for both ports, as netdevsim) is refused by preflight, which
	// knows the devices (pipeline.EmptyPool).
	if len(n.VFs) == 0 && pfsOK && numvfsOK && len(g.PoolVFs()) == 0 {
		add(np+".vfs", "", "the pool would be empty: every VF goes to the host (vfs[].driver) or an attachment")
	}
	if n.Migratable != nil {
		add(np+".migratable", *n.Migratable, "is not a setting of a VF pool: vflag does not write the interfaces of the domains that take a VF from the pool (each names the network itself), so it makes no teaming pair for them; give such a domain the pair in its own XML (a virtio <interface> with <teaming type='persistent'/> and the pool's <interface type='network'> with <teaming type='transient' persistent='ua-...'/>, see the migration guide), or use attachments[].migratable")
	}
	shadowedVLANs(g, p, add)
	names := map[string]int{}
	defaults := -1
	for i, pg := range n.Portgroups {
		pp := fmt.Sprintf("%s.portgroups[%d]", np, i)
		if !networkNameRE().MatchString(pg.Name) {
			add(pp+".name", pg.Name, "must be 1-64 characters of [A-Za-z0-9_.+-], starting with a letter or digit")
		} else if j, ok := names[pg.Name]; ok {
			add(pp+".name", pg.Name, "is already used at %s.portgroups[%d]", np, j)
		}
		names[pg.Name] = i
		if pg.Default {
			if defaults >= 0 {
				add(pp+".default", true, "%s.portgroups[%d] is the default already", np, defaults)
			}
			defaults = i
		}
		if pg.VLAN < 0 || pg.VLAN > 4094 {
			add(pp+".vlan", pg.VLAN, "must be a VLAN 1-4094 (or 0: none)")
			continue
		}
		switch {
		case switchdev:
			validateVLANMode(VFConfig{VLAN: pg.VLAN, VLANMode: pg.VLANMode, Trunks: pg.Trunks}, pp, true, add)
		case legacy:
			if pg.VLANMode != "" {
				add(pp+".vlan_mode", pg.VLANMode, "needs eswitch switchdev: libvirt puts one access VLAN on a legacy VF")
			}
			if len(pg.Trunks) > 0 {
				add(pp+".trunks", fmt.Sprint(pg.Trunks), "need eswitch switchdev: libvirt puts one access VLAN on a legacy VF")
			}
		}
	}
}

// shadowedVLANs refuses a vfs[] VLAN setting (vlan, vlan_mode, trunks) on
// a VF of the pool when the network has a default portgroup: every domain
// port that holds the VF then takes a portgroup's VLAN (libvirt's, and the
// network hook's on the representor), so the setting would apply only
// while no domain uses the VF. Without a default portgroup it is the VLAN
// of a port that names no portgroup, and is kept.
func shadowedVLANs(g *Group, p string, add func(string, any, string, ...any)) {
	def := ""
	for _, pg := range g.Network.Portgroups {
		if pg.Default {
			def = pg.Name
		}
	}
	if def == "" {
		return
	}
	pool := map[VFRef]bool{}
	for _, r := range g.PoolVFs() {
		pool[r] = true
	}
	for i, v := range g.VFs {
		if !pool[VFRef{v.PF, v.VF}] {
			continue
		}
		vp := fmt.Sprintf("%s.vfs[%d]", p, i)
		why := fmt.Sprintf("is shadowed: pf %d vf %d is in the pool of %s.network, whose default portgroup %q gives every domain port that holds it a portgroup's VLAN; set the VLAN in network.portgroups, or take the VF out of the pool (an attachment, or network.vfs without it)", v.PF, v.VF, p, def)
		switch {
		case v.VLAN != 0:
			add(vp+".vlan", v.VLAN, "%s", why)
		case v.VLANMode != "":
			add(vp+".vlan_mode", v.VLANMode, "%s", why)
		case len(v.Trunks) > 0:
			add(vp+".trunks", fmt.Sprint(v.Trunks), "%s", why)
		}
	}
}

// checkIndexes checks the pf and vf indexes of a VF reference at path p
// (vfs[i], attachments[i]) against the group's pfs and numvfs, where those
// are valid (pfsOK, numvfsOK): else only a negative index is an error of
// its own.
func checkIndexes(p string, pf, vf int, g *Group, pfsOK, numvfsOK bool, add func(string, any, string, ...any)) {
	switch {
	case pfsOK && (pf < 0 || pf >= len(g.PFs)):
		add(p+".pf", pf, "is not an index into pfs (0..%d)", len(g.PFs)-1)
	case pf < 0:
		add(p+".pf", pf, "is not an index into pfs (0 or more)")
	}
	switch {
	case numvfsOK && (vf < 0 || vf >= g.NumVFs):
		add(p+".vf", vf, "is not a VF index (0..%d, numvfs %d)", g.NumVFs-1, g.NumVFs)
	case vf < 0:
		add(p+".vf", vf, "is not a VF index (0 or more)")
	}
}

// validateVLANMode checks a VF's vlan_mode and trunks against its vlan
// (ovs-vswitchd.conf.db(5), Port vlan_mode): access takes a tag and no
// trunks, trunk takes trunks and no tag, native-tagged and native-untagged
// need the native VLAN as tag and may take trunks.
func validateVLANMode(v VFConfig, vp string, switchdev bool, add func(string, any, string, ...any)) {
	if !switchdev {
		if v.VLANMode != "" {
			add(vp+".vlan_mode", v.VLANMode, "needs eswitch switchdev (it goes on the representor's OVS port)")
		}
		if len(v.Trunks) > 0 {
			add(vp+".trunks", fmt.Sprint(v.Trunks), "needs eswitch switchdev (they go on the representor's OVS port)")
		}
		return
	}
	switch v.VLANMode {
	case "", "access": // access without vlan: untagged frames only (OVS's VLAN 0)
		if len(v.Trunks) > 0 {
			add(vp+".trunks", fmt.Sprint(v.Trunks), "are not allowed with vlan_mode access (set vlan_mode trunk, native-tagged or native-untagged)")
		}
	case "trunk":
		if v.VLAN != 0 {
			add(vp+".vlan", v.VLAN, "is not allowed with vlan_mode trunk (use native-tagged or native-untagged for a native VLAN)")
		}
	case "native-tagged", "native-untagged":
		if v.VLAN == 0 {
			add(vp+".vlan", v.VLAN, "is required with vlan_mode %s (the native VLAN)", v.VLANMode)
		}
	default:
		add(vp+".vlan_mode", v.VLANMode, "must be access, trunk, native-tagged or native-untagged")
	}
	seen := map[int]int{}
	for i, t := range v.Trunks {
		tp := fmt.Sprintf("%s.trunks[%d]", vp, i)
		if t < 1 || t > 4094 {
			add(tp, t, "must be a VLAN 1-4094")
		} else if j, ok := seen[t]; ok {
			add(tp, t, "is already listed at %s.trunks[%d]", vp, j)
		}
		seen[t] = i
	}
}

// validateBond checks a switchdev group's bond; what depends on the mode,
// miimon or the number of PFs (pfsOK) is checked only when those are valid.
func (c *Config) validateBond(g *Group, p string, pfsOK bool, add func(string, any, string, ...any)) {
	b := g.Bond
	modeOK := bondModes[b.Mode]
	miimonOK := b.Miimon >= 1 && b.Miimon <= 10000
	if err := eswitch.ValidIfName(b.Name); err != nil {
		add(p+".bond.name", b.Name, "is not a valid interface name (1-15 characters, no '/')")
	}
	if !modeOK {
		add(p+".bond.mode", b.Mode, "must be active-backup, balance-xor or 802.3ad (the only modes that enter hardware LAG)")
	}
	if !miimonOK {
		add(p+".bond.miimon", b.Miimon, "must be 1-10000 ms")
	}
	switch b.LacpRate {
	case "", "slow", "fast":
		if b.LacpRate != "" && modeOK && b.Mode != "802.3ad" {
			add(p+".bond.lacp_rate", b.LacpRate, "only applies to mode 802.3ad")
		}
	default:
		add(p+".bond.lacp_rate", b.LacpRate, "must be slow or fast")
	}
	if b.UpDelay < 0 || b.UpDelay > maxBondDelay {
		add(p+".bond.updelay", b.UpDelay, "must be 0-%d ms", maxBondDelay)
	} else if miimonOK && b.UpDelay%b.Miimon != 0 {
		add(p+".bond.updelay", b.UpDelay, "must be a multiple of bond.miimon (%d ms): the kernel rounds it down", b.Miimon)
	}
	if b.DownDelay < 0 || b.DownDelay > maxBondDelay {
		add(p+".bond.downdelay", b.DownDelay, "must be 0-%d ms", maxBondDelay)
	} else if miimonOK && b.DownDelay%b.Miimon != 0 {
		add(p+".bond.downdelay", b.DownDelay, "must be a multiple of bond.miimon (%d ms): the kernel rounds it down", b.Miimon)
	}
	if pfsOK && (b.MinLinks < 0 || b.MinLinks > len(g.PFs)) {
		add(p+".bond.min_links", b.MinLinks, "must be 0-%d (the bond's slaves are the group's %d PFs; more keeps its carrier off)", len(g.PFs), len(g.PFs))
	}
	if b.Primary != "" {
		switch {
		case !modeOK:
		case b.Mode != "active-backup":
			add(p+".bond.primary", b.Primary, "only applies to mode active-backup")
		case g.PrimaryIndex() < 0:
			add(p+".bond.primary", b.Primary, "is not one of the group's pfs (%s)", strings.Join(g.PFs, ", "))
		}
	}
	switch b.AdSelect {
	case "", "stable", "bandwidth", "count":
		if b.AdSelect != "" && modeOK && b.Mode != "802.3ad" {
			add(p+".bond.ad_select", b.AdSelect, "only applies to mode 802.3ad")
		}
	default:
		add(p+".bond.ad_select", b.AdSelect, "must be stable, bandwidth or count")
	}
	if b.XmitHashPolicy != "" {
		if !hashPolicies[b.XmitHashPolicy] {
			add(p+".bond.xmit_hash_policy", b.XmitHashPolicy, "must be layer2, layer2+3, layer3+4, encap2+3, encap3+4 or vlan+srcmac")
		} else if b.Mode == "active-backup" {
			add(p+".bond.xmit_hash_policy", b.XmitHashPolicy, "does not apply to mode active-backup")
		}
	}
}

// ValidateConfig is a group's `validate:` section: defaults for the
// traffic, failover and RDMA checks (flags override them).
type ValidateConfig struct {
	Peer     string        `mapstructure:"peer"`      // iperf3 server to run against
	Server   bool          `mapstructure:"server"`    // be the iperf3 server instead
	Duration time.Duration `mapstructure:"duration"`  // traffic duration (default 10s)
	Parallel int           `mapstructure:"parallel"`  // iperf3 -P (default 4 in active-active modes)
	MinShare float64       `mapstructure:"min_share"` // share a carrying slave must reach (default 0.05)
	MaxGap   time.Duration `mapstructure:"max_gap"`   // longest tolerated failover pause (0: report only)
	RDMAPeer string        `mapstructure:"rdma_peer"` // ib_send_bw server over the bond
	RDMATool string        `mapstructure:"rdma_tool"` // ib_send_bw (default), rping, ucmatose or ibv_rc_pingpong
	RoCE     bool          `mapstructure:"roce"`      // RDMA devices are required (fail rather than skip)
	RoCEMode string        `mapstructure:"roce_mode"` // expected default RoCE mode: v1 or v2
	// OVNFrom and OVNTo are the OVN traffic check's logical switch ports
	// (groups with ovn): from one of the group's ovn_port (default: the
	// first) to a port on this chassis or another.
	OVNFrom string `mapstructure:"ovn_from"`
	OVNTo   string `mapstructure:"ovn_to"`
}

var hostnameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$`)
})

// Check validates the section at path p.
func (v *ValidateConfig) Check(p string, add func(string, any, string, ...any)) {
	if v.Peer != "" && net.ParseIP(v.Peer) == nil && !hostnameRE().MatchString(v.Peer) {
		add(p+".peer", v.Peer, "is not an address or host name")
	}
	if v.RDMAPeer != "" && net.ParseIP(v.RDMAPeer) == nil && !hostnameRE().MatchString(v.RDMAPeer) {
		add(p+".rdma_peer", v.RDMAPeer, "is not an address or host name")
	}
	if v.Duration < 0 {
		add(p+".duration", v.Duration, "must be positive")
	}
	if v.Parallel < 0 || v.Parallel > 128 {
		add(p+".parallel", v.Parallel, "must be 1-128")
	}
	if v.MinShare < 0 || v.MinShare >= 0.5 {
		add(p+".min_share", v.MinShare, "must be in [0, 0.5)")
	}
	if v.MaxGap < 0 {
		add(p+".max_gap", v.MaxGap, "must be positive")
	}
	switch v.RDMATool {
	case "", "ib_send_bw", "rping", "ucmatose", "ibv_rc_pingpong":
	default:
		add(p+".rdma_tool", v.RDMATool, "must be ib_send_bw, rping, ucmatose or ibv_rc_pingpong")
	}
	if v.RoCEMode != "" {
		if _, err := validate.ParseRoCEMode(v.RoCEMode); err != nil {
			add(p+".roce_mode", v.RoCEMode, "must be v1 or v2")
		}
	}
}

// validateVFPolicy checks a VF's legacy policy settings (trust, spoofchk,
// link_state, min/max_tx_rate, qos; vlan in a legacy group). A switchdev
// group refuses them: mlx5 answers EOPNOTSUPP for them there (a rate
// through the PF programs the vport QoS that devlink-rate owns in
// switchdev), and each message names the switchdev way. With an unknown
// mode only the checks of both modes run.
func validateVFPolicy(mode string, vp string, v VFConfig, add func(string, any, string, ...any)) {
	switchdev, legacy := mode == eswitch.ModeSwitchdev, mode == eswitch.ModeLegacy
	const eopnotsupp = "is a legacy (eswitch legacy) VF setting: mlx5 returns EOPNOTSUPP for it in switchdev"
	if switchdev {
		na := "not applicable in switchdev: the eswitch's OVS flows decide what a VF may send, and the representor's link state is the VF's"
		if v.Trust != nil {
			add(vp+".trust", *v.Trust, "%s; %s", eopnotsupp, na)
		}
		if v.Spoofchk != nil {
			add(vp+".spoofchk", *v.Spoofchk, "%s; %s", eopnotsupp, na)
		}
		if v.LinkState != "" {
			add(vp+".link_state", v.LinkState, "%s; %s", eopnotsupp, na)
		}
		rate := "is a legacy (eswitch legacy) VF setting through the PF; in switchdev the VF's rate is set with devlink-rate (mlx5 programs the same vport QoS either way; vflag sets it in one place): use %s (Mbit/s) instead"
		if v.MaxTxRate != 0 {
			add(vp+".max_tx_rate", v.MaxTxRate, rate, vp+".tx_max")
		}
		if v.MinTxRate != 0 {
			add(vp+".min_tx_rate", v.MinTxRate, rate, vp+".tx_share")
		}
		if v.QoS != 0 {
			add(vp+".qos", v.QoS, "%s (VF VLAN/QoS through the PF); in switchdev the VLAN goes on the representor's OVS port (%s.vlan, trunks, vlan_mode)", eopnotsupp, vp)
		}
	}
	if v.VLAN < 0 || v.VLAN > 4094 {
		add(vp+".vlan", v.VLAN, "must be 0 (untagged) or 1-4094")
	}
	if v.QoS < 0 || v.QoS > 7 {
		add(vp+".qos", v.QoS, "must be an 802.1p priority 0-7")
	} else if v.QoS != 0 && v.VLAN == 0 && legacy {
		add(vp+".qos", v.QoS, "needs vlan (the priority goes in the VF's VLAN tag)")
	}
	switch v.LinkState {
	case "", eswitch.VFLinkAuto, eswitch.VFLinkEnable, eswitch.VFLinkDisable:
	default:
		add(vp+".link_state", v.LinkState, "must be auto, enable or disable (or empty to leave it)")
	}
	if v.MinTxRate < 0 || v.MinTxRate > math.MaxUint32 {
		add(vp+".min_tx_rate", v.MinTxRate, "must be a rate in Mbit/s, 0-%d (0: none)", uint32(math.MaxUint32))
	}
	if v.MaxTxRate < 0 || v.MaxTxRate > math.MaxUint32 {
		add(vp+".max_tx_rate", v.MaxTxRate, "must be a rate in Mbit/s, 0-%d (0: no limit)", uint32(math.MaxUint32))
	}
	if v.MinTxRate > 0 && v.MaxTxRate > 0 && v.MinTxRate > v.MaxTxRate {
		add(vp+".min_tx_rate", v.MinTxRate, "is above max_tx_rate %d", v.MaxTxRate)
	}
}

// Parse decodes a config file's YAML as cmd/vflag's loader does (see
// Decode), applies the defaults and validates. A YAML syntax error is a
// *cfgdecode.SyntaxError naming the line. cmd/vflag reads files through
// viper (VFLAG_* overrides) and then calls Decode; tests and tools use Parse.
func Parse(data []byte) (*Config, error) {
	raw, err := cfgdecode.YAML(data)
	if err != nil {
		return nil, err
	}
	return Decode(raw)
}

// Decode decodes a config's settings (YAML decoded into maps) into a
// Config, applies the defaults and validates. Unknown keys are errors, a
// duration needs a unit ("30s"), a value of the wrong type is an error
// naming its field and value; when decoding fails, its errors alone are
// returned (validating what was not read would add errors that only
// follow from them). Every error is a FieldError in Errors.
func Decode(raw map[string]any) (*Config, error) {
	var c Config
	if err := cfgdecode.Decode(raw, &c, ""); err != nil {
		return nil, err
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
