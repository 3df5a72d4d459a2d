package eswitch_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
)

// tree writes a fixture /sys of real files and symlinks under a temp root.
type tree struct {
	t    *testing.T
	root string
}

func newTree(t *testing.T) tree { return tree{t: t, root: t.TempDir()} }

func (x tree) fs() sysfs.Dir { return sysfs.Dir(x.root) }

func (x tree) file(p, content string) {
	x.t.Helper()
	full := filepath.Join(x.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		x.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o444); err != nil {
		x.t.Fatal(err)
	}
}

func (x tree) link(p, target string) {
	x.t.Helper()
	full := filepath.Join(x.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		x.t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		x.t.Fatal(err)
	}
}

func (x tree) dir(p string) {
	x.t.Helper()
	if err := os.MkdirAll(filepath.Join(x.root, p), 0o755); err != nil {
		x.t.Fatal(err)
	}
}

const lagDir = "/sys/kernel/debug/mlx5/0000:61:00.0/lag"

func TestReadLAGFixture(t *testing.T) {
	cases := []struct {
		name  string
		build func(x tree)
		want  eswitch.LAGStatus
	}{
		{
			name:  "no debugfs at all",
			build: func(x tree) { x.dir("/sys/class/net") },
			want:  eswitch.LAGStatus{State: eswitch.LAGUnverified},
		},
		{
			name:  "debugfs without mlx5",
			build: func(x tree) { x.dir("/sys/kernel/debug") },
			want:  eswitch.LAGStatus{State: eswitch.LAGUnverified},
		},
		{
			name:  "mlx5 without lag (kernel before 5.19)",
			build: func(x tree) { x.dir("/sys/kernel/debug/mlx5/0000:61:00.0") },
			want:  eswitch.LAGStatus{State: eswitch.LAGUnverified},
		},
		{
			name: "disabled",
			build: func(x tree) {
				x.file(lagDir+"/state", "disabled\n")
				x.file(lagDir+"/members", "0000:61:00.0\n0000:61:00.1\n")
			},
			want: eswitch.LAGStatus{State: eswitch.LAGInactive},
		},
		{
			name: "active, hash, shared fdb",
			build: func(x tree) {
				x.file(lagDir+"/state", "active\n")
				x.file(lagDir+"/type", "switchdev\n")
				x.file(lagDir+"/port_sel_mode", "hash\n")
				x.file(lagDir+"/flags", "shared_fdb:on\nfdb_selection_mode:native\n")
				x.file(lagDir+"/mapping", "1\n2\n")
				x.file(lagDir+"/members", "0000:61:00.0\n0000:61:00.1\n")
			},
			want: eswitch.LAGStatus{State: eswitch.LAGActive, Type: "switchdev", PortSelMode: "hash",
				SharedFDB: true, Members: []string{"0000:61:00.0", "0000:61:00.1"}},
		},
		{
			name: "active, queue affinity, no shared fdb",
			build: func(x tree) {
				x.file(lagDir+"/state", "active\n")
				x.file(lagDir+"/type", "roce\n")
				x.file(lagDir+"/port_sel_mode", "queue_affinity\n")
				x.file(lagDir+"/flags", "shared_fdb:off\nfdb_selection_mode:native\n")
				x.file(lagDir+"/members", "0000:61:00.0\n0000:61:00.1\n")
			},
			want: eswitch.LAGStatus{State: eswitch.LAGActive, Type: "roce", PortSelMode: "queue_affinity",
				Members: []string{"0000:61:00.0", "0000:61:00.1"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newTree(t)
			c.build(x)
			got, err := eswitch.ReadLAG(x.fs(), "0000:61:00.0")
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("ReadLAG = %+v, %v; want %+v", got, err, c.want)
			}
			// WaitLAG returns at once for anything but inactive.
			if c.want.State != eswitch.LAGInactive {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				got, err := eswitch.WaitLAG(ctx, x.fs(), "0000:61:00.0", 100*time.Millisecond)
				if err != nil || !reflect.DeepEqual(got, c.want) {
					t.Errorf("WaitLAG = %+v, %v; want %+v", got, err, c.want)
				}
				if el := time.Since(start); el >= 100*time.Millisecond {
					t.Errorf("WaitLAG polled (%v) although the state is final", el)
				}
			}
		})
	}
}

