#!/bin/bash
# Scenario T: a VXLAN overlay over the bond on the real kernel. vflag up
# with a tunnel puts the underlay on the bond (a VLAN interface bond0.30,
# the local address, a route) and a VXLAN port with its options in the
# bridge, not the bond; validate checks each piece. netdevsim of 6.1 passes
# no packets, so the "switch side" is two veths enslaved by hand beside the
# PFs (taken down, so only the veths carry the bond), their peers in a
# bridge in namespace r, the remote endpoint (VLAN 30, 192.0.2.12, a kernel
# VXLAN device with 10.77.0.2); the "VM" is a veth in namespace a on the
# bridge's default segment: iperf3 runs through the tunnel, and the switch
# port of the active slave goes down during it: bonding's own failover
# (miimon sees the carrier loss) moves the underlay to the other veth and
# iperf3 carries on. The netdevsim PFs take no part in that failover (no
# hardware LAG, no mlx5 port selection). The group then leaves the tunnel
# layout for the VLAN one (a config without tunnel): the bond is a port of
# the bridge again, the underlay, its route and the tunnel ports are gone,
# the bond's MTU is back. VF 0 is on a segment of its own
# (VNI 5001, VLAN 101 in the bridge): its stand-in (veth in namespace b,
# tag 101) reaches VNI 5001's end in r and not a VLAN 101 inside VNI 5000,
# so the default segment's tunnel port carries no other segment's frames. A neighbour deleted by hand and an
# MTU chain broken by hand are found by validate, up repairs the MTU, down
# leaves no underlay, tunnel port or bond.
#
# MACHINE: default
# TIMEOUT: 420
# EXPECT: t_up t_underlay t_port t_no_bond_port t_validate t_again t_traffic t_segments t_failover t_neigh_resolved
# EXPECT: t_neigh_deleted t_mtu_broken t_mtu_repaired t_to_vlan t_down t_baseline
. "$(dirname "$0")/lib.sh"

ID=12
step "bed: netdevsim with 2 ports, bonding, Open vSwitch, namespaces a and r"
nsim_new $ID 2 || exit 1
PF1=$(netdev_by_ppn $ID p1)
PF2=$(netdev_by_ppn $ID p2)
modprobe bonding max_bonds=0
modprobe vxlan
ovs_start || exit 1
ip netns add a
ip netns add r
ip link add vs1 type veth peer name vr1
ip link add vs2 type veth peer name vr2
ip link set vr1 netns r
ip link set vr2 netns r
ip link add oa type veth peer name oans
ip link set oans netns a
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
    tunnel:
      type: vxlan
      local: 192.0.2.11/24
      underlay_vlan: 30
      underlay_mtu: 1600
      gateway: 192.0.2.254
      routes: [198.51.100.0/24]
      remotes: [192.0.2.12]
      vni: 5000
    vfs:
      - {pf: 0, vf: 0, vlan: 101, vni: 5001}
EOC
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }
snapshot() { # what down must restore: the PFs, no bond, addresses, routes, OVS
	{
		ip -d link show dev "$PF1" | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /'
		ip -d link show dev "$PF2" | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /'
		ip link show bond0 2>&1 | head -n 1
		ip -o -4 addr show | grep -v ' lo ' | awk '{print $2, $3, $4}'
		ip -4 route show
		ovs-vsctl show | grep -v ovs_version
	} >"$OUT/$1.state" 2>&1
}
snapshot base
# tunnel_check NAME: validate's check NAME as "verdict detail".
tunnel_check() {
	V validate -o json --allow-skip >"$OUT/validate.json" 2>"$OUT/validate.err"
	jq -r --arg n "$1" '.groups[0].checks[] | select(.name == $n) | "\(.verdict) \(.detail)"' "$OUT/validate.json"
}
verdict() { # verdict NAME VERDICT [DETAIL-ERE]
	local got
	got=$(tunnel_check "$1")
	echo "$got"
	case "$got" in "$2 "*) ;; *) return 1 ;; esac
	[ -z "$3" ] || printf '%s' "$got" | grep -Eq -- "$3"
}

