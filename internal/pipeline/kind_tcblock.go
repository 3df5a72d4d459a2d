package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/ovs"
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
func (k tcBlockKind) step(e *Env, bond, netdev string, members []string, reAdd *bondReAdd) teardown.Step {
	var noFlowAPI bool // the bond's Check found ovs-vswitchd without a tc flow API for it
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
			noFlowAPI = netdev == bond && reAdd != nil && reAdd.missing(e)
			if noFlowAPI {
				return teardown.Change{Needed: true,
					Summary: fmt.Sprintf("%s: %s; ovs-vswitchd has no tc flow API for it (its log: %q: the kernel refused it its ingress qdisc when ovs-vswitchd added it, its block holding rules in the PFs' hardware), so every flow from it stays in the OVS kernel datapath: the port leaves %s and comes back, the PFs off the block meanwhile", netdev, in, bond+": No suitable flow API found", reAdd.bridge),
					Revert:  fmt.Sprintf("%s: ingress_block %d -> %s", netdev, block, in),
					Record:  tcBlockRecord{Netdev: netdev, Block: block, Prior: in}}, nil
			}
			if in.Present && in.Block == block {
				return teardown.Change{Summary: fmt.Sprintf("%s: on ingress_block %d", netdev, block)}, nil
			}
			how := ""
			if netdev == bond && blockInHW(tc, block) {
				how = "; the block holds rules in the PFs' hardware, which keeps a bond off it: the PFs leave and rejoin, its rules go, and ovs-vswitchd's datapath flows are purged so that the next packets put them back"
			}
			return teardown.Change{Needed: true,
				Summary: fmt.Sprintf("%s: %s -> ingress_block %d (%s's shared tc block)%s", netdev, in, block, bond, how),
				Revert:  fmt.Sprintf("%s: ingress_block %d -> %s", netdev, block, in),
				Record:  tcBlockRecord{Netdev: netdev, Block: block, Prior: in}}, nil
		},
		Apply: func(ctx context.Context) error {
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
			if noFlowAPI {
				if err := reAdd.run(ctx, e, tc, members, uint32(b.Index)); err != nil {
					return err
				}
				if in, err := tc.Ingress(bond); err == nil && in.Present && in.Block == uint32(b.Index) {
					return nil // ovs-vswitchd bound it when it added the port
				}
			}
			left, err := eswitch.BindBondToBlock(tc, bond, members, uint32(b.Index))
			if len(left) > 0 && err == nil {
				e.purgeDatapathFlows(bond, left, b.Index)
			}
			return err
		},
	}
}