func TestReadLAGUnreadableIsAnError(t *testing.T) {
	// A state that exists but cannot be read is an error, never "unverified".
	x := newTree(t)
	x.dir(lagDir + "/state") // read(2) on a directory: EISDIR
	st, err := eswitch.ReadLAG(x.fs(), "0000:61:00.0")
	if err == nil {
		t.Fatalf("ReadLAG of an unreadable state = %+v, want an error", st)
	}
	if st.State == eswitch.LAGUnverified || st.State == eswitch.LAGActive {
		t.Errorf("ReadLAG returned state %q with the error %v", st.State, err)
	}
	if _, err := eswitch.WaitLAG(quick(t), x.fs(), "0000:61:00.0", time.Millisecond); err == nil {
		t.Errorf("WaitLAG hid the read error")
	}
}

// A host without devlink ports where udev renamed the representors: the
// names say nothing (one even looks like another VF's representor), only
// phys_port_name and phys_switch_id do.
func TestRepresentorsIgnoreNames(t *testing.T) {
	x := newTree(t)
	netdev := func(name, ppn, switchID string) {
		d := "/sys/devices/pci0000:60/0000:60:01.0/0000:61:00.0/net/" + name
		x.file(d+"/phys_port_name", ppn+"\n")
		x.file(d+"/phys_switch_id", switchID+"\n")
		x.link("/sys/class/net/"+name, "../../devices/pci0000:60/0000:60:01.0/0000:61:00.0/net/"+name)
	}
	netdev("ens1f0np0", "p0", switch0)
	netdev("pf0vf1", "pf1vf0", switch0)        // named like PF0 VF1, is PF1 VF0
	netdev("ens1f0npf0vf0", "pf0vf1", switch0) // PF0 VF1
	netdev("vm-a-port", "pf0vf0", switch0)     // PF0 VF0
	netdev("other1", "pf0vf2", switch1)        // PF0 VF2 of another NIC
	// A netdev without phys_port_name (a VF netdev: EOPNOTSUPP on the real
	// kernel, no file here) and a bond.
	x.dir("/sys/devices/pci0000:60/0000:60:01.0/0000:61:00.2/net/eth5")
	x.link("/sys/class/net/eth5", "../../devices/pci0000:60/0000:60:01.0/0000:61:00.2/net/eth5")
	x.dir("/sys/devices/virtual/net/bond0")
	x.link("/sys/class/net/bond0", "../../devices/virtual/net/bond0")

	pf := eswitch.PF{Netdev: "ens1f0np0", Addr: "0000:61:00.0", Devlink: pciDevlink("0000:61:00.0"), PfNumber: 0, SwitchID: switch0}
	got, err := eswitch.Representors(noDevlink{}, x.fs(), pf)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{0: "vm-a-port", 1: "ens1f0npf0vf0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Representors = %v, want %v", got, want)
	}

	pf1 := eswitch.PF{Netdev: "ens1f1np1", Addr: "0000:61:00.1", Devlink: pciDevlink("0000:61:00.1"), PfNumber: 1, SwitchID: switch0}
	got, err = eswitch.Representors(noDevlink{}, x.fs(), pf1)
	if err != nil || !reflect.DeepEqual(got, map[int]string{0: "pf0vf1"}) {
		t.Errorf("Representors of PF1 = %v, %v; want {0: pf0vf1}", got, err)
	}

	if _, err := eswitch.Representors(noDevlink{}, sysfs.Dir(filepath.Join(x.root, "nothing")), pf); err == nil {
		t.Errorf("Representors without /sys/class/net succeeded")
	}
}

