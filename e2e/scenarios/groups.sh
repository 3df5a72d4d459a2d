#!/bin/bash
# Several NICs on the real kernel: two netdevsim devices, each its own group
# (bond, bridge). up handles the groups side by side: each group's hardware
# steps (VFs up to its bond coming up) start before the other group's are
# done; the report comes group by group in config order, both bridges carry their
# device's representors; a second up changes nothing; a failure injected in
# the middle of lag1's steps rolls back both groups (the host as before the
# run); down starts the two eswitch mode changes together, once both bonds
# are gone, and returns the guest to its baseline. Then a reboot after which
# the kernel names of the two devices' representors are swapped (lag0's
# come back under lag1's old names and the reverse, while OVS's database
# still holds the old ports): up --stage pre, then up converges both
# bridges in one run, each taking its representors from the other's, and a
# second up changes nothing.
#
# MACHINE: default
# TIMEOUT: 600
# EXPECT: gr_up gr_overlap gr_order gr_g0_ports gr_g1_ports gr_again
# EXPECT: gr_fail gr_fail_restored gr_down gr_down_together gr_baseline_link gr_baseline_devlink gr_baseline_ovs
# EXPECT: gr_rb_before gr_rb_pre gr_rb_swapped gr_rb_up gr_rb_g0_ports gr_rb_g1_ports gr_rb_again gr_rb_down
. "$(dirname "$0")/lib.sh"

step "bed: two netdevsim devices with 2 ports each, bonding, Open vSwitch"
nsim_new 10 2 || exit 1
nsim_new 11 2 || exit 1
A1=$(netdev_by_ppn 10 p1)
A2=$(netdev_by_ppn 10 p2)
B1=$(netdev_by_ppn 11 p1)
B2=$(netdev_by_ppn 11 p2)
modprobe bonding max_bonds=0
ovs_start || exit 1

snapshot() { # the state down must restore
	ip -d link show | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /' >"$OUT/$1.link"
	{ devlink dev eswitch show netdevsim/netdevsim10; devlink dev eswitch show netdevsim/netdevsim11; } >"$OUT/$1.devlink"
	{ ovs-vsctl show | grep -v ovs_version; ovs-vsctl get Open_vSwitch . other_config; } >"$OUT/$1.ovs"
}
same() { diff -u "$OUT/$2.$1" "$OUT/$3.$1" && echo "identical ($(wc -l <"$OUT/$3.$1") lines)"; }
snapshot base

cat >/root/vflag.yaml <<EOF
ovsdb: unix:/var/run/openvswitch/db.sock
lag_timeout: 20s
groups:
  - name: lag0
    pfs: [$A1, $A2]
    numvfs: 4
    mtu: 9000
    bond: {name: bond0, mode: 802.3ad, miimon: 100, lacp_rate: fast, xmit_hash_policy: layer3+4}
    ovs: {bridge: br-vf0}
  - name: lag1
    pfs: [$B1, $B2]
    numvfs: 4
    bond: {name: bond1, mode: active-backup, miimon: 100}
    ovs: {bridge: br-vf1}
EOF
cp /root/vflag.yaml "$OUT/vflag.yaml"
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

# at LOG WHAT ID: the time (ns) of the first "msg=WHAT" line of step ID in a
# -v log.
at() {
	local t
	t=$(grep -m1 "msg=$2 .* id=$3 " "$1" | sed -E 's/^time=([^ ]+) .*/\1/')
	[ -n "$t" ] && date -d "$t" +%s%N
}
# overlap: neither group waited for the other. Each group's hardware part
# runs from its first step (sriov.numvfs) to its bond coming up (link.up);
# run one after the other, the second group's first step would come after
# the first group's bond is up. Side by side, each group starts before the
# other's bond is up. (Compared on whole spans, not on one short step: under
# load a 50 ms step of one group can fall between two of the other's.)
overlap() {
	local pa pb a0 a1 b0 b1
	pa=$(devlink -j dev show | jq -r '.dev | keys[]' | grep -m1 netdevsim10)
	pb=$(devlink -j dev show | jq -r '.dev | keys[]' | grep -m1 netdevsim11)
	a0=$(at "$OUT/up.err" apply "sriov.numvfs/$pa") || { echo "no sriov.numvfs step of $pa"; return 1; }
	b0=$(at "$OUT/up.err" apply "sriov.numvfs/$pb") || { echo "no sriov.numvfs step of $pb"; return 1; }
	a1=$(at "$OUT/up.err" applied "link.up/bond0") || { echo "no link.up step of bond0"; return 1; }
	b1=$(at "$OUT/up.err" applied "link.up/bond1") || { echo "no link.up step of bond1"; return 1; }
	echo "lag0 $a0-$a1, lag1 $b0-$b1"
	[ "$a0" -lt "$b1" ] && [ "$b0" -lt "$a1" ]
}
# together: in down's -v log, every eswitch mode change starts after both
# groups' bonds are deleted: a group that gets to its mode change first
# waits for the other. (lag0 has an MTU to put back as well, so undone as
# it comes, lag1's mode change would start while lag0 still removes its
# bond.)
together() {
	local last=0 t id n=0
	for id in bond.create/bond0 bond.create/bond1; do
		t=$(at "$OUT/down.err" undone "$id") || { echo "no $id undone"; return 1; }
		[ "$t" -gt "$last" ] && last=$t
	done
	for id in $(grep -o 'msg=undo step=eswitch.mode id=[^ ]*' "$OUT/down.err" | sed 's/.* id=//'); do
		t=$(grep -m1 "msg=undo step=eswitch.mode id=$id\$" "$OUT/down.err" | sed -E 's/^time=([^ ]+) .*/\1/')
		t=$(date -d "$t" +%s%N) || return 1
		n=$((n + 1))
		echo "$id starts $(((t - last) / 1000)) us after the last bond is gone"
		[ "$t" -ge "$last" ] || return 1
	done
	# netdevsim has one eswitch per device (mlx5: one per PF).
	[ "$n" = 2 ] || { echo "$n mode changes, want 2"; return 1; }
}
# order: the report's groups, in the order the steps come, without repeats.
order() { jq -r '[.steps[].group] | reduce .[] as $g ([]; if (.[-1] == $g) then . else . + [$g] end) | join(" ")' "$OUT/up.json"; }
ports_ok() { # ports_ok BRIDGE BOND ID
	local want got
	want=$(printf '%s\n' "$2" $(reps "$3") | sort | tr '\n' ' ')
	got=$(ovs-vsctl list-ports "$1" | sort | tr '\n' ' ')
	echo "$1: [$got]"
	[ "$want" = "$got" ]
}

