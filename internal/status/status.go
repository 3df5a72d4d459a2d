package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/holders"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/internal/validaterun"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
)

// PFStatus is one PF as the host shows it.
type PFStatus struct {
	Ref       string `json:"ref"`
	Netdev    string `json:"netdev"`
	PCI       string `json:"pci"`
	Device    string `json:"device"`
	Driver    string `json:"driver"`
	NumVFs    int    `json:"numvfs"`
	TotalVFs  int    `json:"totalvfs"` // 0: the device does not say (netdevsim)
	Eswitch   string `json:"eswitch"`
	Devlink   string `json:"devlink"`
	Up        bool   `json:"up"`
	OperState string `json:"operstate,omitempty"` // RFC 2863 ("up": the link has carrier)
	Master    string `json:"master,omitempty"`
	MTU       int    `json:"mtu,omitempty"`
}

// VFStatus is one VF with everything attached to it.
type VFStatus struct {
	PF          string `json:"pf"`
	Index       int    `json:"index"`
	PCI         string `json:"pci"`
	Driver      string `json:"driver"`
	MAC         string `json:"mac"`
	Representor string `json:"representor,omitempty"`
	RepMTU      int    `json:"representor_mtu,omitempty"`
	OVSPort     string `json:"ovs_port,omitempty"`
	OFPort      int    `json:"ofport,omitempty"`
	// Policy is the VF's legacy policy as the PF reports it (legacy
	// groups, where the PF lists the VF).
	Policy *eswitch.VFPolicy `json:"policy,omitempty"`
	// The OVS port's VLAN columns and its interface's MTU: mtu as
	// ovs-vswitchd reports it, mtu_request as vflag set it (0: unset).
	VLANMode      string `json:"vlan_mode,omitempty"`
	Tag           int    `json:"tag,omitempty"`
	Trunks        []int  `json:"trunks,omitempty"`
	OVSMTU        int    `json:"ovs_mtu,omitempty"`
	OVSMTURequest int    `json:"ovs_mtu_request,omitempty"`
	// Netdev is the VF's host netdev (a host netdev driver), with its MTU.
	Netdev    string `json:"netdev,omitempty"`
	NetdevMTU int    `json:"netdev_mtu,omitempty"`
	Domain    string `json:"domain,omitempty"`
	// Rate is the VF port's devlink rate leaf (switchdev), where one exists.
	Rate *LeafRate `json:"rate,omitempty"`
	// Holders are who holds the VF, as the kernel shows it (holders.go):
	// a process with its vfio group open, a host netdev in use.
	Holders []holders.Holder `json:"holders,omitempty"`
}

// LeafRate is a VF port's devlink rate leaf ("devlink port function rate show").
type LeafRate struct {
	Port    uint32 `json:"port"`     // devlink port index
	TxMax   int    `json:"tx_max"`   // Mbit/s, 0 = none
	TxShare int    `json:"tx_share"` // Mbit/s, 0 = none
	Parent  string `json:"rate_group,omitempty"`
}

// RateGroupStatus is one rate group of the config, as a devlink rate node
// on one owning PF's devlink instance.
type RateGroupStatus struct {
	Name    string `json:"name"`
	Devlink string `json:"devlink"`
	Present bool   `json:"present"`  // the node exists
	TxMax   int    `json:"tx_max"`   // Mbit/s, as the node has it
	TxShare int    `json:"tx_share"` // Mbit/s
	Leaves  int    `json:"leaves"`   // leaves under it
}

