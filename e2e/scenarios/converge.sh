#!/bin/bash
# Converge from any state (DESIGN.md section 2a) on the real kernel: two
# netdevsim devices, two groups (each two ports, a bond and a bridge). Config
# transitions, each followed by `vflag up` and checks of the kernel's and
# OVS's own view: bond options that change live (miimon, xmit_hash_policy:
# no slave released; then miimon alone, 200 -> 300 and dropped to the
# default 100: a contained change, the bond step alone and marked contained
# in the log), the bond mode (re-formed), numvfs 4 -> 2 -> 4 (no
# stale representor port left in OVS), a VLAN tag (one OVS port, one step,
# nothing of the other group), the bridge renamed (a foreign bridge
# untouched), a group dropped from the config (undone; the other group
# untouched). After each: a second up changes nothing. Then lag0 with the
# bond options updelay, downdelay, min_links, ad_select, mtu 9000 (bond,
# PFs, representors, OVS mtu_request) and a native-untagged VLAN with
# trunks on a representor port; trunks [20, 30] -> [20] changes that one
# port, a rate group with VF 0's leaf in it; OVS other_config max-idle.
# Then all of those settings dropped: the host equals a fresh up of that
# config (every MTU back, no mtu_request, the bond's defaults, no trunks,
# no rate node or leaf rate, no max-idle). Then a change that fails late, for
# real: numvfs 4 -> 2 (every VF made again), miimon, mtu 9000 and a rate
# group of tx_max 6000 Mbit/s, which netdevsim refuses (at most 5000 Mbit/s,
# drivers/net/netdevsim/dev.c nsim_rate_bytes_to_units) when the rate node is
# made, after the other changes: up exits 1 and rolls back, and the host is
# exactly as before that run (the same canonical dump as cv_unset_fresh,
# numvfs 4, every representor back on the bridge with an ofport), and an up
# of the config from before changes nothing. down returns the guest to its
# baseline (every MTU, no OVS row, other_config as before).
#
# MACHINE: default
# TIMEOUT: 900
# EXPECT: cv_up cv_g1_ports cv_g2_ports cv_up_again
# EXPECT: cv_opts_up cv_opts_miimon cv_opts_hash cv_opts_iplink cv_opts_no_release cv_opts_again
# EXPECT: cv_mii_up cv_mii_sysfs cv_mii_iplink cv_mii_no_release cv_mii_again
# EXPECT: cv_miidrop_up cv_miidrop_sysfs cv_miidrop_no_release cv_miidrop_again
# EXPECT: cv_mode_up cv_mode_sysfs cv_mode_iplink cv_mode_slaves cv_mode_ovs cv_mode_again
# EXPECT: cv_vfs2_up cv_vfs2_sysfs cv_vfs2_devlink cv_vfs2_ports cv_vfs2_no_stale cv_vfs2_again
# EXPECT: cv_vfs4_up cv_vfs4_sysfs cv_vfs4_ports cv_vfs4_no_stale cv_vfs4_tag cv_vfs4_again
# EXPECT: cv_vlan_up cv_vlan_steps cv_vlan_tag cv_vlan_one_port cv_vlan_again
# EXPECT: cv_rename_up cv_rename_old_gone cv_rename_new_ports cv_rename_hw_offload cv_rename_foreign cv_rename_again
# EXPECT: cv_drop_up cv_drop_bond cv_drop_bridge cv_drop_vfs cv_drop_pfs cv_drop_g1_steps cv_drop_g1_state cv_drop_again
# EXPECT: cv_opt2_up cv_opt2_iplink cv_opt2_sysfs cv_opt2_mtus cv_opt2_ovs_mtu cv_opt2_vlan cv_opt2_max_idle cv_opt2_rate
# EXPECT: cv_trunk_up cv_trunk_steps cv_trunk_port cv_trunk_again
# EXPECT: cv_unset_up cv_unset_again cv_unset_fresh
# EXPECT: cv_late_fails cv_late_restored cv_late_same cv_late_vfs cv_late_ports cv_late_again
# EXPECT: cv_down cv_down_mtu cv_baseline_link cv_baseline_devlink cv_baseline_ovs cv_foreign_kept
. "$(dirname "$0")/lib.sh"

