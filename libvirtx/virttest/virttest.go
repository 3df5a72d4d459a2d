// Package virttest runs a private, real libvirtd (monolithic, qemu driver)
// plus virtlogd for tests, without systemd and without disturbing a libvirtd
// of the host.
//
// Usage:
//
//	d := virttest.Start(t)          // private libvirtd + virtlogd, stopped by t.Cleanup
//	d.DefineDomain(t, "vm1")        // persistent, shut off
//	conn, err := libvirtx.Open(d.URI())
//	out, err := d.Virsh("dumpxml", "--inactive", "vm1")
//
// Start builds a temporary root with its own run, lib, log, cache and config
// directories and starts both daemons inside a private mount namespace
// (unshare --mount --propagation private) in which those directories are
// bind-mounted over /run/libvirt, /var/lib/libvirt, /var/log/libvirt,
// /var/cache/libvirt and /etc/libvirt. Only the top-level files of the host's
// /etc/libvirt are copied (never qemu/, storage/, hooks/, ...: host domains,
// networks and hooks must not leak into the test daemon); libvirtd.conf and
// qemu.conf are written by the harness:
//
//   - libvirtd.conf puts the unix sockets in the temporary directory, so the
//     test process (in the host mount namespace) reaches them with
//     qemu+unix:///system?socket=<dir>/libvirt-sock.
//   - qemu.conf sets user and group "root" (with the default libvirt-qemu
//     user every API call took 12-60 s on the build machine),
//     security_driver "none", no cgroup controllers and no namespaces, so a
//     domain a test starts leaves no trace on the host.
//
// libvirt 9.0 resolves its built-in qemu user (libvirt-qemu) before it reads
// qemu.conf, and refuses to start when that user does not exist ("Failed to
// parse user 'libvirt-qemu'"). When the host has no such user or group, the
// harness bind-mounts copies of /etc/passwd and /etc/group that add them,
// inside the private namespace only.
//
// The qemu driver probes an emulator's capabilities on its first use (about
// 4 s per binary on the build machine); Start probes qemu-system-x86_64 only.
// The harness keeps libvirt's capabilities cache between runs in
// $VIRTTEST_QEMU_CAPS_CACHE (default:
// $XDG_CACHE_HOME/vflag-virttest/qemu-capabilities, "off" disables it);
// libvirt itself checks each cached entry against the emulator binary,
// libvirtd, the kernel and the CPU, and probes again when it is stale.
// The CPUID libvirt compares names the CPU that reads it (its x2APIC id), so
// libvirtd starts on the lowest CPU the test may use, the same every time,
// and may use them all once it answers.
//
// Mount points that do not exist on the host (for example /run/libvirt when
// no libvirt daemon package is installed) are created there as empty
// directories; nothing else on the host is written. The mounts disappear
// with the namespace when both daemons exit; t.Cleanup stops them.
//
// Options: CaptureHooks installs hook scripts (/etc/libvirt/hooks/<driver>
// of the private configuration) that record each call for HookCalls;
// FakeVFs makes the daemon see PCI addresses as SR-IOV VFs, for hostdev
// networks (libvirt refuses a pool address without a physfn link).
//
// Start needs root and the binaries libvirtd, virtlogd, virsh, unshare,
// setpriv, mount, taskset and qemu-system-x86_64; when any is missing the
// test fails (it never skips).
package virttest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/vflag/vflag/internal/testbed"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Daemon is a running private libvirtd plus virtlogd.
type Daemon struct {
	base     string // private root of this daemon
	sock     string // read-write libvirt socket
	uri      string
	virsh    string
	emulator string

	cmd     *exec.Cmd
	exited  chan struct{} // closed when libvirtd has been reaped
	waitErr error
	logPath string

	socketAfter time.Duration
	readyAfter  time.Duration

	stopOnce sync.Once
}

// hostDirs are the directories libvirtd and virtlogd use, each replaced in
// the private mount namespace by a directory under the daemon's root.
var hostDirs = []struct{ host, private string }{
	{"/etc/libvirt", "etc"},
	{"/run/libvirt", "run"},
	{"/var/lib/libvirt", "lib"},
	{"/var/log/libvirt", "log"},
	{"/var/cache/libvirt", "cache"},
}

