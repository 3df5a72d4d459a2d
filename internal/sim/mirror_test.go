package sim

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vflag/vflag/eswitch"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// newTestNetns creates a named network namespace, or skips the test where
// that is not possible (not root, no namespaces).
func newTestNetns(t *testing.T) (string, netns.NsHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	name := fmt.Sprintf("vflagsim-%d", os.Getpid())
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

func listMirror(t *testing.T, ns netns.NsHandle) map[string]mirrored {
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

	// want is what the sim shows: every netdev but lo.
	want := func() map[string]mirrored {
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
	check := func(what string) {
		t.Helper()
		var diff string
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if diff = cmp.Diff(want(), listMirror(t, ns), cmp.AllowUnexported(mirrored{})); diff == "" {
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
	f := h.FS()
	if err := f.WriteFile("/sys/bus/pci/devices/"+pf0+"/sriov_drivers_autoprobe", []byte("0")); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", []byte("3")); err != nil {
		t.Fatal(err)
	}
	if err := h.SetEswitchMode(dl(pf0), eswitch.ModeSwitchdev); err != nil {
		t.Fatal(err)
	}
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
