#!/bin/bash
# Scenario O: the bond's shared tc ingress block on the real kernel. With
# hw-offload, ovs-vswitchd keeps the bond port's rules in the tc block whose
# index is the bond's ifindex and binds the bond's members to it
# (lib/netdev-linux.c netdev_linux_update_lag); vflag up binds them too and
# validate's tc/shared-block check reads them. A PF's ingress qdisc deleted
# by hand, and an OVS restart, are found by validate (and status, the
# metrics), shown by plan as one change per PF and repaired by up without
# touching the bond; down leaves no qdisc on the block. After a link event
# ovs-vswitchd binds only the members it does not know, and an OVS restart
# drops the qdiscs of the members it bound itself: validate's verdict follows
# what the kernel shows, up binds what is left. Then traffic through the bridge (netdevsim of
# 6.1 passes no packets: two veth pairs into namespaces a and b are ports of
# vflag's bridge): validate --offload says every flow runs outside the
# hardware with the true reason (the devices have no tc offload), as the
# kernel's tc filters show (not_in_hw); with tc-policy skip_sw it shows
# ovs-vswitchd's refusal from its log.
#
# MACHINE: default
# TIMEOUT: 420
# EXPECT: o_up o_block_after_up o_validate_block o_del_found o_del_plan o_del_repaired
# EXPECT: o_ovs_event o_restart o_restart_found o_restart_repaired o_ovs_after_repair o_up_again
# EXPECT: o_traffic o_offload_not_in_hw o_offload_kernel_agrees o_skip_sw_refusal o_down
. "$(dirname "$0")/lib.sh"

ID=11
step "bed: netdevsim with 2 ports, bonding, Open vSwitch"
nsim_new $ID 2 || exit 1
PF1=$(netdev_by_ppn $ID p1)
PF2=$(netdev_by_ppn $ID p2)
modprobe bonding max_bonds=0
ovs_start || exit 1
cat >/root/vflag.yaml <<EOC
ovsdb: unix:/var/run/openvswitch/db.sock
libvirt: qemu:///system
lag_timeout: 20s
groups:
  - name: lag0
    pfs: [$PF1, $PF2]
    numvfs: 2
    bond:
      name: bond0
      mode: active-backup
      miimon: 100
    ovs:
      bridge: br-vf
EOC
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

# qdiscs: what the kernel shows for the bond's and the PFs' ingress.
qdiscs() {
	local d
	for d in bond0 "$PF1" "$PF2"; do
		echo "$d: $(tc qdisc show dev "$d" ingress | tr -s ' ')"
	done
}
# all_on_block: bond0 and both PFs have "ingress_block <bond0's ifindex>".
all_on_block() {
	local d b
	b=$(cat /sys/class/net/bond0/ifindex)
	qdiscs
	for d in bond0 "$PF1" "$PF2"; do
		tc qdisc show dev "$d" ingress | grep -q "ingress_block $b " || { echo "$d is not on block $b"; return 1; }
	done
	echo "bond0, $PF1, $PF2 on ingress_block $b"
}
# block_verdict VERDICT [DETAIL-ERE]: validate's tc/shared-block check.
block_verdict() {
	V validate -o json --allow-skip >"$OUT/validate-$1.json" 2>"$OUT/validate-$1.err"
	local got
	got=$(jq -r '.groups[0].checks[] | select(.name == "tc/shared-block") | "\(.verdict) \(.detail)"' "$OUT/validate-$1.json")
	echo "$got"
	case "$got" in "$1 "*) ;; *) return 1 ;; esac
	[ -z "$2" ] || printf '%s' "$got" | grep -Eq -- "$2"
}

step "O: vflag up, hw-offload on"
check o_up V up
check o_block_after_up all_on_block
check o_validate_block block_verdict pass "bond0, $PF1, $PF2 on ingress_block"

