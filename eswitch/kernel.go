package eswitch

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Devlink names a devlink instance: "pci/0000:61:00.0", "netdevsim/netdevsim10".
type Devlink struct {
	Bus    string `json:"bus"`
	Device string `json:"device"`
}

func (d Devlink) String() string { return d.Bus + "/" + d.Device }

// Port flavours as devlink prints them.
const (
	FlavourPhysical = "physical"
	FlavourPCIPF    = "pcipf"
	FlavourPCIVF    = "pcivf"
	FlavourVirtual  = "virtual"
)

// Eswitch modes as devlink prints them.
const (
	ModeLegacy    = "legacy"
	ModeSwitchdev = "switchdev"
)

// Port is one devlink port ("devlink port show").
type Port struct {
	Devlink  Devlink `json:"devlink"`
	Index    uint32  `json:"index"`
	Netdev   string  `json:"netdev,omitempty"`
	Flavour  string  `json:"flavour"`
	Number   uint32  `json:"number,omitempty"` // physical: port_number
	PfNumber uint16  `json:"pfnum,omitempty"`  // pcipf, pcivf
	VfNumber uint16  `json:"vfnum,omitempty"`  // pcivf
}

// VFInfo is one VF as its PF reports it over rtnetlink ("ip link show $pf", the "vf N" lines).
type VFInfo struct {
	ID  int    `json:"id"`
	MAC string `json:"mac"`
	VFPolicy
}

// VFPolicy is a VF's legacy administrative policy as its PF reports it
// (IFLA_VFINFO_LIST: IFLA_VF_VLAN, IFLA_VF_TRUST, IFLA_VF_SPOOFCHK,
// IFLA_VF_LINK_STATE, IFLA_VF_RATE); "ip link show $pf" prints it as
// "vf N ... vlan V, qos Q, tx rate ..., max_tx_rate M Mbps, min_tx_rate m
// Mbps, spoof checking on|off, link-state auto|enable|disable, trust on|off".
type VFPolicy struct {
	Vlan      int    `json:"vlan"`
	Qos       int    `json:"qos"`
	Trust     bool   `json:"trust"`
	Spoofchk  bool   `json:"spoofchk"`
	LinkState string `json:"link_state"`  // VF link states: auto, enable, disable
	MinTxRate int    `json:"min_tx_rate"` // Mbit/s, 0: no guarantee
	MaxTxRate int    `json:"max_tx_rate"` // Mbit/s, 0: no limit
}

// VFPolicyFields are the parts of a VF policy set one by one ("ip link set
// $pf vf $n ..."), in the order vflag sets and shows them.
var VFPolicyFields = []string{"vlan", "trust", "spoofchk", "link_state", "rate"}

// Field shows one part of the policy ("vlan 100 qos 3", "trust on",
// "spoofchk off", "link-state auto", "min_tx_rate 0 max_tx_rate 100"), as
// status, validate and the steps' summaries print it.
func (p VFPolicy) Field(name string) string {
	switch name {
	case "vlan":
		return fmt.Sprintf("vlan %d qos %d", p.Vlan, p.Qos)
	case "trust":
		return "trust " + onOff(p.Trust)
	case "spoofchk":
		return "spoofchk " + onOff(p.Spoofchk)
	case "link_state":
		ls := p.LinkState
		if ls == "" {
			ls = "-"
		}
		return "link-state " + ls
	case "rate":
		return fmt.Sprintf("min_tx_rate %d max_tx_rate %d", p.MinTxRate, p.MaxTxRate)
	}
	return name + " ?"
}

// String is every field, in VFPolicyFields order.
func (p VFPolicy) String() string {
	parts := make([]string, len(VFPolicyFields))
	for i, f := range VFPolicyFields {
		parts[i] = p.Field(f)
	}
	return strings.Join(parts, " ")
}

// VF link states (IFLA_VF_LINK_STATE_AUTO, _ENABLE, _DISABLE).
const (
	VFLinkAuto    = "auto"
	VFLinkEnable  = "enable"
	VFLinkDisable = "disable"
)

