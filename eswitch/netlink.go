package eswitch

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// Netlink is the real Kernel: rtnetlink and devlink through vishvananda/netlink,
// features through the ethtool ioctl. The zero value uses the current network namespace.
type Netlink struct{}

var _ Kernel = Netlink{}

func (Netlink) device(d Devlink) (*netlink.DevlinkDevice, error) {
	dev, err := netlink.DevLinkGetDeviceByName(d.Bus, d.Device)
	if err != nil {
		return nil, fmt.Errorf("devlink dev %s: %w", d, err)
	}
	return dev, nil
}

// EswitchMode implements Kernel ("devlink dev eswitch show $dev").
func (n Netlink) EswitchMode(d Devlink) (string, error) {
	dev, err := n.device(d)
	if err != nil {
		return "", err
	}
	if dev.Attrs.Eswitch.Mode == "" {
		return "", fmt.Errorf("devlink dev %s has no eswitch: %w", d, ErrNotSupported)
	}
	return dev.Attrs.Eswitch.Mode, nil
}

// SetEswitchMode implements Kernel ("devlink dev eswitch set $dev mode $mode").
func (n Netlink) SetEswitchMode(d Devlink, mode string) error {
	dev, err := n.device(d)
	if err != nil {
		return err
	}
	if err := netlink.DevLinkSetEswitchMode(dev, mode); err != nil {
		return fmt.Errorf("devlink dev eswitch set %s mode %s: %w", d, mode, err)
	}
	return nil
}

// Ports implements Kernel ("devlink port show").
func (Netlink) Ports() ([]Port, error) {
	list, err := netlink.DevLinkGetAllPortList()
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EOPNOTSUPP) {
			return nil, nil // no devlink family: no ports
		}
		return nil, fmt.Errorf("devlink port show: %w", err)
	}
	ports := make([]Port, 0, len(list))
	for _, p := range list {
		port := Port{
			Devlink: Devlink{Bus: p.BusName, Device: p.DeviceName},
			Index:   p.PortIndex,
			Netdev:  p.NetdeviceName,
			Flavour: flavourName(p.PortFlavour),
		}
		if p.PortNumber != nil {
			port.Number = *p.PortNumber
		}
		if p.PfNumber != nil {
			port.PfNumber = *p.PfNumber
		}
		if p.VfNumber != nil {
			port.VfNumber = *p.VfNumber
		}
		ports = append(ports, port)
	}
	return ports, nil
}

func flavourName(f uint16) string {
	switch f {
	case nl.DEVLINK_PORT_FLAVOUR_PHYSICAL:
		return FlavourPhysical
	case nl.DEVLINK_PORT_FLAVOUR_PCI_PF:
		return FlavourPCIPF
	case nl.DEVLINK_PORT_FLAVOUR_PCI_VF:
		return FlavourPCIVF
	case nl.DEVLINK_PORT_FLAVOUR_VIRTUAL:
		return FlavourVirtual
	}
	return fmt.Sprintf("flavour%d", f)
}

// Param implements Kernel ("devlink dev param show $dev name $name").
func (Netlink) Param(d Devlink, name string) (string, error) {
	p, err := netlink.DevlinkGetDeviceParamByName(d.Bus, d.Device, name)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOENT) {
			return "", fmt.Errorf("devlink param %s on %s: %w", name, d, ErrNotSupported)
		}
		return "", fmt.Errorf("devlink dev param show %s name %s: %w", d, name, err)
	}
	for _, v := range p.Values {
		if v.CMODE == nl.DEVLINK_PARAM_CMODE_RUNTIME {
			return fmt.Sprint(v.Data), nil
		}
	}
	return "", fmt.Errorf("devlink param %s on %s has no runtime value: %w", name, d, ErrNotSupported)
}

