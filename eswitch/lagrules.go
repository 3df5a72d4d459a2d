package eswitch

import "fmt"

// The mlx5 rules that decide whether a bond of two ConnectX PFs becomes
// VF-LAG, as vflag checks them before and after it builds one
// (KERNEL-FACTS §5 and §12; the simulated NIC models each, internal/sim).

// LAGMaxTotalVFs is mlx5's VF-LAG limit on the firmware's VF count: a PF
// whose firmware is configured with more than 64 VFs (mstconfig
// NUM_OF_VFS, which the PF shows as sriov_totalvfs) never enters VF-LAG,
// whatever numvfs is. lag/lag.c answers the enslave with "Can't activate
// LAG offload, PF is configured with more than 64 VFs" and leaves the LAG
// disabled; NVIDIA's own VF-LAG test (Mellanox ovs-tests, Feature #2101052)
// sets NUM_OF_VFS=65, creates 2 VFs and expects exactly that.
const LAGMaxTotalVFs = 64

// LAGDriver is the driver whose LAG rules these are.
const LAGDriver = "mlx5_core"

// FirmwareNumVFsFix is the fix for a PF whose firmware has more than 64
// VFs: NUM_OF_VFS=64 with mstconfig, then a firmware reset (mstconfig's
// settings take effect only then).
func FirmwareNumVFsFix(pci string) string {
	return fmt.Sprintf("mstconfig -d %s -y set NUM_OF_VFS=%d, %s", pci, LAGMaxTotalVFs, FirmwareReset(pci))
}

// FirmwareReset says how the firmware takes a new mstconfig setting.
func FirmwareReset(pci string) string {
	return fmt.Sprintf("then reset the firmware: mstfwreset -d %s -y reset (package mstflint; mlxfwreset with NVIDIA MFT) or reboot the host; sriov_totalvfs follows the firmware's NUM_OF_VFS", pci)
}

// TotalVFsProblem says why a switchdev group's PF cannot enter VF-LAG
// because of its firmware's VF count, or "" when it can: only mlx5 PFs
// (driver) are held to the limit.
func TotalVFsProblem(netdev, pci, driver string, total int) string {
	if driver != LAGDriver || total <= LAGMaxTotalVFs {
		return ""
	}
	return fmt.Sprintf("%s (%s) has sriov_totalvfs %d: its firmware is configured with more than %d VFs (NUM_OF_VFS), and mlx5 never activates VF-LAG on such a PF, whatever numvfs is (\"Can't activate LAG offload, PF is configured with more than %d VFs\")",
		netdev, pci, total, LAGMaxTotalVFs, LAGMaxTotalVFs)
}
