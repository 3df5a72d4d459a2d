package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readmeBlocks returns the ```sh blocks of the README section titled
// title, in order.
func readmeBlocks(t *testing.T, readme, title string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README has no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	var blocks []string
	for {
		_, after, ok := strings.Cut(rest, "\n```sh\n")
		if !ok {
			return blocks
		}
		block, tail, ok := strings.Cut(after, "\n```\n")
		if !ok {
			t.Fatalf("README section %q: unterminated block", title)
		}
		blocks = append(blocks, block)
		rest = "\n" + tail
	}
}

// syncBuf is a buffer written by a process and read by the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestReadmeSimHost runs the commands of the README section "Try it on the
// simulated host" as written, in the repository root (the fresh clone):
// the setup block, the first terminal's block in the background until it
// is ready, then the second terminal's block, each command of which must
// succeed; then Ctrl-C (SIGINT to the first terminal's process group) must
// stop the daemons and remove what simhost made.
func TestReadmeSimHost(t *testing.T) {
	start := time.Now()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(readme), "Try it on the simulated host")
	if len(blocks) != 3 {
		t.Fatalf("README section has %d sh blocks, want 3 (setup, first terminal, second terminal)", len(blocks))
	}
	// The section writes my.yaml and vflag-simhost.env into the clone:
	// keep a user's files of those names.
	for _, name := range []string{"my.yaml", "vflag-simhost.env"} {
		p := filepath.Join(root, name)
		bak := p + ".readme-test-backup"
		if err := os.Rename(p, bak); err == nil {
			t.Cleanup(func() { _ = os.Rename(bak, p) })
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(p) })
	}
	// The README's reader has no VFLAG_* set.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VFLAG_") {
			env = append(env, kv)
		}
	}
	shell := func(script string, out io.Writer) *exec.Cmd {
		cmd := exec.Command("bash", "-e", "-u", "-o", "pipefail", "-x", "-c", script)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = root, env, out, out
		return cmd
	}

	var setup bytes.Buffer
	if err := shell(blocks[0], &setup).Run(); err != nil {
		t.Fatalf("setup block: %v\n%s", err, setup.String())
	}

	var term1 syncBuf
	bg := shell(blocks[1], &term1)
	bg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- bg.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = syscall.Kill(-bg.Process.Pid, syscall.SIGINT)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(-bg.Process.Pid, syscall.SIGKILL)
			}
		}
	})
	deadline := time.After(45 * time.Second)
wait:
	for !strings.Contains(term1.String(), "simhost: ready.") {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("first terminal's block ended before it was ready: %v\n%s", err, term1.String())
		case <-deadline:
			t.Fatalf("first terminal's block not ready after 45 s:\n%s", term1.String())
		case <-time.After(100 * time.Millisecond):
			continue wait
		}
	}

	var term2 bytes.Buffer
	if err := shell(blocks[2], &term2).Run(); err != nil {
		t.Fatalf("second terminal's block: %v\n%s\nfirst terminal:\n%s", err, term2.String(), term1.String())
	}
	// The example's VF pool: planned, made, active (virsh net-info).
	for _, want := range []string{"vflag up: changed", "libvirt.network/vflag-lag0", "OK: ", "vflag down: undid"} {
		if !strings.Contains(term2.String(), want) {
			t.Errorf("second terminal's output lacks %q:\n%s", want, term2.String())
		}
	}
	if !regexp.MustCompile(`(?m)^Active:\s+yes$`).MatchString(term2.String()) {
		t.Errorf("second terminal's output shows no active VF pool network (virsh net-info):\n%s", term2.String())
	}

	// Ctrl-C in the first terminal.
	if err := syscall.Kill(-bg.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		stopped = true
		if err != nil && !strings.Contains(term1.String(), "simhost: stopping the daemons") {
			t.Errorf("first terminal after Ctrl-C: %v\n%s", err, term1.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("first terminal still running 20 s after Ctrl-C:\n%s", term1.String())
	}
	if _, err := os.Stat(filepath.Join(root, "vflag-simhost.env")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("vflag-simhost.env left after Ctrl-C: %v", err)
	}
	if _, err := os.Stat("/run/netns/vflag-sim"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("network namespace vflag-sim left after Ctrl-C: %v", err)
	}
	t.Logf("README section run in %v", time.Since(start).Round(time.Second))
	if testing.Verbose() {
		t.Logf("setup:\n%s\nfirst terminal:\n%s\nsecond terminal:\n%s", setup.String(), term1.String(), term2.String())
	}
}
