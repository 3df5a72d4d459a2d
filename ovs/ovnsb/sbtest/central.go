package sbtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vflag/vflag/internal/testbed"
)

// NBSchemaPath is the Northbound schema the central's Northbound database
// is created from (Debian: ovn-central).
const NBSchemaPath = "/usr/share/ovn/ovn-nb.ovsschema"

// Central is an OVN central as an operator runs one: a Northbound
// ovsdb-server, the Southbound (a Server) and ovn-northd translating the
// one into the other, all in one private directory with unix sockets (the
// Southbound also on its TCP and SSL ports on 127.0.0.1, as Start makes
// them). Logical switches and ports are written with ovn-nbctl (Nbctl).
type Central struct {
	// SB is the Southbound database ovn-northd writes and the chassis read.
	SB     *Server
	tb     testbed.TB
	dir    string
	nbSock string
	nb     *daemon
	northd *daemon
}

// daemon is a process the harness started in the foreground and reaps.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// CentralPrecheck reports why StartCentral cannot work here, or nil.
func CentralPrecheck() error {
	if err := Precheck(); err != nil {
		return err
	}
	var missing []string
	for _, b := range []string{"ovn-northd", "ovn-nbctl", "ovn-appctl"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing binaries %s (install ovn-central and ovn-common)", strings.Join(missing, ", "))
	}
	if _, err := os.Stat(NBSchemaPath); err != nil {
		return fmt.Errorf("the OVN Northbound schema (install ovn-central): %w", err)
	}
	return nil
}

// StartCentral runs the Southbound (Start), a Northbound ovsdb-server and
// ovn-northd, and returns once ovn-northd is active (it holds the
// Northbound's lock and writes the Southbound). Everything stops when the
// test ends.
//
// Shell equivalent (DIR private):
//
//	ovsdb-tool create DIR/nb.db /usr/share/ovn/ovn-nb.ovsschema
//	ovsdb-server DIR/nb.db --remote=punix:DIR/nb.sock --unixctl=DIR/nb.ctl ...
//	ovn-northd --ovnnb-db=unix:DIR/nb.sock --ovnsb-db=unix:SBDIR/sb.sock --unixctl=DIR/northd.ctl ...
//	ovn-appctl -t DIR/northd.ctl status    # Status: active
func StartCentral(tb testbed.TB) *Central {
	tb.Helper()
	if err := CentralPrecheck(); err != nil {
		tb.Fatalf("sbtest: %v", err)
	}
	sb := Start(tb)
	dir, err := os.MkdirTemp("/tmp", "nbt") // short: unix socket paths fit sun_path
	if err != nil {
		tb.Fatalf("sbtest: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &Central{SB: sb, tb: tb, dir: dir, nbSock: filepath.Join(dir, "nb.sock")}
	if err := c.start(); err != nil {
		c.dumpLogs()
		tb.Fatalf("sbtest: central: %v", err)
	}
	return c
}

func (c *Central) start() error {
	db := filepath.Join(c.dir, "nb.db")
	if out, err := exec.Command("ovsdb-tool", "create", db, NBSchemaPath).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool create: %v: %s", err, out)
	}
	var err error
	if c.nb, err = c.spawn("ovsdb-server", db, "--remote=punix:"+c.nbSock, "--unixctl="+filepath.Join(c.dir, "nb.ctl"),
		"--log-file="+filepath.Join(c.dir, "ovsdb-server.log"), "--no-chdir", "-vconsole:off"); err != nil {
		return err
	}
	if err := c.until(c.nb, func() bool { return answers(c.nbSock) }, "the Northbound's socket"); err != nil {
		return err
	}
	ctl := filepath.Join(c.dir, "northd.ctl")
	if c.northd, err = c.spawn("ovn-northd", "--ovnnb-db="+c.NBEndpoint(), "--ovnsb-db="+c.SB.Endpoint(),
		"--unixctl="+ctl, "--log-file="+filepath.Join(c.dir, "ovn-northd.log"), "--no-chdir", "-vconsole:off"); err != nil {
		return err
	}
	return c.until(c.northd, func() bool {
		out, err := exec.Command("ovn-appctl", "-t", ctl, "status").Output()
		return err == nil && strings.Contains(string(out), "active")
	}, "ovn-northd to be active")
}

// spawn starts a daemon of the central in the foreground and stops it
// (SIGTERM, then SIGKILL after 3 s) when the test ends.
func (c *Central) spawn(name string, args ...string) (*daemon, error) {
	out, err := os.Create(filepath.Join(c.dir, name+".out"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = out.Close() }()
	d := &daemon{name: name, cmd: exec.Command(name, args...), done: make(chan struct{})}
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	c.tb.Cleanup(func() {
		select {
		case <-d.done:
			return
		default:
		}
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(3 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	})
	return d, nil
}

func (c *Central) until(d *daemon, cond func() bool, what string) error {
	deadline := time.Now().Add(wait)
	for !cond() {
		select {
		case <-d.done:
			return fmt.Errorf("%s exited waiting for %s", d.name, what)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", wait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func (c *Central) dumpLogs() {
	for _, f := range []string{"ovsdb-server.log", "ovsdb-server.out", "ovn-northd.log", "ovn-northd.out"} {
		if b, err := os.ReadFile(filepath.Join(c.dir, f)); err == nil && len(b) > 0 {
			c.tb.Logf("sbtest: central %s:\n%s", f, b)
		}
	}
}

// Dir is the central's directory (the Northbound database, sockets, logs).
func (c *Central) Dir() string { return c.dir }

// NBEndpoint is the Northbound's unix socket remote, "unix:<dir>/nb.sock".
func (c *Central) NBEndpoint() string { return "unix:" + c.nbSock }

// Nbctl runs ovn-nbctl against the Northbound and returns its output.
func (c *Central) Nbctl(args ...string) (string, error) {
	full := append([]string{"--db=" + c.NBEndpoint(), "--timeout=" + strconv.Itoa(int(wait/time.Second))}, args...)
	cmd := exec.Command("ovn-nbctl", full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ovn-nbctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// AddSwitch creates logical switch ls with logical ports lsps in the
// Northbound, as an operator does, and returns once ovn-northd has
// written their Port_Bindings to the Southbound:
//
//	ovn-nbctl --wait=sb ls-add LS -- lsp-add LS LSP1 -- lsp-add LS LSP2 ...
func (c *Central) AddSwitch(ls string, lsps ...string) error {
	args := []string{"--wait=sb", "ls-add", ls}
	for _, p := range lsps {
		args = append(args, "--", "lsp-add", ls, p)
	}
	_, err := c.Nbctl(args...)
	return err
}

// Listen makes the Southbound also listen on remote (ovsdb-server's
// passive form: punix:PATH, ptcp:PORT:ADDR) and, for punix, returns once
// the socket answers:
//
//	ovs-appctl -t DIR/sb.ctl ovsdb-server/add-remote REMOTE
func (s *Server) Listen(remote string) error {
	if out, err := exec.Command("ovs-appctl", "-t", s.ctl, "ovsdb-server/add-remote", remote).CombinedOutput(); err != nil {
		return fmt.Errorf("add-remote %s: %v: %s", remote, err, out)
	}
	if path, ok := strings.CutPrefix(remote, "punix:"); ok {
		return s.until(func() bool { return answers(path) }, remote+" to answer")
	}
	return nil
}
