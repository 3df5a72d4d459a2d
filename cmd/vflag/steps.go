package main

// The steps of `vflag up`, in the order of DESIGN.md section 2. Each step
// reads the host in Check, writes in Apply, and records in the journal what
// its undoer (undo.go) needs: the target and the prior state, never the
// config.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// Step kinds: the journal's vocabulary. Renaming one breaks `down` for
// journals written by an older vflag.
const (
	kindAutoprobe = "sriov.autoprobe"
	kindNumVFs    = "sriov.numvfs"
	kindVFMAC     = "sriov.vfmac"
	kindUnbind    = "sriov.unbind"
	kindBind      = "sriov.bind"
	kindParam     = "devlink.param"
	kindMode      = "eswitch.mode"
	kindTCOffload = "eswitch.tc-offload"
	kindBond      = "bond.create"
	kindEnslave   = "bond.enslave"
	kindLinkUp    = "link.up"
	kindRepsUp    = "reps.up"
	kindOVS       = "ovs.bridge"
	kindAttach    = "libvirt.attach"
)

type autoprobeRecord struct {
	PF    sriov.Device `json:"pf"`
	Prior bool         `json:"prior"`
}

// autoprobeStep: sriov_drivers_autoprobe=0 so new VFs get no host driver.
func (e *env) autoprobeStep(pf eswitch.PF) teardown.Step {
	return teardown.Step{
		Kind: kindAutoprobe, ID: kindAutoprobe + "/" + string(pf.Dev),
		Check: func(context.Context) (teardown.Change, error) {
			if !e.pci.HasPCIVFs(pf.Dev) {
				return teardown.Change{Summary: fmt.Sprintf("%s: no PCI VFs, no autoprobe", pf.Dev)}, nil
			}
			on, err := e.pci.Autoprobe(pf.Dev)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: on, Summary: fmt.Sprintf("%s: sriov_drivers_autoprobe 1 -> 0", pf.Dev),
				Record: autoprobeRecord{PF: pf.Dev, Prior: on}}, nil
		},
		Apply: func(context.Context) error { return e.pci.SetAutoprobe(pf.Dev, false) },
	}
}

type paramRecord struct {
	Devlink eswitch.Devlink `json:"devlink"`
	Name    string          `json:"name"`
	Prior   string          `json:"prior"`
}

// paramStep sets a devlink runtime parameter (flow_steering_mode) while the eswitch is legacy.
func (e *env) paramStep(d eswitch.Devlink, name, value string) teardown.Step {
	return teardown.Step{
		Kind: kindParam, ID: kindParam + "/" + d.String() + "/" + name,
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.k.Param(d, name)
			if errors.Is(err, eswitch.ErrNotSupported) {
				return teardown.Change{Summary: fmt.Sprintf("%s: no devlink param %s, left alone", d, name)}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: cur != value, Summary: fmt.Sprintf("%s: %s %s -> %s", d, name, cur, value),
				Record: paramRecord{Devlink: d, Name: name, Prior: cur}}, nil
		},
		Apply: func(context.Context) error { return e.k.SetParam(d, name, value) },
	}
}

type numVFsRecord struct {
	PF    sriov.Device `json:"pf"`
	Prior int          `json:"prior"`
}

// numVFsStep creates the VFs and waits until they exist: every virtfn link
// for a device with PCI VFs. A device without PCI VFs (netdevsim) creates
// them inside the sriov_numvfs write, and its netdev reports no VF info
// (the kernel lists VFs over netlink for PCI parents only).
func (e *env) numVFsStep(pf eswitch.PF, n int) teardown.Step {
	return teardown.Step{
		Kind: kindNumVFs, ID: kindNumVFs + "/" + string(pf.Dev),
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.pci.NumVFs(pf.Dev)
			if err != nil {
				return teardown.Change{}, err
			}
			present := cur
			if e.pci.HasPCIVFs(pf.Dev) {
				if present, err = e.pci.CountVFs(pf.Dev); err != nil {
					return teardown.Change{}, err
				}
			}
			summary := fmt.Sprintf("%s: sriov_numvfs %d -> %d", pf.Dev, cur, n)
			if cur == n && present != n {
				summary = fmt.Sprintf("%s: wait for %d VFs (%d present)", pf.Dev, n, present)
			}
			return teardown.Change{Needed: cur != n || present != n, Summary: summary,
				Record: numVFsRecord{PF: pf.Dev, Prior: cur}}, nil
		},
		Apply: func(ctx context.Context) error {
			if err := e.pci.SetNumVFs(pf.Dev, n); err != nil {
				return err
			}
			if !e.pci.HasPCIVFs(pf.Dev) {
				return nil
			}
			ctx, cancel := context.WithTimeout(ctx, e.cfg.VFTimeout)
			defer cancel()
			_, err := e.pci.WaitVFs(ctx, pf.Dev, n)
			return err
		},
	}
}