// purgeDatapathFlows asks ovs-vswitchd to forget its datapath flows after
// the bond's block was freed with its rules ("ovs-appctl
// revalidator/purge"): it still counts them as installed, and without the
// purge its revalidator finds them missing only after some 20 s of the
// uplink's packets taking the slow path (e2e offload-sid: 23.6 s); after
// it, every flow's next packet puts it back (the rep-to-rep flows too, one
// upcall each). A failure only costs that wait: it is logged.
func (e *Env) purgeDatapathFlows(bond string, left []string, block int) {
	log := e.log.With("step", tcBlockKind{}.Name(), "bond", bond, "pfs", left, "block", block)
	sock, err := ovs.VswitchdSocket(ovs.RunDirOf(e.h.OVSDB))
	if err == nil {
		_, err = ovs.Appctl(sock, "revalidator/purge", nil, 5*time.Second)
	}
	if err != nil {
		log.Warn("the bond's block held rules in hardware: PFs left and rejoined it; ovs-vswitchd's datapath flows not purged, the uplink's flows take the slow path until its revalidator misses them", "err", err)
		return
	}
	log.Info("the bond's block held rules in hardware: PFs left and rejoined it, ovs-vswitchd's datapath flows purged")
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
func (tcBlockKind) Undo(ctx context.Context, e *Env, r tcBlockRecord) (string, error) {
	tc, err := eswitch.AsTC(e.k)
	if err != nil {
		return "", err
	}
	if r.Prior.Present {
		if err := tc.SetIngressBlock(r.Netdev, r.Prior.Block); err != nil && !gone(err) {
			return "", err
		}
		return fmt.Sprintf("%s: %s", r.Netdev, r.Prior), nil
	}
	in, err := tc.Ingress(r.Netdev)
	if gone(err) || err == nil && (!in.Present || in.Block != r.Block) {
		return fmt.Sprintf("%s: ingress qdisc already gone or not vflag's (%s)", r.Netdev, in), nil
	}
	if err != nil {
		return "", err
	}
	if err := tc.DelIngress(r.Netdev); err != nil && !gone(err) {
		return "", err
	}
	return fmt.Sprintf("%s: ingress_block %d qdisc deleted", r.Netdev, r.Block), nil
}

// sharedBlock: with hw-offload, the bond and its PFs on the bond's block.
func (run *groupRun) sharedBlock(context.Context) ([]batch, error) {
	g := run.g
	if !g.BondInBridge() {
		return nil, nil // the bond is no port of the bridge: ovs-vswitchd puts no qdisc on it
	}
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
		s = append(s, tcBlockKind{}.step(run.e, g.Bond.Name, pf, members, nil))
	}
	var reAdd *bondReAdd
	if dp := g.OVS.DatapathType; (dp == "" || dp == "system") && run.repsAll && !run.anyFresh() {
		reAdd = &bondReAdd{group: run, bridge: g.OVS.Bridge, bond: g.Bond.Name}
	}
	return []batch{{tcBlockKind{}.step(run.e, g.Bond.Name, g.Bond.Name, members, reAdd)}, s}, nil
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

// bondReAdd makes ovs-vswitchd add the bond's port again, for a tc flow
// API it lacks. At its start ovs-vswitchd replaces the bond's ingress
// qdisc by one on the bond's block (netdev_tc_init_flow_api); when the PFs
// (bound by vflag, which ovs-vswitchd leaves alone when it exits) hold the
// block's rules in hardware, the kernel refuses that (EOPNOTSUPP, as
// eswitch.BindBondToBlock says) and ovs-vswitchd logs "No suitable flow API
// found" and never offloads a flow of the bond (seen on Debian's 7.2 in e2e
// offload-sid). Only adding the port again makes it try again, and that
// works once the block holds no rule in hardware.
type bondReAdd struct {
	group        *groupRun
	bridge, bond string
}

// missing: ovs-vswitchd's log says it has no flow API for the bond.
func (b *bondReAdd) missing(e *Env) bool {
	path := e.VswitchdLog
	if path == "" {
		path = ovs.DefaultVswitchdLog
	}
	ok, known, err := ovs.FlowAPI(path, b.bond)
	if err != nil {
		e.logUnreadable.Do(func() {
			e.log.Warn("ovs-vswitchd's log cannot be read: whether it found a tc flow API for the bond (after a restart it may not, and every flow of the bond then stays in the kernel datapath) is not checked; set ovs_log to its --log-file",
				"step", tcBlockKind{}.Name(), "bond", b.bond, "ovs_log", path, "err", err)
		})
		return false
	}
	return known && !ok
}

// run adds the bond's port again:
//
//	ovs-vsctl del-port $bridge $bond; tc qdisc del dev $pf ingress (each PF on the block)
//	ovs-vsctl add-port $bridge $bond (with vflag's columns)
//
// Both transactions wait until ovs-vswitchd applied them. The uplink is
// out of the bridge for that time (some 100 ms); the PFs' steps bind them
// to the bond's block again after.
func (b *bondReAdd) run(ctx context.Context, e *Env, tc eswitch.TC, members []string, block uint32) error {
	c, done, err := e.ovsAt(ctx, e.h.OVSDB)
	if err != nil {
		return err
	}
	defer done()
	spec := b.group.bridgeSpec()
	without := spec
	without.Ports = nil
	for _, p := range spec.Ports {
		if p.Name != b.bond {
			without.Ports = append(without.Ports, p)
		}
	}
	if _, _, err := c.Ensure(ctx, without); err != nil {
		return fmt.Errorf("take %s out of %s: %w", b.bond, b.bridge, err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		return err
	}
	for _, m := range append([]string{b.bond}, members...) {
		if _, err := leaveSharedBlock(e, m, block); err != nil {
			return err
		}
	}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		return fmt.Errorf("add %s to %s again: %w", b.bond, b.bridge, err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		return err
	}
	// ovs-vswitchd logs the outcome as it adds the port; a second refusal
	// is an error to read in its log, not a change to make again on every up.
	for range 10 {
		if !b.missing(e) {
			e.log.Info("ovs-vswitchd had no tc flow API for the bond: its port added again", "step", tcBlockKind{}.Name(), "bond", b.bond, "bridge", b.bridge)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("ovs-vswitchd added %s to %s again and still has no tc flow API for it (its log: %q): read its log for why", b.bond, b.bridge, b.bond+": No suitable flow API found")
}