// GroupStatus is one LAG group.
type GroupStatus struct {
	Name     string            `json:"name"`
	Eswitch  string            `json:"eswitch"` // the config's: switchdev or legacy
	PFs      []PFStatus        `json:"pfs"`
	Bond     *eswitch.BondInfo `json:"bond,omitempty"`
	SlavesUp []string          `json:"bond_slaves_up,omitempty"` // slaves whose operstate is up
	BondMTU  int               `json:"bond_mtu,omitempty"`
	// BondOVSMTU is the mtu OVS reports for the bond's interface.
	BondOVSMTU int                `json:"bond_ovs_mtu,omitempty"`
	MTU        int                `json:"mtu,omitempty"` // the config's (0: MTUs left alone)
	LAG        *eswitch.LAGStatus `json:"lag,omitempty"`
	Bridge     string             `json:"bridge,omitempty"`
	HWOffload  string             `json:"hw_offload,omitempty"`
	// TCPolicy and MaxIdle are Open_vSwitch other_config tc-policy and
	// max-idle (ms; 0 unset), global settings shown with each bridge.
	TCPolicy string `json:"tc_policy,omitempty"`
	MaxIdle  int    `json:"max_idle,omitempty"`
	// Datapath is the kernel datapath of a bridge of datapath_type system,
	// where it can be read (not on the simulated host).
	Datapath *eswitch.DatapathStats `json:"datapath,omitempty"`
	// SharedBlock is the bond's shared tc ingress block: whether the bond
	// and its PFs are on it, its rules and how many are in hardware
	// (switchdev groups with hw-offload, where the host has tc).
	SharedBlock *eswitch.SharedBlock `json:"shared_block,omitempty"`
	// Tunnel is the config's tunnel, as status shows it ("vxlan local
	// 192.0.2.11/24 on bond0.30, 2 port(s)"); its state is in the tunnel/
	// checks of validate, which status runs.
	Tunnel string `json:"tunnel,omitempty"`
	// OVN is the group's OVN chassis as the Southbound and br-int show it
	// (groups with an ovn section); its state is in the ovn/ checks of
	// validate, which status runs.
	OVN *OVNStatus `json:"ovn,omitempty"`
	// Flows counts the datapath flows ovs-vswitchd has for the group's
	// ports (the bond and the representors in its bridge), by where they
	// run; nil when ovs-vswitchd's control socket could not be read.
	Flows *FlowCounts `json:"flows,omitempty"`
	VFs   []VFStatus  `json:"vfs"`
	// RateGroups are the config's rate groups, one per owning devlink instance.
	RateGroups []RateGroupStatus `json:"rate_groups,omitempty"`
	// Network is the group's VF pool (libvirt hostdev network), where the
	// config gives one.
	Network  *NetworkStatus `json:"network,omitempty"`
	Problems []string       `json:"problems,omitempty"`
	// NotUp: the group was never brought up, or was brought down (the
	// journal holds nothing of it), and the host is not as its config
	// says; its one problem is ProblemNotUp, not the differences.
	NotUp bool `json:"not_up,omitempty"`
	// HoldersError: the kernel's view of who holds the VFs could not be
	// read (the VFs' holders are then unknown, not none).
	HoldersError string `json:"holders_error,omitempty"`
}

// NetworkStatus is a group's libvirt hostdev network: its state and its
// pool, each VF free or held by a domain's port.
type NetworkStatus struct {
	Name      string `json:"name"`
	Exists    bool   `json:"exists"`
	Active    bool   `json:"active"`
	Autostart bool   `json:"autostart"`
	// Owned: vflag's metadata is in it (else a foreign network of that name).
	Owned bool     `json:"owned"`
	VFs   []PoolVF `json:"vfs"` // the pool as libvirt has it (the live definition while active)
	Error string   `json:"error,omitempty"`
}

// PoolVF is one VF of a pool.
type PoolVF struct {
	PCI string `json:"pci"`
	// Domain, Portgroup and MAC of the port that holds it; "" when free.
	Domain    string `json:"domain,omitempty"`
	Portgroup string `json:"portgroup,omitempty"`
	MAC       string `json:"mac,omitempty"`
}

// Used counts the pool's VFs a domain holds.
func (n NetworkStatus) Used() int {
	used := 0
	for _, v := range n.VFs {
		if v.Domain != "" {
			used++
		}
	}
	return used
}