// SetParam implements Kernel ("devlink dev param set $dev name $name value $v cmode runtime").
func (Netlink) SetParam(d Devlink, name, value string) error {
	if err := netlink.DevlinkSetDeviceParam(d.Bus, d.Device, name, nl.DEVLINK_PARAM_CMODE_RUNTIME, value); err != nil {
		return fmt.Errorf("devlink dev param set %s name %s value %s: %w", d, name, value, err)
	}
	return nil
}

func toLink(l netlink.Link, byIndex map[int]string) Link {
	a := l.Attrs()
	out := Link{
		Name:      a.Name,
		Index:     a.Index,
		Kind:      l.Type(),
		AdminUp:   a.Flags&net.FlagUp != 0,
		OperState: a.OperState.String(),
		MAC:       a.HardwareAddr.String(),
		Alias:     a.Alias,
	}
	if out.Kind == "device" {
		out.Kind = ""
	}
	if a.MasterIndex != 0 {
		out.Master = byIndex[a.MasterIndex]
		if out.Master == "" {
			out.Master = fmt.Sprintf("if%d", a.MasterIndex)
		}
	}
	for _, vf := range a.Vfs {
		out.VFs = append(out.VFs, VFInfo{ID: vf.ID, MAC: vf.Mac.String(), Vlan: vf.Vlan})
	}
	return out
}

// vfHandle opens a netlink handle in the calling thread's network namespace
// that asks for VF info (RTEXT_FILTER_VF): the package-level functions of
// vishvananda/netlink leave it out, and a PF's VF MACs come only with it.
func vfHandle() (*netlink.Handle, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	return h, nil
}

// Link implements Kernel ("ip -d link show $name", with the "vf N" lines).
func (n Netlink) Link(name string) (Link, error) {
	h, err := vfHandle()
	if err != nil {
		return Link{}, err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, syscall.ENODEV) {
			return Link{}, fmt.Errorf("link %s: %w", name, ErrLinkNotFound)
		}
		return Link{}, fmt.Errorf("ip link show %s: %w", name, err)
	}
	byIndex := map[int]string{}
	if mi := l.Attrs().MasterIndex; mi != 0 {
		if m, err := h.LinkByIndex(mi); err == nil {
			byIndex[mi] = m.Attrs().Name
		}
	}
	return toLink(l, byIndex), nil
}

// Links implements Kernel ("ip -d link show").
func (Netlink) Links() ([]Link, error) {
	h, err := vfHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	list, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("ip link show: %w", err)
	}
	byIndex := make(map[int]string, len(list))
	for _, l := range list {
		byIndex[l.Attrs().Index] = l.Attrs().Name
	}
	out := make([]Link, 0, len(list))
	for _, l := range list {
		out = append(out, toLink(l, byIndex))
	}
	return out, nil
}

func linkByName(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("link %s: %w", name, ErrLinkNotFound)
		}
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	return l, nil
}

// SetLinkUp implements Kernel ("ip link set $name up|down").
func (Netlink) SetLinkUp(name string, up bool) error {
	l, err := linkByName(name)
	if err != nil {
		return err
	}
	if up {
		err = netlink.LinkSetUp(l)
	} else {
		err = netlink.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("ip link set %s %s: %w", name, map[bool]string{true: "up", false: "down"}[up], err)
	}
	return nil
}

// SetVFMAC implements Kernel ("ip link set $pf vf $vf mac $mac").
func (Netlink) SetVFMAC(pf string, vf int, mac net.HardwareAddr) error {
	l, err := linkByName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfHardwareAddr(l, vf, mac); err != nil {
		return fmt.Errorf("ip link set %s vf %d mac %s: %w", pf, vf, mac, err)
	}
	return nil
}

// SetVFVlan implements Kernel ("ip link set $pf vf $vf vlan $vlan").
func (Netlink) SetVFVlan(pf string, vf int, vlan int) error {
	l, err := linkByName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfVlan(l, vf, vlan); err != nil {
		return fmt.Errorf("ip link set %s vf %d vlan %d: %w", pf, vf, vlan, err)
	}
	return nil
}