step "T: vflag up with a VXLAN tunnel"
check t_up V up
underlay() {
	ip -d link show bond0.30 | head -n 3
	ip -o addr show dev bond0.30 | awk '{print $2, $3, $4}'
	ip -d link show bond0.30 | grep -q "vlan protocol 802.1Q id 30" || return 1
	ip -o addr show dev bond0.30 | grep -q "192.0.2.11/24" || return 1
	[ "$(cat /sys/class/net/bond0.30/mtu)" = 1600 ] && [ "$(cat /sys/class/net/bond0/mtu)" = 1600 ] || { echo "MTU not 1600"; return 1; }
	ip route show 198.51.100.0/24 | grep -q "via 192.0.2.254 dev bond0.30" || { echo "no route to 198.51.100.0/24: $(ip route show 198.51.100.0/24)"; return 1; }
	echo "bond0.30 (VLAN 30 on bond0) has 192.0.2.11/24, mtu 1600, the route to 198.51.100.0/24 via 192.0.2.254"
}
check t_underlay underlay
port() {
	ovs-vsctl --columns=name,type,options,ofport list interface vx5000r0
	[ "$(ovs-vsctl get interface vx5000r0 type)" = vxlan ] || return 1
	ovs-vsctl get interface vx5000r0 options | grep -q 'key="5000"' || return 1
	ovs-vsctl get interface vx5000r0 options | grep -q 'remote_ip="192.0.2.12"' || return 1
	ovs-vsctl get interface vx5000r0 options | grep -q 'local_ip="192.0.2.11"' || return 1
	# the default segment's port: untagged frames only; VF 0's segment: VLAN 101
	ovs-vsctl --columns=name,tag,vlan_mode,trunks list port vx5000r0 vx5001r0
	[ "$(ovs-vsctl get port vx5000r0 vlan_mode trunks | tr '\n' ' ')" = "trunk [0] " ] || return 1
	[ "$(ovs-vsctl get port vx5001r0 tag)" = 101 ] && ovs-vsctl get interface vx5001r0 options | grep -q 'key="5001"'
}
check t_port port
no_bond_port() {
	ovs-vsctl list-ports br-vf
	! ovs-vsctl list-ports br-vf | grep -qx bond0
}
check t_no_bond_port no_bond_port
validate_tunnel() {
	local c
	for c in tunnel/underlay tunnel/route/192.0.2.12 tunnel/mtu tunnel/port/vx5000r0 tunnel/port/vx5001r0; do
		verdict "$c" pass || return 1
	done
}
check t_validate validate_tunnel
check t_again again

