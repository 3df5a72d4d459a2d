package pipeline

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// convergeEnv is a bed, with the real OVS and libvirtd, whose runs are
// separate invocations: each parses the config anew (its edit taken as it
// is), opens its own host.Host on the bed's simulated host and its own
// journal, with a fake answer to "which running domain holds this VF" (no
// domain here can hold one: no VFIO).
type convergeEnv struct {
	*bed
	held   map[string]string      // VF -> domain
	runner func(*teardown.Runner) // when set, tunes each run's runner (FailAt, NoRollback)
}

func newConvergeEnv(t *testing.T, d daemons) *convergeEnv {
	return &convergeEnv{bed: newBed(t, &d, exampleBed(t)), held: map[string]string{}}
}

// run runs up (or a plan) with cfg edited by edit; it returns the runner.
func (ce *convergeEnv) run(dry bool, edit func(*config.Config)) (*teardown.Runner, error) {
	return ce.runWith(dry, edit, nil)
}

func (ce *convergeEnv) runWith(dry bool, edit func(*config.Config), tune func(*Env)) (*teardown.Runner, error) {
	t := ce.t
	bc := exampleBed(t).with(edit)
	bc.asIs = true
	c := ce.config(bc)
	h := host.New(ce.sim, ce.sim.FS(), c.OVSDB, c.Libvirt)
	defer h.Close()
	e := New(c, h, slog.New(slog.DiscardHandler))
	e.Holding = func(vfs []string) (map[string]string, error) {
		out := map[string]string{}
		for _, v := range vfs {
			if d, ok := ce.held[v]; ok {
				out[v] = d
			}
		}
		return out, nil
	}
	if tune != nil {
		tune(e)
	}
	j, err := teardown.OpenJournal(ce.journalDir)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := e.Preflight(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := &teardown.Runner{Journal: j, Undo: e.Undoers(), DryRun: dry}
	if ce.runner != nil {
		ce.runner(r)
	}
	err = e.Up(context.Background(), r, gs)
	// As apply.Up at a run's end: what the journal wrote behind is on disk.
	return r, errors.Join(err, j.Flush())
}

// TestDisruptiveChangeRefused: with a running domain holding a VF of the
// group, a numvfs change is marked disruptive in the plan (naming the
// domain) and refused by up before any write; a VLAN change goes ahead.
func TestDisruptiveChangeRefused(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	if _, err := ce.run(false, nil); err != nil {
		t.Fatalf("first up: %v", err)
	}
	ce.held["0000:61:00.2"] = "vm1" // VF 0 of the first PF runs in vm1
	numvfs := func(c *config.Config) { c.Groups[0].NumVFs = 2 }

	plan, err := ce.run(true, numvfs)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	marked := 0
	for _, ev := range plan.Results() {
		if ev.Changed && strings.HasPrefix(ev.ID, "sriov.numvfs/") {
			if !ev.Disruptive || strings.Join(ev.Domains, ",") != "vm1" || strings.Join(ev.Holders, ",") != "VF 0000:61:00.2 is held by running domain vm1" {
				t.Errorf("plan: %s disruptive=%v domains=%v holders=%q, want disruptive naming vm1", ev.ID, ev.Disruptive, ev.Domains, ev.Holders)
			}
			marked++
		}
	}
	if marked != 2 {
		t.Fatalf("plan marks %d numvfs changes, want 2", marked)
	}

	before := ce.sim.Dump()
	j, _ := teardown.OpenJournal(ce.journalDir)
	entries := len(j.Entries())
	r, err := ce.run(false, numvfs)
	if err == nil || !strings.Contains(err.Error(), "would break: VF 0000:61:00.2 is held by running domain vm1") || !strings.Contains(err.Error(), "sriov.numvfs/pci/0000:61:00.0") {
		t.Fatalf("up with a numvfs change: %v, want a refusal naming vm1 and the step", err)
	}
	if n := len(r.Results()); n != 0 {
		t.Errorf("the refused up reported %d step events, want none (nothing checked for writing)", n)
	}
	if got := ce.sim.Dump(); got != before {
		t.Fatalf("the refused up changed the host")
	}
	if j, _ := teardown.OpenJournal(ce.journalDir); len(j.Entries()) != entries {
		t.Fatalf("the refused up changed the journal")
	}

	vlan := func(c *config.Config) { c.Groups[0].VFs[0].VLAN = 300 }
	r, err = ce.run(false, vlan)
	if err != nil {
		t.Fatalf("up with a VLAN change while vm1 runs: %v", err)
	}
	var ids []string
	for _, ev := range r.Results() {
		if ev.Changed {
			ids = append(ids, ev.ID)
		}
	}
	if strings.Join(ids, " ") != "ovs.bridge/br-lag" {
		t.Fatalf("VLAN change made %v, want only ovs.bridge/br-lag", ids)
	}
	// The summary says the tag the port had and the one it gets.
	if ev, _ := eventOf(r.Results(), "ovs.bridge/br-lag"); !regexp.MustCompile(`^retag eth\d+ tag 100 -> tag 300 \(one transaction\)$`).MatchString(ev.Summary) {
		t.Errorf("VLAN change summary %q, want the port's tag 100 -> tag 300", ev.Summary)
	}
	// Once vm1 is stopped the numvfs change goes through.
	delete(ce.held, "0000:61:00.2")
	if _, err := ce.run(false, numvfs); err != nil {
		t.Fatalf("numvfs change with no domain running: %v", err)
	}
}

// TestVerifyFailureDegradesWithoutRollback: when every step succeeded but
// verification fails (here ovs-vswitchd is gone and never applies the
// bridge), up reports the host degraded and keeps every change: the
// journal keeps them for a later up or down; nothing is rolled back.
func TestVerifyFailureDegradesWithoutRollback(t *testing.T) {
	d := startDaemons(t) // its own: ovs-vswitchd is stopped below
	ce := newConvergeEnv(t, d)
	d.ovs.StopVswitchd()
	_, err := ce.runWith(false, nil, func(e *Env) { e.OFPortWait = time.Second })
	if !errors.Is(err, teardown.ErrDegraded) || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("up with ovs-vswitchd gone: %v, want a degraded verification", err)
	}
	if errors.Is(err, teardown.ErrRolledBack) {
		t.Fatalf("degraded up rolled back: %v", err)
	}
	j, _ := teardown.OpenJournal(ce.journalDir)
	if n := len(j.Entries()); n < 20 {
		t.Fatalf("journal has %d entries after a degraded up, want every change kept", n)
	}
	if !strings.Contains(ce.sim.Dump(), "bond0 mode=802.3ad") {
		t.Fatalf("the bond is gone after a degraded up")
	}
}

