package hook

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/sriov"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/ovs/ovstest"
	"github.com/vflag/vflag/teardown"
)

func TestMain(m *testing.M) { ovstest.Main(m) }

// testConfig is the example config without attachments (no libvirt here).
const testConfig = `ovsdb: unix:/var/run/openvswitch/db.sock
libvirt: qemu:///system
lag_timeout: 30s
groups:
  - name: lag0
    eswitch: switchdev
    pfs: [ens1f0np0, ens1f1np1]
    numvfs: 2
    bond: {name: bond0, mode: 802.3ad, miimon: 100}
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:10:00:00", vlan: 100}
      - {pf: 0, vf: 1, mac: "52:54:00:10:00:01", vlan: 100}
    ovs:
      bridge: br-lag
      hw_offload: true
sim:
  nics:
    - name: cx6lx
      total_vfs: 8
      pfs:
        - {pci: "0000:61:00.0", netdev: ens1f0np0}
        - {pci: "0000:61:00.1", netdev: ens1f1np1}
  latency:
    vf_create: 1ms
    mode_change: 1ms
    lag_activation: 1ms
`

const (
	domMAC   = "52:54:00:aa:00:01"
	priorMAC = "52:54:00:10:00:01" // the config's MAC of VF 1 of ens1f0np0
)

type bed struct {
	t      *testing.T
	srv    *ovstest.Server
	cfg    *config.Config
	simDir string
	state  string
	rep    string // representor of VF 1 of ens1f0np0
	uuid   string // the domain XML's <uuid> ("": none)
}

// newBed is a simulated host after up, with VF 1's representor port
// removed from the bridge (the hook must add it back).
func newBed(t *testing.T) *bed {
	b := upBed(t, testConfig)
	b.srv.MustVsctl("del-port", "br-lag", b.rep)
	return b
}

// upBed is a simulated host after up with the config text; rep is VF 1's
// representor.
func upBed(t *testing.T, text string) *bed {
	srv := ovstest.Start(t)
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(testbed.PointConfig(text, srv.Endpoint(), "qemu:///none", srv.Netns())))
	if err != nil {
		t.Fatal(err)
	}
	b := &bed{t: t, srv: srv, cfg: cfg, simDir: filepath.Join(dir, "sim"), state: filepath.Join(dir, "state")}
	h := b.host()
	defer h.Close()
	e := pipeline.New(cfg, h, nil)
	ctx := context.Background()
	gs, err := e.Preflight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j, err := teardown.OpenJournal(b.state)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Up(ctx, &teardown.Runner{Journal: j, Undo: e.Undoers()}, gs); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(); err != nil { // as apply.Up at a run's end
		t.Fatal(err)
	}
	pf, err := eswitch.ResolvePF(h.Kernel, h.FS, "ens1f0np0")
	if err != nil {
		t.Fatal(err)
	}
	reps, err := eswitch.Representors(h.Kernel, h.FS, pf)
	if err != nil || reps[1] == "" {
		t.Fatalf("representors: %v %v", reps, err)
	}
	b.rep = reps[1]
	return b
}

func (b *bed) host() *host.Host {
	b.t.Helper()
	h, err := host.Open(host.Options{SimDir: b.simDir, SimSpec: b.cfg.Sim, OVSDB: b.cfg.OVSDB, Libvirt: b.cfg.Libvirt})
	if err != nil {
		b.t.Fatal(err)
	}
	return h
}

func (b *bed) opts(op, sub string) Options { return b.optsFor("vm-a", op, sub) }