step "bed: two netdevsim devices with 2 ports each, bonding, Open vSwitch"
nsim_new 10 2 || exit 1
nsim_new 11 2 || exit 1
A1=$(netdev_by_ppn 10 p1)
A2=$(netdev_by_ppn 10 p2)
B1=$(netdev_by_ppn 11 p1)
B2=$(netdev_by_ppn 11 p2)
echo "group lag0: $A1 $A2; group lag1: $B1 $B2"
modprobe bonding max_bonds=0
ovs_start || exit 1
# Not vflag's: must be left alone.
ovs-vsctl add-br br-ops -- add-port br-ops ops0 -- set interface ops0 type=internal

iflink() { ip -d link show "$1" | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /'; }
snapshot() { # the state down must restore
	ip -d link show | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /' >"$OUT/$1.link"
	devlink dev eswitch show netdevsim/netdevsim10 >"$OUT/$1.devlink"
	devlink dev eswitch show netdevsim/netdevsim11 >>"$OUT/$1.devlink"
	ovs-vsctl show | grep -v ovs_version >"$OUT/$1.ovs"
	ovs-vsctl get Open_vSwitch . other_config >>"$OUT/$1.ovs"
}
same() { # same EXT A B
	if diff -u "$OUT/$2.$1" "$OUT/$3.$1" >"$OUT/$3.$1.diff"; then
		echo "identical ($(wc -l <"$OUT/$3.$1") lines)"
	else
		cat "$OUT/$3.$1.diff"
		return 1
	fi
}
snapshot base
iflink "$B1" >"$OUT/base.B1"
iflink "$B2" >"$OUT/base.B2"
FOREIGN_BASE=$(ovs-vsctl --columns=_uuid,name,ports list bridge br-ops)

# Group 1's knobs; group 2 is fixed (G2=0 drops it).
MODE1=802.3ad MII1=100 HASH1=layer3+4 N1=4 VLAN1=100 BR1=br-vf0 G2=1
# OPTS1: more bond options; MTU1: the group mtu ("" none); VF0: more of VF 0.
OPTS1="" MTU1="" VF0="" OVS1="" RG1=""
write_config() {
	local extra="" mtu="" mii=""
	[ -n "$MII1" ] && mii=", miimon: $MII1"
	[ "$MODE1" = 802.3ad ] && extra=", lacp_rate: fast, xmit_hash_policy: $HASH1"
	extra="$extra$OPTS1"
	[ -n "$MTU1" ] && mtu="
    mtu: $MTU1"
	{
		cat <<EOF
ovsdb: unix:/var/run/openvswitch/db.sock
lag_timeout: 20s
groups:
  - name: lag0
    pfs: [$A1, $A2]
    numvfs: $N1$mtu
    bond: {name: bond0, mode: $MODE1$mii$extra}
    vfs:
      - {pf: 0, vf: 0, vlan: $VLAN1$VF0}   # netdevsim reports no VF info over netlink: no MACs
    ovs: {bridge: $BR1$OVS1}$RG1
EOF
		[ "$G2" = 1 ] && cat <<EOF
  - name: lag1
    pfs: [$B1, $B2]
    numvfs: 4
    bond: {name: bond1, mode: 802.3ad, miimon: 100, lacp_rate: fast, xmit_hash_policy: layer3+4}
    vfs:
      - {pf: 0, vf: 1, vlan: 300}
    ovs: {bridge: br-vf1}
EOF
	} >/root/vflag.yaml
	cp /root/vflag.yaml "$OUT/vflag-$1.yaml"
}
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }
up_json() { # up_json NAME: up -o json, the report kept in $OUT/NAME.json
	local rc
	V up -o json >"$OUT/$1.json" 2>"$OUT/$1.err"
	rc=$?
	jq -r '"changed \(.changes) step(s): \([.steps[] | select(.changed) | "\(.action) \(.id)"] | join(", "))"' "$OUT/$1.json"
	[ $rc = 0 ] || cat "$OUT/$1.err"
	return $rc
}
rep_of() { netdev_by_ppn "$1" "pf0vf$2"; }
# ports_ok BRIDGE BOND ID: the bridge's ports are exactly the bond and
# netdevsim<ID>'s representors, each with an ofport.
ports_ok() {
	local want got p of
	want=$(printf '%s\n' "$2" $(reps "$3") | sort | tr '\n' ' ')
	got=$(ovs-vsctl list-ports "$1" | sort | tr '\n' ' ')
	[ "$want" = "$got" ] || { echo "$1 has [$got], want [$want]"; return 1; }
	for p in $got; do
		of=$(ovs-vsctl get interface "$p" ofport)
		[ "$of" -gt 0 ] 2>/dev/null || { echo "$p: ofport $of"; return 1; }
	done
	echo "$1: $got(all with ofports)"
}
# no_stale: OVS can open every port it has (no "could not open network
# device", no Interface error).
no_stale() {
	local errs
	errs=$(ovs-vsctl --format=csv --data=bare --no-headings --columns=name,error list Interface | awk -F, '$2 != ""')
	if [ -n "$errs" ] || ovs-vsctl show | grep -q 'could not open'; then
		ovs-vsctl show | grep -B2 'error:'
		echo "errors: $errs"
		return 1
	fi
	echo "$(ovs-vsctl --bare --columns=name list Interface | grep -c .) interfaces, none with an error"
}
# changed_ids FILE: the ids of the steps the report says changed.
changed_ids() { jq -r '[.steps[] | select(.changed) | .id] | sort | .[]' "$1"; }
# steps_touching FILE TOKEN...: changed steps whose id has one of the tokens
# as a component (split at / and +).
steps_touching() {
	local f=$1
	shift
	jq -r --args '[.steps[] | select(.changed)] | .[] | select((.id | split("/") | map(split("+")) | flatten) as $c | any($ARGS.positional[]; . as $t | $c | index($t))) | "\(.action) \(.id)"' "$@" <"$f"
}
# slaves_print BOND: what releasing a slave would change: the bond's
# ifindex, its slaves, each slave's ifindex, master, carrier changes and the
# bond's link failure count for it.
slaves_print() {
	local s
	echo "$1 ifindex $(cat /sys/class/net/$1/ifindex) slaves $(cat /sys/class/net/$1/bonding/slaves)"
	for s in $(cat /sys/class/net/$1/bonding/slaves); do
		echo "$s ifindex $(cat /sys/class/net/$s/ifindex) master $(basename "$(readlink /sys/class/net/$s/master)") carrier_changes $(cat /sys/class/net/$s/carrier_changes)" \
			"$(ip -d link show "$s" | grep -o 'master [^ ]*') $(sed -n "/^Slave Interface: $s\$/,/^\$/p" /proc/net/bonding/$1 | grep 'Link Failure Count')"
	done
}
releasing() { dmesg | grep -c "$1: .*Releasing"; }