step "T: the switch side (two veths as bond slaves, a bridge in r), iperf3 through the tunnel"
active() { cat /sys/class/net/bond0/bonding/active_slave; }
is_active() { [ "$(active)" = "$1" ]; }
# switch_side: vs1 and vs2 join the bond (down first: bonding refuses an
# up port), the PFs go down (6.1 netdevsim passes no packets: an active PF
# would swallow the underlay), vs1 is made the active slave; in r the
# peers are ports of a bridge that carries VLAN 30 to the remote endpoint.
switch_side() {
	local v
	ip -n r link set lo up
	ip -n r link add brr type bridge
	for v in vr1 vr2; do
		ip -n r link set $v mtu 1600 master brr up || return 1
	done
	ip -n r link set brr up
	for v in vs1 vs2; do
		ip link set $v down
		ip link set $v master bond0 || return 1
		ip link set $v up
	done
	ip link set "$PF1" down
	ip link set "$PF2" down
	echo vs1 >/sys/class/net/bond0/bonding/active_slave
	wait_for 5 is_active vs1 || { echo "vs1 is not the active slave: $(active)"; return 1; }
	ip -n r link add link brr name brr.30 type vlan id 30
	ip -n r link set brr.30 up
	ip -n r addr add 192.0.2.12/24 dev brr.30
	ip -n r link add vxlan0 type vxlan id 5000 local 192.0.2.12 remote 192.0.2.11 dstport 4789 dev brr.30
	ip -n r addr add 10.77.0.2/24 dev vxlan0
	ip -n r link set vxlan0 up
	ip -n a link set lo up
	ip -n a addr add 10.77.0.1/24 dev oans
	ip -n a link set oans up
	ip link set oa up
	ovs-vsctl add-port br-vf oa
}
traffic() {
	switch_side || return 1
	wait_for 30 ip netns exec a ping -c 1 -W 1 10.77.0.2 || { echo "no ping through the tunnel"; ip neigh show dev bond0.30; return 1; }
	ip netns exec r iperf3 -s -1 -D --logfile /tmp/iperf3-t.log
	sleep 0.5
	ip netns exec a iperf3 -c 10.77.0.2 -t 3 -J >"$OUT/iperf3.json" 2>&1 || { tail -n 5 "$OUT/iperf3.json"; return 1; }
	jq -r '"iperf3 through VXLAN 5000 over bond0.30 (slave vs1): \(.end.sum_received.bits_per_second / 1e6 | floor) Mbit/s"' "$OUT/iperf3.json"
}
check t_traffic traffic
# segments: VF 0's segment (VNI 5001, VLAN 101 in the bridge) has a
# stand-in, ob in namespace b, a port of br-vf with tag 101 (netdevsim's
# representors pass no packets). In r, VNI 5001 ends at vxlan1 (10.78.0.2);
# VNI 5000 carries a VLAN 101 of its own, vxlan0.101 (10.78.0.3), moved to
# namespace q. b reaches 10.78.0.2 through vx5001r0 and never 10.78.0.3:
# it would if the default segment's tunnel port trunked VLAN 101 into VNI
# 5000 (OVS's default for a port without a tag).
segments() {
	ip netns add b
	ip netns add q
	ip link add ob type veth peer name obns
	ip link set obns netns b
	ip -n b link set lo up
	ip -n b addr add 10.78.0.1/24 dev obns
	ip -n b link set obns up
	ip link set ob up
	ovs-vsctl add-port br-vf ob tag=101
	ip -n r link add vxlan1 type vxlan id 5001 local 192.0.2.12 remote 192.0.2.11 dstport 4789 dev brr.30
	ip -n r addr add 10.78.0.2/24 dev vxlan1
	ip -n r link set vxlan1 up
	ip -n r link add link vxlan0 name vxlan0.101 type vlan id 101
	ip -n r link set vxlan0.101 netns q
	ip -n q link set lo up
	ip -n q addr add 10.78.0.3/24 dev vxlan0.101
	ip -n q link set vxlan0.101 up
	wait_for 30 ip netns exec b ping -c 1 -W 1 10.78.0.2 || { echo "no ping through VNI 5001"; return 1; }
	echo "segment 5001 (VLAN 101) reaches 10.78.0.2 in VNI 5001"
	if ip netns exec b ping -c 3 -W 1 10.78.0.3; then
		echo "segment 5001 reached VLAN 101 inside VNI 5000: the default segment's port carries it"
		return 1
	fi
	echo "no reply from 10.78.0.3 (VLAN 101 inside VNI 5000)"
}
check t_segments segments
# failover: a 12 s iperf3 through the tunnel; 4 s in, the switch port of
# the active slave (vr1) goes down, vs1 loses its carrier, bonding's miimon
# makes vs2 active. iperf3 must finish, move bytes in the intervals that
# start a second or more after the failover, and the active slave must be
# vs2 with a link failure counted on vs1.
failover() {
	local t0 t1 off after fails
	ip netns exec r iperf3 -s -1 -D --logfile /tmp/iperf3-f.log
	sleep 0.5
	t0=$(date +%s%N)
	ip netns exec a iperf3 -c 10.77.0.2 -t 12 -i 1 -J >"$OUT/iperf3-failover.json" 2>&1 &
	local pid=$!
	sleep 4
	t1=$(date +%s%N)
	ip -n r link set vr1 down
	wait_for 5 is_active vs2 || echo "vs2 did not become active: $(active)"
	echo "active slave after vr1 went down: $(active) ($((($(date +%s%N) - t1) / 1000000)) ms)"
	wait $pid || { echo "iperf3 failed"; tail -n 5 "$OUT/iperf3-failover.json"; return 1; }
	is_active vs2 || return 1
	fails=$(awk '/^Slave Interface: vs1/ { s = 1 } s && /^Link Failure Count/ { print $4; exit }' /proc/net/bonding/bond0)
	echo "vs1 link failures: $fails"
	[ "${fails:-0}" -ge 1 ] || return 1
	off=$(((t1 - t0) / 1000000000 + 1))
	after=$(jq --argjson o "$off" '[.intervals[].sum | select(.start >= $o) | .bytes] | add // 0' "$OUT/iperf3-failover.json")
	jq -r --argjson o "$off" '"iperf3 12 s, vr1 down at ~\($o - 1) s: \(.end.sum_received.bytes) bytes received, \(.end.sum_sent.retransmits // 0) retransmits; from \($o) s on: \([.intervals[].sum | select(.start >= $o) | .bytes] | add // 0) bytes in \([.intervals[].sum | select(.start >= $o)] | length) intervals"' "$OUT/iperf3-failover.json"
	[ "$after" -gt 0 ]
}
check t_failover failover
check t_neigh_resolved verdict tunnel/neigh/192.0.2.12 pass

