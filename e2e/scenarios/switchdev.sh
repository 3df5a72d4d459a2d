#!/bin/bash
# Scenario A: switchdev VF-LAG on netdevsim's dual-port device with the real
# kernel's devlink, bonding and Open vSwitch (kernel datapath). vflag up with
# 4 VFs, 802.3ad then active-backup; every step checked against the kernel's
# own tools; a second up changes nothing; iperf3 through vflag's bridge; down
# returns the guest to its baseline and leaves a pre-existing bridge and
# bond alone. devlink-rate (netdevsim has leaves and nodes in 6.1): a rate
# group and per-VF tx_max/tx_share as devlink shows them, a one-VF change
# in exactly one step (the other leaves and the node read back converged),
# the group's removal deletes its node, down restores the
# leaves; and the kernel rules the simulated host models (a second parent and deleting a node
# with a child are EBUSY).
#
# MACHINE: default
# TIMEOUT: 540
# EXPECT: a_plan a_up a_plan_eq_up a_eswitch a_reps_devlink a_reps_ppn a_bond_mode a_bond_slaves
# EXPECT: a_ovs_ports a_ovs_hw_offload a_ovs_tag a_ovs_ofports a_status_json a_lag_unverified
# EXPECT: a_second_up_no_change a_ping a_iperf3 a_validate_datapath a_lacp_no_partner a_status_datapath a_status_prometheus a_down a_down_again
# EXPECT: a_baseline_link a_baseline_devlink a_baseline_ovs a_foreign_kept
# EXPECT: ab_up ab_bond_mode ab_active_slave ab_down ab_baseline
# EXPECT: r_kernel_rules r_up r_node r_leaves r_one_step r_validate r_prune_node r_down_restores
. "$(dirname "$0")/lib.sh"

ID=10
DL=netdevsim/netdevsim$ID
step "bed: netdevsim with 2 ports, bonding, Open vSwitch"
nsim_new $ID 2 || exit 1
PF1=$(netdev_by_ppn $ID p1)
PF2=$(netdev_by_ppn $ID p2)
modprobe bonding max_bonds=0
ovs_start || exit 1
# What vflag did not create and must leave alone: a bridge with a port of
# its own and a bond.
ovs-vsctl add-br br-ops -- add-port br-ops ops0 -- set interface ops0 type=internal
ip link add bond-ops type bond mode active-backup miimon 100

snapshot() { # the state down must restore
	# The kernel attaches a default qdisc the first time a netdev goes up and
	# keeps it after it goes down (noop -> noqueue): not vflag's to restore.
	ip -d link show | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /' >"$OUT/$1.link"
	devlink dev eswitch show $DL >"$OUT/$1.devlink"
	ovs-vsctl show | grep -v ovs_version >"$OUT/$1.ovs"
	ovs-vsctl get Open_vSwitch . other_config >>"$OUT/$1.ovs"
}
same() { # same NAME A B
	if diff -u "$OUT/$2.$1" "$OUT/$3.$1" >"$OUT/$3.$1.diff"; then
		echo "identical ($(wc -l <"$OUT/$3.$1") lines)"
	else
		cat "$OUT/$3.$1.diff"
		return 1
	fi
}
snapshot base

write_config() { # write_config MODE EXTRA-BOND-LINES
	cat >/root/vflag.yaml <<EOF
ovsdb: unix:/var/run/openvswitch/db.sock
libvirt: qemu:///system
lag_timeout: 20s
groups:
  - name: lag0
    pfs: [$PF1, $PF2]
    numvfs: 4
    bond:
      name: bond0
      mode: $1
      miimon: 100
$2
${RATE_GROUPS:-}
    vfs:
      - {pf: 0, vf: 0, vlan: 100${VF0:-}}   # netdevsim reports no VF info over netlink: no MACs
${VFS:-}
    ovs:
      bridge: br-vf
EOF
}
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

step "A: vflag up, 802.3ad"
write_config 802.3ad "      lacp_rate: fast
      xmit_hash_policy: layer3+4"
