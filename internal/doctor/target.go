package doctor

import (
	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sysfs"
)

// TargetFromConfig maps the config's groups to doctor's input; nil (no
// config): doctor discovers the NICs.
func TargetFromConfig(cfg *config.Config) Target {
	var t Target
	if cfg == nil {
		return t
	}
	for _, g := range cfg.Groups {
		tunnel := ""
		if g.Tunnel != nil {
			tunnel = g.Tunnel.Type
		}
		var o *OVNGroup
		if g.OVN != nil {
			o = &OVNGroup{Remote: g.OVN.Remote, SystemID: g.OVN.SystemID, EncapType: g.OVN.EncapTypeOf(), EncapIP: g.OVN.EncapIP, EncapDev: g.UnderlayDev()}
		}
		t.Groups = append(t.Groups, Group{
			Name: g.Name, PFs: g.PFs, NumVFs: g.NumVFs,
			Switchdev: g.Eswitch == eswitch.ModeSwitchdev,
			BondName:  g.Bond.Name, BondMode: g.Bond.Mode, DatapathType: g.OVS.DatapathType,
			HWOffload: g.OVS.HWOffload != nil && *g.OVS.HWOffload,
			OVSDB:     cfg.OVSDB, Libvirt: cfg.Libvirt,
			AcceptUnverifiedLAG: cfg.AcceptUnverifiedLAG,
			Tunnel:              tunnel,
			OVN:                 o,
		})
	}
	return t
}

// HostEnv is the Env of host h: its NICs (sysfs and kernel), the commands
// and processes of this machine. On a simulated host the NICs are the
// simulation's, while the daemons and this machine's files are real: Host
// is then this machine's root.
func HostEnv(h *host.Host) Env {
	e := Env{Sys: h.FS, Host: h.FS, Kernel: h.Kernel, Run: ExecRunner{}, Probe: HostProber{}, OVN: HostOVN{}, Simulated: h.Simulated()}
	if e.Simulated {
		e.Host = sysfs.Dir("/")
	}
	return e
}