step "up: two groups"
write_config t0
check cv_up up_json up0 || exit 1
check cv_g1_ports ports_ok br-vf0 bond0 10
check cv_g2_ports ports_ok br-vf1 bond1 11
check cv_up_again again

step "bond options that change live: miimon 100 -> 200, xmit_hash_policy layer3+4 -> layer2"
slaves_print bond0 >"$OUT/opts.before"
REL0=$(releasing bond0)
MII1=200 HASH1=layer2
write_config opts
check cv_opts_up up_json opts
expect cv_opts_miimon 200 cat /sys/class/net/bond0/bonding/miimon
expect cv_opts_hash "layer2 0" cat /sys/class/net/bond0/bonding/xmit_hash_policy
expect_match cv_opts_iplink 'miimon 200 .*xmit_hash_policy layer2 ' ip -d link show bond0
no_release() {
	slaves_print bond0 >"$OUT/opts.after"
	diff -u "$OUT/opts.before" "$OUT/opts.after" || return 1
	[ "$(releasing bond0)" = "$REL0" ] || { dmesg | grep 'bond0: .*Releasing'; return 1; }
	echo "same bond, slaves, masters and link counters; no 'Releasing' in dmesg: $(tr '\n' ' ' <"$OUT/opts.after")"
}
check cv_opts_no_release no_release
check cv_opts_again again

