package pipeline

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/teardown"
)

// vfPolicyKind sets one legacy VF setting through the PF (DESIGN.md step
// 5, legacy groups; rtnetlink IFLA_VF_*):
//
//	ip link set $pf vf $n trust on|off                        sriov.vftrust
//	ip link set $pf vf $n spoofchk on|off                     sriov.vfspoofchk
//	ip link set $pf vf $n state auto|enable|disable           sriov.vflinkstate
//	ip link set $pf vf $n min_tx_rate $a max_tx_rate $b       sriov.vfrate
//	ip link set $pf vf $n vlan $vlan qos $qos                 sriov.vfvlan
//
// One kind per setting, not one per VF: each setting is one rtnetlink
// attribute with its own ndo_set_vf_* in the driver, so a driver lacking
// one (igb has no ndo_set_vf_link_state) fails exactly that step, and a
// setting removed from the config leaves the step's id out of the plan, so
// the prune undoes just that setting from its journaled prior value while
// the VF's other settings stay. The two rates are one kind (IFLA_VF_RATE
// sets both at once), and so are VLAN and QoS (IFLA_VF_VLAN).
//
// The record keeps the VF's whole policy as the PF reported it before the
// first change; a kind's Undo restores only its own fields.
type vfPolicyKind struct{ s *vfSetting }

type vfPolicyRecord struct {
	PF    string           `json:"pf"` // PF netdev
	VF    int              `json:"vf"`
	Prior eswitch.VFPolicy `json:"prior"`
}

// vfSetting is what differs between the policy kinds.
type vfSetting struct {
	name  string // journal kind
	key   string // validate's name for it (validate.VFPolicyWant.Set)
	field string // config field(s), for messages
	ndo   string // the driver's ndo_set_vf_<ndo>
	equal func(a, b eswitch.VFPolicy) bool
	set   func(k eswitch.Kernel, pf string, vf int, p eswitch.VFPolicy) error
}

var (
	vfTrust = vfPolicyKind{&vfSetting{
		name: "sriov.vftrust", key: "trust", field: "trust", ndo: "trust",
		equal: func(a, b eswitch.VFPolicy) bool { return a.Trust == b.Trust },
		set: func(k eswitch.Kernel, pf string, vf int, p eswitch.VFPolicy) error {
			return k.SetVFTrust(pf, vf, p.Trust)
		},
	}}
	vfSpoofchk = vfPolicyKind{&vfSetting{
		name: "sriov.vfspoofchk", key: "spoofchk", field: "spoofchk", ndo: "spoofchk",
		equal: func(a, b eswitch.VFPolicy) bool { return a.Spoofchk == b.Spoofchk },
		set: func(k eswitch.Kernel, pf string, vf int, p eswitch.VFPolicy) error {
			return k.SetVFSpoofchk(pf, vf, p.Spoofchk)
		},
	}}
	vfLinkState = vfPolicyKind{&vfSetting{
		name: "sriov.vflinkstate", key: "link_state", field: "link_state", ndo: "link_state",
		equal: func(a, b eswitch.VFPolicy) bool { return a.LinkState == b.LinkState },
		set: func(k eswitch.Kernel, pf string, vf int, p eswitch.VFPolicy) error {
			return k.SetVFLinkState(pf, vf, p.LinkState)
		},
	}}
	vfRate = vfPolicyKind{&vfSetting{
		name: "sriov.vfrate", key: "rate", field: "min_tx_rate/max_tx_rate", ndo: "rate",
		equal: func(a, b eswitch.VFPolicy) bool { return a.MinTxRate == b.MinTxRate && a.MaxTxRate == b.MaxTxRate },
		set: func(k eswitch.Kernel, pf string, vf int, p eswitch.VFPolicy) error {
			return k.SetVFRate(pf, vf, p.MinTxRate, p.MaxTxRate)
		},
	}}
	vfVlan = vfPolicyKind{&vfSetting{
		name: "sriov.vfvlan", key: "vlan", field: "vlan/qos", ndo: "vlan",
		equal: func(a, b eswitch.VFPolicy) bool { return a.Vlan == b.Vlan && a.Qos == b.Qos },
		set: func(k eswitch.Kernel, pf string, vf int, p eswitch.VFPolicy) error {
			return k.SetVFVlanQos(pf, vf, p.Vlan, p.Qos)
		},
	}}
)

func (k vfPolicyKind) Name() string      { return k.s.name }
func (vfPolicyKind) DependsOn() []string { return []string{numVFsKind{}.Name(), modeKind{}.Name()} }

