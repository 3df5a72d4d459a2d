package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// BondAlias marks a bond as vflag's, so teardown never removes one it did not make.
func BondAlias(group string) string { return "vflag:" + group }

// bondKind creates the bond, down and without slaves, marked with vflag's
// alias, only after both PFs are in switchdev (DESIGN.md step 6); on a bond
// it made earlier, it converges the options the config sets (mode, miimon,
// lacp_rate and ad_select for 802.3ad, xmit_hash_policy outside
// active-backup, primary for active-backup, updelay, downdelay, min_links)
// at the cost the kernel sets for each (bond_options.c, Linux 6.1):
//
//   - miimon, xmit_hash_policy, min_links, updelay, downdelay, primary
//     (RAWVAL): no flag, written live;
//   - lacp_rate, ad_select: BOND_OPTFLAG_IFDOWN, the bond goes down first
//     (EBUSY while up); link.up brings it up again;
//   - mode: BOND_OPTFLAG_NOSLAVES and IFDOWN, the slaves are released
//     (ENOTEMPTY otherwise) and the bond goes down; bond.enslave and link.up
//     re-enslave the PFs (down) and bring everything up.
//   - xmit_hash_policy of a hash bond whose slaves are mlx5 PFs: re-formed
//     like a mode change, since mlx5 takes the policy into its LAG's port
//     selection only when the PFs are enslaved (eswitch.HashTakenAtEnslave).
//
// Releasing a slave or taking the bond down takes the hardware LAG down:
// those changes re-form the bond and are Disruptive. The record is the same
// for both (the undo deletes the bond vflag made; an existing journal entry
// keeps its first capture); a bond vflag did not make is refused.
//
//	ip link add $bond type bond mode $mode miimon $ms ...; ip link set $bond alias vflag:$group
//	echo $value > /sys/class/net/$bond/bonding/$option
type bondKind struct{}

type bondRecord struct {
	Name  string `json:"name"`
	Alias string `json:"alias"`
	// The bond's claim, when the entry created it (claim.go).
	linkClaim
}

func (bondKind) Name() string        { return "bond.create" }
func (bondKind) DependsOn() []string { return []string{modeKind{}.Name()} }

// bondCost is what changing a bonding option costs (bond_options.c flags).
type bondCost int

const (
	costLive   bondCost = iota // no flag: written while the bond runs
	costDown                   // BOND_OPTFLAG_IFDOWN: the bond goes down
	costReform                 // BOND_OPTFLAG_NOSLAVES: the slaves are released
)

var bondOptionCost = map[string]bondCost{"mode": costReform, "lacp_rate": costDown, "ad_select": costDown}

// bondMonitorOptions change only how the bond watches its slaves' links
// (bond_options.c: no flag, written while it runs). Nothing the later
// steps look at depends on them: the slaves, their link state, the
// hardware LAG, the representors, the bridge. A change of these alone is
// teardown.Change.Contained, and the later steps' checks from the plan
// pass stay valid. (xmit_hash_policy, primary and min_links are live too,
// but steer traffic or the bond's carrier, which the hardware LAG follows.)
var bondMonitorOptions = map[string]bool{"miimon": true, "updelay": true, "downdelay": true}

// bondOptChange is one option that differs from the config.
type bondOptChange struct {
	Option, From, To string
	// reform: the slaves are released and enslaved again whatever the
	// kernel's flags say (xmit_hash_policy under an mlx5 LAG).
	reform bool
	// quiet: a write that goes with the others and says nothing of its
	// own (the summary leaves it out).
	quiet bool
}

func (c bondOptChange) cost() bondCost {
	if c.reform {
		return costReform
	}
	return bondOptionCost[c.Option]
}

func (c bondOptChange) summary(bond string) string {
	how := "live"
	switch c.cost() {
	case costReform:
		how = "re-forms the bond: slaves released, hardware LAG down"
		if c.reform {
			how = "re-forms the bond: mlx5 takes xmit_hash_policy into its LAG only when the PFs are enslaved, so they are released and enslaved again; hardware LAG down meanwhile"
		}
	case costDown:
		how = "bond down and up again: hardware LAG down"
	}
	return fmt.Sprintf("%s: %s %s -> %s (%s)", bond, c.Option, orDash(c.From), orDash(c.To), how)
}

// worst is the highest cost of changes.
func worst(changes []bondOptChange) bondCost {
	w := costLive
	for _, c := range changes {
		w = max(w, c.cost())
	}
	return w
}

