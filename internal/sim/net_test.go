package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vflag/vflag/eswitch"
)

func TestNetSysfs(t *testing.T) {
	x := newTH(t, testSpec())
	files := []struct {
		path  string
		want  string
		errno syscall.Errno
	}{
		{"/sys/class/net/p0/operstate", "down\n", 0},
		{"/sys/class/net/p0/carrier", "", syscall.EINVAL},
		{"/sys/class/net/p0/ifindex", "2\n", 0},
		{"/sys/class/net/p1/ifindex", "3\n", 0},
		{"/sys/class/net/p0/ifalias", "", 0},
		{"/sys/class/net/p0/mtu", "1500\n", 0},
		{"/sys/class/net/p0/phys_port_name", "p0\n", 0},
		{"/sys/class/net/p0/phys_port_id", "", syscall.EOPNOTSUPP},
		{"/sys/class/net/lo/operstate", "unknown\n", 0},
		{"/sys/class/net/lo/phys_port_name", "", syscall.EOPNOTSUPP},
		{"/sys/class/net/lo/phys_switch_id", "", syscall.EOPNOTSUPP},
		{"/sys/class/net/nope/address", "", syscall.ENOENT},
		{"/sys/class/net/p0/nope", "", syscall.ENOENT},
		{"/sys/class/net/p0", "", syscall.EISDIR},
		{"/sys/class/net/p0/device/sriov_totalvfs", "8\n", 0},
		{"/sys/class/net/p0/device/vendor", "0x15b3\n", 0},
		{"/sys/class/net/p0/device/device", "0x101d\n", 0},
		{"/sys/class/net/p0/address/x", "", syscall.ENOTDIR},
		{"/sys/bus/pci/devices/0000:61:00.0/driver_override", "(null)\n", 0},
		{"/sys/bus/pci/drivers_probe", "", syscall.EACCES},
		{"/proc/net/bonding/bond0", "", syscall.ENOENT},
		{"relative/path", "", syscall.ENOENT},
	}
	for _, f := range files {
		b, err := x.fs.ReadFile(f.path)
		if f.errno != 0 {
			if err == nil {
				t.Errorf("%s: read %q, want %v", f.path, b, f.errno)
				continue
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || !errors.Is(err, f.errno) {
				t.Errorf("%s: error %v, want *fs.PathError %v", f.path, err, f.errno)
			}
			continue
		}
		if err != nil || string(b) != f.want {
			t.Errorf("%s: %q, %v; want %q", f.path, b, err, f.want)
		}
	}
	if _, err := x.fs.ReadFile("/sys/class/net/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v is not fs.ErrNotExist", err)
	}
	mac := x.read("/sys/class/net/p0/address")
	if hw, err := net.ParseMAC(mac[:len(mac)-1]); err != nil || hw[0]&1 != 0 || mac != strings.ToLower(mac) {
		t.Errorf("address %q", mac)
	}
	links := map[string]string{
		"/sys/class/net/p0":                           "../../devices/pci0000:61/0000:61:00.0/net/p0",
		"/sys/class/net/lo":                           "../../devices/virtual/net/lo",
		"/sys/class/net/p0/device":                    "../../../0000:61:00.0",
		"/sys/class/net/p1/device":                    "../../../0000:61:00.1",
		"/sys/bus/pci/devices/0000:61:00.0":           "../../../devices/pci0000:61/0000:61:00.0",
		"/sys/bus/pci/devices/0000:61:00.0/driver":    "../../../bus/pci/drivers/mlx5_core",
		"/sys/bus/pci/drivers/mlx5_core/0000:61:00.1": "../../../../devices/pci0000:61/0000:61:00.1",
	}
	for p, want := range links {
		if got := x.readlink(p); got != want {
			t.Errorf("readlink %s = %q, want %q", p, got, want)
		}
	}
	if _, err := x.fs.Readlink("/sys/class/net/p0/address"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("readlink of a file: %v", err)
	}
	if got := x.ls("/sys/class/net"); !cmp.Equal(got, []string{"lo", "p0", "p1"}) {
		t.Errorf("/sys/class/net %v", got)
	}
	if got := x.ls("/sys/bus/pci/devices/0000:61:00.0/net"); !cmp.Equal(got, []string{"p0"}) {
		t.Errorf("PF net dir %v", got)
	}
	if got := x.ls("/sys/bus/pci/drivers"); !cmp.Equal(got, []string{"mlx5_core", "vfio-pci"}) {
		t.Errorf("drivers %v", got)
	}
	if _, err := x.fs.ReadDir("/sys/class/net/p0/address"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("ReadDir of a file: %v", err)
	}
	// Writable attributes.
	x.write("/sys/class/net/p0/ifalias", "uplink\n")
	if got := x.read("/sys/class/net/p0/ifalias"); got != "uplink\n" {
		t.Errorf("ifalias %q", got)
	}
	x.write("/sys/class/net/p0/mtu", "9000")
	x.writeErr("/sys/class/net/p0/mtu", "10000", syscall.EINVAL)
	x.writeErr("/sys/class/net/p0/address", "00:11:22:33:44:55", syscall.EACCES)
	x.writeErr("/sys/class/net/p0/nope", "1", syscall.ENOENT)
	x.writeErr("/sys/class/net/p0", "1", syscall.EISDIR)
	// Up: carrier and operstate.
	x.ok(x.h.SetLinkUp("p0", true))
	if got := x.read("/sys/class/net/p0/carrier"); got != "1\n" {
		t.Errorf("carrier %q", got)
	}
	if got := x.read("/sys/class/net/p0/operstate"); got != "up\n" {
		t.Errorf("operstate %q", got)
	}
	l, err := x.h.Link("p0")
	x.ok(err)
	if !l.AdminUp || l.OperState != "up" || l.Alias != "uplink" || l.Index != 2 || l.MAC+"\n" != mac {
		t.Errorf("Link(p0) = %+v", l)
	}
	if _, err := x.h.Link("nope"); !errors.Is(err, eswitch.ErrLinkNotFound) || !errors.Is(err, syscall.ENODEV) {
		t.Errorf("Link(nope): %v", err)
	}
	ls, err := x.h.Links()
	x.ok(err)
	var names []string
	for _, l := range ls {
		names = append(names, l.Name)
	}
	if !cmp.Equal(names, []string{"lo", "p0", "p1"}) {
		t.Errorf("Links %v", names)
	}
	checkErrno(t, x.h.SetLinkUp("nope", true), syscall.ENODEV, "")
}

