#!/bin/bash
# Scenario C: faults on the real kernel. vflag is stopped between steps
# (the hidden --stop-after N, as if killed) at several points: a following
# up resumes to the converged state, and down from the stopped state returns
# the guest to its baseline; vflag killed (SIGKILL) right after the bond
# appears, and between the bond's create and its alias, leaves a host that
# up converges and down returns to the baseline. A config naming a missing PF changes nothing;
# one naming a bond or a dummy as a PF is refused at once for what it is.
#
# MACHINE: default
# TIMEOUT: 420
# EXPECT: c_missing_pf_refused c_missing_pf_no_change c_notpf_bond c_notpf_dummy c_notpf_no_change
# EXPECT: c_nopool_refused c_nopool_no_change c_nopool_validate
# EXPECT: c_stop_3 c_resume_3 c_resumed_converged_3 c_down_3 c_baseline_3
# EXPECT: c_stop_9 c_resume_9 c_resumed_converged_9 c_down_9 c_baseline_9
# EXPECT: c_stopdown_6 c_stopdown_baseline_6
# EXPECT: c_kill_mid c_kill_down c_kill_baseline
# EXPECT: c_alias_not_on_create
# EXPECT: c_killbond_window c_killbond_up c_killbond_converged c_killbond_down c_killbond_baseline
# EXPECT: c_unmarked_down_window c_unmarked_down_unmark c_unmarked_down c_unmarked_down_baseline
# EXPECT: c_unmarked_up_window c_unmarked_up_unmark c_unmarked_up c_unmarked_up_converged c_unmarked_up_marked c_unmarked_up_down c_unmarked_up_baseline
. "$(dirname "$0")/lib.sh"

ID=10
DL=netdevsim/netdevsim$ID
nsim_new $ID 2 || exit 1
PF1=$(netdev_by_ppn $ID p1)
PF2=$(netdev_by_ppn $ID p2)
modprobe bonding max_bonds=0
ovs_start || exit 1
ovs-vsctl add-br br-ops # keeps ovs-system in the baseline

snapshot() { # snapshot NAME [mask]: the guest's state; "mask" hides the random
	# MACs the kernel gives new netdevs, to compare two converged states
	{
		ip -d link show | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /'
		devlink dev eswitch show $DL
		cat /sys/bus/netdevsim/devices/netdevsim$ID/sriov_numvfs
		for b in $(ovs-vsctl list-br); do
			for p in $(ovs-vsctl list-ports "$b" | sort); do echo "bridge $b port $p tag $(ovs-vsctl get port "$p" tag)"; done
		done
		ovs-vsctl get Open_vSwitch . other_config
	} | if [ "${2:-}" = mask ]; then
		# and the LACP state machine's progress (timing, not configuration)
		sed -E 's#link/ether [0-9a-f:]{17}#link/ether <mac>#; s#ad_(actor|partner)_oper_port_state [0-9]+ ad_(actor|partner)_oper_port_state_str <[^>]*>#<lacp state>#g'
	else cat; fi >"$OUT/$1.state"
}
same() {
	if diff -u "$OUT/$1.state" "$OUT/$2.state" >"$OUT/$2.diff"; then
		echo "identical to $1"
	else
		cat "$OUT/$2.diff"
		return 1
	fi
}
config() { # config PF2 [pf_wait]
	cat >/root/vflag.yaml <<EOF
ovsdb: unix:/var/run/openvswitch/db.sock
lag_timeout: 20s
pf_wait: ${2:-60s}
groups:
  - name: lag0
    pfs: [$PF1, $1]
    numvfs: 4
    bond: {name: bond0, mode: 802.3ad, miimon: 100, lacp_rate: fast, xmit_hash_policy: layer3+4}
    vfs:
      - {pf: 0, vf: 2, vlan: 42}
    ovs: {bridge: br-vf}
EOF
}
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }
snapshot base

step "a config naming a missing PF"
# (pf_wait 2s: up waits that long for a PF to appear before refusing; boot.sh
# covers the wait itself)
config eth9 2s
refused() {
	local out
	out=$(V up 2>&1) && { echo "up succeeded"; return 1; }
	grep -q 'groups\[0\].pfs\[1\]' <<<"$out" || { echo "$out"; return 1; }
	echo "refused, naming groups[0].pfs[1]"
}
check c_missing_pf_refused refused
snapshot missing
check c_missing_pf_no_change same base missing

