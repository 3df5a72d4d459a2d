package eswitch_test

import (
	"errors"
	"net"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vflag/vflag/eswitch"
)

// inNetns runs fn on a locked OS thread inside a fresh network namespace and
// restores the original namespace afterwards. fn may call t.Fatal. It must
// not start goroutines that use netlink: they would run in another namespace.
func inNetns(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create a network namespace (CI runs as root)")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("get netns: %v", err)
	}
	defer orig.Close()
	ns, err := netns.New() // unshare(CLONE_NEWNET): this thread only
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("cannot create a network namespace: %v", err)
	}
	defer func() {
		ns.Close()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it exits with the goroutine instead
			// of running other tests in the wrong namespace.
			t.Errorf("restore netns: %v", err)
			return
		}
		if cur, err := netns.Get(); err != nil || !cur.Equal(orig) {
			t.Errorf("namespace not restored (%v)", err)
			cur.Close()
			return
		}
		runtime.UnlockOSThread()
	}()
	fn()
}

var (
	macA = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x01}
	macB = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x02}
)

func addVeth(t *testing.T, a, b string) {
	t.Helper()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = a
	attrs.HardwareAddr = macA
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: b, PeerHardwareAddr: macB}); err != nil {
		t.Fatalf("ip link add %s type veth peer %s: %v", a, b, err)
	}
}

func findLink(ls []eswitch.Link, name string) (eswitch.Link, bool) {
	for _, l := range ls {
		if l.Name == name {
			return l, true
		}
	}
	return eswitch.Link{}, false
}

// waitOper polls the operstate, which the kernel updates asynchronously (linkwatch).
func waitOper(t *testing.T, k eswitch.Kernel, name, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		l, err := k.Link(name)
		if err != nil {
			t.Fatal(err)
		}
		if l.OperState == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s operstate %q, want %q", name, l.OperState, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNetlinkLinks(t *testing.T) {
	inNetns(t, func() {
		k := eswitch.Netlink{}
		addVeth(t, "vfa0", "vfb0")

		l, err := k.Link("vfa0")
		if err != nil {
			t.Fatal(err)
		}
		if l.Name != "vfa0" || l.Kind != "veth" || l.MAC != macA.String() || l.AdminUp || l.Index <= 0 || l.Master != "" {
			t.Errorf("Link(vfa0) = %+v", l)
		}
		if l.OperState != "down" {
			t.Errorf("Link(vfa0).OperState = %q, want down", l.OperState)
		}

		ls, err := k.Links()
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 3 {
			t.Errorf("Links() in a fresh namespace = %+v, want lo and the veth pair", ls)
		}
		lo, ok := findLink(ls, "lo")
		if !ok || lo.Kind != "" || lo.AdminUp {
			t.Errorf("lo = %+v, %v; want a link without kind, down in a fresh namespace", lo, ok)
		}
		peer, ok := findLink(ls, "vfb0")
		if !ok || peer.Kind != "veth" || peer.MAC != macB.String() || peer.AdminUp {
			t.Errorf("vfb0 = %+v, %v", peer, ok)
		}
		if a, _ := findLink(ls, "vfa0"); !reflect.DeepEqual(a, l) {
			t.Errorf("Links() has vfa0 = %+v, Link() = %+v", a, l)
		}

		// Admin state.
		if err := k.SetLinkUp("vfa0", true); err != nil {
			t.Fatal(err)
		}
		if l, _ := k.Link("vfa0"); !l.AdminUp {
			t.Errorf("vfa0 not admin up after SetLinkUp(true): %+v", l)
		}
		if l, _ := k.Link("vfb0"); l.AdminUp {
			t.Errorf("SetLinkUp(vfa0) brought vfb0 up")
		}
		if err := k.SetLinkUp("vfb0", true); err != nil {
			t.Fatal(err)
		}
		waitOper(t, k, "vfa0", "up")
		if err := k.SetLinkUp("vfa0", true); err != nil {
			t.Errorf("SetLinkUp(true) on an up link: %v", err)
		}
		if err := k.SetLinkUp("vfa0", false); err != nil {
			t.Fatal(err)
		}
		if l, _ := k.Link("vfa0"); l.AdminUp {
			t.Errorf("vfa0 still admin up after SetLinkUp(false)")
		}
		waitOper(t, k, "vfa0", "down")

		// Alias and master (a bridge: this kernel has no bonding).
		if err := netlink.LinkSetAlias(mustLink(t, "vfa0"), "vflag:test"); err != nil {
			t.Fatal(err)
		}
		if l, _ := k.Link("vfa0"); l.Alias != "vflag:test" {
			t.Errorf("Alias = %q", l.Alias)
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "vbr0"}}
		if err := netlink.LinkAdd(br); err != nil {
			t.Fatalf("add bridge: %v", err)
		}
		if err := k.SetMaster("vfa0", "vbr0"); err != nil {
			t.Fatal(err)
		}
		if l, _ := k.Link("vfa0"); l.Master != "vbr0" {
			t.Errorf("Link(vfa0).Master = %q, want vbr0", l.Master)
		}
		ls, _ = k.Links()
		if a, _ := findLink(ls, "vfa0"); a.Master != "vbr0" {
			t.Errorf("Links() vfa0.Master = %q, want vbr0", a.Master)
		}
		if b, _ := findLink(ls, "vbr0"); b.Kind != "bridge" {
			t.Errorf("vbr0 kind = %q", b.Kind)
		}
		if err := k.SetMaster("vfa0", ""); err != nil {
			t.Fatal(err)
		}
		if l, _ := k.Link("vfa0"); l.Master != "" {
			t.Errorf("Master after release = %q", l.Master)
		}
		if err := k.SetMaster("vfa0", "nosuch0"); !errors.Is(err, eswitch.ErrLinkNotFound) {
			t.Errorf("SetMaster to a missing master: %v, want ErrLinkNotFound", err)
		}
		if err := k.DeleteLink("vbr0"); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Link("vbr0"); !errors.Is(err, eswitch.ErrLinkNotFound) {
			t.Errorf("Link after DeleteLink: %v, want ErrLinkNotFound", err)
		}
	})
}

