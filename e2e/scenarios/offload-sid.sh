#!/bin/bash
# Scenario S: the positive offload path on Debian unstable's kernel (7.x),
# whose netdevsim accepts tc flower rules (tc.c: TC_SETUP_CLSFLOWER returns
# 0, so a rule is in_hw) and links two of its netdevs as peers
# (/sys/bus/netdevsim/link_device: what one sends, the other receives).
#
#   ns a: nsim13 p1 ==link== nsim14 p1 --+
#   ns b: nsim13 p2 ==link== nsim14 p2 --+-- br-vf (vflag's, hw-offload on)
#                   (VF0, VF1 representors) --+
#                          bond0 (802.3ad) --+
#                     PF p1 ==link== nsim12 p1 --+-- swb (802.3ad) in ns sw:
#                     PF p2 ==link== nsim12 p2 --+   the switch
#
# Only a physical netdevsim port links: netdev_is_nsim() accepts
# nsim_netdev_ops, and VF representors have nsim_vf_netdev_ops (netdev.c),
# so link_device refuses them with EINVAL ("is not a netdevsim"). Ports of a
# fourth device stand in for the VFs' representors as bridge ports, as the
# veths of offload.sh do on 6.1. Traffic between a and b crosses the bridge
# port to port; traffic from a to the switch crosses it to bond0 and comes
# back through the bond's shared tc block.
#
# Checks: validate --offload says every flow with traffic runs in hardware,
# as the kernel's tc filters show (in_hw), the bond's rules on its shared
# block in hardware on both PFs (in_hw_count 2); with tc-policy skip_hw it
# says they are not, and why; after the OVS restarts, up binds the PFs to
# the block again and the flows are back in hardware. LACP does not run on netdevsim (it reports no speed or
# duplex, and bonding lets only a full-duplex port take part in LACP:
# bond_3ad.c), so validate's bond/lacp check must say "no LACP partner".
#
# MACHINE: default
# KERNEL: sid
# TIMEOUT: 480
# EXPECT: s_kernel s_up s_linked s_traffic s_lacp_verdict s_in_hw s_kernel_in_hw
# EXPECT: s_uplink_traffic s_block_in_hw s_validate_offload_uplink s_bond_off_repaired s_not_in_hw_reason
# EXPECT: s_no_flow_api s_restored s_down
. "$(dirname "$0")/lib.sh"

check s_kernel sid_kernel || exit 1


step "bed: netdevsim NIC (11), switch (12), VM ends (13), VF stand-ins (14); bonding, Open vSwitch"
nsim_new 11 2 || exit 1
PF1=$(netdev_by_ppn 11 p1)
PF2=$(netdev_by_ppn 11 p2)
nsim_new 12 2 || exit 1
SW1=$(netdev_by_ppn 12 p1)
SW2=$(netdev_by_ppn 12 p2)
nsim_new 13 2 || exit 1
M1=$(netdev_by_ppn 13 p1)
M2=$(netdev_by_ppn 13 p2)
nsim_new 14 2 || exit 1
N1=$(netdev_by_ppn 14 p1)
N2=$(netdev_by_ppn 14 p2)
modprobe bonding max_bonds=0
ip netns add sw
ip netns add a
ip netns add b
ip link set "$SW1" netns sw
ip link set "$SW2" netns sw
ip link set "$M1" netns a
ip link set "$M2" netns b
# The switch: an 802.3ad port-channel over the two ports the PFs are linked to.
ip -n sw link add swb type bond mode 802.3ad lacp_rate fast miimon 100
ip -n sw link set "$SW1" master swb
ip -n sw link set "$SW2" master swb
ip -n sw link set lo up
ip -n sw link set swb up
ip -n sw addr add 10.78.0.1/24 dev swb
nsim_link "$PF1" "" "$SW1" sw || exit 1
nsim_link "$PF2" "" "$SW2" sw || exit 1
nsim_link "$M1" a "$N1" "" || exit 1
nsim_link "$M2" b "$N2" "" || exit 1
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
      mode: 802.3ad
      lacp_rate: fast
      miimon: 100
    ovs:
      bridge: br-vf
      hw_offload: true
EOC
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