step "O: a PF's ingress qdisc deleted by hand"
del_found() {
	tc qdisc del dev "$PF2" ingress || return 1
	qdiscs
	block_verdict fail "$PF2 \(no ingress qdisc\)"
}
check o_del_found del_found
del_plan() {
	local out
	out=$(V plan 2>&1)
	echo "$out" | grep -E 'tc.ingress-block|changes'
	echo "$out" | grep -q "tc.ingress-block/$PF2" && ! echo "$out" | grep -q "tc.ingress-block/$PF1"
}
check o_del_plan del_plan
repaired() {
	local before after
	before=$(cat /sys/class/net/bond0/ifindex)
	V up -o json >"$OUT/up-$1.json" || { cat "$OUT/up-$1.json"; return 1; }
	jq -r '.steps[] | select(.changed) | "\(.id): \(.summary)"' "$OUT/up-$1.json"
	after=$(cat /sys/class/net/bond0/ifindex)
	[ "$before" = "$after" ] || { echo "bond0 made again ($before -> $after)"; return 1; }
	# Only bindings changed: the bond, its slaves and the bridge stayed.
	[ -z "$(jq -r '.steps[] | select(.changed and .kind != "tc.ingress-block") | .id' "$OUT/up-$1.json")" ] || return 1
	all_on_block && block_verdict pass
}
check o_del_repaired repaired del

step "O: both PFs' qdiscs deleted, then a link event of each"
# ovs-vswitchd binds a member on a link event only while the member is not
# in its table of LAG members (netdev_linux_update_lag): a PF it bound
# itself before stays off the block, one vflag bound gets bound by it. The
# verdict must follow what the kernel shows; up binds what is left.
ovs_event() {
	local d
	for d in "$PF1" "$PF2"; do tc qdisc del dev "$d" ingress || return 1; done
	# Any RTM_NEWLINK of the member: an alias set and cleared on this bed's PF.
	for d in "$PF1" "$PF2"; do ip link set dev "$d" alias o-event && ip link set dev "$d" alias "" || return 1; done
	sleep 2
	for d in "$PF1" "$PF2"; do
		tc qdisc show dev "$d" ingress | grep -q ingress_block && echo "$d: bound again by ovs-vswitchd" || echo "$d: left off the block (ovs-vswitchd knows it)"
	done
	if all_on_block >/dev/null; then block_verdict pass || return 1; else block_verdict fail "not on bond0's ingress_block" || return 1; fi
	repaired event
}
check o_ovs_event ovs_event

step "O: OVS restart"
restart() {
	ovs-ctl restart --system-id=random --no-monitor >/tmp/ovs-restart.log 2>&1 || { cat /tmp/ovs-restart.log; return 1; }
	wait_for 20 ovs-vsctl --timeout=2 show || return 1
	wait_for 20 sh -c '[ "$(ovs-vsctl get interface bond0 ofport)" -gt 0 ]' || return 1
	sleep 2
	qdiscs
}
check o_restart restart
# What the kernel shows decides the verdict validate must give.
restart_found() {
	if all_on_block >/dev/null; then
		echo "the restart left every device on the block"
		block_verdict pass
	else
		qdiscs
		block_verdict fail "not on bond0's ingress_block"
	fi
}
check o_restart_found restart_found
check o_restart_repaired repaired restart
ovs_after() { # ovs-vswitchd still has the bond with its offload API, no bind failure
	grep -E "bond0|LAG member" /var/log/openvswitch/ovs-vswitchd.log | tail -n 5
	! grep -q "failed to bind LAG member" /var/log/openvswitch/ovs-vswitchd.log || return 1
	[ "$(ovs-vsctl get interface bond0 ofport)" -gt 0 ]
}
check o_ovs_after_repair ovs_after
check o_up_again again