type vfMACRecord struct {
	PF    string `json:"pf"` // PF netdev
	VF    int    `json:"vf"`
	Prior string `json:"prior"`
}

// vfMACStep sets a VF's MAC through its PF (rtnetlink IFLA_VF_MAC; works in both eswitch modes).
func (e *env) vfMACStep(pf eswitch.PF, vf int, mac string) teardown.Step {
	want, _ := net.ParseMAC(mac)
	return teardown.Step{
		Kind: kindVFMAC, ID: fmt.Sprintf("%s/%s/%d", kindVFMAC, pf.Netdev, vf),
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.vfMAC(pf, vf)
			if err != nil {
				return teardown.Change{}, err
			}
			if cur == "" && !e.pci.HasPCIVFs(pf.Dev) {
				// vflag could set it but never read it back: no idempotence, no undo.
				return teardown.Change{}, fmt.Errorf("VF %d MAC on %s: the driver reports no VF info over netlink (no PCI VFs), so vflag cannot manage VF MACs here; remove the mac from the config", vf, pf.Netdev)
			}
			return teardown.Change{Needed: cur != want.String(), Summary: fmt.Sprintf("%s vf %d: mac %s -> %s", pf.Netdev, vf, orDash(cur), want),
				Record: vfMACRecord{PF: pf.Netdev, VF: vf, Prior: cur}}, nil
		},
		Apply: func(context.Context) error { return e.k.SetVFMAC(pf.Netdev, vf, want) },
	}
}

// vfMAC reads a VF's MAC from its PF, "" when the VF does not exist yet.
func (e *env) vfMAC(pf eswitch.PF, vf int) (string, error) {
	l, err := e.k.Link(pf.Netdev)
	if err != nil {
		return "", err
	}
	for _, v := range l.VFs {
		if v.ID == vf {
			return v.MAC, nil
		}
	}
	return "", nil
}

type driversRecord struct {
	Drivers map[sriov.Addr]string `json:"drivers"` // VF -> driver before
	// Overrides are the VFs' driver_override values before ("" unset, the
	// only value in journals written before it was recorded): undo puts
	// them back, as binding overwrites driver_override.
	Overrides map[sriov.Addr]string `json:"overrides,omitempty"`
}

// priorOverrides reads the driver_override of each VF of drivers.
func (e *env) priorOverrides(drivers map[sriov.Addr]string) (map[sriov.Addr]string, error) {
	var out map[sriov.Addr]string
	for a := range drivers {
		ov, err := e.pci.DriverOverride(a)
		if err != nil {
			return nil, err
		}
		if ov != "" {
			if out == nil {
				out = map[sriov.Addr]string{}
			}
			out[a] = ov
		}
	}
	return out, nil
}

