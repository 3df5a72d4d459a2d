package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/sysfs"
)

// readyEnv is a ready mlx5 hypervisor: the simulated ConnectX for the NIC
// side (sysfs, devlink, debugfs) and a fixture tree for the machine.
type readyEnv struct {
	h        *sim.Host
	machine  *tree
	run      *fakeRunner
	env      Env
	stateDir string
}

func newReady(t *testing.T) *readyEnv {
	h := simNIC(t)
	r := &readyEnv{h: h, machine: readyMachine(t), run: readyRunner(t)}
	r.env = Env{Sys: h.FS(), Host: r.machine.fs(), Kernel: dpKernel{Kernel: h, st: healthyDatapath()}, Run: r.run, Probe: fakeProber{}}
	return r
}

func runDoctor(t *testing.T, env Env, tg Target) *Report {
	t.Helper()
	rep := Run(context.Background(), env, tg)
	var b bytes.Buffer
	_ = rep.WriteText(&b, false)
	t.Logf("report:\n%s", b.String())
	return rep
}

func mustFind(t *testing.T, rep *Report, name string) Check {
	t.Helper()
	c, ok := rep.Find(name)
	if !ok {
		var names []string
		for _, c := range rep.Checks {
			names = append(names, c.Name)
		}
		t.Fatalf("no check %q; have %s", name, strings.Join(names, ", "))
	}
	return c
}

// The checks a switchdev group of two PFs p0/p1 gets, in report order.
var readyNames = []string{
	"platform/iommu", "platform/vfio-pci", "platform/sriov p0", "platform/sriov p1",
	"firmware/numvfs", "firmware/mstconfig " + pf0, "firmware/devlink-info " + pf0,
	"nic/same-nic", "nic/driver p0", "nic/driver p1", "nic/eswitch p0", "nic/eswitch p1", "nic/debugfs", "nic/roce",
	"kernel/version", "kernel/bonding", "kernel/openvswitch",
	"daemons/ovs-vswitchd", "daemons/ovs-version", "daemons/ovs-upcalls", "daemons/ovsdb " + DefaultOVSDB, "daemons/libvirt " + DefaultLibvirt,
	"conflicts/networkmanager", "conflicts/bond p0", "conflicts/bond p1", "conflicts/bond-name bond0", "conflicts/numvfs p0", "conflicts/numvfs p1",
}