// Link is one network interface as rtnetlink reports it ("ip -d link show $name").
type Link struct {
	Name      string   `json:"name"`
	Index     int      `json:"index"`
	Kind      string   `json:"kind,omitempty"` // "bond", "veth", ""
	Master    string   `json:"master,omitempty"`
	AdminUp   bool     `json:"admin_up"`
	OperState string   `json:"operstate"`
	MAC       string   `json:"mac"`
	Alias     string   `json:"alias,omitempty"`
	MTU       int      `json:"mtu,omitempty"`
	VFs       []VFInfo `json:"vfs,omitempty"`
}

// BondSpec is a bond as vflag creates it. AddBond sets the name, mode,
// miimon, lacp_rate, xmit_hash_policy and alias; the other options are
// written through sysfs (SetBondOption) once the bond exists.
type BondSpec struct {
	Name           string `json:"name"`
	Mode           string `json:"mode"`                       // active-backup | balance-xor | 802.3ad
	Miimon         int    `json:"miimon"`                     // ms
	LacpRate       string `json:"lacp_rate,omitempty"`        // slow | fast (802.3ad only)
	XmitHashPolicy string `json:"xmit_hash_policy,omitempty"` // layer2 | layer2+3 | layer3+4 | encap2+3 | encap3+4 (xor, 802.3ad)
	AdSelect       string `json:"ad_select,omitempty"`        // stable | bandwidth | count (802.3ad)
	MinLinks       int    `json:"min_links,omitempty"`        // carrier only with this many slaves up
	UpDelay        int    `json:"updelay,omitempty"`          // ms, a multiple of miimon
	DownDelay      int    `json:"downdelay,omitempty"`        // ms, a multiple of miimon
	Primary        string `json:"primary,omitempty"`          // preferred slave's netdev (active-backup)
	Alias          string `json:"alias,omitempty"`            // ifalias marking the owner
}

// ErrLinkNotFound is returned (wrapped) by Kernel.Link for an unknown interface.
var ErrLinkNotFound = errors.New("link not found")

// ErrNotSupported is returned (wrapped) when a device lacks a devlink
// parameter, an eswitch or an ethtool feature.
var ErrNotSupported = errors.New("not supported")