// networkStatus reads the group's network from libvirt.
func networkStatus(h *host.Host, g *config.Group) *NetworkStatus {
	if g.Network == nil {
		return nil
	}
	ns := &NetworkStatus{Name: g.NetworkName()}
	c, err := h.Virt()
	if err != nil {
		ns.Error = err.Error()
		return ns
	}
	st, err := c.Network(ns.Name)
	if err != nil {
		ns.Error = err.Error()
		return ns
	}
	ns.Exists, ns.Active, ns.Autostart, ns.Owned = st.Exists, st.Active, st.Autostart, st.Owned
	held := map[string]libvirtx.NetworkPort{}
	for _, p := range st.Ports {
		held[p.PCI] = p
	}
	for _, pci := range st.PCIs {
		v := PoolVF{PCI: pci}
		if p, ok := held[pci]; ok {
			v.Domain, v.Portgroup, v.MAC = p.Domain, p.Portgroup, p.MAC
		}
		ns.VFs = append(ns.VFs, v)
	}
	return ns
}

// HostStatus is `vflag status`.
type HostStatus struct {
	Version string        `json:"version,omitempty"`
	Groups  []GroupStatus `json:"groups"`
}

// Gather reads the host h for the groups of cfg, the groups side by side
// (each reads only), in config order; what cannot be read becomes a
// problem line, never a guess. Each change `vflag plan` would make (with
// the journal in stateDir) is a problem (validaterun.PlanDrift), as it is
// a failed check of validate; a group the journal holds nothing of and
// plan would change has the one problem ProblemNotUp instead.
func Gather(ctx context.Context, cfg *config.Config, h *host.Host, stateDir string) HostStatus {
	if len(cfg.Groups) == 0 {
		return HostStatus{}
	}
	// The plan pass reads beside the groups' own reads; their static
	// checks take its changes last.
	drift := make(chan *validaterun.Drift, 1)
	go func() { drift <- validaterun.PlanDrift(ctx, cfg, h, stateDir) }()
	var d *validaterun.Drift
	var once sync.Once
	waitDrift := func() *validaterun.Drift {
		once.Do(func() { d = <-drift })
		return d
	}
	hs := HostStatus{Groups: make([]GroupStatus, len(cfg.Groups))}
	var wg sync.WaitGroup
	for gi := range cfg.Groups {
		wg.Go(func() { hs.Groups[gi] = gatherGroup(ctx, cfg, h, &cfg.Groups[gi], waitDrift) })
	}
	wg.Wait()
	for i := range hs.Groups {
		if waitDrift().NotUp(hs.Groups[i].Name) {
			hs.Groups[i].NotUp = true
			hs.Groups[i].Problems = []string{problemLine(ProblemNotUp, "run vflag up (the group was never brought up, or was brought down; vflag plan shows what up does)")}
		}
	}
	return hs
}

// problem adds a problem line of class to the group's status.
func (gs *GroupStatus) problem(class, format string, args ...any) {
	gs.Problems = append(gs.Problems, problemLine(class, format, args...))
}