step "S: vflag up (switchdev, bond over the linked PFs, hw-offload)"
check s_up V up
linked() { # the VF stand-ins join vflag's bridge beside the representors
	local n m
	for n in a b; do
		m=$M1
		[ $n = a ] || m=$M2
		ip -n $n link set lo up
		ip -n $n link set "$m" up
	done
	ip -n a addr add 10.78.0.11/24 dev "$M1"
	ip -n b addr add 10.78.0.12/24 dev "$M2"
	ip link set "$N1" up
	ip link set "$N2" up
	ovs-vsctl add-port br-vf "$N1" -- add-port br-vf "$N2" || return 1
	echo "br-vf: $(ovs-vsctl list-ports br-vf | tr '\n' ' ')"
}
check s_linked linked
traffic() {
	wait_for 20 ip netns exec a ping -c 1 -W 1 10.78.0.12 || { echo "no ping a -> b through br-vf"; return 1; }
	ip netns exec a ping -c 30 -i 0.05 -q 10.78.0.12 | tail -n 2
}
check s_traffic traffic
lacp_verdict() { # no LACP on netdevsim: validate says so
	ethtool "$PF1" | grep -E 'Speed|Duplex'
	grep -E '^(Slave Interface|Aggregator ID|Partner Mac Address)' /proc/net/bonding/bond0 | tr -s ' ' | head -n 8
	V validate -o json --allow-skip >"$OUT/validate-lacp.json" 2>&1
	jq -r '.groups[0].checks[] | select(.name == "bond/lacp") | "\(.verdict) \(.detail)"' "$OUT/validate-lacp.json"
	jq -e '.groups[0].checks[] | select(.name == "bond/lacp") | .verdict == "fail" and (.detail | test("no LACP partner"))' "$OUT/validate-lacp.json" >/dev/null
}
check s_lacp_verdict lacp_verdict

offload_verdict() { # offload_verdict NAME: validate --offload, the offload check's verdict and detail
	V validate -o json --allow-skip --offload >"$OUT/offload-$1.json" 2>"$OUT/offload-$1.err"
	jq -r '.groups[0].checks[] | select(.name == "offload") | "\(.verdict) \(.detail)"' "$OUT/offload-$1.json"
}
flows_of() { # flows_of NAME PORT: the offload check's flows from PORT, a line each
	jq -r --arg p "$2" '.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.in_port == $p) |
		"\(.in_port) packets=\(.packets) where=\(.where) dp=\(.dp) offloaded=\(.offloaded) \(.reasons // [] | join("; "))"' "$OUT/offload-$1.json"
}
# all_in_hw NAME PORT...: every flow with traffic from the PORTs is in hardware.
all_in_hw() {
	local f=$OUT/offload-$1.json p ports
	shift
	ports=$(printf '%s\n' "$@" | jq -R . | jq -sc .)
	jq -e --argjson ps "$ports" '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select((.in_port | IN($ps[])) and .packets > 0)] |
		length >= 1 and all(.where == "hardware" and .offloaded == "yes" and .dp == "tc")' "$f" >/dev/null
}
in_hw() {
	local v
	# netdevsim's flower callback does not look at hw-tc-offload (mlx5's
	# does): the rules are in hardware whatever the feature says, and the
	# verdict follows the kernel's in_hw, not the feature.
	ethtool -k "$N1" | grep hw-tc-offload
	ip netns exec a ping -c 30 -i 0.05 -q 10.78.0.12 | tail -n 1
	v=$(offload_verdict ports)
	echo "$v"
	flows_of ports "$N1"
	flows_of ports "$N2"
	case "$v" in "pass "*) ;; *) return 1 ;; esac
	all_in_hw ports "$N1" && all_in_hw ports "$N2"
}
check s_in_hw in_hw
kernel_in_hw() { # the kernel's own view: the ports' rules are in_hw
	local d
	for d in "$N1" "$N2"; do
		tc -s filter show dev "$d" ingress | grep -E 'in_hw|Sent' | head -n 4
		tc -s filter show dev "$d" ingress | grep -q ' in_hw in_hw_count 1' || { echo "$d: no rule in hardware"; return 1; }
	done
}
check s_kernel_in_hw kernel_in_hw

step "S: traffic to the switch: port -> bond0 -> PFs -> swb, and back through the shared block"
uplink_traffic() {
	wait_for 20 ip netns exec a ping -c 1 -W 1 10.78.0.1 || { echo "no ping a -> switch through bond0"; return 1; }
	ip netns exec a ping -c 30 -i 0.05 -q 10.78.0.1 | tail -n 1
}
check s_uplink_traffic uplink_traffic
# block_in_hw: the bond's rules sit on its shared block, in hardware on both PFs.
block_in_hw() {
	local b
	b=$(cat /sys/class/net/bond0/ifindex)
	tc -s filter show block "$b" | grep -E '^filter.*handle|in_hw|Sent' | head -n 6
	tc -s filter show block "$b" | grep -q ' in_hw in_hw_count 2' || { echo "block $b: no rule in hardware on both PFs"; return 1; }
}
check s_block_in_hw block_in_hw
validate_offload_uplink() {
	local v
	ip netns exec a ping -c 20 -i 0.05 -q 10.78.0.1 >/dev/null
	v=$(offload_verdict uplink)
	echo "$v"
	flows_of uplink bond0
	case "$v" in "pass "*) ;; *) return 1 ;; esac
	all_in_hw uplink bond0 || return 1
	jq -r '.groups[0].checks[] | select(.name == "tc/shared-block") | "\(.verdict) \(.detail)"' "$OUT/offload-uplink.json"
}
check s_validate_offload_uplink validate_offload_uplink