// Kernel is the netlink, devlink and ethtool surface vflag uses. The real
// implementation is Netlink; the simulated host implements it too. Errors
// from the kernel wrap the syscall.Errno it returned.
type Kernel interface {
	// EswitchMode reads the eswitch mode ("devlink dev eswitch show $dev").
	EswitchMode(d Devlink) (string, error)
	// SetEswitchMode changes it ("devlink dev eswitch set $dev mode $mode"); blocks until done.
	SetEswitchMode(d Devlink, mode string) error
	// Ports lists every devlink port ("devlink port show").
	Ports() ([]Port, error)
	// Param reads a driver parameter's runtime value ("devlink dev param show $dev name $name");
	// ErrNotSupported when the driver has no such parameter.
	Param(d Devlink, name string) (string, error)
	// SetParam sets it ("devlink dev param set $dev name $name value $v cmode runtime").
	SetParam(d Devlink, name, value string) error

	// Rates lists every devlink rate object, leaves and nodes
	// ("devlink port function rate show"); rates in bytes per second.
	Rates() ([]Rate, error)
	// SetRateLeaf sets a VF port's leaf tx_share and tx_max, 0 = none
	// ("devlink port function rate set pci/0000:61:00.0/1 tx_share 125000 tx_max 12500000").
	SetRateLeaf(d Devlink, port uint32, txShare, txMax uint64) error
	// SetRateLeafParent puts a leaf under a node, or under none for ""
	// ("devlink port function rate set pci/0000:61:00.0/1 parent tenant1" / "... noparent").
	// The kernel refuses a parent change while the leaf has one (EBUSY):
	// leave the old node first.
	SetRateLeafParent(d Devlink, port uint32, parent string) error
	// AddRateNode creates a rate node
	// ("devlink port function rate add pci/0000:61:00.0/tenant1 tx_share 0 tx_max 125000000").
	AddRateNode(d Devlink, name string, txShare, txMax uint64) error
	// SetRateNode sets a node's tx_share and tx_max
	// ("devlink port function rate set pci/0000:61:00.0/tenant1 tx_max 125000000").
	SetRateNode(d Devlink, name string, txShare, txMax uint64) error
	// DelRateNode deletes a rate node; EBUSY while it has children
	// ("devlink port function rate del pci/0000:61:00.0/tenant1").
	DelRateNode(d Devlink, name string) error

	// Link reads one interface ("ip -d link show $name"); ErrLinkNotFound if absent.
	Link(name string) (Link, error)
	// Links lists every interface ("ip -d link show").
	Links() ([]Link, error)
	// SetLinkUp sets the admin state ("ip link set $name up|down").
	SetLinkUp(name string, up bool) error
	// SetLinkMTU sets an interface's MTU ("ip link set $name mtu $mtu"); a
	// bond's MTU goes to its slaves too, and an enslaved port takes the
	// bond's (bond_change_mtu, bond_enslave).
	SetLinkMTU(name string, mtu int) error
	// SetVFMAC sets a VF's MAC through its PF ("ip link set $pf vf $vf mac $mac").
	SetVFMAC(pf string, vf int, mac net.HardwareAddr) error
	// SetVFVlan sets a VF's VLAN through its PF ("ip link set $pf vf $vf vlan $vlan").
	SetVFVlan(pf string, vf int, vlan int) error
	// SetVFVlanQos sets a VF's VLAN and 802.1p priority through its PF
	// ("ip link set $pf vf $vf vlan $vlan qos $qos"; vlan 0 qos 0: none).
	SetVFVlanQos(pf string, vf, vlan, qos int) error
	// SetVFTrust sets a VF's trust through its PF ("ip link set $pf vf $vf trust on|off").
	SetVFTrust(pf string, vf int, on bool) error
	// SetVFSpoofchk sets a VF's source MAC spoof checking through its PF
	// ("ip link set $pf vf $vf spoofchk on|off").
	SetVFSpoofchk(pf string, vf int, on bool) error
	// SetVFLinkState sets a VF's link state through its PF
	// ("ip link set $pf vf $vf state auto|enable|disable").
	SetVFLinkState(pf string, vf int, state string) error
	// SetVFRate sets a VF's transmit rates in Mbit/s through its PF, 0 for
	// none ("ip link set $pf vf $vf min_tx_rate $min max_tx_rate $max").
	SetVFRate(pf string, vf, minMbps, maxMbps int) error
	// AddBond creates a bond, down, without slaves
	// ("ip link add $name type bond mode $mode miimon $ms ...; ip link set $name alias $alias").
	AddBond(b BondSpec) error
	// DeleteLink removes an interface ("ip link del $name").
	DeleteLink(name string) error
	// SetMaster enslaves slave to master, or releases it when master is ""
	// ("ip link set $slave master $master" / "ip link set $slave nomaster").
	SetMaster(slave, master string) error

	// Feature reads an ethtool feature ("ethtool -k $name | grep $feature").
	Feature(name, feature string) (bool, error)
	// SetFeature sets it ("ethtool -K $name $feature on|off").
	SetFeature(name, feature string, on bool) error
}

// LinksUpSetter is what a Kernel may add to set the admin state of many
// interfaces in one call: the simulated host then writes its state once
// instead of once per interface. SetLinksUp behaves as SetLinkUp called
// for each name in order: it stops at the first error and returns how many
// names succeeded before it.
type LinksUpSetter interface {
	SetLinksUp(names []string, up bool) (int, error)
}

// SetLinksUp sets the admin state of names in order through k, in one call
// where k is a LinksUpSetter, else one SetLinkUp per name. It stops at the
// first error and returns how many names succeeded before it (names[n]
// failed).
func SetLinksUp(k Kernel, names []string, up bool) (int, error) {
	if b, ok := k.(LinksUpSetter); ok {
		return b.SetLinksUp(names, up)
	}
	for i, n := range names {
		if err := k.SetLinkUp(n, up); err != nil {
			return i, err
		}
	}
	return len(names), nil
}

// ModeOf is the eswitch mode of pf's device, "" when it cannot be read
// ("devlink dev eswitch show $dev").
func ModeOf(k Kernel, pf PF) string {
	m, _ := k.EswitchMode(pf.Devlink)
	return m
}