expect_match a_plan 'would change .* step' V plan
V plan -o json >"$OUT/plan.json"
up_json() { # up, its JSON report kept
	local rc
	V up -o json >"$OUT/up.json"
	rc=$?
	jq -r '"changed \(.changes) step(s)"' "$OUT/up.json"
	return $rc
}
check a_up up_json
changed_ids() { jq -r '[.steps[] | select(.changed) | .id] | sort | .[]' "$1"; }
plan_eq_up() { # the ids plan said would change are the ids up changed
	local p u
	p=$(changed_ids "$OUT/plan.json")
	u=$(changed_ids "$OUT/up.json")
	if [ -n "$u" ] && [ "$p" = "$u" ]; then
		echo "plan == up: $(printf '%s\n' "$u" | wc -l) step ids"
	else
		diff <(printf '%s\n' "$p") <(printf '%s\n' "$u")
		return 1
	fi
}
check a_plan_eq_up plan_eq_up
V status -o json >"$OUT/status.json"
expect_match a_eswitch 'mode switchdev' devlink dev eswitch show $DL

reps_by_devlink() { # pfnum/vfnum -> netdev, from the kernel's devlink
	devlink -j port show | jq -r '.port | to_entries[] | select(.value.flavour == "pcivf") | "\(.value.vfnum) \(.value.netdev)"' | sort -n
}
reps_by_vflag() { jq -r '.groups[0].vfs[] | "\(.index) \(.representor)"' "$OUT/status.json" | sort -n; }
expect a_reps_devlink "$(reps_by_devlink | tr '\n' ' ' | sed 's/ $//')" sh -c "$(declare -f reps_by_vflag); OUT=$OUT reps_by_vflag | tr '\n' ' '"
reps_ppn() {
	for v in 0 1 2 3; do
		want=$(netdev_by_ppn $ID pf0vf$v) || return 1
		got=$(jq -r ".groups[0].vfs[] | select(.index == $v) | .representor" "$OUT/status.json")
		[ "$want" = "$got" ] || { echo "vf $v: phys_port_name says $want, vflag says $got"; return 1; }
	done
	echo "pf0vf0..3 match vflag's map"
}
check a_reps_ppn reps_ppn
expect a_bond_mode "802.3ad 4" cat /sys/class/net/bond0/bonding/mode
expect a_bond_slaves "$PF1 $PF2" cat /sys/class/net/bond0/bonding/slaves
REPS=$(jq -r '.groups[0].vfs[].representor' "$OUT/status.json" | sort | tr '\n' ' ')
expect a_ovs_ports "$(printf '%s\n' bond0 $REPS | sort | tr '\n' ' ' | sed 's/ $//')" sh -c 'ovs-vsctl list-ports br-vf | sort | tr "\n" " " | sed "s/ $//"'
expect a_ovs_hw_offload '"true"' ovs-vsctl get Open_vSwitch . other_config:hw-offload
REP0=$(jq -r '.groups[0].vfs[] | select(.index == 0) | .representor' "$OUT/status.json")
expect a_ovs_tag 100 ovs-vsctl get port "$REP0" tag
ofports() {
	for p in bond0 $REPS; do
		of=$(ovs-vsctl get interface "$p" ofport)
		[ "$of" -gt 0 ] 2>/dev/null || { echo "$p: ofport $of"; return 1; }
	done
	echo "bond0 and $(echo $REPS | wc -w) representors have ofports"
}
check a_ovs_ofports ofports
status_ok() {
	jq -e --arg p1 "$PF1" --arg p2 "$PF2" '.groups[0] |
		(.pfs | map(.eswitch) == ["switchdev","switchdev"]) and
		(.bond.mode == "802.3ad") and (.bond.slaves == [$p1, $p2]) and
		(.hw_offload == "true") and (.vfs | length == 4) and
		(.vfs | map(.ofport > 0) | all)' "$OUT/status.json"
}
check a_status_json status_ok
# netdevsim has no mlx5 debugfs: vflag must say so, never "active".
expect a_lag_unverified unverified jq -r '.groups[0].lag.state' "$OUT/status.json"
second_up() { V up --detailed-exit-codes; }
expect_match a_second_up_no_change 'no changes' second_up