func TestBonds(t *testing.T) {
	x := newTH(t, testSpec())
	bond := eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4", Alias: "vflag:g1"}
	x.ok(x.h.AddBond(bond))
	checkErrno(t, x.h.AddBond(bond), syscall.EEXIST, "")
	checkErrno(t, x.h.AddBond(eswitch.BondSpec{Name: "p0", Mode: "802.3ad"}), syscall.EEXIST, "")
	checkErrno(t, x.h.AddBond(eswitch.BondSpec{Name: "b1", Mode: "fancy"}), syscall.EINVAL, "")
	checkErrno(t, x.h.AddBond(eswitch.BondSpec{Name: "b1", Mode: "active-backup", LacpRate: "fast"}), syscall.EACCES, "mode dependency")
	checkErrno(t, x.h.AddBond(eswitch.BondSpec{Name: "b1", Mode: "802.3ad", XmitHashPolicy: "layer9"}), syscall.EINVAL, "")
	checkErrno(t, x.h.AddBond(eswitch.BondSpec{Name: "bad/name", Mode: "802.3ad"}), syscall.EINVAL, "")

	l, err := x.h.Link("bond0")
	x.ok(err)
	if l.Kind != "bond" || l.AdminUp || l.OperState != "down" || l.Alias != "vflag:g1" {
		t.Fatalf("new bond %+v", l)
	}
	const b = "/sys/class/net/bond0/bonding/"
	want := map[string]string{
		"mode": "802.3ad 4\n", "slaves": "", "active_slave": "", "miimon": "100\n", "mii_status": "down\n",
		"lacp_rate": "fast 1\n", "xmit_hash_policy": "layer3+4 1\n",
	}
	for f, w := range want {
		if got := x.read(b + f); got != w {
			t.Errorf("%s = %q, want %q", f, got, w)
		}
	}
	x.writeErr(b+"slaves", "+p0", syscall.EACCES)
	if got := x.readlink("/sys/class/net/bond0"); got != "../../devices/virtual/net/bond0" {
		t.Errorf("bond link %q", got)
	}
	x.readErr("/sys/class/net/bond0/phys_port_name", syscall.EOPNOTSUPP)
	x.readErr("/sys/class/net/bond0/phys_switch_id", syscall.EOPNOTSUPP)
	x.readErr("/sys/class/net/bond0/carrier", syscall.EINVAL)

	// Enslaving an up port is refused.
	x.ok(x.h.SetLinkUp("p0", true))
	checkErrno(t, x.h.SetMaster("p0", "bond0"), syscall.EPERM, "Device can not be enslaved while up")
	x.ok(x.h.SetLinkUp("p0", false))
	checkErrno(t, x.h.SetMaster("p0", "p1"), syscall.EOPNOTSUPP, "")
	checkErrno(t, x.h.SetMaster("p0", "nope"), syscall.ENODEV, "")
	checkErrno(t, x.h.SetMaster("lo", "bond0"), syscall.EPERM, "")
	checkErrno(t, x.h.SetMaster("bond0", "bond0"), syscall.EPERM, "")
	p0mac, p1mac := x.read("/sys/class/net/p0/address"), x.read("/sys/class/net/p1/address")
	x.ok(x.h.SetMaster("p0", "bond0"))
	x.ok(x.h.SetMaster("p0", "bond0")) // no-op
	x.ok(x.h.SetMaster("p1", "bond0"))
	if got := x.read(b + "slaves"); got != "p0 p1\n" {
		t.Errorf("slaves %q", got)
	}
	if got := x.readlink("/sys/class/net/p0/master"); got != "../../../../virtual/net/bond0" {
		t.Errorf("master link %q", got)
	}
	if got := x.read("/sys/class/net/p0/master/bonding/mode"); got != "802.3ad 4\n" {
		t.Errorf("through master link: %q", got)
	}
	// The bond takes the first slave's address and gives it to every slave.
	if got := x.read("/sys/class/net/bond0/address"); got != p0mac {
		t.Errorf("bond address %q, want p0's %q", got, p0mac)
	}
	if got := x.read("/sys/class/net/p1/address"); got != p0mac {
		t.Errorf("p1 address %q while enslaved, want the bond's %q", got, p0mac)
	}
	// Oper up with an up slave.
	x.ok(x.h.SetLinkUp("bond0", true))
	if got := x.read("/sys/class/net/bond0/operstate"); got != "down\n" {
		t.Errorf("bond without up slave: %q", got)
	}
	x.ok(x.h.SetLinkUp("p1", true))
	if got := x.read("/sys/class/net/bond0/operstate"); got != "up\n" {
		t.Errorf("bond with an up slave: %q", got)
	}
	if got := x.read(b + "mii_status"); got != "up\n" {
		t.Errorf("mii_status %q", got)
	}
	l, _ = x.h.Link("p0")
	if l.Master != "bond0" {
		t.Errorf("p0 master %q", l.Master)
	}
	// Only bonds can be deleted; deleting releases the slaves.
	checkErrno(t, x.h.DeleteLink("p0"), syscall.EOPNOTSUPP, "")
	checkErrno(t, x.h.DeleteLink("lo"), syscall.EOPNOTSUPP, "")
	if err := x.h.DeleteLink("nope"); !errors.Is(err, eswitch.ErrLinkNotFound) {
		t.Errorf("delete unknown: %v", err)
	}
	x.ok(x.h.DeleteLink("bond0"))
	if x.exists("/sys/class/net/bond0") || x.exists("/sys/class/net/p0/master") {
		t.Fatal("bond or master link left")
	}
	if got := x.read("/sys/class/net/p1/address"); got != p1mac {
		t.Errorf("p1 address after release %q, want %q", got, p1mac)
	}
	l, _ = x.h.Link("p0")
	if l.Master != "" {
		t.Errorf("p0 master %q after delete", l.Master)
	}
	// nomaster when there is none: no-op.
	x.ok(x.h.SetMaster("p0", ""))
}

