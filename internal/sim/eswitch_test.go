package sim

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vflag/vflag/eswitch"
)

const (
	pf0 = "0000:61:00.0"
	pf1 = "0000:61:00.1"
)

func dl(pci string) eswitch.Devlink { return eswitch.Devlink{Bus: "pci", Device: pci} }

// vfs creates n VFs on the PF (autoprobe off) and waits for them.
func (x *th) vfs(pci string, n string) {
	x.t.Helper()
	x.write("/sys/bus/pci/devices/"+pci+"/sriov_drivers_autoprobe", "0")
	x.write("/sys/bus/pci/devices/"+pci+"/sriov_numvfs", n)
	x.settle()
}

func (x *th) reps(pci string) []string {
	x.t.Helper()
	var out []string
	for _, n := range x.ls("/sys/bus/pci/devices/" + pci + "/net") {
		if b, err := x.fs.ReadFile("/sys/class/net/" + n + "/phys_port_name"); err == nil && strings.Contains(string(b), "vf") {
			out = append(out, n)
		}
	}
	return out
}

func TestSwitchdevRefusedWithBoundVF(t *testing.T) {
	tests := []struct {
		name    string
		driver  string // the bound VF's driver; "" none
		wantErr bool
	}{
		{"no VF bound", "", false},
		{"VF bound to mlx5_core", "mlx5_core", true},
		{"VF bound to vfio-pci", "vfio-pci", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			x.vfs(pf0, "2")
			if tc.driver != "" {
				x.write("/sys/bus/pci/devices/0000:61:00.3/driver_override", tc.driver)
				x.write("/sys/bus/pci/drivers/"+tc.driver+"/bind", "0000:61:00.3")
			}
			err := x.mode(pf0, eswitch.ModeSwitchdev)
			mode, _ := x.h.EswitchMode(dl(pf0))
			if !tc.wantErr {
				x.ok(err)
				if mode != eswitch.ModeSwitchdev {
					t.Fatalf("mode %s", mode)
				}
				return
			}
			checkErrno(t, err, syscall.EINVAL, "bad resource state(0x9)")
			if mode != eswitch.ModeLegacy {
				t.Fatalf("mode after failure %s", mode)
			}
			if d := x.h.Dump(); !strings.Contains(d, "bad resource state(0x9)") || !strings.Contains(d, "Failed setting eswitch to offloads") {
				t.Fatalf("dmesg lacks the firmware error:\n%s", d)
			}
			if len(x.reps(pf0)) != 0 {
				t.Fatal("representors after a failed mode change")
			}
		})
	}
}