// The script runs as the namespace's first process (unshare execs it). It
// mounts the private directories, starts virtlogd (killed by the kernel when
// its parent, libvirtd, dies) and becomes libvirtd. Both get explicit pid
// files: their defaults are /run/virtlogd.pid and /run/libvirtd.pid, outside
// the private directories, where a second daemon (or the host's) collides. Arguments: base, then
// host/private pairs, "--", then the binaries.
const startScript = `set -eu
base=$1; shift
while [ "$1" != "--" ]; do
	mount --bind "$base/$2" "$1"
	shift 2
done
shift
setpriv=$1 virtlogd=$2 libvirtd=$3
if [ -f "$base/passwd" ]; then mount --bind "$base/passwd" /etc/passwd; fi
if [ -f "$base/group" ]; then mount --bind "$base/group" /etc/group; fi
"$setpriv" --pdeathsig KILL "$virtlogd" -p /run/libvirt/virtlogd.pid &
echo $! > "$base/virtlogd.pid"
exec "$libvirtd" -f /etc/libvirt/libvirtd.conf -p /run/libvirt/libvirtd.pid
`

const (
	startTimeout = 20 * time.Second  // socket plus capability probe
	probeTimeout = 120 * time.Second // first qemu capability probe on a slow CI
	virshTimeout = 60 * time.Second
	stopGrace    = 3 * time.Second
)

// Start runs a private libvirtd and virtlogd and returns once the qemu driver
// answers. t.Cleanup stops both daemons and removes their files.
func Start(t testbed.TB, opts ...Option) *Daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("virttest: a private libvirtd needs root (mount namespace, qemu driver); running as uid %d", os.Geteuid())
	}
	bins := map[string]string{}
	var missing []string
	for _, name := range []string{"libvirtd", "virtlogd", "virsh", "unshare", "setpriv", "mount", "taskset", "qemu-system-x86_64"} {
		p, err := lookBin(name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		bins[name] = p
	}
	if len(missing) > 0 {
		t.Fatalf("virttest: missing binaries %s (Debian: libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 util-linux)", strings.Join(missing, ", "))
	}

	base, err := shortTempDir()
	if err != nil {
		t.Fatalf("virttest: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("virttest: remove %s: %v", base, err)
		}
	})

	d := &Daemon{
		base:     base,
		sock:     filepath.Join(base, "sock", "libvirt-sock"),
		virsh:    bins["virsh"],
		emulator: bins["qemu-system-x86_64"],
		exited:   make(chan struct{}),
		logPath:  filepath.Join(base, "daemons.log"),
	}
	d.uri = "qemu+unix:///system?socket=" + d.sock
	if err := d.prepare(); err != nil {
		t.Fatalf("virttest: prepare %s: %v", base, err)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := d.installHooks(o.captureHooks); err != nil {
		t.Fatalf("virttest: install hooks: %v", err)
	}
	var extraMounts []string
	if len(o.fakeVFs) > 0 {
		if err := d.prepareFakeVFs(o.fakeVFs); err != nil {
			t.Fatalf("virttest: fake VFs: %v", err)
		}
		extraMounts = append(extraMounts, pciDevicesDir, fakePCIDir)
	}
	cacheDir := capsCacheDir()
	if cacheDir != "" {
		if n, err := copyXMLFiles(cacheDir, d.capsDir()); err != nil {
			t.Logf("virttest: seeding qemu capabilities cache from %s: %v", cacheDir, err)
		} else if n > 0 {
			t.Logf("virttest: seeded %d qemu capabilities cache file(s) from %s", n, cacheDir)
		}
	}

	args := []string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", startScript, "virttest", base}
	for _, hd := range hostDirs {
		args = append(args, hd.host, hd.private)
	}
	args = append(args, extraMounts...)
	args = append(args, "--", bins["setpriv"], bins["virtlogd"], bins["libvirtd"])
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("virttest: %v", err)
	}
	defer func() { _ = logf.Close() }()
	// The daemons start on one CPU, the first this process may use:
	// libvirt keeps the host's CPUID in the capabilities cache and probes
	// the emulator again (4 s) when the CPU reading it differs, and leaf
	// 0x1f gives each CPU's own x2APIC id. Once the cache is checked,
	// libvirtd's threads may run anywhere again (unpin).
	mask, err := pinCPU()
	if err != nil {
		t.Fatalf("virttest: %v", err)
	}
	d.cmd = exec.Command(bins["taskset"], append([]string{"--cpu-list", mask, bins["unshare"]}, args...)...)
	d.cmd.Stdout = logf
	d.cmd.Stderr = logf
	d.cmd.Env = daemonEnv(bins)
	// Own process group: Cleanup signals libvirtd, virtlogd and any probe
	// child by the group id. Pdeathsig: libvirtd (unshare execs sh execs
	// libvirtd, same process) dies with the test process, and virtlogd
	// with libvirtd.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	started := time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("virttest: start libvirtd: %v", err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(d.stop)

	if err := d.waitSocket(started.Add(startTimeout)); err != nil {
		t.Fatalf("virttest: %v\n%s", err, d.logTail())
	}
	d.socketAfter = time.Since(started)
	// The first use of an emulator probes it (unless the cache is valid);
	// do it here, for every emulator the host's capabilities list ("virsh
	// capabilities": qemu-system-i386 too, which the first device attach
	// probes), so that tests see uniform latencies and the cache keeps them
	// all: probed later, in a test, each cost its 4 s in every daemon.
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if _, err := d.virshCtx(ctx, "capabilities"); err != nil {
		t.Fatalf("virttest: libvirtd does not answer: %v\n%s", err, d.logTail())
	}
	d.readyAfter = time.Since(started)
	if err := unpin(d.cmd.Process.Pid); err != nil {
		t.Logf("virttest: libvirtd stays on CPU %s: %v", mask, err)
	}
	t.Logf("virttest: libvirtd socket after %v, qemu driver ready after %v (%s)",
		d.socketAfter.Round(time.Millisecond), d.readyAfter.Round(time.Millisecond), d.uri)
	if cacheDir != "" {
		if _, err := copyXMLFiles(d.capsDir(), cacheDir); err != nil {
			t.Logf("virttest: saving qemu capabilities cache to %s: %v", cacheDir, err)
		}
	}
	return d
}

