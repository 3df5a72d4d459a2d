package sim

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strconv"
)

// state is the whole simulated host, persisted as JSON. Times are absolute
// wall-clock Unix nanoseconds, so asynchronous changes progress between
// processes. Things that happen later (a VF that is still being created,
// a LAG that is activating, their dmesg lines) are stored with the time at
// which they become visible; readers filter by "now", so reading never
// changes the state.
type state struct {
	Version     int                `json:"version"`
	Gen         uint64             `json:"gen"`
	Spec        Spec               `json:"spec"`
	NICs        []*nicState        `json:"nics"`
	Netdevs     map[string]*netdev `json:"netdevs"`
	NextIfindex int                `json:"next_ifindex"`
	MACSeq      int                `json:"mac_seq"`
	Dmesg       []logEntry         `json:"dmesg"`
	RDMA        *rdmaState         `json:"rdma,omitempty"` // rdma.go
	// Blocks are the shared tc blocks' filters, by block index (tc.go).
	Blocks map[uint32][]simFilter `json:"tc_blocks,omitempty"`
	// Procs are the simulated processes, NextPID the next pid (vfio.go).
	Procs   []*simProc `json:"procs,omitempty"`
	NextPID int        `json:"next_pid,omitempty"`
	// Underlay holds routes and neighbour entries (underlay.go).
	Underlay underlayState `json:"underlay,omitzero"`
	// BootID is /proc/sys/kernel/random/boot_id: a new one each time the
	// host is made (a reboot, sim.Host.Reset); none in hosts saved before it.
	BootID string `json:"boot_id,omitempty"`

	// viewing is set while Host.view runs a read on the state, which then
	// cannot change: pci looks addresses up in pciIdx, built on the first
	// lookup of a view and kept until update changes the state.
	viewing bool
	pciIdx  map[string][]pciDev
}

type nicState struct {
	Name     string `json:"name"`
	Driver   string `json:"driver"`
	SwitchID string `json:"switch_id"`
	TotalVFs int    `json:"total_vfs"`
	RDMA     bool   `json:"rdma,omitempty"`
	// NoSwitchLACP: the switch ports behind the PFs run no LACP (spec
	// switch_lacp: off).
	NoSwitchLACP bool `json:"no_switch_lacp,omitempty"`
	// Names are the names the NIC's next netdevs take (Host.GiveNames).
	Names []string `json:"names,omitempty"`
	// NoVFOps: the VF settings the driver has no ndo_set_vf_* for (spec
	// no_vf_ops).
	NoVFOps []string `json:"no_vf_ops,omitempty"`
	// NoLAGDebugfs: mlx5 shows no lag/ in debugfs (spec lag_debugfs: off).
	NoLAGDebugfs bool `json:"no_lag_debugfs,omitempty"`
	// NoPortSelFT: the NIC lacks the port_select_flow_table capability
	// (spec port_select_flow_table: off): no hash port selection.
	NoPortSelFT bool `json:"no_port_sel_ft,omitempty"`
	// TrackerHash is the xmit_hash_policy mlx5 last took from the bond of
	// the NIC's PFs: at an enslave only (lag/lag.c
	// mlx5_handle_changeupper_event reads lag_upper_info->hash_type when
	// linking; a live write of the bond's option sends no such event).
	TrackerHash string     `json:"tracker_hash,omitempty"`
	PFs         []*pfState `json:"pfs"`
	LAG         lagState   `json:"lag"`
}

type pfState struct {
	PCI          string      `json:"pci"`
	Index        int         `json:"index"` // port number in the NIC, also vhca_id
	Netdev       string      `json:"netdev"`
	Offset       int         `json:"offset"`
	Stride       int         `json:"stride"`
	Driver       string      `json:"driver"`
	Override     string      `json:"override,omitempty"`
	Mode         string      `json:"mode"`
	Busy         *modeChange `json:"busy,omitempty"`
	NumVFs       int         `json:"numvfs"`
	Autoprobe    bool        `json:"autoprobe"`
	FlowSteering string      `json:"flow_steering_mode"`
	// EncapMode is the eswitch's encap mode; "" is basic (underlay.go).
	EncapMode string     `json:"encap_mode,omitempty"`
	VFs       []*vfState `json:"vfs,omitempty"`
	// RateNodes are the devlink rate nodes of the PF's devlink instance (rate.go).
	RateNodes []*rateNode `json:"rate_nodes,omitempty"`
}

// modeChange is an eswitch mode change in progress (the devlink call blocks).
type modeChange struct {
	Target string `json:"target"`
	Until  int64  `json:"until"`
}