func (k vfPolicyKind) id(pf string, vf int) string { return fmt.Sprintf("%s/%s/%d", k.s.name, pf, vf) }

// newVFPolicy is a VF's policy when it is created (spoof checking aside).
var newVFPolicy = eswitch.VFPolicy{LinkState: eswitch.VFLinkAuto}

// wantedPolicy is a VF's configured policy and the kinds it sets: an unset
// field leaves the VF's value alone; either rate set manages both (the
// other one is then 0: none).
func wantedPolicy(v config.VFConfig) (eswitch.VFPolicy, []vfPolicyKind) {
	var p eswitch.VFPolicy
	var ks []vfPolicyKind
	if v.VLAN != 0 {
		p.Vlan, p.Qos = v.VLAN, v.QoS
		ks = append(ks, vfVlan)
	}
	if v.Trust != nil {
		p.Trust = *v.Trust
		ks = append(ks, vfTrust)
	}
	if v.Spoofchk != nil {
		p.Spoofchk = *v.Spoofchk
		ks = append(ks, vfSpoofchk)
	}
	if v.LinkState != "" {
		p.LinkState = v.LinkState
		ks = append(ks, vfLinkState)
	}
	if v.MinTxRate != 0 || v.MaxTxRate != 0 {
		p.MinTxRate, p.MaxTxRate = v.MinTxRate, v.MaxTxRate
		ks = append(ks, vfRate)
	}
	return p, ks
}

// step: fresh tells, in a plan, that an earlier step makes the VF again
// (a numvfs change): it is then planned as a new VF, whatever it has now.
func (k vfPolicyKind) step(e *Env, pf eswitch.PF, vf int, want eswitch.VFPolicy, dry, fresh bool) teardown.Step {
	s := k.s
	return teardown.Step{
		Kind: s.name, ID: k.id(pf.Netdev, vf),
		Check: func(context.Context) (teardown.Change, error) {
			cur, ok, err := e.VFPolicy(pf.Netdev, vf)
			if err != nil {
				return teardown.Change{}, err
			}
			if dry && fresh {
				ok = false
			}
			if !ok {
				if dry {
					// A new VF starts from the kernel's zero policy (vlan 0,
					// trust off, link-state auto, no rates); its spoof
					// checking is the driver's default (mlx5 off, Intel on).
					if s.ndo != "spoofchk" && s.equal(newVFPolicy, want) {
						return teardown.Change{Summary: fmt.Sprintf("%s vf %d: %s (a new VF's)", pf.Netdev, vf, want.Field(s.key))}, nil
					}
					return teardown.Change{Needed: true, Summary: fmt.Sprintf("%s vf %d: %s (after VF creation)", pf.Netdev, vf, want.Field(s.key))}, nil
				}
				// vflag could set it but never read it back: no idempotence, no undo.
				return teardown.Change{}, fmt.Errorf("VF %d %s on %s: the PF reports no such VF over netlink (IFLA_VFINFO_LIST), so vflag cannot read back or undo it; remove %s from the config for this VF", vf, s.field, pf.Netdev, s.field)
			}
			return teardown.Change{Needed: !s.equal(cur, want), Summary: fmt.Sprintf("%s vf %d: %s -> %s", pf.Netdev, vf, cur.Field(s.key), want.Field(s.key)),
				Revert: fmt.Sprintf("%s vf %d: %s -> %s", pf.Netdev, vf, want.Field(s.key), cur.Field(s.key)),
				Record: vfPolicyRecord{PF: pf.Netdev, VF: vf, Prior: cur}}, nil
		},
		Apply: func(ctx context.Context) error {
			err := s.set(e.k, pf.Netdev, vf, want)
			if err != nil && s.ndo == "rate" && errors.Is(err, syscall.EINVAL) && e.waitCarrier(ctx, pf.Netdev, carrierWait) {
				err = s.set(e.k, pf.Netdev, vf, want) // the link came up: igb knows its speed now
			}
			if err != nil {
				return e.vfPolicyErr(pf, vf, s, err)
			}
			return nil
		},
	}
}

// carrierWait bounds the wait for a PF's link before a refused rate is
// tried again: igb checks a max rate against the link speed, which it
// learns when the link comes up (igb_watchdog_task), a second or more after
// the PF is set up (phase 5 just did, at boot too).
const carrierWait = 10 * time.Second