// devlinkPorts is a kernel that only answers Ports.
type devlinkPorts struct {
	eswitch.Kernel
	ports []eswitch.Port
}

func (k devlinkPorts) Ports() ([]eswitch.Port, error) { return k.ports, nil }

// Devlink is authoritative: the port attributes decide, whatever the netdev
// is called and whatever its sysfs says.
func TestRepresentorsDevlinkFirst(t *testing.T) {
	x := newTree(t)
	x.dir("/sys/class/net")
	dl0, dl1 := pciDevlink("0000:61:00.0"), pciDevlink("0000:61:00.1")
	k := devlinkPorts{ports: []eswitch.Port{
		{Devlink: dl0, Index: 65535, Netdev: "p0", Flavour: eswitch.FlavourPhysical},
		{Devlink: dl0, Index: 1, Netdev: "repA", Flavour: eswitch.FlavourPCIVF, PfNumber: 0, VfNumber: 0},
		{Devlink: dl0, Index: 2, Netdev: "pf1vf1", Flavour: eswitch.FlavourPCIVF, PfNumber: 0, VfNumber: 1},
		{Devlink: dl0, Index: 3, Netdev: "", Flavour: eswitch.FlavourPCIVF, PfNumber: 0, VfNumber: 2}, // no netdev yet
		{Devlink: dl0, Index: 4, Netdev: "sf0", Flavour: "pcisf", PfNumber: 0},
		{Devlink: dl1, Index: 131071, Netdev: "p1", Flavour: eswitch.FlavourPhysical, Number: 1},
		{Devlink: dl1, Index: 65537, Netdev: "pf0vf1", Flavour: eswitch.FlavourPCIVF, PfNumber: 1, VfNumber: 0},
		{Devlink: pciDevlink("0000:81:00.0"), Index: 2, Netdev: "repX", Flavour: eswitch.FlavourPCIVF, PfNumber: 0, VfNumber: 1},
	}}
	pf0 := eswitch.PF{Netdev: "p0", Addr: "0000:61:00.0", Devlink: dl0, PfNumber: 0}
	got, err := eswitch.Representors(k, x.fs(), pf0)
	if err != nil || !reflect.DeepEqual(got, map[int]string{0: "repA", 1: "pf1vf1"}) {
		t.Errorf("Representors(p0) = %v, %v; want {0: repA, 1: pf1vf1}", got, err)
	}
	pf1 := eswitch.PF{Netdev: "p1", Addr: "0000:61:00.1", Devlink: dl1, PfNumber: 1}
	got, err = eswitch.Representors(k, x.fs(), pf1)
	if err != nil || !reflect.DeepEqual(got, map[int]string{0: "pf0vf1"}) {
		t.Errorf("Representors(p1) = %v, %v; want {0: pf0vf1}", got, err)
	}
}

func TestReadBondFixture(t *testing.T) {
	// The kernel's formats (KERNEL-FACTS §4), including an empty slaves file.
	x := newTree(t)
	d := "/sys/devices/virtual/net/bond0/bonding/"
	x.file(d+"mode", "802.3ad 4\n")
	x.file(d+"slaves", "\n")
	x.file(d+"active_slave", "")
	x.file(d+"miimon", "100\n")
	x.file(d+"mii_status", "down\n")
	x.file(d+"lacp_rate", "slow 0\n")
	x.file(d+"xmit_hash_policy", "encap3+4 4\n")
	x.file(d+"ad_select", "bandwidth 1\n")
	x.link("/sys/class/net/bond0", "../../devices/virtual/net/bond0")
	got, err := eswitch.ReadBond(x.fs(), "bond0")
	want := eswitch.BondInfo{Name: "bond0", Mode: "802.3ad", Slaves: []string{}, MIIStatus: "down", Miimon: 100,
		LacpRate: "slow", XmitHashPolicy: "encap3+4", AdSelect: "bandwidth"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadBond = %+v, %v; want %+v", got, err, want)
	}

	// No slaves file: an error, not an empty bond.
	y := newTree(t)
	y.file("/sys/class/net/bond1/bonding/mode", "balance-xor 2\n")
	if _, err := eswitch.ReadBond(y.fs(), "bond1"); err == nil {
		t.Errorf("ReadBond without a slaves file: %v, want an error", err)
	}
}