step "S: the bond off its block while the PFs hold its rules in hardware"
# What an ovs-vswitchd restart can leave (it did in some runs here): the
# kernel then refuses the bond the block (EOPNOTSUPP, cls_api.c
# tcf_block_offload_bind); up lets the PFs leave and rejoin.
qdiscs() { # the ingress qdiscs of bond0 and the PFs
	local d
	for d in bond0 "$PF1" "$PF2"; do echo "$d: $(tc qdisc show dev "$d" ingress | tr -s ' ')"; done
}
on_block() { # bond0 and both PFs on bond0's block
	local d b
	b=$(cat /sys/class/net/bond0/ifindex)
	for d in bond0 "$PF1" "$PF2"; do
		echo "$d: $(tc qdisc show dev "$d" ingress | tr -s ' ')"
		tc qdisc show dev "$d" ingress | grep -q "ingress_block $b " || return 1
	done
}
bond_off() {
	local plan
	ip netns exec a ping -c 5 -i 0.05 -q 10.78.0.1 >/dev/null
	tc -s filter show block "$(cat /sys/class/net/bond0/ifindex)" | grep -q ' in_hw in_hw_count 2' || { echo "no rule in the PFs' hardware to begin with"; return 1; }
	tc qdisc del dev bond0 ingress || return 1
	tc qdisc add dev bond0 ingress_block "$(cat /sys/class/net/bond0/ifindex)" ingress 2>&1 && { echo "the kernel let the bond bind"; return 1; }
	plan=$(V plan 2>&1)
	echo "$plan" | grep 'tc.ingress-block'
	echo "$plan" | grep -q 'tc.ingress-block/bond0.*the PFs leave and rejoin' || return 1
	V up -o json >"$OUT/up-bondoff.json" || { jq -r '.error' "$OUT/up-bondoff.json"; return 1; }
	jq -r '.steps[] | select(.changed) | "\(.id): \(.summary)"' "$OUT/up-bondoff.json" | cut -c1-160
	[ "$(jq -r '[.steps[] | select(.changed) | .id] | join(" ")' "$OUT/up-bondoff.json")" = "tc.ingress-block/bond0" ] || return 1
	on_block || return 1
	# The block was freed with its rules: ovs-vswitchd puts them back once
	# its revalidator misses them in a dump and the next packets miss.
	local t0 b
	t0=$(date +%s%N)
	b=$(cat /sys/class/net/bond0/ifindex)
	wait_for 60 sh -c "ip netns exec a ping -c 3 -i 0.05 -W 1 -q 10.78.0.1 >/dev/null; tc -s filter show block $b | grep -q ' in_hw in_hw_count 2'"
	echo "rules back in both PFs' hardware after $((($(date +%s%N) - t0) / 1000000)) ms of traffic"
	tc -s filter show block "$b" | head -n 12
	block_in_hw
}
check s_bond_off_repaired bond_off

