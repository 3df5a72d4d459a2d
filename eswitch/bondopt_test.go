package eswitch_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
)

// TestSetBondOption drives the simulated kernel, which applies 6.1's
// bond_options.c rules, and checks what ReadBond then shows.
func TestSetBondOption(t *testing.T) {
	h := openSim(t)
	f := h.FS()
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"p0", "p1"} {
		if err := h.SetMaster(s, "bond0"); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"bond0", "p0", "p1"} {
		if err := h.SetLinkUp(s, true); err != nil {
			t.Fatal(err)
		}
	}
	set := func(opt, v string) error { return eswitch.SetBondOption(f, "bond0", opt, v) }
	// Live options.
	for _, w := range [][2]string{{"miimon", "200"}, {"xmit_hash_policy", "layer2"}, {"min_links", "1"}, {"updelay", "400"}, {"downdelay", "200"}} {
		if err := set(w[0], w[1]); err != nil {
			t.Fatalf("%s %s: %v", w[0], w[1], err)
		}
	}
	// IFDOWN and NOSLAVES options, with the kernel's errno wrapped and a hint.
	for _, c := range []struct {
		opt, v string
		errno  syscall.Errno
		hint   string
	}{
		{"lacp_rate", "slow", syscall.EBUSY, "take it down first"},
		{"ad_select", "bandwidth", syscall.EBUSY, "take it down first"},
		{"mode", "active-backup", syscall.ENOTEMPTY, "release them first"},
		{"miimon", "fast", syscall.EINVAL, ""},
	} {
		err := set(c.opt, c.v)
		if !errors.Is(err, c.errno) || !strings.Contains(err.Error(), "/sys/class/net/bond0/bonding/"+c.opt) || !strings.Contains(err.Error(), c.hint) {
			t.Errorf("%s %s: %v, want %v with %q", c.opt, c.v, err, c.errno, c.hint)
		}
	}
	if err := h.SetLinkUp("bond0", false); err != nil {
		t.Fatal(err)
	}
	if err := set("lacp_rate", "slow"); err != nil {
		t.Fatal(err)
	}
	if err := set("ad_select", "2"); err != nil { // a number, as the kernel accepts it
		t.Fatal(err)
	}
	b, err := eswitch.ReadBond(f, "bond0")
	if err != nil {
		t.Fatal(err)
	}
	if b.Miimon != 200 || b.XmitHashPolicy != "layer2" || b.LacpRate != "slow" || b.AdSelect != "count" || len(b.Slaves) != 2 {
		t.Errorf("ReadBond after the writes: %+v", b)
	}
	for _, s := range []string{"p0", "p1"} {
		if err := h.SetMaster(s, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := set("mode", "active-backup"); err != nil {
		t.Fatal(err)
	}
	if err := set("lacp_rate", "fast"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("lacp_rate in active-backup: %v, want EACCES", err)
	}
	b, err = eswitch.ReadBond(f, "bond0")
	if err != nil || b.Mode != "active-backup" || b.LacpRate != "" || b.XmitHashPolicy != "" || b.AdSelect != "" {
		t.Errorf("ReadBond in active-backup: %+v, %v (lacp_rate, xmit_hash_policy and ad_select are not shown there)", b, err)
	}
	if err := eswitch.SetBondOption(f, "nosuch0", "miimon", "100"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing bond: %v, want fs.ErrNotExist", err)
	}
}

// TestSetBondOptionChecks: the name, option and value are checked before a
// path is built; the write is what echo writes.
func TestSetBondOptionChecks(t *testing.T) {
	x := newTree(t)
	d := "/sys/devices/virtual/net/bond0/bonding/"
	x.file(d+"miimon", "100\n")
	if err := os.Chmod(filepath.Join(x.root, d, "miimon"), 0o644); err != nil {
		t.Fatal(err)
	}
	x.link("/sys/class/net/bond0", "../../devices/virtual/net/bond0")
	if err := eswitch.SetBondOption(x.fs(), "bond0", "miimon", "200"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(x.root, d, "miimon")); string(got) != "200\n" {
		t.Errorf("wrote %q, want %q", got, "200\n")
	}
	bad := []struct{ bond, opt, v string }{
		{"../bond0", "miimon", "1"},
		{"bond0/x", "miimon", "1"},
		{"", "miimon", "1"},
		{"bond0", "slaves", "+p0"},
		{"bond0", "../ifalias", "x"},
		{"bond0", "arp_interval", "1"},
		{"bond0", "miimon", ""},
		{"bond0", "miimon", "1\n2"},
		{"bond0", "miimon", "1 2"},
	}
	for _, c := range bad {
		if err := eswitch.SetBondOption(x.fs(), c.bond, c.opt, c.v); err == nil {
			t.Errorf("SetBondOption(%q, %q, %q) succeeded", c.bond, c.opt, c.v)
		}
	}
	if got, _ := sysfs.ReadString(x.fs(), "/sys/class/net/bond0/bonding/miimon"); got != "200" {
		t.Errorf("a refused call wrote: %q", got)
	}
}

func TestReadBondOption(t *testing.T) {
	h := openSim(t)
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Miimon: 100}); err != nil {
		t.Fatal(err)
	}
	if err := eswitch.SetBondOption(h.FS(), "bond0", "xmit_hash_policy", "layer3+4"); err != nil {
		t.Fatal(err)
	}
	// Kept in active-backup, where ReadBond does not show it.
	if got, err := eswitch.ReadBondOption(h.FS(), "bond0", "xmit_hash_policy"); err != nil || got != "layer3+4" {
		t.Errorf("xmit_hash_policy = %q, %v", got, err)
	}
	if got, err := eswitch.ReadBondOption(h.FS(), "bond0", "miimon"); err != nil || got != "100" {
		t.Errorf("miimon = %q, %v", got, err)
	}
	if _, err := eswitch.ReadBondOption(h.FS(), "bond0", "../address"); err == nil {
		t.Error("an option outside the list was read")
	}
	if _, err := eswitch.ReadBondOption(h.FS(), "nosuch0", "mode"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing bond: %v", err)
	}
}
