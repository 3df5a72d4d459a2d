// Package sbtest runs a real, private OVN Southbound database for tests:
// an ovsdb-server serving the Southbound schema OVN installs
// (/usr/share/ovn/ovn-sb.ovsschema; Debian: ovn-central), listening on a
// unix socket, on TCP and on SSL (127.0.0.1, ports the kernel picks), with
// a CA, a server and a client certificate made for it. Rows are written
// with ovn-sbctl (Debian: ovn-common), as an operator would.
//
// A missing binary, schema or root is a test failure, never a skip: call
// Main from TestMain.
package sbtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/ovs/ovnsb"
)

// SchemaPath is the Southbound schema the database is created from.
const SchemaPath = "/usr/share/ovn/ovn-sb.ovsschema"

var binaries = []string{"ovsdb-tool", "ovsdb-server", "ovs-appctl", "ovn-sbctl"}

// wait bounds every wait of the harness.
const wait = 10 * time.Second

// Main checks the prerequisites once and runs the tests.
func Main(m *testing.M) {
	if err := Precheck(); err != nil {
		fmt.Fprintf(os.Stderr, "sbtest: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// Precheck reports why Start cannot work here, or nil.
func Precheck() error {
	var missing []string
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing binaries %s (install openvswitch-common and ovn-common)", strings.Join(missing, ", "))
	}
	if _, err := os.Stat(SchemaPath); err != nil {
		return fmt.Errorf("the OVN Southbound schema (install ovn-central): %w", err)
	}
	return nil
}

// Server is one ovsdb-server serving an OVN_Southbound database.
type Server struct {
	tb       testbed.TB
	dir      string
	sock     string
	ctl      string
	log      string
	tcpPort  int
	sslPort  int
	tls      ovnsb.TLS
	cmd      *exec.Cmd
	done     chan struct{}
	dpOnce   sync.Once
	datapath string
	keys     int
}

// Start runs the server in a fresh directory and stops it when the test ends.
func Start(tb testbed.TB) *Server {
	tb.Helper()
	if err := Precheck(); err != nil {
		tb.Fatalf("sbtest: %v", err)
	}
	dir, err := os.MkdirTemp("/tmp", "sbt") // short: unix socket paths fit sun_path
	if err != nil {
		tb.Fatalf("sbtest: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &Server{tb: tb, dir: dir, sock: filepath.Join(dir, "sb.sock"), ctl: filepath.Join(dir, "sb.ctl"), log: filepath.Join(dir, "sb.log"), done: make(chan struct{})}
	if err := s.start(); err != nil {
		s.dumpLog()
		tb.Fatalf("sbtest: %v", err)
	}
	return s
}

func (s *Server) start() error {
	serverKey, serverCert, err := s.makePKI()
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	db := filepath.Join(s.dir, "sb.db")
	if out, err := exec.Command("ovsdb-tool", "create", db, SchemaPath).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool create: %v: %s", err, out)
	}
	s.cmd = exec.Command("ovsdb-server", db, "--remote=punix:"+s.sock,
		"--private-key="+serverKey, "--certificate="+serverCert, "--ca-cert="+s.tls.CACert,
		"--unixctl="+s.ctl, "--log-file="+s.log, "--no-chdir", "-vconsole:off")
	out, err := os.Create(filepath.Join(s.dir, "ovsdb-server.out"))
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start ovsdb-server: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	s.tb.Cleanup(s.stop)
	// The socket file exists from bind(); it answers from listen().
	if err := s.until(func() bool { return answers(s.ctl) }, "its control socket"); err != nil {
		return err
	}
	// One remote at a time: the log's "listening on port N" is the port
	// the kernel picked for the remote just added.
	if s.tcpPort, err = s.addRemote("ptcp:0:127.0.0.1", 1); err != nil {
		return err
	}
	if s.sslPort, err = s.addRemote("pssl:0:127.0.0.1", 2); err != nil {
		return err
	}
	return s.until(func() bool { _, err := s.Sbctl("--no-leader-only", "list", "SB_Global"); return err == nil }, "ovn-sbctl to answer")
}

// answers tells whether a unix socket accepts a connection.
func answers(sock string) bool {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

var listeningRE = regexp.MustCompile(`listening on port (\d+)`)

func (s *Server) addRemote(remote string, nth int) (int, error) {
	if out, err := exec.Command("ovs-appctl", "-t", s.ctl, "ovsdb-server/add-remote", remote).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("add-remote %s: %v: %s", remote, err, out)
	}
	var port int
	err := s.until(func() bool {
		b, _ := os.ReadFile(s.log)
		m := listeningRE.FindAllSubmatch(b, -1)
		if len(m) < nth {
			return false
		}
		port, _ = strconv.Atoi(string(m[nth-1][1]))
		return true
	}, remote+" to listen")
	return port, err
}

func (s *Server) until(cond func() bool, what string) error {
	deadline := time.Now().Add(wait)
	for !cond() {
		select {
		case <-s.done:
			return fmt.Errorf("ovsdb-server exited waiting for %s", what)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", wait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func (s *Server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(3 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	if s.tb.Failed() {
		s.dumpLog()
	}
}

func (s *Server) dumpLog() {
	for _, f := range []string{s.log, filepath.Join(s.dir, "ovsdb-server.out")} {
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
			s.tb.Logf("sbtest: %s:\n%s", f, b)
		}
	}
}

// Endpoint is the unix socket remote, "unix:<dir>/sb.sock".
func (s *Server) Endpoint() string { return "unix:" + s.sock }

// TCP is the TCP remote, "tcp:127.0.0.1:PORT".
func (s *Server) TCP() string { return "tcp:127.0.0.1:" + strconv.Itoa(s.tcpPort) }

// SSL is the SSL remote, "ssl:127.0.0.1:PORT"; TLS has the client's files.
func (s *Server) SSL() string { return "ssl:127.0.0.1:" + strconv.Itoa(s.sslPort) }

// TLS are the client's key, certificate and the CA certificate for SSL.
func (s *Server) TLS() *ovnsb.TLS { t := s.tls; return &t }

// Dir is the server's directory (database, sockets, log, certificates).
func (s *Server) Dir() string { return s.dir }

// Sbctl runs ovn-sbctl against the unix socket and returns its output.
func (s *Server) Sbctl(args ...string) (string, error) {
	full := append([]string{"--db=" + s.Endpoint(), "--timeout=" + strconv.Itoa(int(wait/time.Second))}, args...)
	cmd := exec.Command("ovn-sbctl", full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ovn-sbctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// MustSbctl is Sbctl that fails the test on error.
func (s *Server) MustSbctl(args ...string) string {
	s.tb.Helper()
	out, err := s.Sbctl(args...)
	if err != nil {
		s.tb.Fatalf("sbtest: %v", err)
	}
	return out
}

// AddChassis registers a chassis with one encap, as ovn-controller does
// ("ovn-sbctl chassis-add NAME TYPE IP"), and sets its hostname.
func (s *Server) AddChassis(name, encapType, ip string) {
	s.tb.Helper()
	s.MustSbctl("chassis-add", name, encapType, ip, "--", "set", "Chassis", name, "hostname="+name+".example")
}

// AddPort makes the Port_Binding of logical port lsp, unbound and with up
// false, in one datapath: what ovn-northd writes for a new logical switch
// port (ovn-controller sets up only where northd has set it).
func (s *Server) AddPort(lsp string) {
	s.tb.Helper()
	s.dpOnce.Do(func() { s.datapath = s.MustSbctl("create", "Datapath_Binding", "tunnel_key=1") })
	s.keys++
	s.MustSbctl("create", "Port_Binding", "logical_port="+lsp, "datapath="+s.datapath, "tunnel_key="+strconv.Itoa(s.keys), "up=false")
}

// Bind binds lsp to chassis ("" unbinds it) and sets its up column, as
// ovn-controller does once the port's flows are in.
func (s *Server) Bind(lsp, chassis string, up bool) {
	s.tb.Helper()
	if chassis == "" {
		s.MustSbctl("clear", "Port_Binding", lsp, "chassis", "--", "set", "Port_Binding", lsp, "up="+strconv.FormatBool(up))
		return
	}
	s.MustSbctl("lsp-bind", lsp, chassis, "--", "set", "Port_Binding", lsp, "up="+strconv.FormatBool(up))
}

// makePKI writes a CA, a server and a client key pair signed by it, as
// ovs-pki would (no host names: OVS's streams do not check them).
func (s *Server) makePKI() (serverKey, serverCert string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sbtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", err
	}
	s.tls.CACert = filepath.Join(s.dir, "cacert.pem")
	if err := writePEM(s.tls.CACert, "CERTIFICATE", caDER); err != nil {
		return "", "", err
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string, error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		t := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "sbtest " + name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, t, caCert, &k.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		kb, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return "", "", err
		}
		kp, cp := filepath.Join(s.dir, name+"-privkey.pem"), filepath.Join(s.dir, name+"-cert.pem")
		if err := writePEM(kp, "PRIVATE KEY", kb); err != nil {
			return "", "", err
		}
		return kp, cp, writePEM(cp, "CERTIFICATE", der)
	}
	if serverKey, serverCert, err = leaf("server", 2, x509.ExtKeyUsageServerAuth); err != nil {
		return "", "", err
	}
	s.tls.PrivateKey, s.tls.Certificate, err = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return serverKey, serverCert, err
}

func writePEM(path, typ string, der []byte) error {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if b == nil {
		return errors.New("pem encode")
	}
	return os.WriteFile(path, b, 0o600)
}

// Controller is a real ovn-controller run for a test against an Open
// vSwitch of ovstest and this Southbound.
type Controller struct {
	tb     testbed.TB
	runDir string
	cmd    *exec.Cmd
	done   chan struct{}
}

// ovsServer is what StartController needs of an ovstest.Server.
type ovsServer interface {
	Endpoint() string
	Dir() string
	NetnsName() string
}

// StartController runs ovn-controller (Debian: ovn-host) against the Open
// vSwitch o, in o's network namespace, with its pid file and control
// socket in a directory of its own (RunDir, what $OVN_RUNDIR names). It
// reads the Southbound's remote and its chassis settings from o's
// Open_vSwitch row, as it does on a host: set them first. It stops when
// the test ends (or at Stop).
func StartController(tb testbed.TB, o ovsServer) *Controller {
	tb.Helper()
	if _, err := exec.LookPath("ovn-controller"); err != nil {
		tb.Fatalf("sbtest: ovn-controller (install ovn-host): %v", err)
	}
	dir, err := os.MkdirTemp("/tmp", "ovnc")
	if err != nil {
		tb.Fatalf("sbtest: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &Controller{tb: tb, runDir: dir, done: make(chan struct{})}
	c.cmd = exec.Command("ip", "netns", "exec", o.NetnsName(), "ovn-controller", o.Endpoint(),
		"--pidfile="+filepath.Join(dir, "ovn-controller.pid"), "--log-file="+filepath.Join(dir, "ovn-controller.log"),
		"--no-chdir", "-vconsole:off")
	// OVS_RUNDIR: where ovs-vswitchd keeps br-int.mgmt, which
	// ovn-controller connects to; OVN_RUNDIR: its own control socket.
	c.cmd.Env = append(os.Environ(), "OVS_RUNDIR="+o.Dir(), "OVN_RUNDIR="+dir)
	out, err := os.Create(filepath.Join(dir, "ovn-controller.out"))
	if err != nil {
		tb.Fatalf("sbtest: %v", err)
	}
	defer func() { _ = out.Close() }()
	c.cmd.Stdout, c.cmd.Stderr = out, out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		tb.Fatalf("sbtest: start ovn-controller: %v", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	tb.Cleanup(c.Stop)
	deadline := time.Now().Add(wait)
	for {
		if m, _ := filepath.Glob(filepath.Join(dir, "ovn-controller.*.ctl")); len(m) > 0 && answers(m[0]) {
			return c
		}
		select {
		case <-c.done:
			c.dumpLog()
			tb.Fatalf("sbtest: ovn-controller exited")
		default:
		}
		if time.Now().After(deadline) {
			c.dumpLog()
			tb.Fatalf("sbtest: ovn-controller made no control socket in %s", wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RunDir is the controller's run directory (its pid file, control socket).
func (c *Controller) RunDir() string { return c.runDir }

// Stop stops ovn-controller (SIGTERM, then SIGKILL after 3 s). Its pid
// file stays behind, as after a crash.
func (c *Controller) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
	if c.tb.Failed() {
		c.dumpLog()
	}
}

func (c *Controller) dumpLog() {
	for _, f := range []string{filepath.Join(c.runDir, "ovn-controller.log"), filepath.Join(c.runDir, "ovn-controller.out")} {
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
			if len(b) > 8192 {
				b = b[len(b)-8192:]
			}
			c.tb.Logf("sbtest: %s:\n%s", f, b)
		}
	}
}