// AddBond implements Kernel
// ("ip link add $name type bond mode $mode miimon $ms [lacp_rate $r] [xmit_hash_policy $p]; ip link set $name alias $alias").
func (Netlink) AddBond(b BondSpec) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = b.Name
	bond := netlink.NewLinkBond(attrs)
	bond.Mode = netlink.StringToBondMode(b.Mode)
	if bond.Mode == netlink.BOND_MODE_UNKNOWN {
		return fmt.Errorf("add bond %s: unknown mode %q", b.Name, b.Mode)
	}
	bond.Miimon = b.Miimon
	if b.LacpRate != "" && b.Mode == "802.3ad" {
		bond.LacpRate = netlink.StringToBondLacpRate(b.LacpRate)
	}
	if b.XmitHashPolicy != "" && b.Mode != "active-backup" {
		bond.XmitHashPolicy = netlink.StringToBondXmitHashPolicy(b.XmitHashPolicy)
	}
	if err := netlink.LinkAdd(bond); err != nil {
		return fmt.Errorf("ip link add %s type bond mode %s: %w", b.Name, b.Mode, err)
	}
	if b.Alias != "" {
		if err := netlink.LinkSetAlias(bond, b.Alias); err != nil {
			return fmt.Errorf("ip link set %s alias %s: %w", b.Name, b.Alias, err)
		}
	}
	return nil
}

// DeleteLink implements Kernel ("ip link del $name").
func (Netlink) DeleteLink(name string) error {
	l, err := linkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("ip link del %s: %w", name, err)
	}
	return nil
}

// SetMaster implements Kernel ("ip link set $slave master $master" / "ip link set $slave nomaster").
func (Netlink) SetMaster(slave, master string) error {
	s, err := linkByName(slave)
	if err != nil {
		return err
	}
	if master == "" {
		if err := netlink.LinkSetNoMaster(s); err != nil {
			return fmt.Errorf("ip link set %s nomaster: %w", slave, err)
		}
		return nil
	}
	m, err := linkByName(master)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMaster(s, m); err != nil {
		return fmt.Errorf("ip link set %s master %s: %w", slave, master, err)
	}
	return nil
}

// Feature implements Kernel ("ethtool -k $name").
func (Netlink) Feature(name, feature string) (bool, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return false, fmt.Errorf("ethtool: %w", err)
	}
	defer e.Close()
	feats, err := e.Features(name)
	if err != nil {
		return false, fmt.Errorf("ethtool -k %s: %w", name, err)
	}
	on, ok := feats[feature]
	if !ok {
		return false, fmt.Errorf("ethtool -k %s: no feature %s: %w", name, feature, ErrNotSupported)
	}
	return on, nil
}

// SetFeature implements Kernel ("ethtool -K $name $feature on|off").
func (Netlink) SetFeature(name, feature string, on bool) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("ethtool: %w", err)
	}
	defer e.Close()
	// ETHTOOL_SFEATURES answers a fixed feature (not in hw_features) with a
	// positive ETHTOOL_F_UNSUPPORTED, not an errno, and the library drops
	// it: check changeability first.
	states, err := e.FeaturesWithState(name)
	if err != nil {
		return fmt.Errorf("ethtool -k %s: %w", name, err)
	}
	if st, ok := states[feature]; ok && !st.Available {
		return fmt.Errorf("ethtool -K %s %s: fixed on this device: %w", name, feature, ErrNotSupported)
	}
	if err := e.Change(name, map[string]bool{feature: on}); err != nil {
		if strings.Contains(err.Error(), "unsupported") {
			return fmt.Errorf("ethtool -K %s %s: %w", name, feature, ErrNotSupported)
		}
		return fmt.Errorf("ethtool -K %s %s %v: %w", name, feature, on, err)
	}
	return nil
}