// TestVerifyNamesRepresentorsOffTheBridge: a representor whose name a
// port of another bridge holds, one that vflag did not make (so up leaves
// it), is no port of the group's bridge: up ends degraded naming it,
// though every port that the group owns on its bridge has an ofport.
func TestVerifyNamesRepresentorsOffTheBridge(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	if _, err := ce.run(false, nil); err != nil {
		t.Fatal(err)
	}
	var reps []string
	for _, p := range strings.Fields(d.ovs.MustVsctl("list-ports", "br-lag")) {
		if p != "bond0" {
			reps = append(reps, p)
		}
	}
	if len(reps) < 2 {
		t.Fatalf("br-lag holds %v, want the bond and representors", reps)
	}
	taken := reps[:2]
	args := []string{"add-br", "br-other", "--", "set", "Bridge", "br-other", "datapath_type=netdev"}
	for _, rep := range taken {
		args = append(args, "--", "del-port", "br-lag", rep, "--", "add-port", "br-other", rep)
	}
	d.ovs.MustVsctl(args...)
	_, err := ce.runWith(false, nil, func(e *Env) { e.OFPortWait = time.Second })
	if !errors.Is(err, teardown.ErrDegraded) || !strings.Contains(err.Error(), "2 port(s) of the group are not ports of bridge br-lag: ") ||
		!strings.Contains(err.Error(), taken[0]) || !strings.Contains(err.Error(), taken[1]) {
		t.Fatalf("up with %v on another bridge: %v, want verify to fail naming them", taken, err)
	}
	if errors.Is(err, teardown.ErrRolledBack) {
		t.Fatalf("degraded up rolled back: %v", err)
	}
	if got := strings.Fields(d.ovs.MustVsctl("list-ports", "br-other")); !slices.Equal(got, slices.Sorted(slices.Values(taken))) {
		t.Errorf("br-other holds %v, want %v left alone (not vflag's)", got, taken)
	}
}