// optsFor is one hook event of a domain named name that takes VF 1 of
// ens1f0np0 (the name is in the XML too where XML can hold it).
func (b *bed) optsFor(name, op, sub string) Options {
	var esc bytes.Buffer
	if err := xml.EscapeText(&esc, []byte(name)); err != nil || strings.ContainsRune(name, 0) {
		esc.Reset()
		esc.WriteString("unnamed")
	}
	uuid := ""
	if b.uuid != "" {
		uuid = "<uuid>" + b.uuid + "</uuid>"
	}
	xml := `<domain type='kvm'><name>` + esc.String() + `</name>` + uuid + `<devices>
    <interface type='hostdev' managed='yes'>
      <mac address='` + domMAC + `'/>
      <source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x3'/></source>
    </interface>
  </devices></domain>`
	return Options{StateDir: b.state, Domain: name, Op: op, SubOp: sub, XML: strings.NewReader(xml),
		Config: func() (*config.Config, error) { return b.cfg, nil },
		Host: func(*config.Config) (*host.Host, error) {
			return host.Open(host.Options{SimDir: b.simDir, SimSpec: b.cfg.Sim, OVSDB: b.cfg.OVSDB, Libvirt: b.cfg.Libvirt})
		}}
}

// vfMAC is VF 1's MAC; hasPort tells whether its representor is on the bridge.
func (b *bed) vfMAC() string {
	h := b.host()
	defer h.Close()
	l, err := h.Kernel.Link("ens1f0np0")
	if err != nil {
		b.t.Fatal(err)
	}
	for _, v := range l.VFs {
		if v.ID == 1 {
			return v.MAC
		}
	}
	return ""
}

func (b *bed) hasPort() bool {
	out := b.srv.MustVsctl("list-ports", "br-lag")
	for _, p := range strings.Fields(out) {
		if p == b.rep {
			return true
		}
	}
	return false
}

// dir is the domain's journal directory.
func (b *bed) dir(domain string) string {
	b.t.Helper()
	d, err := Dir(b.state, domain)
	if err != nil {
		b.t.Fatal(err)
	}
	return d
}

func (b *bed) journal(domain string) []teardown.Entry {
	j, err := teardown.OpenJournal(b.dir(domain))
	if err != nil {
		b.t.Fatal(err)
	}
	return j.Entries()
}

// assertReleased: the host is back to after up (minus the port), and the
// domain's journal directory is gone.
func (b *bed) assertReleased() {
	b.t.Helper()
	if got := b.vfMAC(); got != priorMAC {
		b.t.Errorf("VF MAC after release = %s, want %s", got, priorMAC)
	}
	if b.hasPort() {
		b.t.Errorf("port %s still on br-lag after release", b.rep)
	}
	if _, err := os.Stat(b.dir("vm-a")); !os.IsNotExist(err) {
		b.t.Errorf("hook journal directory left after release: %v", err)
	}
}

// TestCrashThenRelease: prepare applies the port change but "dies" before
// marking it applied (FailAt: the entry stays pending) and refuses the
// start with the step's own failure; release undoes both the VF MAC and
// the pending port; a second release is a no-op.
func TestCrashThenRelease(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	o := b.opts("prepare", "begin")
	o.FailAt = "ovs.port/br-lag/" + b.rep
	err := Run(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "refusing to start domain vm-a") {
		t.Fatalf("prepare: err %v, want a refusal", err)
	}
	// The runner's NoRollback note is not the hook's to say: release
	// undoes the domain's journal (teardown.Cause).
	if strings.Contains(err.Error(), "no rollback") {
		t.Errorf("prepare: err %q carries the runner's no-rollback note", err)
	}
	es := b.journal("vm-a")
	if len(es) != 2 || es[0].Kind != "sriov.vfmac" || es[0].State != teardown.StateApplied ||
		es[1].Kind != "ovs.port" || es[1].State != teardown.StatePending {
		t.Fatalf("journal after the crash: %+v", es)
	}
	if got := b.vfMAC(); got != domMAC {
		t.Fatalf("VF MAC after prepare = %s, want %s", got, domMAC)
	}
	if !b.hasPort() {
		t.Fatalf("port %s not added", b.rep)
	}
	if err := Run(ctx, b.opts("release", "end")); err != nil {
		t.Fatal(err)
	}
	b.assertReleased()
	// Release twice: nothing journaled, nothing done.
	if err := Run(ctx, b.opts("release", "end")); err != nil {
		t.Fatalf("second release: %v", err)
	}
	b.assertReleased()
}

