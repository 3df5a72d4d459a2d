#!/bin/bash
# Scenario B: real PCI VFs on an emulated Intel 82576 (igb, no devlink
# eswitch: a legacy-mode group). vflag up creates the VFs with
# sriov_drivers_autoprobe honoured, sets a VF MAC through the PF, brings the
# PF up and attaches the VF to a libvirt domain; the domain starts (libvirt
# moves the VF to vfio-pci); down refuses while the domain holds the VF,
# then, once it is stopped, detaches and removes the VFs.
#
# MACHINE: igb
# TIMEOUT: 300
# EXPECT: b_pf b_up b_virtfn_links b_autoprobe_honoured b_vf_mac b_pf_up b_attach_xml b_status
# EXPECT: b_second_up_no_change b_domain_starts b_vf_on_vfio b_vf_mac_running
# EXPECT: b_down_refuses b_down_refused_no_change b_down b_vfs_removed b_xml_clean b_autoprobe_restored
. "$(dirname "$0")/lib.sh"

igb_pf
expect_match b_pf '^eth' echo "$PF"
libvirt_start || exit 1
cat >/root/vm1.xml <<'EOF'
<domain type='qemu'>
  <name>vm1</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
  </devices>
</domain>
EOF
virsh define /root/vm1.xml
cat >/root/vflag.yaml <<EOF
libvirt: qemu:///system
groups:
  - name: igb0
    eswitch: legacy
    pfs: ["$PCI"]
    numvfs: 2
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:0b:00:00"}
    attachments:
      - {domain: vm1, pf: 0, vf: 0}
EOF
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

step "vflag up"
check b_up V up
virtfn() { for i in 0 1; do test -L "$PFDIR/virtfn$i" || return 1; done; echo "virtfn0 -> $(readlink "$PFDIR/virtfn0"), virtfn1 -> $(readlink "$PFDIR/virtfn1")"; }
check b_virtfn_links virtfn
VF0=$(basename "$(readlink "$PFDIR/virtfn0")")
VF1=$(basename "$(readlink "$PFDIR/virtfn1")")
# Autoprobe honoured: set to 0 before the VFs existed, so igbvf (loaded)
# never probed them; unbinding afterwards would leave the same sysfs state,
# so the kernel log is the witness.
unbound() {
	for i in 0 1; do ! test -e "$PFDIR/virtfn$i/driver" || { echo "virtfn$i bound to $(basename "$(readlink "$PFDIR/virtfn$i/driver")")"; return 1; }; done
	[ "$(cat "$PFDIR/sriov_drivers_autoprobe")" = 0 ] || { echo "sriov_drivers_autoprobe is $(cat "$PFDIR/sriov_drivers_autoprobe")"; return 1; }
	if dmesg | grep -E "igbvf $VF0|igbvf $VF1"; then echo "igbvf probed a VF"; return 1; fi
	echo "no VF bound, never probed by igbvf (sriov_drivers_autoprobe=0)"
}
check b_autoprobe_honoured unbound
expect_match b_vf_mac 'vf 0 .*52:54:00:0b:00:00' ip link show "$PF"
expect_match b_pf_up 'state UP|,UP' ip link show "$PF"
hostdev_xml() { virsh dumpxml --inactive vm1 | grep -A6 "<interface type='hostdev'"; }
expect_match b_attach_xml "52:54:00:0b:00:00" hostdev_xml
V status -o json >"$OUT/status.json"
expect b_status vm1 jq -r ".groups[0].vfs[] | select(.pci == \"$VF0\") | .domain" "$OUT/status.json"
second_up() { V up --detailed-exit-codes; }
expect_match b_second_up_no_change 'no changes' second_up

step "the domain starts with the VF"
check b_domain_starts virsh start vm1
expect b_vf_on_vfio vfio-pci sh -c "basename \$(readlink $PFDIR/virtfn0/driver)"
expect_match b_vf_mac_running 'vf 0 .*52:54:00:0b:00:00' ip link show "$PF"

step "down while the domain holds the VF"
refuses() { out=$(V down 2>&1); rc=$?; echo "$out"; [ $rc = 1 ] && echo "$out" | grep -q "held by running domain vm1"; }
check b_down_refuses refuses
unchanged() { [ "$(cat "$PFDIR/sriov_numvfs")" = 2 ] && virsh dumpxml --inactive vm1 | grep -q "<interface type='hostdev'" && echo "VFs and attachment still in place"; }
check b_down_refused_no_change unchanged

step "down after the domain stopped"
virsh destroy vm1
check b_down V down
expect b_vfs_removed 0 cat "$PFDIR/sriov_numvfs"
no_hostdev() { ! virsh dumpxml --inactive vm1 | grep -q hostdev && echo "no hostdev in vm1"; }
check b_xml_clean no_hostdev
expect b_autoprobe_restored 1 cat "$PFDIR/sriov_drivers_autoprobe"
exit 0
