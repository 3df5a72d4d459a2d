package pipeline

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
)

// TestBondFlowAPIFromConfiguredLog: up reads what ovs-vswitchd said of the
// bond's tc flow API in the log the config's ovs_log names; a log it
// cannot read is said once per run (the check would be silent otherwise),
// never taken as "no flow API".
func TestBondFlowAPIFromConfiguredLog(t *testing.T) {
	dir := t.TempDir()
	write := func(name, line string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("2026-11-26T01:00:00.000Z|00042|netdev_offload|INFO|"+line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, log   string
		wantMissing bool
		wantWarn    int
	}{
		{"no flow API", write("none.log", "bond0: No suitable flow API found."), true, 0},
		{"linux_tc", write("tc.log", "bond0: Assigned flow API 'linux_tc'."), false, 0},
		{"unreadable", filepath.Join(dir, "absent", "ovs-vswitchd.log"), false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := &config.Config{OVSLog: tc.log}
			cfg.ApplyDefaults()
			e := New(cfg, host.New(nil, nil, "", ""), slog.New(slog.NewTextHandler(&logs, nil)))
			b := &bondReAdd{bridge: "br-lag", bond: "bond0"}
			for range 2 { // as the plan pass and the forward pass ask
				if got := b.missing(e); got != tc.wantMissing {
					t.Errorf("missing = %v, want %v (log %s)", got, tc.wantMissing, tc.log)
				}
			}
			if n := strings.Count(logs.String(), "ovs-vswitchd's log cannot be read"); n != tc.wantWarn {
				t.Errorf("%d warnings that the log cannot be read, want %d:\n%s", n, tc.wantWarn, logs.String())
			}
			if tc.wantWarn > 0 && !strings.Contains(logs.String(), "ovs_log="+tc.log) {
				t.Errorf("the warning does not name the log:\n%s", logs.String())
			}
		})
	}
}