// vfListFails is the host's sysfs with the VF listing of one PCI function
// failing (EIO on its virtfn0 link), as a PF in a bad state or a racing driver reload can.
type vfListFails struct {
	sysfs.FS
	dir string
}

func (f vfListFails) Readlink(p string) (string, error) {
	if path.Clean(p) == f.dir+"/virtfn0" {
		return "", &fs.PathError{Op: "readlink", Path: p, Err: syscall.EIO}
	}
	return f.FS.Readlink(p)
}

// TestDisruptionGateFailsClosed: a disruptive change (numvfs 4 -> 2, a bond
// re-form, with VFs in place) goes ahead on the kernel's answer where
// libvirt cannot be asked (libvirtd not running); one that cannot be shown
// safe, because the kernel's view of who holds the VFs cannot be read or
// the VFs cannot be listed, is refused before any write, saying why;
// --force (Env.Force) lets it through with a note in the report.
func TestDisruptionGateFailsClosed(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	// No attachments: preflight then needs no libvirt, and only the gate
	// asks it.
	noAttach := func(c *config.Config) { c.Groups[0].Attachments = nil }
	if _, err := ce.run(false, noAttach); err != nil {
		t.Fatalf("first up: %v", err)
	}
	numvfs := func(n int) func(*config.Config) {
		return func(c *config.Config) { noAttach(c); c.Groups[0].NumVFs = n }
	}
	libvirtDown := func(e *Env) { // the real path: libvirtd's socket is not there
		e.Holding = nil
		e.h.Libvirt = "qemu+unix:///system?socket=" + filepath.Join(t.TempDir(), "no-libvirt-sock")
	}
	// libvirtd not running, nothing holds a VF: the kernel's answer decides.
	if _, err := ce.runWith(false, numvfs(2), libvirtDown); err != nil {
		t.Fatalf("numvfs 4 -> 2 with libvirtd down and no VF in use: %v", err)
	}
	// The kernel's view cannot be read: VF 0 is on vfio-pci (nobody holds
	// it) and the processes' open files cannot be listed (EACCES: not root).
	bindVFIO(t, ce.sim.FS(), "0000:61:00.2")
	kernelBlind := func(e *Env) {
		libvirtDown(e)
		e.pci.FS = procFails{e.pci.FS}
	}
	// A VF list that cannot be read stops the plan pass itself (the unbind
	// phase lists the VFs) before the gate: refused either way.
	reform := func(c *config.Config) { numvfs(2)(c); c.Groups[0].Bond.Mode = "active-backup" }
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		tune func(*Env)
		want string
	}{
		{"the kernel's view cannot be read", numvfs(4), kernelBlind,
			"cannot tell whether something holds the VFs it breaks: the kernel's view of who holds the VFs cannot be read: list the processes (/proc): open /proc: permission denied"},
		{"VFs cannot be listed", reform, func(e *Env) {
			e.pci.FS = vfListFails{FS: e.pci.FS, dir: "/sys/bus/pci/devices/0000:61:00.1"}
		}, "read virtfn0 of pci/0000:61:00.1"},
	} {
		before := ce.sim.Dump()
		_, err := ce.runWith(false, tc.edit, tc.tune)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: up %v, want a refusal with %q", tc.name, err, tc.want)
		}
		if ce.sim.Dump() != before {
			t.Errorf("%s: the refused up changed the host", tc.name)
		}
	}
	r, err := ce.runWith(false, numvfs(4), func(e *Env) { kernelBlind(e); e.Force = true })
	if err != nil {
		t.Fatalf("up --force: %v", err)
	}
	forced := false
	for _, ev := range r.Results() {
		if ev.Kind == KindForce && strings.Contains(ev.Summary, "--force") && strings.Contains(ev.Summary, "list the processes (/proc)") {
			forced = true
		}
	}
	if !forced {
		t.Errorf("up --force: no %s note in the report", KindForce)
	}
	if n, _ := (sriov.Host{FS: ce.sim.FS()}).NumVFs(sriov.PCIDevice("0000:61:00.0")); n != 4 {
		t.Errorf("up --force: numvfs %d, want 4", n)
	}
}

// procFails is the host's sysfs with /proc unreadable (EACCES), as for a
// user who is not root.
type procFails struct{ sysfs.FS }

func (f procFails) ReadDir(p string) ([]string, error) {
	if path.Clean(p) == "/proc" {
		return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EACCES}
	}
	return f.FS.ReadDir(p)
}