func mustLink(t *testing.T, name string) netlink.Link {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNetlinkMissingLink(t *testing.T) {
	inNetns(t, func() {
		k := eswitch.Netlink{}
		for what, err := range map[string]error{
			"Link":       func() error { _, err := k.Link("nosuch0"); return err }(),
			"SetLinkUp":  k.SetLinkUp("nosuch0", true),
			"DeleteLink": k.DeleteLink("nosuch0"),
			"SetMaster":  k.SetMaster("nosuch0", ""),
			"SetVFMAC":   k.SetVFMAC("nosuch0", 0, macA),
			"SetVFVlan":  k.SetVFVlan("nosuch0", 0, 10),
		} {
			if !errors.Is(err, eswitch.ErrLinkNotFound) {
				t.Errorf("%s(nosuch0): %v, want ErrLinkNotFound", what, err)
			} else if !strings.Contains(err.Error(), "nosuch0") {
				t.Errorf("%s(nosuch0): %q does not name the link", what, err)
			}
		}
		if _, err := k.Feature("nosuch0", "rx-gro"); err == nil {
			t.Errorf("Feature on a missing link succeeded")
		}
	})
}

func TestNetlinkFeatures(t *testing.T) {
	inNetns(t, func() {
		k := eswitch.Netlink{}
		addVeth(t, "vfa0", "vfb0")

		// veth can change these (ethtool -k shows them without [fixed]).
		for _, c := range []struct {
			feature string
			initial bool
		}{
			{"tx-checksum-ip-generic", true},
			{"rx-gro", false},
		} {
			on, err := k.Feature("vfa0", c.feature)
			if err != nil {
				t.Fatalf("Feature(%s): %v", c.feature, err)
			}
			if on != c.initial {
				t.Errorf("Feature(%s) = %v, want the veth default %v", c.feature, on, c.initial)
			}
			for _, want := range []bool{!c.initial, c.initial} {
				if err := k.SetFeature("vfa0", c.feature, want); err != nil {
					t.Fatalf("SetFeature(%s, %v): %v", c.feature, want, err)
				}
				if on, err := k.Feature("vfa0", c.feature); err != nil || on != want {
					t.Errorf("after SetFeature(%s, %v): %v, %v", c.feature, want, on, err)
				}
			}
		}
		// The peer is a different device.
		if err := k.SetFeature("vfa0", "rx-gro", true); err != nil {
			t.Fatal(err)
		}
		if on, _ := k.Feature("vfb0", "rx-gro"); on {
			t.Errorf("SetFeature on vfa0 changed vfb0")
		}

		// A feature the kernel does not know.
		if _, err := k.Feature("vfa0", "no-such-feature"); !errors.Is(err, eswitch.ErrNotSupported) {
			t.Errorf("Feature(no-such-feature): %v, want ErrNotSupported", err)
		}
		if err := k.SetFeature("vfa0", "no-such-feature", true); !errors.Is(err, eswitch.ErrNotSupported) {
			t.Errorf("SetFeature(no-such-feature): %v, want ErrNotSupported", err)
		}

		// hw-tc-offload exists on veth but is fixed off (not in hw_features).
		// The ioctl then "succeeds" with ETHTOOL_F_UNSUPPORTED; SetFeature
		// must not report success for a change that did not happen.
		if on, err := k.Feature("vfa0", "hw-tc-offload"); err != nil || on {
			t.Fatalf("Feature(hw-tc-offload) on veth = %v, %v; want off", on, err)
		}
		err := k.SetFeature("vfa0", "hw-tc-offload", true)
		if !errors.Is(err, eswitch.ErrNotSupported) {
			t.Errorf("SetFeature(hw-tc-offload, true) on veth: %v, want ErrNotSupported", err)
		} else if !strings.Contains(err.Error(), "vfa0") || !strings.Contains(err.Error(), "hw-tc-offload") {
			t.Errorf("error %q does not name the link and the feature", err)
		}
		if on, _ := k.Feature("vfa0", "hw-tc-offload"); on {
			t.Errorf("hw-tc-offload turned on on a veth")
		}
	})
}

func TestNetlinkNoDevlinkNoBonding(t *testing.T) {
	inNetns(t, func() {
		k := eswitch.Netlink{}
		// Devlink instances live in the initial namespace (and this
		// machine's kernel has no devlink at all): no ports, and no error.
		ports, err := k.Ports()
		if err != nil {
			t.Fatalf("Ports() in a namespace without devlink instances: %v", err)
		}
		if len(ports) != 0 {
			t.Errorf("Ports() in a fresh namespace = %+v, want none", ports)
		}

		// A mode the bonding driver does not know is refused before the kernel.
		if err := k.AddBond(eswitch.BondSpec{Name: "bond9", Mode: "round-robin-ish"}); err == nil || !strings.Contains(err.Error(), "bond9") || !strings.Contains(err.Error(), "unknown mode") {
			t.Errorf("AddBond with a bad mode: %v", err)
		}

		spec := eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4", Alias: "vflag:g0"}
		err = k.AddBond(spec)
		if err != nil {
			// No bonding module here: the error must say which bond, and
			// nothing may be left behind.
			t.Logf("AddBond on this kernel (no bonding module): %v", err)
			if !strings.Contains(err.Error(), "bond0") {
				t.Errorf("AddBond error %q does not name the bond", err)
			}
			if _, lerr := k.Link("bond0"); !errors.Is(lerr, eswitch.ErrLinkNotFound) {
				t.Errorf("after a failed AddBond, Link(bond0): %v, want ErrLinkNotFound", lerr)
			}
			return
		}
		// A kernel with bonding: the bond exists, down, with its alias.
		l, err := k.Link("bond0")
		if err != nil {
			t.Fatal(err)
		}
		if l.Kind != "bond" || l.AdminUp || l.Alias != spec.Alias {
			t.Errorf("Link(bond0) = %+v", l)
		}
		if err := k.DeleteLink("bond0"); err != nil {
			t.Fatal(err)
		}
	})
}

// SetIngressBlock while another writer makes the same two calls on the same
// link (ovs-vswitchd applying a bridge: netdev_tc_init_flow_api deletes the
// ingress qdisc and adds one on the bond's block): an add that finds the
// other's qdisc on the wanted block is done, not an error (EEXIST failed
// vflag.service at boot on a loaded machine).
func TestSetIngressBlockBesideOVS(t *testing.T) {
	inNetns(t, func() {
		addVeth(t, "vfa0", "vfb0")
		ns, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		other, err := netlink.NewHandleAt(ns)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		l, err := other.LinkByName("vfa0")
		if err != nil {
			t.Fatal(err)
		}
		const block = 77
		ingress := func(b uint32) *netlink.Ingress {
			q := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_INGRESS, Handle: netlink.MakeHandle(0xffff, 0)}}
			if b != 0 {
				q.IngressBlock = &b
			}
			return q
		}
		stop := make(chan struct{})
		done := make(chan int)
		go func() { // a plain goroutine: the handle is bound to ns
			n := 0
			for {
				select {
				case <-stop:
					done <- n
					return
				default:
				}
				_ = other.QdiscDel(ingress(0))
				if other.QdiscAdd(ingress(block)) == nil {
					n++
				}
				time.Sleep(100 * time.Microsecond) // ovs-vswitchd does it once per port, not in a loop

			}
		}()
		k := eswitch.Netlink{}
		var failures []error
		for range 300 {
			if err := k.SetIngressBlock("vfa0", block); err != nil {
				failures = append(failures, err)
			}
		}
		close(stop)
		theirs := <-done
		if theirs == 0 {
			t.Fatal("the other writer never added its qdisc: no race exercised")
		}
		if len(failures) > 0 {
			t.Errorf("%d of 300 SetIngressBlock calls failed beside a writer of the same block (%d adds), first: %v", len(failures), theirs, failures[0])
		}
		in, err := k.Ingress("vfa0")
		if err != nil || !in.Present || in.Block != block {
			t.Errorf("vfa0 ingress after the race: %+v, %v; want on block %d", in, err, block)
		}
	})
}