step "up: both groups side by side"
check gr_up bash -c "'$VFLAG' --config /root/vflag.yaml --state-dir /root/state up -v -o json >'$OUT/up.json' 2>'$OUT/up.err'" || exit 1
check gr_overlap overlap
expect gr_order "lag0 lag1" order
check gr_g0_ports ports_ok br-vf0 bond0 10
check gr_g1_ports ports_ok br-vf1 bond1 11
check gr_again again
snapshot converged

step "a failure in the middle of lag1's steps rolls back both groups"
V down >/dev/null 2>&1
snapshot before
mid=$(V plan -o json | jq -r '[.steps[] | select(.changed and .group == "lag1") | .id] | .[length/2|floor]')
echo "failing at $mid"
expect_match gr_fail "injected failure" bash -c "V() { '$VFLAG' --config /root/vflag.yaml --state-dir /root/state \"\$@\"; }; V up --fail-at '$mid' 2>&1; [ \$? = 1 ]"
snapshot failed
check gr_fail_restored bash -c "diff -u '$OUT/before.link' '$OUT/failed.link' && diff -u '$OUT/before.devlink' '$OUT/failed.devlink' && diff -u '$OUT/before.ovs' '$OUT/failed.ovs'"

step "down: the baseline"
V up >/dev/null 2>&1
check gr_down bash -c "'$VFLAG' --config /root/vflag.yaml --state-dir /root/state down -v 2>'$OUT/down.err'"
check gr_down_together together
snapshot after
check gr_baseline_link same link base after
check gr_baseline_devlink same devlink base after
check gr_baseline_ovs same ovs base after

step "reboot: the representor names swap between the two groups"
# rename_all CUR... -- WANT...: renames each netdev CUR to the WANT at the
# same place (down first, through a temporary name: the two lists may share
# names), as a boot that numbered the netdevs in another order would have
# named them.
rename_all() {
	local cur=() want=() i=0 n
	while [ "$1" != -- ]; do cur+=("$1"); shift; done
	shift
	want=("$@")
	[ ${#cur[@]} = ${#want[@]} ] || { echo "${#cur[@]} names for ${#want[@]}"; return 1; }
	for n in "${cur[@]}"; do ip link set "$n" down && ip link set "$n" name "vfltmp$i" || return 1; i=$((i + 1)); done
	for i in "${!want[@]}"; do ip link set "vfltmp$i" name "${want[$i]}" || return 1; done
	echo "renamed ${cur[*]} -> ${want[*]}"
}
check gr_rb_before V up
old0=$(reps 10)
old1=$(reps 11)
echo "before the reboot: lag0's representors $(echo $old0), lag1's $(echo $old1)"
# What a reboot keeps (the journal, OVS's database) and loses (OVS's
# datapath, the bonds, the devices' VFs and eswitch mode); the PFs come back
# under the names the config gives, as udev would name them.
run ovs-ctl stop
run ovs-dpctl del-dp ovs-system
run ip link del bond0
run ip link del bond1
echo 10 >/sys/bus/netdevsim/del_device
echo 11 >/sys/bus/netdevsim/del_device
nsim_new 10 2 && nsim_new 11 2 || exit 1
rename_all $(netdev_by_ppn 10 p1) $(netdev_by_ppn 10 p2) $(netdev_by_ppn 11 p1) $(netdev_by_ppn 11 p2) -- $A1 $A2 $B1 $B2 || exit 1
check gr_rb_pre V up --stage pre
# This boot each device's representors take the names the other device's
# had: lag0's are now lag1's old ones and the reverse.
rename_all $(reps 10) $(reps 11) -- $old1 $old0 || exit 1
ovs_start || exit 1
ovs-vsctl show >"$OUT/reboot.ovs"
names_now() { echo "$(echo $(reps 10)) | $(echo $(reps 11))"; }
expect gr_rb_swapped "$(echo $old1) | $(echo $old0)" names_now
check gr_rb_up bash -c "'$VFLAG' --config /root/vflag.yaml --state-dir /root/state up -v 2>'$OUT/reboot-up.err'"
check gr_rb_g0_ports ports_ok br-vf0 bond0 10
check gr_rb_g1_ports ports_ok br-vf1 bond1 11
check gr_rb_again again
check gr_rb_down V down
exit 0
