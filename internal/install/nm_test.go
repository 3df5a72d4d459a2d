package install

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/sriov"
)

func TestWriteNMGroup(t *testing.T) {
	mlx := func(addr, netdev string) eswitch.PF {
		return eswitch.PF{Dev: sriov.PCIDevice(sriov.Addr(addr)), Netdev: netdev, Addr: sriov.Addr(addr),
			Devlink: eswitch.Devlink{Bus: "pci", Device: addr}}
	}
	nsim := eswitch.PF{Dev: "netdevsim/netdevsim10", Netdev: "eth0", Devlink: eswitch.Devlink{Bus: "netdevsim", Device: "netdevsim10"}}
	nsim2 := nsim
	nsim2.Netdev = "eth1"
	tests := []struct {
		name string
		pfs  []eswitch.PF
		bond string
		want string
	}{
		{"mlx5: each PF function, its VFs, the bond", []eswitch.PF{mlx("0000:61:00.0", "ens1f0np0"), mlx("0000:61:00.1", "ens1f1np1")}, "bond0",
			`ACTION!="remove", SUBSYSTEM=="net", KERNELS=="0000:61:00.0", ENV{NM_UNMANAGED}="1"
ACTION!="remove", SUBSYSTEM=="net", TEST=="device/physfn", PROGRAM="/bin/readlink -f /sys%p/device/physfn", RESULT=="*/0000:61:00.0", ENV{NM_UNMANAGED}="1"
ACTION!="remove", SUBSYSTEM=="net", KERNELS=="0000:61:00.1", ENV{NM_UNMANAGED}="1"
ACTION!="remove", SUBSYSTEM=="net", TEST=="device/physfn", PROGRAM="/bin/readlink -f /sys%p/device/physfn", RESULT=="*/0000:61:00.1", ENV{NM_UNMANAGED}="1"
ACTION!="remove", SUBSYSTEM=="net", KERNEL=="bond0", ENV{NM_UNMANAGED}="1"
`},
		{"netdevsim: one device for both ports, no PCI VFs", []eswitch.PF{nsim, nsim2}, "bond0",
			`ACTION!="remove", SUBSYSTEM=="net", KERNELS=="netdevsim10", ENV{NM_UNMANAGED}="1"
ACTION!="remove", SUBSYSTEM=="net", KERNEL=="bond0", ENV{NM_UNMANAGED}="1"
`},
		{"legacy: no bond", []eswitch.PF{mlx("0000:61:00.0", "ens1f0")}, "",
			`ACTION!="remove", SUBSYSTEM=="net", KERNELS=="0000:61:00.0", ENV{NM_UNMANAGED}="1"
ACTION!="remove", SUBSYSTEM=="net", TEST=="device/physfn", PROGRAM="/bin/readlink -f /sys%p/device/physfn", RESULT=="*/0000:61:00.0", ENV{NM_UNMANAGED}="1"
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			WriteNMGroup(&b, tt.pfs, tt.bond)
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