type vfState struct {
	Index    int    `json:"index"`
	PCI      string `json:"pci"`
	ReadyAt  int64  `json:"ready_at"` // the PCI device and virtfn link appear then
	Driver   string `json:"driver,omitempty"`
	Override string `json:"override,omitempty"`
	MAC      string `json:"mac"` // administrative MAC set through the PF
	Vlan     int    `json:"vlan,omitempty"`
	// The rest of the VF's legacy policy set through the PF (KERNEL-FACTS
	// §8); zero values are a new VF's (mlx5: spoof checking off, trust
	// off, link-state auto, no rates). LinkState "" reads as auto.
	Qos       int    `json:"qos,omitempty"`
	Trust     bool   `json:"trust,omitempty"`
	Spoofchk  bool   `json:"spoofchk,omitempty"`
	LinkState string `json:"link_state,omitempty"`
	MinTxRate int    `json:"min_tx_rate,omitempty"`
	MaxTxRate int    `json:"max_tx_rate,omitempty"`
	Netdev    string `json:"netdev,omitempty"` // VF netdev while bound to the NIC driver
	Rep       string `json:"rep,omitempty"`    // representor while the PF is in switchdev
	// Leaf is the devlink rate leaf of the VF's port (rate.go); it is
	// created with the representor and goes with it.
	Leaf rateLeaf `json:"rate_leaf,omitzero"`
}

// Roles of a netdev.
const (
	roleLo   = "lo"
	rolePF   = "pf"
	roleVF   = "vf"
	roleRep  = "rep"
	roleBond = "bond"
)

type netdev struct {
	Name    string     `json:"name"`
	Ifindex int        `json:"ifindex"`
	Role    string     `json:"role"`
	NIC     int        `json:"nic"`
	PF      int        `json:"pf"`
	VF      int        `json:"vf"`
	PermMAC string     `json:"perm_mac"`
	MAC     string     `json:"mac"`
	AdminUp bool       `json:"admin_up"`
	Alias   string     `json:"alias,omitempty"`
	MTU     int        `json:"mtu"`
	OrigMTU int        `json:"orig_mtu,omitempty"` // a slave's MTU before the enslave
	Master  string     `json:"master,omitempty"`
	HWTC    bool       `json:"hw_tc_offload,omitempty"`
	ReadyAt int64      `json:"ready_at,omitempty"`
	Bond    *bondState `json:"bond,omitempty"`
	Stats   *netStats  `json:"stats,omitempty"` // counters.go
	// SWStats are an mlx5 representor's own rings (ethtool -S
	// rx_packets/tx_packets: the slow path); its Stats are then the VF's
	// vport counters (counters.go).
	SWStats *netStats `json:"sw_stats,omitempty"`
	// Ingress is the netdev's ingress qdisc (tc.go); nil: none.
	Ingress *ingressState `json:"ingress,omitempty"`
	// Addrs are the netdev's addresses with their prefix; Parent and
	// VLANID a VLAN interface's (underlay.go).
	Addrs  []string `json:"addrs,omitempty"`
	Parent string   `json:"parent,omitempty"`
	VLANID int      `json:"vlan_id,omitempty"`
}

type bondState struct {
	Mode           string   `json:"mode"`
	Miimon         int      `json:"miimon"`
	LacpRate       string   `json:"lacp_rate"`
	XmitHashPolicy string   `json:"xmit_hash_policy"`
	AdSelect       string   `json:"ad_select,omitempty"` // "": stable (the default)
	MinLinks       int      `json:"min_links,omitempty"`
	UpDelay        int      `json:"updelay,omitempty"`   // in miimon intervals, as the kernel keeps it
	DownDelay      int      `json:"downdelay,omitempty"` // in miimon intervals
	Slaves         []string `json:"slaves,omitempty"`
	ActiveSlave    string   `json:"active_slave,omitempty"`
	// Primary is params.primary: the name written to primary, kept while
	// that interface is not a slave (bond_option_primary_set).
	Primary   string `json:"primary,omitempty"`
	RandomMAC bool   `json:"random_mac"`
}

// lagState is the hardware LAG of a 2-PF NIC (KERNEL-FACTS §5).
type lagState struct {
	Bond       string `json:"bond,omitempty"` // set while eligible
	EligibleAt int64  `json:"eligible_at,omitempty"`
	ActiveAt   int64  `json:"active_at,omitempty"`
	Failed     bool   `json:"failed,omitempty"` // VFs were bound when it became eligible
	// Mode is "" for the bond's LAG (type switchdev), or a LAG the bond
	// has no part in: lagMultipath (an IPv4 multipath route over both PFs,
	// lag/mp.c) or lagMPESW (devlink param esw_multiport, lag/mpesw.c).
	Mode string `json:"mode,omitempty"`
	// Hash is the bond's xmit_hash_policy the LAG's port selection was
	// made with (the tracker's hash_type at activation).
	Hash string `json:"hash,omitempty"`
}

