package eswitch_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

const (
	nic0PF0  = "0000:61:00.0"
	nic0PF1  = "0000:61:00.1"
	nic1PF0  = "0000:81:00.0"
	nic1PF1  = "0000:81:00.1"
	switch0  = "0123456789abcdef"
	switch1  = "fedcba9876543210"
	lagDelay = 100 * time.Millisecond
)

func twoNICSpec() *sim.Spec {
	return &sim.Spec{
		NICs: []sim.NICSpec{
			{Name: "nic0", TotalVFs: 8, SwitchID: switch0,
				PFs: []sim.PFSpec{{PCI: nic0PF0, Netdev: "p0"}, {PCI: nic0PF1, Netdev: "p1"}}},
			{Name: "nic1", TotalVFs: 8, SwitchID: switch1,
				PFs: []sim.PFSpec{{PCI: nic1PF0, Netdev: "q0"}, {PCI: nic1PF1, Netdev: "q1"}}},
			{Name: "nic2", TotalVFs: 4,
				PFs: []sim.PFSpec{{PCI: "0000:a1:00.0", Netdev: "s0"}}},
		},
		Latency: sim.Latency{VFCreate: time.Millisecond, ModeChange: time.Millisecond, LAGActivation: lagDelay},
	}
}

func openSim(t *testing.T) *sim.Host {
	t.Helper()
	h, err := sim.Open(t.TempDir(), twoNICSpec())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func pciDevlink(a string) eswitch.Devlink { return eswitch.Devlink{Bus: "pci", Device: a} }

// toSwitchdev creates n VFs on each PF (without host drivers, as the
// pipeline does), switches the PFs to switchdev and waits for the VFs.
func toSwitchdev(t *testing.T, h *sim.Host, n int, pfs ...string) {
	t.Helper()
	pci := sriov.Host{FS: h.FS(), PollInterval: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, pf := range pfs {
		a := sriov.Addr(pf)
		if err := pci.SetAutoprobe(a, false); err != nil {
			t.Fatal(err)
		}
		if err := pci.SetNumVFs(a, n); err != nil {
			t.Fatal(err)
		}
		if _, err := pci.WaitVFs(ctx, a, n); err != nil {
			t.Fatal(err)
		}
		if err := h.SetEswitchMode(pciDevlink(pf), eswitch.ModeSwitchdev); err != nil {
			t.Fatal(err)
		}
	}
}

func resolve(t *testing.T, k eswitch.Kernel, f sysfs.FS, ref string) eswitch.PF {
	t.Helper()
	pf, err := eswitch.ResolvePF(k, f, ref)
	if err != nil {
		t.Fatalf("ResolvePF(%s): %v", ref, err)
	}
	return pf
}

// noDevlink is a kernel without devlink ports (old kernel, no devlink
// family, or a driver that registers none): Representors must fall back to
// phys_port_name + phys_switch_id.
type noDevlink struct{ eswitch.Kernel }

func (noDevlink) Ports() ([]eswitch.Port, error) { return nil, nil }

// portsFail is a kernel whose devlink dump fails.
type portsFail struct{ eswitch.Kernel }

func (portsFail) Ports() ([]eswitch.Port, error) { return nil, errors.New("devlink port show: EIO") }

func TestResolvePF(t *testing.T) {
	h := openSim(t)
	f := h.FS()
	check := func(when string, k eswitch.Kernel) {
		t.Helper()
		for _, c := range []struct {
			ref  string
			want eswitch.PF
		}{
			{"p0", eswitch.PF{Dev: sriov.PCIDevice(nic0PF0), Netdev: "p0", Addr: nic0PF0, Devlink: pciDevlink(nic0PF0), PfNumber: 0, SwitchID: switch0}},
			{"p1", eswitch.PF{Dev: sriov.PCIDevice(nic0PF1), Netdev: "p1", Addr: nic0PF1, Devlink: pciDevlink(nic0PF1), PfNumber: 1, SwitchID: switch0}},
			{"q1", eswitch.PF{Dev: sriov.PCIDevice(nic1PF1), Netdev: "q1", Addr: nic1PF1, Devlink: pciDevlink(nic1PF1), PfNumber: 1, SwitchID: switch1}},
			{nic0PF0, eswitch.PF{Dev: sriov.PCIDevice(nic0PF0), Netdev: "p0", Addr: nic0PF0, Devlink: pciDevlink(nic0PF0), PfNumber: 0, SwitchID: switch0}},
			{"0000:61:00.1", eswitch.PF{Dev: sriov.PCIDevice(nic0PF1), Netdev: "p1", Addr: nic0PF1, Devlink: pciDevlink(nic0PF1), PfNumber: 1, SwitchID: switch0}},
			{"81:00.0", eswitch.PF{Dev: sriov.PCIDevice(nic1PF0), Netdev: "q0", Addr: nic1PF0, Devlink: pciDevlink(nic1PF0), PfNumber: 0, SwitchID: switch1}},
			{"0000:A1:00.0", eswitch.PF{Dev: sriov.PCIDevice("0000:a1:00.0"), Netdev: "s0", Addr: "0000:a1:00.0", Devlink: pciDevlink("0000:a1:00.0"), PfNumber: 0}}, // switch id derived by the sim
		} {
			got, err := eswitch.ResolvePF(k, f, c.ref)
			if err != nil {
				t.Errorf("%s: ResolvePF(%s): %v", when, c.ref, err)
				continue
			}
			if c.want.Netdev == "s0" {
				// The switch id is derived by the sim: check its form only.
				if len(got.SwitchID) != 16 || got.SwitchID == switch0 || got.SwitchID == switch1 {
					t.Errorf("%s: ResolvePF(s0) switch id %q", when, got.SwitchID)
				}
				c.want.SwitchID = got.SwitchID
			}
			if got != c.want {
				t.Errorf("%s: ResolvePF(%s) =\n %+v\nwant\n %+v", when, c.ref, got, c.want)
			}
		}
	}
	check("legacy", h)

	// In switchdev the PF's PCI function also lists its representors (named
	// eth<N>, sorting before "p0"): by address, the uplink must be chosen.
	toSwitchdev(t, h, 3, nic0PF0, nic0PF1, nic1PF0, nic1PF1)
	nds, err := sriov.Host{FS: f}.Netdevs(nic0PF0)
	if err != nil {
		t.Fatal(err)
	}
	if len(nds) != 4 || nds[0] == "p0" {
		t.Fatalf("PF0's function lists %v: want 3 representors sorting before p0, or the test proves nothing", nds)
	}
	check("switchdev", h)
	check("switchdev, no devlink", noDevlink{h})
}

func TestResolvePFErrors(t *testing.T) {
	h := openSim(t)
	f := h.FS()
	for _, c := range []struct {
		ref, want string
	}{
		{"p9", "p9: no such network interface"},
		{"0000:99:00.0", "0000:99:00.0: no such PCI device"},
		{"99:00.0", "0000:99:00.0: no such PCI device"},
		{"a/b", "invalid interface name"},
		{"", "invalid interface name"},
		{"..", "invalid interface name"},
	} {
		pf, err := eswitch.ResolvePF(h, f, c.ref)
		if err == nil {
			t.Errorf("ResolvePF(%q) = %+v, want an error", c.ref, pf)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ResolvePF(%q): %q, want it to say %q", c.ref, err, c.want)
		}
	}
	if _, err := eswitch.ResolvePF(portsFail{h}, f, "p0"); err == nil || !strings.Contains(err.Error(), "EIO") {
		t.Errorf("ResolvePF with a failing devlink dump: %v, want that error", err)
	}
	// A bond has no PCI device and no devlink port.
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100}); err != nil {
		t.Fatal(err)
	}
	if pf, err := eswitch.ResolvePF(h, f, "bond0"); err == nil || !strings.Contains(err.Error(), "PF bond0") {
		t.Errorf("ResolvePF(bond0) = %+v, %v; want an error naming it", pf, err)
	}
}

