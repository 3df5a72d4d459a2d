package install

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/sriov"
)

func TestWriteUdevGroup(t *testing.T) {
	mlx := func(addr, netdev string, pfnum uint16) eswitch.PF {
		return eswitch.PF{Dev: sriov.PCIDevice(sriov.Addr(addr)), Netdev: netdev, Addr: sriov.Addr(addr), PfNumber: pfnum,
			Devlink: eswitch.Devlink{Bus: "pci", Device: addr}}
	}
	nsim := eswitch.PF{Dev: "netdevsim/netdevsim10", Netdev: "eni10np1", Devlink: eswitch.Devlink{Bus: "netdevsim", Device: "netdevsim10"}}
	nsim2 := nsim
	nsim2.Netdev = "eni10np2"
	tests := []struct {
		name      string
		pfs       []eswitch.PF
		numvfs    int
		switchdev bool
		want      string
	}{
		{"legacy pins PF names only", []eswitch.PF{mlx("0000:61:00.0", "ens1f0", 0)}, 2, false,
			`SUBSYSTEM=="net", ACTION=="add", KERNELS=="0000:61:00.0", ATTR{phys_port_name}!="pf*vf*", NAME="ens1f0"` + "\n"},
		{"switchdev names representors per PF", []eswitch.PF{mlx("0000:61:00.0", "ens1f0np0", 0), mlx("0000:61:00.1", "ens1f1np1", 1)}, 1, true,
			`SUBSYSTEM=="net", ACTION=="add", KERNELS=="0000:61:00.0", ATTR{phys_port_name}!="pf*vf*", NAME="ens1f0np0"` + "\n" +
				`SUBSYSTEM=="net", ACTION=="add", KERNELS=="0000:61:00.1", ATTR{phys_port_name}!="pf*vf*", NAME="ens1f1np1"` + "\n" +
				`SUBSYSTEM=="net", ACTION=="add", KERNELS=="0000:61:00.0", ATTR{phys_port_name}=="pf0vf0", NAME="ens1f0np0_0"` + "\n" +
				`SUBSYSTEM=="net", ACTION=="add", KERNELS=="0000:61:00.1", ATTR{phys_port_name}=="pf1vf0", NAME="ens1f1np1_0"` + "\n"},
		{"too long for IFNAMSIZ", []eswitch.PF{mlx("0000:d8:00.0", "enp216s0f1np10", 0)}, 1, true,
			`SUBSYSTEM=="net", ACTION=="add", KERNELS=="0000:d8:00.0", ATTR{phys_port_name}!="pf*vf*", NAME="enp216s0f1np10"` + "\n" +
				"# enp216s0f1np10_0 is longer than 15 characters: the kernel's name stays\n" +
				`# SUBSYSTEM=="net", ACTION=="add", KERNELS=="0000:d8:00.0", ATTR{phys_port_name}=="pf0vf0", NAME="enp216s0f1np10_0"` + "\n"},
		{"netdevsim: one device, reps under it", []eswitch.PF{nsim, nsim2}, 1, true,
			"# eni10np1: not a PCI function (netdevsim/netdevsim10), name not pinned\n" +
				"# eni10np2: not a PCI function (netdevsim/netdevsim10), name not pinned\n" +
				`SUBSYSTEM=="net", ACTION=="add", KERNELS=="netdevsim10", ATTR{phys_port_name}=="pf0vf0", NAME="eni10np1_0"` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			WriteUdevGroup(&b, tt.pfs, tt.numvfs, tt.switchdev)
			if b.String() != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", b.String(), tt.want)
			}
		})
	}
}
