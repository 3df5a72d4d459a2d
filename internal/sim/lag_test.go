package sim

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
)

const lagDir = "/sys/kernel/debug/mlx5/0000:61:00.0/lag/"

func (x *th) lagState() string {
	x.t.Helper()
	return strings.TrimSpace(x.read(lagDir + "state"))
}

type lagSetup struct {
	mode      string // bond mode
	numvfs    string
	legacyPF1 bool   // leave PF1 in legacy
	onlyP0    bool   // enslave p0 only
	extra     string // "rep" or "vf": enslave one more netdev
	boundVF   bool   // leave VF 0 of PF0 bound to mlx5_core
}

// setup follows vflag's pipeline order: VFs, switchdev, bond, enslave, up.
func (x *th) setupLAG(s lagSetup) {
	x.t.Helper()
	if s.numvfs == "" {
		s.numvfs = "2"
	}
	x.vfs(pf0, s.numvfs)
	x.vfs(pf1, s.numvfs)
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	if !s.legacyPF1 {
		x.ok(x.mode(pf1, eswitch.ModeSwitchdev))
	}
	if s.boundVF {
		x.write("/sys/bus/pci/drivers/mlx5_core/bind", "0000:61:00.2")
	}
	lacp := ""
	if s.mode == "802.3ad" {
		lacp = "fast"
	}
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: s.mode, Miimon: 100, LacpRate: lacp}))
	x.ok(x.h.SetMaster("p0", "bond0"))
	if !s.onlyP0 {
		x.ok(x.h.SetMaster("p1", "bond0"))
	}
	switch s.extra {
	case "rep":
		x.ok(x.h.SetMaster(x.reps(pf0)[0], "bond0"))
	case "vf":
		x.write("/sys/bus/pci/drivers/mlx5_core/bind", "0000:61:00.3")
		x.ok(x.h.SetMaster(x.ls("/sys/bus/pci/devices/0000:61:00.3/net")[0], "bond0"))
	}
	for _, n := range []string{"bond0", "p0", "p1"} {
		x.ok(x.h.SetLinkUp(n, true))
	}
}

func TestLAGEligibility(t *testing.T) {
	tests := []struct {
		name    string
		setup   lagSetup
		total   int
		active  bool
		portSel string
		mapping string
	}{
		{"802.3ad", lagSetup{mode: "802.3ad"}, 0, true, "hash", "1\n2\n"},
		{"balance-xor", lagSetup{mode: "balance-xor"}, 0, true, "hash", "1\n2\n"},
		{"active-backup", lagSetup{mode: "active-backup"}, 0, true, "queue_affinity", "1:1\n2:1\n"},
		{"no VFs", lagSetup{mode: "802.3ad", numvfs: "0"}, 0, true, "hash", "1\n2\n"},
		{"balance-rr is not a LAG mode", lagSetup{mode: "balance-rr"}, 0, false, "", ""},
		{"broadcast is not a LAG mode", lagSetup{mode: "broadcast"}, 0, false, "", ""},
		{"PF1 in legacy", lagSetup{mode: "802.3ad", legacyPF1: true}, 0, false, "", ""},
		{"one PF only", lagSetup{mode: "802.3ad", onlyP0: true}, 0, false, "", ""},
		{"a representor too", lagSetup{mode: "802.3ad", extra: "rep"}, 0, false, "", ""},
		{"a VF netdev too", lagSetup{mode: "802.3ad", extra: "vf"}, 0, false, "", ""},
		{"sriov_totalvfs 64, 64 VFs", lagSetup{mode: "802.3ad", numvfs: "64"}, 64, true, "hash", "1\n2\n"},
		{"sriov_totalvfs 65, 2 VFs", lagSetup{mode: "802.3ad"}, 65, false, "", ""},
		{"sriov_totalvfs 127, no VFs", lagSetup{mode: "802.3ad", numvfs: "0"}, 127, false, "", ""},
		{"VF bound at activation", lagSetup{mode: "802.3ad", boundVF: true}, 0, false, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec()
			s.NICs[0].TotalVFs = tc.total
			x := newTH(t, s)
			x.setupLAG(tc.setup)
			x.settle()
			if got := x.lagState(); got != map[bool]string{true: "active", false: "disabled"}[tc.active] {
				t.Fatalf("lag state %q, want active=%v\n%s", got, tc.active, x.h.Dump())
			}
			if got := x.read("/sys/kernel/debug/mlx5/0000:61:00.1/lag/state"); strings.TrimSpace(got) != x.lagState() {
				t.Fatalf("PF1 sees %q", got)
			}
			if got := x.read(lagDir + "members"); got != "0000:61:00.0\n0000:61:00.1\n" {
				t.Fatalf("members %q", got)
			}
			if !tc.active {
				for _, f := range []string{"type", "port_sel_mode", "flags", "mapping"} {
					x.readErr(lagDir+f, syscall.EINVAL)
				}
				return
			}
			want := map[string]string{
				"type": "switchdev\n", "port_sel_mode": tc.portSel + "\n",
				"flags": "shared_fdb:on\nfdb_selection_mode:native\n", "mapping": tc.mapping,
			}
			for f, w := range want {
				if got := x.read(lagDir + f); got != w {
					t.Errorf("%s = %q, want %q", f, got, w)
				}
			}
		})
	}
}

