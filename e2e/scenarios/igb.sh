#!/bin/bash
# PCI SR-IOV on an emulated Intel 82576 (QEMU 10 igb, q35 + intel-iommu):
# the PF has 7 VFs, sriov_numvfs creates real VF PCI functions with
# virtfn/physfn links that igbvf binds, each in its own IOMMU group.
#
# BED: yes   # checks the bed itself: booted again only when the image or the scripts change
# MACHINE: igb
# TIMEOUT: 240
# EXPECT: igb_pf igb_totalvfs igb_numvfs igb_virtfn_links igb_vf_physfn igb_vf_driver igb_vf_iommu_group igb_numvfs_zero
. "$(dirname "$0")/lib.sh"

step "igb PF"
# No udev in the guest: drivers are loaded by hand.
modprobe igb
modprobe igbvf
PF=$(pci_by_id 8086:10c9 | head -n 1)
pf_ok() {
	[ -n "$PF" ] || { echo "no 8086:10c9 PCI function"; return 1; }
	wait_for 10 test -d "$PF/net" || { echo "$PF has no netdev"; return 1; }
	echo "$(basename "$PF") driver $(basename "$(readlink "$PF/driver")") netdev $(ls "$PF/net")"
}
check igb_pf pf_ok || exit 0
run lspci -nn
expect igb_totalvfs 7 cat "$PF/sriov_totalvfs"

step "2 VFs"
echo 2 >"$PF/sriov_numvfs"
expect igb_numvfs 2 cat "$PF/sriov_numvfs"
virtfn_ok() {
	local i d
	for i in 0 1; do
		d=$(readlink -f "$PF/virtfn$i") && [ "$(cat "$d/device")" = 0x10ca ] || return 1
		echo "virtfn$i -> $(readlink "$PF/virtfn$i") [$(cat "$d/vendor"):$(cat "$d/device")]"
	done
	[ ! -e "$PF/virtfn2" ]
}
check igb_virtfn_links virtfn_ok
physfn_ok() {
	local i
	for i in 0 1; do
		[ "$(readlink -f "$PF/virtfn$i/physfn")" = "$(readlink -f "$PF")" ] || return 1
	done
	echo "physfn of both VFs is $(basename "$PF")"
}
check igb_vf_physfn physfn_ok
vfdrv_ok() {
	local i
	for i in 0 1; do
		wait_for 10 test -d "$PF/virtfn$i/net" || { echo "virtfn$i: no netdev"; return 1; }
		[ "$(basename "$(readlink "$PF/virtfn$i/driver")")" = igbvf ] || return 1
	done
	echo "igbvf netdevs: $(ls "$PF/virtfn0/net") $(ls "$PF/virtfn1/net")"
}
check igb_vf_driver vfdrv_ok
run ip link show "$(ls "$PF/net")"
iommu_ok() {
	local g0 g1 gp
	g0=$(basename "$(readlink "$PF/virtfn0/iommu_group")") &&
		g1=$(basename "$(readlink "$PF/virtfn1/iommu_group")") &&
		gp=$(basename "$(readlink "$PF/iommu_group")") &&
		[ "$g0" != "$g1" ] && [ "$g0" != "$gp" ] && [ "$g1" != "$gp" ] &&
		echo "iommu groups: PF $gp, VF0 $g0, VF1 $g1"
}
check igb_vf_iommu_group iommu_ok

step "back to 0 VFs"
echo 0 >"$PF/sriov_numvfs"
zero_ok() { [ "$(cat "$PF/sriov_numvfs")" = 0 ] && [ ! -e "$PF/virtfn0" ] && echo "no VFs left"; }
check igb_numvfs_zero zero_ok