// gatherGroup reads one group: validate's static problems, the PFs, bond
// and LAG, the bridge, the network and every VF of the owning PFs.
func gatherGroup(ctx context.Context, cfg *config.Config, h *host.Host, g *config.Group, drift func() *validaterun.Drift) GroupStatus {
	gs := GroupStatus{Name: g.Name, Eswitch: g.Eswitch, VFs: []VFStatus{}, MTU: g.MTU}
	// Every static check of vflag validate that fails is a problem,
	// named as validate names it: a PF that does not resolve, an
	// eswitch mode, the bond, the LAG, OVS ports without an ofport,
	// hw-offload, the kernel datapath, the shared tc block, rates,
	// attachments, RDMA. What follows only reads what is shown, and
	// adds a problem only for what those checks do not cover.
	// The attachments' domains are read beside the rest: that waits for
	// libvirtd's connection, which the static checks' attachments and the
	// VF rows need last.
	domainsRead := make(chan struct{})
	go func() {
		defer close(domainsRead)
		prefetchDomains(h, g)
	}()
	defer func() { <-domainsRead }() // done before the host closes
	// The bridge, read once for the checks and for what status shows.
	var bridge *ovs.BridgeStatus
	bridgeErr := fmt.Errorf("not read")
	if g.Switchdev() {
		if bs, err := bridgeStatus(ctx, h, g.OVS.Bridge); err == nil {
			bridge, bridgeErr = &bs, nil
		} else {
			bridgeErr = err
		}
	}
	// The datapath's flows (ovs-vswitchd's dump) and the static checks are
	// read beside what follows: every part only reads, each its own source.
	var flows <-chan flowResult
	if g.Switchdev() && bridge != nil && bridge.Exists {
		flows = startCountFlows(h.OVSDB)
	}
	static, ovnRead := startStatic(ctx, cfg, h, g, bridge, drift)
	gh, errs := pipeline.ResolveGroup(h.Kernel, h.FS, g)
	gs.PFs = pfStatuses(h, g, gh, errs)
	vc := vfSources{ports: map[string]ovs.PortStatus{}}
	if g.Switchdev() {
		gatherBondLAG(&gs, h, g, gh.PFs)
		gs.Bridge = g.OVS.Bridge
		// An unreadable OVSDB is validate's ovs/bridge problem.
		if bridgeErr == nil {
			vc.ports = gatherBridge(&gs, g, bridge, flows)
		}
		gatherDatapath(&gs, h, g, gh.PFs)
	}
	vc.domains = attachedDomains(h, g)
	gs.Network = networkStatus(h, g)
	if gs.Network != nil {
		for _, v := range gs.Network.VFs {
			if v.Domain != "" && vc.domains[v.PCI] == "" {
				vc.domains[v.PCI] = v.Domain
			}
		}
	}
	if g.Switchdev() {
		var err error
		if vc.rates, err = h.Kernel.Rates(); err != nil {
			gs.problem(ProblemDevlinkRate, "%v", err)
		}
		if vc.devPorts, err = h.Kernel.Ports(); err != nil {
			gs.problem(ProblemDevlinkPort, "%v", err)
		}
		gs.RateGroups = rateGroups(g, gh, vc.rates) // a missing node is validate's rate/<devlink>/<name> problem
	}
	// Each owning PF's VFs are read beside the others'.
	rows := make([][]VFStatus, len(gh.Owners))
	vfErrs := make([]error, len(gh.Owners))
	var wg sync.WaitGroup
	for k, i := range gh.Owners {
		wg.Go(func() { rows[k], vfErrs[k] = pfVFs(h, g, gh.PFs[i], vc) })
	}
	wg.Wait()
	for k := range gh.Owners {
		if vfErrs[k] != nil {
			gs.problem(ProblemVFs, "%v", vfErrs[k])
			continue
		}
		gs.VFs = append(gs.VFs, rows[k]...)
	}
	// Who holds each VF, as the kernel shows it (holders.go).
	gatherHolders(&gs, h)
	gs.OVN = <-ovnRead
	gs.Problems = append(<-static, gs.Problems...) // the static checks' problems first
	return gs
}

// startStatic reads, beside the rest of status, the OVN chassis (once, for
// its checks and what status shows) and the static checks of validate
// with plan's drift; every failed check is a problem line.
func startStatic(ctx context.Context, cfg *config.Config, h *host.Host, g *config.Group, bridge *ovs.BridgeStatus, drift func() *validaterun.Drift) (<-chan []string, <-chan *OVNStatus) {
	static := make(chan []string, 1)
	ovnRead := make(chan *OVNStatus, 1)
	go func() {
		var ps []string
		ovn := validaterun.ReadOVN(ctx, cfg, h, g)
		ovnRead <- ovnStatus(ovn)
		checks := validaterun.StaticWithOVN(ctx, cfg, h, g, "", bridge, nil, ovn)
		for _, c := range append(checks, drift().Checks(g.Name)...) {
			if c.Verdict == validate.Fail {
				first, _, _ := strings.Cut(c.Detail, "\n")
				ps = append(ps, problemLine(c.Name, "%s", first))
			}
		}
		static <- ps
	}()
	return static, ovnRead
}

