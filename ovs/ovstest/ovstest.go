// Package ovstest runs a real, private Open vSwitch (ovsdb-server plus
// ovs-vswitchd) for tests.
//
// Each Server lives in its own temporary directory and its own network
// namespace, so tests may run several instances side by side. Tests that use
// it need root (network namespaces, tap devices) and the Open vSwitch binaries
// (Debian: openvswitch-switch); a missing binary or missing root is a test
// failure, never a skip. Call Main from TestMain to fail fast with one clear
// message:
//
//	func TestMain(m *testing.M) { ovstest.Main(m) }
//
// Bridges in tests must use datapath_type=netdev: the userspace datapath
// needs no openvswitch kernel module.
package ovstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/vflag/vflag/internal/testbed"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// SchemaPath is the Open_vSwitch schema the database is created from.
const SchemaPath = "/usr/share/openvswitch/vswitch.ovsschema"

// Binaries the harness needs.
var binaries = []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ip"}

// startTimeout bounds every wait of the harness (daemon start, vsctl calls).
const startTimeout = 10 * time.Second

var nsCounter atomic.Int64

// Server is one running ovsdb-server + ovs-vswitchd pair.
type Server struct {
	tb      testbed.TB
	dir     string
	netns   string // name under /run/netns
	sock    string
	db      *daemon
	vswitch *daemon
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been reaped
	err  error         // Wait's result, valid after done
	log  string
}

// Main checks the prerequisites once (root, Open vSwitch binaries, schema)
// and then runs the tests. Use it from TestMain.
func Main(m *testing.M) {
	if err := Precheck(); err != nil {
		fmt.Fprintf(os.Stderr, "ovstest: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// Precheck reports why Start cannot work here (not root, binary or schema
// missing), or nil.
func Precheck() error {
	var missing []string
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing binaries %s (install openvswitch-switch and iproute2)", strings.Join(missing, ", "))
	}
	if _, err := os.Stat(SchemaPath); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("tests need root (network namespaces for ovs-vswitchd)")
	}
	return nil
}

// Start runs ovsdb-server and ovs-vswitchd in a fresh directory and network
// namespace and stops them when the test ends. It returns once ovs-vswitchd
// has applied its first configuration.
func Start(tb testbed.TB) *Server {
	tb.Helper()
	return start(tb, "")
}

// StartNetns is Start with ovs-vswitchd in the network namespace called
// name (/run/netns/name), so that a config can name it before it exists
// (sim.mirror_netns; internal/tools/simhost). A namespace of that name that
// no process is in is left over from a run that was killed: it is deleted
// first. One that a process is in is refused.
func StartNetns(tb testbed.TB, name string) *Server {
	tb.Helper()
	if name == "" || strings.ContainsAny(name, "/ ") || name == "." || name == ".." {
		tb.Fatalf("ovstest: bad network namespace name %q", name)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err == nil {
		out, err := exec.Command("ip", "netns", "pids", name).CombinedOutput()
		if err != nil {
			tb.Fatalf("ovstest: ip netns pids %s: %v: %s", name, err, out)
		}
		if pids := strings.Fields(string(out)); len(pids) > 0 {
			tb.Fatalf("ovstest: network namespace %s exists and processes run in it (pids %s): another ovs-vswitchd? Stop it, or name another namespace", name, strings.Join(pids, " "))
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			tb.Fatalf("ovstest: ip netns del %s (left over, no process in it): %v: %s", name, err, out)
		}
		tb.Logf("ovstest: deleted network namespace %s, left over without a process in it", name)
	}
	return start(tb, name)
}

func start(tb testbed.TB, netns string) *Server {
	tb.Helper()
	if err := Precheck(); err != nil {
		tb.Fatalf("ovstest: %v", err)
	}
	dir := tb.TempDir()
	// Unix socket paths (db.sock, <bridge>.mgmt) must fit in sun_path (108
	// bytes); a long TMPDIR or test name would overflow it.
	if len(dir) > 70 {
		d, err := os.MkdirTemp("/tmp", "ovst")
		if err != nil {
			tb.Fatalf("ovstest: %v", err)
		}
		tb.Cleanup(func() { _ = os.RemoveAll(d) })
		dir = d
	}
	reapOnce.Do(reapStaleNetns)
	if netns == "" {
		netns = fmt.Sprintf("ovstest-%d-%d", os.Getpid(), nsCounter.Add(1))
	}
	s := &Server{
		tb:    tb,
		dir:   dir,
		netns: netns,
		sock:  filepath.Join(dir, "db.sock"),
	}
	if out, err := exec.Command("ip", "netns", "add", s.netns).CombinedOutput(); err != nil {
		tb.Fatalf("ovstest: ip netns add %s: %v: %s", s.netns, err, out)
	}
	// Cleanups run last-in first-out: the namespace goes after the daemons.
	tb.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", s.netns).CombinedOutput(); err != nil {
			tb.Errorf("ovstest: ip netns del %s: %v: %s", s.netns, err, out)
		}
	})
	if err := s.start(); err != nil {
		s.dumpLogs()
		tb.Fatalf("ovstest: %v", err)
	}
	return s
}