// TestReleaseAdoptsOldState: a domain prepared by a vflag before the
// per-domain journal (STATE_DIR/hook/<domain>.json, testdata/old-state.json)
// is released by this one.
func TestReleaseAdoptsOldState(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	// The host as the old hook left it: MAC set, port added by vflag.
	if err := Run(ctx, b.opts("prepare", "begin")); err != nil {
		t.Fatal(err)
	}
	if b.vfMAC() != domMAC || !b.hasPort() {
		t.Fatal("prepare did not set the MAC and add the port")
	}
	if err := os.RemoveAll(b.dir("vm-a")); err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile("testdata/old-state.json")
	if err != nil {
		t.Fatal(err)
	}
	old := strings.NewReplacer("@REP@", b.rep, "@ENDPOINT@", b.srv.Endpoint(), "vm-old", "vm-a").Replace(string(fixture))
	oldPath := filepath.Join(b.state, "hook", "vm-a.json")
	if err := os.WriteFile(oldPath, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, b.opts("release", "end")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(oldPath); !os.IsNotExist(err) {
		t.Errorf("old state file left: %v", err)
	}
	b.assertReleased()
	if err := Run(ctx, b.opts("release", "end")); err != nil {
		t.Fatalf("second release: %v", err)
	}
	b.assertReleased()
}

// TestAdoptOldStateEntries: the old records become the equivalent entries.
func TestAdoptOldStateEntries(t *testing.T) {
	state := t.TempDir()
	fixture, err := os.ReadFile("testdata/old-state.json")
	if err != nil {
		t.Fatal(err)
	}
	old := strings.NewReplacer("@REP@", "pf0vf1", "@ENDPOINT@", "unix:/x.sock").Replace(string(fixture))
	os.MkdirAll(filepath.Join(state, "hook"), 0o700)
	if err := os.WriteFile(filepath.Join(state, "hook", "vm-old.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := Dir(state, "vm-old")
	if err != nil {
		t.Fatal(err)
	}
	dj, err := openDomain(context.Background(), Options{StateDir: state}, "vm-old", dir)
	if err != nil {
		t.Fatal(err)
	}
	es := dj.j.Entries()
	dj.close(slog.New(slog.DiscardHandler))
	want := []struct{ kind, id, rec string }{
		{"sriov.vfmac", "sriov.vfmac/ens1f0np0/1", `{"pf":"ens1f0np0","vf":1,"prior":"52:54:00:10:00:01"}`},
		{"ovs.port", "ovs.port/br-lag/pf0vf1", `{"endpoint":"unix:/x.sock","port":{"owner":"lag0","bridge":"br-lag","bridge_created":false,"ports":["pf0vf1"],"hw_offload_set":false,"prior_hw_offload":null}}`},
	}
	if len(es) != len(want) {
		t.Fatalf("entries %+v", es)
	}
	for i, w := range want {
		if es[i].Kind != w.kind || es[i].ID != w.id || string(es[i].Record) != w.rec || es[i].State != teardown.StateApplied {
			t.Errorf("entry %d = %s %s %s %s, want %s %s %s applied", i, es[i].Kind, es[i].ID, es[i].Record, es[i].State, w.kind, w.id, w.rec)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "hook", "vm-old.json")); !os.IsNotExist(err) {
		t.Errorf("old state file left: %v", err)
	}
}

// TestBootGate: before up has marked this boot ready, prepare changes
// nothing: an autostarted domain is deferred (and listed for up), one
// started by hand is refused; once ready, the same start goes ahead.
func TestBootGate(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	boot := "boot-2"
	g := bootgate.Gate{Dir: b.state, BootID: func() (string, error) { return boot, nil }}
	for _, tc := range []struct {
		name      string
		autostart bool
		want      string
		deferred  []string
	}{
		{"by hand", false, "refusing to start domain vm-a: vflag has not brought the VF-LAG up in this boot yet", nil},
		{"autostart", true, "deferring the autostart of domain vm-a", []string{"vm-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := b.opts("prepare", "begin")
			o.Gate = &g
			o.Autostart = func(d string) bool { return tc.autostart && d == "vm-a" }
			err := Run(ctx, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("prepare before ready: err %v, want %q", err, tc.want)
			}
			if got := b.vfMAC(); got != priorMAC {
				t.Errorf("VF MAC changed before ready: %s", got)
			}
			if b.hasPort() {
				t.Errorf("port %s added before ready", b.rep)
			}
			if got, _ := g.Deferred(); !reflect.DeepEqual(got, tc.deferred) {
				t.Errorf("deferred = %q, want %q", got, tc.deferred)
			}
		})
	}
	if err := g.MarkReady(); err != nil {
		t.Fatal(err)
	}
	o := b.opts("prepare", "begin")
	o.Gate = &g
	if err := Run(ctx, o); err != nil {
		t.Fatalf("prepare once ready: %v", err)
	}
	if got := b.vfMAC(); got != domMAC {
		t.Errorf("VF MAC once ready = %s, want %s", got, domMAC)
	}
	boot = "boot-3" // a reboot: the mark no longer holds
	o = b.opts("prepare", "begin")
	o.Gate = &g
	o.Autostart = func(string) bool { return false }
	if err := Run(ctx, o); err == nil {
		t.Fatal("prepare after a reboot, before up: no refusal")
	}
}

// hostState renders what a domain's hook must never change for another:
// the main journal (bytes), numvfs and every VF MAC of both PFs, the
// bridge's ports, and every file under STATE_DIR outside hook/.
func (b *bed) hostState() string {
	b.t.Helper()
	var out strings.Builder
	if j, err := os.ReadFile(filepath.Join(b.state, "journal.json")); err != nil {
		fmt.Fprintf(&out, "journal: %v\n", err)
	} else {
		fmt.Fprintf(&out, "journal %d bytes %x\n", len(j), j)
	}
	h := b.host()
	defer h.Close()
	for _, pf := range []string{"ens1f0np0", "ens1f1np1"} {
		a, _, err := h.PCI.AddrOfNetdev(pf)
		if err != nil {
			b.t.Fatal(err)
		}
		n, err := h.PCI.NumVFs(sriov.Addr(a))
		if err != nil {
			b.t.Fatal(err)
		}
		l, err := h.Kernel.Link(pf)
		if err != nil {
			b.t.Fatal(err)
		}
		fmt.Fprintf(&out, "%s numvfs %d", pf, n)
		for _, v := range l.VFs {
			fmt.Fprintf(&out, " vf%d=%s", v.ID, v.MAC)
		}
		out.WriteString("\n")
	}
	fmt.Fprintf(&out, "ports %s\n", strings.Join(strings.Fields(b.srv.MustVsctl("list-ports", "br-lag")), ","))
	_ = filepath.WalkDir(b.state, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.state, p)
		if rel == "hook" || rel == "deferred" {
			return filepath.SkipDir
		}
		if rel != "." && rel != "lock" {
			fmt.Fprintf(&out, "file %s\n", rel)
		}
		return nil
	})
	return out.String()
}

// TestHostileDomainNames: the hook runs as root for whoever may create a
// domain, with the domain's name as its argument. A name that is not a plain
// path element ("..": STATE_DIR/hook/.. is STATE_DIR, whose journal is the
// host's) must neither reach the host's journal nor touch anything of
// vflag's beyond the domain's own VF, and a whole prepare, start, stopped,
// release cycle leaves the host as it was. A name with no path (too long)
// is refused at prepare and ignored at release.
func TestHostileDomainNames(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	// The representor port back on the bridge: the host as up left it.
	b.srv.MustVsctl("add-port", "br-lag", b.rep, "tag=100")
	before := b.hostState()
	events := [][2]string{{"prepare", "begin"}, {"start", "begin"}, {"started", "begin"}, {"stopped", "end"}, {"release", "end"}}
	for _, tc := range []struct {
		label, name string
		refused     string // prepare's error; "" for a name that is used
	}{
		{label: "dotdot", name: ".."},
		{label: "dot", name: "."},
		{label: "dotdot-slash", name: "../x"},
		{label: "slash", name: "a/b"},
		{label: "deep", name: "../../../../etc/vflag"},
		{label: "long", name: strings.Repeat("v", 300), refused: "name of 300 bytes is too long"},
		{label: "nul", name: "vm\x00.."},
		{label: "newline", name: "vm\n.."},
		{label: "flag-like", name: "--state-dir=/tmp"},
	} {
		t.Run(tc.label, func(t *testing.T) {
			// A release first, as libvirt runs after an aborted start: it
			// must not take the host's journal for the domain's.
			if err := Run(ctx, b.optsFor(tc.name, "release", "end")); err != nil {
				t.Fatalf("release before any prepare: %v", err)
			}
			if got := b.hostState(); got != before {
				t.Fatalf("release of a domain named %q changed the host:\n%s\nwant\n%s", tc.name, got, before)
			}
			for _, ev := range events {
				err := Run(ctx, b.optsFor(tc.name, ev[0], ev[1]))
				prep := libvirtHookPrepares(ev)
				switch {
				case prep && tc.refused != "":
					if err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "refusing to start domain") {
						t.Fatalf("%s: err %v, want a refusal with %q", ev, err, tc.refused)
					}
					if got := b.vfMAC(); got != priorMAC {
						t.Fatalf("%s of a refused domain set the VF MAC %s", ev, got)
					}
				case err != nil:
					t.Fatalf("%s: %v", ev, err)
				case prep:
					if got := b.vfMAC(); got != domMAC {
						t.Fatalf("%s: VF MAC %s, want the domain's %s", ev, got, domMAC)
					}
					dir := b.dir(tc.name)
					if filepath.Dir(dir) != filepath.Join(b.state, "hook") {
						t.Fatalf("domain %q journal directory %s is outside STATE_DIR/hook", tc.name, dir)
					}
					if len(b.journal(tc.name)) == 0 {
						t.Fatalf("%s: nothing journaled in %s", ev, dir)
					}
				}
			}
			if got := b.hostState(); got != before {
				t.Errorf("after prepare, start, stopped, release of %q the host differs:\n%s\nwant\n%s", tc.name, got, before)
			}
			if ents, _ := os.ReadDir(filepath.Join(b.state, "hook")); len(ents) != 0 {
				t.Errorf("hook directory not empty after release: %v", ents)
			}
		})
	}
}