// OVNStatus is a group's OVN chassis: its name, whether the Southbound
// has it with its encap, and how many of the configured ports are bound
// to it and ovn-installed.
type OVNStatus struct {
	Chassis    string `json:"chassis"`
	Remote     string `json:"remote"`
	Encap      string `json:"encap"` // "geneve 192.0.2.11"
	Registered bool   `json:"registered"`
	// SouthboundErr says why the Southbound could not be read (Registered
	// and Bound are then false and 0: unknown).
	SouthboundErr string `json:"southbound_error,omitempty"`
	Ports         int    `json:"ports"`
	Bound         int    `json:"bound"`
	Installed     int    `json:"installed"`
}

func ovnStatus(s *validaterun.OVNState) *OVNStatus {
	if s == nil {
		return nil
	}
	m := s.Counts()
	o := &OVNStatus{Chassis: s.Want.Chassis, Remote: s.Want.Remote, Encap: s.Want.EncapType + " " + s.Want.EncapIP,
		Registered: m.Registered, Ports: m.Ports, Bound: m.Bound, Installed: m.Installed}
	if s.Facts.SBErr != nil {
		o.SouthboundErr = s.Facts.SBErr.Error()
	}
	return o
}

// pfStatuses reads each resolved PF of the group (errs: the PFs that did
// not resolve, validate's pf/<n> problems, left out).
func pfStatuses(h *host.Host, g *config.Group, gh pipeline.Group, errs []*pipeline.PFError) []PFStatus {
	k, pci := h.Kernel, h.PCI
	failed := map[int]bool{}
	for _, err := range errs {
		failed[err.Index] = true // validate's pf/<n> check said why
	}
	var refs []string // the refs of gh.PFs
	for i, ref := range g.PFs {
		if !failed[i] {
			refs = append(refs, ref)
		}
	}
	var out []PFStatus
	for j, pf := range gh.PFs {
		ps := PFStatus{Ref: refs[j], Netdev: pf.Netdev, PCI: string(pf.Addr), Device: string(pf.Dev), Devlink: pf.Devlink.String()}
		if pf.Addr != "" {
			ps.Driver, _ = pci.Driver(pf.Addr)
		}
		ps.NumVFs, _ = pci.NumVFs(pf.Dev)
		ps.TotalVFs, _ = pci.TotalVFs(pf.Dev)
		if m, err := k.EswitchMode(pf.Devlink); err == nil {
			ps.Eswitch = m
		} else {
			ps.Eswitch = "unknown"
		}
		if l, err := k.Link(pf.Netdev); err == nil {
			ps.Up, ps.OperState, ps.Master, ps.MTU = l.AdminUp, l.OperState, l.Master, l.MTU
		}
		out = append(out, ps)
	}
	return out
}