// unbindStep unbinds every VF of a PF from its host driver, except those
// keep allows to stay (a VF already on its configured driver once the
// eswitch and the LAG are in place).
func (e *env) unbindStep(pf eswitch.PF, keep func(vf sriov.Addr, driver string) bool) teardown.Step {
	bound := func() (map[sriov.Addr]string, error) {
		vfs, err := e.pci.VFs(pf.Dev)
		if err != nil {
			return nil, err
		}
		out := map[sriov.Addr]string{}
		for _, vf := range vfs {
			d, err := e.pci.Driver(vf.Addr)
			if err != nil {
				return nil, err
			}
			if d != "" && !keep(vf.Addr, d) {
				out[vf.Addr] = d
			}
		}
		return out, nil
	}
	return teardown.Step{
		Kind: kindUnbind, ID: kindUnbind + "/" + string(pf.Dev),
		Check: func(context.Context) (teardown.Change, error) {
			b, err := bound()
			if err != nil {
				return teardown.Change{}, err
			}
			ov, err := e.priorOverrides(b)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: len(b) > 0, Summary: fmt.Sprintf("%s: unbind %d VFs from host drivers", pf.Dev, len(b)),
				Record: driversRecord{Drivers: b, Overrides: ov}}, nil
		},
		Apply: func(context.Context) error {
			b, err := bound()
			if err != nil {
				return err
			}
			for _, a := range sortedAddrs(b) {
				if err := e.pci.Unbind(a); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// bindStep binds a VF to a host driver, strictly after LAG is active.
func (e *env) bindStep(vf sriov.Addr, driver string) teardown.Step {
	return teardown.Step{
		Kind: kindBind, ID: kindBind + "/" + string(vf),
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.pci.Driver(vf)
			if err != nil {
				return teardown.Change{}, err
			}
			prior := map[sriov.Addr]string{vf: cur}
			ov, err := e.priorOverrides(prior)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: cur != driver, Summary: fmt.Sprintf("%s: bind to %s (now %s)", vf, driver, orDash(cur)),
				Record: driversRecord{Drivers: prior, Overrides: ov}}, nil
		},
		Apply: func(context.Context) error { return e.pci.Bind(vf, driver) },
	}
}

type modeRecord struct {
	Devlink eswitch.Devlink `json:"devlink"`
	Prior   string          `json:"prior"`
}

// modeStep sets the eswitch mode. It refuses while a VF is bound to a host
// driver: the kernel does not check, the firmware fails with "bad resource state".
func (e *env) modeStep(d eswitch.Devlink, pfs []eswitch.PF, mode string) teardown.Step {
	return teardown.Step{
		Kind: kindMode, ID: kindMode + "/" + d.String(),
		Check: func(context.Context) (teardown.Change, error) {
			cur, err := e.k.EswitchMode(d)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: cur != mode, Summary: fmt.Sprintf("%s: eswitch %s -> %s", d, cur, mode),
				Record: modeRecord{Devlink: d, Prior: cur}}, nil
		},
		Apply: func(context.Context) error {
			for _, pf := range pfs {
				vfs, err := e.pci.VFs(pf.Dev)
				if err != nil {
					return err
				}
				for _, vf := range vfs {
					if drv, _ := e.pci.Driver(vf.Addr); drv != "" {
						return fmt.Errorf("set eswitch mode on %s: VF %s is bound to %s; unbind every VF first", d, vf.Addr, drv)
					}
				}
			}
			if err := e.k.SetEswitchMode(d, mode); err != nil {
				return fmt.Errorf("set eswitch mode on %s: %w", d, err)
			}
			return nil
		},
	}
}

type featureRecord struct {
	Netdev  string `json:"netdev"`
	Feature string `json:"feature"`
	Prior   bool   `json:"prior"`
}

const hwTCOffload = "hw-tc-offload"

// tcOffloadStep enables hw-tc-offload on a PF (uplink representor).
func (e *env) tcOffloadStep(pf eswitch.PF) teardown.Step {
	return teardown.Step{
		Kind: kindTCOffload, ID: kindTCOffload + "/" + pf.Netdev,
		Check: func(context.Context) (teardown.Change, error) {
			on, err := e.k.Feature(pf.Netdev, hwTCOffload)
			if errors.Is(err, eswitch.ErrNotSupported) {
				return teardown.Change{Summary: pf.Netdev + ": no hw-tc-offload feature, left alone"}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: !on, Summary: pf.Netdev + ": hw-tc-offload off -> on",
				Record: featureRecord{Netdev: pf.Netdev, Feature: hwTCOffload, Prior: on}}, nil
		},
		Apply: func(context.Context) error { return e.k.SetFeature(pf.Netdev, hwTCOffload, true) },
	}
}

// bondAlias marks a bond as vflag's, so teardown never removes one it did not make.
func bondAlias(group string) string { return "vflag:" + group }

type bondRecord struct {
	Name  string `json:"name"`
	Alias string `json:"alias"`
}