func TestActiveBackupActiveSlave(t *testing.T) {
	x := newTH(t, testSpec())
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100}))
	x.ok(x.h.SetMaster("p0", "bond0"))
	x.ok(x.h.SetMaster("p1", "bond0"))
	const as = "/sys/class/net/bond0/bonding/active_slave"
	if got := x.read(as); got != "" {
		t.Fatalf("active slave of a down bond %q", got)
	}
	x.ok(x.h.SetLinkUp("bond0", true))
	x.ok(x.h.SetLinkUp("p0", true))
	x.ok(x.h.SetLinkUp("p1", true))
	if got := x.read(as); got != "p0\n" {
		t.Fatalf("active slave %q", got)
	}
	x.ok(x.h.SetLinkUp("p0", false)) // failover
	if got := x.read(as); got != "p1\n" {
		t.Fatalf("after p0 down %q", got)
	}
	x.ok(x.h.SetLinkUp("p0", true)) // no preemption
	if got := x.read(as); got != "p1\n" {
		t.Fatalf("after p0 up %q", got)
	}
	if got := x.read("/sys/class/net/bond0/bonding/mode"); got != "active-backup 1\n" {
		t.Fatalf("mode %q", got)
	}
	if got := x.read("/sys/class/net/bond0/bonding/lacp_rate"); got != "slow 0\n" {
		t.Fatalf("lacp_rate %q", got)
	}
	if got := x.read("/sys/class/net/bond0/bonding/xmit_hash_policy"); got != "layer2 0\n" {
		t.Fatalf("xmit_hash_policy %q", got)
	}
}

