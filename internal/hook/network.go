package hook

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
)

// NetworkOptions is one run of the network hook (`vflag hook network`,
// /etc/libvirt/hooks/network.d/vflag).
type NetworkOptions struct {
	Network, Op, SubOp string
	// XML is libvirt's hookData (stdin): the network and, for a port
	// event, the network port.
	XML    io.Reader
	Config func() (*config.Config, error)
	Host   func(cfg *config.Config) (*host.Host, error)
	Log    *slog.Logger
	Stderr io.Writer
	// Gate, when set, is the boot gate: before up has brought the VF-LAG
	// up in this boot a port-created passes untouched (the bridge may not
	// exist yet), and the qemu hook defers the domain at "start begin",
	// where libvirt's domain XML shows the VF the port took; up starts it
	// later, and libvirt makes the port again.
	Gate *bootgate.Gate
}

// RunNetwork is the network hook for one event. On "port-created begin"
// of a port of a vflag network whose group is switchdev, it puts the
// port's portgroup VLAN (tag, vlan_mode, trunks: from vflag's metadata in
// the network, never libvirt's <vlan>, which mlx5 refuses on a switchdev
// VF) on the OVS port of the allocated VF's representor; on "port-deleted"
// it puts back the representor's own settings (RepPortSpec, what up gives
// a free pool VF). The port is up's (its bridge step made it): the hook
// changes its VLAN columns only, which up derives alike from libvirt's
// ports (readPoolPorts), so nothing is journaled here.
//
// A network that is not vflag's, a legacy group's (libvirt puts the VLAN
// on the VF itself) and every other event pass at once. A port-created the
// hook cannot serve fails (libvirt then fails the port, and the domain's
// start): the VF would run on the wrong VLAN.
func RunNetwork(ctx context.Context, o NetworkOptions) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	created := o.Op == "port-created" && (o.SubOp == "begin" || o.SubOp == "-" || o.SubOp == "")
	deleted := o.Op == "port-deleted"
	data, ok := readPortEvent(o, created, deleted)
	if !ok {
		return nil
	}
	port := *data.Port
	fail := func(err error) error {
		if deleted {
			// The domain is gone either way: say it, do not fail libvirt.
			fmt.Fprintf(o.Stderr, "vflag hook: network %s: port of %s (VF %s) deleted: %v\n", data.Network.Name, port.Domain, port.PCI, err)
			return nil
		}
		return fmt.Errorf("network %s: port of domain %s (VF %s): %w", data.Network.Name, port.Domain, port.PCI, err)
	}
	cfg, err := o.Config()
	if err != nil {
		return fail(err)
	}
	if cfg == nil {
		return fail(fmt.Errorf("no vflag config: the VLAN of portgroup %q is unknown", port.Portgroup))
	}
	grp := networkGroup(cfg, data.Network.Name)
	if grp == nil {
		return fail(fmt.Errorf("no group of the config has this network (it left the config: run `vflag up` to remove it)"))
	}
	if !grp.Switchdev() {
		return nil // libvirt puts the portgroup's VLAN on the VF through the PF
	}
	if o.Gate != nil && created {
		if ready, err := o.Gate.Ready(); err == nil && !ready {
			fmt.Fprintf(o.Stderr, "vflag hook: network %s: port of domain %s passed untouched: vflag has not brought the VF-LAG up in this boot yet (the qemu hook defers the domain)\n", data.Network.Name, port.Domain)
			return nil
		}
	}
	h, err := o.Host(cfg)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	want, rep, changed, err := setPortVLAN(ctx, h, grp, port, created)
	if err != nil {
		return fail(err)
	}
	if !changed {
		return nil
	}
	o.Log.Info("network port: representor VLAN set", "network", data.Network.Name, "domain", port.Domain, "vf", port.PCI,
		"representor", rep, "portgroup", port.Portgroup, "tag", want.Tag, "vlan_mode", want.VLANMode, "trunks", want.Trunks, "op", o.Op)
	return nil
}