// gatherBondLAG reads a switchdev group's bond (its LACP, MTU and the
// slaves with carrier) and the PFs' hardware LAG.
func gatherBondLAG(gs *GroupStatus, h *host.Host, g *config.Group, pfs []eswitch.PF) {
	k, f := h.Kernel, h.FS
	if b, err := eswitch.ReadBond(f, g.Bond.Name); err == nil {
		b.LACP = eswitch.ReadLACP(f, b)
		gs.Bond = &b
		if l, err := k.Link(g.Bond.Name); err == nil {
			gs.BondMTU = l.MTU
		}
		for _, sl := range b.Slaves {
			if l, err := k.Link(sl); err == nil && l.OperState == "up" {
				gs.SlavesUp = append(gs.SlavesUp, sl)
			}
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		gs.Bond = &eswitch.BondInfo{Name: g.Bond.Name, Mode: "absent"}
	}
	if len(pfs) > 0 {
		if l, err := eswitch.ReadLAG(f, pfs[0].Addr); err == nil {
			if l.State == eswitch.LAGUnverified {
				l.Why = eswitch.ExplainUnverified(f, pfs[0].Addr).Why
			}
			gs.LAG = &l
		}
	}
}

// gatherBridge fills a switchdev group's bridge settings and datapath flow
// counts from bs, the bridge as read from OVSDB, and returns its ports by
// name.
func gatherBridge(gs *GroupStatus, g *config.Group, bs *ovs.BridgeStatus, flows <-chan flowResult) map[string]ovs.PortStatus {
	ports := map[string]ovs.PortStatus{}
	gs.HWOffload = bs.HWOffload
	gs.TCPolicy = bs.TCPolicy
	gs.MaxIdle, _ = strconv.Atoi(bs.MaxIdle)
	if bs.HWOffload == "" {
		gs.HWOffload = "unset"
	}
	for _, p := range bs.Ports {
		ports[p.Name] = p
	}
	gs.BondOVSMTU = ports[g.Bond.Name].MTU
	if flows != nil {
		fr := <-flows
		if fr.err != nil {
			gs.problem(ProblemFlows, "%v", fr.err)
		} else if fr.asked {
			gs.Flows = countFlows(fr.flows, ports, g.OVS.Bridge)
		}
	}
	return ports
}

// gatherDatapath reads a switchdev group's kernel datapath (system
// datapath only) and whether its uplinks share a tc block.
func gatherDatapath(gs *GroupStatus, h *host.Host, g *config.Group, pfs []eswitch.PF) {
	if dt := g.OVS.DatapathType; dt == "" || dt == "system" {
		if st, err := eswitch.ReadDatapath(h.Kernel, eswitch.SystemDatapath); err == nil {
			gs.Datapath = &st
		}
	}
	if t := g.Tunnel; t != nil { // the bond is no port: ovs-vswitchd puts it on no block
		gs.Tunnel = fmt.Sprintf("%s local %s on %s, %d port(s)", t.Type, t.Local, g.UnderlayDev(), len(g.TunnelPorts()))
		return
	}
	if !g.BondInBridge() { // an OVN chassis's bond is the underlay, no port either
		return
	}
	if gs.Bond != nil && gs.Bond.Mode != "absent" {
		_, gs.SharedBlock = validate.SharedBlockCheck(h.Kernel, g.Bond.Name, netdevNames(pfs), g.OVS.HWOffload != nil && *g.OVS.HWOffload)
	}
}

// vfSources is what a group's VF rows draw from besides the PF itself.
type vfSources struct {
	domains  map[string]string // VF PCI address -> domain holding it
	rates    []eswitch.Rate    // devlink rate objects (switchdev)
	devPorts []eswitch.Port    // devlink ports (switchdev)
	ports    map[string]ovs.PortStatus
}

// pfVFs lists the VFs 0..numvfs-1 of one owning PF: by PCI function where
// the device has them, else (netdevsim) the PF's netlink VF list alone.
func pfVFs(h *host.Host, g *config.Group, pf eswitch.PF, vc vfSources) ([]VFStatus, error) {
	k, f, pci := h.Kernel, h.FS, h.PCI
	numvfs, _ := pci.NumVFs(pf.Dev)
	var reps map[int]string
	if g.Switchdev() {
		// VFs 0..numvfs-1: no scan of every netdev's phys_port_name
		// when devlink names them all.
		reps, _ = eswitch.RepresentorsOf(k, f, pf, numvfs)
	}
	var netlinkVFs []eswitch.VFInfo
	if l, err := k.Link(pf.Netdev); err == nil {
		netlinkVFs = l.VFs
	}
	pciOf := map[int]string{}
	if pci.HasPCIVFs(pf.Dev) {
		vfs, err := pci.VFs(pf.Dev)
		if err != nil {
			return nil, err
		}
		for _, v := range vfs {
			pciOf[v.Index] = string(v.Addr)
		}
	}
	macOf := map[int]string{}
	policyOf := map[int]eswitch.VFPolicy{}
	for _, v := range netlinkVFs {
		macOf[v.ID] = v.MAC
		policyOf[v.ID] = v.VFPolicy
	}
	rates := leafRates(vc.rates, vc.devPorts, pf)
	var out []VFStatus
	for id := 0; id < numvfs; id++ {
		vs := VFStatus{PF: pf.Netdev, Index: id, PCI: pciOf[id], MAC: macOf[id], Representor: reps[id], Rate: rates[id]}
		if p, ok := policyOf[id]; ok && !g.Switchdev() {
			vs.Policy = &p
		}
		fillVF(&vs, h, vc)
		out = append(out, vs)
	}
	return out, nil
}

// fillVF reads what hangs off one VF: its representor's MTU, driver,
// domain, netdev and OVS port.
func fillVF(vs *VFStatus, h *host.Host, vc vfSources) {
	k, pci := h.Kernel, h.PCI
	if vs.Representor != "" {
		if l, err := k.Link(vs.Representor); err == nil {
			vs.RepMTU = l.MTU
		}
	}
	if vs.PCI != "" {
		vs.Driver, _ = pci.Driver(sriov.Addr(vs.PCI))
		vs.Domain = vc.domains[vs.PCI]
		// A VF without a driver has no netdev to show (switchdev unbinds
		// every VF the host does not keep): its directory is not read.
		if vs.Driver != "" {
			if nd, err := pci.Netdevs(sriov.Addr(vs.PCI)); err == nil && len(nd) == 1 {
				vs.Netdev = nd[0]
				if l, err := k.Link(nd[0]); err == nil {
					vs.NetdevMTU = l.MTU
				}
			}
		}
	}
	if p, ok := vc.ports[vs.Representor]; ok && vs.Representor != "" {
		vs.OVSPort, vs.OFPort = vs.Representor, p.OFPort
		vs.VLANMode, vs.Tag, vs.Trunks, vs.OVSMTU, vs.OVSMTURequest = p.VLANMode, p.Tag, p.Trunks, p.MTU, p.MTURequest
	}
}

// bridgeStatus reads the bridge from OVSDB.
func bridgeStatus(ctx context.Context, h *host.Host, bridge string) (ovs.BridgeStatus, error) {
	c, err := h.OVS(ctx)
	if err != nil {
		return ovs.BridgeStatus{}, err
	}
	return c.Status(ctx, bridge)
}

// prefetchDomains starts the read of the group's attachments' domains
// (libvirtx.Conn.Prefetch): the static checks and the VF rows take that
// one read, and it overlaps the other reads.
func prefetchDomains(h *host.Host, g *config.Group) {
	if len(g.Attachments) == 0 {
		return
	}
	c, err := h.Virt()
	if err != nil {
		return // validate's libvirt problems say why
	}
	c.Prefetch(g.AttachmentDomains()...)
}

// attachedDomains maps VF PCI address to the configured domain holding it.
func attachedDomains(h *host.Host, g *config.Group) map[string]string {
	out := map[string]string{}
	if len(g.Attachments) == 0 {
		return out
	}
	// libvirt unreachable, a domain missing or without its VF: validate's
	// libvirt/<domain>/pf<n>vf<m> problems.
	c, err := h.Virt()
	if err != nil {
		return out
	}
	prefetchDomains(h, g) // the read gatherGroup started, unless it is not under way yet
	seen := map[string]bool{}
	for _, a := range g.Attachments {
		if seen[a.Domain] {
			continue
		}
		seen[a.Domain] = true
		d, err := c.Domain(a.Domain)
		if err != nil {
			continue
		}
		for _, i := range d.Interfaces {
			out[i.PCI] = a.Domain
		}
	}
	return out
}

// leafRates are the rate leaves of pf's VFs, by VF number: each VF's
// devlink port, then the leaf on that port (one pass over each list; a
// lookup per VF made status quadratic in the VFs).
func leafRates(rates []eswitch.Rate, ports []eswitch.Port, pf eswitch.PF) map[int]*LeafRate {
	leafOn := map[uint32]eswitch.Rate{} // port index -> its leaf, first one
	for _, r := range rates {
		if _, dup := leafOn[r.PortIndex]; r.Type == eswitch.RateLeaf && r.Devlink == pf.Devlink && !dup {
			leafOn[r.PortIndex] = r
		}
	}
	out := map[int]*LeafRate{}
	for _, p := range ports {
		if p.Flavour != eswitch.FlavourPCIVF || p.Devlink != pf.Devlink || p.PfNumber != pf.PfNumber {
			continue
		}
		vf := int(p.VfNumber)
		if _, seen := out[vf]; seen {
			continue // the first port of a VF number, as the lookup took
		}
		if r, ok := leafOn[p.Index]; ok {
			out[vf] = &LeafRate{Port: p.Index, TxMax: pipeline.ToMbit(r.TxMax), TxShare: pipeline.ToMbit(r.TxShare), Parent: r.Parent}
		}
	}
	return out
}

// rateGroups: each of the config's rate groups on each owning PF's devlink.
func rateGroups(g *config.Group, gh pipeline.Group, rates []eswitch.Rate) []RateGroupStatus {
	var out []RateGroupStatus
	seen := map[eswitch.Devlink]bool{}
	for _, i := range gh.Owners {
		d := gh.PFs[i].Devlink
		if seen[d] {
			continue
		}
		seen[d] = true
		for _, rg := range g.RateGroups {
			st := RateGroupStatus{Name: rg.Name, Devlink: d.String()}
			for _, r := range rates {
				switch {
				case r.Devlink != d:
				case r.Type == eswitch.RateNode && r.Name == rg.Name:
					st.Present, st.TxMax, st.TxShare = true, pipeline.ToMbit(r.TxMax), pipeline.ToMbit(r.TxShare)
				case r.Type == eswitch.RateLeaf && r.Parent == rg.Name:
					st.Leaves++
				}
			}
			out = append(out, st)
		}
	}
	return out
}

func netdevNames(pfs []eswitch.PF) []string {
	out := make([]string, len(pfs))
	for i, pf := range pfs {
		out[i] = pf.Netdev
	}
	return out
}

// FlowCounts are a group's datapath flows with traffic by where they run
// (validate.Where), and those without packets.
type FlowCounts struct {
	Hardware   int `json:"hardware"`    // offloaded:yes or partial
	TCSoftware int `json:"tc_software"` // dp:tc, not in hardware
	KernelDP   int `json:"kernel_datapath"`
	Idle       int `json:"idle"`
}

// countFlows reads ovs-vswitchd's datapath flows ("ovs-appctl
// dpctl/dump-flows -m") and counts those whose in_port is a port of the
// group's bridge. No ovs-vswitchd control socket: nil, no error (a host
// whose daemon runs elsewhere shows no counts rather than a problem).
// flowResult is ovs-vswitchd's datapath flows; asked false: no
// ovs-vswitchd control socket beside the OVSDB endpoint to ask.
type flowResult struct {
	asked bool // a control socket was there to ask
	flows []ovs.DPFlow
	err   error
}

// startCountFlows asks ovs-vswitchd for its datapath flows in the
// background ("ovs-appctl dpctl/dump-flows -m").
func startCountFlows(endpoint string) <-chan flowResult {
	ch := make(chan flowResult, 1)
	go func() {
		sock, err := ovs.VswitchdSocket(ovs.RunDirOf(endpoint))
		if err != nil {
			ch <- flowResult{}
			return
		}
		out, err := ovs.Appctl(sock, "dpctl/dump-flows", []string{"-m"}, 5*time.Second)
		if err != nil {
			ch <- flowResult{asked: true, err: err}
			return
		}
		flows, err := ovs.ParseDumpFlows(out)
		ch <- flowResult{asked: true, flows: flows, err: err}
	}()
	return ch
}

// countFlows sorts the flows coming in on the bridge's ports by where they
// run.
func countFlows(flows []ovs.DPFlow, ports map[string]ovs.PortStatus, bridge string) *FlowCounts {
	var c FlowCounts
	for _, f := range flows {
		if _, ok := ports[f.InPort]; !ok || f.InPort == bridge {
			continue
		}
		switch {
		case f.Packets == 0:
			c.Idle++
		case validate.Where(f) == validate.WhereTCSW:
			c.TCSoftware++
		case validate.Where(f) == validate.WhereKernelDP:
			c.KernelDP++
		default:
			c.Hardware++
		}
	}
	return &c
}
