package doctor

import (
	"os"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
)

// TestTargetFromConfig maps the example config's group into doctor's input.
func TestTargetFromConfig(t *testing.T) {
	text, err := os.ReadFile("../../examples/vflag-sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	tg := TargetFromConfig(cfg)
	want := Group{Name: "lag0", PFs: []string{"ens1f0np0", "ens1f1np1"}, NumVFs: 4, Switchdev: true, BondName: "bond0", BondMode: "802.3ad",
		OVSDB: "unix:/var/run/openvswitch/db.sock", Libvirt: "qemu:///system"}
	if len(tg.Groups) != 1 {
		t.Fatalf("groups: %+v", tg.Groups)
	}
	g := tg.Groups[0]
	if g.Name != want.Name || strings.Join(g.PFs, ",") != strings.Join(want.PFs, ",") || g.NumVFs != want.NumVFs || g.Switchdev != want.Switchdev ||
		g.BondName != want.BondName || g.BondMode != want.BondMode || g.OVSDB != want.OVSDB || g.Libvirt != want.Libvirt || g.DatapathType != "" {
		t.Errorf("group %+v, want %+v", g, want)
	}
	if len(TargetFromConfig(nil).Groups) != 0 {
		t.Error("no config must mean discovery")
	}
}