// checkReps asserts that reps maps VF 0..n-1 of pf to representors that
// sysfs describes as pf<p>vf<N> on the PF's switch, under the PF's function.
func checkReps(t *testing.T, f sysfs.FS, pf eswitch.PF, n int, reps map[int]string) {
	t.Helper()
	if len(reps) != n {
		t.Errorf("%s: %d representors %v, want %d", pf.Netdev, len(reps), reps, n)
	}
	under, err := sriov.Host{FS: f}.Netdevs(pf.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for vf := 0; vf < n; vf++ {
		rep, ok := reps[vf]
		if !ok {
			t.Errorf("%s: no representor for VF %d", pf.Netdev, vf)
			continue
		}
		ppn, err := eswitch.PhysPortName(f, rep)
		if want := fmt.Sprintf("pf%dvf%d", pf.PfNumber, vf); err != nil || ppn != want {
			t.Errorf("%s VF %d -> %s, whose phys_port_name is %q (%v), want %q", pf.Netdev, vf, rep, ppn, err, want)
		}
		if id, err := eswitch.PhysSwitchID(f, rep); err != nil || id != pf.SwitchID {
			t.Errorf("%s VF %d -> %s, whose switch id is %q (%v), want %q", pf.Netdev, vf, rep, id, err, pf.SwitchID)
		}
		if !contains(under, rep) {
			t.Errorf("%s VF %d -> %s, which is not a netdev of %s (%v)", pf.Netdev, vf, rep, pf.Addr, under)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestRepresentors(t *testing.T) {
	h := openSim(t)
	f := h.FS()
	const n = 3
	toSwitchdev(t, h, n, nic0PF0, nic0PF1, nic1PF0, nic1PF1)

	byDevlink := map[string]map[int]string{}
	seen := map[string]string{}
	for _, name := range []string{"p0", "p1", "q0", "q1"} {
		pf := resolve(t, h, f, name)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		reps, err := eswitch.WaitRepresentors(ctx, h, f, pf, n, time.Millisecond)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		checkReps(t, f, pf, n, reps)
		for vf, rep := range reps {
			if other, dup := seen[rep]; dup {
				t.Errorf("%s is the representor of both %s and %s VF %d", rep, other, name, vf)
			}
			seen[rep] = fmt.Sprintf("%s VF %d", name, vf)
		}
		byDevlink[name] = reps

		// Devlink alone (no switch id: the sysfs pass is skipped).
		noID := pf
		noID.SwitchID = ""
		if got, err := eswitch.Representors(h, f, noID); err != nil || !reflect.DeepEqual(got, reps) {
			t.Errorf("%s by devlink only = %v, %v; want %v", name, got, err, reps)
		}
		// Sysfs alone: phys_port_name + phys_switch_id.
		if got, err := eswitch.Representors(noDevlink{h}, f, pf); err != nil || !reflect.DeepEqual(got, reps) {
			t.Errorf("%s by phys_port_name = %v, %v; want %v", name, got, err, reps)
		}
		// Without devlink and without a switch id there is no safe way: no guess by name.
		if got, err := eswitch.Representors(noDevlink{h}, f, noID); err != nil || len(got) != 0 {
			t.Errorf("%s with neither devlink nor switch id = %v, %v; want nothing", name, got, err)
		}
	}
	if len(seen) != 4*n {
		t.Errorf("%d distinct representors, want %d", len(seen), 4*n)
	}

	// pf0vf1 on nic0 and on nic1 exist both; only the switch id tells them apart.
	p0, q0 := resolve(t, h, f, "p0"), resolve(t, h, f, "q0")
	if p0.PfNumber != q0.PfNumber || p0.SwitchID == q0.SwitchID {
		t.Fatalf("p0 %+v and q0 %+v: the collision case is not set up", p0, q0)
	}
	if a, b := byDevlink["p0"][1], byDevlink["q0"][1]; a == b {
		t.Errorf("p0 and q0 VF 1 share the representor %s", a)
	}
	// pf0vf1 and pf1vf1 share the switch id; only the pf number tells them apart.
	if a, b := byDevlink["p0"][1], byDevlink["p1"][1]; a == b {
		t.Errorf("p0 and p1 VF 1 share the representor %s", a)
	}

	if _, err := eswitch.Representors(portsFail{h}, f, p0); err == nil {
		t.Errorf("Representors with a failing devlink dump succeeded")
	}
}

func TestRepresentorsLegacy(t *testing.T) {
	h := openSim(t)
	f := h.FS()
	pci := sriov.Host{FS: f}
	if err := pci.SetNumVFs(sriov.Addr(nic0PF0), 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pci.WaitVFs(ctx, sriov.Addr(nic0PF0), 2); err != nil {
		t.Fatal(err)
	}
	// Legacy mode: VFs (with host netdevs) but no representors.
	pf := resolve(t, h, f, "p0")
	for _, k := range []eswitch.Kernel{h, noDevlink{h}} {
		if reps, err := eswitch.Representors(k, f, pf); err != nil || len(reps) != 0 {
			t.Errorf("legacy representors = %v, %v; want none", reps, err)
		}
	}
}

func TestWaitRepresentors(t *testing.T) {
	h := openSim(t)
	f := h.FS()
	toSwitchdev(t, h, 0, nic0PF0)
	pf := resolve(t, h, f, "p0")

	// Already in switchdev: representors appear with the VFs, asynchronously.
	if err := (sriov.Host{FS: f}).SetNumVFs(sriov.Addr(nic0PF0), 4); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reps, err := eswitch.WaitRepresentors(ctx, noDevlink{h}, f, pf, 4, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	checkReps(t, f, pf, 4, reps)

	// Waiting for more than there are ends with the context, saying how many are missing.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	got, err := eswitch.WaitRepresentors(ctx, h, f, pf, 6, time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRepresentors(6): %v, want context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "p0") || !strings.Contains(err.Error(), "2 of 6 missing") {
		t.Errorf("error %q does not say which PF and how many are missing", err)
	}
	if !reflect.DeepEqual(got, reps) {
		t.Errorf("WaitRepresentors returned %v on timeout, want the ones found %v", got, reps)
	}
}

func TestPhysPortNameAndSwitchID(t *testing.T) {
	h := openSim(t)
	f := h.FS()
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup"}); err != nil {
		t.Fatal(err)
	}
	toSwitchdev(t, h, 1, nic0PF1)
	reps, err := eswitch.Representors(h, f, resolve(t, h, f, "p1"))
	if err != nil || reps[0] == "" {
		t.Fatalf("representors of p1: %v, %v", reps, err)
	}
	for _, c := range []struct {
		name, ppn, id string
	}{
		{"p0", "p0", switch0}, // uplink, legacy
		{"p1", "p1", switch0}, // uplink, switchdev
		{reps[0], "pf1vf0", switch0},
		{"q0", "p0", switch1},
		{"bond0", "", ""}, // EOPNOTSUPP: none
		{"lo", "", ""},
	} {
		ppn, err := eswitch.PhysPortName(f, c.name)
		if err != nil || ppn != c.ppn {
			t.Errorf("PhysPortName(%s) = %q, %v; want %q", c.name, ppn, err, c.ppn)
		}
		id, err := eswitch.PhysSwitchID(f, c.name)
		if err != nil || id != c.id {
			t.Errorf("PhysSwitchID(%s) = %q, %v; want %q", c.name, id, err, c.id)
		}
	}
	if _, err := eswitch.PhysPortName(f, "nosuch0"); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("PhysPortName of a missing netdev: %v, want fs.ErrNotExist", err)
	}
	if _, err := eswitch.PhysSwitchID(f, "nosuch0"); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("PhysSwitchID of a missing netdev: %v, want fs.ErrNotExist", err)
	}
}

func TestReadBond(t *testing.T) {
	cases := []struct {
		spec eswitch.BondSpec
		down eswitch.BondInfo // before anything is up
		up   eswitch.BondInfo // bond and both ports up
	}{
		{
			spec: eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4"},
			down: eswitch.BondInfo{Name: "bond0", Mode: "802.3ad", Slaves: []string{"p0", "p1"}, MIIStatus: "down", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4", AdSelect: "stable"},
			up:   eswitch.BondInfo{Name: "bond0", Mode: "802.3ad", Slaves: []string{"p0", "p1"}, MIIStatus: "up", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4", AdSelect: "stable"},
		},
		{
			spec: eswitch.BondSpec{Name: "bond1", Mode: "active-backup", Miimon: 50},
			down: eswitch.BondInfo{Name: "bond1", Mode: "active-backup", Slaves: []string{"p0", "p1"}, MIIStatus: "down", Miimon: 50},
			up:   eswitch.BondInfo{Name: "bond1", Mode: "active-backup", Slaves: []string{"p0", "p1"}, ActiveSlave: "p0", MIIStatus: "up", Miimon: 50},
		},
		{
			spec: eswitch.BondSpec{Name: "bond2", Mode: "balance-xor", Miimon: 200, XmitHashPolicy: "layer2+3"},
			down: eswitch.BondInfo{Name: "bond2", Mode: "balance-xor", Slaves: []string{"p0", "p1"}, MIIStatus: "down", Miimon: 200, XmitHashPolicy: "layer2+3"},
			up:   eswitch.BondInfo{Name: "bond2", Mode: "balance-xor", Slaves: []string{"p0", "p1"}, MIIStatus: "up", Miimon: 200, XmitHashPolicy: "layer2+3"},
		},
	}
	for _, c := range cases {
		t.Run(c.spec.Mode, func(t *testing.T) {
			h := openSim(t)
			f := h.FS()
			if err := h.AddBond(c.spec); err != nil {
				t.Fatal(err)
			}
			raw, _ := sysfs.ReadString(f, "/sys/class/net/"+c.spec.Name+"/bonding/mode")
			if !strings.Contains(raw, " ") {
				t.Fatalf("bonding/mode reads %q: the mode word parsing is not exercised", raw)
			}
			empty, err := eswitch.ReadBond(f, c.spec.Name)
			if err != nil {
				t.Fatal(err)
			}
			if empty.Mode != c.spec.Mode || len(empty.Slaves) != 0 {
				t.Errorf("bond without slaves: %+v", empty)
			}
			for _, s := range []string{"p0", "p1"} {
				if err := h.SetMaster(s, c.spec.Name); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := eswitch.ReadBond(f, c.spec.Name); err != nil || !reflect.DeepEqual(got, c.down) {
				t.Errorf("ReadBond, down =\n %+v, %v\nwant\n %+v", got, err, c.down)
			}
			for _, s := range []string{"p0", "p1", c.spec.Name} {
				if err := h.SetLinkUp(s, true); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := eswitch.ReadBond(f, c.spec.Name); err != nil || !reflect.DeepEqual(got, c.up) {
				t.Errorf("ReadBond, up =\n %+v, %v\nwant\n %+v", got, err, c.up)
			}
		})
	}

	h := openSim(t)
	for _, name := range []string{"p0", "nosuch0"} {
		if b, err := eswitch.ReadBond(h.FS(), name); err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), name) {
			t.Errorf("ReadBond(%s) = %+v, %v; want an fs.ErrNotExist error naming it", name, b, err)
		}
	}
}

// lagHost puts nic0 in switchdev (2 VFs per PF) and bonds p0 and p1 in mode.
// It returns the time just before the bond became complete.
func lagHost(t *testing.T, mode string) (*sim.Host, time.Time) {
	t.Helper()
	h := openSim(t)
	toSwitchdev(t, h, 2, nic0PF0, nic0PF1)
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: mode, Miimon: 100}); err != nil {
		t.Fatal(err)
	}
	if err := h.SetMaster("p0", "bond0"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := h.SetMaster("p1", "bond0"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"p0", "p1", "bond0"} {
		if err := h.SetLinkUp(s, true); err != nil {
			t.Fatal(err)
		}
	}
	return h, start
}

func TestReadAndWaitLAG(t *testing.T) {
	for _, c := range []struct {
		mode, portSel string
	}{
		{"802.3ad", "hash"},
		{"balance-xor", "hash"},
		{"active-backup", "queue_affinity"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			h, start := lagHost(t, c.mode)
			f := h.FS()
			st, err := eswitch.ReadLAG(f, nic0PF0)
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(start) < lagDelay && st.State != eswitch.LAGInactive {
				t.Errorf("ReadLAG before activation = %+v, want inactive", st)
			}
			if st.State == eswitch.LAGInactive && (st.Type != "" || st.SharedFDB || st.Members != nil) {
				t.Errorf("inactive LAG carries details: %+v", st)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err = eswitch.WaitLAG(ctx, f, nic0PF0, 2*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el < lagDelay {
				t.Errorf("WaitLAG returned after %v, before the LAG can be active (%v)", el, lagDelay)
			}
			want := eswitch.LAGStatus{State: eswitch.LAGActive, Type: "switchdev", PortSelMode: c.portSel,
				SharedFDB: true, Members: []string{nic0PF0, nic0PF1}}
			if !reflect.DeepEqual(st, want) {
				t.Errorf("WaitLAG =\n %+v\nwant\n %+v", st, want)
			}
			if again, err := eswitch.ReadLAG(f, nic0PF0); err != nil || !reflect.DeepEqual(again, want) {
				t.Errorf("ReadLAG after activation = %+v, %v", again, err)
			}

			// Releasing a port deactivates it; WaitLAG then times out.
			if err := h.SetLinkUp("p1", false); err != nil {
				t.Fatal(err)
			}
			if err := h.SetMaster("p1", ""); err != nil {
				t.Fatal(err)
			}
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			st, err = eswitch.WaitLAG(ctx, f, nic0PF0, 2*time.Millisecond)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitLAG on a broken bond: %v, want context.DeadlineExceeded", err)
			}
			if !strings.Contains(err.Error(), "still inactive") || !strings.Contains(err.Error(), nic0PF0) {
				t.Errorf("error %q does not say what is inactive", err)
			}
			if st.State != eswitch.LAGInactive {
				t.Errorf("WaitLAG returned %+v on timeout, want the last (inactive) state", st)
			}
		})
	}
}

func TestLAGNotEligible(t *testing.T) {
	h := openSim(t)
	f := h.FS()
	// Legacy PFs in an 802.3ad bond: no switchdev LAG.
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"p0", "p1"} {
		if err := h.SetMaster(s, "bond0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), lagDelay+50*time.Millisecond)
	defer cancel()
	st, err := eswitch.WaitLAG(ctx, f, nic0PF0, 5*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || st.State != eswitch.LAGInactive {
		t.Errorf("WaitLAG with legacy PFs = %+v, %v; want inactive and a timeout", st, err)
	}

	// A single-port NIC has no lag directory: unverified, never active.
	for _, pf := range []sriov.Addr{"0000:a1:00.0", ""} {
		st, err := eswitch.ReadLAG(f, pf)
		if err != nil || st.State != eswitch.LAGUnverified {
			t.Errorf("ReadLAG(%q) = %+v, %v; want unverified", pf, st, err)
		}
		st, err = eswitch.WaitLAG(quick(t), f, pf, time.Millisecond)
		if err != nil || st.State != eswitch.LAGUnverified {
			t.Errorf("WaitLAG(%q) = %+v, %v; want unverified at once", pf, st, err)
		}
	}
}

// SetLinksUp gives the same result through a kernel's batch (the simulated
// host) and through one SetLinkUp per name (a kernel without it): names up
// to the first failure are set, and the count says where it failed.
func TestSetLinksUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch bool
	}{{"batch", true}, {"one by one", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := openSim(t)
			var k eswitch.Kernel = h
			if !tc.batch {
				k = noDevlink{h} // embeds Kernel only: no SetLinksUp
			}
			if _, ok := k.(eswitch.LinksUpSetter); ok != tc.batch {
				t.Fatalf("LinksUpSetter: %v", ok)
			}
			if n, err := eswitch.SetLinksUp(k, []string{"p0", "q0"}, true); n != 2 || err != nil {
				t.Fatalf("SetLinksUp = %d, %v", n, err)
			}
			n, err := eswitch.SetLinksUp(k, []string{"q0", "p1", "gone", "q1"}, true)
			if n != 2 || !errors.Is(err, eswitch.ErrLinkNotFound) {
				t.Fatalf("SetLinksUp with a missing link = %d, %v", n, err)
			}
			for name, up := range map[string]bool{"p0": true, "q0": true, "p1": true, "q1": false} {
				l, err := h.Link(name)
				if err != nil {
					t.Fatal(err)
				}
				if l.AdminUp != up {
					t.Errorf("%s up = %v, want %v", name, l.AdminUp, up)
				}
			}
		})
	}
}