func TestRepresentors(t *testing.T) {
	x := newTH(t, testSpec())
	x.vfs(pf0, "3")
	x.vfs(pf1, "2")
	if got := x.reps(pf0); len(got) != 0 {
		t.Fatalf("representors in legacy: %v", got)
	}
	before := x.clk.Now()
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	if got := x.clk.Now().Sub(before); got != latMode {
		t.Fatalf("mode change took %v, want %v", got, latMode)
	}
	x.ok(x.mode(pf1, eswitch.ModeSwitchdev))
	swid := x.read("/sys/class/net/p0/phys_switch_id")
	want := map[string]string{} // rep → phys_port_name
	for _, pci := range []string{pf0, pf1} {
		for _, r := range x.reps(pci) {
			if !strings.HasPrefix(r, "eth") {
				t.Errorf("representor %q is not named eth<N>", r)
			}
			want[r] = strings.TrimSpace(x.read("/sys/class/net/" + r + "/phys_port_name"))
			if got := x.read("/sys/class/net/" + r + "/phys_switch_id"); got != swid {
				t.Errorf("%s switch id %q, PF %q", r, got, swid)
			}
			if got := x.readlink("/sys/class/net/" + r + "/device"); got != "../../../"+pci {
				t.Errorf("%s device -> %q", r, got)
			}
			x.readErr("/sys/class/net/"+r+"/phys_port_id", syscall.EOPNOTSUPP)
		}
	}
	names := map[string]bool{}
	for _, ppn := range want {
		names[ppn] = true
	}
	for _, ppn := range []string{"pf0vf0", "pf0vf1", "pf0vf2", "pf1vf0", "pf1vf1"} {
		if !names[ppn] {
			t.Errorf("no representor %s; have %v", ppn, want)
		}
	}
	if got := x.read("/sys/class/net/p0/phys_port_name"); got != "p0\n" {
		t.Errorf("uplink phys_port_name %q", got)
	}
	if got := x.read("/sys/class/net/p1/phys_port_name"); got != "p1\n" {
		t.Errorf("uplink phys_port_name %q", got)
	}

	ports, err := x.h.Ports()
	x.ok(err)
	type pk struct {
		dev     string
		index   uint32
		flavour string
		pfnum   uint16
		vfnum   uint16
		number  uint32
	}
	var got []pk
	for _, p := range ports {
		got = append(got, pk{p.Devlink.Device, p.Index, p.Flavour, p.PfNumber, p.VfNumber, p.Number})
		if p.Flavour == eswitch.FlavourPCIVF {
			if ppn := want[p.Netdev]; ppn == "" || !strings.HasSuffix(ppn, "vf"+string(rune('0'+p.VfNumber))) {
				t.Errorf("port %d netdev %q has phys_port_name %q", p.Index, p.Netdev, ppn)
			}
		}
	}
	wantPorts := []pk{
		{pf0, 1, "pcivf", 0, 0, 0}, {pf0, 2, "pcivf", 0, 1, 0}, {pf0, 3, "pcivf", 0, 2, 0}, {pf0, 65535, "physical", 0, 0, 0},
		{pf1, 65537, "pcivf", 1, 0, 0}, {pf1, 65538, "pcivf", 1, 1, 0}, {pf1, 131071, "physical", 0, 0, 1},
	}
	if diff := cmp.Diff(wantPorts, got, cmp.AllowUnexported(pk{})); diff != "" {
		t.Fatalf("ports (-want +got):\n%s", diff)
	}

	// numvfs changes in switchdev add and remove representors.
	x.write("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", "0")
	if got := x.reps(pf0); len(got) != 0 {
		t.Fatalf("representors after numvfs=0: %v", got)
	}
	x.write("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", "4")
	if got := x.reps(pf0); len(got) != 0 {
		t.Fatalf("representors before the VFs exist: %v", got)
	}
	x.settle()
	if got := x.reps(pf0); len(got) != 4 {
		t.Fatalf("representors after numvfs=4: %v", got)
	}

	// Back to legacy: representors and pcivf ports go.
	x.ok(x.mode(pf0, eswitch.ModeLegacy))
	if got := x.reps(pf0); len(got) != 0 {
		t.Fatalf("representors in legacy: %v", got)
	}
	ports, _ = x.h.Ports()
	for _, p := range ports {
		if p.Devlink.Device == pf0 && p.Flavour != eswitch.FlavourPhysical {
			t.Fatalf("port %+v in legacy", p)
		}
	}
}

func TestRepNamesFollowTheKernel(t *testing.T) {
	// eth%d takes the lowest free number, whatever the PF is called.
	s := testSpec()
	s.NICs[0].PFs[0].Netdev = "eth1"
	x := newTH(t, s)
	x.vfs(pf0, "3")
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	if got := x.reps(pf0); !cmp.Equal(got, []string{"eth0", "eth2", "eth3"}) {
		t.Fatalf("representors %v", got)
	}
	x.ok(x.mode(pf0, eswitch.ModeLegacy))
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	if got := x.reps(pf0); !cmp.Equal(got, []string{"eth0", "eth2", "eth3"}) {
		t.Fatalf("representors after a second switchdev %v", got)
	}
}