// The LAG modes other than the bond's (lagState.Mode).
const (
	lagMultipath = "multipath"
	lagMPESW     = "multiport_eswitch"
)

type logEntry struct {
	At  int64  `json:"at"`
	Msg string `json:"msg"`
	Tag string `json:"tag,omitempty"` // lets a pending entry be withdrawn
}

const maxDmesg = 2000

// bootID is a boot id (the kernel's format: a random UUID) made from the
// time the host is made.
func bootID(now int64) string {
	h := sha256.Sum256([]byte(strconv.FormatInt(now, 10)))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func newState(spec *Spec, now int64) *state {
	st := &state{
		Version:     stateVersion,
		Spec:        *spec,
		Netdevs:     map[string]*netdev{},
		NextIfindex: 1,
		BootID:      bootID(now),
	}
	st.addNetdev(&netdev{Name: "lo", Role: roleLo, MAC: "00:00:00:00:00:00", PermMAC: "00:00:00:00:00:00", AdminUp: true, MTU: 65536})
	for _, ns := range spec.NICs {
		nic := &nicState{Name: ns.Name, Driver: ns.Driver, SwitchID: ns.SwitchID, TotalVFs: ns.TotalVFs, RDMA: ns.RDMA, NoSwitchLACP: ns.SwitchLACP == "off", NoVFOps: ns.NoVFOps, NoLAGDebugfs: ns.LAGDebugfs == "off", NoPortSelFT: ns.PortSelectFlowTable == "off"}
		var addrs []bdf
		for _, p := range ns.PFs {
			a, _ := parseBDF(p.PCI)
			addrs = append(addrs, a)
		}
		offs := vfOffsets(addrs, ns.TotalVFs)
		for j, p := range ns.PFs {
			mac := p.MAC
			if mac == "" {
				mac = genMAC(mellanoxOUI, "pf/"+p.PCI)
			}
			nic.PFs = append(nic.PFs, &pfState{
				PCI: p.PCI, Index: j, Netdev: p.Netdev, Offset: offs[j], Stride: 1,
				Driver: ns.Driver, Mode: "legacy", Autoprobe: true, FlowSteering: "dmfs",
			})
			st.addNetdev(&netdev{Name: p.Netdev, Role: rolePF, NIC: len(st.NICs), PF: j, MAC: mac, PermMAC: mac, MTU: 1500})
		}
		st.NICs = append(st.NICs, nic)
	}
	return st
}

// fixup restores invariants of a loaded state (nil maps).
func (st *state) fixup() {
	if st.Netdevs == nil {
		st.Netdevs = map[string]*netdev{}
	}
}

func (st *state) addNetdev(nd *netdev) {
	nd.Ifindex = st.NextIfindex
	st.NextIfindex++
	st.Netdevs[nd.Name] = nd
}

// allocEthName picks the lowest free eth%d, as __dev_alloc_name does for a
// driver that registers "eth%d" (mlx5 representors and VF netdevs before udev).
// Names of netdevs still being created count as taken. A name given to a
// NIC (Host.GiveNames) goes to that NIC's next netdev, and to no other.
func (st *state) allocEthName(nic *nicState) string {
	for nic != nil && len(nic.Names) > 0 {
		n := nic.Names[0]
		nic.Names = nic.Names[1:]
		if _, taken := st.Netdevs[n]; !taken {
			return n
		}
	}
	given := map[string]bool{}
	for _, c := range st.NICs {
		for _, n := range c.Names {
			given[n] = true
		}
	}
	for i := 0; ; i++ {
		n := fmt.Sprintf("eth%d", i)
		if _, taken := st.Netdevs[n]; !taken && !given[n] {
			return n
		}
	}
}

func (st *state) randomMAC(what string) string {
	st.MACSeq++
	return genMAC(nil, fmt.Sprintf("%s/%d", what, st.MACSeq))
}

// log appends a kernel log line visible from at on.
func (st *state) log(at int64, tag, format string, args ...any) {
	st.Dmesg = append(st.Dmesg, logEntry{At: at, Msg: fmt.Sprintf(format, args...), Tag: tag})
	if len(st.Dmesg) > maxDmesg {
		st.Dmesg = append([]logEntry(nil), st.Dmesg[len(st.Dmesg)-maxDmesg:]...)
	}
}

// withdraw removes the log lines with tag that are not visible yet.
func (st *state) withdraw(now int64, tag string) {
	out := st.Dmesg[:0]
	for _, e := range st.Dmesg {
		if e.Tag == tag && e.At > now {
			continue
		}
		out = append(out, e)
	}
	st.Dmesg = out
}

// dmesg returns the lines visible at now, oldest first.
func (st *state) dmesg(now int64) []string {
	var es []logEntry
	for _, e := range st.Dmesg {
		if e.At <= now {
			es = append(es, e)
		}
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].At < es[j].At })
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Msg
	}
	return out
}