// bondSpec is the bond the group's config asks for; the primary is the
// netdev of the PF the config names.
func bondSpec(g Group) eswitch.BondSpec {
	b := g.Bond
	spec := eswitch.BondSpec{Name: b.Name, Mode: b.Mode, Miimon: b.Miimon,
		LacpRate: b.LacpRate, XmitHashPolicy: b.XmitHashPolicy, AdSelect: b.AdSelect,
		MinLinks: b.MinLinks, UpDelay: b.UpDelay, DownDelay: b.DownDelay, Alias: BondAlias(g.Name)}
	if i := g.PrimaryIndex(); i >= 0 && i < len(g.PFs) {
		spec.Primary = g.PFs[i].Netdev
	}
	return spec
}

// leavingMode: what goes back to its default before the bond's mode
// changes, while the old mode still lets it be written.
func leavingMode(b eswitch.BondInfo) []bondOptChange {
	var out []bondOptChange
	// Leaving 802.3ad: lacp_rate goes back to the default first, while
	// the mode still allows writing it (EACCES outside 802.3ad), so that
	// the bond equals one made fresh in the new mode.
	if b.Mode == "802.3ad" && b.LacpRate != "" && b.LacpRate != "slow" {
		out = append(out, bondOptChange{Option: "lacp_rate", From: b.LacpRate, To: "slow"})
	}
	// Leaving active-backup: the kernel keeps the primary's name and
	// makes it the primary slave again at an enslave once the bond is
	// active-backup again: clear it while it can be written.
	if b.Mode == "active-backup" && b.Primary != "" {
		out = append(out, bondOptChange{Option: "primary", From: b.Primary, To: ""})
	}
	// sysfs shows the primary only while it is a slave, but the kernel
	// may keep one recorded (written before the enslave: a bond
	// re-formed into active-backup by a run that failed before it
	// enslaved its primary): clear it too.
	if b.Mode == "active-backup" && b.Primary == "" {
		out = append(out, bondOptChange{Option: "primary", From: "", To: "", quiet: true})
	}
	return out
}

// optionChanges compares an existing bond's options with spec, in the order
// they are written: mode first (lacp_rate is refused outside 802.3ad),
// except that leaving 802.3ad resets lacp_rate before the mode. An option
// the config leaves empty means the kernel's default, so a bond whose mode
// changed equals one made fresh in that mode. lacp_rate is compared only
// for 802.3ad (it cannot be written in other modes).
func (e *Env) optionChanges(spec eswitch.BondSpec) ([]bondOptChange, error) {
	b, err := eswitch.ReadBond(e.fs, spec.Name)
	if err != nil {
		return nil, err
	}
	var out []bondOptChange
	if b.Mode != spec.Mode {
		out = append(out, leavingMode(b)...)
		out = append(out, bondOptChange{Option: "mode", From: b.Mode, To: spec.Mode})
	}
	// kept reads an option as the kernel keeps it: ReadBond leaves out those
	// that do not apply to the current mode.
	kept := func(option, shown string, applies bool) (string, error) {
		if applies {
			return shown, nil
		}
		return eswitch.ReadBondOption(e.fs, spec.Name, option)
	}
	if spec.Mode == "802.3ad" {
		want := cmp.Or(spec.LacpRate, "slow")
		cur, err := kept("lacp_rate", b.LacpRate, b.Mode == "802.3ad")
		if err != nil {
			return nil, err
		}
		if cur != want {
			out = append(out, bondOptChange{Option: "lacp_rate", From: cur, To: want})
		}
	}
	{ // in every mode: active-backup ignores it, but keeps it (the default there)
		want := cmp.Or(spec.XmitHashPolicy, "layer2")
		cur, err := kept("xmit_hash_policy", b.XmitHashPolicy, b.Mode != "active-backup")
		if err != nil {
			return nil, err
		}
		if cur != want {
			// mlx5 takes the policy into its LAG's port selection only
			// when the PFs are enslaved: with mlx5 PFs as slaves of a hash
			// bond, the change re-forms the bond so the NIC follows it.
			// (A mode change re-forms the bond anyway.)
			reform := spec.Mode != "active-backup" && b.Mode == spec.Mode && eswitch.HashTakenAtEnslave(e.fs, b.Slaves)
			out = append(out, bondOptChange{Option: "xmit_hash_policy", From: cur, To: want, reform: reform})
		}
	}
	{ // in every mode: the kernel keeps it (no unsuppmodes in 6.1)
		want := cmp.Or(spec.AdSelect, "stable")
		cur, err := kept("ad_select", b.AdSelect, b.Mode == "802.3ad")
		if err != nil {
			return nil, err
		}
		if cur != want {
			out = append(out, bondOptChange{Option: "ad_select", From: cur, To: want})
		}
	}
	if spec.Mode == "active-backup" && b.Primary != spec.Primary {
		// sysfs shows the primary while it is a slave; one recorded before
		// the enslave (a new or re-formed bond) shows empty until then, and
		// writing it again is harmless.
		out = append(out, bondOptChange{Option: "primary", From: b.Primary, To: spec.Primary})
	}
	if b.MinLinks != spec.MinLinks {
		out = append(out, bondOptChange{Option: "min_links", From: strconv.Itoa(b.MinLinks), To: strconv.Itoa(spec.MinLinks)})
	}
	if b.Miimon != spec.Miimon {
		out = append(out, bondOptChange{Option: "miimon", From: strconv.Itoa(b.Miimon), To: strconv.Itoa(spec.Miimon)})
	}
	// updelay and downdelay after miimon: the kernel keeps them in miimon
	// intervals, so a miimon change scales them (bond_option_miimon_set).
	for _, d := range []struct {
		option    string
		cur, want int
	}{{"updelay", b.UpDelay, spec.UpDelay}, {"downdelay", b.DownDelay, spec.DownDelay}} {
		after := d.cur
		if b.Miimon > 0 && b.Miimon != spec.Miimon {
			after = d.cur / b.Miimon * spec.Miimon
		}
		if after != d.want {
			from := strconv.Itoa(d.cur)
			if after != d.cur {
				from += fmt.Sprintf(", %d at miimon %d,", after, spec.Miimon)
			}
			out = append(out, bondOptChange{Option: d.option, From: from, To: strconv.Itoa(d.want)})
		}
	}
	return out, nil
}