// TestGiveNames: names given to a NIC go to its next netdevs, in order,
// and no other NIC's netdev takes them meanwhile (a boot whose probe order
// gave one card the names the other card's representors had).
func TestGiveNames(t *testing.T) {
	s := testSpec()
	const pf2 = "0000:62:00.0"
	s.NICs = append(s.NICs, NICSpec{Name: "nic1", PFs: []PFSpec{{PCI: pf2, Netdev: "q0"}, {PCI: "0000:62:00.1", Netdev: "q1"}}})
	x := newTH(t, s)
	x.ok(x.h.GiveNames("nic1", "eth0", "eth1", "eth2"))
	x.vfs(pf0, "3")
	x.vfs(pf2, "3")
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	if got := x.reps(pf0); !cmp.Equal(got, []string{"eth3", "eth4", "eth5"}) {
		t.Fatalf("nic0's representors %v, want the names not given to nic1", got)
	}
	x.ok(x.mode(pf2, eswitch.ModeSwitchdev))
	if got := x.reps(pf2); !cmp.Equal(got, []string{"eth0", "eth1", "eth2"}) {
		t.Fatalf("nic1's representors %v, want the names given to it", got)
	}
	// Used up: the next representors take the lowest free names again.
	x.ok(x.mode(pf2, eswitch.ModeLegacy))
	x.ok(x.mode(pf0, eswitch.ModeLegacy))
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	if got := x.reps(pf0); !cmp.Equal(got, []string{"eth0", "eth1", "eth2"}) {
		t.Fatalf("nic0's representors after the given names were used %v", got)
	}
	checkErrno(t, x.h.GiveNames("nic9", "eth9"), syscall.ENODEV, "")
	checkErrno(t, x.h.GiveNames("nic1", "rep9"), syscall.EINVAL, "")
	checkErrno(t, x.h.GiveNames("nic1", "eth01"), syscall.EINVAL, "")
	checkErrno(t, x.h.GiveNames("nic1", "eth0"), syscall.EEXIST, "")
}

func TestModeChangeRules(t *testing.T) {
	x := newTH(t, testSpec())
	checkErrno(t, x.mode(pf0, "offloads"), syscall.EINVAL, "")
	checkErrno(t, x.mode("0000:99:00.0", eswitch.ModeSwitchdev), syscall.ENODEV, "")
	checkErrno(t, x.h.SetEswitchMode(eswitch.Devlink{Bus: "auxiliary", Device: pf0}, "legacy"), syscall.ENODEV, "")
	// Same mode: no latency.
	before := x.clk.Now()
	x.ok(x.mode(pf0, eswitch.ModeLegacy))
	if x.clk.Now() != before {
		t.Fatal("a no-op mode change slept")
	}
	// A second change while the first blocks: E-Switch is busy.
	var inner error
	x.h.sleep = func(d time.Duration) {
		inner = x.mode(pf0, eswitch.ModeLegacy)
		if m, _ := x.h.EswitchMode(dl(pf0)); m != eswitch.ModeLegacy {
			t.Errorf("mode during the change %s, want the old one", m)
		}
		x.clk.Advance(d)
	}
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	checkErrno(t, inner, syscall.EBUSY, "Can't change mode, E-Switch is busy")
	if m, _ := x.h.EswitchMode(dl(pf0)); m != eswitch.ModeSwitchdev {
		t.Fatalf("mode %s", m)
	}
}

// A change to legacy removes the representors at its start (mlx5 unloads
// them before the eswitch leaves offloads mode), and blocks ModeChange in
// all, the removal's own time included; a change to switchdev makes them
// when it returns.
func TestModeChangeToLegacyUnloadsRepsFirst(t *testing.T) {
	x := newTH(t, testSpec())
	x.vfs(pf0, "2")
	var during []string
	var slept time.Duration
	x.h.sleep = func(d time.Duration) {
		during = x.reps(pf0)
		slept += d
		x.clk.Advance(d)
	}
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	if len(during) != 0 || len(x.reps(pf0)) != 2 {
		t.Fatalf("to switchdev: representors %q during the change, %q after; want none, then 2", during, x.reps(pf0))
	}
	slept = 0
	// The simulator's own work takes clock time: the sleep is what is left.
	x.h.now = func() time.Time { t := x.clk.Now(); x.clk.Advance(time.Millisecond); return t }
	x.ok(x.mode(pf0, eswitch.ModeLegacy))
	if len(during) != 0 {
		t.Errorf("to legacy: representors %q during the change, want none (removed first)", during)
	}
	if m, _ := x.h.EswitchMode(dl(pf0)); m != eswitch.ModeLegacy || len(x.reps(pf0)) != 0 {
		t.Errorf("after: mode %s, representors %q", m, x.reps(pf0))
	}
	if slept <= 0 || slept >= latMode {
		t.Errorf("to legacy slept %v, want less than ModeChange %v (the time since the call started counts)", slept, latMode)
	}
}

