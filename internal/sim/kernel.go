package sim

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/vflag/vflag/eswitch"
)

// This file implements eswitch.Kernel: devlink, rtnetlink and ethtool.

const featureHWTC = "hw-tc-offload"

func kernelErr(op string, e *opError) error {
	if e == nil {
		return nil
	}
	return fmt.Errorf("sim: %s: %w", op, e)
}

// devlinkPF resolves a devlink instance; only PFs have one here.
func (st *state) devlinkPF(d eswitch.Devlink) (*nicState, *pfState, *opError) {
	if d.Bus == "pci" {
		if nic, pf := st.pfByAddr(d.Device); pf != nil {
			return nic, pf, nil
		}
	}
	return nil, nil, fail(syscall.ENODEV, "devlink instance %s not found", d)
}

// EswitchMode implements eswitch.Kernel.
func (h *Host) EswitchMode(d eswitch.Devlink) (string, error) {
	var mode string
	err := h.view(func(st *state, now int64) error {
		_, pf, e := st.devlinkPF(d)
		if e != nil {
			return kernelErr("devlink dev eswitch show "+d.String(), e)
		}
		mode = pf.Mode
		return nil
	})
	return mode, err
}

// SetEswitchMode implements eswitch.Kernel. The call blocks for
// Latency.ModeChange in all (without holding the host's lock); the new mode
// and its representors appear when it returns. A change to legacy removes
// the representors first, as mlx5 does (mlx5_eswitch_disable_locked unloads
// the representors before the eswitch leaves offloads mode), within that
// time.
func (h *Host) SetEswitchMode(d eswitch.Devlink, mode string) error {
	op := fmt.Sprintf("devlink dev eswitch set %s mode %s", d, mode)
	start := h.now()
	var lat time.Duration
	done := false
	err := h.update(func(st *state, now int64) (bool, error) {
		nic, pf, e := st.devlinkPF(d)
		if e != nil {
			return false, kernelErr(op, e)
		}
		noop, changed, e := st.checkModeChange(now, nic, pf, mode)
		if e != nil || noop {
			done = true
			return changed, kernelErr(op, e)
		}
		lat = st.Spec.Latency.ModeChange
		if lat <= 0 {
			if mode == eswitch.ModeLegacy {
				st.unloadReps(now, nic, pf)
			}
			st.applyMode(now, nic, pf, mode)
			done = true
			return true, nil
		}
		pf.Busy = &modeChange{Target: mode, Until: now + int64(lat)}
		if mode == eswitch.ModeLegacy {
			st.unloadReps(now, nic, pf)
		}
		return true, nil
	})
	if err != nil || done {
		return err
	}
	if rest := lat - h.now().Sub(start); rest > 0 {
		h.sleep(rest)
	}
	return h.update(func(st *state, now int64) (bool, error) {
		nic, pf, e := st.devlinkPF(d)
		if e != nil {
			return false, kernelErr(op, e)
		}
		pf.Busy = nil
		// Re-check: another process may have bound a VF meanwhile.
		noop, _, e := st.checkModeChange(now, nic, pf, mode)
		if e != nil || noop {
			return true, kernelErr(op, e)
		}
		st.applyMode(now, nic, pf, mode) // a change to legacy unloaded the representors at its start
		return true, nil
	})
}

// Ports implements eswitch.Kernel: per PF the uplink port (flavour physical,
// index (vhca<<16)|0xffff) and, in switchdev, one pcivf port per VF (index
// (vhca<<16)|(vf+1)).
func (h *Host) Ports() ([]eswitch.Port, error) {
	var ports []eswitch.Port
	err := h.view(func(st *state, now int64) error {
		for _, nic := range st.NICs {
			for _, pf := range nic.PFs {
				dl := eswitch.Devlink{Bus: "pci", Device: pf.PCI}
				vhca := uint32(pf.Index) << 16
				ports = append(ports, eswitch.Port{
					Devlink: dl, Index: vhca | 0xffff, Netdev: pf.Netdev,
					Flavour: eswitch.FlavourPhysical, Number: uint32(pf.Index),
				})
				if pf.Mode != eswitch.ModeSwitchdev {
					continue
				}
				for _, vf := range pf.VFs {
					if !vf.ready(now) || vf.Rep == "" {
						continue
					}
					ports = append(ports, eswitch.Port{
						Devlink: dl, Index: vhca | uint32(vf.Index+1), Netdev: vf.Rep,
						Flavour: eswitch.FlavourPCIVF, PfNumber: uint16(pf.Index), VfNumber: uint16(vf.Index),
					})
				}
			}
		}
		sort.SliceStable(ports, func(i, j int) bool {
			if ports[i].Devlink != ports[j].Devlink {
				return ports[i].Devlink.String() < ports[j].Devlink.String()
			}
			return ports[i].Index < ports[j].Index
		})
		return nil
	})
	return ports, err
}