// bondReform tells what converging the group's existing bond would cost
// (costLive when there is no bond of vflag's or nothing differs).
func (e *Env) bondReform(g Group) (bondCost, error) {
	spec := bondSpec(g)
	l, err := e.k.Link(spec.Name)
	if err != nil || l.Alias != spec.Alias && !e.claimedBond(l) {
		return costLive, nil // absent, unreadable or not vflag's: other checks report it
	}
	changes, err := e.optionChanges(spec)
	if err != nil {
		return costLive, err
	}
	return worst(changes), nil
}

// claimedBond tells whether an unmarked bond is the one a pending entry
// was creating (claim.go): a bond still as the create left it, down and
// without slaves.
func (e *Env) claimedBond(l eswitch.Link) bool {
	fresh := l.Kind == "bond" && !l.AdminUp && l.Master == ""
	if fresh {
		b, err := eswitch.ReadBond(e.fs, l.Name)
		fresh = err == nil && len(b.Slaves) == 0
	}
	return e.claimed(bondKind{}.Name(), l.Name, l, fresh)
}

func (k bondKind) step(e *Env, g Group) teardown.Step {
	spec := bondSpec(g)
	record := bondRecord{Name: spec.Name, Alias: spec.Alias}
	// own finds the bond: ok false when it does not exist; unmarked when
	// it is the one a crashed run was creating (its alias not yet set);
	// an error when it exists and is not vflag's.
	own := func() (ok, unmarked bool, err error) {
		l, err := e.k.Link(spec.Name)
		if errors.Is(err, eswitch.ErrLinkNotFound) {
			return false, false, nil
		}
		if err != nil {
			return false, false, err
		}
		if l.Alias != spec.Alias {
			if e.claimedBond(l) {
				return true, true, nil
			}
			return false, false, fmt.Errorf("bond %s: an interface of that name exists and was not created by vflag (alias %q); vflag leaves it alone", spec.Name, l.Alias)
		}
		return true, false, nil
	}
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + g.Bond.Name,
		Check: func(context.Context) (teardown.Change, error) {
			exists, unmarked, err := own()
			if err != nil {
				return teardown.Change{}, err
			}
			if !exists {
				rec := record
				if rec.linkClaim, err = e.claimNow(); err != nil {
					return teardown.Change{}, err
				}
				return teardown.Change{Needed: true, Summary: fmt.Sprintf("create bond %s mode %s", spec.Name, spec.Mode), Record: rec}, nil
			}
			changes, err := e.optionChanges(spec)
			if err != nil {
				return teardown.Change{}, err
			}
			if len(changes) == 0 && !unmarked {
				return teardown.Change{Summary: "bond " + spec.Name + " exists"}, nil
			}
			var sums []string
			if unmarked {
				sums = append(sums, fmt.Sprintf("mark bond %s as vflag's (alias %s): a run stopped between its creation and its mark", spec.Name, spec.Alias))
			}
			contained := true
			for _, c := range changes {
				if !c.quiet {
					sums = append(sums, c.summary(spec.Name))
				}
				contained = contained && bondMonitorOptions[c.Option]
			}
			// The record's undo deletes the bond: a rollback does the
			// options this run found again instead.
			return teardown.Change{Needed: true, Summary: strings.Join(sums, "; "), Record: record,
				Disruptive: worst(changes) >= costDown, Contained: contained, Rollback: teardown.RollbackRedo}, nil
		},
		Apply: func(context.Context) error {
			exists, unmarked, err := own()
			if err != nil {
				return err
			}
			if !exists {
				if err := e.k.AddBond(spec); err != nil {
					return err
				}
				// The options AddBond does not set, written while the new
				// bond is down and without slaves.
			}
			if unmarked {
				if err := e.markLink(spec.Name, spec.Alias); err != nil {
					return err
				}
			}
			return e.convergeBond(spec)
		},
	}
}