// waitCarrier waits, when pf's link is not up, until it is (operstate up)
// or the bound passes; it tells whether the link came up meanwhile.
func (e *Env) waitCarrier(ctx context.Context, pf string, bound time.Duration) bool {
	l, err := e.k.Link(pf)
	if err != nil || l.OperState == "up" || !l.AdminUp {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			if l, err := e.k.Link(pf); err == nil && l.OperState == "up" {
				return true
			}
		}
	}
}

// vfPolicyErr names the PF, VF, setting and driver of a refused setting.
// The kernel tells no more than the errno: rtnetlink answers EOPNOTSUPP
// when the driver lacks the ndo, and the driver itself when it refuses it
// in this mode (mlx5 in switchdev) or on this device.
func (e *Env) vfPolicyErr(pf eswitch.PF, vf int, s *vfSetting, err error) error {
	drv, derr := e.pci.Driver(pf.Addr)
	if derr != nil || drv == "" {
		drv = "?"
	}
	switch {
	case errors.Is(err, syscall.EOPNOTSUPP):
		why := fmt.Sprintf("no ndo_set_vf_%s", s.ndo)
		if e.modeOf(pf) == eswitch.ModeSwitchdev {
			why = "the PF's eswitch is in switchdev, where mlx5 refuses it"
		}
		return fmt.Errorf("%s vf %d: the PF's driver %s does not support the VF setting %s (EOPNOTSUPP: %s); remove %s from this VF's entry in the config: %w", pf.Netdev, vf, drv, s.field, why, s.field, err)
	case errors.Is(err, syscall.EINVAL):
		hint := ""
		if s.ndo == "rate" {
			hint = " (igb, for one, takes only max_tx_rate, only on 82576, only while the PF's link is up at 1000 Mb/s; vflag waited up to 10 s for the link)"
		}
		return fmt.Errorf("%s vf %d: the PF's driver %s refused the VF setting %s%s: %w", pf.Netdev, vf, drv, s.field, hint, err)
	}
	return fmt.Errorf("%s vf %d: set %s (driver %s): %w", pf.Netdev, vf, s.field, drv, err)
}

func (k vfPolicyKind) Undo(ctx context.Context, e *Env, r vfPolicyRecord) (string, error) {
	cur, ok, err := e.VFPolicy(r.PF, r.VF)
	if gone(err) || err == nil && !ok {
		return "", nil // the PF or the VF is gone, and its policy with it
	}
	if err != nil {
		return "", err
	}
	if k.s.equal(cur, r.Prior) {
		return fmt.Sprintf("%s vf %d: %s already", r.PF, r.VF, r.Prior.Field(k.s.key)), nil
	}
	if err := k.s.set(e.k, r.PF, r.VF, r.Prior); err != nil {
		return "", fmt.Errorf("%s vf %d: restore %s: %w", r.PF, r.VF, r.Prior.Field(k.s.key), err)
	}
	return fmt.Sprintf("%s vf %d: %s -> %s", r.PF, r.VF, cur.Field(k.s.key), r.Prior.Field(k.s.key)), nil
}

// VFPolicy reads a VF's policy from its PF; ok is false when the PF does
// not list the VF (not created yet, or no VF info over netlink).
func (e *Env) VFPolicy(pf string, vf int) (eswitch.VFPolicy, bool, error) {
	l, err := e.k.Link(pf)
	if err != nil {
		return eswitch.VFPolicy{}, false, err
	}
	for _, v := range l.VFs {
		if v.ID == vf {
			return v.VFPolicy, true, nil
		}
	}
	return eswitch.VFPolicy{}, false, nil
}

// VFPolicyWants are the legacy VF policies a group's config sets, for
// `vflag validate` (none in a switchdev group).
func VFPolicyWants(g *config.Group) []validate.VFPolicyWant {
	if g.Switchdev() {
		return nil
	}
	var out []validate.VFPolicyWant
	for _, v := range g.VFs {
		want, ks := wantedPolicy(v)
		if len(ks) == 0 {
			continue
		}
		w := validate.VFPolicyWant{PF: v.PF, VF: v.VF, Want: want}
		for _, k := range ks {
			w.Set = append(w.Set, k.s.key)
		}
		out = append(out, w)
	}
	return out
}

// vfPolicy: each configured VF's policy settings, one batch (independent
// steps, concurrent).
func (run *groupRun) vfPolicy(context.Context) ([]batch, error) {
	var s []teardown.Step
	for _, v := range run.g.VFs {
		want, ks := wantedPolicy(v)
		for _, k := range ks {
			pf := run.g.PFs[v.PF]
			s = append(s, k.step(run.e, pf, v.VF, want, run.dry, run.fresh(pf)))
		}
	}
	return one(s...), nil
}
