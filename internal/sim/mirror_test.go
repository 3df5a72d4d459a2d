package sim

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vflag/vflag/eswitch"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

var netnsSeq atomic.Int64

// newTestNetns creates a named network namespace, or skips the test where
// that is not possible (not root, no namespaces).
func newTestNetns(t testing.TB) (string, netns.NsHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	name := fmt.Sprintf("vflagsim-%d-%d", os.Getpid(), netnsSeq.Add(1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Skipf("netns: %v", err)
	}
	defer orig.Close()
	ns, err := netns.NewNamed(name)
	if err != nil {
		_ = netns.Set(orig)
		t.Skipf("cannot create a network namespace: %v", err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatalf("restore netns: %v", err)
	}
	t.Cleanup(func() {
		ns.Close()
		_ = netns.DeleteNamed(name)
	})
	return "/var/run/netns/" + name, ns
}

type mirrored struct {
	up  bool
	mac string
}

// linksIn are the links of namespace ns by name.
func linksIn(t *testing.T, ns netns.NsHandle) map[string]netlink.Link {
	t.Helper()
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	links, err := nh.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]netlink.Link{}
	for _, l := range links {
		have[l.Attrs().Name] = l
	}
	return have
}

func listMirror(t *testing.T, ns netns.NsHandle) map[string]mirrored {
	t.Helper()
	have := linksIn(t, ns)
	out := map[string]mirrored{}
	for name, l := range have {
		if l.Type() != "veth" {
			continue
		}
		peer, ok := have[mirrorPeer(name)]
		if !ok {
			continue
		}
		up := l.Attrs().Flags&net.FlagUp != 0
		if pup := peer.Attrs().Flags&net.FlagUp != 0; pup != up {
			t.Errorf("%s up=%v but its peer up=%v", name, up, pup)
		}
		out[name] = mirrored{up: up, mac: l.Attrs().HardwareAddr.String()}
	}
	return out
}

// peerAddrs lists the IPv6 addresses of the mirror peer of name.
func peerAddrs(t *testing.T, ns netns.NsHandle, name string) []netlink.Addr {
	t.Helper()
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	peer, err := nh.LinkByName(mirrorPeer(name))
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := nh.AddrList(peer, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// mirrorHost opens a host of testSpec's card with totalVFs VFs per PF,
// zero latency, mirrored into a new namespace (ns); dir is its state.
func mirrorHost(t *testing.T, totalVFs int) (h *Host, dir string, ns netns.NsHandle) {
	t.Helper()
	path, ns := newTestNetns(t)
	spec := testSpec()
	spec.NICs[0].TotalVFs = totalVFs
	spec.Latency = Latency{}
	spec.MirrorNetns = path
	dir = t.TempDir()
	h, err := Open(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, dir, ns
}

// toSwitchdev gives PF pf numvfs VFs (autoprobe off) and puts its eswitch
// in switchdev.
func toSwitchdev(t *testing.T, h *Host, pf string, numvfs int) {
	t.Helper()
	f := h.FS()
	if err := f.WriteFile("/sys/bus/pci/devices/"+pf+"/sriov_drivers_autoprobe", []byte("0")); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("/sys/bus/pci/devices/"+pf+"/sriov_numvfs", []byte(fmt.Sprint(numvfs))); err != nil {
		t.Fatal(err)
	}
	if err := h.SetEswitchMode(dl(pf), eswitch.ModeSwitchdev); err != nil {
		t.Fatal(err)
	}
}

// simLinks is what the namespace must mirror: every simulated netdev but lo.
func simLinks(t *testing.T, h *Host) map[string]mirrored {
	t.Helper()
	ls, err := h.Links()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mirrored{}
	for _, l := range ls {
		if l.Name != "lo" {
			out[l.Name] = mirrored{up: l.AdminUp, mac: l.MAC}
		}
	}
	return out
}

func TestMirrorNetns(t *testing.T) {
	path, ns := newTestNetns(t)
	spec := testSpec()
	spec.Latency = Latency{VFCreate: 5 * time.Millisecond, ModeChange: time.Millisecond, LAGActivation: time.Millisecond}
	spec.MirrorNetns = path
	h, err := Open(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	check := func(what string) {
		t.Helper()
		var diff string
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if diff = cmp.Diff(simLinks(t, h), listMirror(t, ns), cmp.AllowUnexported(mirrored{})); diff == "" {
				return
			}
		}
		t.Fatalf("%s: mirror differs (-sim +netns):\n%s", what, diff)
	}
	check("open")
	if err := h.SetLinkUp("p0", true); err != nil {
		t.Fatal(err)
	}
	check("p0 up")
	// The peer, standing for what is behind p0, has no IPv6 address: it
	// sends nothing the mirror's ovs-vswitchd would flood.
	if addrs := peerAddrs(t, ns, "p0"); len(addrs) != 0 {
		t.Errorf("the peer of p0 has IPv6 addresses %v, want none (addr_gen_mode none)", addrs)
	}
	toSwitchdev(t, h, pf0, 3)
	// Representors appear as the VFs do, with no further call: the timer syncs.
	time.Sleep(30 * time.Millisecond)
	check("representors")
	if n := len(listMirror(t, ns)); n != 5 {
		t.Fatalf("%d mirrors, want p0, p1 and 3 representors", n)
	}
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup"}); err != nil {
		t.Fatal(err)
	}
	if err := h.SetLinkUp("p0", false); err != nil {
		t.Fatal(err)
	}
	if err := h.SetMaster("p0", "bond0"); err != nil {
		t.Fatal(err)
	}
	check("bond")
	if err := h.DeleteLink("bond0"); err != nil {
		t.Fatal(err)
	}
	if err := h.SetEswitchMode(dl(pf0), eswitch.ModeLegacy); err != nil {
		t.Fatal(err)
	}
	check("teardown")
	var names []string
	for n := range listMirror(t, ns) {
		names = append(names, n)
	}
	sort.Strings(names)
	if !cmp.Equal(names, []string{"p0", "p1"}) {
		t.Fatalf("mirrors left: %v", names)
	}
}

// Many netdevs changing in one write (a batch of representors) take the
// dump path of a delta sync, and a mode change removing them deletes their
// mirrors in one batch.
func TestMirrorNetnsBatch(t *testing.T) {
	h, _, ns := mirrorHost(t, 12)
	for _, pf := range []string{pf0, pf1} {
		toSwitchdev(t, h, pf, 12)
	}
	check := func(what string, wantN int) []string {
		t.Helper()
		want := simLinks(t, h)
		var reps []string
		for name := range want {
			if name != "p0" && name != "p1" {
				reps = append(reps, name)
			}
		}
		got := listMirror(t, ns)
		if d := cmp.Diff(want, got, cmp.AllowUnexported(mirrored{})); d != "" {
			t.Fatalf("%s: mirror differs (-sim +netns):\n%s", what, d)
		}
		if len(got) != wantN {
			t.Fatalf("%s: %d mirrors, want %d", what, len(got), wantN)
		}
		return reps
	}
	reps := check("switchdev", 26)
	if n, err := h.SetLinksUp(reps, true); err != nil || n != len(reps) {
		t.Fatalf("SetLinksUp = %d, %v", n, err)
	}
	check("representors up", 26)
	if n, err := h.SetLinksUp(reps, false); err != nil || n != len(reps) {
		t.Fatalf("SetLinksUp = %d, %v", n, err)
	}
	check("representors down", 26)
	for _, pf := range []string{pf0, pf1} {
		if err := h.SetEswitchMode(dl(pf), eswitch.ModeLegacy); err != nil {
			t.Fatal(err)
		}
	}
	check("legacy", 2)
}

// TestMirrorDeltasSideBySide: the mirror's delta syncs run side by side
// (a delta holds the mirror's lock only to take its turn): one PF's mode
// changes add and remove its twelve representors' veths while other
// goroutines flip the other PF's representors up and down, two of them on
// the same netdev. Whatever order they ran in, the namespace ends as the
// simulated host's links are (a later delta on a netdev never runs before
// an earlier one), and the next delta starts from there.
func TestMirrorDeltasSideBySide(t *testing.T) {
	h, _, ns := mirrorHost(t, 12)
	for _, pf := range []string{pf0, pf1} {
		toSwitchdev(t, h, pf, 12)
	}
	ports, err := h.Ports()
	if err != nil {
		t.Fatal(err)
	}
	var reps1 []string // PF 1's representors
	for _, p := range ports {
		if p.Flavour == "pcivf" && p.Devlink == dl(pf1) {
			reps1 = append(reps1, p.Netdev)
		}
	}
	if len(reps1) != 12 {
		t.Fatalf("PF 1's representors: %v", reps1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	wg.Go(func() {
		for range 3 {
			for _, mode := range []string{eswitch.ModeLegacy, eswitch.ModeSwitchdev} {
				if err := h.SetEswitchMode(dl(pf0), mode); err != nil {
					errs <- err
				}
			}
		}
	})
	flip := func(names []string) {
		for i := range 40 {
			if err := h.SetLinkUp(names[i%len(names)], i%2 == 0); err != nil {
				errs <- err
			}
		}
	}
	wg.Go(func() { flip(reps1[:6]) })
	wg.Go(func() { flip(reps1[6:]) })
	wg.Go(func() { flip(reps1[:1]) }) // the same netdev as the first flipper's
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	same := func(what string) {
		t.Helper()
		if d := cmp.Diff(simLinks(t, h), listMirror(t, ns), cmp.AllowUnexported(mirrored{})); d != "" {
			t.Fatalf("%s: mirror differs (-sim +netns):\n%s", what, d)
		}
	}
	same("after the side-by-side changes")
	if err := h.SetLinkUp(reps1[0], true); err != nil {
		t.Fatal(err)
	}
	same("after one more change")
}

// TestMirrorMark: an open after a Host closed skips the full sync of the
// namespace when its mark says nothing changed there, and syncs in full
// (restoring the mirrors) when a link was deleted from it meanwhile.
func TestMirrorMark(t *testing.T) {
	path, ns := newTestNetns(t)
	spec := testSpec()
	spec.Latency = Latency{}
	spec.MirrorNetns = path
	dir := t.TempDir()
	open := func(what string, wantFull int) *Host {
		t.Helper()
		h, err := Open(dir, spec)
		if err != nil {
			t.Fatal(err)
		}
		if h.mirror.fullSyncs != wantFull {
			t.Errorf("%s: %d full syncs of the namespace, want %d", what, h.mirror.fullSyncs, wantFull)
		}
		return h
	}
	check := func(what string, h *Host) {
		t.Helper()
		if d := cmp.Diff(simLinks(t, h), listMirror(t, ns), cmp.AllowUnexported(mirrored{})); d != "" {
			t.Fatalf("%s: mirror differs (-sim +netns):\n%s", what, d)
		}
	}
	h := open("new namespace", 1)
	check("new namespace", h)
	if err := h.SetLinkUp("p0", true); err != nil {
		t.Fatal(err)
	}
	h.Close()
	h = open("nothing changed", 0)
	check("nothing changed", h)
	h.Close()

	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	l, err := nh.LinkByName("p0")
	if err != nil {
		t.Fatal(err)
	}
	if err := nh.LinkDel(l); err != nil {
		t.Fatal(err)
	}
	h = open("p0 deleted from the namespace", 1)
	check("p0 deleted from the namespace", h)
	h.Close()
	h = open("restored", 0)
	check("restored", h)
	h.Close()
}

// graves lists the parked mirrors in the namespace (the ends named
// svz…, each with its svy… peer).
func graves(t *testing.T, ns netns.NsHandle) []string {
	t.Helper()
	names := linksIn(t, ns)
	var out []string
	for n := range names {
		if isGrave(n) {
			if names[gravePeer(n)] == nil {
				t.Errorf("parked %s has no peer %s", n, gravePeer(n))
			}
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// A deleted bond's mirror is parked: its name and its peer's are free at
// once (the same bond can come back), the parked veths go at the next
// batch deletion or the host's close, and a full sync deletes those a
// process left parked.
func TestMirrorParksDeleted(t *testing.T) {
	h, dir, ns := mirrorHost(t, 12)
	names := func() []string {
		var out []string
		for n := range listMirror(t, ns) {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}
	for round := 1; round <= 2; round++ {
		if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup"}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got := names(); !cmp.Equal(got, []string{"bond0", "p0", "p1"}) {
			t.Fatalf("round %d: mirrors %v, want bond0, p0, p1", round, got)
		}
		if err := h.DeleteLink("bond0"); err != nil {
			t.Fatal(err)
		}
		// Gone when DeleteLink returns, no wait: parked, not deleted.
		if got := names(); !cmp.Equal(got, []string{"p0", "p1"}) {
			t.Fatalf("round %d: after the delete, mirrors %v, want p0, p1", round, got)
		}
		if g := graves(t, ns); len(g) != round {
			t.Fatalf("round %d: parked %v, want %d", round, g, round)
		}
	}
	// A mode change that removes more than parkMax representors deletes
	// them in a batch, the parked ones with them.
	toSwitchdev(t, h, pf0, 12)
	if err := h.SetEswitchMode(dl(pf0), eswitch.ModeLegacy); err != nil {
		t.Fatal(err)
	}
	if g := graves(t, ns); len(g) != 0 {
		t.Fatalf("after the representors' batch deletion, parked %v are left", g)
	}
	// The close sweeps what it parked.
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup"}); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteLink("bond0"); err != nil {
		t.Fatal(err)
	}
	if g := graves(t, ns); len(g) != 1 {
		t.Fatalf("parked %v, want 1", g)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if g := graves(t, ns); len(g) != 0 {
		t.Fatalf("after the close, parked %v are left", g)
	}
	// Parked by a process that stopped before its close: the next open's
	// full sync deletes them.
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	left := "svz" + "0000a" + "0000001"
	if err := nh.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: left}, PeerName: gravePeer(left)}); err != nil {
		t.Fatal(err)
	}
	h2, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if g := graves(t, ns); len(g) != 0 {
		t.Fatalf("after an open, parked %v are left", g)
	}
}
