// Package sim is a simulated host with dual-port NVIDIA/Mellanox ConnectX
// (mlx5) NICs, so that vflag's whole pipeline can run and be tested on a
// machine without an SR-IOV NIC.
//
// One model of the NICs serves both of vflag's kernel surfaces: the
// sysfs.FS from Host.FS (sysfs and debugfs files) and eswitch.Kernel
// (devlink, rtnetlink, ethtool), which *Host implements. A change made
// through one is seen through the other: switchdev creates representors that
// /sys/class/net, /sys/bus/pci/devices/<pf>/net, Links and Ports all show.
//
// # State, time and processes
//
// The state lives in <dir>/host.json, written after every change (temp file,
// rename) under an flock(2) on <dir>/host.lock, and re-read by every call
// when another process or Host changed it (an fstat of the file last read
// or written tells), so several vflag processes share one host. Reads take
// no lock: the file is only ever replaced whole. Slow things are stored as absolute wall-clock times and
// become visible when that time has come: VF i's PCI device, virtfn<i> link,
// VF netdev and representor appear Latency.VFCreate*(i+1) after the
// sriov_numvfs write; the hardware LAG reads active Latency.LAGActivation
// after it became eligible. Reading therefore never changes the state, and
// creation progresses between processes. SetEswitchMode blocks for
// Latency.ModeChange without holding any lock; meanwhile the PF reports its
// old mode and a second mode change gets EBUSY "Can't change mode, E-Switch
// is busy". SetLinksUp (eswitch.LinksUpSetter) is SetLinkUp for many names
// in one state write; the state's generation counter ("gen") still counts
// one write per interface changed, as the kernel would see them.
//
// Errors: the FS returns *fs.PathError wrapping the bare syscall.Errno, as
// the real sysfs does; the message the kernel would log goes to the
// simulated dmesg (shown by Dump). Kernel methods return errors wrapping the
// syscall.Errno and, where KERNEL-FACTS.md gives one, the kernel's extack or
// log message; eswitch.ErrLinkNotFound and eswitch.ErrNotSupported are
// wrapped too where the interface asks for them.
//
// # What is modelled, and where each rule comes from
//
// The sections are those of shared/KERNEL-FACTS.md.
//
//   - §1 PCI SR-IOV. sriov_totalvfs, sriov_numvfs (not a u16: EINVAL; above
//     totalvfs: ERANGE; same value: no-op; non-zero to another non-zero:
//     EBUSY with the "%d VFs already enabled. Disable before enabling %d VFs"
//     log line; 0 removes every VF, force-unbinding it), sriov_offset,
//     sriov_stride, sriov_vf_device, sriov_drivers_autoprobe (kstrtobool;
//     used at the next enable), the VF BDF rule (pci_iov_virtfn_bus/_devfn:
//     PF0's VFs start right after the NIC's last PF function, PF1's after
//     PF0's last possible VF, stride 1, devfn overflow carries into the bus),
//     virtfn<i>/physfn/driver links with the kernel's relative targets,
//     driver_override ("(null)" when unset, cut at '\n', empty clears, ≥4095
//     bytes EINVAL), drivers/<drv>/bind (no device or no match: ENODEV;
//     already bound: EBUSY), unbind (not bound to that driver: ENODEV) and
//     drivers_probe (unknown device: ENODEV; succeeds even when nothing
//     binds). Drivers: the NIC's (mlx5_core, which matches the NIC's IDs and
//     creates a VF netdev eth<N>) and vfio-pci (matches only through
//     driver_override; no new_id).
//   - §2 /sys/class/net. address, operstate, carrier (EINVAL when admin
//     down), ifindex, ifalias, mtu, phys_port_id (EOPNOTSUPP on every mlx5
//     netdev), phys_port_name (uplink p<port> in both modes, representor
//     pf<p>vf<n>, VF netdev/bond/lo EOPNOTSUPP), phys_switch_id (16 lowercase
//     hex digits shared by both PFs of a NIC and their representors, also in
//     legacy; EOPNOTSUPP elsewhere), device and master links. The layout is
//     the kernel's: /sys/class/net/<if> and /sys/bus/pci/devices/<bdf> are
//     symlinks into /sys/devices, representors are children of their PF's
//     PCI function.
//   - §3 devlink. One instance pci/<bdf> per PF; ports: uplink (physical,
//     index (vhca<<16)|0xffff, port_number = PF index) and, in switchdev, one
//     pcivf port per VF (index (vhca<<16)|(vf+1), pfnum, vfnum) whose netdev
//     is the representor. The vhca_id is the PF index. eswitch mode
//     legacy/switchdev: same mode is a no-op; an active LAG is torn down and
//     re-evaluated; representors exist exactly in switchdev. The kernel does
//     not check for bound VFs, the firmware does: switchdev with a VF of that
//     PF bound to any driver fails with EINVAL, extack "Failed setting
//     eswitch to offloads" and a "... failed, status bad resource
//     state(0x9) ..." log line (DESIGN.md §2 step 4; the command name in that
//     line is made up). A change out of switchdev while a flower rule is
//     in the hardware of the PF's eswitch (its uplink or a representor):
//     EBUSY "Can't change mode, E-Switch is busy" (mlx5_esw_try_lock: the
//     eswitch has users). Param flow_steering_mode (fs_core.c
//     mlx5_fs_mode_validate): in switchdev smfs EOPNOTSUPP "Moving to smfs
//     is not supported when eswitch offloads enabled.", dmfs accepted; with
//     the spec's kernel at 6.17 or later every value EOPNOTSUPP "Changing
//     fs mode is not supported when eswitch offloads enabled."; anything
//     else EINVAL "Bad parameter: supported values are [\"dmfs\",
//     \"smfs\"]". Param esw_multiport: see §5. Other parameters
//     ErrNotSupported.
//     devlink-rate (rate.go): a leaf per VF port in switchdev, born without
//     limits or parent, gone with the VF; every node gone when numvfs goes
//     to 0 in switchdev (eswitch.c mlx5_eswitch_disable_sriov:
//     devl_rate_nodes_destroy); nodes in switchdev only (else
//     EOPNOTSUPP), same name EEXIST, unknown node/leaf/parent ENODEV, a
//     second parent EBUSY, deleting a node with children EBUSY, any eswitch
//     mode change while a node exists EBUSY "Rate node(s) exists.", rates
//     in whole Mbit/s (else EINVAL), tx_share > tx_max accepted (net/core/devlink.c
//     and mlx5 esw/qos.c of 6.1; the EBUSY rules checked on netdevsim in e2e
//     switchdev.sh).
//   - §4 Bonding. Modes, miimon, lacp_rate (EACCES outside 802.3ad),
//     xmit_hash_policy; bonds are born down; enslaving an up port: EPERM
//     "Device can not be enslaved while up"; the bond takes its first slave's
//     MAC and gives it to every slave, a released slave gets its permanent
//     MAC back, a bond left without slaves gets a new random MAC;
//     active-backup selects the first up slave and does not preempt; the bond
//     is oper up when a slave is (802.3ad: and its active aggregator has at
//     least min_links ports, bond_3ad_set_carrier). The kernel logs
//     "<bond>: (slave <if>): Enslaving as ..." and "... Releasing ...
//     interface". sysfs bonding/{slaves, active_slave, mii_status,
//     ad_aggregator, ad_num_ports, ad_partner_mac} and
//     <slave>/bonding_slave/ad_aggregator_id in the kernel's formats,
//     read-only; the options bonding/{mode, miimon, lacp_rate,
//     xmit_hash_policy, ad_select, min_links, updelay, downdelay} read as
//     bond_sysfs.c prints them ("802.3ad 4", "100") and are writable with
//     6.1's bond_options.c rules (bondopts.go): first bond_opt_check_deps
//     (lacp_rate outside 802.3ad: EACCES; mode with slaves: ENOTEMPTY;
//     mode, lacp_rate, ad_select while the bond is up: EBUSY), then
//     bond_opt_parse (a table name, "default" where the table has one, a
//     table number, or for miimon/min_links/updelay/downdelay 0..INT_MAX or
//     "off"/"maxval"; else EINVAL), then the set function (a mode without
//     ARP monitoring turns miimon 0 into 100; updelay/downdelay need
//     miimon (EPERM), are rounded down to and kept as multiples of it).
//     Refusals log the kernel's "option X: ..." lines. Changing the mode
//     therefore needs the slaves released, which deactivates the NIC's LAG;
//     it activates again in the new mode when both PFs are enslaved again.
//     802.3ad negotiation (lacpView, as measured on 6.1): the switch behind
//     a NIC answers LACP unless the spec says switch_lacp: off
//     (SetSwitchLACP changes it); without a partner every slave is an
//     individual port and the partner MAC reads zeros.
//   - §5 mlx5 LAG. Eligible when both PFs of the NIC, and nothing else, are
//     the slaves of one bond in active-backup, balance-xor or 802.3ad, both
//     PFs are in switchdev and the NIC's firmware has at most 64 VFs per PF
//     (sriov_totalvfs; numvfs plays no part): above, the LAG device is never
//     ready, and the enslave that completes the bond logs the kernel's
//     "Warning: mlx5_core: Can't activate LAG offload, PF is configured with
//     more than 64 VFs." (an extack in the kernel, which ip link prints; a
//     bond in another mode gets "... TX type isn't supported."). If a VF of the
//     NIC is bound to a driver when it becomes eligible, activation fails
//     ("Failed to activate VF LAG", "Make sure all VFs are unbound prior to
//     VF LAG activation or deactivation" in dmesg) until the next
//     re-evaluation: enslave, release, eswitch mode change, or a numvfs
//     change in legacy (6.x eswitch.c mlx5_eswitch_enable toggles the LAG
//     only while no FDB exists: in switchdev a numvfs change leaves an
//     active LAG alone; 5.x re-activated it). debugfs lag/{state, type, port_sel_mode,
//     flags, mapping, members} on each PF of a 2-PF NIC (none where the
//     NIC's lag_debugfs is off: an mlx5_core before 5.19; and with the
//     spec's debugfs: off, /sys/kernel/debug is an empty mount point), type/port_sel_mode/
//     flags/mapping EINVAL while not active; type switchdev, port_sel_mode
//     hash (balance-xor, 802.3ad, where the NIC has the
//     port_select_flow_table capability: spec port_select_flow_table) or
//     queue_affinity (active-backup, or no such capability), flags
//     shared_fdb:on, mapping as mlx5_infer_tx_affinity_mapping and
//     mlx5_infer_tx_enabled give it (a port is tx-enabled when its PF is up
//     and an active slave: in active-backup the active slave, in 802.3ad a
//     slave of the bond's active aggregator, so without an LACP partner one
//     port only; lagTxEnabled). The activation log lines
//     ("lag map ...", "shared_fdb:1 mode:...", "Operation mode is single
//     FDB") appear when it becomes active. The LAG's hash port selection
//     uses the xmit_hash_policy the bond had at the last enslave of one of
//     the NIC's PFs (mlx5_handle_changeupper_event reads it when linking
//     only): a live write of the option does not reach it (Dump's hash=;
//     debugfs does not show it). Two LAGs the bond has no part
//     in: Host.SetMultipathRoute (an IPv4 route with a nexthop through each
//     PF, lag/mp.c) makes a multipath LAG when no LAG is active (type
//     multipath, queue_affinity, shared_fdb:off), which then ignores the
//     bond and outlives the route until an eswitch mode or SR-IOV change;
//     the devlink param esw_multiport (lag/mpesw.c) makes a multiport
//     eswitch LAG (type multiport_eswitch, port_sel_mode mpesw; EINVAL while
//     another LAG is active, EOPNOTSUPP outside switchdev or without the
//     port_select_flow_table capability; false tears it down).
//   - §5/§6 RDMA (rdma.go), on a NIC with rdma: true. One device per PF,
//     mlx5_<k> (k: the PF's position among the host's RDMA PFs), replaced
//     while the NIC's LAG is active by one device on PF0, mlx5_bond_<n>,
//     whose netdev is the bond (Host.SetRDMABondFault keeps a NIC's devices
//     unbonded: the fault "RDMA device did not bond"). /sys/class/infiniband
//     links to <pf>/infiniband/<dev>: device, node_type, ports/1/{state,
//     phys_state, link_layer}, a 16-slot GID table (slots 0 and 1: the
//     netdev's EUI-64 link-local GID as IB/RoCE v1 and RoCE v2; empty slots
//     read as the zero GID, their gid_attrs/{types,ndevs} give EINVAL), and
//     the MLNX_OFED-only tc/1/{traffic_class, ttl} ("Global tclass=N" or
//     empty; writes N, or tclass=-1 to clear; ttl's format is unconfirmed
//     and modelled the same way). configfs /sys/kernel/config/rdma_cm:
//     hostFS.Mkdir of <dev> (sysfs.Mkdir; ENODEV for an unknown device,
//     EEXIST twice) creates ports/1/default_roce_mode ("RoCE v2" until
//     written; exactly "RoCE v2" or "IB/RoCE v1", else EINVAL) and
//     default_roce_tos; a group whose device went away is hidden.
//   - Traffic counters (counters.go): /sys/class/net/<if>/statistics/*
//     (rx/tx packets and bytes; errors, drops, multicast, collisions 0); a
//     bond's are its slaves' sum. Nothing moves by itself: Host.AddCounters
//     advances one netdev, Host.Traffic pushes packets through a bond as
//     it would spread them (active-backup: the active slave; other modes:
//     evenly over the up slaves; lost when no slave is up). Host.TrafficReps
//     sends packets between VFs and the uplink through their representors:
//     an mlx5 representor's statistics are its VF's vport counters
//     (mlx5e_rep_get_stats copies vf_vport), which count every packet, and
//     its ethtool -S rx_packets/tx_packets count its own rings, which see a
//     packet only when no rule of its ingress is in hardware (the slow
//     path); ethtool -S of a representor also shows vport_rx_packets/
//     vport_tx_packets. Another driver's representor (no flower offload)
//     counts every packet in its statistics. ethtool -S of any other
//     device: EOPNOTSUPP (not modelled).
//   - §7 ethtool. Only hw-tc-offload: PF off in legacy, on in switchdev (the
//     uplink representor's default), representors on, VF netdevs off; all
//     settable. Bonds, lo and other features: ErrNotSupported.
//   - A tunnel's underlay (underlay.go, eswitch.Underlay): addresses on any
//     netdev, VLAN interfaces on a parent (born with its MTU, never above
//     it, lowered with it, gone with it), routes through a gateway on a
//     device (the gateway on-link, else ENETUNREACH), neighbour entries
//     that tests set (Host.SetNeigh), and the hosts behind the simulated
//     switch (Spec.SwitchPeers), which answer ARP/ND on an up netdev that
//     reaches a PF and has an address in their prefix
//     (TestSwitchPeersAnswer); the errnos are listed there.
//   - §9/§10 tc (tc.go, eswitch.TC): one ingress qdisc per netdev, on a block
//     of its own or on a shared block (ingress_block N); a shared block lives
//     while a qdisc holds it and starts empty when bound again after its last
//     qdisc went. Flower rules are added with Host.AddFlower (what
//     ovs-vswitchd does); where a rule runs is computed when read, from the
//     devices bound to its block now (the kernel replays a block's rules to a
//     device that binds): in_hw_count counts the devices whose driver takes
//     flower rules (mlx5 uplinks in switchdev and representors, with
//     hw-tc-offload on; not bonds, VF netdevs or other drivers), skip_hw
//     rules are in none, and skip_sw with no such device is EINVAL.
//   - §8 VF settings through the PF netdev: MAC in both modes (multicast
//     EINVAL), VLAN 0..4095 with QoS 0..7 in legacy (else EINVAL), VLAN≠0
//     in switchdev EOPNOTSUPP and VLAN 0 a no-op; trust, spoofchk and link
//     state (auto/enable/disable, else EINVAL) in legacy, EOPNOTSUPP in
//     switchdev; min/max tx rate in both modes (the vport QoS); a new VF
//     has trust off, spoof checking off, link-state auto, no rates (mlx5's
//     defaults); the PF reports them all in its VF list. A NIC's no_vf_ops
//     models a driver without some ndo_set_vf_* (igb: link_state): EOPNOTSUPP
//     as rtnetlink answers. VF index outside 0..numvfs-1 EINVAL; through a
//     netdev other than a PF EOPNOTSUPP. A VF netdev bound later takes the
//     administrative MAC. Not modelled: a driver's rate limits (igb: max
//     only, at link speed 1000).
//   - Who holds a VF (vfio.go, read by internal/holders): every PCI
//     function alone in its IOMMU group (iommu_group links,
//     /sys/kernel/iommu_groups), /dev/vfio/<group> while its device is on
//     vfio-pci, a "class" file (0x020000), and simulated processes
//     (Host.Spawn, Open, Exit) with /proc/<pid>/{comm, cmdline, fd/<n>}. One
//     process may hold a group at a time (a second open: EBUSY); while one
//     does, an unbind from vfio-pci or sriov_numvfs 0 on the PF fails with
//     EBUSY and vfio-pci's "Relaying device request to user" line (the
//     kernel blocks the write instead, until the holder lets go). No IP
//     addresses, so the "addressed" rule of internal/holders does not apply
//     here.
//   - Netdev names: representors and VF netdevs get the lowest free eth%d,
//     as __dev_alloc_name does before udev renames anything (never derived
//     from the PF name). ifindexes only grow. Host.GiveNames hands a NIC
//     the names its next netdevs take (a boot whose probe order gave one
//     card's representors the names another card's had).
//
// # The mlx5 rules vflag depends on
//
// Each rule: the kernel source it comes from (drivers/net/ethernet/
// mellanox/mlx5/core/ unless named otherwise; read in torvalds/linux), how
// this package models it, and the tests that hold the model (sim) and
// vflag's handling of it (vflag). Marked (unconfirmed) where only the
// source or NVIDIA's tests were read, never a card. Issue 36 added rules
// 1 and 5-14.
//
//	 1 Firmware NUM_OF_VFS (sriov_totalvfs) > 64: no VF-LAG, whatever numvfs is.
//	   src   lag/lag.h mlx5_lag_is_ready; lag/lag.c mlx5_handle_changeupper_event
//	         ("Can't activate LAG offload, PF is configured with more than 64 VFs");
//	         the count is the firmware's (Mellanox ovs-tests, Feature #2101052); how
//	         the firmware makes the LAG device unready is (unconfirmed).
//	   sim   lagReady: never eligible; the completing enslave logs the warning.
//	   test  sim TestLAGNeedsFirmwareNumVFsAtMost64, TestLAGEligibility;
//	         vflag TestFirmwareNumVFsAbove64 (doctor, up's preflight),
//	         TestNeverAdvisesMoreThan64VFsForSwitchdev, TestBenchCardsCanEnterVFLAG.
//	 2 VF-LAG needs both PFs of the NIC and nothing else in one bond of
//	   tx_type activebackup or hash, both PFs in switchdev.
//	   src   lag/lag.c mlx5_handle_changeupper_event, mlx5_lag_check_prereq, mlx5_do_bond.
//	   sim   lagInLag, lagEligible; the TX type warning at the enslave.
//	   test  sim TestLAGEligibility, TestEnslaveWarnsOfUnsupportedTXType, TestLAGDeactivation.
//	 3 VFs bound to a driver when the LAG activates: "Failed to activate VF LAG".
//	   src   lag/lag.c mlx5_activate_lag (the firmware refuses CREATE_LAG).
//	   sim   lagEval's Failed, until the next re-evaluation.
//	   test  sim TestLAGFailsWithBoundVFsUntilReevaluated; vflag binds host VFs after lag.wait.
//	 4 The LAG state is in debugfs lag/ only where mlx5 set up a LAG device
//	   (kernels >= 5.19, mlx5_lag_is_supported) and debugfs is mounted.
//	   src   lag/debugfs.c; lag/lag.c mlx5_lag_add_mdev -> mlx5_ldev_add_debugfs.
//	   sim   spec debugfs: off, a NIC's lag_debugfs: off.
//	   test  sim TestSinglePFNICHasNoLAG; vflag TestUnverifiedLAGIsNoSuccessOnMLX5,
//	         TestExplainUnverified.
//	 5 A LAG of type multipath (an IPv4 route with a nexthop through each PF,
//	   taken when no LAG is active; the bond is ignored from then on; it
//	   outlives the route until an eswitch change) or multiport_eswitch
//	   (devlink param esw_multiport) is not the bond's VF-LAG.
//	   src   lag/mp.c mlx5_lag_fib_route_event; lag/mpesw.c enable_mpesw;
//	         eswitch.c mlx5_devlink_esw_multiport_set; lag/debugfs.c type_show.
//	   sim   Host.SetMultipathRoute, setMultiportEswitch, lagType, lagFlags.
//	   test  sim TestLAGTypes; vflag TestLAGOfAnotherType.
//	 6 Port selection is hash only with the port_select_flow_table
//	   capability and a hash bond; else queue_affinity (each VF on its PF's port).
//	   src   lag/lag.c mlx5_lag_set_port_sel_mode_offloads, get_port_sel_mode.
//	   sim   spec port_select_flow_table: off; lagPortSel.
//	   test  sim TestPortSelectionWithoutFlowTable, TestLAGEligibility;
//	         vflag TestPortSelectionWithoutFlowTable.
//	 7 Only active slaves carry VF traffic: tx_enabled is bond_is_active_slave,
//	   so in 802.3ad a slave outside the active aggregator (no LACP partner)
//	   is left out of lag/mapping while the LAG stays active.
//	   src   lag/lag.c mlx5_infer_tx_enabled, mlx5_infer_tx_affinity_mapping,
//	         lag/debugfs.c mapping_show; bonding bond_main.c bond_lower_state_changed.
//	   sim   lagTxEnabled (lacp: the active aggregator).
//	   test  sim TestLAGMappingFollowsActiveAggregator, TestLAGMapping;
//	         vflag TestUpDegradedWhenASlaveCarriesNoVFTraffic.
//	 8 The hash port selection takes the bond's xmit_hash_policy at the
//	   enslave only (a live write sends no linking event). (unconfirmed on a card)
//	   src   lag/lag.c mlx5_handle_changeupper_event (hash_type when linking),
//	         mlx5_activate_lag -> lag/port_sel.c mlx5_lag_port_sel_create.
//	   sim   lagTrackHash; lagState.Hash (Dump's hash=; debugfs does not show it).
//	   test  sim TestLAGTakesHashAtEnslave; vflag TestXmitHashPolicyReachesTheNIC,
//	         TestBondOptionsConverge.
//	 9 An eswitch mode change tears any active LAG down and re-evaluates it;
//	   in switchdev a numvfs change leaves it alone (6.x; 5.x re-evaluated).
//	   src   eswitch.c mlx5_eswitch_disable, mlx5_eswitch_enable (toggle_lag only
//	         while no FDB exists); lag/lag.c mlx5_lag_disable_change.
//	   sim   lagDisableChange; setNumVFs.
//	   test  sim TestLAGDeactivation, TestLAGFailsWithBoundVFsUntilReevaluated,
//	         TestLAGTypes; vflag TestUpStateTable, TestConvergeTransitions.
//	10 numvfs 0 in switchdev destroys every devlink rate node of the PF.
//	   src   eswitch.c mlx5_eswitch_disable_sriov (devl_rate_nodes_destroy).
//	   sim   disableVFs.
//	   test  sim TestRateRules; vflag TestNumVFsChangeKeepsRatesRight,
//	         TestPlanPredictsRemadeVFs, TestRateNodeNotOurs.
//	11 An eswitch mode change is refused while rate nodes exist.
//	   src   net/devlink (devlink_rate_nodes_check): EBUSY "Rate node(s) exists."
//	   sim   checkModeChange.
//	   test  sim TestRateRules; vflag TestRateNodeNotOurs.
//	12 An eswitch mode change is EBUSY while the eswitch has users
//	   (offloaded tc rules) or another operation runs. (unconfirmed which users)
//	   src   eswitch_offloads.c mlx5_devlink_eswitch_mode_set, mlx5_esw_try_lock.
//	   sim   checkModeChange (eswitchRules; pf.Busy during a mode change).
//	   test  sim TestModeChangeBusyWhileRulesOffloaded, TestModeChangeRules;
//	         vflag TestEswitchBusyWhileRulesAreOffloaded.
//	13 flow_steering_mode changes only in legacy: smfs refused in switchdev,
//	   every value from 6.17 (an Aug 2025 fix, queued for stable).
//	   src   fs_core.c mlx5_fs_mode_validate.
//	   sim   Host.SetParam (spec kernel).
//	   test  sim TestFlowSteeringModeBySwitchdevAndKernel, TestParams;
//	         vflag TestFlowSteeringModeInSwitchdev, TestFlowSteeringDefault.
//	14 switchdev with a VF bound to a driver fails in the firmware ("bad
//	   resource state"); the kernel does not check.
//	   src   eswitch_offloads.c (esw_offloads_enable); cmd.c's error line. (unconfirmed)
//	   sim   checkModeChange.
//	   test  sim TestSwitchdevRefusedWithBoundVF.
//	15 VF settings through the PF in switchdev: mac and rate only; vlan (but
//	   0), trust, spoofchk and link_state EOPNOTSUPP.
//	   src   en_rep.c (uplink representor ndo_set_vf_*), eswitch.c.
//	   sim   KERNEL-FACTS §8 above.
//	   test  sim TestVFSettings.
//	16 The eswitch's encap mode: basic by default where the FDB can reformat
//	   and decap, stored in legacy, EOPNOTSUPP in switchdev while flows are
//	   offloaded; without basic no tunnel rule is offloaded.
//	   src   eswitch_offloads.c mlx5_devlink_eswitch_encap_mode_set.
//	   sim   Host.SetEncapMode (underlay.go).
//	   test  sim TestEncapModeRules; vflag TestTunnelLayout.
//	17 A VLAN interface takes no MTU above its parent's and is lowered with
//	   it; it goes with its parent.
//	   src   net/8021q vlan_dev.c vlan_dev_change_mtu, vlan.c vlan_device_event.
//	   sim   setMTU, lowerVLANMTU, removeUnderlay.
//	   test  sim TestUnderlayRules; validate TestTunnelChecks.
//
// # What is not modelled
//
// RDMA traffic, IPv4-mapped GIDs of the addresses, ethtool -S
// counters, RoCE LAG (two legacy PFs without VFs), roce_lag_enable,
// tc forwarding rules of a multiport eswitch, MLNX_OFED-only files, BlueField/ECPF controllers,
// inline/encap modes, TC flows beyond the flower rules of tc.go, /proc/net/bonding, writes to the bonding sysfs
// files other than the options above (EACCES), the bond's admin state in
// the LAG (a bond taken down keeps its LAG), physical link loss (a PF is up when it is admin up), LACP
// negotiation, the failure of LAG deactivation with bound VFs, PF
// unbind/bind (unbinding a PF returns EPERM), netdev renames and network
// namespaces, and the auxiliary devlink instance of 6.7+ kernels (the
// uplink port sits on the PCI instance, as in 6.1). sriov_numvfs reads the
// requested count as soon as the write returns, while the VFs themselves
// appear one by one.
//
// # Mirroring into a network namespace
//
// With Spec.MirrorNetns, every simulated netdev except lo also exists in
// that namespace as a real veth of the same name (its peer is named
// "sv"+8 hex digits of a hash of the name) carrying the simulated MAC, both
// ends up exactly when the simulated netdev is admin up. Mirrors are created
// and deleted as simulated netdevs appear and disappear, including VF
// netdevs and representors that appear later (a timer syncs them). Mirrors
// that go together (the representors of a mode change) are deleted in one
// batch (one netdev group, one RTM_DELLINK): one by one, each cost the
// kernel an RCU grace period, which a real mode change does not spend. The
// mirroring of one change does not wait for another's unless they name the
// same netdev (one PF's representors going do not hold up the other card's
// bond), as the kernel's netdevs of two PFs do not wait for each other. A real
// ovs-vswitchd in that namespace can then add "bond0" and the representors
// as ports. Close leaves the mirrors, which belong to the host's state, and
// when the Host changed the namespace it marks it (lo's ifalias: a hash of
// the mirrored netdevs and of the namespace's ifindexes); Open then skips
// its full sync (a dump of every link) while the mark holds, and syncs in
// full when a link was added to or deleted from the namespace since.
//
// # Dump
//
// Dump renders the whole host as of now: NICs, PFs, VFs (or "creating"),
// LAG, links (by name, without ifindexes), bonds, then "dmesg:" and the log.
// Tests compare a baseline dump with the dump after `vflag down` on the text
// before "dmesg:".
package sim
