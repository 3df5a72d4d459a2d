package hook

import (
	"context"
	"github.com/vflag/vflag/internal/bootgate"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
}

// newBed is a simulated host after up, with VF 1's representor port
// removed from the bridge (the hook must add it back).
func newBed(t *testing.T) *bed {
	srv := ovstest.Start(t)
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(testbed.PointConfig(testConfig, srv.Endpoint(), "qemu:///none", srv.Netns())))
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
	pf, err := eswitch.ResolvePF(h.Kernel, h.FS, "ens1f0np0")
	if err != nil {
		t.Fatal(err)
	}
	reps, err := eswitch.Representors(h.Kernel, h.FS, pf)
	if err != nil || reps[1] == "" {
		t.Fatalf("representors: %v %v", reps, err)
	}
	b.rep = reps[1]
	srv.MustVsctl("del-port", "br-lag", b.rep)
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

func (b *bed) opts(op, sub string) Options {
	xml := `<domain type='kvm'><name>vm-a</name><devices>
    <interface type='hostdev' managed='yes'>
      <mac address='` + domMAC + `'/>
      <source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x3'/></source>
    </interface>
  </devices></domain>`
	return Options{StateDir: b.state, Domain: "vm-a", Op: op, SubOp: sub, XML: strings.NewReader(xml),
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

func (b *bed) journal(domain string) []teardown.Entry {
	j, err := teardown.OpenJournal(Dir(b.state, domain))
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
	if _, err := os.Stat(Dir(b.state, "vm-a")); !os.IsNotExist(err) {
		b.t.Errorf("hook journal directory left after release: %v", err)
	}
}

// TestCrashThenRelease: prepare applies the port change but "dies" before
// marking it applied (FailAt: the entry stays pending); release undoes both
// the VF MAC and the pending port; a second release is a no-op.
func TestCrashThenRelease(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	o := b.opts("prepare", "begin")
	o.FailAt = "ovs.port/br-lag/" + b.rep
	err := Run(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "refusing to start domain vm-a") {
		t.Fatalf("prepare: err %v, want a refusal", err)
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
	if err := os.RemoveAll(Dir(b.state, "vm-a")); err != nil {
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
	dj, err := openDomain(context.Background(), Options{StateDir: state}, "vm-old")
	if err != nil {
		t.Fatal(err)
	}
	es := dj.j.Entries()
	dj.close()
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
