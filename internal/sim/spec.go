package sim

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/internal/cfgdecode"
)

// Spec describes the simulated host. It is also the `sim:` section of
// vflag's YAML configuration.
type Spec struct {
	NICs    []NICSpec `mapstructure:"nics" yaml:"nics" json:"nics"`
	Latency Latency   `mapstructure:"latency" yaml:"latency" json:"latency"`
	// MirrorNetns is the optional path of a network namespace (for example
	// /run/netns/x). When set, every simulated netdev is mirrored there as a
	// real veth whose peer is named with a short hash; both ends follow the
	// simulated admin state, so a real ovs-vswitchd in that namespace can
	// open the simulated interfaces.
	MirrorNetns string `mapstructure:"mirror_netns" yaml:"mirror_netns" json:"mirror_netns,omitempty"`
	// Debugfs is "on" (the default: mounted on /sys/kernel/debug) or "off"
	// (not mounted: /sys/kernel/debug is an empty directory, so no mlx5 LAG
	// state can be read).
	Debugfs string `mapstructure:"debugfs" yaml:"debugfs" json:"debugfs,omitempty"`
	// Kernel is the simulated kernel's version, "major.minor" (default
	// 6.1), for the rules that changed: from 6.17 mlx5 refuses every
	// flow_steering_mode value while the eswitch is in switchdev.
	Kernel string `mapstructure:"kernel" yaml:"kernel" json:"kernel,omitempty"`
	// SwitchPeers are the addresses of hosts behind the simulated switch
	// (a tunnel's remote endpoints, its gateway): the switch answers ARP
	// and neighbour solicitation for them, so a netdev that reaches the
	// switch and has an address in their prefix resolves them (Neigh:
	// REACHABLE) as a real underlay would.
	SwitchPeers []string `mapstructure:"switch_peers" yaml:"switch_peers" json:"switch_peers,omitempty"`
}

// kernelAtLeast tells whether the spec's kernel is at least maj.min.
func (s *Spec) kernelAtLeast(maj, min int) bool {
	k := s.Kernel
	if k == "" {
		k = "6.1"
	}
	var a, b int
	if _, err := fmt.Sscanf(k, "%d.%d", &a, &b); err != nil {
		return false
	}
	return a > maj || a == maj && b >= min
}

// NICSpec is one ConnectX NIC with one or two ports (PFs).
type NICSpec struct {
	Name     string   `mapstructure:"name" yaml:"name" json:"name"`
	PFs      []PFSpec `mapstructure:"pfs" yaml:"pfs" json:"pfs"`                             // 1 or 2
	TotalVFs int      `mapstructure:"total_vfs" yaml:"total_vfs" json:"total_vfs,omitempty"` // per PF, default 8
	Driver   string   `mapstructure:"driver" yaml:"driver" json:"driver,omitempty"`          // default mlx5_core
	SwitchID string   `mapstructure:"switch_id" yaml:"switch_id" json:"switch_id,omitempty"` // 16 hex chars; default derived from the first PF address
	RDMA     bool     `mapstructure:"rdma" yaml:"rdma" json:"rdma,omitempty"`                // mlx5_ib devices (rdma.go)
	// SwitchLACP is what the switch ports behind the PFs run: "active" (the
	// default: one LACP port-channel, which an 802.3ad bond of the PFs
	// aggregates with) or "off" (plain ports: no LACP partner answers).
	SwitchLACP string `mapstructure:"switch_lacp" yaml:"switch_lacp" json:"switch_lacp,omitempty"`
	// NoVFOps models a driver without some ndo_set_vf_* (igb has no
	// ndo_set_vf_link_state): setting one of these VF settings through
	// the PF fails with EOPNOTSUPP, as rtnetlink's do_setlink does. Values:
	// trust, spoofchk, link_state, rate, vlan.
	NoVFOps []string `mapstructure:"no_vf_ops" yaml:"no_vf_ops" json:"no_vf_ops,omitempty"`
	// LAGDebugfs is "on" (the default: mlx5 shows lag/ in debugfs for each
	// PF of a 2-PF NIC, as kernels >= 5.19 do) or "off" (no lag/ directory:
	// an mlx5_core that sets up no LAG state there, as before 5.19; the LAG
	// itself still works).
	LAGDebugfs string `mapstructure:"lag_debugfs" yaml:"lag_debugfs" json:"lag_debugfs,omitempty"`
	// PortSelectFlowTable is "on" (the default: the NIC has mlx5's
	// port_select_flow_table capability, so a hash bond gets hash port
	// selection) or "off" (queue_affinity whatever the bond's mode: each
	// VF sends on its own PF's port).
	PortSelectFlowTable string `mapstructure:"port_select_flow_table" yaml:"port_select_flow_table" json:"port_select_flow_table,omitempty"`
}

