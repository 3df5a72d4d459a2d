// Package pipeline is the order of `vflag up` (DESIGN.md section 2): the
// phases as one table (phases.go), the kinds of change (kind_*.go: a kind,
// or a family of kinds such as the VF policy, with the phase functions that
// build their steps), preflight,
// the barriers (LAG wait, verification) and the undo registry that
// `vflag down` uses.
//
// # The order, and why
//
//	 0 preflight        before any write: PFs exist, are ports of one NIC, numvfs fits,
//	                    bond name free, OVSDB/libvirt reachable; then (converge.go, holders.go)
//	                    no VF that a change destroys or rebinds is held: the kernel's answer
//	                    (a process with its vfio group open, a host netdev in use), with
//	                    libvirt's domain names where libvirtd runs
//	 1 sriov.autoprobe  autoprobe off first, so the VFs made next get no host driver
//	 1 devlink.param    flow_steering_mode: changeable in legacy mode only (default
//	                    smfs for switchdev groups, only while the eswitch is legacy)
//	 2 sriov.numvfs     both PFs in parallel (the slow part on real cards), wait for virtfnN
//	 3 sriov.vfmac      through the PF; mlx5 refuses a VF VLAN in switchdev (tags go on OVS ports)
//	 4 sriov.unbind     firmware fails the mode change and LAG activation while a VF is bound
//	 5 eswitch.mode     switchdev on both PFs (refused while a VF is bound)
//	 5 eswitch.tc-offload  on the uplink, after switchdev
//	   link.up          (legacy groups: the PFs up; no bond does it)
//	   link.mtu         (legacy groups: the group's mtu on the PFs)
//	   sriov.vfvlan, sriov.vftrust, sriov.vfspoofchk, sriov.vflinkstate, sriov.vfrate
//	                    legacy groups only: each VF's policy through the PF (mlx5 answers
//	                    EOPNOTSUPP for all but the rate in switchdev, where OVS and
//	                    devlink-rate do it). After the VF MACs and the PFs up (igb takes a
//	                    max rate only at the PF's link speed, 0 while down), before the host
//	                    drivers bind (8) and libvirt attaches (11): a VF's driver and guest
//	                    start with their VLAN, trust and rate in place; in stage pre they
//	                    are in place before the network, NetworkManager and libvirtd start
//	 6 bond.create      only after both PFs are in switchdev (uplink LAG needs it);
//	                    on an existing bond: its options, at the kernel's cost (live;
//	                    bond down; slaves released for the mode: a disruptive re-form)
//	   bond.enslave     PFs enslaved while down,
//	   link.up          then bond and PFs up
//	   link.mtu         the group's mtu on the bond (its slaves follow it); legacy: on the PFs
//	 7 lag.wait         barrier: hardware LAG active (debugfs), up to lag_timeout
//	 8 sriov.bind       host drivers strictly after LAG: QPs made before cannot use the other port
//	   link.mtu         legacy: the group's mtu on the host netdevs of bound VFs
//	 9 reps.up          representors by devlink port, then phys_port_name + switch id; set up
//	   link.mtu         the group's mtu on the representors
//	   devlink.rate-node  rate_groups as devlink rate nodes, on each owning PF's devlink:
//	                    after switchdev (mlx5 makes nodes in switchdev only, and
//	                    a node blocks the mode change back: undone before it)
//	   devlink.rate-leaf  per-VF tx_max/tx_share/parent on the VF port's leaf: the leaf
//	                    exists once the VF's devlink port does (switchdev, the VF
//	                    made), the same port the representors were mapped by; after
//	                    the nodes, which a leaf's parent must name (undo: leaves
//	                    leave a node before it is deleted)
//	10 ovs.other-config tc-policy (before hw-offload is on), max-idle
//	   ovs.bridge       one OVSDB transaction: bridge, bond, representors (VLAN
//	                    columns, mtu_request), hw-offload
//	   tc.ingress-block with hw-offload: bond and PFs on the bond's shared tc block
//	                    (ingress_block = the bond's ifindex); after the bond (its
//	                    ifindex) and the bridge (ovs-vswitchd then puts the bond's
//	                    rules in that block); undone before the bond is deleted
//	11 libvirt.attach   hostdev interfaces, one domain at a time
//	11 libvirt.network  the group's VF pool (hostdev network), after the
//	                    attachments take their VFs; before the bridge reads its
//	                    held ports' portgroup VLANs (10 reads libvirt's ports)
//	12 verify           barrier: LAG, ofports, hw-offload, attachments
//
// Stage pre (vflag-pre.service at boot, before the network, OVS and
// libvirtd) runs phases 1-5; stage all runs everything. Each phase returns
// batches: the steps of one batch are independent (both PFs) and run
// concurrently, journaled in one write; batches run in order. Undo
// (teardown.Runner.Down) runs the journal in exact reverse: attachments go
// before OVS rows, the bond before the eswitch returns to legacy, numvfs
// to 0 after that, legacy settings last.
//
// # Kinds of change
//
// A kind is declared once, in its own file: its journal name, what it
// depends on, its record (the target and the prior state: all its undo
// needs, never the config), its step constructor and its Undo. Kinds lists
// them; the undo registry is built from that list, and a kind type without
// an Undo method does not satisfy the kind interface, so it cannot be
// listed: it does not compile. Adding a kind: write kind_<name>.go, list
// it in Kinds, and put its constructor in the phase table.
//
// What a kind depends on (DependsOn) decides what the forward pass reads
// again after a write: a step the plan pass found converged is taken as
// converged unless this run has written its own kind or one it depends on,
// directly or through others (teardown.Runner.DependsOn). A VLAN change
// (ovs.bridge) so re-reads the OVS steps after it (ovs.port, hw-offload,
// tc.ingress-block) and nothing of libvirt or devlink. By the same rule a
// needed change of a Replannable step (the bridge's) is applied as the
// plan pass computed it, without a second read (teardown.Runner.Planned),
// and verify of a run whose only write rewrote columns of the bridge's
// kept ports takes the plan pass's ofports. A change that leaves what its
// dependents look at as it was (teardown.Change.Contained: a bond's
// miimon, updelay or downdelay) makes nothing read again, and verify of a
// run that wrote only such changes takes the plan pass's read too. A prune that wrote
// before the forward pass makes every step read again; reads a phase shares
// between its steps (the VF list, the representors, the bridge for verify)
// are taken again after any write. The order of prunes against changes is
// not derived from DependsOn: prunes run before the forward pass, except
// the kinds in pruneLate (converge.go), which an object the forward pass
// keeps may still refer to.
//
// # Step ids
//
// Ids come from logical coordinates known before anything is created: the
// device or PF netdev, the VF index, the bridge, the domain
// ("sriov.bind/ens1f1np1/vf1", "libvirt.attach/vm1/ens1f0np0/vf0"). A plan
// therefore lists the same ids up then changes; where a step's target does
// not exist before earlier steps run (VFs, representors), the plan uses a
// predicted step with the same id. So it does where an earlier planned step
// makes the target again: a numvfs change from a non-zero count destroys
// every VF, and what the old VFs carried (MAC, legacy policy, host driver,
// representors and their MTU, the bridge's ports, rate leaves) is planned
// against new VFs (groupRun.remade), not read from the host as it stands.
// In a switchdev group that numvfs write first takes the ports of the
// representors it destroys off the bridge (repPortsLeave): ovs-vswitchd
// deletes them while the kernel makes the new VFs, and the bridge step
// after it only adds the new representors.
// The convergence tables check plan == up (same ids, as many) at every
// transition.
//
// # A failed run
//
// A run that fails after its first write (or is interrupted) is rolled back
// to the state the host had before it (teardown.Runner's rollback): each
// change is undone from what the plan pass found before any write
// (Runner.Prior), and what an undo cannot put back is done again from the
// config of the last run that ended, which the journal keeps (Env.redo,
// over the groups those objects belong to, leaving alone what the undos put
// back): a bond's options, a bridge's ports and tags, a rate node's rates,
// an attachment or pool that existed, what a prune removed, and everything
// the VFs carried when a numvfs change (or an eswitch mode change with VFs)
// made them again. Each kind says which of the two its change needs
// (teardown.Change.Rollback; attachments and networks: undoRemoves). A run
// that succeeds, or leaves the host degraded, ends (Env.ended): its changes
// are no longer rolled back, and the journal keeps its config.
//
// Journals written by released versions are kept in testdata/journals and
// must keep undoing (cmd/vflag TestJournalCompat).
package pipeline