// bondStep creates the bond, down and without slaves, marked with vflag's alias.
func (e *env) bondStep(g *Group) teardown.Step {
	spec := eswitch.BondSpec{Name: g.Bond.Name, Mode: g.Bond.Mode, Miimon: g.Bond.Miimon,
		LacpRate: g.Bond.LacpRate, XmitHashPolicy: g.Bond.XmitHashPolicy, Alias: bondAlias(g.Name)}
	return teardown.Step{
		Kind: kindBond, ID: kindBond + "/" + g.Bond.Name,
		Check: func(context.Context) (teardown.Change, error) {
			l, err := e.k.Link(spec.Name)
			if errors.Is(err, eswitch.ErrLinkNotFound) {
				return teardown.Change{Needed: true, Summary: fmt.Sprintf("create bond %s mode %s", spec.Name, spec.Mode),
					Record: bondRecord{Name: spec.Name, Alias: spec.Alias}}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			if l.Alias != spec.Alias {
				return teardown.Change{}, fmt.Errorf("bond %s: an interface of that name exists and was not created by vflag (alias %q); vflag leaves it alone", spec.Name, l.Alias)
			}
			return teardown.Change{Summary: "bond " + spec.Name + " exists"}, nil
		},
		Apply: func(context.Context) error {
			if l, err := e.k.Link(spec.Name); err == nil && l.Alias == spec.Alias {
				return nil // made by an earlier run of this group
			}
			return e.k.AddBond(spec)
		},
	}
}

type enslaveRecord struct {
	Slave       string `json:"slave"`
	Bond        string `json:"bond"`
	PriorMaster string `json:"prior_master"`
	PriorUp     bool   `json:"prior_up"`
}

// enslaveStep puts a PF into the bond; the port must be down while it is enslaved.
func (e *env) enslaveStep(pf eswitch.PF, bond string) teardown.Step {
	return teardown.Step{
		Kind: kindEnslave, ID: kindEnslave + "/" + pf.Netdev,
		Check: func(context.Context) (teardown.Change, error) {
			l, err := e.k.Link(pf.Netdev)
			if err != nil {
				return teardown.Change{}, err
			}
			if l.Master != "" && l.Master != bond {
				return teardown.Change{}, fmt.Errorf("enslave %s to %s: it is already a slave of %s", pf.Netdev, bond, l.Master)
			}
			return teardown.Change{Needed: l.Master != bond, Summary: fmt.Sprintf("enslave %s to %s", pf.Netdev, bond),
				Record: enslaveRecord{Slave: pf.Netdev, Bond: bond, PriorMaster: l.Master, PriorUp: l.AdminUp}}, nil
		},
		Apply: func(context.Context) error {
			if l, err := e.k.Link(pf.Netdev); err == nil && l.Master == bond {
				return nil
			}
			if err := e.k.SetLinkUp(pf.Netdev, false); err != nil {
				return err
			}
			return e.k.SetMaster(pf.Netdev, bond)
		},
	}
}

type linkUpRecord struct {
	Names []string `json:"names"` // brought up by vflag (they were down)
}

// linkUpStep brings interfaces up; its record lists those that were down.
func (e *env) linkUpStep(id string, names ...string) teardown.Step {
	// down lists the interfaces that are down; in a plan, one that an earlier
	// step would create counts as down.
	down := func() ([]string, error) {
		var out []string
		for _, n := range names {
			l, err := e.k.Link(n)
			if errors.Is(err, eswitch.ErrLinkNotFound) {
				out = append(out, n)
				continue
			}
			if err != nil {
				return nil, err
			}
			if !l.AdminUp {
				out = append(out, n)
			}
		}
		return out, nil
	}
	kind := kindLinkUp
	if strings.HasPrefix(id, "reps/") {
		kind = kindRepsUp
	}
	return teardown.Step{
		Kind: kind, ID: kind + "/" + strings.TrimPrefix(id, "reps/"),
		Check: func(context.Context) (teardown.Change, error) {
			d, err := down()
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: len(d) > 0, Summary: "set up: " + strings.Join(d, " "),
				Record: linkUpRecord{Names: d}}, nil
		},
		Apply: func(context.Context) error {
			d, err := down()
			if err != nil {
				return err
			}
			_, err = eswitch.SetLinksUp(e.k, d, true)
			return err
		},
	}
}

