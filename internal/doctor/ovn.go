package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovnsb"
)

// OVNGroup is what doctor checks of a group's ovn section.
type OVNGroup struct {
	Remote    string
	SystemID  string // the config's ovn.system_id; "" none
	EncapType string // geneve or vxlan
	// EncapIP is the encap address with its prefix ("192.0.2.11/24"),
	// EncapDev the device it belongs on (the bond or <bond>.<vlan>).
	EncapIP, EncapDev string
}

// OVNProber asks the host's ovn-controller and Open vSwitch what the OVN
// checks need.
type OVNProber interface {
	// Controller is ovn-controller's connection-status ("connected", "not
	// connected") and version ("ovn-controller 23.03.1"); an error wraps
	// ovnsb.ErrControllerNotRunning when it does not run.
	Controller(ctx context.Context) (status, version string, err error)
	// ExternalIDs is the Open_vSwitch row's external_ids at endpoint.
	ExternalIDs(ctx context.Context, endpoint string) (map[string]string, error)
}

// HostOVN is the real OVNProber: ovn-controller's control socket in
// $OVN_RUNDIR (/var/run/ovn) over unixctl, as "ovn-appctl -t
// ovn-controller connection-status" and "... version" do (no shell, no
// ovn-appctl), and OVSDB through libovsdb.
type HostOVN struct{}

// Controller implements OVNProber.
func (HostOVN) Controller(context.Context) (string, string, error) {
	dir := ovnsb.RunDir()
	st, err := ovnsb.ControllerStatus(dir)
	if err != nil {
		return "", "", err
	}
	v, _ := ovnsb.ControllerVersion(dir)
	return st, v, nil
}

// ExternalIDs implements OVNProber.
func (HostOVN) ExternalIDs(ctx context.Context, endpoint string) (map[string]string, error) {
	c, err := ovs.Connect(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	v, err := c.OVNChassis(ctx, "")
	return v.ExternalIDs, err
}

type noOVN struct{}

func (noOVN) Controller(context.Context) (string, string, error) {
	return "", "", errors.New("no OVN prober")
}
func (noOVN) ExternalIDs(context.Context, string) (map[string]string, error) {
	return nil, errors.New("no OVN prober")
}

// ovn checks a group's OVN chassis: ovn-controller running and connected,
// the system-id, the encap address on the bond, the versions, the encap's
// kernel module.
func (d *doctor) ovn(g *groupState) {
	o := g.OVN
	ctx, cancel := context.WithTimeout(d.ctx, ProbeTimeout)
	defer cancel()
	ids, idsErr := d.env.OVN.ExternalIDs(ctx, g.OVSDB)
	status, version, ctlErr := d.env.OVN.Controller(ctx)
	d.checkOVNController(o, ids, status, ctlErr)
	d.checkOVNSystemID(o, ids, idsErr, ctlErr == nil)
	d.checkOVNEncapIP(o)
	d.checkOVNVersions(version, ctlErr)
	d.checkOVNModule(o)
	d.checkOVNTCRecirc()
}

func (d *doctor) checkOVNController(o *OVNGroup, ids map[string]string, status string, err error) {
	const name = "ovn/controller"
	switch {
	case errors.Is(err, ovnsb.ErrControllerNotRunning):
		d.add(AreaDaemons, name, "", Fail, fmt.Sprintf("%v: nothing registers this chassis, binds its ports or makes its tunnels", err),
			"apt-get install ovn-host; systemctl enable --now ovn-controller")
	case err != nil:
		d.add(AreaDaemons, name, "", Fail, fmt.Sprintf("cannot ask ovn-controller its connection-status: %v", err),
			"ovn-appctl -t ovn-controller connection-status; systemctl restart ovn-controller")
	case status == "connected":
		d.add(AreaDaemons, name, "", Pass, "ovn-controller runs, connected to the Southbound", "")
	case ids["ovn-remote"] == "":
		d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("ovn-controller runs, %s: the Open_vSwitch row has no external_ids:ovn-remote yet", status),
			fmt.Sprintf("vflag up sets it to ovn.remote (%s)", o.Remote))
	default:
		d.add(AreaDaemons, name, "", Fail, fmt.Sprintf("ovn-controller runs but is %s to the Southbound at %s (connection-status)", status, ids["ovn-remote"]),
			"check that the Southbound answers from this host (ovn-sbctl --db=<remote> show) and ovn-controller's log (/var/log/ovn/ovn-controller.log); an ssl: remote needs the key, certificate and CA of ovn.ssl")
	}
}