# A change of the bond's link monitoring alone is contained
# (teardown.Change.Contained): the later steps keep what the plan pass read.
# The kernel must still end where a full re-check would put it.
mii_change() { # mii_change NAME: up -v -o json; only the bond step, contained
	local ids
	V -v up -o json >"$OUT/$1.json" 2>"$OUT/$1.err" || { cat "$OUT/$1.err"; return 1; }
	ids=$(changed_ids "$OUT/$1.json" | tr '\n' ' ')
	[ "$ids" = "bond.create/bond0 " ] || { echo "changed: [$ids], want [bond.create/bond0]"; return 1; }
	grep -q "msg=apply .*contained=true" "$OUT/$1.err" || { grep "msg=apply" "$OUT/$1.err"; echo "the bond step's apply is not marked contained"; return 1; }
	echo "changed: $ids(contained: $(jq -r '.steps[] | select(.changed) | .summary' "$OUT/$1.json"))"
}
step "miimon alone 200 -> 300: a contained change"
slaves_print bond0 >"$OUT/opts.before"
REL0=$(releasing bond0)
MII1=300
write_config mii
check cv_mii_up mii_change mii
expect cv_mii_sysfs 300 cat /sys/class/net/bond0/bonding/miimon
expect_match cv_mii_iplink 'miimon 300 .*xmit_hash_policy layer2 ' ip -d link show bond0
check cv_mii_no_release no_release
check cv_mii_again again

step "miimon dropped from the config: the default (100), contained; the fresh up's value is checked with the other dropped settings"
slaves_print bond0 >"$OUT/opts.before"
REL0=$(releasing bond0)
MII1=""
write_config miidrop
check cv_miidrop_up mii_change miidrop
expect cv_miidrop_sysfs 100 cat /sys/class/net/bond0/bonding/miimon
check cv_miidrop_no_release no_release
check cv_miidrop_again again

step "bond mode 802.3ad -> active-backup"
MODE1=active-backup
write_config mode
check cv_mode_up up_json mode
expect cv_mode_sysfs "active-backup 1" cat /sys/class/net/bond0/bonding/mode
expect_match cv_mode_iplink 'bond mode active-backup ' ip -d link show bond0
expect cv_mode_slaves "$A1 $A2" cat /sys/class/net/bond0/bonding/slaves
mode_ovs() { ports_ok br-vf0 bond0 10 && no_stale; }
check cv_mode_ovs mode_ovs
check cv_mode_again again

step "numvfs 4 -> 2"
N1=2
write_config vfs2
check cv_vfs2_up up_json vfs2
expect cv_vfs2_sysfs 2 cat /sys/bus/netdevsim/devices/netdevsim10/sriov_numvfs
expect cv_vfs2_devlink 2 sh -c "$(declare -f reps); reps 10 | wc -l"
check cv_vfs2_ports ports_ok br-vf0 bond0 10
check cv_vfs2_no_stale no_stale
check cv_vfs2_again again

step "numvfs 2 -> 4"
N1=4
write_config vfs4
check cv_vfs4_up up_json vfs4
expect cv_vfs4_sysfs 4 cat /sys/bus/netdevsim/devices/netdevsim10/sriov_numvfs
check cv_vfs4_ports ports_ok br-vf0 bond0 10
check cv_vfs4_no_stale no_stale
tag_of_vf0() { ovs-vsctl get port "$(rep_of 10 0)" tag; }
expect cv_vfs4_tag 100 tag_of_vf0
check cv_vfs4_again again

