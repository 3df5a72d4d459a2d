#!/bin/bash
# Disruption gate on real PCI VFs (igb, legacy group) with a libvirt domain
# that really runs with its VF: while vm1 holds VF 0, a numvfs change is
# refused before any write (exit 1, the message names vm1; journal, VFs and
# VF MACs unchanged) and plan -o json marks the numvfs step disruptive with
# domains ["vm1"] and names vm1's QEMU, which holds VF 0's /dev/vfio group,
# by its pid (the kernel's answer, named by libvirt); a change that breaks
# nothing running (VF 1's MAC, VF 1 attached to the shut-off vm2) goes ahead
# while vm1 runs.
# Then the gate without libvirt (issue 37): libvirtd stopped, a process
# libvirt does not know (a shell that opened VF 1's /dev/vfio/<group>, as a
# DPDK application would) holds VF 1: down and a numvfs change are refused
# naming its pid, status shows it on the VF; once it is gone, down proceeds
# without --force and without libvirtd.
#
# MACHINE: igb
# TIMEOUT: 360
# EXPECT: d_up d_vm1_runs d_plan_disruptive d_plan_names_qemu d_refused d_refused_no_write d_vm1_untouched
# EXPECT: d_other_up d_other_vf1_mac d_other_vm2_attached d_other_vm1_kept d_other_again
# EXPECT: d_down_after_stop
# EXPECT: k_libvirtd_stopped k_up k_vf1_vfio k_held k_down_refused k_numvfs_refused k_refused_no_write
# EXPECT: k_status_holder k_down_after_exit
. "$(dirname "$0")/lib.sh"

igb_pf || exit 1
libvirt_start || exit 1
for d in vm1 vm2; do
	define_domain $d
done
MAC0=52:54:00:0b:00:00
MAC1=52:54:00:0b:00:01
config() { # config NUMVFS [more vfs/attachments lines: "vf1"]
	{
		cat <<EOF
libvirt: qemu:///system
groups:
  - name: igb0
    eswitch: legacy
    pfs: ["$PCI"]
    numvfs: $1
    vfs:
      - {pf: 0, vf: 0, mac: "$MAC0"}
EOF
		[ "${2:-}" = vf1 ] && echo "      - {pf: 0, vf: 1, mac: \"$MAC1\"}"
		echo "    attachments:"
		echo "      - {domain: vm1, pf: 0, vf: 0}"
		[ "${2:-}" = vf1 ] && echo "      - {domain: vm2, pf: 0, vf: 1}"
	} >/root/vflag.yaml
	cp /root/vflag.yaml "$OUT/vflag-$1${2:+-$2}.yaml"
}
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

step "up with 2 VFs, vm1 starts with VF 0"
config 2
check d_up V up || exit 1
VF0=$(basename "$(readlink "$PFDIR/virtfn0")")
vm1_runs() {
	virsh start vm1 || return 1
	[ "$(basename "$(readlink "$PFDIR/virtfn0/driver")")" = vfio-pci ] || { echo "VF 0 not on vfio-pci"; return 1; }
	echo "vm1 $(virsh domstate vm1), VF 0 ($VF0) on vfio-pci"
}
check d_vm1_runs vm1_runs || exit 1

step "numvfs 2 -> 3 while vm1 runs"
config 3
plan_marks() {
	V plan -o json >"$OUT/plan3.json" 2>"$OUT/plan3.err" || { cat "$OUT/plan3.err"; return 1; }
	jq -c '.steps[] | select(.changed)' "$OUT/plan3.json"
	jq -e '[.steps[] | select(.changed and (.kind | test("numvfs")))] |
		length == 1 and (.[0].disruptive == true) and (.[0].domains == ["vm1"])' "$OUT/plan3.json" >/dev/null || return 1
	jq -r '.steps[] | select(.changed and (.kind | test("numvfs"))) | "\(.id): disruptive \(.disruptive), domains \(.domains)"' "$OUT/plan3.json"
}
check d_plan_disruptive plan_marks
# The kernel's answer: vm1's QEMU holds VF 0's vfio group; libvirt names it.
plan_names_qemu() {
	local qpid
	qpid=$(cat /run/libvirt/qemu/vm1.pid 2>/dev/null || pgrep -f 'guest=vm1' | head -n 1)
	echo "vm1's QEMU: pid $qpid; VF 0 group $(basename "$(readlink "$PFDIR/virtfn0/iommu_group")")"
	ls -l "/proc/$qpid/fd" 2>/dev/null | grep /dev/vfio
	jq -r '.steps[] | select(.changed and (.kind | test("numvfs"))) | .holders[]?' "$OUT/plan3.json" |
		grep -F "VF $VF0 is held by running domain vm1 (pid $qpid "
}
check d_plan_names_qemu plan_names_qemu
state() { # what the refusal must not change
	sha256sum /root/state/journal.json
	cat "$PFDIR/sriov_numvfs"
	ip link show "$PF" | grep ' vf '
	ls -l "$PFDIR" | grep -o 'virtfn.*'
	virsh dumpxml --inactive vm1 | grep -A6 hostdev
}
state >"$OUT/refuse.before"
refused() {
	local out rc
	out=$(V up 2>&1)
	rc=$?
	echo "$out"
	[ $rc = 1 ] && printf '%s' "$out" | grep -q 'refusing a disruptive change' && printf '%s' "$out" | grep -qw vm1
}
check d_refused refused
no_write() { state >"$OUT/refuse.after" && diff -u "$OUT/refuse.before" "$OUT/refuse.after" && echo "journal, numvfs $(cat "$PFDIR/sriov_numvfs"), VF MACs and vm1's XML unchanged"; }
check d_refused_no_write no_write
vm1_ok() {
	[ "$(virsh domstate vm1)" = running ] && [ "$(basename "$(readlink "$PFDIR/virtfn0/driver")")" = vfio-pci ] &&
		ip link show "$PF" | grep -q "vf 0 .*$MAC0" && echo "vm1 running, VF 0 on vfio-pci with $MAC0"
}
check d_vm1_untouched vm1_ok