// URI is the libvirt connection URI of the private daemon:
// qemu+unix:///system?socket=<dir>/libvirt-sock.
func (d *Daemon) URI() string { return d.uri }

// Dir is the daemon's private root; its subdirectories etc, run, lib, log
// and cache are /etc/libvirt, /run/libvirt, ... inside the namespace.
func (d *Daemon) Dir() string { return d.base }

// StartupTime tells how long the daemon took until its socket accepted
// connections and until the qemu driver answered (capability probe included).
func (d *Daemon) StartupTime() (socket, ready time.Duration) { return d.socketAfter, d.readyAfter }

// Virsh runs "virsh -q -c URI args..." and returns its standard output. The
// error carries the exit status and standard error.
func (d *Daemon) Virsh(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), virshTimeout)
	defer cancel()
	return d.virshCtx(ctx, args...)
}

func (d *Daemon) virshCtx(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"-q", "-c", d.uri}, args...)
	cmd := exec.CommandContext(ctx, d.virsh, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

var domainNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// DefineDomain defines a minimal persistent qemu domain (TCG, 32 MiB, one
// vCPU, no disks, no graphics) called name, without starting it.
func (d *Daemon) DefineDomain(t testbed.TB, name string) {
	t.Helper()
	d.DefineDomainMachine(t, name, "pc")
}

// DefineDomainMachine is DefineDomain with another machine type ("q35":
// libvirt gives the domain a PCIe root complex and root ports as it needs
// them).
func (d *Daemon) DefineDomainMachine(t testbed.TB, name, machine string) {
	t.Helper()
	if !domainNameRE.MatchString(name) {
		t.Fatalf("virttest: bad domain name %q", name)
	}
	if !domainNameRE.MatchString(machine) {
		t.Fatalf("virttest: bad machine type %q", machine)
	}
	doc := fmt.Sprintf(`<domain type='qemu'>
  <name>%s</name>
  <memory unit='MiB'>32</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='%s'>hvm</type>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>%s</emulator>
  </devices>
</domain>
`, name, machine, d.emulator)
	dir := filepath.Join(d.base, "domains")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("virttest: %v", err)
	}
	path := filepath.Join(dir, name+".xml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatalf("virttest: %v", err)
	}
	if _, err := d.Virsh("define", path); err != nil {
		t.Fatalf("virttest: define domain %s: %v", name, err)
	}
}