func TestParams(t *testing.T) {
	x := newTH(t, testSpec())
	v, err := x.h.Param(dl(pf0), "flow_steering_mode")
	x.ok(err)
	if v != "dmfs" {
		t.Fatalf("default %q", v)
	}
	x.ok(x.h.SetParam(dl(pf0), "flow_steering_mode", "smfs"))
	if v, _ := x.h.Param(dl(pf0), "flow_steering_mode"); v != "smfs" {
		t.Fatalf("after set %q", v)
	}
	if v, _ := x.h.Param(dl(pf1), "flow_steering_mode"); v != "dmfs" {
		t.Fatalf("PF1 %q", v)
	}
	checkErrno(t, x.h.SetParam(dl(pf0), "flow_steering_mode", "hmfs"), syscall.EINVAL, `supported values are ["dmfs", "smfs"]`)
	_, err = x.h.Param(dl(pf0), "enable_roce")
	if !errors.Is(err, eswitch.ErrNotSupported) {
		t.Fatalf("unknown param: %v", err)
	}
	if err := x.h.SetParam(dl(pf0), "nope", "1"); !errors.Is(err, eswitch.ErrNotSupported) {
		t.Fatalf("unknown param set: %v", err)
	}
	x.ok(x.mode(pf1, eswitch.ModeSwitchdev))
	checkErrno(t, x.h.SetParam(dl(pf1), "flow_steering_mode", "smfs"), syscall.EOPNOTSUPP, "")
	x.ok(x.h.SetParam(dl(pf1), "flow_steering_mode", "dmfs"))
}