step "VLAN tag of lag0's VF 0: 100 -> 200"
port_table() { # every port of every bridge: name, uuid, tag
	local b p
	for b in $(ovs-vsctl list-br); do
		for p in $(ovs-vsctl list-ports "$b"); do echo "$b $p $(ovs-vsctl get port "$p" _uuid) tag $(ovs-vsctl get port "$p" tag)"; done
	done | sort
}
port_table >"$OUT/vlan.before"
VLAN1=200
write_config vlan
check cv_vlan_up up_json vlan
G2TOKENS="lag1 bond1 br-vf1 $B1 $B2 netdevsim11 $(reps 11 | tr '\n' ' ')"
vlan_steps() {
	local ids other
	ids=$(changed_ids "$OUT/vlan.json" | tr '\n' ' ')
	other=$(steps_touching "$OUT/vlan.json" $G2TOKENS)
	[ -z "$other" ] || { echo "steps of group lag1: $other"; return 1; }
	[ "$ids" = "ovs.bridge/br-vf0 " ] || { echo "changed: [$ids], want [ovs.bridge/br-vf0]"; return 1; }
	echo "only ovs.bridge/br-vf0 changed ($(jq -r '.steps[] | select(.changed) | .summary' "$OUT/vlan.json")); no step of lag1"
}
check cv_vlan_steps vlan_steps
expect cv_vlan_tag 200 tag_of_vf0
one_port() {
	port_table >"$OUT/vlan.after"
	local d
	d=$(diff "$OUT/vlan.before" "$OUT/vlan.after" | grep '^[<>]')
	printf '%s\n' "$d"
	[ "$(printf '%s\n' "$d" | grep -c '^<')" = 1 ] && [ "$(printf '%s\n' "$d" | grep -c '^>')" = 1 ] &&
		printf '%s\n' "$d" | grep -q "^> br-vf0 $(rep_of 10 0) .* tag 200\$" || return 1
	echo "one port changed (same row, tag 100 -> 200) of $(wc -l <"$OUT/vlan.after")"
}
check cv_vlan_one_port one_port
check cv_vlan_again again

step "bridge renamed: br-vf0 -> br-lag0"
BR1=br-lag0
write_config rename
check cv_rename_up up_json rename
old_gone() { ! ovs-vsctl br-exists br-vf0 && ! ip link show br-vf0 >/dev/null 2>&1 && echo "br-vf0 gone (OVSDB and netdev)"; }
check cv_rename_old_gone old_gone
rename_ports() { ports_ok br-lag0 bond0 10 && no_stale; }
check cv_rename_new_ports rename_ports
expect cv_rename_hw_offload '"true"' ovs-vsctl get Open_vSwitch . other_config:hw-offload
foreign_same() {
	local now
	now=$(ovs-vsctl --columns=_uuid,name,ports list bridge br-ops)
	[ "$now" = "$FOREIGN_BASE" ] && [ "$(ovs-vsctl list-ports br-ops)" = ops0 ] || { echo "br-ops now: $now; was: $FOREIGN_BASE"; return 1; }
	echo "br-ops: same row, ports ops0"
}
check cv_rename_foreign foreign_same
check cv_rename_again again

step "group lag1 dropped from the config"
g1_state() { # group 1 as the kernel and OVS show it
	slaves_print bond0
	iflink bond0 | sed -E 's/ad_(actor|partner)_oper_port_state.*//'
	for n in $A1 $A2 $(reps 10); do iflink "$n"; done
	port_table | grep '^br-lag0 '
	cat /sys/bus/netdevsim/devices/netdevsim10/sriov_numvfs
	devlink dev eswitch show netdevsim/netdevsim10
}
g1_state >"$OUT/drop.g1.before"
G1TOKENS="lag0 bond0 br-lag0 br-vf0 $A1 $A2 netdevsim10 $(reps 10 | tr '\n' ' ')"
G2=0
write_config drop
check cv_drop_up up_json drop
bond_gone() { ! test -e /sys/class/net/bond1 && echo "bond1 gone"; }
check cv_drop_bond bond_gone
bridge_gone() { ! ovs-vsctl br-exists br-vf1 && echo "br-vf1 gone; bridges: $(ovs-vsctl list-br | tr '\n' ' ')"; }
check cv_drop_bridge bridge_gone
vfs_gone() {
	local n m
	n=$(cat /sys/bus/netdevsim/devices/netdevsim11/sriov_numvfs)
	m=$(devlink dev eswitch show netdevsim/netdevsim11)
	[ "$n" = 0 ] && printf '%s' "$m" | grep -q 'mode legacy' && [ -z "$(reps 11)" ] || { echo "numvfs $n; $m; reps $(reps 11)"; return 1; }
	echo "netdevsim11: numvfs 0, $m, no representor"
}
check cv_drop_vfs vfs_gone
pfs_back() {
	iflink "$B1" >"$OUT/drop.B1"
	iflink "$B2" >"$OUT/drop.B2"
	diff -u "$OUT/base.B1" "$OUT/drop.B1" && diff -u "$OUT/base.B2" "$OUT/drop.B2" && echo "$B1 and $B2 as in the baseline (no master, down)"
}
check cv_drop_pfs pfs_back
drop_steps() {
	local g1 notrm
	g1=$(steps_touching "$OUT/drop.json" $G1TOKENS)
	notrm=$(jq -r '.steps[] | select(.changed and .action != "remove") | "\(.action) \(.id)"' "$OUT/drop.json")
	[ -z "$g1$notrm" ] || { echo "steps of lag0: [$g1]; not removals: [$notrm]"; return 1; }
	[ "$(jq -r .error "$OUT/drop.json")" = null ] && [ "$(changed_ids "$OUT/drop.json" | wc -l)" -gt 0 ] ||
		{ echo "up failed or removed nothing: $(jq -r .error "$OUT/drop.json")"; return 1; }
	echo "$(changed_ids "$OUT/drop.json" | wc -l) removals, none of lag0"
}
check cv_drop_g1_steps drop_steps
g1_same() { g1_state >"$OUT/drop.g1.after" && diff -u "$OUT/drop.g1.before" "$OUT/drop.g1.after" && echo "lag0 as before ($(wc -l <"$OUT/drop.g1.after") lines)"; }
check cv_drop_g1_state g1_same
check cv_drop_again again