// VF settings a NICSpec may lack (NoVFOps).
var vfOps = map[string]bool{"trust": true, "spoofchk": true, "link_state": true, "rate": true, "vlan": true}

// PFSpec is one port (physical function) of a NIC.
type PFSpec struct {
	PCI    string `mapstructure:"pci" yaml:"pci" json:"pci"`          // 0000:61:00.0
	Netdev string `mapstructure:"netdev" yaml:"netdev" json:"netdev"` // p0
	MAC    string `mapstructure:"mac" yaml:"mac" json:"mac,omitempty"`
}

// Latency makes the slow kernel operations take time.
type Latency struct {
	// VFCreate: VF i appears VFCreate*(i+1) after the sriov_numvfs write.
	VFCreate time.Duration `mapstructure:"vf_create" yaml:"vf_create" json:"vf_create,omitempty"`
	// ModeChange: a devlink eswitch mode change blocks this long.
	ModeChange time.Duration `mapstructure:"mode_change" yaml:"mode_change" json:"mode_change,omitempty"`
	// LAGActivation: the hardware LAG reads active this long after it became eligible.
	LAGActivation time.Duration `mapstructure:"lag_activation" yaml:"lag_activation" json:"lag_activation,omitempty"`
}

const (
	defaultTotalVFs = 8
	defaultDriver   = "mlx5_core"
	vfioDriver      = "vfio-pci"

	mlxVendor   = 0x15b3
	mlxPFDevice = 0x101d // ConnectX-6 Dx
	mlxVFDevice = 0x101e // ConnectX family VF

	// lagMaxVFs: a PF whose firmware NUM_OF_VFS (its sriov_totalvfs) is
	// above this never enters VF-LAG, whatever numvfs is (KERNEL-FACTS §5,
	// §12; lagReady).
	lagMaxVFs = 64
)

// bdf is a parsed PCI address.
type bdf struct {
	Domain int
	Bus    int
	DevFn  int // device<<3 | function
}

var bdfRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$`)
})

func parseBDF(s string) (bdf, error) {
	m := bdfRE().FindStringSubmatch(s)
	if m == nil {
		return bdf{}, fmt.Errorf("bad PCI address %q: want dddd:bb:dd.f in lowercase hex", s)
	}
	dom, _ := strconv.ParseUint(m[1], 16, 16)
	bus, _ := strconv.ParseUint(m[2], 16, 8)
	dev, _ := strconv.ParseUint(m[3], 16, 8)
	fn, _ := strconv.ParseUint(m[4], 16, 8)
	if dev > 0x1f {
		return bdf{}, fmt.Errorf("bad PCI address %q: device number above 1f", s)
	}
	return bdf{Domain: int(dom), Bus: int(bus), DevFn: int(dev<<3 | fn)}, nil
}

func (b bdf) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", b.Domain, b.Bus, b.DevFn>>3, b.DevFn&7)
}

// vfBDF applies pci_iov_virtfn_bus/_devfn (KERNEL-FACTS §1).
func vfBDF(pf bdf, offset, stride, i int) (bdf, bool) {
	abs := pf.DevFn + offset + stride*i
	b := bdf{Domain: pf.Domain, Bus: pf.Bus + abs>>8, DevFn: abs & 0xff}
	return b, b.Bus <= 0xff
}

// ifnameOK follows dev_valid_name: 1..15 bytes, not "." or "..", no '/', ':' or white space.
func ifnameOK(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if r == '/' || r == ':' || r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

var nicNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })

// validate checks the spec and fills in defaults. It returns a copy.
func validate(in *Spec) (*Spec, error) {
	if in == nil || len(in.NICs) == 0 {
		return nil, fmt.Errorf("sim: spec has no NICs")
	}
	s := *in
	s.NICs = make([]NICSpec, len(in.NICs))
	if s.Latency.VFCreate < 0 || s.Latency.ModeChange < 0 || s.Latency.LAGActivation < 0 {
		return nil, fmt.Errorf("sim: latency: negative duration")
	}
	if s.Debugfs != "" && s.Debugfs != "on" && s.Debugfs != "off" {
		return nil, fmt.Errorf("sim: debugfs: %q: want on or off", s.Debugfs)
	}
	if s.Kernel != "" && !regexp.MustCompile(`^[0-9]+\.[0-9]+$`).MatchString(s.Kernel) {
		return nil, fmt.Errorf("sim: kernel: %q: want major.minor, such as 6.17", s.Kernel)
	}
	s.SwitchPeers = nil
	for i, p := range in.SwitchPeers {
		a, err := netip.ParseAddr(p)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("sim: switch_peers[%d]: %q: want an IPv4 or IPv6 address", i, p)
		}
		s.SwitchPeers = append(s.SwitchPeers, a.String())
	}
	nicNames := map[string]bool{}
	netdevs := map[string]string{"lo": "the loopback device"}
	used := map[bdf]usedBy{} // every PCI address a PF or a possible VF may take
	for i, n := range in.NICs {
		n.PFs = append([]PFSpec(nil), n.PFs...)
		where := fmt.Sprintf("sim: nics[%d]", i)
		if n.Name == "" {
			n.Name = fmt.Sprintf("nic%d", i)
		}
		if !nicNameRE().MatchString(n.Name) {
			return nil, fmt.Errorf("%s.name: %q: want letters, digits, '.', '_' or '-'", where, n.Name)
		}
		if nicNames[n.Name] {
			return nil, fmt.Errorf("%s.name: duplicate NIC name %q", where, n.Name)
		}
		nicNames[n.Name] = true
		if len(n.PFs) < 1 || len(n.PFs) > 2 {
			return nil, fmt.Errorf("%s.pfs: a NIC has 1 or 2 PFs, got %d", where, len(n.PFs))
		}
		if n.TotalVFs < 0 {
			return nil, fmt.Errorf("%s.total_vfs: negative", where)
		}
		if n.TotalVFs == 0 {
			n.TotalVFs = defaultTotalVFs
		}
		if n.TotalVFs > 0xffff {
			return nil, fmt.Errorf("%s.total_vfs: %d is above 65535", where, n.TotalVFs)
		}
		if n.Driver == "" {
			n.Driver = defaultDriver
		}
		if !nicNameRE().MatchString(n.Driver) || n.Driver == vfioDriver {
			return nil, fmt.Errorf("%s.driver: bad driver name %q", where, n.Driver)
		}
		for field, v := range map[string]string{"lag_debugfs": n.LAGDebugfs, "port_select_flow_table": n.PortSelectFlowTable} {
			if v != "" && v != "on" && v != "off" {
				return nil, fmt.Errorf("%s.%s: %q: want on or off", where, field, v)
			}
		}
		for _, op := range n.NoVFOps {
			if !vfOps[op] {
				return nil, fmt.Errorf("%s.no_vf_ops: %q is not trust, spoofchk, link_state, rate or vlan", where, op)
			}
		}
		var addrs []bdf
		for j := range n.PFs {
			p := &n.PFs[j]
			pw := fmt.Sprintf("%s.pfs[%d]", where, j)
			p.PCI = strings.ToLower(p.PCI)
			a, err := parseBDF(p.PCI)
			if err != nil {
				return nil, fmt.Errorf("%s.pci: %v", pw, err)
			}
			addrs = append(addrs, a)
			if !ifnameOK(p.Netdev) {
				return nil, fmt.Errorf("%s.netdev: bad interface name %q", pw, p.Netdev)
			}
			if what, dup := netdevs[p.Netdev]; dup {
				return nil, fmt.Errorf("%s.netdev: %q is already %s", pw, p.Netdev, what)
			}
			netdevs[p.Netdev] = "a PF netdev"
			if p.MAC != "" {
				hw, err := net.ParseMAC(p.MAC)
				if err != nil || len(hw) != 6 || hw[0]&1 != 0 || isZeroMAC(hw) {
					return nil, fmt.Errorf("%s.mac: %q is not a unicast Ethernet address", pw, p.MAC)
				}
				p.MAC = hw.String()
			}
		}
		if len(addrs) == 2 {
			if addrs[0].Domain != addrs[1].Domain || addrs[0].Bus != addrs[1].Bus || addrs[0].DevFn>>3 != addrs[1].DevFn>>3 {
				return nil, fmt.Errorf("%s.pfs: the two ports of a NIC are functions of one PCI device (same dddd:bb:dd), got %s and %s", where, addrs[0], addrs[1])
			}
			if addrs[0] == addrs[1] {
				return nil, fmt.Errorf("%s.pfs: both PFs have address %s", where, addrs[0])
			}
		}
		switch n.SwitchLACP {
		case "", "active", "off":
		default:
			return nil, fmt.Errorf("%s.switch_lacp: %q: want active or off", where, n.SwitchLACP)
		}
		if n.SwitchID == "" {
			n.SwitchID = deriveSwitchID(n.PFs[0].PCI)
		}
		n.SwitchID = strings.ToLower(n.SwitchID)
		if b, err := hex.DecodeString(n.SwitchID); err != nil || len(b) != 8 {
			return nil, fmt.Errorf("%s.switch_id: %q: want 16 hex digits", where, n.SwitchID)
		}
		// Every address the NIC can ever use must be free.
		offs := vfOffsets(addrs, n.TotalVFs)
		for j, a := range addrs {
			if other, dup := used[a]; dup {
				return nil, fmt.Errorf("%s.pfs[%d].pci: %s collides with %s", where, j, a, other)
			}
			used[a] = usedBy{pf: a, vf: -1}
		}
		err := eachVF(addrs, offs, n.TotalVFs, func(j, k int, v bdf, ok bool) error {
			a := addrs[j]
			if !ok {
				return fmt.Errorf("%s.total_vfs: VF %d of PF %s would be past bus ff", where, k, a)
			}
			if other, dup := used[v]; dup {
				return fmt.Errorf("%s: VF %d of PF %s (%s) collides with %s", where, k, a, v, other)
			}
			used[v] = usedBy{pf: a, vf: k}
			return nil
		})
		if err != nil {
			return nil, err
		}
		s.NICs[i] = n
	}
	return &s, nil
}

// eachVF calls f with the address v of every VF k each PF j (at pfs[j],
// sriov_offset offs[j], stride 1) can have, up to total; ok is false for
// an address past bus ff. It stops at f's first error.
func eachVF(pfs []bdf, offs []int, total int, f func(j, k int, v bdf, ok bool) error) error {
	for j, a := range pfs {
		for k := 0; k < total; k++ {
			v, ok := vfBDF(a, offs[j], 1, k)
			if err := f(j, k, v, ok); err != nil {
				return err
			}
		}
	}
	return nil
}

// VFAddrs lists the PCI address of every VF the spec's NICs can have
// (total_vfs of each PF, numbered as the simulated kernel numbers them).
// A libvirtd that is to define a VF pool on the simulated host must see
// them as SR-IOV VFs (virttest.FakeVFs; internal/tools/simhost).
func (s *Spec) VFAddrs() ([]string, error) {
	v, err := validate(s)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range v.NICs {
		var addrs []bdf
		for _, p := range n.PFs {
			a, _ := parseBDF(p.PCI)
			addrs = append(addrs, a)
		}
		_ = eachVF(addrs, vfOffsets(addrs, n.TotalVFs), n.TotalVFs, func(_, _ int, v bdf, _ bool) error {
			out = append(out, v.String())
			return nil
		})
	}
	return out, nil
}

// usedBy is what takes a PCI address in validate: PF pf (vf < 0) or its VF
// vf. Its text is made only for an error (validate runs at every open with
// a config: formatting each of 2 x 64 VFs' names cost more than the rest).
type usedBy struct {
	pf bdf
	vf int
}

func (u usedBy) String() string {
	if u.vf < 0 {
		return fmt.Sprintf("PF %s", u.pf)
	}
	return fmt.Sprintf("VF %d of PF %s", u.vf, u.pf)
}

// vfOffsets gives each PF its sriov_offset (stride 1): the VFs of PF0 start
// right after the NIC's last PF function and PF1's start after PF0's last
// possible VF, as on a dual-port ConnectX (61:00.0 → 61:00.2, offset 2).
func vfOffsets(pfs []bdf, total int) []int {
	maxFn := 0
	for _, p := range pfs {
		if p.DevFn > maxFn {
			maxFn = p.DevFn
		}
	}
	offs := make([]int, len(pfs))
	for j, p := range pfs {
		offs[j] = maxFn + 1 + j*total - p.DevFn
	}
	return offs
}

func deriveSwitchID(pci string) string {
	h := fnv.New64a()
	h.Write([]byte("vflag-sim-switch-id/" + pci))
	return fmt.Sprintf("%016x", h.Sum64())
}

// genMAC derives a stable MAC from a seed. oui nil gives a locally
// administered unicast address (as eth_hw_addr_random does).
func genMAC(oui []byte, seed string) string {
	h := fnv.New64a()
	h.Write([]byte(seed))
	sum := h.Sum64()
	mac := make(net.HardwareAddr, 6)
	for i := range mac {
		mac[i] = byte(sum >> (8 * i))
	}
	if oui != nil {
		copy(mac, oui)
	} else {
		mac[0] = mac[0]&0xfe | 0x02
	}
	return mac.String()
}

var mellanoxOUI = []byte{0xb8, 0xce, 0xf6}

func isZeroMAC(hw net.HardwareAddr) bool {
	for _, b := range hw {
		if b != 0 {
			return false
		}
	}
	return true
}

// DecodeSpec decodes a config's raw sim: section (YAML decoded into maps)
// into a Spec, as internal/config decodes the rest of the config: unknown
// keys are errors naming the key, a duration needs a unit ("2ms"; a bare
// number is refused, not read as nanoseconds), each error names its path
// under sim. A nil section gives a nil Spec.
func DecodeSpec(raw map[string]any) (*Spec, error) {
	if raw == nil {
		return nil, nil
	}
	var s Spec
	if err := cfgdecode.Decode(raw, &s, "sim"); err != nil {
		return nil, err
	}
	return &s, nil
}
