package validaterun

import (
	"fmt"
	"net/netip"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/validate"
)

// tunnelOffload is what the offload check needs of g's tunnel: the
// datapath's tunnel port (ovs-vswitchd names it <type>_sys_<dst_port>) and
// the remotes whose next hop's neighbour is unresolved; nil without one.
func tunnelOffload(k eswitch.Kernel, g *config.Group) *validate.TunnelOffload {
	t := g.Tunnel
	if t == nil || !g.Switchdev() {
		return nil
	}
	prefix := "vxlan"
	if t.Type == config.TunnelGeneve {
		prefix = "genev"
	}
	out := &validate.TunnelOffload{VPort: fmt.Sprintf("%s_sys_%d", prefix, t.DstPortOf()), Unresolved: map[string]string{}}
	u, ok := k.(eswitch.Underlay)
	if !ok || t.Flow() {
		return out
	}
	dev := g.UnderlayDev()
	for _, r := range t.Remotes {
		hop := nextHop(t, r)
		if st, err := u.Neigh(dev, hop); err == nil && !eswitch.NeighResolved(st) {
			out.Unresolved[r] = st
		}
	}
	return out
}

// nextHop is remote itself when it is on the underlay's link, else the
// gateway of the tunnel's routes.
func nextHop(t *config.Tunnel, remote string) string {
	a, err := netip.ParseAddr(remote)
	if err != nil || t.Prefix().Masked().Contains(a) || t.Gateway == "" {
		return remote
	}
	return t.Gateway
}