step "a change that breaks nothing running: VF 1's MAC, VF 1 to the shut-off vm2"
config 2 vf1
other_up() {
	V up -o json >"$OUT/other.json" 2>"$OUT/other.err"
	local rc=$?
	jq -r '"changed \(.changes) step(s): \([.steps[] | select(.changed) | "\(.action) \(.id) disruptive=\(.disruptive // false)"] | join(", "))"' "$OUT/other.json"
	[ $rc = 0 ] || { cat "$OUT/other.err"; return 1; }
}
check d_other_up other_up
expect_match d_other_vf1_mac "vf 1 .*$MAC1" ip link show "$PF"
vm2_xml() { virsh dumpxml --inactive vm2 | grep -A6 "<interface type='hostdev'"; }
expect_match d_other_vm2_attached "$MAC1" vm2_xml
check d_other_vm1_kept vm1_ok
expect_match d_other_again 'no changes' again

step "down once vm1 is stopped"
virsh destroy vm1
down_clean() { V down && [ "$(cat "$PFDIR/sriov_numvfs")" = 0 ] && ! virsh dumpxml --inactive vm2 | grep -q hostdev && echo "numvfs 0, no hostdev left"; }
check d_down_after_stop down_clean

step "the kernel's answer without libvirtd: a process libvirt does not know holds VF 1"
stop_libvirtd() {
	local pid
	pid=$(cat /run/libvirtd.pid 2>/dev/null || pgrep -x libvirtd)
	kill "$pid" || return 1
	wait_for 30 sh -c '! virsh -c qemu:///system version' || return 1
	echo "libvirtd stopped: $(virsh -c qemu:///system version 2>&1 | tail -n 1)"
}
check k_libvirtd_stopped stop_libvirtd
bare() { # bare NUMVFS: the group without attachments (no libvirt needed)
	cat >/root/vflag.yaml <<EOF
libvirt: qemu:///system
groups:
  - name: igb0
    eswitch: legacy
    pfs: ["$PCI"]
    numvfs: $1
    vfs:
      - {pf: 0, vf: 0, mac: "$MAC0"}
EOF
}
bare 2
check k_up V up
VF1=$(basename "$(readlink "$PFDIR/virtfn1")")
to_vfio() {
	echo vfio-pci >"$PFDIR/virtfn1/driver_override" && echo "$VF1" >/sys/bus/pci/drivers_probe || return 1
	[ "$(basename "$(readlink "$PFDIR/virtfn1/driver")")" = vfio-pci ] || return 1
	local g
	g=$(basename "$(readlink "$PFDIR/virtfn1/iommu_group")")
	wait_for 10 test -c "/dev/vfio/$g" || return 1
	echo "VF 1 ($VF1) on vfio-pci, IOMMU group $g"
}
check k_vf1_vfio to_vfio
GROUP=$(basename "$(readlink "$PFDIR/virtfn1/iommu_group")")
# The holder: a subshell opens the group (as a DPDK application or a QEMU
# that libvirt did not start would) and becomes sleep, keeping the fd.
(exec 3<>"/dev/vfio/$GROUP" && exec sleep 600) &
HOLDER=$!
holds() {
	wait_for 10 sh -c "ls -l /proc/$HOLDER/fd | grep -q ' /dev/vfio/$GROUP\$'" || { ls -l "/proc/$HOLDER/fd"; return 1; }
	echo "pid $HOLDER ($(cat "/proc/$HOLDER/comm")) holds /dev/vfio/$GROUP"
}
check k_held holds
HELD="VF $VF1 is held by pid $HOLDER (sleep) through /dev/vfio/$GROUP"
kstate() { sha256sum /root/state/journal.json; cat "$PFDIR/sriov_numvfs"; ip link show "$PF" | grep ' vf '; }
kstate >"$OUT/k-refuse.before"
k_down_refused() {
	local out rc
	out=$(V down 2>&1)
	rc=$?
	echo "$out"
	[ $rc = 1 ] && printf '%s' "$out" | grep -qF "refusing to remove VFs in use: $HELD"
}
check k_down_refused k_down_refused
k_numvfs_refused() {
	local out rc
	bare 3
	out=$(V up 2>&1)
	rc=$?
	bare 2
	echo "$out"
	[ $rc = 1 ] && printf '%s' "$out" | grep -q 'refusing a disruptive change' && printf '%s' "$out" | grep -qF "would break: $HELD"
}
check k_numvfs_refused k_numvfs_refused
k_no_write() { kstate >"$OUT/k-refuse.after" && diff -u "$OUT/k-refuse.before" "$OUT/k-refuse.after" && echo "journal, numvfs $(cat "$PFDIR/sriov_numvfs") and VF lines unchanged"; }
check k_refused_no_write k_no_write
k_status() { V status 2>&1 | grep -F "held by pid $HOLDER (sleep) through /dev/vfio/$GROUP"; }
check k_status_holder k_status
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
k_down() {
	V down || return 1
	[ "$(cat "$PFDIR/sriov_numvfs")" = 0 ] && echo "down without --force and without libvirtd: numvfs 0"
}
check k_down_after_exit k_down
exit 0