step "lag0: 802.3ad with updelay/downdelay/min_links/ad_select, mtu 9000, VF 0 native-untagged 10 + trunks 20,30, OVS max_idle"
MODE1=802.3ad OPTS1=", updelay: 400, downdelay: 200, min_links: 1, ad_select: bandwidth" MTU1=9000 OVS1=", max_idle: 2000"
VLAN1=10 VF0=", vlan_mode: native-untagged, trunks: [20, 30], tx_max: 300, rate_group: tenant1"
RG1="
    rate_groups:
      - {name: tenant1, tx_max: 1000, tx_share: 100}"
write_config opt2
check cv_opt2_up up_json opt2
bond_iplink() {
	local l p
	l=$(ip -d link show bond0)
	echo "$l"
	for p in 'mtu 9000 ' 'updelay 400 ' 'downdelay 200 ' 'min_links 1 ' 'ad_select bandwidth '; do
		printf '%s' "$l" | grep -q -- "$p" || { echo "no '$p'"; return 1; }
	done
	echo "bond0: mtu 9000 updelay 400 downdelay 200 min_links 1 ad_select bandwidth"
}
check cv_opt2_iplink bond_iplink
bond_sysfs() { for o in updelay downdelay min_links ad_select; do cat /sys/class/net/bond0/bonding/$o; done | tr '\n' ' '; }
expect cv_opt2_sysfs "400 200 1 bandwidth 1" bond_sysfs
mtus() { # mtus WANT: the PFs and the representors of lag0 have mtu WANT
	local n bad=""
	for n in $A1 $A2 $(reps 10); do
		[ "$(cat /sys/class/net/$n/mtu)" = "$1" ] || bad="$bad $n:$(cat /sys/class/net/$n/mtu)"
	done
	[ -z "$bad" ] || { echo "not $1:$bad"; return 1; }
	echo "$A1 $A2 $(reps 10 | tr '\n' ' ')all mtu $1"
}
check cv_opt2_mtus mtus 9000
ovs_mtu() { # the bond's and the representors' OVS interfaces: mtu_request and mtu 9000
	local n bad=""
	for n in bond0 $(reps 10); do
		r=$(ovs-vsctl get Interface "$n" mtu_request) m=$(ovs-vsctl get Interface "$n" mtu)
		[ "$r $m" = "9000 9000" ] || bad="$bad $n:$r/$m"
	done
	[ -z "$bad" ] || { echo "mtu_request/mtu:$bad"; return 1; }
	echo "bond0 $(reps 10 | tr '\n' ' ')mtu_request 9000 mtu 9000"
}
wait_for 5 ovs_mtu >/dev/null
check cv_opt2_ovs_mtu ovs_mtu
vlan_cols() { ovs-vsctl get Port "$(rep_of 10 0)" vlan_mode tag trunks | tr '\n' ' '; }
expect cv_opt2_vlan "native-untagged 10 [20, 30]" vlan_cols
expect cv_opt2_max_idle '"2000"' ovs-vsctl get Open_vSwitch . other_config:max-idle
rates10() { # netdevsim10's rate objects: key, type, tx_max, tx_share, parent
	devlink -j port function rate show | jq -r '.rate // {} | to_entries[] | select(.key | startswith("netdevsim/netdevsim10/"))
		| "\(.key) \(.value.type) tx_max \(.value.tx_max // 0) tx_share \(.value.tx_share // 0) parent \(.value.parent // "-")"' | sort
}
rate_set() {
	local r
	r=$(rates10)
	echo "$r"
	grep -q '^netdevsim/netdevsim10/tenant1 node ' <<<"$r" && grep -q ' leaf .* parent tenant1$' <<<"$r"
}
check cv_opt2_rate rate_set
# No separate second up here (guest time): the next up changes only the
# trunks' port (cv_trunk_steps), so this state was converged.

