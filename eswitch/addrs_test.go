package eswitch_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vflag/vflag/eswitch"
)

// TestNetlinkAddrs: an interface's IPv4 and IPv6 addresses of global scope
// ("has an address", internal/holders), without the link-local address
// the kernel gives an interface that is up; a missing link is
// ErrLinkNotFound.
func TestNetlinkAddrs(t *testing.T) {
	inNetns(t, func() {
		k := eswitch.Netlink{}
		addVeth(t, "va0", "vb0")
		if got, err := k.Addrs("va0"); err != nil || len(got) != 0 {
			t.Fatalf("Addrs of a fresh veth: %v, %v; want none", got, err)
		}
		for _, a := range []string{"192.0.2.1/24", "2001:db8::1/64"} {
			addr, err := netlink.ParseAddr(a)
			if err != nil {
				t.Fatal(err)
			}
			if err := netlink.AddrAdd(mustLink(t, "va0"), addr); err != nil {
				t.Fatalf("ip addr add %s dev va0: %v", a, err)
			}
		}
		if err := k.SetLinkUp("va0", true); err != nil {
			t.Fatal(err)
		}
		if err := k.SetLinkUp("vb0", true); err != nil {
			t.Fatal(err)
		}
		// The link-local address comes with the link up (addrconf): wait
		// until the kernel lists it, so leaving it out is what is tested.
		deadline := time.Now().Add(3 * time.Second)
		for {
			all, err := netlink.AddrList(mustLink(t, "va0"), netlink.FAMILY_V6)
			if err != nil {
				t.Fatal(err)
			}
			linkLocal := false
			for _, a := range all {
				linkLocal = linkLocal || a.IP.IsLinkLocalUnicast()
			}
			if linkLocal {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("va0 got no link-local address: %v", all)
			}
			time.Sleep(10 * time.Millisecond)
		}
		got, err := k.Addrs("va0")
		if err != nil || strings.Join(got, " ") != "192.0.2.1/24 2001:db8::1/64" {
			t.Fatalf("Addrs(va0) = %v, %v; want the two global addresses", got, err)
		}
		if _, err := k.Addrs("nosuch0"); !errors.Is(err, eswitch.ErrLinkNotFound) {
			t.Fatalf("Addrs(nosuch0): %v, want ErrLinkNotFound", err)
		}
	})
}
