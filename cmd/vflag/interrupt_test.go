package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/testbed"
)

// ptyRun is vflag (the test binary running main) on a pseudo-terminal of
// its own, as an operator's shell starts it: Ctrl-C typed on the terminal
// reaches it as SIGINT from the line discipline.
type ptyRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan error
	// drained is closed when the reader has read all the terminal's
	// output (EIO on the master once the last slave is closed).
	drained chan struct{}
}

func startOnPTY(t *testing.T, args ...string) *ptyRun {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = slave.Close()
	p := &ptyRun{t: t, cmd: cmd, master: master, done: make(chan error, 1), drained: make(chan struct{})}
	go func() {
		defer close(p.drained)
		buf := make([]byte, 4096)
		for {
			k, err := master.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:k])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = master.Close() })
	return p
}

func (p *ptyRun) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// ctrlC types Ctrl-C on the terminal.
func (p *ptyRun) ctrlC() {
	p.t.Helper()
	if _, err := p.master.Write([]byte{0x03}); err != nil {
		p.t.Fatal(err)
	}
}

// waitFor polls cond (bounded, for a hung child), failing with the output.
func (p *ptyRun) waitFor(what string, cond func() bool) {
	p.t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	p.t.Fatalf("never: %s\noutput:\n%s", what, p.output())
}

func (p *ptyRun) exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

func (p *ptyRun) exitCode() int {
	p.t.Helper()
	p.waitFor("vflag exits", p.exited)
	// What vflag wrote last may still be in the terminal: read it all
	// before anyone looks at the output.
	select {
	case <-p.drained:
	case <-time.After(10 * time.Second):
		p.t.Errorf("the terminal's output was not read to its end 10 s after vflag exited")
	}
	err := <-p.done
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return 0
}

// TestCtrlCDuringUp: Ctrl-C on the terminal during a long step (an eswitch
// mode change of 3 s) is acknowledged at once, while the step still runs,
// with what happens next; the run then rolls back and says so, and the
// host is as before. A second Ctrl-C stops the rollback: the journal keeps
// what is left, and down cleans up.
func TestCtrlCDuringUp(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	slow := strings.Replace(exampleConfig, "mode_change: 20ms", "mode_change: 3s", 1)
	if slow == exampleConfig {
		t.Fatal("example config has no mode_change latency")
	}
	b := newBed(t, d, slow)
	b.initSim()
	base := b.dump()
	args := []string{"--config", b.config, "--sim", b.simDir, "--state-dir", b.state, "up"}
	// inModeStep: the journal holds the mode change, written ahead of it.
	inModeStep := func() bool {
		raw, _ := os.ReadFile(filepath.Join(b.state, "journal.json"))
		return bytes.Contains(raw, []byte(`"kind": "eswitch.mode"`)) || bytes.Contains(raw, []byte(`"kind":"eswitch.mode"`))
	}

	t.Run("once: acknowledged, rolled back", func(t *testing.T) {
		p := startOnPTY(t, args...)
		p.waitFor("the eswitch mode step starts", inModeStep)
		p.ctrlC()
		const ack = "vflag: interrupt: finishing the current step, then rolling back this run's changes"
		p.waitFor("the interrupt is acknowledged", func() bool { return strings.Contains(p.output(), ack) })
		if p.exited() {
			t.Errorf("vflag had exited when the acknowledgement arrived: not at once\n%s", p.output())
		}
		if code := p.exitCode(); code != 1 {
			t.Errorf("exit %d, want 1\n%s", code, p.output())
		}
		out := p.output()
		for _, want := range []string{"vflag up: interrupted: applied ", "rolled back ", "interrupted before "} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "vflag up: changed ") {
			t.Errorf("a rolled-back run reports %q:\n%s", "changed N step(s)", out)
		}
		if got := b.dump(); got != base {
			t.Errorf("after the rollback the host differs:\n%s", testbed.DiffText(base, got))
		}
	})

	t.Run("down: the interrupt says down's next step", func(t *testing.T) {
		b.mustVflag(0, "up")
		downArgs := append(append([]string{}, args[:len(args)-1]...), "down")
		// inUndo: the bridge's entry, undone before the eswitch mode's,
		// has left the journal.
		inUndo := func() bool {
			raw, err := os.ReadFile(filepath.Join(b.state, "journal.json"))
			return err == nil && !bytes.Contains(raw, []byte(`ovs.bridge`))
		}
		p := startOnPTY(t, downArgs...)
		p.waitFor("down's undo steps run", inUndo)
		p.ctrlC()
		const ack = "vflag: interrupt: stopping after the current undo step"
		p.waitFor("the interrupt is acknowledged with down's message", func() bool { return strings.Contains(p.output(), ack) })
		p.exitCode()
		b.mustVflag(0, "down")
		if got := b.dump(); got != base {
			t.Errorf("after down: the host differs:\n%s", testbed.DiffText(base, got))
		}
	})

	t.Run("twice: the rollback stops, down cleans up", func(t *testing.T) {
		p := startOnPTY(t, args...)
		p.waitFor("the eswitch mode step starts", inModeStep)
		p.ctrlC()
		p.waitFor("the first interrupt is acknowledged", func() bool { return strings.Contains(p.output(), "vflag: interrupt:") })
		p.ctrlC()
		p.waitFor("the second interrupt is acknowledged", func() bool {
			return strings.Contains(p.output(), "vflag: second interrupt: stopping after the current undo step")
		})
		if code := p.exitCode(); code != 1 {
			t.Errorf("exit %d, want 1\n%s", code, p.output())
		}
		if out := p.output(); !strings.Contains(out, "rollback stopped by a second interrupt") || !strings.Contains(out, "vflag down cleans up") {
			t.Errorf("output does not say the rollback stopped and what to do:\n%s", out)
		}
		if len(b.journalEntries()) == 0 {
			t.Fatal("the stopped rollback left no journal entries: nothing for down to clean up")
		}
		b.mustVflag(0, "down")
		if got := b.dump(); got != base {
			t.Errorf("down after the stopped rollback: the host differs:\n%s", testbed.DiffText(base, got))
		}
	})
}