// --- lookups ---

func (vf *vfState) ready(now int64) bool { return now >= vf.ReadyAt }

func (nd *netdev) visible(now int64) bool { return now >= nd.ReadyAt }

// link returns a netdev that exists at now.
func (st *state) link(name string, now int64) *netdev {
	nd := st.Netdevs[name]
	if nd == nil || !nd.visible(now) {
		return nil
	}
	return nd
}

// visibleNetdevs returns the netdevs existing at now, by ifindex.
func (st *state) visibleNetdevs(now int64) []*netdev {
	var out []*netdev
	for _, nd := range st.Netdevs {
		if nd.visible(now) {
			out = append(out, nd)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ifindex < out[j].Ifindex })
	return out
}

// pciDev is one PCI function: a PF (vf == nil) or a VF.
type pciDev struct {
	nic *nicState
	pf  *pfState
	vf  *vfState
}

func (d pciDev) addr() string {
	if d.vf != nil {
		return d.vf.PCI
	}
	return d.pf.PCI
}

func (d pciDev) driver() string {
	if d.vf != nil {
		return d.vf.Driver
	}
	return d.pf.Driver
}

func (d pciDev) override() string {
	if d.vf != nil {
		return d.vf.Override
	}
	return d.pf.Override
}

// home is the directory of /sys/devices that holds the NIC's functions.
func (st *state) home(nic *nicState) string {
	return "/sys/devices/pci" + nic.PFs[0].PCI[:len("0000:00")] // validated "dddd:bb:dd.f"
}

// pci finds the PCI function with address addr existing at now.
func (st *state) pci(addr string, now int64) (pciDev, bool) {
	if st.viewing {
		if st.pciIdx == nil {
			st.pciIdx = map[string][]pciDev{}
			for _, nic := range st.NICs {
				for _, pf := range nic.PFs {
					st.pciIdx[pf.PCI] = append(st.pciIdx[pf.PCI], pciDev{nic: nic, pf: pf})
					for _, vf := range pf.VFs {
						st.pciIdx[vf.PCI] = append(st.pciIdx[vf.PCI], pciDev{nic: nic, pf: pf, vf: vf})
					}
				}
			}
		}
		// In the order of the scan below: the first that exists at now.
		for _, d := range st.pciIdx[addr] {
			if d.vf == nil || d.vf.ready(now) {
				return d, true
			}
		}
		return pciDev{}, false
	}
	for _, nic := range st.NICs {
		for _, pf := range nic.PFs {
			if pf.PCI == addr {
				return pciDev{nic: nic, pf: pf}, true
			}
			for _, vf := range pf.VFs {
				if vf.PCI == addr && vf.ready(now) {
					return pciDev{nic: nic, pf: pf, vf: vf}, true
				}
			}
		}
	}
	return pciDev{}, false
}

// pciDevs lists every PCI function existing at now, sorted by address.
func (st *state) pciDevs(now int64) []pciDev {
	var out []pciDev
	for _, nic := range st.NICs {
		for _, pf := range nic.PFs {
			out = append(out, pciDev{nic: nic, pf: pf})
			for _, vf := range pf.VFs {
				if vf.ready(now) {
					out = append(out, pciDev{nic: nic, pf: pf, vf: vf})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr() < out[j].addr() })
	return out
}

func (st *state) pfOf(nd *netdev) (*nicState, *pfState) {
	nic := st.NICs[nd.NIC]
	return nic, nic.PFs[nd.PF]
}

// pfByAddr finds the PF with PCI address addr.
func (st *state) pfByAddr(addr string) (*nicState, *pfState) {
	for _, nic := range st.NICs {
		for _, pf := range nic.PFs {
			if pf.PCI == addr {
				return nic, pf
			}
		}
	}
	return nil, nil
}

func (st *state) nicIndex(nic *nicState) int {
	for i, n := range st.NICs {
		if n == nic {
			return i
		}
	}
	return -1
}

// readyVFs counts the VFs of pf whose PCI device exists at now.
func (pf *pfState) readyVFs(now int64) int {
	n := 0
	for _, vf := range pf.VFs {
		if vf.ready(now) {
			n++
		}
	}
	return n
}
