package ovs

// OwnerKey is the external_ids key that marks rows vflag created; its value is
// the LAG group name.
const OwnerKey = "vflag-owner"

// HWOffloadKey is the Open_vSwitch other_config key for hardware offload.
const HWOffloadKey = "hw-offload"

// PortSpec is one port vflag wants on the bridge.
type PortSpec struct {
	Name string
	Tag  int // 0 = untagged access; 1..4094 VLAN tag
	// VLANMode is Port.vlan_mode: "" leaves the column empty (OVS: access
	// with a tag, trunk without), else access, trunk, native-tagged or
	// native-untagged (ovs-vswitchd.conf.db(5)).
	VLANMode string
	// Trunks is Port.trunks: the VLANs a trunk or native-* port carries
	// (empty: all, or none with a tag). Compared as a set.
	Trunks []int
	// MTURequest is Interface.mtu_request of the port's interface (0: the
	// column stays empty and OVS leaves the netdev's MTU alone).
	MTURequest int
	// Type is Interface.type ("" a system netdev, vxlan, geneve) and
	// Options its options (a tunnel's remote_ip, local_ip, key, dst_port):
	// a typed port of the owner's whose interface differs is updated in
	// place (an untyped port's interface type is left alone).
	Type    string
	Options map[string]string
	// Bind, when not nil, are the OVN binding keys (BindKeys) the port's
	// Interface external_ids must hold: set with a new port, and on a port
	// of the owner's whose BindKeys differ, rewritten (a key of BindKeys
	// that Bind lacks removed) in place; the Interface's other keys
	// (ovn-controller's ovn-installed, the owner's mark) are left alone.
	// nil: the binding keys are left as they are.
	Bind map[string]string
}

// BindKeys are the Interface external_ids keys of an OVN binding that a
// PortSpec's Bind manages: the logical port, the VF's MAC, the domain's
// UUID and the status ovn-controller reads.
var BindKeys = []string{"iface-id", "attached-mac", "vm-uuid", "iface-status"}

// OVN integration bridge settings (ovn-controller(8): the integration
// bridge): a bridge created for OVN has them.
const (
	FailModeSecure    = "secure"
	DisableInBandKey  = "disable-in-band"
	OVNInstalledKey   = "ovn-installed"
	OVNInstalledValue = "true"
	IfaceIDKey        = "iface-id"
)

// BridgeSpec is the bridge vflag wants.
type BridgeSpec struct {
	Owner        string // LAG group name; rows vflag creates carry external_ids vflag-owner=<Owner>
	Bridge       string
	DatapathType string // "" (system) or "netdev"; only used when creating the bridge
	Ports        []PortSpec
	HWOffload    bool // want Open_vSwitch other_config:hw-offload=true
	// PlanMoves (Plan only): a port of the owner's on another bridge counts
	// as one to add, as it will be once the caller removed it from there
	// first (a renamed bridge). Ensure always refuses such a port.
	PlanMoves bool
	// MoveOthers: a port with a wanted name that vflag made for another
	// owner (another group's, or one of a group the config dropped: it
	// carries another vflag-owner mark) is taken off the bridge holding it
	// and made again on this one as the owner's, in the same transaction
	// (after a reboot that gave one group's representors the names another
	// group's had). Ports without a vflag-owner mark stay Foreign.
	MoveOthers bool
	// Partial: Ports are only some of the owner's ports on the bridge (the
	// qemu hook adding one representor); the others are left alone instead
	// of being removed as stale.
	Partial bool
	// Integration: the bridge, when Ensure creates it, is an OVN
	// integration bridge: fail_mode secure and other_config
	// disable-in-band=true (an existing bridge is left as it is).
	Integration bool
}

// Record is what Ensure changed, enough for Undo without the config (it is
// stored as JSON in a journal). Each Ensure returns the part it did; the
// caller merges records of the same owner and bridge (OR the bools, union the
// ports, keep the first PriorHWOffload with HWOffloadSet).
type Record struct {
	Owner          string   `json:"owner"`
	Bridge         string   `json:"bridge"`
	BridgeCreated  bool     `json:"bridge_created"`
	Ports          []string `json:"ports"`            // ports vflag created
	HWOffloadSet   bool     `json:"hw_offload_set"`   // vflag changed hw-offload
	PriorHWOffload *string  `json:"prior_hw_offload"` // value before (nil = key absent)
}