step "O: traffic through vflag's bridge from two namespaces (veth), validate --offload"
ip netns add a
ip netns add b
traffic() {
	local n
	for n in a b; do
		ip link add "o$n" type veth peer name "o${n}ns" || return 1
		ip link set "o${n}ns" netns "$n"
		ip -n "$n" link set lo up
		ip -n "$n" link set "o${n}ns" up
		ip link set "o$n" up
		ovs-vsctl add-port br-vf "o$n" || return 1
	done
	ip -n a addr add 10.77.0.1/24 dev oans
	ip -n b addr add 10.77.0.2/24 dev obns
	wait_for 20 ip netns exec a ping -c 1 -W 1 10.77.0.2 || { echo "no ping through br-vf"; return 1; }
	ip netns exec a ping -c 30 -i 0.05 -q 10.77.0.2 || return 1
	ovs-appctl dpctl/dump-flows -m >"$OUT/dump-flows.txt"
	grep -E 'in_port\(o[ab]\)' "$OUT/dump-flows.txt" | sed -E 's/^ufid:[^,]*, //' | cut -c1-240
}
check o_traffic traffic
offload_verdict() { # offload_verdict NAME: validate --offload, the offload check's verdict and detail
	V validate -o json --allow-skip --offload >"$OUT/offload-$1.json" 2>"$OUT/offload-$1.err"
	jq -r '.groups[0].checks[] | select(.name == "offload") | "\(.verdict) \(.detail)"' "$OUT/offload-$1.json"
}
not_in_hw() {
	local v
	ip netns exec a ping -c 20 -i 0.05 -q 10.77.0.2 >/dev/null
	v=$(offload_verdict tc)
	echo "$v"
	case "$v" in "fail "*"NOT in hardware"*) ;; *) return 1 ;; esac
	# Every judged flow: not in hardware, with the devices' true reason.
	jq -e '[.groups[0].checks[] | select(.name == "offload") | .data.flows[]] | length > 0 and
		all(.where != "hardware" and (.reasons | join(" ") | test("hw-tc-offload|tc flower offload")))' "$OUT/offload-tc.json" >/dev/null
}
check o_offload_not_in_hw not_in_hw
kernel_agrees() { # the kernel's own view: the veths' tc rules are not in hardware
	local d
	for d in oa ob; do
		tc -s filter show dev "$d" ingress | grep -E 'in_hw|not_in_hw|^filter' | head -n 4
		tc -s filter show dev "$d" ingress | grep -q ' in_hw' && { echo "$d has a rule in hardware"; return 1; }
	done
	jq -r '.groups[0].checks[] | select(.name == "offload") | .data.flows[] | "\(.in_port) \(.where) dp:\(.dp) \(.reasons[0])"' "$OUT/offload-tc.json" | sort -u
}
check o_offload_kernel_agrees kernel_agrees
skip_sw() {
	local v
	ovs-vsctl set Open_vSwitch . other_config:tc-policy=skip_sw || return 1
	ovs-ctl restart --system-id=random --no-monitor >/tmp/ovs-restart2.log 2>&1 || { cat /tmp/ovs-restart2.log; return 1; }
	wait_for 20 ovs-vsctl --timeout=2 show || return 1
	# EOPNOTSUPP refusals are logged at debug level only (dpif-netlink.c).
	ovs-appctl vlog/set dpif_netlink:file:dbg
	wait_for 20 ip netns exec a ping -c 1 -W 1 10.77.0.2 || return 1
	ip netns exec a ping -c 20 -i 0.05 -q 10.77.0.2 >/dev/null
	grep -m 3 'failed to offload flow' /var/log/openvswitch/ovs-vswitchd.log
	v=$(offload_verdict skipsw)
	echo "$v"
	case "$v" in "fail "*) ;; *) return 1 ;; esac
	jq -e '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | .reasons | join(" ")] | any(test("the driver refused it: failed to offload flow"))' "$OUT/offload-skipsw.json" >/dev/null
}
check o_skip_sw_refusal skip_sw
ovs-vsctl remove Open_vSwitch . other_config tc-policy
ovs-vsctl del-port br-vf oa
ovs-vsctl del-port br-vf ob

step "O: down"
down() {
	V down || return 1
	qdiscs
	local d
	for d in "$PF1" "$PF2"; do
		! tc qdisc show dev "$d" ingress | grep -q ingress_block || { echo "$d keeps a qdisc on the block"; return 1; }
	done
	echo "no PF on a block"
}
check o_down down
