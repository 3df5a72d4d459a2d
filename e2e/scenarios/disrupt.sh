#!/bin/bash
# Disruption gate on real PCI VFs (igb, legacy group) with a libvirt domain
# that really runs with its VF: while vm1 holds VF 0, a numvfs change is
# refused before any write (exit 1, the message names vm1; journal, VFs and
# VF MACs unchanged) and plan -o json marks the numvfs step disruptive with
# domains ["vm1"]; a change that breaks nothing running (VF 1's MAC, VF 1
# attached to the shut-off vm2) goes ahead while vm1 runs.
#
# MACHINE: igb
# TIMEOUT: 300
# EXPECT: d_up d_vm1_runs d_plan_disruptive d_refused d_refused_no_write d_vm1_untouched
# EXPECT: d_other_up d_other_vf1_mac d_other_vm2_attached d_other_vm1_kept d_other_again
# EXPECT: d_down_after_stop
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
exit 0
