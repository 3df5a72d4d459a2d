package sim

import (
	"strings"
	"syscall"
	"testing"

	"github.com/vflag/vflag/eswitch"
)

const bondDir = "/sys/class/net/bond0/bonding/"

// TestBondOptionWrites covers the sysfs writes of bonding options with the
// rules of Linux 6.1's bond_options.c: the dependency checks of
// bond_opt_check_deps (EACCES, ENOTEMPTY, EBUSY, in that order, before the
// value is parsed), bond_opt_parse (name, "default", number; EINVAL), and
// the set functions' own rules.
func TestBondOptionWrites(t *testing.T) {
	type state struct {
		mode    string // AddBond mode; "" = 802.3ad
		miimon  int    // AddBond miimon; -1 = 0
		slaves  int    // PFs enslaved (p0, p1)
		up      bool   // bond admin up
		updelay string // written after setup
		primary string // written after setup
	}
	tests := []struct {
		name string
		st   state
		file string
		data string
		err  syscall.Errno // 0: success
		log  string        // a kernel log line the write leaves
		want map[string]string
	}{
		// mode: NOSLAVES | IFDOWN, every mode.
		{name: "mode by name", file: "mode", data: "active-backup\n", want: map[string]string{"mode": "active-backup 1\n"}},
		{name: "mode by number", file: "mode", data: "2", want: map[string]string{"mode": "balance-xor 2\n"}},
		{name: "mode in its read-back format", st: state{mode: "active-backup"}, file: "mode", data: "802.3ad 4\n", want: map[string]string{"mode": "802.3ad 4\n"}},
		{name: "mode default", file: "mode", data: "default\n", want: map[string]string{"mode": "balance-rr 0\n"}},
		{name: "mode number out of the table", file: "mode", data: "7\n", err: syscall.EINVAL, log: "bond0: option mode: invalid value (7)"},
		{name: "mode unknown name", file: "mode", data: "fancy\n", err: syscall.EINVAL, log: "option mode: invalid value (fancy)"},
		{name: "mode empty", file: "mode", data: "\n", err: syscall.EINVAL},
		{name: "mode negative", file: "mode", data: "-1", err: syscall.EINVAL},
		{name: "mode with slaves", st: state{slaves: 1}, file: "mode", data: "active-backup", err: syscall.ENOTEMPTY,
			log: "bond0: option mode: unable to set because the bond device has slaves", want: map[string]string{"mode": "802.3ad 4\n"}},
		{name: "mode with slaves, same value", st: state{slaves: 2}, file: "mode", data: "802.3ad", err: syscall.ENOTEMPTY},
		{name: "mode while up", st: state{up: true}, file: "mode", data: "active-backup", err: syscall.EBUSY,
			log: "bond0: option mode: unable to set because the bond device is up"},
		{name: "mode with slaves and up: slaves checked first", st: state{slaves: 2, up: true}, file: "mode", data: "active-backup", err: syscall.ENOTEMPTY},
		{name: "mode invalid with slaves: deps before parse", st: state{slaves: 1}, file: "mode", data: "fancy", err: syscall.ENOTEMPTY},
		{name: "mode to 802.3ad turns miimon 0 into 100", st: state{mode: "active-backup", miimon: -1}, file: "mode", data: "802.3ad",
			want: map[string]string{"mode": "802.3ad 4\n", "miimon": "100\n"}},
		{name: "mode to balance-xor keeps miimon 0", st: state{mode: "active-backup", miimon: -1}, file: "mode", data: "balance-xor",
			want: map[string]string{"mode": "balance-xor 2\n", "miimon": "0\n"}},
		{name: "mode keeps the other options", file: "mode", data: "active-backup",
			want: map[string]string{"lacp_rate": "fast 1\n", "xmit_hash_policy": "layer3+4 1\n", "miimon": "100\n"}},

		// lacp_rate: IFDOWN, 802.3ad only (unsuppmodes = BOND_MODE_ALL_EX(802.3ad)).
		{name: "lacp_rate outside 802.3ad", st: state{mode: "active-backup"}, file: "lacp_rate", data: "slow", err: syscall.EACCES,
			log: "bond0: option lacp_rate: mode dependency failed, not supported in mode active-backup(1)"},
		{name: "lacp_rate invalid outside 802.3ad: mode checked first", st: state{mode: "balance-xor"}, file: "lacp_rate", data: "bogus", err: syscall.EACCES},
		{name: "lacp_rate while up", st: state{slaves: 2, up: true}, file: "lacp_rate", data: "slow", err: syscall.EBUSY,
			log: "option lacp_rate: unable to set because the bond device is up"},
		{name: "lacp_rate down with slaves", st: state{slaves: 2}, file: "lacp_rate", data: "slow\n", want: map[string]string{"lacp_rate": "slow 0\n", "slaves": "p0 p1\n"}},
		{name: "lacp_rate by number", file: "lacp_rate", data: "0", want: map[string]string{"lacp_rate": "slow 0\n"}},
		{name: "lacp_rate has no default", file: "lacp_rate", data: "default", err: syscall.EINVAL},
		{name: "lacp_rate out of range", file: "lacp_rate", data: "2", err: syscall.EINVAL},

		// ad_select: IFDOWN, no unsuppmodes.
		{name: "ad_select outside 802.3ad", st: state{mode: "active-backup"}, file: "ad_select", data: "bandwidth", want: map[string]string{"ad_select": "bandwidth 1\n"}},
		{name: "ad_select by number", file: "ad_select", data: "2", want: map[string]string{"ad_select": "count 2\n"}},
		{name: "ad_select while up", st: state{up: true}, file: "ad_select", data: "count", err: syscall.EBUSY},
		{name: "ad_select invalid", file: "ad_select", data: "best", err: syscall.EINVAL},

		// Live options: no flags, no unsuppmodes.
		{name: "miimon live", st: state{slaves: 2, up: true}, file: "miimon", data: "200\n", want: map[string]string{"miimon": "200\n", "slaves": "p0 p1\n", "mii_status": "up\n"}},
		{name: "miimon off", file: "miimon", data: "off", want: map[string]string{"miimon": "0\n"}},
		{name: "miimon maxval", file: "miimon", data: "maxval", want: map[string]string{"miimon": "2147483647\n"}},
		{name: "miimon above INT_MAX", file: "miimon", data: "2147483648", err: syscall.EINVAL, log: "bond0: option miimon: allowed values 0 - 2147483647"},
		{name: "miimon negative", file: "miimon", data: "-5", err: syscall.EINVAL},
		{name: "miimon with spaces", file: "miimon", data: " 300 \n", want: map[string]string{"miimon": "300\n"}},
		{name: "xmit_hash_policy live", st: state{slaves: 2, up: true}, file: "xmit_hash_policy", data: "layer2\n", want: map[string]string{"xmit_hash_policy": "layer2 0\n"}},
		{name: "xmit_hash_policy by number", file: "xmit_hash_policy", data: "2", want: map[string]string{"xmit_hash_policy": "layer2+3 2\n"}},
		{name: "xmit_hash_policy in active-backup", st: state{mode: "active-backup"}, file: "xmit_hash_policy", data: "layer2+3", want: map[string]string{"xmit_hash_policy": "layer2+3 2\n"}},
		{name: "xmit_hash_policy invalid", file: "xmit_hash_policy", data: "layer5", err: syscall.EINVAL},
		{name: "min_links live", st: state{slaves: 2, up: true}, file: "min_links", data: "1", want: map[string]string{"min_links": "1\n"}},
		{name: "min_links above the ports: carrier off", st: state{slaves: 2, up: true}, file: "min_links", data: "3", want: map[string]string{"min_links": "3\n", "mii_status": "down\n"}},
		{name: "updelay live", st: state{slaves: 2, up: true}, file: "updelay", data: "200", want: map[string]string{"updelay": "200\n"}},
		{name: "updelay rounded to miimon", file: "updelay", data: "250", log: "bond0: up delay (250) is not a multiple of miimon (100), value rounded to 200 ms", want: map[string]string{"updelay": "200\n"}},
		{name: "updelay without miimon", st: state{mode: "balance-xor", miimon: -1}, file: "updelay", data: "200", err: syscall.EPERM,
			log: "bond0: Unable to set up delay as MII monitoring is disabled"},
		{name: "updelay follows miimon", st: state{updelay: "200"}, file: "miimon", data: "50", want: map[string]string{"updelay": "100\n"}},
		{name: "downdelay", file: "downdelay", data: "300", want: map[string]string{"downdelay": "300\n"}},

		// primary: RAWVAL, active-backup/tlb/alb only, live.
		{name: "primary outside active-backup", st: state{slaves: 2, up: true}, file: "primary", data: "p1\n", err: syscall.EACCES,
			log: "bond0: option primary: mode dependency failed, not supported in mode 802.3ad(4)"},
		{name: "primary live: becomes the active slave", st: state{mode: "active-backup", slaves: 2, up: true}, file: "primary", data: "p1\n",
			want: map[string]string{"primary": "p1\n", "active_slave": "p1\n"}},
		{name: "primary not a slave: recorded, not shown", st: state{mode: "active-backup", slaves: 1, up: true}, file: "primary", data: "p1\n",
			log: "bond0: Recording p1 as primary, but it has not been enslaved yet", want: map[string]string{"primary": "", "active_slave": "p0\n"}},
		{name: "primary cleared by an empty write", st: state{mode: "active-backup", slaves: 2, up: true, primary: "p1"}, file: "primary", data: "\n",
			want: map[string]string{"primary": "", "active_slave": "p1\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			mode, miimon := tc.st.mode, tc.st.miimon
			if mode == "" {
				mode = "802.3ad"
			}
			switch miimon {
			case 0:
				miimon = 100
			case -1:
				miimon = 0
			}
			spec := eswitch.BondSpec{Name: "bond0", Mode: mode, Miimon: miimon, XmitHashPolicy: "layer3+4"}
			if mode == "802.3ad" {
				spec.LacpRate = "fast"
			}
			x.ok(x.h.AddBond(spec))
			for _, pf := range []string{"p0", "p1"}[:tc.st.slaves] {
				x.ok(x.h.SetMaster(pf, "bond0"))
				x.ok(x.h.SetLinkUp(pf, true))
			}
			if tc.st.up {
				x.ok(x.h.SetLinkUp("bond0", true))
			}
			if tc.st.updelay != "" {
				x.write(bondDir+"updelay", tc.st.updelay)
			}
			if tc.st.primary != "" {
				x.write(bondDir+"primary", tc.st.primary)
			}
			before := x.h.Dump()
			if tc.err != 0 {
				x.writeErr(bondDir+tc.file, tc.data, tc.err)
				kernel, _, _ := strings.Cut(x.h.Dump(), "dmesg:\n")
				if want, _, _ := strings.Cut(before, "dmesg:\n"); kernel != want {
					t.Errorf("a refused write changed the bond:\n%s", kernel)
				}
			} else {
				x.write(bondDir+tc.file, tc.data)
			}
			if tc.log != "" && !strings.Contains(x.h.Dump(), tc.log) {
				t.Errorf("dmesg lacks %q:\n%s", tc.log, x.h.Dump())
			}
			for f, w := range tc.want {
				if got := x.read(bondDir + f); got != w {
					t.Errorf("%s = %q, want %q", f, got, w)
				}
			}
		})
	}
}