func TestVFSettings(t *testing.T) {
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	tests := []struct {
		name      string
		switchdev bool
		op        func(h *Host) error
		errno     syscall.Errno
		sentinel  error
	}{
		{"mac legacy", false, func(h *Host) error { return h.SetVFMAC("p0", 1, mac("52:54:00:00:00:01")) }, 0, nil},
		{"mac switchdev", true, func(h *Host) error { return h.SetVFMAC("p0", 1, mac("52:54:00:00:00:01")) }, 0, nil},
		{"mac multicast", false, func(h *Host) error { return h.SetVFMAC("p0", 1, mac("01:00:5e:00:00:01")) }, syscall.EINVAL, nil},
		{"mac vf out of range", false, func(h *Host) error { return h.SetVFMAC("p0", 2, mac("52:54:00:00:00:01")) }, syscall.EINVAL, nil},
		{"mac negative vf", false, func(h *Host) error { return h.SetVFMAC("p0", -1, mac("52:54:00:00:00:01")) }, syscall.EINVAL, nil},
		{"mac unknown pf", false, func(h *Host) error { return h.SetVFMAC("p9", 0, mac("52:54:00:00:00:01")) }, syscall.ENODEV, eswitch.ErrLinkNotFound},
		{"mac via lo", false, func(h *Host) error { return h.SetVFMAC("lo", 0, mac("52:54:00:00:00:01")) }, syscall.EOPNOTSUPP, nil},
		{"vlan legacy", false, func(h *Host) error { return h.SetVFVlan("p0", 0, 42) }, 0, nil},
		{"vlan switchdev refused", true, func(h *Host) error { return h.SetVFVlan("p0", 0, 42) }, syscall.EOPNOTSUPP, nil},
		{"vlan 0 switchdev is a no-op", true, func(h *Host) error { return h.SetVFVlan("p0", 0, 0) }, 0, nil},
		{"vlan out of range", false, func(h *Host) error { return h.SetVFVlan("p0", 0, 4096) }, syscall.EINVAL, nil},
		{"vlan vf out of range", true, func(h *Host) error { return h.SetVFVlan("p0", 5, 0) }, syscall.EINVAL, nil},
		{"vlan qos legacy", false, func(h *Host) error { return h.SetVFVlanQos("p0", 0, 100, 3) }, 0, nil},
		{"qos out of range", false, func(h *Host) error { return h.SetVFVlanQos("p0", 0, 100, 8) }, syscall.EINVAL, nil},
		{"vlan qos switchdev refused", true, func(h *Host) error { return h.SetVFVlanQos("p0", 0, 100, 3) }, syscall.EOPNOTSUPP, nil},
		{"trust legacy", false, func(h *Host) error { return h.SetVFTrust("p0", 1, true) }, 0, nil},
		{"trust switchdev refused", true, func(h *Host) error { return h.SetVFTrust("p0", 1, true) }, syscall.EOPNOTSUPP, nil},
		{"trust vf out of range", false, func(h *Host) error { return h.SetVFTrust("p0", 2, true) }, syscall.EINVAL, nil},
		{"spoofchk legacy", false, func(h *Host) error { return h.SetVFSpoofchk("p0", 1, true) }, 0, nil},
		{"spoofchk switchdev refused", true, func(h *Host) error { return h.SetVFSpoofchk("p0", 1, false) }, syscall.EOPNOTSUPP, nil},
		{"link state legacy", false, func(h *Host) error { return h.SetVFLinkState("p0", 1, "disable") }, 0, nil},
		{"link state bad", false, func(h *Host) error { return h.SetVFLinkState("p0", 1, "down") }, syscall.EINVAL, nil},
		{"link state switchdev refused", true, func(h *Host) error { return h.SetVFLinkState("p0", 1, "auto") }, syscall.EOPNOTSUPP, nil},
		{"rate legacy", false, func(h *Host) error { return h.SetVFRate("p0", 1, 10, 100) }, 0, nil},
		{"rate switchdev works", true, func(h *Host) error { return h.SetVFRate("p0", 1, 0, 100) }, 0, nil},
		{"rate via lo", false, func(h *Host) error { return h.SetVFRate("lo", 1, 0, 100) }, syscall.EOPNOTSUPP, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			x.vfs(pf0, "2")
			if tc.switchdev {
				x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
			}
			err := tc.op(x.h)
			if tc.errno == 0 {
				x.ok(err)
			} else {
				checkErrno(t, err, tc.errno, "")
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Fatalf("error %v is not %v", err, tc.sentinel)
			}
		})
	}
	t.Run("shown by the PF", func(t *testing.T) {
		x := newTH(t, testSpec())
		x.vfs(pf0, "2")
		x.ok(x.h.SetVFMAC("p0", 1, mac("52:54:00:00:00:01")))
		x.ok(x.h.SetVFVlan("p0", 1, 42))
		x.ok(x.h.SetVFTrust("p0", 1, true))
		x.ok(x.h.SetVFSpoofchk("p0", 1, true))
		x.ok(x.h.SetVFLinkState("p0", 1, "enable"))
		x.ok(x.h.SetVFRate("p0", 1, 10, 200))
		l, err := x.h.Link("p0")
		x.ok(err)
		auto := eswitch.VFPolicy{LinkState: "auto"}
		want := []eswitch.VFInfo{{ID: 0, MAC: "00:00:00:00:00:00", VFPolicy: auto},
			{ID: 1, MAC: "52:54:00:00:00:01", VFPolicy: eswitch.VFPolicy{Vlan: 42, Trust: true, Spoofchk: true, LinkState: "enable", MinTxRate: 10, MaxTxRate: 200}}}
		if diff := cmp.Diff(want, l.VFs); diff != "" {
			t.Fatalf("VFs (-want +got):\n%s", diff)
		}
		// A VF bound afterwards takes the administrative MAC.
		x.write("/sys/bus/pci/drivers/mlx5_core/bind", "0000:61:00.3")
		nd := x.ls("/sys/bus/pci/devices/0000:61:00.3/net")[0]
		if got := x.read("/sys/class/net/" + nd + "/address"); got != "52:54:00:00:00:01\n" {
			t.Fatalf("VF netdev address %q", got)
		}
	})
	t.Run("driver without an ndo", func(t *testing.T) {
		spec := testSpec()
		spec.NICs[0].NoVFOps = []string{"link_state"}
		x := newTH(t, spec)
		x.vfs(pf0, "2")
		checkErrno(t, x.h.SetVFLinkState("p0", 0, "enable"), syscall.EOPNOTSUPP, "")
		x.ok(x.h.SetVFTrust("p0", 0, true))
	})
}