type ovsRecord struct {
	Endpoint string     `json:"endpoint"`
	Bridge   ovs.Record `json:"bridge"`
}

// ovsStep builds the bridge with the bond and the representors, and turns
// hw-offload on, in one OVSDB transaction.
func (e *env) ovsStep(spec ovs.BridgeSpec) teardown.Step {
	return teardown.Step{
		Kind: kindOVS, ID: kindOVS + "/" + spec.Bridge,
		Check: func(ctx context.Context) (teardown.Change, error) {
			c, err := e.ovsClient(ctx)
			if err != nil {
				return teardown.Change{}, err
			}
			ch, err := c.Plan(ctx, spec)
			if err != nil {
				return teardown.Change{}, err
			}
			if len(ch.Foreign) > 0 {
				e.log.Warn("ports exist that vflag did not create; left alone", "bridge", spec.Bridge, "ports", ch.Foreign)
			}
			if ch.RestartRequired {
				e.log.Warn("hw-offload is on but the config wants it off: disabling needs an ovs-vswitchd restart; vflag never restarts OVS", "bridge", spec.Bridge)
			}
			return teardown.Change{Needed: !ch.Empty(), Summary: ovsSummary(spec.Bridge, ch),
				Record: ovsRecord{Endpoint: e.cfg.OVSDB, Bridge: ovs.Record{Owner: spec.Owner, Bridge: spec.Bridge,
					BridgeCreated: ch.CreateBridge, Ports: ch.AddPorts, HWOffloadSet: ch.SetHWOffload, PriorHWOffload: ch.PriorHWOffload}}}, nil
		},
		Apply: func(ctx context.Context) error {
			c, err := e.ovsClient(ctx)
			if err != nil {
				return err
			}
			_, _, err = c.Ensure(ctx, spec)
			return err
		},
	}
}

func ovsSummary(bridge string, ch ovs.Change) string {
	var parts []string
	if ch.CreateBridge {
		parts = append(parts, "create bridge "+bridge)
	}
	if len(ch.AddPorts) > 0 {
		parts = append(parts, fmt.Sprintf("add %d ports (%s)", len(ch.AddPorts), abbreviate(ch.AddPorts, 4)))
	}
	if len(ch.Retag) > 0 {
		parts = append(parts, "retag "+strings.Join(ch.Retag, " "))
	}
	if ch.SetHWOffload {
		parts = append(parts, "hw-offload "+orDash(deref(ch.PriorHWOffload))+" -> true")
	}
	if len(parts) == 0 {
		return "bridge " + bridge + " converged"
	}
	return strings.Join(parts, "; ") + " (one transaction)"
}

type attachRecord struct {
	URI        string          `json:"uri"`
	Attachment libvirtx.Record `json:"attachment"`
}

// attachStep attaches a VF to a domain as <interface type='hostdev' managed='yes'>.
func (e *env) attachStep(a libvirtx.Attachment) teardown.Step {
	return teardown.Step{
		Kind: kindAttach, ID: fmt.Sprintf("%s/%s/%s", kindAttach, a.Domain, a.PCI),
		Check: func(ctx context.Context) (teardown.Change, error) {
			c, err := e.virtConn()
			if err != nil {
				return teardown.Change{}, err
			}
			needed, why, err := c.Plan(a)
			if err != nil {
				return teardown.Change{}, err
			}
			return teardown.Change{Needed: needed, Summary: why,
				Record: attachRecord{URI: e.cfg.Libvirt, Attachment: libvirtx.Record{Domain: a.Domain, PCI: a.PCI, MAC: a.MAC, Live: a.Live, Owner: a.Owner}}}, nil
		},
		Apply: func(ctx context.Context) error {
			c, err := e.virtConn()
			if err != nil {
				return err
			}
			_, _, err = c.Attach(a)
			return err
		},
	}
}

func sortedAddrs(m map[sriov.Addr]string) []sriov.Addr {
	out := make([]sriov.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func abbreviate(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, " ")
	}
	return strings.Join(items[:n], " ") + fmt.Sprintf(" ... +%d", len(items)-n)
}

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("decode journal record: %w", err)
	}
	return v, nil
}