func TestReadyHost(t *testing.T) {
	for _, nm := range []bool{false, true} {
		t.Run(map[bool]string{false: "no NetworkManager", true: "NetworkManager leaves the PFs alone"}[nm], func(t *testing.T) {
			r := newReady(t)
			if nm {
				r.run.tools["nmcli"] = true
			}
			rep := runDoctor(t, r.env, Target{Groups: []Group{lagGroup()}})
			var got []string
			for _, c := range rep.Checks {
				got = append(got, c.Name)
				if c.Status != Pass {
					t.Errorf("%s: %s: %s (fix: %s)", c.Name, c.Status, c.Detail, c.Fix)
				}
				if c.Fix != "" {
					t.Errorf("%s passes but has a fix: %q", c.Name, c.Fix)
				}
				if c.Detail == "" {
					t.Errorf("%s: empty detail", c.Name)
				}
			}
			if strings.Join(got, "\n") != strings.Join(readyNames, "\n") {
				t.Errorf("checks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(readyNames, "\n"))
			}
			if !rep.Ready {
				t.Error("a ready host is not ready")
			}
			for _, want := range []string{"dmar0", "3 groups", "intel_iommu=on iommu=pt", `"DMAR: IOMMU enabled"`} {
				if d := mustFind(t, rep, "platform/iommu").Detail; !strings.Contains(d, want) {
					t.Errorf("platform/iommu detail %q lacks %q", d, want)
				}
			}
			for name, want := range map[string]string{
				"firmware/mstconfig " + pf0:    "SRIOV_EN True(1), NUM_OF_VFS 8, LINK_TYPE_P1 ETH(2), LINK_TYPE_P2 ETH(2), LAG_RESOURCE_ALLOCATION DEVICE_DEFAULT(0)",
				"firmware/devlink-info " + pf0: "driver mlx5_core, firmware 22.39.1002 running, PSID MT_0000000359",
				"platform/sriov p0":            "p0 (0000:61:00.0, mlx5_core): sriov_totalvfs 8",
				"nic/roce":                     "devlink param enable_roce true",
				"daemons/ovs-version":          "Open vSwitch 3.3.1",
				"kernel/bonding":               "max_bonds 0",
				"nic/debugfs":                  "/sys/kernel/debug/mlx5/0000:61:00.0/lag/state",
			} {
				if d := mustFind(t, rep, name).Detail; !strings.Contains(d, want) {
					t.Errorf("%s detail %q lacks %q", name, d, want)
				}
			}
		})
	}
}

// checkFixes asserts every fail and warn says how to fix it.
func checkFixes(t *testing.T, rep *Report) {
	t.Helper()
	for _, c := range rep.Checks {
		if (c.Status == Fail || c.Status == Warn) && strings.TrimSpace(c.Fix) == "" {
			t.Errorf("%s is %s without a fix: %s", c.Name, c.Status, c.Detail)
		}
	}
}

func TestBuildMachine(t *testing.T) {
	tests := []struct {
		name   string
		target Target
		// fails are the checks that must fail, each with words its fix must contain.
		fails map[string][]string
		warns []string
	}{
		{
			name: "no config: discovery",
			fails: map[string][]string{
				"platform/iommu":                    {"intel_iommu=on iommu=pt", "/etc/default/grub", "VT-d"},
				"platform/vfio-pci":                 {"CONFIG_VFIO_PCI", "modprobe vfio-pci"},
				"nic/discovery":                     {"ConnectX", "SRIOV_EN=1", "virtio NIC has no SR-IOV"},
				"kernel/bonding":                    {"CONFIG_BONDING", "modprobe bonding"},
				"kernel/openvswitch":                {"CONFIG_OPENVSWITCH", "modprobe openvswitch"},
				"daemons/ovs-vswitchd":              {"systemctl enable --now openvswitch-switch"},
				"daemons/ovsdb " + DefaultOVSDB:     {"systemctl enable --now openvswitch-switch"},
				"daemons/libvirt " + DefaultLibvirt: {"libvirt-daemon-system", "libvirtd"},
			},
			warns: []string{"daemons/ovs-version"},
		},
		{
			name:   "config naming eth0 and ifb0 (issue 12)",
			target: Target{Groups: []Group{{Name: "lag0", PFs: []string{"eth0", "ifb0"}, NumVFs: 4, Switchdev: true, BondName: "bond0", BondMode: "802.3ad"}}},
			fails: map[string][]string{
				"platform/iommu":      {"intel_iommu=on"},
				"platform/sriov eth0": {"ConnectX", "virtio NIC has no SR-IOV"},
				"platform/sriov ifb0": {"ConnectX"},
				"nic/same-nic":        {"one PCI slot"},
				"nic/eswitch eth0":    {"devlink"},
				"kernel/bonding":      {"modprobe bonding"},
			},
			warns: []string{"nic/driver eth0", "daemons/ovs-version"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := buildMachine(t)
			env := Env{Sys: x.fs(), Kernel: plainKernel{links: []string{"lo", "eth0", "ifb0"}}, Run: buildRunner(t),
				Probe: fakeProber{ovsdb: errors.New("dial unix /var/run/openvswitch/db.sock: connect: no such file or directory"),
					libvirt: errors.New("Failed to connect socket to '/var/run/libvirt/libvirt-sock': No such file or directory")}}
			rep := runDoctor(t, env, tt.target)
			if rep.Ready {
				t.Fatal("the build machine is reported ready")
			}
			checkFixes(t, rep)
			for name, words := range tt.fails {
				c := mustFind(t, rep, name)
				if c.Status != Fail {
					t.Errorf("%s: %s, want fail (%s)", name, c.Status, c.Detail)
				}
				for _, w := range words {
					if !strings.Contains(c.Fix, w) {
						t.Errorf("%s: fix %q lacks %q", name, c.Fix, w)
					}
				}
			}
			for _, name := range tt.warns {
				if c := mustFind(t, rep, name); c.Status != Warn {
					t.Errorf("%s: %s, want warn (%s)", name, c.Status, c.Detail)
				}
			}
			if c, ok := rep.Find("nic/discovery"); ok && c.Status == Fail {
				for _, w := range []string{"eth0 (driver virtio_net, device virtio2 on PCI 0000:00:03.0)", "ifb0 (virtual, no device)"} {
					if !strings.Contains(c.Detail, w) {
						t.Errorf("nic/discovery detail %q lacks %q", c.Detail, w)
					}
				}
			}
			if c := mustFind(t, rep, "platform/vfio-pci"); !strings.Contains(c.Detail, "no loadable module support") {
				t.Errorf("vfio-pci detail %q does not say the kernel has no modules", c.Detail)
			}
			if c := mustFind(t, rep, "platform/iommu"); !strings.Contains(c.Detail, "kernel log (dmesg)") {
				t.Errorf("iommu detail %q did not fall back to dmesg", c.Detail)
			}
		})
	}
}

// TestSingleCases changes one thing of the ready host at a time.
func TestSingleCases(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, r *readyEnv, g *Group)
		check  string
		status Status
		words  []string // in the fix (fail, warn) or the detail (pass, skip)
		ready  bool
	}{
		{
			name:  "numvfs above sriov_totalvfs",
			setup: func(t *testing.T, r *readyEnv, g *Group) { g.NumVFs = 16 },
			check: "firmware/numvfs", status: Fail,
			words: []string{"mstconfig -d 0000:61:00.0 -y set SRIOV_EN=1 NUM_OF_VFS=16", "mstconfig -d 0000:61:00.1 -y set SRIOV_EN=1 NUM_OF_VFS=16", "reboot"},
		},
		{
			name:  "numvfs above the firmware's NUM_OF_VFS (mstconfig)",
			setup: func(t *testing.T, r *readyEnv, g *Group) { g.NumVFs = 16 },
			check: "firmware/mstconfig " + pf0, status: Fail,
			words: []string{"mstconfig -d 0000:61:00.0 -y set NUM_OF_VFS=16", "reboot"},
		},
		{
			// The firmware's NUM_OF_VFS, not numvfs, is what mlx5 holds to 64.
			name:  "sriov_totalvfs above 64 in a switchdev group",
			setup: func(t *testing.T, r *readyEnv, g *Group) { r.env.Sys = bigTotal(t, r) },
			check: "firmware/numvfs", status: Fail,
			words: []string{"mstconfig -d 0000:61:00.0 -y set NUM_OF_VFS=64", "mstconfig -d 0000:61:00.1 -y set NUM_OF_VFS=64",
				"mstfwreset -d 0000:61:00.0 -y reset", "mstfwreset -d 0000:61:00.1 -y reset"},
		},
		{
			name:  "sriov_totalvfs above 64 in a legacy group",
			setup: func(t *testing.T, r *readyEnv, g *Group) { r.env.Sys = bigTotal(t, r); g.Switchdev = false },
			check: "firmware/numvfs", status: Pass, ready: true,
			words: []string{"fits sriov_totalvfs: p0 128, p1 128"},
		},
		{
			name: "NUM_OF_VFS above 64 in a switchdev group (mstconfig)",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.run.out["mstconfig -e -d "+pf0+" q"] = strings.Replace(mstconfigReady,
					"NUM_OF_VFS                                  0                   8                   8",
					"NUM_OF_VFS                                  0                   127                 127", 1)
			},
			check: "firmware/mstconfig " + pf0, status: Fail,
			words: []string{"mstconfig -d 0000:61:00.0 -y set NUM_OF_VFS=64", "mstfwreset -d 0000:61:00.0 -y reset"},
		},
		{
			name: "NUM_OF_VFS 64 at the next boot only (mstconfig)",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.run.out["mstconfig -e -d "+pf0+" q"] = strings.Replace(mstconfigReady,
					"NUM_OF_VFS                                  0                   8                   8",
					"NUM_OF_VFS                                  0                   127                 64", 1)
			},
			check: "firmware/mstconfig " + pf0, status: Fail,
			words: []string{"reset the firmware: mstfwreset -d 0000:61:00.0 -y reset"},
		},
		{
			name: "RoCE on one port only",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.run.out["devlink -j dev param show pci/"+pf1+" name enable_roce"] = roceParam(pf1, false)
			},
			check: "nic/roce", status: Fail,
			words: []string{"devlink dev param set pci/0000:61:00.1 name enable_roce value true cmode driverinit", "devlink dev reload pci/0000:61:00.1"},
		},
		{
			name: "Open vSwitch 3.1.0 started after the first 10 s",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.run.out["ovs-vswitchd --version"] = "ovs-vswitchd (Open vSwitch) 3.1.0\n"
			},
			check: "daemons/ovs-version", status: Pass, ready: true,
			words: []string{"Open vSwitch 3.1.0, not affected: pid 4242 started 60.0 s after boot"},
		},
		{
			name: "Open vSwitch 3.1.0 started 4 s after boot",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.run.out["ovs-vswitchd --version"] = "ovs-vswitchd (Open vSwitch) 3.1.0\n"
				r.machine.file("/proc/4242/stat", statLine(4242, "ovs-vswitchd", 400))
			},
			check: "daemons/ovs-version", status: Fail,
			words: []string{"systemctl restart openvswitch-switch", "ExecStartPre"},
		},
		{
			name: "kernel datapath lost every upcall",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.env.Kernel = dpKernel{Kernel: r.h, st: eswitch.DatapathStats{Name: "ovs-system", Missed: 50, Lost: 50, PerCPUDispatch: true}}
			},
			check: "daemons/ovs-upcalls", status: Fail,
			words: []string{"systemctl restart openvswitch-switch"},
		},
		{
			name: "NetworkManager manages a PF",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.run.tools["nmcli"] = true
				r.run.out["nmcli -t -f DEVICE,STATE device"] = "p0:connected\np1:unmanaged\nlo:unmanaged\n"
			},
			check: "conflicts/networkmanager", status: Fail,
			words: []string{"nmcli device set p0 managed no", `KERNEL=="p0", ENV{NM_UNMANAGED}="1"`, `KERNEL=="bond0", ENV{NM_UNMANAGED}="1"`, NMRulesPath, "udevadm"},
		},
		{
			name: "NetworkManager runs without nmcli",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.machine.file("/proc/777/comm", "NetworkManager\n").file("/proc/777/stat", statLine(777, "NetworkManager", 300))
			},
			check: "conflicts/networkmanager", status: Warn, ready: true,
			words: []string{"network-manager", "NM_UNMANAGED"},
		},
		{
			name: "a PF is a slave of a foreign bond",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				if err := r.h.AddBond(eswitch.BondSpec{Name: "bond9", Mode: "active-backup", Miimon: 100}); err != nil {
					t.Fatal(err)
				}
				if err := r.h.SetMaster("p1", "bond9"); err != nil {
					t.Fatal(err)
				}
			},
			check: "conflicts/bond p1", status: Fail,
			words: []string{"ip link set p1 nomaster", "bond9"},
		},
		{
			name: "sriov_numvfs already set by someone else",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				if err := r.h.FS().WriteFile("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", []byte("2")); err != nil {
					t.Fatal(err)
				}
			},
			check: "conflicts/numvfs p0", status: Warn, ready: true,
			words: []string{"sriov_numvfs", "grep -rs sriov_numvfs", "sriov.total-vfs"},
		},
		{
			name: "sriov_numvfs set by vflag (journal)",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				if err := r.h.FS().WriteFile("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", []byte("4")); err != nil {
					t.Fatal(err)
				}
				r.stateDir = t.TempDir()
				writeJournal(t, r.stateDir, "sriov.numvfs", "sriov.numvfs/pci/"+pf0)
			},
			check: "conflicts/numvfs p0", status: Pass, ready: true,
			words: []string{"set by vflag (its journal records it)"},
		},
		{
			name: "an empty bond0 from the bonding module",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				if err := r.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "balance-rr"}); err != nil {
					t.Fatalf("the simulated host refuses balance-rr: %v", err)
				}
			},
			check: "kernel/bonding", status: Warn,
			words: []string{"ip link del bond0"},
		},
		{
			name: "an empty bond0 with max_bonds at its default",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.machine.remove("/etc/modprobe.d/vflag-bonding.conf")
				if err := r.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100}); err != nil {
					t.Fatal(err)
				}
			},
			check: "kernel/bonding", status: Warn,
			words: []string{"ip link del bond0", "options bonding max_bonds=0", "/etc/modprobe.d/"},
		},
		{
			name: "bond name taken by a bond vflag did not create",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				if err := r.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100, Alias: "somebody"}); err != nil {
					t.Fatal(err)
				}
			},
			check: "conflicts/bond-name bond0", status: Fail,
			words: []string{"groups[].bond.name", "ip link del bond0"},
		},
		{
			name: "an unmarked bond0 that a pending journal entry was creating",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				if err := r.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100}); err != nil {
					t.Fatal(err)
				}
				r.stateDir = t.TempDir()
				doc := `{"version": 1, "entries": [{"kind": "bond.create", "id": "bond.create/bond0", "record": {"name": "bond0", "alias": "vflag:lag0"}, "state": "pending", "run": "r1"}]}`
				if err := os.WriteFile(filepath.Join(r.stateDir, "journal.json"), []byte(doc), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			check: "conflicts/bond-name bond0", status: Warn, ready: true,
			words: []string{"vflag up", "vflag down", "ip link del bond0"},
		},
		{
			name: "max_bonds default with a group bond named bond0",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.machine.remove("/etc/modprobe.d/vflag-bonding.conf")
			},
			check: "kernel/bonding", status: Warn, ready: true,
			words: []string{"options bonding max_bonds=0"},
		},
		{
			name: "debugfs not mounted",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.env.Sys = hideFS{FS: r.h.FS(), prefixes: []string{"/sys/kernel/debug"}}
				r.machine.file("/proc/mounts", "sysfs /sys sysfs rw 0 0\n")
			},
			check: "nic/debugfs", status: Fail,
			words: []string{"mount -t debugfs none /sys/kernel/debug", "/etc/fstab"},
		},
		{
			name: "debugfs not mounted, accepted by the config",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.env.Sys = hideFS{FS: r.h.FS(), prefixes: []string{"/sys/kernel/debug"}}
				r.machine.file("/proc/mounts", "sysfs /sys sysfs rw 0 0\n")
				g.AcceptUnverifiedLAG = true
			},
			check: "nic/debugfs", status: Warn, ready: true,
			words: []string{"mount -t debugfs none /sys/kernel/debug", "/etc/fstab"},
		},
		{
			name: "IOMMU on without iommu=pt",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.machine.file("/proc/cmdline", "ro quiet intel_iommu=on\n")
			},
			check: "platform/iommu", status: Warn, ready: true,
			words: []string{"iommu=pt", "update-grub"},
		},
		{
			name: "IOMMU off on the command line",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.machine.file("/proc/cmdline", "ro quiet intel_iommu=off\n").remove("/sys/class/iommu").remove("/sys/kernel/iommu_groups")
			},
			check: "platform/iommu", status: Fail,
			words: []string{"intel_iommu=on iommu=pt", "VT-d"},
		},
		{
			name: "second port in InfiniBand mode",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.run.out["mstconfig -e -d "+pf0+" q"] = strings.Replace(mstconfigReady,
					"LINK_TYPE_P2                                ETH(2)              ETH(2)              ETH(2)",
					"LINK_TYPE_P2                                ETH(2)              IB(1)               IB(1)", 1)
			},
			check: "firmware/mstconfig " + pf0, status: Fail,
			words: []string{"LINK_TYPE_P2=ETH", "reboot"},
		},
		{
			name:  "mstconfig not installed",
			setup: func(t *testing.T, r *readyEnv, g *Group) { delete(r.run.tools, "mstconfig") },
			check: "firmware/mstconfig " + pf0, status: Skip, ready: true,
			words: []string{"apt-get install mstflint"},
		},
		{
			name: "OVSDB unreachable",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.env.Probe = fakeProber{ovsdb: errors.New("connection refused")}
			},
			check: "daemons/ovsdb " + DefaultOVSDB, status: Fail,
			words: []string{"openvswitch-switch"},
		},
		{
			name: "libvirt unreachable",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.env.Probe = fakeProber{libvirt: errors.New("connection refused")}
			},
			check: "daemons/libvirt " + DefaultLibvirt, status: Fail,
			words: []string{"systemctl enable --now libvirtd"},
		},
		{
			name: "two ports of different NICs",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.env.Sys, r.env.Kernel = twoNICs(t)
				g.PFs = []string{"p0", "q1"}
			},
			check: "nic/same-nic", status: Fail,
			words: []string{"functions .0 and .1 of one PCI slot"},
		},
		{
			name: "old kernel",
			setup: func(t *testing.T, r *readyEnv, g *Group) {
				r.machine.file("/proc/sys/kernel/osrelease", "5.15.0-91-generic\n")
			},
			check: "kernel/version", status: Warn, ready: true,
			words: []string{">= 6.1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReady(t)
			g := lagGroup()
			tt.setup(t, r, &g)
			rep := runDoctor(t, r.env, Target{Groups: []Group{g}, StateDir: r.stateDir})
			c := mustFind(t, rep, tt.check)
			if c.Status != tt.status {
				t.Fatalf("%s: %s (%s), want %s", tt.check, c.Status, c.Detail, tt.status)
			}
			text := c.Fix
			if tt.status == Pass || tt.status == Skip && c.Fix == "" {
				text = c.Detail
			}
			for _, w := range tt.words {
				if !strings.Contains(text, w) {
					t.Errorf("%s: %q lacks %q", tt.check, text, w)
				}
			}
			if rep.Ready != tt.ready {
				t.Errorf("ready = %v, want %v", rep.Ready, tt.ready)
			}
			checkFixes(t, rep)
		})
	}
}

