package pipeline

// preflightTunnel checks a tunnel group against the host before any
// write: the local address on no other device, and the MTU chain where
// the config leaves one end to the host (the bond's MTU without
// underlay_mtu, the representors' without mtu).
func (e *Env) preflightTunnel(g Group, p string, add func(string, any, string, ...any)) {
	t := g.Tunnel
	if t == nil || !g.Switchdev() {
		return
	}
	tp := p + ".tunnel"
	dev := g.UnderlayDev()
	if other, err := e.addrElsewhere(dev, t.Prefix().String(), BondAlias(g.Name)); err != nil {
		add(tp+".local", t.Local, "cannot tell which devices hold it: %v", err)
	} else if other != "" {
		add(tp+".local", t.Local, "is already on %s: the tunnel's local address must be on %s only (ip addr del %s dev %s)", other, dev, t.Local, other)
	}
	bond, bondFrom := t.UnderlayMTU, "tunnel.underlay_mtu"
	if bond == 0 {
		bond, bondFrom = e.linkMTU(g.Bond.Name), "the bond's MTU now"
		if bond == 0 && len(g.PFs) > 0 {
			bond, bondFrom = e.linkMTU(g.PFs[0].Netdev), "the MTU of "+g.PFs[0].Netdev+" (the bond takes it)"
		}
	}
	reps := g.MTU
	if reps == 0 {
		reps = 1500
	}
	over := g.TunnelOverhead()
	if need := reps + over; bond != 0 && bond < need {
		add(tp+".underlay_mtu", t.UnderlayMTU, "the MTU chain does not fit: %s is %d, but the representors' %d plus %d bytes of tunnel headers%s need %d (set tunnel.underlay_mtu to %d or more, or lower mtu)",
			bondFrom, bond, reps, over, g.InnerVLANNote(), need, need)
	}
}

// linkMTU is an interface's MTU, 0 when it cannot be read.
func (e *Env) linkMTU(name string) int {
	l, err := e.k.Link(name)
	if err != nil {
		return 0
	}
	return l.MTU
}