step "T: faults found by validate"
# neigh_deleted: the remote falls silent (its underlay VLAN down: no ARP
# request of its own to refill the entry as STALE, no reply to ours) and the
# neighbour is deleted; validate must call the next hop unresolved. The
# remote comes back afterwards.
neigh_deleted() {
	local rc=0
	ip -n r link set brr.30 down || return 1
	ip neigh del 192.0.2.12 dev bond0.30 || rc=1
	ip neigh show 192.0.2.12 dev bond0.30
	[ $rc = 0 ] && { verdict tunnel/neigh/192.0.2.12 fail "unresolved" || rc=1; }
	ip -n r link set brr.30 up
	return $rc
}
check t_neigh_deleted neigh_deleted
mtu_broken() {
	ip link set bond0.30 mtu 1500 || return 1
	verdict tunnel/mtu fail "need 1550"
}
check t_mtu_broken mtu_broken
mtu_repaired() {
	ovs-vsctl del-port br-vf oa
	ovs-vsctl del-port br-vf ob
	ip link set vs1 nomaster # the bond back to the PFs alone, as vflag made it
	ip link set vs2 nomaster
	ip link set "$PF1" up
	ip link set "$PF2" up
	V up || return 1
	cat /sys/class/net/bond0.30/mtu
	verdict tunnel/mtu pass
}
check t_mtu_repaired mtu_repaired

step "T: the group leaves the tunnel layout"
# to_vlan: the same group without tunnel (VF 0 keeps VLAN 101, now a VLAN
# of the bridge and the bond): as a fresh up of that config would leave it.
to_vlan() {
	sed -e '/^    tunnel:/,/^    vfs:/{/^    vfs:/!d}' -e 's/, vni: 5001//' /root/vflag.yaml >/root/vflag-vlan.yaml
	cp /root/vflag-vlan.yaml "$OUT/vflag-vlan.yaml"
	! grep -q 'tunnel\|vni' /root/vflag-vlan.yaml || { echo "the VLAN config still has a tunnel"; return 1; }
	"$VFLAG" --config /root/vflag-vlan.yaml --state-dir /root/state up || return 1
	ovs-vsctl list-ports br-vf | tr '\n' ' '
	echo
	ovs-vsctl list-ports br-vf | grep -qx bond0 || { echo "bond0 is not a port of br-vf"; return 1; }
	! ovs-vsctl list-ports br-vf | grep -q '^vx' || { echo "tunnel ports left"; return 1; }
	! ip link show bond0.30 >/dev/null 2>&1 || { echo "bond0.30 left"; return 1; }
	[ -z "$(ip route show 198.51.100.0/24)" ] || { echo "route left: $(ip route show 198.51.100.0/24)"; return 1; }
	[ "$(cat /sys/class/net/bond0/mtu) $(cat /sys/class/net/"$PF1"/mtu)" = "1500 1500" ] || { echo "bond0 and $PF1 MTU $(cat /sys/class/net/bond0/mtu) $(cat /sys/class/net/"$PF1"/mtu), not 1500"; return 1; }
	reps $ID | grep -qx "$(ovs-vsctl --bare --columns=name find port tag=101)" || { echo "no representor port on VLAN 101 (VF 0's)"; return 1; }
	"$VFLAG" --config /root/vflag-vlan.yaml --state-dir /root/state up | grep -q 'no changes' || { echo "a second up changed something"; return 1; }
	echo "bond0 in br-vf at MTU 1500; no bond0.30, route or tunnel port; a second up changes nothing"
}
check t_to_vlan to_vlan

step "T: down"
down() {
	V down || return 1
	! ip link show bond0.30 >/dev/null 2>&1 || { echo "bond0.30 left"; return 1; }
	! ovs-vsctl list-ports br-vf >/dev/null 2>&1 || { echo "br-vf left"; return 1; }
	echo "no bond, no bond0.30, no br-vf"
}
check t_down down
baseline() {
	snapshot after
	diff -u "$OUT/base.state" "$OUT/after.state" && echo "as before up ($(wc -l <"$OUT/after.state") lines)"
}
check t_baseline baseline