const (
	paramFlowSteering = "flow_steering_mode"
	paramMultiport    = "esw_multiport" // mlx5 devlink.c, lag/mpesw.c: a multiport eswitch LAG
)

// Param implements eswitch.Kernel.
func (h *Host) Param(d eswitch.Devlink, name string) (string, error) {
	var v string
	err := h.view(func(st *state, now int64) error {
		op := fmt.Sprintf("devlink dev param show %s name %s", d, name)
		nic, pf, e := st.devlinkPF(d)
		if e != nil {
			return kernelErr(op, e)
		}
		switch name {
		case paramFlowSteering:
			v = pf.FlowSteering
		case paramMultiport:
			v = fmt.Sprint(nic.LAG.Mode == lagMPESW) // mlx5_lag_is_mpesw
		default:
			return kernelErr(op, fail(syscall.EOPNOTSUPP, "no parameter %q", name).with(eswitch.ErrNotSupported))
		}
		return nil
	})
	return v, err
}

// SetParam implements eswitch.Kernel (runtime cmode).
func (h *Host) SetParam(d eswitch.Devlink, name, value string) error {
	op := fmt.Sprintf("devlink dev param set %s name %s value %s cmode runtime", d, name, value)
	return h.update(func(st *state, now int64) (bool, error) {
		nic, pf, e := st.devlinkPF(d)
		if e != nil {
			return false, kernelErr(op, e)
		}
		if name == paramMultiport {
			on, err := strconv.ParseBool(value)
			if err != nil || (value != "true" && value != "false") {
				return false, kernelErr(op, fail(syscall.EINVAL, "value %q is not a bool", value))
			}
			changed, e := st.setMultiportEswitch(now, nic, on)
			if e != nil {
				return false, kernelErr(op, e)
			}
			return changed, nil
		}
		if name != paramFlowSteering {
			return false, kernelErr(op, fail(syscall.EOPNOTSUPP, "no parameter %q", name).with(eswitch.ErrNotSupported))
		}
		// fs_core.c mlx5_fs_mode_validate: since 6.17 (an Aug 2025 fix,
		// queued for stable) every value is refused in switchdev, before
		// the value is looked at; before, dmfs passed and smfs was refused.
		if pf.Mode == eswitch.ModeSwitchdev && st.Spec.kernelAtLeast(6, 17) {
			return false, kernelErr(op, fail(syscall.EOPNOTSUPP, "Changing fs mode is not supported when eswitch offloads enabled."))
		}
		switch value {
		case "dmfs":
		case "smfs":
			if pf.Mode == eswitch.ModeSwitchdev {
				return false, kernelErr(op, fail(syscall.EOPNOTSUPP, "Moving to smfs is not supported when eswitch offloads enabled."))
			}
		default:
			return false, kernelErr(op, fail(syscall.EINVAL, `Bad parameter: supported values are ["dmfs", "smfs"]`))
		}
		if pf.FlowSteering == value {
			return false, nil
		}
		pf.FlowSteering = value
		return true, nil
	})
}

func (st *state) toLink(nd *netdev, now int64) eswitch.Link {
	l := eswitch.Link{
		Name: nd.Name, Index: nd.Ifindex, Master: nd.Master, AdminUp: nd.AdminUp,
		OperState: st.operState(nd, now), MAC: nd.MAC, Alias: nd.Alias, MTU: nd.MTU,
	}
	if nd.Role == roleBond || nd.Role == roleVLAN {
		l.Kind = nd.Role
	}
	if nd.Role == rolePF {
		_, pf := st.pfOf(nd)
		for _, vf := range pf.VFs {
			if vf.ready(now) {
				l.VFs = append(l.VFs, vf.info())
			}
		}
	}
	return l
}

