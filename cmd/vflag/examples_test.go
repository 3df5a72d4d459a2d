package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/testbed"
)

// TestExamplesLoad: every config in examples/ loads and validates, its
// switchdev groups are on simulated cards a real one in VF-LAG can be (at
// most 64 VFs in the firmware), and the embedded example equals
// examples/vflag-sim.yaml.
func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			a := &app{v: newViper()}
			a.v.Set("config", f)
			if _, err := a.loadConfig(false); err != nil {
				t.Fatal(err)
			}
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if over, err := testbed.LAGCardsOver(string(text), eswitch.LAGMaxTotalVFs); err != nil || len(over) > 0 {
				t.Fatalf("switchdev groups on cards that cannot enter VF-LAG: %v %v", over, err)
			}
		})
	}
	sim, err := os.ReadFile("../../examples/vflag-sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(sim) != exampleConfig {
		t.Fatal("cmd/vflag/example.yaml and examples/vflag-sim.yaml differ: copy one over the other")
	}
}
