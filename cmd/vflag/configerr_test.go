package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigErrorsAtTheCause: the CLI's loader (viper, VFLAG_* overrides)
// reports the config mistakes of issue 26 item 3 exactly as
// internal/config.Parse does: YAML's failing line, the root error alone,
// the field and value of a type error, a duration without a unit refused
// from the file and from the environment.
func TestConfigErrorsAtTheCause(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		env      string // NAME=value
		want     string // stderr after "vflag: config FILE: "
	}{
		{name: "indentation error on line 12", from: "    flow_steering_mode: smfs", to: "   flow_steering_mode: smfs",
			want: `YAML syntax error at line 12: did not find expected '-' indicator: "   flow_steering_mode: smfs         # set in legacy mode where the driver has it"`},
		{name: "numvfs 0", from: "numvfs: 4 ", to: "numvfs: 0 ",
			want: "invalid config:\n  groups[0].numvfs: \"0\" must be between 1 and the PF's sriov_totalvfs"},
		{name: "misspelt eswitch", from: "eswitch: switchdev", to: "eswitch: swichdev",
			want: "invalid config:\n  groups[0].eswitch: \"swichdev\" must be switchdev or legacy"},
		{name: "numvfs eight", from: "numvfs: 4 ", to: "numvfs: eight ",
			want: "invalid config:\n  groups[0].numvfs: \"eight\" is not an integer"},
		{name: "VLAN 5000", from: "vlan: 200}", to: "vlan: 5000}",
			want: "invalid config:\n  groups[0].vfs[2].vlan: \"5000\" must be 0 (untagged) or 1-4094"},
		{name: "lag_timeout 30", from: "lag_timeout: 30s", to: "lag_timeout: 30",
			want: "invalid config:\n  lag_timeout: \"30\" is a duration without a unit: write \"30s\" (units ms, s, m, h)"},
		{name: "VFLAG_LAG_TIMEOUT=30", env: "VFLAG_LAG_TIMEOUT=30",
			want: "invalid config:\n  lag_timeout (VFLAG_LAG_TIMEOUT): \"30\" is a duration without a unit: write \"30s\" (units ms, s, m, h)"},
		{name: "VFLAG_PF_WAIT=60", env: "VFLAG_PF_WAIT=60",
			want: "invalid config:\n  pf_wait (VFLAG_PF_WAIT): \"60\" is a duration without a unit: write \"60s\" (units ms, s, m, h)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(exampleConfig, tt.from) {
				t.Fatalf("example config lacks %q", tt.from)
			}
			if name, value, ok := strings.Cut(tt.env, "="); ok {
				t.Setenv(name, value)
			}
			path := filepath.Join(t.TempDir(), "vflag.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(exampleConfig, tt.from, tt.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"plan", "--config", path}, &stdout, &stderr)
			want := "vflag: config " + path + ": " + tt.want + "\n"
			if code != 1 || stderr.String() != want {
				t.Fatalf("exit %d, stderr:\n%s\nwant:\n%s", code, stderr.String(), want)
			}
		})
	}
}

// TestConfigDurationFromEnv: a VFLAG_* duration with a unit overrides the file.
func TestConfigDurationFromEnv(t *testing.T) {
	t.Setenv("VFLAG_PF_WAIT", "5s")
	path := filepath.Join(t.TempDir(), "vflag.yaml")
	if err := os.WriteFile(path, []byte(exampleConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &app{v: newViper()}
	a.v.Set("config", path)
	cfg, err := a.loadConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PFWait != 5*time.Second || cfg.LAGTimeout != 30*time.Second {
		t.Fatalf("pf_wait %v lag_timeout %v, want 5s 30s", cfg.PFWait, cfg.LAGTimeout)
	}
}

// TestNoConfigFileSaysWhereAndHow: without a config file each command that
// needs one says where it looked, where that path came from (the default,
// --config or VFLAG_CONFIG) and how to get one (--config, vflag
// example-config, the real host's example).
func TestNoConfigFileSaysWhereAndHow(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "vflag.yaml")
	for _, tt := range []struct {
		name string
		args []string
		env  string
		from string
	}{
		{"--config", []string{"--config", missing, "plan"}, "", "(from --config)"},
		{"VFLAG_CONFIG", []string{"status"}, missing, "(from VFLAG_CONFIG)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("VFLAG_CONFIG", tt.env)
			}
			var out, errb bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errb)
			msg := errb.String()
			if code != 1 {
				t.Errorf("exit %d", code)
			}
			for _, want := range []string{"no config file at " + missing + " " + tt.from, "--config FILE", "vflag example-config", "/usr/share/doc/vflag/examples/vflag.yaml"} {
				if !strings.Contains(msg, want) {
					t.Errorf("lacks %q:\n%s", want, msg)
				}
			}
		})
	}
	// The default path, as a fresh host has it.
	err := (&app{v: newViper()}).noConfig(filepath.Join(t.TempDir(), "absent.yaml"))
	if !strings.Contains(err.Error(), "(the default; --config FILE or VFLAG_CONFIG names another)") {
		t.Errorf("default: %v", err)
	}
}
