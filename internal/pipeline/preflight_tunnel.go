package pipeline

// preflightTunnel checks a group with a tunnel or an ovn section against
// the host before any write: the underlay's address (tunnel.local,
// ovn.encap_ip) on no other device, and the MTU chain where the config
// leaves one end to the host (the bond's MTU without underlay_mtu, the
// representors' without mtu).
func (e *Env) preflightTunnel(g Group, p string, add func(string, any, string, ...any)) {
	t := g.Underlay()
	if t == nil || !g.Switchdev() {
		return
	}
	tp := p + "." + t.Section
	dev := g.UnderlayDev()
	if other, err := e.addrElsewhere(dev, t.Prefix().String(), BondAlias(g.Name)); err != nil {
		add(tp+"."+t.AddrField, t.Local, "cannot tell which devices hold it: %v", err)
	} else if other != "" {
		add(tp+"."+t.AddrField, t.Local, "is already on %s: the %s address must be on %s only (ip addr del %s dev %s)", other, t.Section+"."+t.AddrField, dev, t.Local, other)
	}
	bond, bondFrom := t.MTU, t.Section+".underlay_mtu"
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
		add(tp+".underlay_mtu", t.MTU, "the MTU chain does not fit: %s is %d, but the representors' %d plus %d bytes of tunnel headers%s need %d (set %s.underlay_mtu to %d or more, or lower mtu)",
			bondFrom, bond, reps, over, g.InnerVLANNote(), need, t.Section, need)
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
