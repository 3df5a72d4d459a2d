package pipeline

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vflag/vflag/docs"
	"github.com/vflag/vflag/internal/config"
)

// TestConfigReferenceCosts: what docs/configuration.md (and vflag.yaml(5))
// says a change of a bond option, numvfs, the eswitch mode, the PFs or
// the bond's name costs is what the pipeline does: an option the kernel
// changes only with the bond down or its slaves released (bondOptionCost)
// is disruptive, one it writes live is live; a field whose step is a
// disruptive prune (disruptivePrune) is disruptive.
func TestConfigReferenceCosts(t *testing.T) {
	fields, err := docs.Fields()
	if err != nil {
		t.Fatal(err)
	}
	change := map[string]string{}
	for _, f := range fields {
		cost, _, _ := strings.Cut(f.Change, " ")
		change[f.Path] = strings.Trim(cost, ",;:")
	}
	want := map[string]string{}
	bt := reflect.TypeFor[config.Bond]()
	for i := 0; i < bt.NumField(); i++ {
		opt := bt.Field(i).Tag.Get("mapstructure")
		if opt == "name" {
			continue
		}
		want["groups[].bond."+opt] = map[bool]string{true: "disruptive", false: "live"}[bondOptionCost[opt] >= costDown]
	}
	for path, kind := range map[string]string{
		"groups[].numvfs": KindNumVFs, "groups[].eswitch": modeKind{}.Name(),
		"groups[].pfs": enslaveKind{}.Name(), "groups[].bond.name": bondKind{}.Name(),
	} {
		if !disruptivePrune[kind] {
			t.Errorf("%s: kind %s is no disruptive prune: say what its change costs in configuration.md and here", path, kind)
		}
		want[path] = "disruptive"
	}
	for path, w := range want {
		if change[path] != w {
			t.Errorf("configuration.md: %s: change %q, but the pipeline's is %s", path, change[path], w)
		}
	}
}