// Change is the difference between a BridgeSpec and the database.
type Change struct {
	CreateBridge    bool
	AddPorts        []string
	RemovePorts     []string // vflag-owned ports on the bridge that the spec no longer lists (sorted)
	Retag           []string // vflag-owned ports whose tag, vlan_mode or trunks differ from the spec
	SetMTU          []string // vflag-owned ports whose interface's mtu_request differs from the spec
	SetOptions      []string // vflag-owned ports whose interface's type or options differ from the spec
	SetBind         []string // vflag-owned ports whose interface's OVN binding keys differ from the spec's Bind
	SetHWOffload    bool
	PriorHWOffload  *string  // current value when SetHWOffload (nil = key absent)
	RestartRequired bool     // the spec wants hw-offload off while it is "true": left alone, needs an OVS restart
	Foreign         []string // ports with a wanted name that exist but vflag does not own: left alone, reported
	// Moved are the ports of AddPorts that the change takes from another
	// owner of vflag's (BridgeSpec.MoveOthers), in the order of AddPorts.
	Moved []Move
}

// Move is a port of another owner of vflag's that a change takes off the
// bridge holding it to make it again on its own bridge as its owner's.
type Move struct {
	Port   string `json:"port"`
	Bridge string `json:"bridge"` // the bridge holding it now
	Owner  string `json:"owner"`  // its vflag-owner now
}

// Empty reports whether the change needs no write. Foreign and
// RestartRequired are reports, not writes: a change holding only them is
// empty.
func (c Change) Empty() bool {
	return !c.CreateBridge && len(c.AddPorts) == 0 && len(c.RemovePorts) == 0 && len(c.Retag) == 0 && len(c.SetMTU) == 0 && len(c.SetOptions) == 0 && len(c.SetBind) == 0 && !c.SetHWOffload
}

// PortStatus is one port of a bridge as OVS sees it.
type PortStatus struct {
	Name       string
	Tag        int               // 0 = untagged
	VLANMode   string            // Port.vlan_mode, "" unset
	Trunks     []int             // Port.trunks, sorted
	MTURequest int               // Interface.mtu_request, 0 unset
	Type       string            // Interface.type, "" a system netdev
	Options    map[string]string // Interface.options (a tunnel's), nil none
	MTU        int               // Interface.mtu as ovs-vswitchd reports it, 0 unknown
	OFPort     int               // OpenFlow port number; -1 = the interface failed; 0 = not assigned yet
	Error      string            // Interface.error, "" if none
	Owner      string            // external_ids vflag-owner, "" if not vflag's
}

// BridgeStatus is a bridge as OVS sees it.
type BridgeStatus struct {
	Bridge    string
	Exists    bool
	Owner     string
	Ports     []PortStatus // sorted by name, including the bridge's internal port
	HWOffload string       // "true", "false", "" unset
	TCPolicy  string       // other_config:tc-policy, "" unset
	MaxIdle   string       // other_config:max-idle (ms), "" unset
}

// WithoutOFPort returns the names of owner's ports that have no OpenFlow
// port number yet (OFPort 0: not assigned; -1: the interface could not be
// opened), in the order of Ports.
func (s BridgeStatus) WithoutOFPort(owner string) []string {
	var out []string
	for _, p := range s.Ports {
		if p.Owner == owner && owner != "" && p.OFPort <= 0 {
			out = append(out, p.Name)
		}
	}
	return out
}

// Columns tells whether a port already has the columns s asks of it: the
// VLAN columns (tag, vlan_mode, trunks as a set) and mtu_request.
func (s PortSpec) Columns(p PortStatus) bool {
	return p.Tag == s.Tag && p.VLANMode == s.VLANMode && sameInts(p.Trunks, s.Trunks) && p.MTURequest == s.MTURequest
}
