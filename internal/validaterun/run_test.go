package validaterun

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/validate"
)

// TestUnrealizableVFsFail: a configured VF entry or attachment on a port
// without VFs of its own (netdevsim: one pool on the first port) is a failed
// check, once per VF; on a device per port (mlx5) there is none.
func TestUnrealizableVFsFail(t *testing.T) {
	g := &config.Group{
		VFs:         []config.VFConfig{{PF: 0, VF: 0}, {PF: 1, VF: 0, VLAN: 7}},
		Attachments: []config.Attachment{{Domain: "vm1", PF: 1, VF: 0}, {Domain: "vm1", PF: 1, VF: 1}},
	}
	nsim := []eswitch.PF{{Dev: "netdevsim/netdevsim10", Netdev: "eth1"}, {Dev: "netdevsim/netdevsim10", Netdev: "eth2"}}
	got := unrealizableVFs(pipeline.Group{Group: g, PFs: nsim, Owners: pipeline.Owners(nsim)})
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
		if c.Verdict != validate.Fail || !strings.Contains(c.Detail, "which has no VFs of its own: eth2 and pfs[0] eth1") {
			t.Errorf("%s: %s %q", c.Name, c.Verdict, c.Detail)
		}
	}
	if strings.Join(names, " ") != "vf/pf1vf0 vf/pf1vf1" {
		t.Errorf("netdevsim: checks %v, want vf/pf1vf0 vf/pf1vf1", names)
	}
	mlx := []eswitch.PF{{Dev: "pci/0000:61:00.0", Netdev: "p0"}, {Dev: "pci/0000:61:00.1", Netdev: "p1"}}
	if got := unrealizableVFs(pipeline.Group{Group: g, PFs: mlx, Owners: pipeline.Owners(mlx)}); len(got) != 0 {
		t.Errorf("mlx5: %v, want none", got)
	}
}