func TestLAGActivationLatency(t *testing.T) {
	x := newTH(t, testSpec())
	x.setupLAG(lagSetup{mode: "802.3ad"})
	// Eligible since the second enslave; the ups after it took no time.
	x.clk.Advance(latLAG - time.Nanosecond)
	if got := x.lagState(); got != "disabled" {
		t.Fatalf("state %q before the activation latency", got)
	}
	if strings.Contains(x.h.Dump(), "single FDB") {
		t.Fatal("activation logged early")
	}
	x.clk.Advance(time.Nanosecond)
	if got := x.lagState(); got != "active" {
		t.Fatalf("state %q after the activation latency", got)
	}
	d := x.h.Dump()
	for _, want := range []string{"lag map active ports: 1, 2", "shared_fdb:1 mode:hash", "Operation mode is single FDB", "lag state=active bond=bond0"} {
		if !strings.Contains(d, want) {
			t.Errorf("dump lacks %q:\n%s", want, d)
		}
	}
}

func TestLAGFailsWithBoundVFsUntilReevaluated(t *testing.T) {
	x := newTH(t, testSpec())
	x.setupLAG(lagSetup{mode: "active-backup", boundVF: true})
	x.settle()
	if got := x.lagState(); got != "disabled" {
		t.Fatalf("state %q", got)
	}
	if d := x.h.Dump(); !strings.Contains(d, "Make sure all VFs are unbound prior to VF LAG activation or deactivation") {
		t.Fatalf("dmesg lacks the message:\n%s", d)
	}
	// Unbinding alone is no re-evaluation.
	x.write("/sys/bus/pci/drivers/mlx5_core/unbind", "0000:61:00.2")
	x.settle()
	if got := x.lagState(); got != "disabled" {
		t.Fatalf("state %q after unbinding only", got)
	}
	// Release and enslave again: re-evaluated, activates.
	x.ok(x.h.SetLinkUp("p1", false))
	x.ok(x.h.SetMaster("p1", ""))
	x.ok(x.h.SetMaster("p1", "bond0"))
	x.settle()
	if got := x.lagState(); got != "active" {
		t.Fatalf("state %q after re-enslaving", got)
	}
	// A numvfs change in switchdev leaves the active LAG alone (6.x
	// mlx5_eswitch_enable: no LAG toggle once the offloads FDB exists).
	x.write("/sys/bus/pci/devices/"+pf1+"/sriov_numvfs", "0")
	if got := x.lagState(); got != "active" {
		t.Fatalf("state %q right after a numvfs change", got)
	}
	x.write("/sys/bus/pci/devices/"+pf1+"/sriov_numvfs", "2")
	x.settle()
	if got := x.lagState(); got != "active" {
		t.Fatalf("state %q after a numvfs change", got)
	}
}