// quick is a context for calls that must return at once: if they poll
// instead, the test fails after a second rather than hanging.
func quick(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A netdevsim-like host (the e2e kernel): two port netdevs share one
// non-PCI device whose devlink instance is netdevsim/netdevsim1.
func TestResolvePFNonPCI(t *testing.T) {
	x := newTree(t)
	const id = "6f0a1c2e3d4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeef"
	x.link("/sys/devices/netdevsim1/subsystem", "../../bus/netdevsim")
	x.link("/sys/bus/netdevsim/devices/netdevsim1", "../../../devices/netdevsim1")
	for _, port := range []struct{ name, ppn string }{{"eni1np1", "p1"}, {"eni1np2", "p2"}} {
		d := "/sys/devices/netdevsim1/net/" + port.name
		x.file(d+"/phys_port_name", port.ppn+"\n")
		x.file(d+"/phys_switch_id", id+"\n")
		x.link(d+"/device", "../../../netdevsim1")
		x.link("/sys/class/net/"+port.name, "../../devices/netdevsim1/net/"+port.name)
	}
	x.dir("/sys/devices/virtual/net/bond0")
	x.link("/sys/class/net/bond0", "../../devices/virtual/net/bond0")

	nsim := eswitch.Devlink{Bus: "netdevsim", Device: "netdevsim1"}
	k := devlinkPorts{ports: []eswitch.Port{
		{Devlink: nsim, Index: 0, Netdev: "eni1np1", Flavour: eswitch.FlavourPhysical, Number: 1},
		{Devlink: nsim, Index: 1, Netdev: "eni1np2", Flavour: eswitch.FlavourPhysical, Number: 2},
		{Devlink: nsim, Index: 128, Netdev: "eni1npf0vf0", Flavour: eswitch.FlavourPCIVF, PfNumber: 0, VfNumber: 0},
	}}
	for _, name := range []string{"eni1np1", "eni1np2"} {
		pf, err := eswitch.ResolvePF(k, x.fs(), name)
		want := eswitch.PF{Dev: "netdevsim/netdevsim1", Netdev: name, Devlink: nsim, SwitchID: id}
		if err != nil || pf != want {
			t.Errorf("ResolvePF(%s) = %+v, %v; want %+v", name, pf, err, want)
		}
	}
	pf, err := eswitch.ResolvePF(k, x.fs(), "eni1np1")
	if err != nil {
		t.Fatal(err)
	}
	if reps, err := eswitch.Representors(k, x.fs(), pf); err != nil || len(reps) != 1 || reps[0] != "eni1npf0vf0" {
		t.Errorf("Representors(eni1np1) = %v, %v; want {0: eni1npf0vf0}", reps, err)
	}

	// Without a PCI address there is no devlink instance to guess.
	if pf, err := eswitch.ResolvePF(noDevlink{}, x.fs(), "eni1np1"); err == nil || !strings.Contains(err.Error(), "no devlink instance") {
		t.Errorf("ResolvePF without devlink ports = %+v, %v; want \"no devlink instance\"", pf, err)
	}
	// A netdev without a device (a bond) is no PF.
	if pf, err := eswitch.ResolvePF(k, x.fs(), "bond0"); err == nil || !strings.Contains(err.Error(), "bond0") {
		t.Errorf("ResolvePF(bond0) = %+v, %v; want an error naming it", pf, err)
	}
}