// bigTotal reopens the ready NIC with 128 VFs per PF.
func bigTotal(t *testing.T, r *readyEnv) sysfs.FS {
	h, err := sim.Open(t.TempDir(), &sim.Spec{NICs: []sim.NICSpec{{Name: "cx6dx", TotalVFs: 128,
		PFs: []sim.PFSpec{{PCI: pf0, Netdev: "p0"}, {PCI: pf1, Netdev: "p1"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	r.h = h
	r.env.Kernel = dpKernel{Kernel: h, st: healthyDatapath()}
	return h.FS()
}

// twoNICs is a host with two dual-port NICs: p0/p1 and q0/q1.
func twoNICs(t *testing.T) (sysfs.FS, eswitch.Kernel) {
	h, err := sim.Open(t.TempDir(), &sim.Spec{NICs: []sim.NICSpec{
		{Name: "a", TotalVFs: 8, PFs: []sim.PFSpec{{PCI: pf0, Netdev: "p0"}, {PCI: pf1, Netdev: "p1"}}},
		{Name: "b", TotalVFs: 8, PFs: []sim.PFSpec{{PCI: "0000:62:00.0", Netdev: "q0"}, {PCI: "0000:62:00.1", Netdev: "q1"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h.FS(), dpKernel{Kernel: h, st: healthyDatapath()}
}

// writeJournal writes a one-entry vflag journal (teardown's format, version 1).
func writeJournal(t *testing.T, dir, kind, id string) {
	t.Helper()
	doc := map[string]any{"version": 1, "entries": []map[string]any{{"kind": kind, "id": id, "record": map[string]any{"pf": strings.TrimPrefix(id, kind+"/"), "prior": 0}, "state": "applied", "run": "r1"}}}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(dir, "journal.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDiscovery(t *testing.T) {
	r := newReady(t)
	rep := runDoctor(t, r.env, Target{})
	c := mustFind(t, rep, "nic/discovery")
	if c.Status != Pass || !strings.Contains(c.Detail, "0000:61:00 (p0, p1)") {
		t.Fatalf("nic/discovery: %s %q", c.Status, c.Detail)
	}
	for _, name := range []string{"platform/sriov p0", "platform/sriov p1", "nic/same-nic", "nic/eswitch p0", "nic/roce", "conflicts/numvfs p1"} {
		if c := mustFind(t, rep, name); c.Status != Pass {
			t.Errorf("%s: %s %s", name, c.Status, c.Detail)
		}
	}
	if c := mustFind(t, rep, "firmware/numvfs"); c.Status != Skip {
		t.Errorf("firmware/numvfs without a config: %s, want skip", c.Status)
	}
	if !rep.Ready {
		t.Error("discovered ready NIC: not ready")
	}
	// A switchdev NIC lists its representors under the PF's PCI function: they are no PFs.
	if _, ok := rep.Find("platform/sriov eth0"); ok {
		t.Error("a representor or VF netdev was taken for a PF")
	}
}

func TestSimulatedSkipsTheMachine(t *testing.T) {
	r := newReady(t)
	r.env.Simulated = true
	r.env.Kernel = r.h
	rep := runDoctor(t, r.env, Target{Groups: []Group{lagGroup()}})
	for _, name := range []string{"platform/iommu", "platform/vfio-pci", "firmware/mstconfig " + pf0, "firmware/devlink-info " + pf0,
		"kernel/version", "kernel/bonding", "daemons/ovs-upcalls", "conflicts/networkmanager"} {
		if c := mustFind(t, rep, name); c.Status != Skip {
			t.Errorf("%s: %s, want skip on the simulated host", name, c.Status)
		}
	}
	for _, call := range r.run.calls {
		if strings.HasPrefix(call, "mstconfig") || strings.HasPrefix(call, "devlink") || strings.HasPrefix(call, "nmcli") {
			t.Errorf("asked the real machine's %q about a simulated NIC", call)
		}
	}
	if c := mustFind(t, rep, "nic/roce"); c.Status != Pass || !strings.Contains(c.Detail, "no RDMA device") {
		t.Errorf("nic/roce on the simulated host: %s %q", c.Status, c.Detail)
	}
}

func TestConfigError(t *testing.T) {
	r := newReady(t)
	rep := runDoctor(t, r.env, Target{ConfigError: errors.New("config /etc/vflag/vflag.yaml: invalid config:\n  groups[0].numvfs: \"x\" is not a number")})
	c := mustFind(t, rep, "config/valid")
	if c.Status != Fail || c.Fix == "" || rep.Ready {
		t.Fatalf("config/valid: %+v ready %v", c, rep.Ready)
	}
	if rep.Checks[0].Name != "config/valid" {
		t.Errorf("config/valid is not reported first")
	}
	if _, ok := rep.Find("nic/discovery"); !ok {
		t.Error("no discovery after a config error")
	}
}

func TestOutputs(t *testing.T) {
	r := newReady(t)
	g := lagGroup()
	g.NumVFs = 16
	rep := runDoctor(t, r.env, Target{Groups: []Group{g}})

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc) != 2 || doc["checks"] == nil || doc["ready"] == nil {
		t.Fatalf("JSON keys: %v", keys(doc))
	}
	var checks []map[string]any
	if err := json.Unmarshal(doc["checks"], &checks); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		for _, k := range []string{"name", "status", "detail", "fix", "area"} {
			if _, ok := c[k]; !ok {
				t.Errorf("check %v lacks %q", c["name"], k)
			}
		}
	}
	if string(doc["ready"]) != "false" {
		t.Errorf("ready = %s", doc["ready"])
	}

	var text bytes.Buffer
	_ = rep.WriteText(&text, false)
	out := text.String()
	for _, w := range []string{"platform\n", "firmware\n", "  FAIL  numvfs", "        fix: raise the firmware's VF count", "NOT READY: 2 failed"} {
		if !strings.Contains(out, w) {
			t.Errorf("text lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("colour without a terminal")
	}
	var col bytes.Buffer
	_ = rep.WriteText(&col, true)
	if !strings.Contains(col.String(), ansiRed+"FAIL") || !strings.Contains(col.String(), ansiGreen+"PASS") {
		t.Error("no colour with colour on")
	}

	path := filepath.Join(t.TempDir(), "doctor.xml")
	if err := rep.WriteJUnitFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ju struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &ju); err != nil {
		t.Fatal(err)
	}
	if ju.Tests != len(rep.Checks) || ju.Failures != rep.Count(Fail) {
		t.Errorf("junit: %d tests %d failures, want %d %d", ju.Tests, ju.Failures, len(rep.Checks), rep.Count(Fail))
	}
	found := false
	for _, s := range ju.Suites {
		for _, c := range s.Cases {
			if c.Name == "firmware/numvfs" && c.Failure != nil && strings.Contains(c.Failure.Text, "fix: raise") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("junit has no failing firmware/numvfs with its fix:\n%s", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temp files left next to the JUnit file: %v", entries)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestParsers(t *testing.T) {
	cfg := parseMstconfig(mstconfigReady)
	if v := cfg["NUM_OF_VFS"]; v.Current != "8" || v.Default != "0" {
		t.Errorf("NUM_OF_VFS %+v", v)
	}
	if mstNumber(cfg["SRIOV_EN"].Current) != 1 || mstNumber(cfg["LINK_TYPE_P1"].Next) != 2 || mstNumber("IB(1)") != 1 || mstNumber("x") != -1 {
		t.Error("mstNumber")
	}
	if _, ok := cfg["Device"]; ok {
		t.Error("header parsed as a setting")
	}
	if v, ok := parseDevlinkBoolParam(roceParam(pf0, false), "enable_roce"); !ok || v {
		t.Errorf("enable_roce false: %v %v", v, ok)
	}
	if _, ok := parseDevlinkBoolParam(`{"param":{}}`, "enable_roce"); ok {
		t.Error("absent param read")
	}
	// Two devices listed: the first by name, every time (FuzzParseDevlinkBoolParam
	// found the answer following the map's order).
	two := `{"param":{"pci/0000:61:00.1":[{"name":"enable_roce","values":[{"value":false}]}],"pci/0000:61:00.0":[{"name":"enable_roce","values":[{"value":true}]}]}}`
	for range 32 {
		if v, ok := parseDevlinkBoolParam(two, "enable_roce"); !ok || !v {
			t.Fatalf("two devices: %v %v, want pci/0000:61:00.0's true", v, ok)
		}
	}
	for rel, want := range map[string][2]int{"6.1.0-18-amd64": {6, 1}, "5.19.17": {5, 19}, "6.18.44-fc-v657": {6, 18}, "4.18.0-513.el8.x86_64": {4, 18}} {
		maj, mnr, ok := kernelVersion(rel)
		if !ok || maj != want[0] || mnr != want[1] {
			t.Errorf("kernelVersion(%q) = %d.%d %v", rel, maj, mnr, ok)
		}
	}
	p := cmdlineParams("BOOT_IMAGE=x intel_iommu=on iommu=pt -- iommu=off")
	if p["iommu"] != "pt" || p["intel_iommu"] != "on" {
		t.Errorf("cmdline %v", p)
	}
	if f := modListed("kernel/drivers/vfio/pci/vfio-pci.ko.xz: kernel/drivers/vfio/vfio.ko.xz\n", "vfio_pci"); f != "kernel/drivers/vfio/pci/vfio-pci.ko.xz" {
		t.Errorf("modListed %q", f)
	}
}

func TestModuleAvailable(t *testing.T) {
	x := newTree(t).
		file("/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n").
		file("/proc/modules", "").
		file("/lib/modules/6.1.0-18-amd64/modules.dep", "kernel/drivers/net/bonding/bonding.ko.xz: kernel/net/tls/tls.ko.xz\n").
		file("/lib/modules/6.1.0-18-amd64/modules.builtin", "kernel/drivers/vfio/pci/vfio-pci.ko\n")
	d := &doctor{env: Env{Host: x.fs()}}
	if m := d.module("bonding"); m.state != modAvailable || !strings.Contains(m.detail, "modprobe bonding") {
		t.Errorf("bonding: %+v", m)
	}
	if m := d.module("vfio-pci"); m.state != modBuiltin {
		t.Errorf("vfio-pci: %+v", m)
	}
	if m := d.module("openvswitch"); m.state != modMissing {
		t.Errorf("openvswitch: %+v", m)
	}
}

// TestOVSVersionTrap: the 3.1.0 early-boot trap is reported for 3.1.0
// alone, a Fail when a running ovs-vswitchd started in the first 10 s, a
// Pass (no warning) when every one started later, a Warn when none runs or
// the start is unknown; other versions on both sides of 3.1.0 pass at any
// start time. daemons/ovs-upcalls' fix names the 3.1.0 drop-in only on 3.1.0.
func TestOVSVersionTrap(t *testing.T) {
	const dropIn = "ExecStartPre"
	tests := []struct {
		version    string
		startTicks int // -1: not running, -2: start unknown
		status     Status
		detail     string // a part of the check's detail
	}{
		{"3.0.9", 400, Pass, "Open vSwitch 3.0.9 (no known VF-LAG problem)"},
		{"3.0.9", 6000, Pass, "Open vSwitch 3.0.9 (no known VF-LAG problem)"},
		{"3.1.0", 400, Fail, "pid 4242 started 4.0 s after boot"},
		{"3.1.0", 999, Fail, "pid 4242 started 10.0 s after boot"},
		{"3.1.0", 1000, Pass, "Open vSwitch 3.1.0, not affected: pid 4242 started 10.0 s after boot"},
		{"3.1.0", 6000, Pass, "Open vSwitch 3.1.0, not affected: pid 4242 started 60.0 s after boot"},
		{"3.1.0", -1, Warn, "Open vSwitch 3.1.0 (not running now)"},
		{"3.1.0", -2, Warn, "Open vSwitch 3.1.0 (running, its start time unknown)"},
		{"3.1.1", 400, Pass, "Open vSwitch 3.1.1 (no known VF-LAG problem)"},
		{"3.2.0", 400, Pass, "Open vSwitch 3.2.0 (no known VF-LAG problem)"},
		{"13.1.0", 400, Pass, "Open vSwitch 13.1.0 (no known VF-LAG problem)"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.version, tt.startTicks), func(t *testing.T) {
			r := newReady(t)
			r.run.out["ovs-vswitchd --version"] = "ovs-vswitchd (Open vSwitch) " + tt.version + "\n"
			switch tt.startTicks {
			case -1:
				r.machine.remove("/proc/4242")
			case -2:
				r.machine.file("/proc/4242/stat", "4242 (ovs-vswitchd) S 1\n")
			default:
				r.machine.file("/proc/4242/stat", statLine(4242, "ovs-vswitchd", tt.startTicks))
			}
			// Every upcall lost: the fix names the drop-in on 3.1.0 only.
			r.env.Kernel = dpKernel{Kernel: r.h, st: eswitch.DatapathStats{Name: "ovs-system", Missed: 50, Lost: 50, PerCPUDispatch: true}}
			rep := runDoctor(t, r.env, Target{Groups: []Group{lagGroup()}, StateDir: r.stateDir})
			c := mustFind(t, rep, "daemons/ovs-version")
			if c.Status != tt.status || !strings.Contains(c.Detail, tt.detail) {
				t.Fatalf("daemons/ovs-version: %s (%s), want %s with %q", c.Status, c.Detail, tt.status, tt.detail)
			}
			if c.Status == Pass && c.Fix != "" {
				t.Errorf("a pass with a fix: %q", c.Fix)
			}
			up := mustFind(t, rep, "daemons/ovs-upcalls")
			if got, want := strings.Contains(up.Fix, dropIn), tt.version == "3.1.0"; got != want {
				t.Errorf("daemons/ovs-upcalls fix names the 3.1.0 drop-in: %v, want %v: %q", got, want, up.Fix)
			}
		})
	}
}

// TestNeverAdvisesMoreThan64VFsForSwitchdev: whatever the host and the
// group ask, no fix for a switchdev group sets NUM_OF_VFS above 64 (more
// leaves the PF without VF-LAG); a legacy group may be told more.
func TestNeverAdvisesMoreThan64VFsForSwitchdev(t *testing.T) {
	setRE := regexp.MustCompile(`NUM_OF_VFS=(\d+)`)
	for _, tc := range []struct {
		name      string
		numvfs    int
		total     int    // sriov_totalvfs; 0 keeps the ready host's 8
		mst       string // NUM_OF_VFS row: current, next boot
		switchdev bool
		wantMax   int // the highest NUM_OF_VFS a fix must name (0: none)
	}{
		{"numvfs 65 on a NUM_OF_VFS 8 card", 65, 0, "8                   8", true, 64},
		{"numvfs 65, legacy", 65, 0, "8                   8", false, 65},
		{"NUM_OF_VFS 0", 0, 0, "0                   0", true, 8},
		{"NUM_OF_VFS 127, sriov_totalvfs 128", 4, 128, "127                 127", true, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReady(t)
			g := lagGroup()
			g.NumVFs, g.Switchdev = tc.numvfs, tc.switchdev
			if tc.total != 0 {
				r.env.Sys = bigTotal(t, r)
			}
			r.run.out["mstconfig -e -d "+pf0+" q"] = strings.Replace(mstconfigReady,
				"NUM_OF_VFS                                  0                   8                   8",
				"NUM_OF_VFS                                  0                   "+tc.mst, 1)
			rep := runDoctor(t, r.env, Target{Groups: []Group{g}, StateDir: r.stateDir})
			highest := 0
			for _, c := range rep.Checks {
				for _, m := range setRE.FindAllStringSubmatch(c.Fix, -1) {
					n, _ := strconv.Atoi(m[1])
					highest = max(highest, n)
				}
			}
			if highest != tc.wantMax {
				t.Fatalf("highest NUM_OF_VFS advised: %d, want %d", highest, tc.wantMax)
			}
		})
	}
}

// encapKernel is the ready host's kernel with the simulated eswitch's
// encap mode (dpKernel embeds only eswitch.Kernel).
type encapKernel struct {
	dpKernel
	em eswitch.EncapModer
}

func (k encapKernel) EncapMode(d eswitch.Devlink) (string, error)    { return k.em.EncapMode(d) }
func (k encapKernel) SetEncapMode(d eswitch.Devlink, m string) error { return k.em.SetEncapMode(d, m) }

// TestEncapModeCheck: a tunnel group's PFs are checked for encap-mode
// basic: basic passes, none in legacy passes (up sets basic before
// switchdev), none in switchdev warns with the fix; a group without a
// tunnel and a kernel that reads no encap mode are not checked.
func TestEncapModeCheck(t *testing.T) {
	r := newReady(t)
	g := lagGroup()
	if rep := runDoctor(t, r.env, Target{Groups: []Group{g}, StateDir: r.stateDir}); func() bool { _, ok := rep.Find("nic/encap-mode p0"); return ok }() {
		t.Fatal("nic/encap-mode checked for a group without a tunnel")
	}
	g.Tunnel = "vxlan"
	if c := mustFind(t, runDoctor(t, r.env, Target{Groups: []Group{g}, StateDir: r.stateDir}), "nic/encap-mode p0"); c.Status != Skip {
		t.Fatalf("a kernel without encap modes: %+v, want skip", c)
	}
	r.env.Kernel = encapKernel{dpKernel: r.env.Kernel.(dpKernel), em: r.h}
	dl := eswitch.Devlink{Bus: "pci", Device: pf0}
	for _, step := range []struct {
		do     func() error
		status Status
		detail string
	}{
		{func() error { return nil }, Pass, "encap-mode basic"},
		{func() error { return r.h.SetEncapMode(dl, eswitch.EncapNone) }, Pass, "encap-mode none in legacy mode: vflag up sets basic before switchdev"},
		{func() error { return r.h.SetEswitchMode(dl, eswitch.ModeSwitchdev) }, Warn, "encap-mode none in switchdev"},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		c := mustFind(t, runDoctor(t, r.env, Target{Groups: []Group{g}, StateDir: r.stateDir}), "nic/encap-mode p0")
		if c.Status != step.status || !strings.Contains(c.Detail, step.detail) {
			t.Fatalf("%+v, want %s with %q", c, step.status, step.detail)
		}
	}
	if c := mustFind(t, runDoctor(t, r.env, Target{Groups: []Group{g}, StateDir: r.stateDir}), "nic/encap-mode p1"); c.Status != Pass {
		t.Fatalf("p1: %+v, want pass", c)
	}
}
