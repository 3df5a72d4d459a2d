package main

import (
	"os"
	"path/filepath"
	"testing"
)

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// parseConfigText loads a config text through the same path as the CLI.
func parseConfigText(t *testing.T, text string) *Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vflag.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &app{v: newViper()}
	a.v.Set("config", path)
	cfg, err := a.loadConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