func (d *doctor) checkOVNSystemID(o *OVNGroup, ids map[string]string, err error, controllerRuns bool) {
	const name = "ovn/system-id"
	have := ids["system-id"]
	switch {
	case err != nil:
		d.add(AreaDaemons, name, "", Skip, fmt.Sprintf("cannot read the Open_vSwitch row: %v (see daemons/ovsdb)", err), "")
	case have == "" && o.SystemID != "":
		d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("external_ids:system-id is not set yet: ovn-controller registers no chassis; vflag up sets it to ovn.system_id (%s)", o.SystemID), "vflag up")
	case have == "":
		d.add(AreaDaemons, name, "", Warn, "external_ids:system-id is not set yet: ovn-controller registers no chassis; vflag up makes one and keeps it", "vflag up, or set ovn.system_id")
	case o.SystemID != "" && o.SystemID != have && controllerRuns:
		d.add(AreaDaemons, name, "", Fail, fmt.Sprintf("external_ids:system-id is %s, ovn.system_id is %s: changing it under a running ovn-controller breaks the chassis, vflag up refuses it", have, o.SystemID),
			fmt.Sprintf("set ovn.system_id to %s (or remove it), or stop ovn-controller and delete the chassis first (ovn-sbctl chassis-del %s)", have, have))
	case o.SystemID != "" && o.SystemID != have:
		d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("external_ids:system-id is %s, ovn.system_id is %s: vflag up changes it (ovn-controller is not running)", have, o.SystemID), "vflag up")
	default:
		d.add(AreaDaemons, name, "", Pass, fmt.Sprintf("external_ids:system-id is %s", have), "")
	}
}

func (d *doctor) checkOVNEncapIP(o *OVNGroup) {
	const name = "ovn/encap-ip"
	want, err := netip.ParsePrefix(o.EncapIP)
	if err != nil {
		d.add(AreaDaemons, name, "", Skip, fmt.Sprintf("ovn.encap_ip %q is no address with a prefix (see config/valid)", o.EncapIP), "")
		return
	}
	u, ok := d.env.Kernel.(eswitch.Underlay)
	if !ok {
		d.add(AreaDaemons, name, "", Skip, "this host's kernel interface reads no addresses", "")
		return
	}
	on := func(dev string) (string, bool) {
		addrs, _ := u.Addrs(dev)
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a); err == nil && p.Addr() == want.Addr() {
				return a, true
			}
		}
		return "", false
	}
	if a, ok := on(o.EncapDev); ok {
		if a != want.String() {
			d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("%s is on %s as %s, not %s", want.Addr(), o.EncapDev, a, want), "vflag up puts the configured prefix")
			return
		}
		d.add(AreaDaemons, name, "", Pass, fmt.Sprintf("encap address %s on %s", a, o.EncapDev), "")
		return
	}
	links, _ := d.env.Kernel.Links()
	var elsewhere []string
	for _, l := range links {
		if l.Name == o.EncapDev {
			continue
		}
		if a, ok := on(l.Name); ok {
			elsewhere = append(elsewhere, a+" on "+l.Name)
		}
	}
	slices.Sort(elsewhere)
	if len(elsewhere) > 0 {
		d.add(AreaDaemons, name, "", Fail, fmt.Sprintf("the encap address is on another device (%s), not %s: tunnels would leave outside the LAG; vflag up refuses it", strings.Join(elsewhere, ", "), o.EncapDev),
			fmt.Sprintf("remove it there (ip addr del %s dev <device>)", want))
		return
	}
	d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("the encap address %s is not on %s yet", want, o.EncapDev), "vflag up puts it there")
}