// TestBondOptionFiles: every option file reads in bond_sysfs.c's format
// on a new bond.
func TestBondOptionFiles(t *testing.T) {
	x := newTH(t, testSpec())
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4"}))
	want := map[string]string{
		"mode": "802.3ad 4\n", "miimon": "100\n", "lacp_rate": "fast 1\n", "xmit_hash_policy": "layer3+4 1\n",
		"ad_select": "stable 0\n", "min_links": "0\n", "updelay": "0\n", "downdelay": "0\n", "primary": "",
	}
	for f, w := range want {
		if got := x.read(bondDir + f); got != w {
			t.Errorf("%s = %q, want %q", f, got, w)
		}
	}
}

// TestBondModeChangeReformsLAG changes an active VF-LAG's bond from 802.3ad
// to active-backup the only way the kernel allows: release the slaves
// (the LAG goes down), bond down, write the mode, enslave the PFs (down),
// bring everything up: the LAG activates again in the new mode.
func TestBondModeChangeReformsLAG(t *testing.T) {
	x := newTH(t, testSpec())
	x.setupLAG(lagSetup{mode: "802.3ad"})
	x.settle()
	if got := x.lagState(); got != "active" {
		t.Fatalf("lag %q", got)
	}
	x.writeErr(bondDir+"mode", "active-backup", syscall.ENOTEMPTY)
	for _, pf := range []string{"p0", "p1"} {
		x.ok(x.h.SetMaster(pf, ""))
	}
	if got := x.lagState(); got != "disabled" {
		t.Fatalf("lag %q after the slaves left", got)
	}
	d := x.h.Dump()
	for _, line := range []string{"bond0: (slave p0): Releasing active interface", "bond0: (slave p1): Releasing active interface", "lag deactivated (sim)"} {
		if !strings.Contains(d, line) {
			t.Errorf("dmesg lacks %q:\n%s", line, d)
		}
	}
	x.writeErr(bondDir+"mode", "active-backup", syscall.EBUSY) // the bond is still up
	x.ok(x.h.SetLinkUp("bond0", false))
	x.write(bondDir+"mode", "active-backup\n")
	for _, pf := range []string{"p0", "p1"} {
		x.ok(x.h.SetLinkUp(pf, false))
		x.ok(x.h.SetMaster(pf, "bond0"))
	}
	for _, n := range []string{"bond0", "p0", "p1"} {
		x.ok(x.h.SetLinkUp(n, true))
	}
	x.settle()
	if got := x.lagState(); got != "active" {
		t.Fatalf("lag %q after the re-form\n%s", got, x.h.Dump())
	}
	if got := x.read(lagDir + "port_sel_mode"); got != "queue_affinity\n" {
		t.Errorf("port_sel_mode %q, want queue_affinity (active-backup)", got)
	}
	if got := x.read(bondDir + "active_slave"); got != "p0\n" {
		t.Errorf("active_slave %q", got)
	}
}

