package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// tcBlockKind binds the bond and each of its PFs to the bond's shared tc
// ingress block (index = the bond's ifindex), where ovs-vswitchd with
// hw-offload keeps the bond port's rules (eswitch.SharedBlock).
//
//	tc qdisc del dev $pf ingress; tc qdisc add dev $pf ingress_block $bond_ifindex ingress
//
// ovs-vswitchd binds a member itself only on a link event of the member
// that it sees while the member is not in its table of LAG members
// (lib/netdev-linux.c netdev_linux_update_lag): after it restarts nothing
// rebinds the PFs until some event comes, and a qdisc deleted later is
// never rebound while the member stays enslaved. Releasing and re-enslaving
// a PF would make the event but drops the hardware LAG; this step does what
// netdev_linux_update_lag does (delete the ingress qdisc, add one on the
// block) and nothing else. ovs-vswitchd tolerates it: its rules live in the
// block, not on the member (tc_make_tcf_id with the block id), the kernel
// replays them to a device that binds, and a later link event of a member
// it does not know makes it do the same two calls again.
type tcBlockKind struct{}

type tcBlockRecord struct {
	Netdev string          `json:"netdev"`
	Block  uint32          `json:"block"` // what vflag bound it to
	Prior  eswitch.Ingress `json:"prior"`
}

func (tcBlockKind) Name() string { return "tc.ingress-block" }

// DependsOn: a new bond has a new ifindex, a PF enslaved again or a bridge
// made again needs the binding again.
func (tcBlockKind) DependsOn() []string {
	return []string{bondKind{}.Name(), enslaveKind{}.Name(), ovsBridgeKind{}.Name()}
}

// step binds netdev (the bond or one of its members, the PFs) to the
// bond's block. The bond's step lets the members leave and rejoin when the
// kernel refuses the bond a block they hold rules of in hardware
// (eswitch.BindBondToBlock).
func (k tcBlockKind) step(e *Env, bond, netdev string, members []string) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + netdev,
		Check: func(context.Context) (teardown.Change, error) {
			tc, err := eswitch.AsTC(e.k)
			if err != nil {
				return teardown.Change{Summary: netdev + ": no tc on this host, left alone"}, nil
			}
			b, err := e.k.Link(bond)
			if errors.Is(err, eswitch.ErrLinkNotFound) {
				// Only a plan gets here: the bond is made earlier in the run.
				return teardown.Change{Needed: true, Summary: fmt.Sprintf("%s: onto %s's shared tc block (ingress_block = its ifindex)", netdev, bond)}, nil
			}
			if err != nil {
				return teardown.Change{}, err
			}
			in, err := tc.Ingress(netdev)
			if err != nil {
				return teardown.Change{}, err
			}
			block := uint32(b.Index)
			if in.Present && in.Block == block {
				return teardown.Change{Summary: fmt.Sprintf("%s: on ingress_block %d", netdev, block)}, nil
			}
			how := ""
			if netdev == bond && blockInHW(tc, block) {
				how = "; the block holds rules in the PFs' hardware, which keeps a bond off it: the PFs leave and rejoin, its rules go and ovs-vswitchd puts them back as packets miss"
			}
			return teardown.Change{Needed: true,
				Summary: fmt.Sprintf("%s: %s -> ingress_block %d (%s's shared tc block)%s", netdev, in, block, bond, how),
				Revert:  fmt.Sprintf("%s: ingress_block %d -> %s", netdev, block, in),
				Record:  tcBlockRecord{Netdev: netdev, Block: block, Prior: in}}, nil
		},
		Apply: func(context.Context) error {
			tc, err := eswitch.AsTC(e.k)
			if err != nil {
				return err
			}
			b, err := e.k.Link(bond)
			if err != nil {
				return err
			}
			if netdev != bond {
				return tc.SetIngressBlock(netdev, uint32(b.Index))
			}
			left, err := eswitch.BindBondToBlock(tc, bond, members, uint32(b.Index))
			if len(left) > 0 {
				slog.Info("the bond's block held rules in hardware: PFs left and rejoined it", "step", k.Name(), "bond", bond, "pfs", left, "block", b.Index)
			}
			return err
		},
	}
}

// blockInHW: a rule of the block is in some device's hardware. A failed
// read counts as no (the apply finds out).
func blockInHW(tc eswitch.TC, block uint32) bool {
	fs, err := tc.BlockFilters(block)
	if err != nil {
		return false
	}
	for _, f := range fs {
		if f.InHW {
			return true
		}
	}
	return false
}

// Undo puts back the ingress qdisc from before (its filters were gone
// with the replaced qdisc), or deletes the one vflag added while it is
// still on vflag's block.
func (tcBlockKind) Undo(ctx context.Context, e *Env, r tcBlockRecord) error {
	tc, err := eswitch.AsTC(e.k)
	if err != nil {
		return err
	}
	if r.Prior.Present {
		if err := tc.SetIngressBlock(r.Netdev, r.Prior.Block); err != nil && !gone(err) {
			return err
		}
		teardown.SayUndone(ctx, "%s: %s", r.Netdev, r.Prior)
		return nil
	}
	in, err := tc.Ingress(r.Netdev)
	if gone(err) || err == nil && (!in.Present || in.Block != r.Block) {
		teardown.SayUndone(ctx, "%s: ingress qdisc already gone or not vflag's (%s)", r.Netdev, in)
		return nil
	}
	if err != nil {
		return err
	}
	if err := tc.DelIngress(r.Netdev); err != nil && !gone(err) {
		return err
	}
	teardown.SayUndone(ctx, "%s: ingress_block %d qdisc deleted", r.Netdev, r.Block)
	return nil
}

// sharedBlock: with hw-offload, the bond and its PFs on the bond's block.
func (run *groupRun) sharedBlock(context.Context) ([]batch, error) {
	g := run.g
	if g.OVS.HWOffload == nil || !*g.OVS.HWOffload {
		return nil, nil
	}
	var members []string
	for _, pf := range g.PFs {
		members = append(members, pf.Netdev)
	}
	// The bond first, then its members, as ovs-vswitchd binds them: the
	// bond's step may make the members leave and rejoin.
	var s []teardown.Step
	for _, pf := range members {
		s = append(s, tcBlockKind{}.step(run.e, g.Bond.Name, pf, members))
	}
	return []batch{{tcBlockKind{}.step(run.e, g.Bond.Name, g.Bond.Name, members)}, s}, nil
}

// leaveSharedBlock deletes the ingress qdisc of a PF released from a bond
// while it is still on the bond's block, as ovs-vswitchd does for a member
// that leaves a bond (netdev_linux_update_lag): the block is the bond's,
// and ovs-vswitchd does it only for members it bound itself.
func leaveSharedBlock(e *Env, netdev string, block uint32) (bool, error) {
	tc, err := eswitch.AsTC(e.k)
	if err != nil {
		return false, nil
	}
	in, err := tc.Ingress(netdev)
	if gone(err) || err == nil && (!in.Present || in.Block != block) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := tc.DelIngress(netdev); err != nil && !gone(err) {
		return false, err
	}
	return true, nil
}