// bindVFIO binds a VF of the simulated host to vfio-pci, as libvirt or an
// operator would (driver_override, drivers_probe).
func bindVFIO(t *testing.T, f sysfs.FS, vf string) {
	t.Helper()
	if err := f.WriteFile("/sys/bus/pci/devices/"+vf+"/driver_override", []byte("vfio-pci")); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("/sys/bus/pci/drivers_probe", []byte(vf)); err != nil {
		t.Fatal(err)
	}
}

// TestNoOpVerifiesWhatItRead: a run that writes nothing verifies the bridge
// as its plan pass read it (one OVSDB read of the bridge in all), and a
// port that lost its ofport still fails verification: the read is not a
// stale pass.
func TestNoOpVerifiesWhatItRead(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	if _, err := ce.run(false, nil); err != nil {
		t.Fatal(err)
	}
	var c *ovs.Client
	grab := func(e *Env) {
		var err error
		if c, err = e.Host().OVS(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.OFPortWait = time.Second
	}
	r, err := ce.runWith(false, nil, grab)
	if err != nil {
		t.Fatalf("no-op up: %v", err)
	}
	if r.Wrote() {
		t.Fatal("the no-op up wrote")
	}
	if n := c.Reads(); n != 1 {
		t.Errorf("no-op up read the OVSDB tables %d times, want 1 (the plan pass's read serves verify)", n)
	}

	// A VLAN change rewrites columns of ports the bridge keeps: one read,
	// in the plan pass; Ensure builds its write on it, and verify takes
	// its ofports (every port keeps its ofport; verify waits until
	// ovs-vswitchd applied the change).
	vlan := func(c *config.Config) { c.Groups[0].VFs[0].VLAN = 300 }
	if r, err = ce.runWith(false, vlan, grab); err != nil || !r.WroteOnly(ovsBridgeKind{}.Name()) {
		t.Fatalf("VLAN change: %v (wrote only the bridge: %v)", err, r != nil && r.WroteOnly(ovsBridgeKind{}.Name()))
	}
	if n := c.Reads(); n != 1 {
		t.Errorf("VLAN change read the OVSDB tables %d times, want 1 (the plan pass; Ensure builds on its read, verify takes its ofports)", n)
	}
	if out := d.ovs.MustVsctl("get", "open_vswitch", ".", "next_cfg", "cur_cfg"); strings.Fields(out)[0] != strings.Fields(out)[1] {
		t.Errorf("after the VLAN change's verify: next_cfg cur_cfg = %s, want ovs-vswitchd caught up", out)
	}
	if _, err := ce.run(false, nil); err != nil { // VLAN back
		t.Fatal(err)
	}

	// A miimon change is contained (a bond's link monitoring): the steps
	// after the bond keep their plan pass checks (the bridge step reads
	// OVSDB no second time) and verify takes the plan pass's read.
	miimon := func(c *config.Config) { c.Groups[0].Bond.Miimon = 250 }
	if r, err = ce.runWith(false, miimon, grab); err != nil || !r.WroteContainedOnly() {
		t.Fatalf("miimon change: %v (wrote only contained changes: %v)", err, r != nil && r.WroteContainedOnly())
	}
	if n := c.Reads(); n != 1 {
		t.Errorf("miimon change read the OVSDB tables %d times, want 1 (the plan pass's read serves the bridge step and verify)", n)
	}
	if got, err := sysfs.ReadString(ce.sim.FS(), "/sys/class/net/bond0/bonding/miimon"); err != nil || got != "250" {
		t.Errorf("bond0 miimon after the change: %q, %v; want 250", got, err)
	}
	if _, err := ce.run(false, nil); err != nil { // miimon back
		t.Fatal(err)
	}

	ports := strings.Fields(d.ovs.MustVsctl("list-ports", "br-lag"))
	var rep string
	for _, p := range ports {
		if p != "bond0" {
			rep = p
			break
		}
	}
	d.ovs.MustVsctl("set", "Interface", rep, "type=vflag-bogus") // ovs-vswitchd cannot open it: no ofport
	defer d.ovs.MustVsctl("set", "Interface", rep, `type=""`)
	if _, err := ce.runWith(false, nil, grab); !errors.Is(err, teardown.ErrDegraded) || !strings.Contains(err.Error(), "port "+rep+" has no ofport") {
		t.Fatalf("no-op up with %s without an ofport: %v, want verify to fail naming it", rep, err)
	}
}