func (s *Server) start() error {
	dbFile := filepath.Join(s.dir, "conf.db")
	if out, err := exec.Command("ovsdb-tool", "create", dbFile, SchemaPath).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool create: %v: %s", err, out)
	}
	var err error
	s.db, err = s.spawn("ovsdb-server", dbFile,
		"--remote=punix:"+s.sock,
		"--pidfile="+filepath.Join(s.dir, "ovsdb-server.pid"),
		"--unixctl="+filepath.Join(s.dir, "ovsdb.ctl"),
		"--log-file="+filepath.Join(s.dir, "ovsdb-server.log"),
		"--no-chdir", "-vconsole:off")
	if err != nil {
		return err
	}
	s.tb.Cleanup(func() { s.stop(s.db) })
	if err := s.waitSocket(); err != nil {
		return err
	}
	if out, err := s.Vsctl("--no-wait", "init"); err != nil {
		return fmt.Errorf("ovs-vsctl init: %v: %s", err, out)
	}
	if err := s.startVswitchd(); err != nil {
		return err
	}
	// A write without --no-wait returns only after ovs-vswitchd has applied
	// it (cur_cfg caught up with next_cfg): the switch is up.
	if out, err := s.Vsctl("set", "Open_vSwitch", ".", "external_ids:ovstest=ready"); err != nil {
		return fmt.Errorf("waiting for ovs-vswitchd: %v: %s", err, out)
	}
	return nil
}

func (s *Server) startVswitchd() error {
	var err error
	s.vswitch, err = s.spawn("ovs-vswitchd", "unix:"+s.sock,
		"--pidfile="+filepath.Join(s.dir, "ovs-vswitchd.pid"),
		"--unixctl="+filepath.Join(s.dir, "ovs-vswitchd.ctl"),
		"--log-file="+filepath.Join(s.dir, "ovs-vswitchd.log"),
		"--no-chdir", "-vconsole:off")
	if err != nil {
		return err
	}
	d := s.vswitch
	s.tb.Cleanup(func() { s.stop(d) })
	return nil
}