// SetLinkMTU implements eswitch.Kernel (dev_set_mtu; bond_change_mtu).
func (h *Host) SetLinkMTU(name string, mtu int) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setMTU(now, name, mtu)
		return c, kernelErr(fmt.Sprintf("ip link set %s mtu %d", name, mtu), e)
	})
}

// Link implements eswitch.Kernel.
func (h *Host) Link(name string) (eswitch.Link, error) {
	var l eswitch.Link
	err := h.view(func(st *state, now int64) error {
		nd := st.link(name, now)
		if nd == nil {
			return kernelErr("ip link show "+name, st.notFound(name))
		}
		l = st.toLink(nd, now)
		return nil
	})
	return l, err
}

// Links implements eswitch.Kernel, by ifindex.
func (h *Host) Links() ([]eswitch.Link, error) {
	var ls []eswitch.Link
	err := h.view(func(st *state, now int64) error {
		for _, nd := range st.visibleNetdevs(now) {
			ls = append(ls, st.toLink(nd, now))
		}
		return nil
	})
	return ls, err
}

// SetLinkUp implements eswitch.Kernel.
func (h *Host) SetLinkUp(name string, up bool) error {
	how := "down"
	if up {
		how = "up"
	}
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setLinkUp(now, name, up)
		return c, kernelErr("ip link set "+name+" "+how, e)
	})
}

// SetLinksUp implements eswitch.LinksUpSetter: SetLinkUp for each name in
// order, stopping at the first error, in one state write (the generation
// counter still counts one write per interface changed).
func (h *Host) SetLinksUp(names []string, up bool) (int, error) {
	how := "down"
	if up {
		how = "up"
	}
	done := 0
	err := h.update(func(st *state, now int64) (bool, error) {
		changes := 0
		var err error
		for _, name := range names {
			c, e := st.setLinkUp(now, name, up)
			if c {
				changes++
			}
			if e != nil {
				err = kernelErr("ip link set "+name+" "+how, e)
				break
			}
			done++
		}
		if changes > 1 {
			st.Gen += uint64(changes - 1) // save adds the last one
		}
		return changes > 0, err
	})
	return done, err
}

// SetVFMAC implements eswitch.Kernel.
func (h *Host) SetVFMAC(pf string, vf int, mac net.HardwareAddr) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setVFMAC(now, pf, vf, mac)
		return c, kernelErr(fmt.Sprintf("ip link set %s vf %d mac %s", pf, vf, mac), e)
	})
}

// SetVFVlan implements eswitch.Kernel.
func (h *Host) SetVFVlan(pf string, vf int, vlan int) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setVFVlan(now, pf, vf, vlan)
		return c, kernelErr(fmt.Sprintf("ip link set %s vf %d vlan %d", pf, vf, vlan), e)
	})
}

// SetVFVlanQos implements eswitch.Kernel.
func (h *Host) SetVFVlanQos(pf string, vf, vlan, qos int) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setVFVlanQos(now, pf, vf, vlan, qos)
		return c, kernelErr(fmt.Sprintf("ip link set %s vf %d vlan %d qos %d", pf, vf, vlan, qos), e)
	})
}

// SetVFTrust implements eswitch.Kernel.
func (h *Host) SetVFTrust(pf string, vf int, on bool) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setVFTrust(now, pf, vf, on)
		return c, kernelErr(fmt.Sprintf("ip link set %s vf %d trust %s", pf, vf, onOff(on)), e)
	})
}

// SetVFSpoofchk implements eswitch.Kernel.
func (h *Host) SetVFSpoofchk(pf string, vf int, on bool) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setVFSpoofchk(now, pf, vf, on)
		return c, kernelErr(fmt.Sprintf("ip link set %s vf %d spoofchk %s", pf, vf, onOff(on)), e)
	})
}

// SetVFLinkState implements eswitch.Kernel.
func (h *Host) SetVFLinkState(pf string, vf int, ls string) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setVFLinkState(now, pf, vf, ls)
		return c, kernelErr(fmt.Sprintf("ip link set %s vf %d state %s", pf, vf, ls), e)
	})
}