func TestLAGDeactivation(t *testing.T) {
	tests := []struct {
		name string
		do   func(x *th)
	}{
		{"PF0 leaves switchdev", func(x *th) { x.ok(x.mode(pf0, eswitch.ModeLegacy)) }},
		{"PF1 leaves switchdev", func(x *th) { x.ok(x.mode(pf1, eswitch.ModeLegacy)) }},
		{"release a slave", func(x *th) {
			x.ok(x.h.SetLinkUp("p1", false))
			x.ok(x.h.SetMaster("p1", ""))
		}},
		{"delete the bond", func(x *th) { x.ok(x.h.DeleteLink("bond0")) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			x.setupLAG(lagSetup{mode: "balance-xor"})
			x.settle()
			if got := x.lagState(); got != "active" {
				t.Fatalf("state %q", got)
			}
			tc.do(x)
			x.settle()
			if got := x.lagState(); got != "disabled" {
				t.Fatalf("state %q after %s", got, tc.name)
			}
			x.readErr(lagDir+"type", syscall.EINVAL)
		})
	}
}

func TestLAGMapping(t *testing.T) {
	tests := []struct {
		mode string
		down string // PF set down
		want string
	}{
		{"802.3ad", "", "1\n2\n"},
		{"802.3ad", "p0", "2\n"},
		{"802.3ad", "p1", "1\n"},
		{"active-backup", "", "1:1\n2:1\n"},
		{"active-backup", "p0", "1:2\n2:2\n"},
	}
	for _, tc := range tests {
		t.Run(tc.mode+" "+tc.down, func(t *testing.T) {
			x := newTH(t, testSpec())
			x.setupLAG(lagSetup{mode: tc.mode})
			x.settle()
			if tc.down != "" {
				x.ok(x.h.SetLinkUp(tc.down, false))
			}
			if got := x.read(lagDir + "mapping"); got != tc.want {
				t.Fatalf("mapping %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSinglePFNICHasNoLAG(t *testing.T) {
	x := newTH(t, &Spec{NICs: []NICSpec{{PFs: []PFSpec{{PCI: "0000:03:00.0", Netdev: "ens1"}}}}})
	if got := x.ls("/sys/kernel/debug/mlx5/0000:03:00.0"); len(got) != 0 {
		t.Fatalf("debugfs of a 1-PF NIC: %v", got)
	}
	x.readErr("/sys/kernel/debug/mlx5/0000:03:00.0/lag/state", syscall.ENOENT)
}

// TestLAGNeedsFirmwareNumVFsAtMost64 is NVIDIA's VF-LAG test of Feature
// #2101052 (Mellanox ovs-tests): the firmware's NUM_OF_VFS set to 65 (the
// PFs' sriov_totalvfs), 2 VFs per PF, switchdev, an active-backup bond:
// the second enslave warns "Can't activate LAG offload, PF is configured
// with more than 64 VFs." and no VF LAG comes up. With NUM_OF_VFS 64 it
// does, without the warning.
func TestLAGNeedsFirmwareNumVFsAtMost64(t *testing.T) {
	const warning = "Warning: mlx5_core: Can't activate LAG offload, PF is configured with more than 64 VFs."
	for _, tc := range []struct {
		total  int
		active bool
	}{{65, false}, {127, false}, {64, true}} {
		t.Run(fmt.Sprint(tc.total), func(t *testing.T) {
			s := testSpec()
			s.NICs[0].TotalVFs = tc.total
			x := newTH(t, s)
			x.setupLAG(lagSetup{mode: "active-backup", onlyP0: true})
			if strings.Contains(x.h.Dump(), warning) {
				t.Fatalf("warned at the first enslave:\n%s", x.h.Dump())
			}
			x.ok(x.h.SetLinkUp("p1", false))
			x.ok(x.h.SetMaster("p1", "bond0"))
			x.ok(x.h.SetLinkUp("p1", true))
			x.settle()
			if got, want := x.lagState(), map[bool]string{true: "active", false: "disabled"}[tc.active]; got != want {
				t.Fatalf("lag state %q, want %q", got, want)
			}
			if got := strings.Count(x.h.Dump(), warning); got != map[bool]int{true: 0, false: 1}[tc.active] {
				t.Fatalf("the warning appears %d times:\n%s", got, x.h.Dump())
			}
		})
	}
}

// TestEnslaveWarnsOfUnsupportedTXType: balance-rr is no LAG mode; the
// enslave that completes the bond says so (mlx5_handle_changeupper_event).
func TestEnslaveWarnsOfUnsupportedTXType(t *testing.T) {
	x := newTH(t, testSpec())
	x.setupLAG(lagSetup{mode: "balance-rr"})
	if d := x.h.Dump(); !strings.Contains(d, "Warning: mlx5_core: Can't activate LAG offload, TX type isn't supported.") {
		t.Fatalf("no warning:\n%s", d)
	}
}

// TestLAGMappingFollowsActiveAggregator: in 802.3ad a slave outside the
// bond's active aggregator is inactive (bond_is_active_slave), and mlx5's
// hash-mode lag/mapping lists only the tx-enabled ports: without an LACP
// partner each slave is its own aggregator and one port carries the VF
// traffic; the LAG stays active. balance-xor has no aggregators.
func TestLAGMappingFollowsActiveAggregator(t *testing.T) {
	for _, tc := range []struct {
		mode string
		lacp bool
		want string
	}{
		{"802.3ad", true, "1\n2\n"},
		{"802.3ad", false, "1\n"},
		{"balance-xor", false, "1\n2\n"},
	} {
		t.Run(fmt.Sprintf("%s lacp=%v", tc.mode, tc.lacp), func(t *testing.T) {
			x := newTH(t, testSpec())
			x.setupLAG(lagSetup{mode: tc.mode})
			x.settle()
			x.ok(x.h.SetSwitchLACP("nic0", tc.lacp))
			if got := x.lagState(); got != "active" {
				t.Fatalf("state %q", got)
			}
			if got := x.read(lagDir + "mapping"); got != tc.want {
				t.Fatalf("mapping %q, want %q", got, tc.want)
			}
			if !tc.lacp {
				x.ok(x.h.SetSwitchLACP("nic0", true))
				if got := x.read(lagDir + "mapping"); got != "1\n2\n" {
					t.Fatalf("mapping %q once the partner answers", got)
				}
			}
		})
	}
}

// TestLAGTypes: a LAG the bond has no part in. An IPv4 multipath route
// over both PFs, seen before the bond's LAG, makes a multipath LAG
// (lag/mp.c) that ignores the bond and outlives the route until an eswitch
// mode change; the esw_multiport param makes a multiport eswitch LAG
// (lag/mpesw.c), refused while another LAG is active or without the
// port_select_flow_table capability.
func TestLAGTypes(t *testing.T) {
	t.Run("multipath", func(t *testing.T) {
		x := newTH(t, testSpec())
		x.vfs(pf0, "2")
		x.vfs(pf1, "2")
		x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
		x.ok(x.mode(pf1, eswitch.ModeSwitchdev))
		x.ok(x.h.SetMultipathRoute("nic0", true))
		x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100}))
		x.ok(x.h.SetMaster("p0", "bond0"))
		x.ok(x.h.SetMaster("p1", "bond0"))
		x.settle()
		for f, want := range map[string]string{"state": "active\n", "type": "multipath\n", "port_sel_mode": "queue_affinity\n", "flags": "shared_fdb:off\nfdb_selection_mode:affinity\n"} {
			if got := x.read(lagDir + f); got != want {
				t.Errorf("%s = %q, want %q", f, got, want)
			}
		}
		x.ok(x.h.SetMultipathRoute("nic0", false))
		if got := x.read(lagDir + "type"); got != "multipath\n" {
			t.Fatalf("type %q after the route's deletion", got)
		}
		x.ok(x.mode(pf1, eswitch.ModeLegacy))
		x.ok(x.mode(pf1, eswitch.ModeSwitchdev))
		x.settle()
		if got := x.read(lagDir + "type"); got != "switchdev\n" {
			t.Fatalf("type %q after the eswitch mode change", got)
		}
	})
	t.Run("multiport eswitch", func(t *testing.T) {
		x := newTH(t, testSpec())
		x.vfs(pf0, "2")
		x.vfs(pf1, "2")
		x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
		x.ok(x.mode(pf1, eswitch.ModeSwitchdev))
		x.ok(x.h.SetParam(dl(pf0), "esw_multiport", "true"))
		if v, _ := x.h.Param(dl(pf1), "esw_multiport"); v != "true" {
			t.Fatalf("esw_multiport %q", v)
		}
		x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100}))
		x.ok(x.h.SetMaster("p0", "bond0"))
		x.ok(x.h.SetMaster("p1", "bond0"))
		x.settle()
		for f, want := range map[string]string{"type": "multiport_eswitch\n", "port_sel_mode": "mpesw\n"} {
			if got := x.read(lagDir + f); got != want {
				t.Errorf("%s = %q, want %q", f, got, want)
			}
		}
		x.ok(x.h.SetParam(dl(pf0), "esw_multiport", "false"))
		if got := x.lagState(); got != "disabled" {
			t.Fatalf("state %q after esw_multiport false", got)
		}
		x.ok(x.h.SetMaster("p1", ""))
		x.ok(x.h.SetMaster("p1", "bond0"))
		x.settle()
		if got := x.read(lagDir + "type"); got != "switchdev\n" {
			t.Fatalf("type %q once the bond changes", got)
		}
		checkErrno(t, x.h.SetParam(dl(pf0), "esw_multiport", "true"), syscall.EINVAL, "")
	})
	t.Run("multiport eswitch without the capability", func(t *testing.T) {
		s := testSpec()
		s.NICs[0].PortSelectFlowTable = "off"
		x := newTH(t, s)
		x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
		x.ok(x.mode(pf1, eswitch.ModeSwitchdev))
		checkErrno(t, x.h.SetParam(dl(pf0), "esw_multiport", "true"), syscall.EOPNOTSUPP, "")
	})
}

