package pipeline

import (
	"reflect"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/ovs"
)

func poolGroup() *config.Group {
	return &config.Group{
		Name: "lag0", Eswitch: "switchdev", PFs: []string{"p0", "p1"}, NumVFs: 2,
		VFs: []config.VFConfig{{PF: 0, VF: 0, VLAN: 5}},
		Network: &config.Network{Portgroups: []config.Portgroup{
			{Name: "a", VLAN: 100},
			{Name: "def", Default: true, VLANMode: "trunk", Trunks: []int{20, 10}},
		}},
	}
}

// A pool port takes its portgroup's VLAN columns, the default portgroup's
// when it names none or one the config lacks; a free VF keeps its own.
func TestPoolPortSpec(t *testing.T) {
	g := poolGroup()
	tests := []struct {
		name, pg string
		want     ovs.PortSpec
	}{
		{"named portgroup", "a", ovs.PortSpec{Name: "r", Tag: 100}},
		{"no portgroup: the default", "", ovs.PortSpec{Name: "r", VLANMode: "trunk", Trunks: []int{20, 10}}},
		{"unknown portgroup: the default", "zz", ovs.PortSpec{Name: "r", VLANMode: "trunk", Trunks: []int{20, 10}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PoolPortSpec(g, VFKey{1, 1}, "r", tt.pg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PoolPortSpec = %+v, want %+v", got, tt.want)
			}
		})
	}
	g.Network.Portgroups[1].Default = false
	if got := PoolPortSpec(g, VFKey{0, 0}, "r", ""); got.Tag != 5 || got.VLANMode != "" {
		t.Errorf("no default portgroup: %+v, want the VF's own tag 5", got)
	}
}

// The default pool leaves out the VFs of a port without VFs of its own
// (one netdevsim device); a configured pool is as written (preflight
// refuses what cannot be).
func TestGroupPool(t *testing.T) {
	g := Group{Group: poolGroup(), PFs: make([]eswitch.PF, 2), Owners: []int{0}}
	if got, want := g.Pool(), []VFKey{{0, 0}, {0, 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("one owner: pool %v, want %v", got, want)
	}
	g.Owners = []int{0, 1}
	if got := len(g.Pool()); got != 4 {
		t.Errorf("two owners: %d VFs, want 4", got)
	}
	g.Network.VFs = []config.NetworkVF{{PF: 1, VF: 1}}
	g.Owners = []int{0}
	if got, want := g.Pool(), []VFKey{{1, 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("configured: pool %v, want %v", got, want)
	}
	if p := PoollessVFs(g); len(p) != 1 || p[0].Field != "network.vfs[0]" {
		t.Errorf("PoollessVFs = %+v, want network.vfs[0]", p)
	}
}