// SetVFRate implements eswitch.Kernel.
func (h *Host) SetVFRate(pf string, vf, minMbps, maxMbps int) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setVFRate(now, pf, vf, minMbps, maxMbps)
		return c, kernelErr(fmt.Sprintf("ip link set %s vf %d min_tx_rate %d max_tx_rate %d", pf, vf, minMbps, maxMbps), e)
	})
}

// info is the VF as its PF reports it (IFLA_VFINFO_LIST).
func (vf *vfState) info() eswitch.VFInfo {
	out := eswitch.VFInfo{ID: vf.Index, MAC: vf.MAC}
	out.Vlan, out.Qos, out.Trust, out.Spoofchk = vf.Vlan, vf.Qos, vf.Trust, vf.Spoofchk
	out.LinkState = vf.LinkState
	if out.LinkState == "" {
		out.LinkState = eswitch.VFLinkAuto
	}
	out.MinTxRate, out.MaxTxRate = vf.MinTxRate, vf.MaxTxRate
	return out
}

// AddBond implements eswitch.Kernel in two writes, as the kernel takes
// eswitch.Netlink's: the RTM_NEWLINK makes the bond without the alias it
// carries (rtnl_create_link reads no IFLA_IFALIAS), a second request sets it.
func (h *Host) AddBond(b eswitch.BondSpec) error {
	alias := b.Alias
	b.Alias = ""
	err := h.update(func(st *state, now int64) (bool, error) {
		c, e := st.addBond(now, b)
		return c, kernelErr(fmt.Sprintf("ip link add %s type bond mode %s", b.Name, b.Mode), e)
	})
	if err != nil || alias == "" {
		return err
	}
	return h.setAlias(b.Name, alias)
}

// setAlias sets a link's alias ("ip link set $name alias $alias").
func (h *Host) setAlias(name, alias string) error {
	return h.update(func(st *state, now int64) (bool, error) {
		nd := st.link(name, now)
		if nd == nil {
			return false, kernelErr("ip link set "+name+" alias "+alias, st.notFound(name))
		}
		nd.Alias = alias
		return true, nil
	})
}

// DeleteLink implements eswitch.Kernel; only bonds can be deleted.
func (h *Host) DeleteLink(name string) error {
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.deleteLink(now, name)
		return c, kernelErr("ip link del "+name, e)
	})
}

// SetMaster implements eswitch.Kernel.
func (h *Host) SetMaster(slave, master string) error {
	op := "ip link set " + slave + " master " + master
	if master == "" {
		op = "ip link set " + slave + " nomaster"
	}
	return h.update(func(st *state, now int64) (bool, error) {
		c, e := st.setMaster(now, slave, master)
		return c, kernelErr(op, e)
	})
}

func (st *state) featureLink(name, feature string, now int64) (*netdev, *opError) {
	nd := st.link(name, now)
	if nd == nil {
		return nil, st.notFound(name)
	}
	if feature != featureHWTC {
		return nil, fail(syscall.EOPNOTSUPP, "feature %q is not modelled", feature).with(eswitch.ErrNotSupported)
	}
	switch nd.Role {
	case rolePF, roleRep, roleVF:
		return nd, nil
	}
	return nil, fail(syscall.EOPNOTSUPP, "%s: %s is fixed off", name, feature).with(eswitch.ErrNotSupported)
}

// Feature implements eswitch.Kernel (only hw-tc-offload is modelled).
func (h *Host) Feature(name, feature string) (bool, error) {
	var on bool
	err := h.view(func(st *state, now int64) error {
		nd, e := st.featureLink(name, feature, now)
		if e != nil {
			return kernelErr("ethtool -k "+name, e)
		}
		on = nd.HWTC
		return nil
	})
	return on, err
}

// SetFeature implements eswitch.Kernel.
func (h *Host) SetFeature(name, feature string, on bool) error {
	v := "off"
	if on {
		v = "on"
	}
	return h.update(func(st *state, now int64) (bool, error) {
		nd, e := st.featureLink(name, feature, now)
		if e != nil {
			return false, kernelErr(fmt.Sprintf("ethtool -K %s %s %s", name, feature, v), e)
		}
		if nd.HWTC == on {
			return false, nil
		}
		nd.HWTC = on
		return true, nil
	})
}