func TestHWTCOffload(t *testing.T) {
	x := newTH(t, testSpec())
	x.vfs(pf0, "1")
	get := func(name string) bool {
		t.Helper()
		on, err := x.h.Feature(name, "hw-tc-offload")
		x.ok(err)
		return on
	}
	if get("p0") {
		t.Fatal("PF hw-tc-offload on by default in legacy")
	}
	x.ok(x.h.SetFeature("p0", "hw-tc-offload", true))
	if !get("p0") {
		t.Fatal("PF hw-tc-offload not settable in legacy")
	}
	x.ok(x.h.SetFeature("p0", "hw-tc-offload", false))
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	if !get("p0") {
		t.Fatal("uplink representor hw-tc-offload off")
	}
	rep := x.reps(pf0)[0]
	if !get(rep) {
		t.Fatal("VF representor hw-tc-offload off by default")
	}
	x.ok(x.h.SetFeature(rep, "hw-tc-offload", false))
	if get(rep) {
		t.Fatal("representor hw-tc-offload not settable")
	}
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad"}))
	for _, c := range []struct{ name, feature string }{{"bond0", "hw-tc-offload"}, {"lo", "hw-tc-offload"}, {"p0", "rx-gro-hw"}} {
		if _, err := x.h.Feature(c.name, c.feature); !errors.Is(err, eswitch.ErrNotSupported) {
			t.Errorf("Feature(%s, %s): %v, want ErrNotSupported", c.name, c.feature, err)
		}
		if err := x.h.SetFeature(c.name, c.feature, true); !errors.Is(err, eswitch.ErrNotSupported) {
			t.Errorf("SetFeature(%s, %s): %v, want ErrNotSupported", c.name, c.feature, err)
		}
	}
	if _, err := x.h.Feature("nope", "hw-tc-offload"); !errors.Is(err, eswitch.ErrLinkNotFound) {
		t.Errorf("unknown link: %v", err)
	}
	x.ok(x.mode(pf0, eswitch.ModeLegacy))
	if get("p0") {
		t.Fatal("PF hw-tc-offload still on back in legacy")
	}
}

// TestFlowSteeringModeBySwitchdevAndKernel: fs_core.c
// mlx5_fs_mode_validate refuses smfs in switchdev; since 6.17 it refuses
// every value there, before looking at it.
func TestFlowSteeringModeBySwitchdevAndKernel(t *testing.T) {
	for _, tc := range []struct {
		kernel   string
		dmfsOK   bool
		smfsText string
	}{{"", true, "Moving to smfs is not supported when eswitch offloads enabled."}, {"6.17", false, "Changing fs mode is not supported when eswitch offloads enabled."}} {
		t.Run("kernel "+tc.kernel, func(t *testing.T) {
			s := testSpec()
			s.Kernel = tc.kernel
			x := newTH(t, s)
			x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
			checkErrno(t, x.h.SetParam(dl(pf0), "flow_steering_mode", "smfs"), syscall.EOPNOTSUPP, tc.smfsText)
			err := x.h.SetParam(dl(pf0), "flow_steering_mode", "dmfs")
			if tc.dmfsOK {
				x.ok(err)
			} else {
				checkErrno(t, err, syscall.EOPNOTSUPP, "Changing fs mode is not supported")
			}
			x.ok(x.mode(pf0, eswitch.ModeLegacy))
			x.ok(x.h.SetParam(dl(pf0), "flow_steering_mode", "smfs"))
		})
	}
}

// TestModeChangeBusyWhileRulesOffloaded: a flower rule in the hardware of
// the PF's eswitch (on a representor) keeps the eswitch busy: EBUSY "Can't
// change mode, E-Switch is busy" until it goes.
func TestModeChangeBusyWhileRulesOffloaded(t *testing.T) {
	x := newTH(t, testSpec())
	x.vfs(pf0, "2")
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	x.settle()
	rep := x.reps(pf0)[0]
	x.ok(x.h.SetIngressBlock(rep, 0))
	x.ok(x.h.AddFlower(rep, 1, true, false)) // skip_hw: not in hardware
	x.ok(x.mode(pf0, eswitch.ModeLegacy))
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	x.settle()
	rep = x.reps(pf0)[0]
	x.ok(x.h.SetIngressBlock(rep, 0))
	x.ok(x.h.AddFlower(rep, 1, false, false))
	checkErrno(t, x.mode(pf0, eswitch.ModeLegacy), syscall.EBUSY, "Can't change mode, E-Switch is busy")
	x.ok(x.h.DelIngress(rep))
	x.ok(x.mode(pf0, eswitch.ModeLegacy))
}
