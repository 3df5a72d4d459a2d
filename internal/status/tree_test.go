package status

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
)

// TestStatusTree: a switchdev group hangs bond under the group, bridge under
// the bond, each representor in the bridge with its VF and the VF's domain;
// a VF whose representor is in no bridge hangs under its PF, as do a legacy
// group's VFs; problems end the group.
func TestStatusTree(t *testing.T) {
	hs := HostStatus{Groups: []GroupStatus{{
		Name: "lag0", Eswitch: "switchdev",
		LAG: &eswitch.LAGStatus{State: eswitch.LAGActive},
		PFs: []PFStatus{
			{Netdev: "p0", PCI: "0000:61:00.0", OperState: "up", NumVFs: 2},
			{Netdev: "p1", PCI: "0000:61:00.1", OperState: "down", NumVFs: 2},
		},
		Bond:     &eswitch.BondInfo{Name: "bond0", Mode: "802.3ad", Slaves: []string{"p0", "p1"}},
		SlavesUp: []string{"p0"},
		Bridge:   "br-lag", HWOffload: "true",
		VFs: []VFStatus{
			{PF: "p0", Index: 0, PCI: "0000:61:00.2", Driver: "vfio-pci", MAC: "52:54:00:10:00:00", Representor: "p0_0", OVSPort: "p0_0", OFPort: 2, Tag: 100, Domain: "vm1"},
			{PF: "p0", Index: 1, PCI: "0000:61:00.3", Driver: "mlx5_core", MAC: "52:54:00:10:00:01", Representor: "p0_1", OVSPort: "p0_1", OFPort: 3},
			{PF: "p1", Index: 0, PCI: "0000:61:08.2", Representor: "p1_0"},
		},
		Problems: []string{"bond0: slave p1 is down"},
	}, {
		Name: "legacy1", Eswitch: "legacy",
		PFs: []PFStatus{{Netdev: "eth2", PCI: "0000:62:00.0", OperState: "up", NumVFs: 1}},
		VFs: []VFStatus{{PF: "eth2", Index: 0, PCI: "0000:62:10.0", Driver: "vfio-pci", Domain: "vm2"}},
	}}}
	want := `group lag0 (switchdev, lag active)
├─ pf p0 (0000:61:00.0, up, numvfs 2)
├─ pf p1 (0000:61:00.1, down, numvfs 2)
│  └─ vf p1/0 (0000:61:08.2, -, -), rep p1_0 not in a bridge
├─ bond bond0 over p0 + p1 (802.3ad, 1/2 slaves up)
│  └─ bridge br-lag (hw-offload true)
│     ├─ rep p0_0 (ofport 2, tag 100)
│     │  └─ vf p0/0 (0000:61:00.2, vfio-pci, 52:54:00:10:00:00)
│     │     └─ domain vm1
│     └─ rep p0_1 (ofport 3)
│        └─ vf p0/1 (0000:61:00.3, mlx5_core, 52:54:00:10:00:01)
└─ problem: bond0: slave p1 is down
group legacy1 (legacy)
└─ pf eth2 (0000:62:00.0, up, numvfs 1)
   └─ vf eth2/0 (0000:62:10.0, vfio-pci, -)
      └─ domain vm2
`
	var b strings.Builder
	WriteTree(&b, hs)
	if b.String() != want {
		t.Fatalf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestStatusTreeShowsVLANs: a representor's port in the tree carries the
// same VLAN columns as the flat status (vlan_mode, tag, trunks): the tree
// dropped a trunk port's trunks.
func TestStatusTreeShowsVLANs(t *testing.T) {
	hs := HostStatus{Groups: []GroupStatus{{
		Name: "lag0", Eswitch: "switchdev", Bridge: "br-lag", HWOffload: "true",
		Bond: &eswitch.BondInfo{Name: "bond0", Mode: "802.3ad", Slaves: []string{"p0", "p1"}},
		VFs: []VFStatus{
			{PF: "p0", Index: 0, Representor: "eth7", OVSPort: "eth7", OFPort: 8, VLANMode: "trunk", Trunks: []int{10, 20, 30}},
			{PF: "p0", Index: 1, Representor: "eth8", OVSPort: "eth8", OFPort: 9, VLANMode: "native-untagged", Tag: 100, Trunks: []int{200}},
		},
	}}}
	var tree, flat strings.Builder
	WriteTree(&tree, hs)
	WriteText(&flat, hs)
	for _, want := range []string{"rep eth7 (ofport 8, vlan_mode trunk, trunks 10,20,30)", "rep eth8 (ofport 9, vlan_mode native-untagged, tag 100, trunks 200)"} {
		if !strings.Contains(tree.String(), want) {
			t.Errorf("tree lacks %q:\n%s", want, tree.String())
		}
	}
	for _, want := range []string{"vlan_mode trunk trunks 10,20,30", "vlan_mode native-untagged tag 100 trunks 200"} {
		if !strings.Contains(flat.String(), want) {
			t.Errorf("flat status lacks %q:\n%s", want, flat.String())
		}
	}
}
