// Package eswitch is the devlink and netlink side of VF-LAG: eswitch mode,
// representors, the bond and the hardware LAG state. Kernel is the narrow
// interface to the kernel (Netlink is the real one); the readers here add
// what sysfs and debugfs show (phys_port_name, phys_switch_id, bonding, mlx5
// lag state); SetBondOption writes a bonding option through sysfs, the same
// way on the real kernel and the simulated host. ReadDatapath reads the Open vSwitch kernel datapath's lookup
// counters (genetlink ovs_datapath, what `ovs-dpctl show -s` prints), where
// a Kernel can (DatapathReader: the real one, not the simulated host).
//
// Netlink dumps (ip link show, devlink port show) are asked again, up to 5
// times, when the kernel marks them interrupted (NLM_F_DUMP_INTR: the table
// changed while being read, as representors do during an eswitch mode
// change); a partial dump is never used. Netlink{} opens its sockets per
// call, in the calling thread's network namespace.
//
// Ordering constraints, for mlx5 (DESIGN.md section 2):
//
//	a. flow_steering_mode=smfs only while the eswitch is legacy (EOPNOTSUPP in switchdev).
//	b. Every VF is unbound before the eswitch leaves legacy (firmware: bad resource state).
//	c. Both PFs are in switchdev before the bond is made: uplink LAG with SR-IOV needs it.
//	d. A port is enslaved while it is down (EPERM "Device can not be enslaved while up");
//	   bond and ports come up afterwards.
//	e. LAG activates asynchronously after the bond is complete (up to ~10 s); read
//	   /sys/kernel/debug/mlx5/<pf0>/lag/state, and report "unverified" without debugfs.
//	e2. A bond option changes live (miimon, xmit_hash_policy, min_links, updelay,
//	   downdelay), with the bond down (lacp_rate, ad_select: EBUSY while up), or with
//	   the bond down and without slaves (mode: ENOTEMPTY); releasing a slave
//	   deactivates the hardware LAG (bond_options.c, BOND_OPTFLAG_IFDOWN/NOSLAVES).
//	   mlx5 takes xmit_hash_policy into its LAG only when the PFs are enslaved
//	   (HashTakenAtEnslave): the NIC sees a live write only after a re-enslave.
//	f. Representors are mapped by devlink port (pcivf, pfnum, vfnum), then by
//	   phys_port_name pf<p>vf<n> plus phys_switch_id; never by name pattern.
package eswitch