// TestBondPrimaryKept: a primary recorded before its interface is enslaved
// takes effect at the enslave (bond_enslave compares params.primary); a
// release clears the primary slave but keeps the name; an enslave in a mode
// without a primary does not set it.
func TestBondPrimaryKept(t *testing.T) {
	x := newTH(t, testSpec())
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100}))
	x.write(bondDir+"primary", "p1\n")
	for _, pf := range []string{"p0", "p1"} {
		x.ok(x.h.SetMaster(pf, "bond0"))
	}
	if got := x.read(bondDir + "primary"); got != "p1\n" {
		t.Fatalf("primary after the enslave %q", got)
	}
	x.ok(x.h.SetMaster("p1", ""))
	if got := x.read(bondDir + "primary"); got != "" {
		t.Errorf("primary after p1's release %q", got)
	}
	x.ok(x.h.SetMaster("p0", ""))
	x.write(bondDir+"mode", "802.3ad")
	x.ok(x.h.SetMaster("p1", "bond0"))
	if got := x.read(bondDir + "primary"); got != "" {
		t.Errorf("primary in 802.3ad %q", got)
	}
	x.ok(x.h.SetMaster("p1", ""))
	x.write(bondDir+"mode", "active-backup")
	x.ok(x.h.SetMaster("p1", "bond0"))
	if got := x.read(bondDir + "primary"); got != "p1\n" {
		t.Errorf("primary back in active-backup %q: the name is kept", got)
	}
}
