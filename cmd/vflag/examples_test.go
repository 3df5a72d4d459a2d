package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExamplesLoad: every config in examples/ loads and validates, and the
// embedded example equals examples/vflag-sim.yaml.
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