step "A: iperf3 between two namespaces through vflag's bridge"
for i in 1 2; do
	ip netns add ns$i
	ip link add v${i}h type veth peer name v${i}n
	ip link set v${i}n netns ns$i
	ip -n ns$i addr add 198.18.0.$i/24 dev v${i}n
	ip -n ns$i link set lo up
	ip -n ns$i link set v${i}n up
	ip link set v${i}h up
	ovs-vsctl add-port br-vf v${i}h
done
dp_lookups() { ovs-dpctl show -s | sed -n 's/^ *lookups: //p'; }
traffic_diag() { # what the datapath and ovs-vswitchd did, for a failed check
	{
		ovs-dpctl show -s
		ovs-appctl upcall/show
		ovs-ofctl dump-flows br-vf
		grep -E 'n-handler-threads|WARN|ERR' /var/log/openvswitch/ovs-vswitchd.log
	} >"$OUT/traffic-diag.txt" 2>&1
	echo "datapath lookups: $(dp_lookups); $(grep -m1 -o 'Overriding n-handler-threads to [0-9]*' /var/log/openvswitch/ovs-vswitchd.log)"
}
if check a_ping ip netns exec ns1 ping -c 3 -i 0.2 -W 2 198.18.0.2; then
	ip netns exec ns2 iperf3 -s -1 -D --logfile /tmp/iperf3-server.log
	wait_for 10 sh -c 'ip netns exec ns2 ss -ltn | grep -q :5201'
	ip netns exec ns1 iperf3 -c 198.18.0.2 -t 10 -J >"$OUT/iperf3.json" 2>&1
	rate=$(jq -r '.end.sum_received.bits_per_second // empty' "$OUT/iperf3.json")
	secs=$(jq -r '.end.sum_received.seconds // empty' "$OUT/iperf3.json")
	if awk -v r="$rate" 'BEGIN { exit !(r > 0) }'; then
		ok a_iperf3 "$(awk -v r="$rate" -v s="$secs" 'BEGIN { printf "%.2f Gbit/s received over %.1f s", r / 1e9, s }') through br-vf; datapath lookups: $(dp_lookups)"
	else
		fail a_iperf3 "$(tail -n 3 "$OUT/iperf3.json") $(traffic_diag)"
	fi
else
	fail a_iperf3 "no ping: $(traffic_diag)"
