package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/libvirtx/virttest"
)

// nsimKernel is the devlink and link side of a netdevsim device with two
// ports (eth1, eth2) and one VF pool, on its first port.
type nsimKernel struct{ eswitch.Kernel }

var nsimDevlink = eswitch.Devlink{Bus: "netdevsim", Device: "netdevsim10"}

func (nsimKernel) Ports() ([]eswitch.Port, error) {
	return []eswitch.Port{
		{Devlink: nsimDevlink, Index: 0, Netdev: "eth1", Flavour: eswitch.FlavourPhysical, Number: 1},
		{Devlink: nsimDevlink, Index: 1, Netdev: "eth2", Flavour: eswitch.FlavourPhysical, Number: 2},
	}, nil
}

func (nsimKernel) Link(name string) (eswitch.Link, error) {
	if name == "eth1" || name == "eth2" {
		return eswitch.Link{Name: name}, nil
	}
	return eswitch.Link{}, eswitch.ErrLinkNotFound
}

// nsimFS is the sysfs of that device (KERNEL-FACTS: no PCI address, no
// sriov_totalvfs, one sriov_numvfs for both ports).
func nsimFS(t *testing.T) sysfs.FS {
	root := t.TempDir()
	file := func(p, s string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	file("/sys/devices/netdevsim10/sriov_numvfs", "0\n")
	link("/sys/devices/netdevsim10/subsystem", "../../bus/netdevsim")
	link("/sys/bus/netdevsim/devices/netdevsim10", "../../../devices/netdevsim10")
	for _, p := range []struct{ name, ppn string }{{"eth1", "p1"}, {"eth2", "p2"}} {
		d := "/sys/devices/netdevsim10/net/" + p.name
		file(d+"/phys_port_name", p.ppn+"\n")
		file(d+"/phys_switch_id", strings.Repeat("ab", 32)+"\n")
		link(d+"/device", "../../../netdevsim10")
		link("/sys/class/net/"+p.name, "../../devices/netdevsim10/net/"+p.name)
	}
	return sysfs.Dir(root)
}

// TestPreflightRefusesAPoolWithoutVFs: on a NIC whose two ports are one
// device with one VF pool (netdevsim: every VF on the first port), a
// default pool whose free VFs are all on the second port has no VF: up
// would define a libvirt network without an address, which libvirt takes
// and starts, and every domain start on it fails. Preflight refuses it,
// with its field path and why, before any write. With a free VF on the
// first port it passes.
func TestPreflightRefusesAPoolWithoutVFs(t *testing.T) {
	group := func(hostVFs ...int) config.Group {
		g := config.Group{Name: "nsim", Eswitch: "legacy", PFs: []string{"eth1", "eth2"}, NumVFs: 2,
			Network: &config.Network{Portgroups: []config.Portgroup{{Name: "a", VLAN: 5, Default: true}}}}
		for _, vf := range hostVFs {
			g.VFs = append(g.VFs, config.VFConfig{PF: 0, VF: vf, Driver: "vfio-pci"})
		}
		return g
	}
	virt := virttest.Start(t) // preflight reads libvirt's networks for a pool
	for _, tc := range []struct {
		name    string
		hostVFs []int
		want    string
	}{
		{"every VF of the first port is the host's", []int{0, 1},
			`groups[0].network: "vflag-nsim" has no VF: its 2 free VF(s) are on pfs[1] eth2, which has no VFs of its own (eth2 and pfs[0] eth1 are one device (netdevsim/netdevsim10) with one VF pool, on pfs[0]), and every VF of pfs[0] goes to the host (vfs[].driver) or an attachment; ` +
				`libvirt defines and starts a hostdev network without an address, and every domain start on it fails ("network 'vflag-nsim' requires exclusive access to interfaces, but none are available"): free a VF of pfs[0], or drop the network`},
		{"a free VF on the first port", []int{0}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Groups: []config.Group{group(tc.hostVFs...)}}
			cfg.ApplyDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the config is valid as a file: %v", err)
			}
			f := nsimFS(t)
			e := New(cfg, host.New(nsimKernel{}, f, "", virt.URI()), nil)
			_, err := e.Preflight(context.Background())
			var he HostErrors
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("preflight: %v, want it to pass", err)
			case tc.want == "":
			case !errors.As(err, &he):
				t.Fatalf("preflight: %v, want HostErrors", err)
			case len(he) != 1 || he[0].Error() != tc.want:
				t.Fatalf("preflight:\n%v\nwant the one error\n%s", err, tc.want)
			}
		})
	}
}