// TestLiveProgressOnTerminal: on a terminal, up shows the long steps while
// they run, rewritten in place: VFs created n/N with the rate, the LAG
// wait against lag_timeout. With -o json (or off a terminal: every other
// test) there is no progress line.
func TestLiveProgressOnTerminal(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	slow := strings.NewReplacer("vf_create: 2ms", "vf_create: 400ms", "lag_activation: 50ms", "lag_activation: 1500ms").Replace(exampleConfig)
	if slow == exampleConfig {
		t.Fatal("example config has no vf_create/lag_activation latency")
	}
	b := newBed(t, d, slow)
	b.initSim()
	args := []string{"--config", b.config, "--sim", b.simDir, "--state-dir", b.state}
	p := startOnPTY(t, append(args, "up")...)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("up on a terminal: exit %d\n%s", code, p.output())
	}
	out := p.output()
	for _, re := range []string{
		`\r\x1b\[Kpci/0000:61:00\.[01]: VFs [1-3]/4 \([0-9]+/s, about [0-9.]+m?s left\)`,
		`\r\x1b\[K[^\r]*lag0: waiting for the hardware LAG on 0000:61:00\.0: [0-9.]+m?s of 30s`,
		`\r\x1b\[K\[apply\] lag0: sriov\.bind/`, // the progress line erased before a step's line (its group first)
		`vflag up: changed [0-9]+ step\(s\)`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("terminal output lacks %q:\n%q", re, out)
		}
	}
	b.mustVflag(0, "down")
	p = startOnPTY(t, append(args, "up", "-o", "json")...)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("up -o json on a terminal: exit %d\n%s", code, p.output())
	}
	if out := p.output(); strings.Contains(out, "\x1b[K") || strings.Contains(out, "VFs 1/4") {
		t.Errorf("-o json on a terminal has a progress line:\n%q", out)
	}
	b.mustVflag(0, "down")
}

// TestLogLineAboveTheLiveLine: a log line written while a progress line is
// drawn erases it, goes on a line of its own, and the progress is drawn
// again below it.
func TestLogLineAboveTheLiveLine(t *testing.T) {
	var buf bytes.Buffer
	a := &app{stderr: &buf}
	a.live = report.NewLive(&buf)
	a.live.Set("vfs/pci/0000:61:00.0", "pci/0000:61:00.0: VFs 2/4")
	if _, err := (logWriter{a}).Write([]byte("level=WARN msg=waiting\n")); err != nil {
		t.Fatal(err)
	}
	want := "\r\x1b[Kpci/0000:61:00.0: VFs 2/4" + "\r\x1b[K" + "level=WARN msg=waiting\n" + "\r\x1b[Kpci/0000:61:00.0: VFs 2/4"
	if got := buf.String(); got != want {
		t.Errorf("terminal got %q, want %q", got, want)
	}
	buf.Reset()
	a.live = nil
	_, _ = (logWriter{a}).Write([]byte("level=INFO msg=x\n"))
	if got := buf.String(); got != "level=INFO msg=x\n" {
		t.Errorf("without a live line: %q", got)
	}
}