fi
# vflag validate reads the kernel datapath's counters itself (genetlink
# ovs_datapath): after the traffic, upcalls were made and none was lost.
V validate -o json >"$OUT/validate.json" 2>"$OUT/validate.err"
dp_check() {
	jq -er '.groups[0].checks[] | select(.name == "ovs/datapath") |
		select(.verdict == "pass" and .data.missed > 0 and .data.lost == 0) | .detail' "$OUT/validate.json" ||
		{ jq -c '.groups[0].checks[] | select(.name == "ovs/datapath")' "$OUT/validate.json"; return 1; }
}
check a_validate_datapath dp_check
# netdevsim's ports have no link partner (6.1 has no netdevsim peers): the
# 802.3ad bond finds nobody answering LACP, and validate says so.
no_partner() {
	local want
	want=$(cat /sys/class/net/bond0/bonding/ad_partner_mac)
	[ "$want" = 00:00:00:00:00:00 ] || { echo "kernel: bond0's partner is $want"; return 1; }
	jq -er '.groups[0].checks[] | select(.name == "bond/lacp" and .verdict == "fail") | .detail' "$OUT/validate.json" |
		grep 'no LACP partner answers on bond bond0' || { jq -c '.groups[0].checks[] | select(.name == "bond/lacp")' "$OUT/validate.json"; return 1; }
}
check a_lacp_no_partner no_partner
status_dp() {
	V status -o json | jq -er '.groups[0] | select(.datapath.missed > 0 and .datapath.lost == 0 and
		((.problems // []) | map(select(test("datapath|upcall"))) | length == 0)) |
		"status: \(.datapath.name) missed \(.datapath.missed) lost \(.datapath.lost), no datapath problem"'
}
check a_status_datapath status_dp
# The same facts as node_exporter metrics, from the real kernel.
prom() {
	local out rc
	# Exit 4: a problem (here no LACP partner); the metrics are complete.
	out=$(V status -o prometheus)
	rc=$?
	[ $rc = 0 ] || [ $rc = 4 ] || { echo "status -o prometheus: exit $rc"; return 1; }
	printf '%s\n' "$out" | grep -Eq '^vflag_ovs_datapath_upcalls\{group="lag0",bridge="br-vf",datapath="ovs-system"\} [1-9][0-9]*$' &&
		printf '%s\n' "$out" | grep -Eq '^vflag_ovs_datapath_upcalls_lost\{group="lag0",bridge="br-vf",datapath="ovs-system"\} 0$' &&
		printf '%s\n' "$out" | grep -Eq '^vflag_bond_lacp_partner\{group="lag0",bond="bond0"\} 0$' ||
		{ printf '%s\n' "$out" | grep -E 'datapath|lacp'; return 1; }
	printf '%s\n' "$out" | grep -E '^vflag_(ovs_datapath|bond_lacp)' | tr '\n' ' '
}
check a_status_prometheus prom
for i in 1 2; do ovs-vsctl del-port br-vf v${i}h; ip link del v${i}h; ip netns del ns$i; done

step "A: devlink-rate"
rate_json() { devlink -j port function rate show; }
leaf_of() { # leaf_of VF: the devlink rate object name of the VF's port
	devlink -j port show | jq -r --argjson v "$1" '.port | to_entries[] | select(.value.flavour == "pcivf" and .value.vfnum == $v) | .key'
}
LEAF0=$(leaf_of 0) LEAF1=$(leaf_of 1) LEAF3=$(leaf_of 3)
kernel_rules() { # what internal/sim models, on the real kernel (tx in bytes/s in JSON)
	local e=0
	devlink port function rate add $DL/probe tx_max 100mbit || return 1
	devlink port function rate set "$LEAF3" parent probe || e=1
	devlink port function rate set "$LEAF3" parent probe 2>"$OUT/probe.err" && { echo "second parent accepted"; e=1; }
	grep -q 'busy' "$OUT/probe.err" && echo "second parent: $(cat "$OUT/probe.err")" || e=1
	devlink port function rate del $DL/probe 2>"$OUT/probe.err" && { echo "node with a child deleted"; e=1; }
	grep -q 'busy' "$OUT/probe.err" && echo "del with child: $(cat "$OUT/probe.err")" || e=1
	# tx_share > tx_max cannot be tried here: the devlink tool refuses it
	# itself ("Invalid. Expected tx_share <= tx_max"), reading the current
	# value when only one is given.
	devlink port function rate set "$LEAF3" tx_max 10mbit tx_share 5mbit && echo "tx_max 10mbit tx_share 5mbit set" || e=1
	devlink port function rate set "$LEAF3" tx_max 10000mbit 2>"$OUT/probe.err" && echo "10000mbit accepted" || echo "10000mbit: $(cat "$OUT/probe.err")"
	devlink port function rate set "$LEAF3" noparent tx_max 0 tx_share 0 || e=1
	devlink port function rate del $DL/probe || e=1
	rate_json | jq -c . >"$OUT/rate-probe.json"
	return $e
}
check r_kernel_rules kernel_rules
RATE_GROUPS="    rate_groups:
      - {name: tenant1, tx_max: 1000, tx_share: 100}"
VF0=", tx_max: 300, tx_share: 50, rate_group: tenant1"
VFS="      - {pf: 0, vf: 1, tx_max: 200, rate_group: tenant1}"
write_config 802.3ad "      lacp_rate: fast
      xmit_hash_policy: layer3+4"
rate_up() { # up; prints the ids it changed
	V up -o json >"$OUT/rate-up.json" 2>>"$OUT/rate-up.err" || { jq -c '.error' "$OUT/rate-up.json"; return 1; }
	changed_ids "$OUT/rate-up.json" | tr '\n' ' '
}
expect r_up "devlink.rate-leaf/$PF1/0 devlink.rate-leaf/$PF1/1 devlink.rate-node/$DL/tenant1" rate_up
rate_json >"$OUT/rate.json"
expect r_node "node tx_max 1000Mbit tx_share 100Mbit" jq -r --arg n "$DL/tenant1" \
	'.rate[$n] | "\(.type) tx_max \(.tx_max / 125000)Mbit tx_share \(.tx_share / 125000)Mbit"' "$OUT/rate.json"
leaf_line() { # leaf_line OBJ: "tx_max N tx_share N parent P" in Mbit/s
	jq -r --arg n "$1" '.rate[$n] | "\(.type) tx_max \((.tx_max // 0) / 125000) tx_share \((.tx_share // 0) / 125000) parent \(.parent // "-")"' "$OUT/rate.json"
}
leaves() { echo "vf0 $(leaf_line "$LEAF0"); vf1 $(leaf_line "$LEAF1"); vf3 $(leaf_line "$LEAF3")"; }
expect r_leaves "vf0 leaf tx_max 300 tx_share 50 parent tenant1; vf1 leaf tx_max 200 tx_share 0 parent tenant1; vf3 leaf tx_max 0 tx_share 0 parent -" leaves
VFS="      - {pf: 0, vf: 1, tx_max: 250, rate_group: tenant1}"
write_config 802.3ad "      lacp_rate: fast
      xmit_hash_policy: layer3+4"
one_step() { rate_up && rate_json | jq -r --arg n "$LEAF1" '"; devlink: tx_max \(.rate[$n].tx_max / 125000)Mbit"'; }
expect r_one_step "devlink.rate-leaf/$PF1/1 ; devlink: tx_max 250Mbit" one_step
rate_checks() {
	V validate -o json >"$OUT/rate-validate.json" 2>/dev/null
	jq -r '[.groups[0].checks[] | select(.name | startswith("rate/")) | "\(.name) \(.verdict)"] | join(", ")' "$OUT/rate-validate.json"
}
expect r_validate "rate/$DL/tenant1 pass, rate/$PF1/vf0 pass, rate/$PF1/vf1 pass" rate_checks
RATE_GROUPS="" VF0=", tx_max: 300, tx_share: 50" VFS="      - {pf: 0, vf: 1, tx_max: 250}"
write_config 802.3ad "      lacp_rate: fast
      xmit_hash_policy: layer3+4"
prune() {
	rate_up || return 1
	echo -n "; "
	rate_json | jq -r --arg n "$DL/tenant1" --arg l0 "$LEAF0" --arg l1 "$LEAF1" \
		'"node \(if .rate[$n] then "present" else "gone" end); parents \(.rate[$l0].parent // "-") \(.rate[$l1].parent // "-")"'
}
expect r_prune_node "devlink.rate-node/$DL/tenant1 ; node gone; parents - -" prune
RATE_GROUPS="" VF0="" VFS=""

step "A: vflag down"
down_json() { V down -o json >"$OUT/down.json"; local rc=$?; jq -r '"undid \(.changes) step(s)"' "$OUT/down.json"; return $rc; }
check a_down down_json
down_rates() { # the leaves got their prior values back (before the eswitch left switchdev, which a node would have refused)
	local n
	n=$(jq '[.steps[] | select(.kind == "devlink.rate-leaf" and .changed and (.summary | endswith("tx_max - tx_share - parent -")))] | length' "$OUT/down.json")
	echo "$n leaves restored; $(rate_json | jq '[.rate[]? | select(.type == "node")] | length') node(s) left"
}
expect r_down_restores "2 leaves restored; 0 node(s) left" down_rates
expect_match a_down_again 'nothing to undo' V down
snapshot after
check a_baseline_link same link base after
check a_baseline_devlink same devlink base after
check a_baseline_ovs same ovs base after
foreign() { ovs-vsctl list-ports br-ops | grep -qx ops0 && ip -d link show bond-ops | grep -q 'bond mode active-backup' && echo "br-ops with ops0 and bond-ops kept"; }
check a_foreign_kept foreign

step "A: active-backup"
write_config active-backup ""
check ab_up V up
expect ab_bond_mode "active-backup 1" cat /sys/class/net/bond0/bonding/mode
expect_match ab_active_slave "^($PF1|$PF2)\$" cat /sys/class/net/bond0/bonding/active_slave
check ab_down V down
snapshot ab
check ab_baseline same link base ab
exit 0