step "S: tc-policy skip_hw (OVS restart): not in hardware, and why"
ovs_restart() {
	ovs-ctl restart --system-id=random --no-monitor >/tmp/ovs-restart.log 2>&1 || { cat /tmp/ovs-restart.log; return 1; }
	wait_for 20 ovs-vsctl --timeout=2 show || return 1
	wait_for 20 sh -c '[ "$(ovs-vsctl get interface bond0 ofport)" -gt 0 ]'
}
not_in_hw_reason() {
	local v
	ovs-vsctl set Open_vSwitch . other_config:tc-policy=skip_hw || return 1
	ovs_restart || return 1
	wait_for 20 ip netns exec a ping -c 1 -W 1 10.78.0.12 || return 1
	ip netns exec a ping -c 20 -i 0.05 -q 10.78.0.12 >/dev/null
	tc -s filter show dev "$N1" ingress | grep -E 'skip_hw|not_in_hw' | head -n 2
	v=$(offload_verdict skiphw)
	echo "$v"
	flows_of skiphw "$N1"
	case "$v" in "fail "*) ;; *) return 1 ;; esac
	jq -e --arg p "$N1" '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.in_port == $p and .packets > 0)] |
		length > 0 and all(.where != "hardware" and (.reasons | join(" ") | test("tc-policy skip_hw")))' "$OUT/offload-skiphw.json" >/dev/null
}
check s_not_in_hw_reason not_in_hw_reason
# no_flow_api: tc-policy back to none, OVS restarted with the PFs still on
# the block (vflag bound them: ovs-vswitchd unbinds at exit only members it
# bound) and holding its rules in hardware: the kernel refuses ovs-vswitchd
# the bond's ingress qdisc, it logs "No suitable flow API found" and every
# flow of the bond stays in its kernel datapath; validate --offload says
# so and why (the flows to bond0 are in the kernel datapath).
no_flow_api() {
	local v
	local try
	ovs-vsctl remove Open_vSwitch . other_config tc-policy || return 1
	# The case needs the PFs to hold the block's rules in hardware when
	# ovs-vswitchd starts. On a loaded bed the rules of the earlier steps
	# can be gone by then (ovs-vswitchd then gets its flow API for bond0):
	# put rules in hardware through the block again and restart once more.
	for try in 1 2; do
		ovs_restart || return 1
		grep -E 'bond0: (No suitable flow API found|Assigned flow API)|failed adding ingress qdisc' /var/log/openvswitch/ovs-vswitchd.log | tail -n 2
		grep 'netdev_offload|INFO|bond0:' /var/log/openvswitch/ovs-vswitchd.log | tail -n 1 | grep -q 'No suitable flow API found' && break
		[ "$try" = 2 ] && { echo "ovs-vswitchd has a flow API for bond0 after the restart: the case this check is for did not happen"; return 1; }
		echo "a flow API for bond0 after restart $try (the PFs held no rules in hardware): rules into hardware through the block, then restart again"
		wait_for 30 sh -c "ip netns exec a ping -c 3 -i 0.05 -W 1 -q 10.78.0.1 >/dev/null;
			tc -s filter show block $(cat /sys/class/net/bond0/ifindex) | grep -q ' in_hw in_hw_count 2'" || return 1
	done
	wait_for 20 ip netns exec a ping -c 1 -W 1 10.78.0.1 || return 1
	ip netns exec a ping -c 20 -i 0.05 -q 10.78.0.1 >/dev/null
	v=$(offload_verdict noapi)
	echo "$v"
	flows_of noapi bond0 | cut -c1-200
	flows_of noapi "$N1" | cut -c1-200
	case "$v" in "fail "*) ;; *) return 1 ;; esac
	# The flows to the switch (out to bond0) run in the kernel datapath for
	# that reason; the replies may still meet the old rules the PFs hold.
	jq -e '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0 and .where != "hardware")] |
		length > 0 and any(.reasons | join(" ") | test("no tc flow API for bond0"))' "$OUT/offload-noapi.json" >/dev/null
}
check s_no_flow_api no_flow_api
restored() { # up adds the bond's port again: the flows are in hardware again
	local v
	V plan 2>&1 | grep 'tc.ingress-block/bond0' | cut -c1-200
	V up -o json >"$OUT/up-restored.json" || { jq -r '.error' "$OUT/up-restored.json"; return 1; }
	echo "up changed: $(jq -r '[.steps[] | select(.changed) | .id] | join(" ")' "$OUT/up-restored.json")"
	grep 'netdev_offload|INFO|bond0:' /var/log/openvswitch/ovs-vswitchd.log | tail -n 1
	on_block || return 1
	wait_for 30 sh -c "ip netns exec a ping -c 3 -i 0.05 -W 1 -q 10.78.0.1 >/dev/null; ip netns exec a ping -c 3 -i 0.05 -W 1 -q 10.78.0.12 >/dev/null;
		tc -s filter show block $(cat /sys/class/net/bond0/ifindex) | grep -q ' in_hw in_hw_count 2'"
	ip netns exec a ping -c 20 -i 0.05 -q 10.78.0.1 >/dev/null
	ip netns exec a ping -c 20 -i 0.05 -q 10.78.0.12 >/dev/null
	v=$(offload_verdict restored)
	echo "$v"
	case "$v" in "pass "*) ;; *)
		grep -E 'bond0|failed|WARN|ERR' /var/log/openvswitch/ovs-vswitchd.log | tail -n 20
		qdiscs
		return 1 ;;
	esac
	all_in_hw restored bond0 "$N1" && block_in_hw && again
}
check s_restored restored

ovs-vsctl del-port br-vf "$N1" -- del-port br-vf "$N2"

step "S: down"
down() {
	V down || return 1
	! ip link show bond0 >/dev/null 2>&1 || { echo "bond0 left"; return 1; }
	! ovs-vsctl br-exists br-vf || { echo "br-vf left"; return 1; }
	echo "bond0 and br-vf gone"
}
check s_down down