func libvirtHookPrepares(ev [2]string) bool {
	return (ev[0] == "prepare" || ev[0] == "start") && ev[1] == "begin"
}

// TestHostileNamesDeferred: the boot gate's record of a deferred domain
// stays in STATE_DIR/deferred whatever its name, and up finds the name.
func TestHostileNamesDeferred(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	before := b.hostState()
	g := bootgate.Gate{Dir: b.state, BootID: func() (string, error) { return "boot-1", nil }}
	names := []string{"..", ".", "../x", "a/b", "vm\n1"}
	for _, n := range names {
		o := b.optsFor(n, "prepare", "begin")
		o.Gate = &g
		o.Autostart = func(string) bool { return true }
		if err := Run(ctx, o); err == nil || !strings.Contains(err.Error(), "deferring the autostart") {
			t.Fatalf("prepare %q before ready: %v", n, err)
		}
	}
	got, err := g.Deferred()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".", "..", "../x", "a/b", "vm\n1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deferred = %q, want %q", got, want)
	}
	ents, _ := os.ReadDir(filepath.Join(b.state, "deferred"))
	if len(ents) != len(names) {
		t.Errorf("deferred/ holds %d entries, want %d", len(ents), len(names))
	}
	if after := b.hostState(); after != before {
		t.Errorf("deferrals changed the host:\n%s\nwant\n%s", after, before)
	}
}

