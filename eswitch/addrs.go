package eswitch

import (
	"sort"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Addrs lists an interface's IPv4 and IPv6 addresses of global or site
// scope, as "192.0.2.1/24", sorted; the link-local addresses the kernel
// gives every interface that is up are left out
// ("ip -o addr show dev $name scope global"). ErrLinkNotFound if absent.
func (n Netlink) Addrs(name string) ([]string, error) {
	h, done, err := n.handle()
	if err != nil {
		return nil, err
	}
	defer done()
	l, err := linkByName(h, name)
	if err != nil {
		return nil, err
	}
	list, err := retryDump("ip addr show dev "+name, func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range list {
		if a.IPNet != nil && (a.Scope == unix.RT_SCOPE_UNIVERSE || a.Scope == unix.RT_SCOPE_SITE) {
			out = append(out, a.IPNet.String())
		}
	}
	sort.Strings(out)
	return out, nil
}