// spawn starts a daemon in the foreground (no --detach) inside the network
// namespace, so the harness owns its pid and reaps it.
func (s *Server) spawn(name string, args ...string) (*daemon, error) {
	out, err := os.Create(filepath.Join(s.dir, name+".out"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = out.Close() }()
	cmd := exec.Command("ip", append([]string{"netns", "exec", s.netns, name}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	// Per-instance run/log/db dirs: ovs-vswitchd puts <bridge>.mgmt sockets in
	// OVS_RUNDIR, which would collide between instances.
	cmd.Env = append(os.Environ(),
		"OVS_RUNDIR="+s.dir, "OVS_LOGDIR="+s.dir, "OVS_DBDIR="+s.dir, "OVS_SYSCONFDIR="+s.dir)
	// Die with the test binary, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{}), log: filepath.Join(s.dir, name+".log")}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// stop ends a daemon this harness started: SIGTERM, then SIGKILL after 3 s.
func (s *Server) stop(d *daemon) {
	if d == nil {
		return
	}
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
	if s.tb.Failed() {
		s.dumpLog(d)
	}
}

func (s *Server) waitSocket() error {
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.Dial("unix", s.sock)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-s.db.done:
			return fmt.Errorf("ovsdb-server exited: %v", s.db.err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ovsdb-server socket %s: %w", s.sock, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Server) dumpLogs() {
	for _, d := range []*daemon{s.db, s.vswitch} {
		if d != nil {
			s.dumpLog(d)
		}
	}
}

func (s *Server) dumpLog(d *daemon) {
	for _, f := range []string{d.log, filepath.Join(s.dir, d.name+".out")} {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		if len(b) > 8192 {
			b = b[len(b)-8192:]
		}
		s.tb.Logf("ovstest: %s:\n%s", f, b)
	}
}

var reapOnce sync.Once

// reapStaleNetns deletes namespaces this package made in test processes that
// no longer exist (a test binary killed before its cleanups ran). Its
// daemons died with it (Pdeathsig); the named namespace would stay.
func reapStaleNetns() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "ovstest-")
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}

// Endpoint is the OVSDB endpoint, "unix:<dir>/db.sock".
func (s *Server) Endpoint() string { return "unix:" + s.sock }

// Dir is the instance's directory (database, sockets, logs).
func (s *Server) Dir() string { return s.dir }

// Netns is the path of the network namespace ovs-vswitchd runs in
// (/run/netns/<name>), usable with netns.GetFromPath and nsenter --net=.
func (s *Server) Netns() string { return filepath.Join("/run/netns", s.netns) }

// NetnsName is the namespace's name for `ip netns exec <name>`.
func (s *Server) NetnsName() string { return s.netns }

// Exec runs a command inside the server's network namespace and returns its
// combined output.
func (s *Server) Exec(name string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", s.netns, name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// AddVeth creates a veth pair name<->peer in the server's namespace and sets
// both ends up, so that ovs-vswitchd can open name as a port.
func (s *Server) AddVeth(name, peer string) {
	s.tb.Helper()
	if _, err := s.Exec("ip", "link", "add", name, "type", "veth", "peer", "name", peer); err != nil {
		s.tb.Fatalf("ovstest: %v", err)
	}
	for _, n := range []string{name, peer} {
		if _, err := s.Exec("ip", "link", "set", n, "up"); err != nil {
			s.tb.Fatalf("ovstest: %v", err)
		}
	}
}

// StopVswitchd stops ovs-vswitchd (the database keeps running), for tests of
// behaviour without a switch applying the configuration.
func (s *Server) StopVswitchd() { s.stop(s.vswitch) }

// Vsctl runs ovs-vsctl against this server and returns its standard output.
// Without --no-wait, writes return only after ovs-vswitchd applied them.
func (s *Server) Vsctl(args ...string) (string, error) {
	full := append([]string{"--db=" + s.Endpoint(), "--timeout=" + strconv.Itoa(int(startTimeout/time.Second))}, args...)
	cmd := exec.Command("ovs-vsctl", full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ovs-vsctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// MustVsctl is Vsctl that fails the test on error.
func (s *Server) MustVsctl(args ...string) string {
	s.tb.Helper()
	out, err := s.Vsctl(args...)
	if err != nil {
		s.tb.Fatalf("ovstest: %v", err)
	}
	return out
}

// OwnerKey is the external_ids key Dump shows as owner (vflag's ownership mark).
const OwnerKey = "vflag-owner"

// Dump renders the state vflag may touch, deterministically and without
// UUIDs, for comparing a baseline with a later state:
//
//	other_config {hw-offload="true"}
//	bridge "br0" datapath_type="netdev" owner=""
//	  port "br0" tag=- owner=""
//	    interface "br0" type="internal"
//
// Bridges, ports and interfaces are sorted by name; a port appears under the
// bridge that holds it. Columns ovs-vswitchd writes (ofport, status, cur_cfg)
// are left out so the dump does not race with the switch.
func (s *Server) Dump() string {
	s.tb.Helper()
	d, err := s.dump()
	if err != nil {
		s.tb.Fatalf("ovstest: dump: %v", err)
	}
	return d
}

type row map[string]any

func (s *Server) dump() (string, error) {
	out, err := s.Vsctl("--format=json", "--data=json",
		"--columns=other_config,external_ids", "list", "Open_vSwitch",
		"--", "--columns=_uuid,name,datapath_type,ports,external_ids,fail_mode,other_config", "list", "Bridge",
		"--", "--columns=_uuid,name,tag,vlan_mode,trunks,interfaces,external_ids", "list", "Port",
		"--", "--columns=_uuid,name,type,mtu_request,options,external_ids", "list", "Interface",
		"--", "--columns=private_key,certificate,ca_cert", "list", "SSL")
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var tables [5][]row
	for i := range tables {
		var t struct {
			Headings []string `json:"headings"`
			Data     [][]any  `json:"data"`
		}
		if err := dec.Decode(&t); err != nil {
			return "", fmt.Errorf("parse ovs-vsctl output %d: %w", i, err)
		}
		for _, d := range t.Data {
			r := row{}
			for j, h := range t.Headings {
				if j < len(d) {
					r[h] = d[j]
				}
			}
			tables[i] = append(tables[i], r)
		}
	}
	ports := map[string]row{}
	for _, p := range tables[2] {
		ports[uuidOf(p["_uuid"])] = p
	}
	ifaces := map[string]row{}
	for _, i := range tables[3] {
		ifaces[uuidOf(i["_uuid"])] = i
	}

	var b strings.Builder
	for _, o := range tables[0] {
		fmt.Fprintf(&b, "other_config %s\n", mapString(o["other_config"]))
		// OVN's chassis settings, where set (the server's own ready mark left out).
		if ids := without(mapOf(o["external_ids"]), "ovstest"); len(ids) > 0 {
			fmt.Fprintf(&b, "external_ids %s\n", sortedMap(ids))
		}
	}
	for _, r := range tables[4] { // an OVN chassis's ssl: files, where set
		fmt.Fprintf(&b, "ssl private_key=%q certificate=%q ca_cert=%q\n", str(r["private_key"]), str(r["certificate"]), str(r["ca_cert"]))
	}
	bridges := tables[1]
	sort.Slice(bridges, func(i, j int) bool { return str(bridges[i]["name"]) < str(bridges[j]["name"]) })
	for _, br := range bridges {
		extra := ""
		if m := setOf(br["fail_mode"]); len(m) == 1 { // an integration bridge's: only where set
			extra += " fail_mode=" + str(m[0])
		}
		if o := mapOf(br["other_config"]); len(o) > 0 {
			extra += " other_config=" + sortedMap(o)
		}
		fmt.Fprintf(&b, "bridge %q datapath_type=%q owner=%q%s\n", str(br["name"]), str(br["datapath_type"]), owner(br), extra)
		var ps []row
		for _, u := range setOf(br["ports"]) {
			if p, ok := ports[uuidOf(u)]; ok {
				ps = append(ps, p)
			} else {
				fmt.Fprintf(&b, "  port <dangling %s>\n", uuidOf(u))
			}
		}
		sort.Slice(ps, func(i, j int) bool { return str(ps[i]["name"]) < str(ps[j]["name"]) })
		for _, p := range ps {
			tag := "-"
			if t := setOf(p["tag"]); len(t) == 1 {
				tag = fmt.Sprint(t[0])
			}
			// vlan_mode and trunks only where set (most ports have neither).
			extra := ""
			if m := setOf(p["vlan_mode"]); len(m) == 1 {
				extra += " vlan_mode=" + str(m[0])
			}
			if t := setOf(p["trunks"]); len(t) > 0 {
				var ns []int
				for _, v := range t {
					if f, ok := v.(float64); ok {
						ns = append(ns, int(f))
					}
				}
				sort.Ints(ns)
				extra += fmt.Sprintf(" trunks=%v", ns)
			}
			fmt.Fprintf(&b, "  port %q tag=%s owner=%q%s\n", str(p["name"]), tag, owner(p), extra)
			var is []row
			for _, u := range setOf(p["interfaces"]) {
				if i, ok := ifaces[uuidOf(u)]; ok {
					is = append(is, i)
				}
			}
			sort.Slice(is, func(i, j int) bool { return str(is[i]["name"]) < str(is[j]["name"]) })
			for _, i := range is {
				mtu := ""
				if m := setOf(i["mtu_request"]); len(m) == 1 {
					mtu = " mtu_request=" + str(m[0])
				}
				if o := mapOf(i["options"]); len(o) > 0 { // a tunnel's: only where set
					mtu += " options=" + mapString(i["options"])
				}
				if ids := without(mapOf(i["external_ids"]), OwnerKey); len(ids) > 0 { // OVN's bindings: only where set
					mtu += " external_ids=" + sortedMap(ids)
				}
				fmt.Fprintf(&b, "    interface %q type=%q%s\n", str(i["name"]), str(i["type"]), mtu)
			}
		}
	}
	return b.String(), nil
}

// ovs-vsctl --data=json encodes atoms as plain JSON and compound values as
// ["uuid", "..."], ["set", [...]] and ["map", [[k, v], ...]]; a set of one
// element is just the element.

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func uuidOf(v any) string {
	if a, ok := v.([]any); ok && len(a) == 2 && a[0] == "uuid" {
		return str(a[1])
	}
	return str(v)
}

func setOf(v any) []any {
	if a, ok := v.([]any); ok && len(a) == 2 && a[0] == "set" {
		if elems, ok := a[1].([]any); ok {
			return elems
		}
		return nil
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func mapOf(v any) map[string]string {
	m := map[string]string{}
	a, ok := v.([]any)
	if !ok || len(a) != 2 || a[0] != "map" {
		return m
	}
	pairs, _ := a[1].([]any)
	for _, p := range pairs {
		if kv, ok := p.([]any); ok && len(kv) == 2 {
			m[str(kv[0])] = str(kv[1])
		}
	}
	return m
}

func mapString(v any) string {
	m := mapOf(v)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func owner(r row) string { return mapOf(r["external_ids"])[OwnerKey] }

// without is m less key.
func without(m map[string]string, key string) map[string]string {
	delete(m, key)
	return m
}

// sortedMap is {k="v", ...} with the keys sorted.
func sortedMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