step "trunks [20, 30] -> [20]: one port's row"
port_table >"$OUT/trunk.before"
VF0=", vlan_mode: native-untagged, trunks: [20], tx_max: 300, rate_group: tenant1"
write_config trunk
check cv_trunk_up up_json trunk
trunk_steps() {
	local ids
	ids=$(changed_ids "$OUT/trunk.json" | tr '\n' ' ')
	[ "$ids" = "ovs.bridge/br-lag0 " ] || { echo "changed: [$ids], want [ovs.bridge/br-lag0]"; return 1; }
	echo "only ovs.bridge/br-lag0 changed ($(jq -r '.steps[] | select(.changed) | .summary' "$OUT/trunk.json"))"
}
check cv_trunk_steps trunk_steps
trunk_port() {
	port_table >"$OUT/trunk.after"
	diff -u "$OUT/trunk.before" "$OUT/trunk.after" >/dev/null || { diff -u "$OUT/trunk.before" "$OUT/trunk.after"; return 1; }
	[ "$(vlan_cols)" = "native-untagged 10 [20] " ] || { echo "$(rep_of 10 0): $(vlan_cols)"; return 1; }
	echo "$(rep_of 10 0): $(vlan_cols)(same port rows and tags: $(wc -l <"$OUT/trunk.after"))"
}
check cv_trunk_port trunk_port
check cv_trunk_again again

step "settings dropped (mtu, bond options, vlan_mode/trunks, rate group and VF rate, max_idle): the host of a fresh up"
MODE1=802.3ad OPTS1="" MTU1="" OVS1="" VF0="" RG1=""
write_config unset
check cv_unset_up up_json unset
lag0_state() { # what the dropped settings touch, in the kernel's and OVS's view
	# (representors by VF number: a fresh up re-creates them under new names)
	local n o p v label
	label() { local v; for v in 0 1 2 3; do [ "$1" = "$(rep_of 10 $v)" ] && { echo "rep-vf$v"; return; }; done; echo "$1"; }
	for n in $A1 $A2 bond0 $(reps 10); do
		echo "link $(label $n) mtu $(cat /sys/class/net/$n/mtu) master $(basename "$(readlink /sys/class/net/$n/master 2>/dev/null)" 2>/dev/null)"
	done
	for o in mode miimon updelay downdelay min_links ad_select lacp_rate xmit_hash_policy; do
		echo "bond0 $o $(cat /sys/class/net/bond0/bonding/$o)"
	done
	for p in $(ovs-vsctl list-ports "$BR1"); do
		echo "port $(label $p) $(ovs-vsctl get Port "$p" vlan_mode tag trunks | tr '\n' ' ')mtu_request $(ovs-vsctl get Interface "$p" mtu_request) mtu $(ovs-vsctl get Interface "$p" mtu)"
	done
	echo "other_config max-idle $(ovs-vsctl --if-exists get Open_vSwitch . other_config:max-idle)"
	rates10 | sed 's/^/rate /'
}
wait_for 5 sh -c "[ \"\$(cat /sys/class/net/bond0/mtu)\" = 1500 ]" >/dev/null
lag0_state | sort >"$OUT/unset.state"
check cv_unset_again again
V down >"$OUT/unset.down" 2>&1 || cat "$OUT/unset.down"
V up >"$OUT/unset.fresh" 2>&1 || cat "$OUT/unset.fresh"
wait_for 10 ports_ok "$BR1" bond0 10 >/dev/null
lag0_state | sort >"$OUT/fresh.state"
check cv_unset_fresh same state unset fresh