// StartDomain starts a defined domain (TCG; it boots into the BIOS and
// idles) and destroys it at cleanup; stopping the daemon also kills it.
func (d *Daemon) StartDomain(t testbed.TB, name string) {
	t.Helper()
	if _, err := d.Virsh("start", name); err != nil {
		t.Fatalf("virttest: start domain %s: %v", name, err)
	}
	t.Cleanup(func() {
		if state, err := d.Virsh("domstate", name); err == nil && strings.TrimSpace(state) == "running" {
			if _, err := d.Virsh("destroy", name); err != nil {
				t.Errorf("virttest: destroy domain %s: %v", name, err)
			}
		}
	})
}

// DomainXML returns "virsh dumpxml --inactive name": the persistent definition.
func (d *Daemon) DomainXML(t testbed.TB, name string) string {
	t.Helper()
	out, err := d.Virsh("dumpxml", "--inactive", name)
	if err != nil {
		t.Fatalf("virttest: %v", err)
	}
	return out
}

// prepare builds the private directories and the daemons' configuration.
func (d *Daemon) prepare() error {
	for _, hd := range hostDirs {
		if err := os.MkdirAll(filepath.Join(d.base, hd.private), 0o755); err != nil {
			return err
		}
		// The host needs the mount point; an existing one is left alone.
		if _, err := os.Stat(hd.host); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(hd.host, 0o755); err != nil {
				return fmt.Errorf("create mount point: %w", err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(d.base, "sock"), 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(d.capsDir(), 0o755); err != nil {
		return err
	}
	etc := filepath.Join(d.base, "etc")
	// The package defaults: top-level files only (no domains, networks,
	// storage pools, nwfilters or hooks of the host).
	entries, err := os.ReadDir("/etc/libvirt")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/etc/libvirt", e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(etc, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	libvirtdConf := fmt.Sprintf(`# written by virttest
unix_sock_dir = %q
unix_sock_rw_perms = "0700"
unix_sock_ro_perms = "0700"
unix_sock_admin_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:stderr"
`, filepath.Join(d.base, "sock"))
	// No cgroups and no per-domain /dev namespace: a domain a test starts
	// must not create cgroups on the host.
	qemuConf := `# written by virttest
user = "root"
group = "root"
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
`
	for name, body := range map[string]string{"libvirtd.conf": libvirtdConf, "qemu.conf": qemuConf} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return d.prepareAccounts()
}

// libvirt 9.0's qemu driver resolves its compiled-in user and group before
// it reads qemu.conf; Debian's are libvirt-qemu.
const qemuAccount = "libvirt-qemu"

func (d *Daemon) prepareAccounts() error {
	_, uerr := user.Lookup(qemuAccount)
	_, gerr := user.LookupGroup(qemuAccount)
	if uerr == nil && gerr == nil {
		return nil
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return err
	}
	group, err := os.ReadFile("/etc/group")
	if err != nil {
		return err
	}
	id := freeID(passwd, group)
	if gerr != nil {
		group = appendLine(group, fmt.Sprintf("%s:x:%d:", qemuAccount, id))
	}
	gid := id
	if gerr == nil {
		if g, err := user.LookupGroup(qemuAccount); err == nil {
			if n, err := strconv.Atoi(g.Gid); err == nil {
				gid = n
			}
		}
	}
	if uerr != nil {
		passwd = appendLine(passwd, fmt.Sprintf("%s:x:%d:%d:virttest:/var/lib/libvirt:/usr/sbin/nologin", qemuAccount, id, gid))
	}
	if err := os.WriteFile(filepath.Join(d.base, "passwd"), passwd, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d.base, "group"), group, 0o644)
}

// freeID returns an id used neither as uid nor as gid.
func freeID(passwd, group []byte) int {
	used := map[int]bool{}
	for _, f := range [][]byte{passwd, group} {
		sc := bufio.NewScanner(bytes.NewReader(f))
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			for _, i := range []int{2, 3} {
				if i < len(fields) {
					if n, err := strconv.Atoi(fields[i]); err == nil {
						used[n] = true
					}
				}
			}
		}
	}
	id := 64055
	for used[id] {
		id++
	}
	return id
}

func appendLine(b []byte, line string) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return append(b, line+"\n"...)
}

func (d *Daemon) capsDir() string {
	return filepath.Join(d.base, "cache", "qemu", "capabilities")
}

// waitSocket polls (every 5 ms, bounded) until the socket accepts a
// connection or libvirtd exits.
func (d *Daemon) waitSocket(deadline time.Time) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.DialTimeout("unix", d.sock, time.Second); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-d.exited:
			return fmt.Errorf("libvirtd exited before its socket appeared: %v", d.waitErr)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("libvirtd socket %s not ready after %v", d.sock, startTimeout)
		}
	}
}

// stop terminates the daemons' process group (libvirtd, virtlogd, probes):
// SIGTERM, then SIGKILL after a grace period.
func (d *Daemon) stop() {
	d.stopOnce.Do(func() {
		pgid := d.cmd.Process.Pid
		vl := d.virtlogdPID()
		// qemu processes of started domains run in their own session,
		// outside the group: kill them by the pid files libvirtd keeps.
		d.killDomains()
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-d.exited
		}
		// virtlogd is not our child: it was reparented when libvirtd
		// exited. It got SIGTERM with the group and SIGKILL through
		// its parent-death signal; make sure it is gone.
		if vl > 0 {
			deadline := time.Now().Add(stopGrace)
			for alive(vl) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if alive(vl) {
				_ = syscall.Kill(vl, syscall.SIGKILL)
			}
		}
	})
}

func (d *Daemon) killDomains() {
	files, _ := filepath.Glob(filepath.Join(d.base, "run", "qemu", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.Contains(cmdline, []byte("qemu")) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		deadline := time.Now().Add(stopGrace)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func (d *Daemon) virtlogdPID() int {
	b, err := os.ReadFile(filepath.Join(d.base, "virtlogd.pid"))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}

// alive tells whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

func (d *Daemon) logTail() string {
	b, _ := os.ReadFile(d.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "daemon log (" + d.logPath + "):\n" + strings.Join(lines, "\n")
}

func lookBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func daemonEnv(bins map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LIBVIRT_") || strings.HasPrefix(kv, "VIRSH_") || strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "LC_ALL=") {
			continue
		}
		env = append(env, kv)
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	return append(env, "PATH="+path, "LC_ALL=C")
}

// shortTempDir makes the daemon's root. Unix socket paths are limited to
// 107 bytes, so the root must stay short (t.TempDir embeds the test name).
func shortTempDir() (string, error) {
	parent := os.TempDir()
	if len(parent) > 40 {
		parent = "/tmp"
	}
	return os.MkdirTemp(parent, "virttest-")
}

func capsCacheDir() string {
	v := os.Getenv("VIRTTEST_QEMU_CAPS_CACHE")
	switch v {
	case "off":
		return ""
	case "":
		c, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(c, "vflag-virttest", "qemu-capabilities")
	}
	return v
}

// copyXMLFiles copies the *.xml files of src into dst (created if needed)
// where they differ, each through a temporary file and a rename so that
// concurrent test processes never see a partial file.
func copyXMLFiles(src, dst string) (int, error) {
	entries, err := os.ReadDir(src)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".xml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return n, err
		}
		if old, err := os.ReadFile(filepath.Join(dst, e.Name())); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return n, err
		}
		tmp, err := os.CreateTemp(dst, ".tmp-*")
		if err != nil {
			return n, err
		}
		_, werr := tmp.Write(b)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), filepath.Join(dst, e.Name()))
		}
		if werr != nil {
			_ = os.Remove(tmp.Name())
			return n, werr
		}
		n++
	}
	return n, nil
}
