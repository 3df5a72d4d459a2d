// Package doctor answers "is this host ready for VF-LAG, and if not, what
// must change?" for `vflag doctor`. It only reads: one check per
// prerequisite, each with a status (pass, fail, warn, skip), a detail naming
// what was read, and for every fail or warn a concrete fix (the command,
// file or firmware setting to change).
//
// The areas, in the order they are reported:
//
//   - platform: IOMMU active (/sys/class/iommu, /sys/kernel/iommu_groups,
//     DMAR/AMD-Vi lines in the kernel log, intel_iommu=/amd_iommu=/iommu=pt
//     on /proc/cmdline), vfio-pci available, SR-IOV offered by each PF
//     (sriov_totalvfs present and above 0).
//   - firmware: numvfs <= sriov_totalvfs (else the mstconfig NUM_OF_VFS fix
//     and a reboot); with mstconfig (Debian package mstflint) installed its
//     query of SRIOV_EN, NUM_OF_VFS, LINK_TYPE_P1/P2 and
//     LAG_RESOURCE_ALLOCATION; `devlink dev info`: driver and firmware
//     versions.
//   - nic: both PFs are ports of one NIC, the PF driver, devlink eswitch
//     support, mlx5 debugfs (else the LAG state is unverifiable), RoCE
//     enabled alike on both ports (else the kernel refuses the LAG).
//   - kernel: the kernel version's VF-LAG features (shared/KERNEL-FACTS.md),
//     the bonding module (and a stray bond0 from max_bonds), the
//     openvswitch module.
//   - daemons: ovs-vswitchd installed and running, its version's known
//     problems (3.1.0 started within 10 s of boot runs no upcall handler),
//     the kernel datapath's upcalls, OVSDB and libvirt reachable.
//   - ovn (groups with an ovn section, under daemons and kernel):
//     ovn-controller running and connected to the Southbound (its
//     connection-status over its control socket), the Open_vSwitch row's
//     system-id against ovn.system_id, the encap address on the bond and
//     on no other device, the OVN and Open vSwitch versions, the encap
//     type's kernel module (geneve, vxlan).
//   - conflicts: NetworkManager managing a PF or the bond, a foreign bond
//     holding a PF, a bond name taken, a VF count already set by someone
//     else.
//
// Every host read goes through Env: a sysfs.FS for the NIC side (the
// simulated host's with --sim), another for the machine (/proc, /sys/module,
// /sys/class/iommu, /lib/modules, /etc/modprobe.d), eswitch.Kernel for
// devlink and rtnetlink, a Runner for external commands (fixed argv, no
// shell; PCI addresses are validated before they reach an argv, interface
// names never do) and a Prober for OVSDB and libvirt. A missing tool gives
// "skip" with the package that installs it, never an error.
//
// The package knows nothing of cobra, viper or vflag's config file: its
// input is Target.
package doctor