// SetLinksUp is SetLinkUp for each name in order, in one state write: it
// stops at the first error (reporting how many succeeded) and the
// generation counter counts one write per interface it changed.
func TestSetLinksUp(t *testing.T) {
	x := newTH(t, testSpec())
	x.ok(x.h.SetLinkUp("p1", true))
	gen := func() uint64 {
		var g uint64
		x.ok(x.h.view(func(st *state, _ int64) error { g = st.Gen; return nil }))
		return g
	}
	g0 := gen()
	n, err := x.h.SetLinksUp([]string{"p0", "p1"}, true) // p1 already up
	if err != nil || n != 2 {
		t.Fatalf("SetLinksUp = %d, %v", n, err)
	}
	if g := gen() - g0; g != 1 {
		t.Errorf("%d writes counted, want 1 (p0)", g)
	}
	n, err = x.h.SetLinksUp([]string{"p0", "nope", "p1"}, false)
	if n != 1 || !errors.Is(err, eswitch.ErrLinkNotFound) || !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("SetLinksUp with a missing link = %d, %v", n, err)
	}
	for name, up := range map[string]bool{"p0": false, "p1": true} {
		l, err := x.h.Link(name)
		x.ok(err)
		if l.AdminUp != up {
			t.Errorf("%s up = %v, want %v (the batch stops at the missing link)", name, l.AdminUp, up)
		}
	}
	g1 := gen()
	n, err = x.h.SetLinksUp([]string{"p0", "p1"}, true)
	if err != nil || n != 2 {
		t.Fatalf("SetLinksUp = %d, %v", n, err)
	}
	if g := gen() - g1; g != 1 {
		t.Errorf("%d writes counted, want 1", g)
	}
	x.ok(x.h.SetLinkUp("p1", false))
	g2 := gen()
	if n, err := x.h.SetLinksUp([]string{"p0", "p1"}, false); err != nil || n != 2 {
		t.Fatalf("SetLinksUp = %d, %v", n, err)
	}
	if g := gen() - g2; g != 1 {
		t.Errorf("%d writes counted, want 1 (p0)", g)
	}
	x.ok(x.h.SetLinkUp("p0", true))
	x.ok(x.h.SetLinkUp("p1", true))
	g3 := gen()
	if n, err := x.h.SetLinksUp([]string{"p0", "p1"}, false); err != nil || n != 2 {
		t.Fatalf("SetLinksUp = %d, %v", n, err)
	}
	if g := gen() - g3; g != 2 {
		t.Errorf("%d writes counted, want 2", g)
	}
}

