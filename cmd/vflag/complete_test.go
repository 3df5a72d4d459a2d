package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// complete runs `vflag __complete ARGS...` (what the shell scripts call)
// and returns the candidates, one per line, without the directive line.
func complete(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"__complete"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("__complete %v: exit %d: %s", args, code, stderr.String())
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(stdout.String(), "\n") {
		if strings.HasPrefix(line, ":") { // the directive ends the list
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// TestCompletions: -o offers prometheus where it is accepted (status, and
// before the command is named), --group the config's groups (a config with
// an error elsewhere still completes; an unreadable or broken one gives
// nothing), --stage its values.
func TestCompletions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	two := write("two.yaml", "groups:\n  - {name: lag0, pfs: [ens1f0np0, ens1f1np1], numvfs: 0}\n  - name: legacy1\n    eswitch: legacy\n    pfs: [\"0000:62:00.0\"]\n")
	broken := write("broken.yaml", "groups:\n  - name: lag0\n   numvfs: 4\n")
	const texts = "text\thuman-readable\njson\tmachine-readable\n"
	const prom = "prometheus\tnode_exporter textfile metrics (status only)\n"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"status", "-o", ""}, texts + prom},
		{[]string{"status", "--output", ""}, texts + prom},
		{[]string{"-o", ""}, texts + prom},
		{[]string{"up", "-o", ""}, texts},
		{[]string{"validate", "-o", ""}, texts},
		{[]string{"up", "--stage", ""}, "all\teverything\npre\tonly what needs neither the network, OVS nor libvirt (vflag-pre.service at boot)\n"},
		{[]string{"validate", "--config", two, "--group", ""}, "lag0\tens1f0np0, ens1f1np1\nlegacy1\t0000:62:00.0\n"},
		{[]string{"--config", two, "validate", "--group", "le"}, "lag0\tens1f0np0, ens1f1np1\nlegacy1\t0000:62:00.0\n"},
		{[]string{"validate", "--config", broken, "--group", ""}, ""},
		{[]string{"validate", "--config", filepath.Join(dir, "missing.yaml"), "--group", ""}, ""},
		{[]string{"validate", "--rdma-tool", ""}, "ib_send_bw\nrping\nucmatose\nibv_rc_pingpong\n"},
		{[]string{"roce", "set", "mlx5_0", "--mode", ""}, "v1\tIB/RoCE v1\nv2\tRoCE v2\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if got := complete(t, tt.args...); got != tt.want {
				t.Fatalf("completions:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

// TestVersionCommand: `vflag version` prints what `vflag --version` does.
func TestVersionCommand(t *testing.T) {
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		outs = append(outs, stdout.String())
	}
	if want := "vflag " + version + "\n"; outs[0] != want || outs[1] != want {
		t.Fatalf("version %q, --version %q, want %q", outs[0], outs[1], want)
	}
}