// convergeBond writes the options that differ, at their cost: slaves
// released and the bond down for the mode, the bond down for lacp_rate;
// the following steps (bond.enslave, link.up) enslave and bring up again.
func (e *Env) convergeBond(spec eswitch.BondSpec) error {
	changes, err := e.optionChanges(spec)
	if err != nil || len(changes) == 0 {
		return err
	}
	w := worst(changes)
	if w >= costReform {
		b, err := eswitch.ReadBond(e.fs, spec.Name)
		if err != nil {
			return err
		}
		for _, s := range b.Slaves {
			if err := e.k.SetMaster(s, ""); err != nil {
				return fmt.Errorf("release %s from %s to re-form it: %w", s, spec.Name, err)
			}
		}
	}
	if w >= costDown {
		if err := e.k.SetLinkUp(spec.Name, false); err != nil {
			return fmt.Errorf("set %s down to change its options: %w", spec.Name, err)
		}
	}
	for _, c := range changes {
		if err := eswitch.SetBondOption(e.fs, spec.Name, c.Option, c.To); err != nil {
			return err
		}
	}
	return nil
}

func (bondKind) Undo(ctx context.Context, e *Env, r bondRecord) (string, error) {
	l, err := e.k.Link(r.Name)
	if gone(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if l.Alias != r.Alias && !e.claimedBond(l) {
		e.log.Warn("bond is no longer vflag's; left alone", "bond", r.Name, "alias", l.Alias)
		return fmt.Sprintf("bond %s is no longer vflag's (alias %q): left alone", r.Name, l.Alias), nil
	}
	if err := e.k.DeleteLink(r.Name); err != nil && !gone(err) {
		return "", err
	}
	return fmt.Sprintf("delete bond %s", r.Name), nil
}

// enslaveKind puts a PF into the bond; the port must be down while it is
// enslaved (DESIGN.md step 6).
//
//	ip link set $pf down; ip link set $pf master $bond
type enslaveKind struct{}

type enslaveRecord struct {
	Slave       string `json:"slave"`
	Bond        string `json:"bond"`
	PriorMaster string `json:"prior_master"`
	PriorUp     bool   `json:"prior_up"`
}

func (enslaveKind) Name() string        { return "bond.enslave" }
func (enslaveKind) DependsOn() []string { return []string{bondKind{}.Name()} }

func (k enslaveKind) step(e *Env, pf eswitch.PF, bond string) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + pf.Netdev,
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

func (enslaveKind) Undo(ctx context.Context, e *Env, r enslaveRecord) (string, error) {
	l, err := e.k.Link(r.Slave)
	if gone(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var did []string
	if l.Master == r.Bond {
		b, berr := e.k.Link(r.Bond)
		if err := e.k.SetMaster(r.Slave, r.PriorMaster); err != nil && !gone(err) {
			return "", err
		}
		did = append(did, "release "+r.Slave+" from "+r.Bond)
		if berr == nil {
			if unbound, err := leaveSharedBlock(e, r.Slave, uint32(b.Index)); err != nil {
				return "", err
			} else if unbound {
				did = append(did, r.Slave+": ingress_block "+strconv.Itoa(b.Index)+" qdisc deleted")
			}
		}
	}
	if l.AdminUp != r.PriorUp {
		if err := e.k.SetLinkUp(r.Slave, r.PriorUp); err != nil && !gone(err) {
			return "", err
		}
		did = append(did, r.Slave+" "+map[bool]string{true: "up", false: "down"}[r.PriorUp])
	}
	return strings.Join(did, "; "), nil
}

func (run *groupRun) bond(context.Context) ([]batch, error) {
	if run.dry {
		c, err := run.e.bondReform(run.g)
		if err != nil {
			return nil, err
		}
		run.bondCost = c
	}
	return one(bondKind{}.step(run.e, run.g)), nil
}

// enslave one PF at a time: the bonding driver serialises them anyway. A
// plan of a bond re-form predicts the enslave its release makes needed.
func (run *groupRun) enslave(context.Context) ([]batch, error) {
	var out []batch
	for _, pf := range run.g.PFs {
		s := enslaveKind{}.step(run.e, pf, run.g.Bond.Name)
		if run.dry && run.bondCost >= costReform {
			s = predicted(s.Kind, s.ID, fmt.Sprintf("enslave %s to %s again (after the mode change)", pf.Netdev, run.g.Bond.Name))
		}
		out = append(out, batch{s})
	}
	return out, nil
}