step "a config naming a bond and a dummy as the second PF (pf_wait 60s)"
# They exist and will never be PFs: refused at once for what they are, not
# after pf_wait with "did not appear".
ip link add bondx type bond
ip link add dumx type dummy
notpf() { # notpf NETDEV WHAT
	local out t0 t1
	config "$1" 60s
	t0=$(date +%s)
	out=$(V up 2>&1) && { echo "up succeeded"; return 1; }
	t1=$(date +%s)
	echo "$out" | tail -n 3
	grep -qF "groups[0].pfs[1]: \"$1\" is $2, not a physical port" <<<"$out" || { echo "no 'is $2' for $1"; return 1; }
	[ $((t1 - t0)) -lt 20 ] || { echo "refused after $((t1 - t0)) s"; return 1; }
	echo "$1 refused after $((t1 - t0)) s as $2"
}
check c_notpf_bond notpf bondx "a bond"
check c_notpf_dummy notpf dumx "a virtual interface (no device behind it)"
ip link del bondx
ip link del dumx
snapshot notpf
check c_notpf_no_change same base notpf

step "VF entries on the second port, which has no VFs of its own (netdevsim: one pool, on the first port)"
config "$PF2" 2s
sed -i 's/- {pf: 0, vf: 2, vlan: 42}/- {pf: 1, vf: 0, vlan_mode: native-untagged, vlan: 7, trunks: [8, 9]}/' /root/vflag.yaml
nopool() {
	local out
	out=$(V up 2>&1) && { echo "up succeeded"; return 1; }
	grep -F 'groups[0].vfs[0].pf: "1" has no VFs of its own' <<<"$out" || { echo "$out"; return 1; }
}
check c_nopool_refused nopool
snapshot nopool
check c_nopool_no_change same base nopool

config "$PF2"
# The converged state, for comparison with resumed runs.
V up >/dev/null && snapshot converged mask
# validate of that host against a config with the unrealizable entry fails it.
sed 's/- {pf: 0, vf: 2, vlan: 42}/- {pf: 1, vf: 0, vlan: 7}/' /root/vflag.yaml >/root/nopool.yaml
nopool_validate() {
	local out
	out=$("$VFLAG" --config /root/nopool.yaml --state-dir /root/state validate --allow-skip 2>&1) && { echo "$out"; echo "validate passed"; return 1; }
	grep -E 'FAIL +vf/pf1vf0 ' <<<"$out" || { echo "$out"; return 1; }
}
check c_nopool_validate nopool_validate
V down >/dev/null

for k in 3 9; do
	step "stop after $k steps, resume, down"
	stopped() { V up --stop-after "$1"; [ $? = 3 ]; }
	check c_stop_$k stopped $k
	check c_resume_$k V up
	snapshot resumed_$k mask
	check c_resumed_converged_$k same converged resumed_$k
	check c_down_$k V down
	snapshot after_$k
	check c_baseline_$k same base after_$k
done

step "stop after 6 steps, then down directly"
check c_stopdown_6 stopped 6
V down
snapshot stopdown_6
check c_stopdown_baseline_6 same base stopdown_6

step "SIGKILL before up finished, then down"
# A deterministic moment to kill: with ovs-vswitchd stopped, up applies and
# journals every step, commits its OVSDB transaction, then waits (verify,
# up to 30 s) for ovs-vswitchd to apply it. The vflag process itself is
# killed (not a shell running V, whose child would live on).
OVSD=$(pidof ovs-vswitchd)
kill -STOP $OVSD
"$VFLAG" --config /root/vflag.yaml --state-dir /root/state up >/tmp/killed-up.log 2>&1 &
pid=$!
ovs_committed() { jq -e '[.entries[] | select(.kind == "ovs.bridge" and .state == "applied")] | length == 1' /root/state/journal.json; }
wait_for 60 ovs_committed
kill -9 $pid 2>/dev/null
wait $pid
kill_rc=$?
kill -CONT $OVSD
killed() {
	[ "$kill_rc" = 137 ] || { echo "vflag exited $kill_rc before the kill (SIGKILL gives 137)"; cat /tmp/killed-up.log; return 1; }
	ovs_committed >/dev/null || { echo "journal without the applied ovs.bridge entry"; return 1; }
	echo "vflag killed (exit 137) while waiting for ovs-vswitchd; journal has $(jq '.entries | length' /root/state/journal.json) entries"
}
check c_kill_mid killed
check c_kill_down V down
snapshot killed
check c_kill_baseline same base killed