// The 802.3ad files follow what Linux 6.1 showed for a veth bond with and
// without an LACP partner (e2e validate.sh): no active aggregator before a
// slave is up; with a partner every slave with link in aggregator 1; a
// slave without link keeps its aggregator ID but is not counted; without a
// partner each slave is an individual port and the partner MAC is zeros.
func TestLACP(t *testing.T) {
	x := newTH(t, testSpec())
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100}))
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond1", Mode: "active-backup", Miimon: 100}))
	x.ok(x.h.SetMaster("p0", "bond0"))
	x.ok(x.h.SetMaster("p1", "bond0"))
	const b = "/sys/class/net/bond0/bonding/"
	files := func() string {
		return fmt.Sprintf("agg=%s ports=%s partner=%s p0=%s p1=%s",
			strings.TrimSpace(x.read(b+"ad_aggregator")), strings.TrimSpace(x.read(b+"ad_num_ports")),
			strings.TrimSpace(x.read(b+"ad_partner_mac")),
			strings.TrimSpace(x.read("/sys/class/net/p0/bonding_slave/ad_aggregator_id")),
			strings.TrimSpace(x.read("/sys/class/net/p1/bonding_slave/ad_aggregator_id")))
	}
	var switchID string
	x.ok(x.h.view(func(st *state, _ int64) error { switchID = st.NICs[0].SwitchID; return nil }))
	partner := "02:" + strings.Join(regexp.MustCompile("..").FindAllString(switchID[:10], -1), ":")
	steps := []struct {
		what string
		do   func() error
		want string
	}{
		{"bond down", nil, "agg=0 ports=0 partner= p0=1 p1=1"},
		{"bond and slaves up", func() error {
			for _, n := range []string{"bond0", "p0", "p1"} {
				if err := x.h.SetLinkUp(n, true); err != nil {
					return err
				}
			}
			return nil
		}, "agg=1 ports=2 partner=" + partner + " p0=1 p1=1"},
		{"p1 without link", func() error { return x.h.SetLinkUp("p1", false) }, "agg=1 ports=1 partner=" + partner + " p0=1 p1=1"},
		{"no slave up", func() error { return x.h.SetLinkUp("p0", false) }, "agg=0 ports=0 partner= p0=1 p1=1"},
		{"switch without LACP", func() error {
			if err := x.h.SetSwitchLACP("nic0", false); err != nil {
				return err
			}
			_, err := x.h.SetLinksUp([]string{"p0", "p1"}, true)
			return err
		}, "agg=1 ports=1 partner=00:00:00:00:00:00 p0=1 p1=2"},
		{"switch with LACP again", func() error { return x.h.SetSwitchLACP("nic0", true) }, "agg=1 ports=2 partner=" + partner + " p0=1 p1=1"},
	}
	for _, s := range steps {
		if s.do != nil {
			x.ok(s.do())
		}
		if got := files(); got != s.want {
			t.Errorf("%s: %s, want %s", s.what, got, s.want)
		}
	}
	checkErrno(t, x.h.SetSwitchLACP("nope", false), syscall.ENODEV, "")
	// Other modes print nothing, and their slaves say N/A.
	if got := x.read("/sys/class/net/bond1/bonding/ad_num_ports"); got != "" {
		t.Errorf("active-backup ad_num_ports %q", got)
	}
	x.ok(x.h.SetMaster("p0", ""))
	x.ok(x.h.SetLinkUp("p0", false))
	x.ok(x.h.SetMaster("p0", "bond1"))
	if got := x.read("/sys/class/net/p0/bonding_slave/ad_aggregator_id"); got != "N/A\n" {
		t.Errorf("active-backup slave ad_aggregator_id %q", got)
	}
	// The spec sets the switch at start; a bad value is refused.
	spec := testSpec()
	spec.NICs[0].SwitchLACP = "passive"
	if _, err := validate(spec); err == nil || !strings.Contains(err.Error(), `switch_lacp: "passive": want active or off`) {
		t.Errorf("spec with switch_lacp passive: %v", err)
	}
}
