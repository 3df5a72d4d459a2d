package pipeline

import (
	"context"
	"fmt"
	"net"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// vfMACKind sets a VF's MAC through its PF (DESIGN.md step 3; rtnetlink
// IFLA_VF_MAC; works in both eswitch modes).
//
//	ip link set $pf vf $n mac $mac
type vfMACKind struct{}

type vfMACRecord struct {
	PF    string `json:"pf"` // PF netdev
	VF    int    `json:"vf"`
	Prior string `json:"prior"`
}

func (vfMACKind) Name() string        { return "sriov.vfmac" }
func (vfMACKind) DependsOn() []string { return []string{numVFsKind{}.Name(), modeKind{}.Name()} }

func (k vfMACKind) id(pf string, vf int) string { return fmt.Sprintf("%s/%s/%d", k.Name(), pf, vf) }

func (k vfMACKind) step(e *Env, pf eswitch.PF, vf int, mac string) teardown.Step {
	want, macErr := net.ParseMAC(mac)
	return teardown.Step{
		Kind: k.Name(), ID: k.id(pf.Netdev, vf),
		Check: func(context.Context) (teardown.Change, error) {
			if macErr != nil || len(want) != 6 {
				// The config and the hook check MACs first: never a zero MAC.
				return teardown.Change{}, fmt.Errorf("VF %d MAC on %s: %q is not an Ethernet MAC: %v", vf, pf.Netdev, mac, macErr)
			}
			cur, err := e.VFMAC(pf, vf)
			if err != nil {
				return teardown.Change{}, err
			}
			if cur == "" && !e.pci.HasPCIVFs(pf.Dev) {
				// vflag could set it but never read it back: no idempotence, no undo.
				return teardown.Change{}, fmt.Errorf("VF %d MAC on %s: the driver reports no VF info over netlink (no PCI VFs), so vflag cannot manage VF MACs here; remove the mac from the config", vf, pf.Netdev)
			}
			return teardown.Change{Needed: cur != want.String(), Summary: fmt.Sprintf("%s vf %d: mac %s -> %s", pf.Netdev, vf, orDash(cur), want),
				Revert: fmt.Sprintf("%s vf %d: mac %s -> %s", pf.Netdev, vf, want, restoredMAC(cur)),
				Record: vfMACRecord{PF: pf.Netdev, VF: vf, Prior: cur}}, nil
		},
		Apply: func(context.Context) error { return e.k.SetVFMAC(pf.Netdev, vf, want) },
	}
}

func (vfMACKind) Undo(ctx context.Context, e *Env, r vfMACRecord) (string, error) {
	cur, exists, err := vfMACNow(e.k, r.PF, r.VF)
	if err != nil {
		return "", err
	}
	if !exists {
		return fmt.Sprintf("%s vf %d: gone (its PF or the VF), no mac to restore", r.PF, r.VF), nil
	}
	if err := RestoreVFMAC(e.k, r.PF, r.VF, r.Prior); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s vf %d: mac %s -> %s", r.PF, r.VF, orDash(cur), restoredMAC(r.Prior)), nil
}

// restoredMAC is the MAC RestoreVFMAC puts back for prior.
func restoredMAC(prior string) string {
	if prior == "" {
		return "00:00:00:00:00:00"
	}
	return prior
}

// vfMACNow reads a VF's MAC through its PF; exists is false when the PF
// or the VF is gone.
func vfMACNow(k eswitch.Kernel, pf string, vf int) (string, bool, error) {
	l, err := k.Link(pf)
	if gone(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	for _, v := range l.VFs {
		if v.ID == vf {
			return v.MAC, true, nil
		}
	}
	return "", false, nil
}

// VFMAC reads a VF's MAC from its PF, "" when the VF does not exist yet.
func (e *Env) VFMAC(pf eswitch.PF, vf int) (string, error) {
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

// RestoreVFMAC puts back the MAC a VF had ("" = none: the zero MAC, as
// after VF creation); a PF or VF that is gone needs nothing.
func RestoreVFMAC(k eswitch.Kernel, pf string, vf int, prior string) error {
	l, err := k.Link(pf)
	if gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	exists := false
	for _, v := range l.VFs {
		exists = exists || v.ID == vf
	}
	if !exists {
		return nil
	}
	if prior == "" {
		prior = "00:00:00:00:00:00"
	}
	mac, err := net.ParseMAC(prior)
	if err != nil {
		return fmt.Errorf("bad prior MAC %q of VF %d of %s: %w", prior, vf, pf, err)
	}
	return k.SetVFMAC(pf, vf, mac)
}

// VFMACStep sets VF vf's MAC through pf to mac: the qemu hook's change for
// a domain's hostdev interface (kind sriov.vfmac, the same undo as up's).
func (e *Env) VFMACStep(pf eswitch.PF, vf int, mac string) teardown.Step {
	return vfMACKind{}.step(e, pf, vf, mac)
}

// AdoptVFMAC is a step that journals a VF MAC change already made (by a
// vflag that kept it elsewhere: the qemu hook's old state file): its Check
// reports the change with the given prior MAC, its Apply does nothing. Its
// id is that of VFMACStep for the same VF, so a journaled entry keeps its
// first capture.
func AdoptVFMAC(pf string, vf int, prior string) teardown.Step {
	k := vfMACKind{}
	return teardown.Step{
		Kind: k.Name(), ID: k.id(pf, vf),
		Check: func(context.Context) (teardown.Change, error) {
			return teardown.Change{Needed: true, Summary: fmt.Sprintf("%s vf %d: mac set (adopted; prior %s)", pf, vf, orDash(prior)),
				Record: vfMACRecord{PF: pf, VF: vf, Prior: prior}}, nil
		},
		Apply: func(context.Context) error { return nil },
	}
}

func (run *groupRun) vfMACs(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, v := range run.g.VFs {
		if v.MAC == "" {
			continue
		}
		pf := run.g.PFs[v.PF]
		if run.fresh(pf) {
			// A VF made again has the zero MAC.
			s = append(s, predicted(vfMACKind{}.Name(), vfMACKind{}.id(pf.Netdev, v.VF),
				fmt.Sprintf("%s vf %d: mac 00:00:00:00:00:00 -> %s (after the VFs are made again)", pf.Netdev, v.VF, v.MAC)))
			continue
		}
		s = append(s, vfMACKind{}.step(run.e, pf, v.VF, v.MAC))
	}
	return one(s...), nil
}