func (d *doctor) checkOVNVersions(controller string, ctlErr error) {
	const name = "ovn/versions"
	ovsV := d.ovsVersion
	if ovsV == "" {
		ovsV = "unknown (see daemons/ovs-version)"
	}
	if ctlErr != nil || controller == "" {
		d.add(AreaDaemons, name, "", Skip, fmt.Sprintf("ovn-controller's version unknown (see ovn/controller); Open vSwitch %s", ovsV), "")
		return
	}
	d.add(AreaDaemons, name, "", Pass, fmt.Sprintf("%s, Open vSwitch %s", controller, ovsV), "")
}

func (d *doctor) checkOVNModule(o *OVNGroup) {
	if d.env.Simulated {
		if o.EncapType == "vxlan" {
			d.add(AreaKernel, "ovn/vxlan", "", Skip, "simulated NICs: this machine's kernel modules say nothing about them", "")
		} else {
			d.add(AreaKernel, "ovn/geneve", "", Skip, "simulated NICs: this machine's kernel modules say nothing about them", "")
		}
		return
	}
	mod := "geneve"
	if o.EncapType == "vxlan" {
		mod = "vxlan"
	}
	m := d.module(mod)
	st, detail, fix := Pass, fmt.Sprintf("%s: %s", mod, m.detail), ""
	switch m.state {
	case modAvailable:
		detail += " (the kernel loads it when ovs-vswitchd makes its tunnel device)"
	case modMissing:
		st = Fail
		detail += fmt.Sprintf(": the kernel datapath cannot make its %s tunnel device, no packet reaches another chassis", mod)
		fix = fmt.Sprintf("install the running kernel's modules or boot a kernel with the %s module (Debian's linux-image-amd64 has it)", mod)
	}
	if o.EncapType == "vxlan" {
		d.add(AreaKernel, "ovn/vxlan", "", st, detail, fix)
	} else {
		d.add(AreaKernel, "ovn/geneve", "", st, detail, fix)
	}
}

// checkOVNTCRecirc reads the running kernel's build config for
// CONFIG_NET_TC_SKB_EXT ("grep NET_TC_SKB_EXT /boot/config-$(uname -r)"):
// without it the kernel's OVS datapath shares no recirculation ids with
// tc, and ovs-vswitchd offloads no flow that recirculates, which every
// flow through conntrack (OVN's stateful ACLs) does. Debian's kernels are
// built without it.
func (d *doctor) checkOVNTCRecirc() {
	const name = "ovn/tc-recirc"
	if d.env.Simulated {
		d.add(AreaKernel, name, "", Skip, "simulated NICs: this machine's kernel config says nothing about them", "")
		return
	}
	rel, err := d.readHost("/proc/sys/kernel/osrelease")
	if err != nil || rel == "" {
		d.add(AreaKernel, name, "", Skip, fmt.Sprintf("the kernel release is unreadable (/proc/sys/kernel/osrelease: %v)", err), "")
		return
	}
	cfg := path.Join("/boot", "config-"+rel)
	b, err := d.env.Host.ReadFile(cfg)
	if err != nil {
		d.add(AreaKernel, name, "", Skip, fmt.Sprintf("cannot tell whether kernel %s shares recirculation ids with tc: %s unreadable (%v)", rel, cfg, err), "")
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "CONFIG_NET_TC_SKB_EXT=y" {
			d.add(AreaKernel, name, "", Pass, fmt.Sprintf("kernel %s has CONFIG_NET_TC_SKB_EXT=y (%s): its OVS datapath can share recirculation ids with tc, so flows through conntrack can be offloaded", rel, cfg), "")
			return
		}
	}
	d.add(AreaKernel, name, "", Warn,
		fmt.Sprintf("kernel %s is built without CONFIG_NET_TC_SKB_EXT (%s): its OVS datapath shares no recirculation ids with tc, so ovs-vswitchd offloads no flow through conntrack (OVN's stateful ACLs), whatever the NIC; they run in the kernel datapath (validate --offload: \"recirc_id sharing not supported\")", rel, cfg),
		"boot a kernel built with CONFIG_NET_TC_SKB_EXT=y (and CONFIG_MLX5_TC_CT=y for mlx5's conntrack offload), or use stateless ACLs (ovn-nbctl acl-add ... allow-stateless) where the traffic must be in hardware")
}