step "the kernel makes a link without the alias its create request carries"
# (iproute2 sends IFLA_IFALIAS in the RTM_NEWLINK, as vflag's netlink
# library does: rtnl_create_link ignores it, so vflag's mark on a bond
# takes a second request and a pending journal entry covers the window)
alias_on_create() {
	ip link add bondz alias vflag:probe type bond || return 1
	local a
	a=$(cat /sys/class/net/bondz/ifalias)
	ip link del bondz
	[ -z "$a" ] || { echo "alias $a set by the create"; return 1; }
	echo "bond made without the alias its create carried"
}
check c_alias_not_on_create alias_on_create

# killbond TAG: starts up and kills it (SIGKILL) the moment bond0 exists,
# polled in a tight loop: after the bond's create, before its enslaving.
# The kill's outcome is in $OUT/TAG.rc, the bond's slaves then in TAG.slaves.
killbond() {
	"$VFLAG" --config /root/vflag.yaml --state-dir /root/state up >"$OUT/$1.log" 2>&1 &
	local pid=$!
	while [ ! -e /sys/class/net/bond0 ] && kill -0 $pid 2>/dev/null; do :; done
	kill -9 $pid 2>/dev/null
	wait $pid
	echo $? >"$OUT/$1.rc"
	cat /sys/class/net/bond0/bonding/slaves >"$OUT/$1.slaves" 2>&1
}
# killbond_window TAG: killbond until the kill lands in the window (at most
# five tries): on a quiet guest vflag can create, mark and enslave the bond
# before the poll loop runs again. A try that missed is undone by down.
killbond_window() {
	local try
	for try in 1 2 3 4 5; do
		killbond "$1"
		in_window "$1" >/dev/null && { echo "try $try"; return 0; }
		echo "try $try missed the window: $(in_window "$1" | head -n 1)"
		"$VFLAG" --config /root/vflag.yaml --state-dir /root/state down >"$OUT/$1.retry$try.log" 2>&1 || cat "$OUT/$1.retry$try.log"
	done
}
# in_window TAG: the kill landed after the bond's creation and before its
# enslaving, with the journal's bond.create entry pending.
in_window() {
	[ "$(cat "$OUT/$1.rc")" = 137 ] || { echo "vflag exited $(cat "$OUT/$1.rc") before the kill"; cat "$OUT/$1.log"; return 1; }
	[ -e /sys/class/net/bond0 ] || { echo "no bond0 after the kill"; return 1; }
	[ -z "$(tr -d ' \n' <"$OUT/$1.slaves")" ] || { echo "bond0 already had slaves: $(cat "$OUT/$1.slaves")"; return 1; }
	jq -e '[.entries[] | select(.kind == "bond.create" and .state == "pending")] | length == 1' /root/state/journal.json >/dev/null ||
		{ echo "no pending bond.create entry"; jq -c '.entries[] | [.kind, .state]' /root/state/journal.json; return 1; }
	echo "killed with bond0 made (alias '$(cat /sys/class/net/bond0/ifalias)'), not enslaved, its entry pending"
}

step "SIGKILL right after bond0 appears, then up, then down"
killbond_window killbond
check c_killbond_window in_window killbond
check c_killbond_up V up
snapshot killbond_up mask
check c_killbond_converged same converged killbond_up
check c_killbond_down V down
snapshot killbond_down
check c_killbond_baseline same base killbond_down

# The same kill when it lands between the bond's two requests (the create,
# then its alias: microseconds apart, no poll hits them reliably) leaves
# bond0 without vflag's alias: that state, made exactly by clearing the
# alias after the kill, is the one that wedged the host. Both ways out.
unmark() { printf '\n' >/sys/class/net/bond0/ifalias && [ -z "$(cat /sys/class/net/bond0/ifalias)" ] && echo "bond0 unmarked"; }

step "SIGKILL between the bond's create and its alias, then down"
killbond_window unmarked_down
check c_unmarked_down_window in_window unmarked_down
check c_unmarked_down_unmark unmark
check c_unmarked_down V down
snapshot unmarked_down
check c_unmarked_down_baseline same base unmarked_down

step "SIGKILL between the bond's create and its alias, then up, then down"
killbond_window unmarked_up
check c_unmarked_up_window in_window unmarked_up
check c_unmarked_up_unmark unmark
check c_unmarked_up V up
snapshot unmarked_up mask
check c_unmarked_up_converged same converged unmarked_up
marked() { [ "$(cat /sys/class/net/bond0/ifalias)" = vflag:lag0 ] && echo "bond0 alias vflag:lag0"; }
check c_unmarked_up_marked marked
check c_unmarked_up_down V down
snapshot unmarked_up_down
check c_unmarked_up_baseline same base unmarked_up_down
exit 0