// readPortEvent reads libvirt's hookData of a port event (created or
// deleted) from o.XML; false when the hook has nothing to do: another
// event, unreadable data (said on stderr for a created port), a network
// that is not vflag's, no port, or no config or host to read.
func readPortEvent(o NetworkOptions, created, deleted bool) (libvirtx.NetworkHookData, bool) {
	var doc []byte
	var err error
	if o.XML != nil {
		doc, err = io.ReadAll(io.LimitReader(o.XML, 16<<20))
	}
	if err != nil || !created && !deleted {
		return libvirtx.NetworkHookData{}, false
	}
	data, err := libvirtx.ParseNetworkHook(doc)
	if err != nil {
		if created {
			fmt.Fprintf(o.Stderr, "vflag hook: network %s: %v; not checked\n", o.Network, err)
		}
		return data, false
	}
	if !data.Network.Owned || data.Port == nil || o.Config == nil || o.Host == nil {
		return data, false
	}
	return data, true
}

// networkGroup is the group of cfg whose network is name (the last one,
// should two name it), nil when none.
func networkGroup(cfg *config.Config, name string) *config.Group {
	var grp *config.Group
	for i := range cfg.Groups {
		if g := &cfg.Groups[i]; g.Network != nil && g.NetworkName() == name {
			grp = g
		}
	}
	return grp
}

// setPortVLAN puts on the OVS port of the representor of the port's VF the
// VLAN columns (and MTU) it should have: its portgroup's for a created
// port, the representor's own for a deleted one. It returns that port
// spec, the representor and whether anything changed; a nil error with
// nothing changed when the port already has them.
func setPortVLAN(ctx context.Context, h *host.Host, grp *config.Group, port libvirtx.NetworkPort, created bool) (ovs.PortSpec, string, bool, error) {
	g, errs := pipeline.ResolveGroup(h.Kernel, h.FS, grp)
	if len(errs) > 0 {
		return ovs.PortSpec{}, "", false, errs[0]
	}
	key, rep, err := poolVF(h, g, port.PCI)
	if err != nil {
		return ovs.PortSpec{}, "", false, err
	}
	want := pipeline.RepPortSpec(grp, key, rep)
	if created {
		want = pipeline.PoolPortSpec(grp, key, rep, port.Portgroup)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, err := ovs.Connect(cctx, h.OVSDB)
	cancel()
	if err != nil {
		return want, rep, false, err
	}
	defer c.Close()
	spec := ovs.BridgeSpec{Owner: grp.Name, Bridge: grp.OVS.Bridge, HWOffload: *grp.OVS.HWOffload, Partial: true, Ports: []ovs.PortSpec{want}}
	ch, err := c.Plan(ctx, spec)
	if err != nil {
		return want, rep, false, err
	}
	switch {
	case ch.CreateBridge:
		return want, rep, false, fmt.Errorf("bridge %s does not exist: run `vflag up`", grp.OVS.Bridge)
	case len(ch.Foreign) > 0:
		return want, rep, false, fmt.Errorf("port %s on %s is not vflag's: left alone", rep, grp.OVS.Bridge)
	case len(ch.AddPorts) > 0:
		return want, rep, false, fmt.Errorf("representor %s is not a port of %s: run `vflag up`", rep, grp.OVS.Bridge)
	case len(ch.Retag) == 0 && len(ch.SetMTU) == 0:
		return want, rep, false, nil
	}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		return want, rep, false, err
	}
	return want, rep, true, nil
}

// poolVF finds the VF of g at pci (its key) and its representor, as the
// qemu hook finds a domain's VF (vfAt).
func poolVF(h *host.Host, g pipeline.Group, pci string) (pipeline.VFKey, string, error) {
	owners := make([]eswitch.PF, len(g.Owners))
	for j, i := range g.Owners {
		owners[j] = g.PFs[i]
	}
	at, ok := vfAt(h, sriov.Addr(pci), owners)
	if !ok {
		return pipeline.VFKey{}, "", fmt.Errorf("VF %s is not a VF of group %s's PFs", pci, g.Name)
	}
	rep, err := representorOf(h, owners[at.pf], at.vf)
	if err != nil {
		return pipeline.VFKey{}, "", err
	}
	return pipeline.VFKey{PF: g.Owners[at.pf], VF: at.vf}, rep, nil
}