// TestUnsafeStateDir: a state directory that someone other than root could
// redirect (a parent writable by others, a link planted in it) is refused
// before the hook opens anything there.
func TestUnsafeStateDir(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	if err := os.Chmod(b.state, 0o777); err != nil {
		t.Fatal(err)
	}
	err := Run(ctx, b.opts("prepare", "begin"))
	if err == nil || !strings.Contains(err.Error(), "is writable by users other than root (mode 0777)") {
		t.Fatalf("prepare with a world-writable state dir: %v", err)
	}
	if got := b.vfMAC(); got != priorMAC {
		t.Errorf("VF MAC changed: %s", got)
	}
	if err := os.Chmod(b.state, 0o700); err != nil {
		t.Fatal(err)
	}
	// A link planted as the domain's directory by another user.
	if err := os.MkdirAll(filepath.Join(b.state, "hook"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(b.state, "hook", "vm-a")
	if err := os.Symlink(b.state, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err = Run(ctx, b.opts("prepare", "begin"))
	if err == nil || !strings.Contains(err.Error(), "vm-a is owned by uid 65534") {
		t.Fatalf("prepare with a planted link: %v", err)
	}
	if got := b.vfMAC(); got != priorMAC {
		t.Errorf("VF MAC changed: %s", got)
	}
}

// TestBootGateBeforeTheVFsExist: at boot libvirtd may autostart a domain
// before vflag-pre has made the VFs; a hostdev at the address a config
// PF's next VF will have (sriov_offset, sriov_stride) is vflag's all the
// same: deferred, not let through to a start libvirt fails moments later
// on the half-made VF. Another absent address is not vflag's.
func TestBootGateBeforeTheVFsExist(t *testing.T) {
	b := newBed(t)
	h := b.host()
	n, err := h.PCI.NumVFs(sriov.Addr("0000:61:00.0"))
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	next, ok := h.PCI.PredictVF("0000:61:00.0", n) // one up has not made
	h.Close()
	if !ok {
		t.Fatal("no predicted address")
	}
	cfg := *b.cfg
	cfg.Groups = slices.Clone(b.cfg.Groups)
	cfg.Groups[0].NumVFs = n + 1 // the config wants it: up makes it
	g := bootgate.Gate{Dir: b.state, BootID: func() (string, error) { return "boot-2", nil }}
	for _, tc := range []struct {
		addr sriov.Addr
		want string // "": let through
	}{
		{next, "deferring the autostart of domain vm-a"},
		{"0000:7f:00.0", ""},
	} {
		_, bus, slot, fn := tc.addr.Parts()
		o := b.opts("prepare", "begin")
		o.Gate = &g
		o.Autostart = func(string) bool { return true }
		o.Config = func() (*config.Config, error) { return &cfg, nil }
		o.XML = strings.NewReader(fmt.Sprintf(`<domain type='kvm'><name>vm-a</name><devices>
    <interface type='hostdev' managed='yes'>
      <mac address='%s'/>
      <source><address type='pci' domain='0x0000' bus='0x%02x' slot='0x%02x' function='0x%x'/></source>
    </interface>
  </devices></domain>`, domMAC, bus, slot, fn))
		err := Run(context.Background(), o)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it let through (not vflag's)", tc.addr, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want %q", tc.addr, err, tc.want)
		}
	}
	if got, _ := g.Deferred(); !reflect.DeepEqual(got, []string{"vm-a"}) {
		t.Errorf("deferred = %q, want vm-a", got)
	}
}