// TestPortSelectionWithoutFlowTable: without port_select_flow_table mlx5
// selects ports by queue affinity even for 802.3ad and balance-xor
// (mlx5_lag_set_port_sel_mode_offloads): each VF sends on its own PF's
// port, and a port that is not tx-enabled maps to the other.
func TestPortSelectionWithoutFlowTable(t *testing.T) {
	for _, tc := range []struct {
		mode string
		lacp bool
		want string
	}{{"802.3ad", true, "1:1\n2:2\n"}, {"802.3ad", false, "1:1\n2:1\n"}, {"balance-xor", true, "1:1\n2:2\n"}} {
		t.Run(fmt.Sprintf("%s lacp=%v", tc.mode, tc.lacp), func(t *testing.T) {
			s := testSpec()
			s.NICs[0].PortSelectFlowTable = "off"
			x := newTH(t, s)
			x.setupLAG(lagSetup{mode: tc.mode})
			x.settle()
			x.ok(x.h.SetSwitchLACP("nic0", tc.lacp))
			if got := x.read(lagDir + "port_sel_mode"); got != "queue_affinity\n" {
				t.Fatalf("port_sel_mode %q", got)
			}
			if got := x.read(lagDir + "mapping"); got != tc.want {
				t.Fatalf("mapping %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLAGTakesHashAtEnslave: mlx5 takes the bond's xmit_hash_policy into
// its LAG's port selection from the enslave's CHANGEUPPER event only: a
// live write of the option leaves the NIC on the old policy until a PF is
// enslaved again (the Dump's hash=, which debugfs does not show).
func TestLAGTakesHashAtEnslave(t *testing.T) {
	x := newTH(t, testSpec())
	x.setupLAG(lagSetup{mode: "802.3ad"})
	x.settle()
	if d := x.h.Dump(); !strings.Contains(d, "hash=layer2\n") {
		t.Fatalf("the LAG's hash:\n%s", d)
	}
	x.write("/sys/class/net/bond0/bonding/xmit_hash_policy", "layer3+4")
	x.settle()
	if d := x.h.Dump(); !strings.Contains(d, "hash=layer2\n") {
		t.Fatalf("a live write reached the NIC:\n%s", d)
	}
	x.ok(x.h.SetLinkUp("p1", false))
	x.ok(x.h.SetMaster("p1", ""))
	x.ok(x.h.SetMaster("p1", "bond0"))
	x.ok(x.h.SetLinkUp("p1", true))
	x.settle()
	if d := x.h.Dump(); !strings.Contains(d, "hash=layer3+4\n") {
		t.Fatalf("the LAG after the enslave:\n%s", d)
	}
}