step "a change that fails late: numvfs 4 -> 2, miimon 250, mtu 9000, rate group tx_max 6000 Mbit/s (netdevsim: at most 5000)"
# The host now is the fresh up of the unset config (fresh.state), and the
# journal keeps that config as the last run that ended.
N1=2 MII1=250 MTU1=9000 RG1="
    rate_groups:
      - {name: tenant1, tx_max: 6000}"
write_config late
late_fails() { # up exits 1: the rate node refused, after the other changes; rolled back
	local rc
	V up -o json >"$OUT/late.json" 2>"$OUT/late.err"
	rc=$?
	jq -r '"error: \(.error)", (.steps[] | select(.changed or .error) | "\(.phase) \(.action // "-") \(.id): \(.summary) \(.error // "")")' "$OUT/late.json"
	[ $rc = 1 ] || { echo "exit $rc, want 1"; cat "$OUT/late.err"; return 1; }
	jq -e '.error | test("devlink.rate-node/.*tenant1") and test("rolled back")' "$OUT/late.json" >/dev/null ||
		{ echo "the error does not name the rate node and the rollback"; return 1; }
	jq -e '[.steps[] | select(.phase == "apply" and .changed and (.id | startswith("sriov.numvfs/")))] | length > 0' "$OUT/late.json" >/dev/null ||
		{ echo "the numvfs change did not run before the failure: not a late failure"; return 1; }
}
check cv_late_fails late_fails
late_restored() { # the rollback did again what undoing cannot put back (the bond's options, what the VFs carried)
	jq -r '.steps[] | select(.summary | startswith("restore: ")) | "\(.id): \(.summary)"' "$OUT/late.json" | grep . ||
		{ echo "no step done again (restore: ...)"; return 1; }
}
check cv_late_restored late_restored
wait_for 10 ports_ok "$BR1" bond0 10 >/dev/null
wait_for 5 sh -c "[ \"\$(cat /sys/class/net/bond0/mtu)\" = 1500 ]" >/dev/null
lag0_state | sort >"$OUT/late.state"
check cv_late_same same state fresh late
expect cv_late_vfs 4 cat /sys/bus/netdevsim/devices/netdevsim10/sriov_numvfs
late_ports() { ports_ok "$BR1" bond0 10 && no_stale && expect_tag; }
expect_tag() { [ "$(tag_of_vf0)" = "$VLAN1" ] || { echo "$(rep_of 10 0): tag $(tag_of_vf0), want $VLAN1"; return 1; }; }
check cv_late_ports late_ports
N1=4 MII1="" MTU1="" RG1=""
write_config late-back
check cv_late_again again

step "down"
check cv_down V down
down_mtu() {
	local n bad=""
	for n in $A1 $A2 $B1 $B2; do
		grep -q "^$n: .* mtu $(grep "^$n: " "$OUT/base.link" | grep -o 'mtu [0-9]*' | cut -d' ' -f2) " <(ip -o link show | sed -E 's/^[0-9]+: //') || bad="$bad $n"
	done
	[ -z "$bad" ] && ! ip link show bond0 >/dev/null 2>&1 || { echo "mtu not restored:$bad"; ip -o link show; return 1; }
	echo "$A1 $A2 $B1 $B2: mtu as in the baseline; bond0 gone"
}
check cv_down_mtu down_mtu
snapshot after
check cv_baseline_link same link base after
check cv_baseline_devlink same devlink base after
check cv_baseline_ovs same ovs base after
foreign() { ovs-vsctl list-ports br-ops | grep -qx ops0 && echo "br-ops with ops0 kept"; }
check cv_foreign_kept foreign
exit 0
