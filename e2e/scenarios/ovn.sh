#!/bin/bash
# Scenario O: two OVN chassis on one guest, joined by Geneve over their
# bonds. The guest runs the OVN central (Northbound and Southbound
# ovsdb-servers, ovn-northd; the Southbound on tcp 10.0.0.1:6642, a
# management veth) and two chassis: chassis 1 (ch1) is the guest's own
# Open vSwitch in the initial namespace, chassis 2 (ch2) has its own
# ovsdb-server, ovs-vswitchd and ovn-controller in network namespace ch2
# (own rundir, database, pidfiles and control sockets; the kernel datapath
# is per namespace). Each chassis has a netdevsim device in switchdev mode
# (netdevsim10; netdevsim11 moved into ch2 with devlink reload) whose two
# PFs are bonded (bond0 in ch1, bond1 in ch2; the encap address on the
# bond, the bond in no bridge). netdevsim of 6.1 passes no packets, so each
# bond also takes two veths whose peers are ports of a bridge in namespace
# sw (the switch), as tunnel.sh does, with the PFs down.
#
#   vm1 ns --oa-- br-int (ch1) ~~geneve~~ bond0 =vs1,vs2= [sw: brs] =ws1,ws2= bond1 (ch2) ~~ br-int (ch2) --ob-- vm2 ns
#
# The operator's side is ovn-nbctl: logical switch ls0 with ports p1 and p2
# (the VF representors' LSPs: VF 0 of each chassis) and vm1 and vm2 (the
# representor stand-ins oa and ob, veths whose peers are the "VMs" in
# namespaces vm1 and vm2: netdevsim's representors pass no packets), and a
# stateful ACL (allow-related), so conntrack is in the path.
#
# Checks: both chassis registered with their Geneve Encap; every port
# ovn-installed on its chassis and up in the Southbound on the right
# chassis; the ovn-* Geneve ports to each other with the peer's address;
# ping and iperf3 vm1 -> vm2 over Geneve on the bonds; a bond slave failed
# during iperf3 and traffic carries on; a drop ACL takes effect and its
# removal restores the traffic; ovn-controller restarted: the ports come
# back ovn-installed and up.
#
# MACHINE: default
# TIMEOUT: 480
# EXPECT: o_central o_nb o_chassis o_bound o_installed o_tunnels o_ping o_iperf3 o_failover
# EXPECT: o_acl_drop o_acl_restored o_restart_released o_restart_back
. "$(dirname "$0")/lib.sh"

L=/tmp/ovn                    # logs and databases (copied to $OUT at exit)
C2=/run/ch2                   # chassis 2's rundir, database and logs
NBDB=unix:/run/ovn/ovnnb_db.sock
SBDB=unix:/run/ovn/ovnsb_db.sock
SBREMOTE=tcp:10.0.0.1:6642
mkdir -p $L $C2 /run/ovn
trap 'cp -r $L "$OUT/ovn-logs" 2>/dev/null; cp $C2/*.log "$OUT/ovn-logs/" 2>/dev/null' EXIT

nb() { ovn-nbctl --db=$NBDB --timeout=10 "$@"; }
sb() { ovn-sbctl --db=$SBDB --timeout=10 "$@"; }
vs1() { ovs-vsctl --timeout=10 "$@"; }
vs2() { ovs-vsctl --timeout=10 --db=unix:$C2/db.sock "$@"; }
# in2 CMD...: CMD in chassis 2's namespace with its Open vSwitch and OVN
# directories (ovn-controller finds br-int's OpenFlow socket
# <OVS_RUNDIR>/br-int.mgmt through OVS_RUNDIR; it has no --unixctl: its
# control socket is <OVN_RUNDIR>/ovn-controller.<pid>.ctl, which
# `in2 ovn-appctl -t ovn-controller` finds).
in2() { ip netns exec ch2 env OVS_RUNDIR=$C2 OVS_DBDIR=$C2 OVS_LOGDIR=$C2 OVN_RUNDIR=$C2 OVN_LOGDIR=$C2 "$@"; }

step "bed: netdevsim 10 (ch1) and 11 (moved into ch2), bonding, namespaces ch2, sw, vm1, vm2"
modprobe bonding max_bonds=0
modprobe openvswitch
modprobe geneve
nsim_new 10 2 || exit 1
nsim_new 11 2 || exit 1
for n in ch2 sw vm1 vm2; do ip netns add $n; ip -n $n link set lo up; done
devlink dev reload netdevsim/netdevsim11 netns ch2 || exit 1
A1=$(netdev_by_ppn 10 p1)
A2=$(netdev_by_ppn 10 p2)
B1=$(ip netns exec ch2 bash -c ". $SHARE/scenarios/lib.sh; netdev_by_ppn 11 p1")
B2=$(ip netns exec ch2 bash -c ". $SHARE/scenarios/lib.sh; netdev_by_ppn 11 p2")
echo "ch1 PFs $A1 $A2; ch2 PFs $B1 $B2"
[ -n "$B1" ] && [ -n "$B2" ] || { echo "netdevsim11's PFs are not in ch2"; exit 1; }
# management link: the Southbound listens on 10.0.0.1, ch2 reaches it on m2
ip link add m1 type veth peer name m2
ip link set m2 netns ch2
ip addr add 10.0.0.1/24 dev m1
ip link set m1 up
ip -n ch2 addr add 10.0.0.2/24 dev m2
ip -n ch2 link set m2 up
# the switch's side of the underlay
ip link add vs1 type veth peer name vr1
ip link add vs2 type veth peer name vr2
ip link add ws1 type veth peer name wr1
ip link add ws2 type veth peer name wr2
ip link set ws1 netns ch2
ip link set ws2 netns ch2
ip -n sw link add brs type bridge
for v in vr1 vr2 wr1 wr2; do
	ip link set $v netns sw
	ip -n sw link set $v mtu 1600 master brs up
done
ip -n sw link set brs up
# the VMs' ends: vm1 behind oa (ch1), vm2 behind ob (ch2)
ip link add oa type veth peer name oans
ip link set oans netns vm1
ip link add ob type veth peer name obns
ip link set ob netns ch2
ip link set obns netns vm2
ip -n vm1 link set oans address 02:00:00:00:00:01
ip -n vm1 addr add 10.10.0.1/24 dev oans
ip -n vm1 link set oans up
ip -n vm2 link set obns address 02:00:00:00:00:02
ip -n vm2 addr add 10.10.0.2/24 dev obns
ip -n vm2 link set obns up
ip link set oa up
ip -n ch2 link set ob up

step "bed: VFs in switchdev mode on both devices, the bonds"
# switchdev_bond NS ID BOND PF1 PF2 SLAVE1 SLAVE2 ADDR: 2 VFs, switchdev,
# an active-backup bond of the PFs with the underlay address; the two veths
# join it and the PFs go down (6.1 netdevsim passes no packets: an active
# PF would swallow the underlay), the first veth active.
switchdev_bond() {
	local ns=$1 id=$2 bond=$3 p1=$4 p2=$5 s1=$6 s2=$7 addr=$8 p
	x() { if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi; }
	echo 2 >/sys/bus/netdevsim/devices/netdevsim$id/sriov_numvfs || return 1
	x devlink dev eswitch set netdevsim/netdevsim$id mode switchdev || return 1
	x ip link add $bond type bond mode active-backup miimon 100 || return 1
	x ip link set $bond mtu 1600
	for p in $p1 $p2 $s1 $s2; do
		x ip link set $p down
		x ip link set $p master $bond || return 1
	done
	x ip link set $bond up
	for p in $p1 $p2; do x ip link set $p down; done
	for p in $s1 $s2; do x ip link set $p up; done
	x sh -c "echo $s1 >/sys/class/net/$bond/bonding/active_slave"
	x ip addr add $addr dev $bond
	x ip -d link show $bond | head -n 3
}
switchdev_bond "" 10 bond0 "$A1" "$A2" vs1 vs2 192.0.2.11/24 || exit 1
switchdev_bond ch2 11 bond1 "$B1" "$B2" ws1 ws2 192.0.2.12/24 || exit 1
REP1=$(reps 10 | head -n 1)
REP2=$(ip netns exec ch2 bash -c ". $SHARE/scenarios/lib.sh; reps 11" | head -n 1)
echo "VF 0 representors: ch1 $REP1, ch2 $REP2"
wait_for 10 ping -c 1 -W 1 192.0.2.12 || { echo "the underlay does not carry 192.0.2.11 -> 192.0.2.12"; exit 1; }

step "central: Northbound, Southbound (ptcp 10.0.0.1:6642), ovn-northd"
central() {
	ovsdb-tool create $L/nb.db /usr/share/ovn/ovn-nb.ovsschema || return 1
	ovsdb-tool create $L/sb.db /usr/share/ovn/ovn-sb.ovsschema || return 1
	ovsdb-server $L/nb.db --remote=punix:/run/ovn/ovnnb_db.sock --pidfile=/run/ovn/ovnnb_db.pid \
		--unixctl=/run/ovn/ovnnb_db.ctl --log-file=$L/ovsdb-nb.log --detach || return 1
	ovsdb-server $L/sb.db --remote=punix:/run/ovn/ovnsb_db.sock --remote=ptcp:6642:10.0.0.1 \
		--pidfile=/run/ovn/ovnsb_db.pid --unixctl=/run/ovn/ovnsb_db.ctl --log-file=$L/ovsdb-sb.log --detach || return 1
	ovn-northd --ovnnb-db=$NBDB --ovnsb-db=$SBDB --pidfile=/run/ovn/ovn-northd.pid \
		--unixctl=/run/ovn/ovn-northd.ctl --log-file=$L/ovn-northd.log --detach || return 1
	wait_for 20 sb show || { echo "no Southbound"; return 1; }
	wait_for 20 sh -c "ovn-appctl -t /run/ovn/ovn-northd.ctl status | grep -q active" || { echo "ovn-northd not active"; return 1; }
	echo "ovn-northd $(ovn-appctl -t /run/ovn/ovn-northd.ctl status); Southbound schema $(ovsdb-client get-schema-version $SBDB OVN_Southbound)"
}
check o_central central || exit 1
operator() {
	nb ls-add ls0 || return 1
	nb lsp-add ls0 p1 -- lsp-set-addresses p1 "02:00:00:00:01:01 10.10.0.11" || return 1
	nb lsp-add ls0 p2 -- lsp-set-addresses p2 "02:00:00:00:01:02 10.10.0.12" || return 1
	nb lsp-add ls0 vm1 -- lsp-set-addresses vm1 "02:00:00:00:00:01 10.10.0.1" || return 1
	nb lsp-add ls0 vm2 -- lsp-set-addresses vm2 "02:00:00:00:00:02 10.10.0.2" || return 1
	nb acl-add ls0 from-lport 1000 ip4 allow-related || return 1
	nb show
	nb acl-list ls0
}
check o_nb operator

step "chassis: ch1 on the guest's Open vSwitch, ch2's own ovsdb-server and ovs-vswitchd in ch2"
ovs_start || exit 1
ch2_ovs() {
	ovsdb-tool create $C2/conf.db /usr/share/openvswitch/vswitch.ovsschema || return 1
	in2 ovsdb-server $C2/conf.db --remote=punix:$C2/db.sock --remote=db:Open_vSwitch,Open_vSwitch,manager_options \
		--pidfile=$C2/ovsdb-server.pid --unixctl=$C2/ovsdb-server.ctl --log-file=$C2/ovsdb-server.log --detach || return 1
	vs2 --no-wait init || return 1
	vs2 --no-wait set Open_vSwitch . ovs_version="$(vs1 get Open_vSwitch . ovs_version | tr -d '"')" || return 1
	in2 ovs-vswitchd unix:$C2/db.sock --pidfile=$C2/ovs-vswitchd.pid --unixctl=$C2/ovs-vswitchd.ctl \
		--log-file=$C2/ovs-vswitchd.log --detach || return 1
	wait_for 20 vs2 show || return 1
	echo "ch2's Open vSwitch started"
}
ch2_ovs || exit 1
# ovn_ids VSCTL NAME IP: the Open_vSwitch row's external_ids of a chassis.
ovn_ids() {
	$1 set Open_vSwitch . external_ids:system-id=$2 external_ids:hostname=$2 \
		external_ids:ovn-remote=$SBREMOTE external_ids:ovn-encap-type=geneve \
		external_ids:ovn-encap-ip=$3 external_ids:ovn-set-local-ip=true external_ids:ovn-bridge=br-int
}
br_int() { $1 --may-exist add-br br-int -- set Bridge br-int fail-mode=secure other-config:disable-in-band=true; }
# bind VSCTL IFACE LSP MAC: IFACE a port of br-int bound to the LSP.
bind() {
	$1 --may-exist add-port br-int $2 -- set Interface $2 external_ids:iface-id=$3 \
		external_ids:attached-mac=$4 external_ids:iface-status=active
}
chassis1() {
	ovn_ids vs1 ch1 192.0.2.11 && br_int vs1 || return 1
	bind vs1 "$REP1" p1 02:00:00:00:01:01 && bind vs1 oa vm1 02:00:00:00:00:01 || return 1
	ovn-controller unix:/var/run/openvswitch/db.sock --pidfile=/run/ovn/ovn-controller.pid \
		--log-file=$L/ch1-ovn-controller.log --detach
}
chassis2() {
	ovn_ids vs2 ch2 192.0.2.12 && br_int vs2 || return 1
	bind vs2 "$REP2" p2 02:00:00:00:01:02 && bind vs2 ob vm2 02:00:00:00:00:02 || return 1
	in2 ovn-controller unix:$C2/db.sock --pidfile=$C2/ovn-controller.pid \
		--log-file=$C2/ovn-controller.log --detach
}
chassis1 || exit 1
chassis2 || exit 1

step "OVN: chassis, bindings, tunnels"
# encap NAME: "type ip" of the chassis' Encap rows.
encap() { sb --bare --columns=type,ip find Encap chassis_name=$1 | grep -v '^$' | tr '\n' ' '; }
registered() {
	local c
	for c in "ch1 geneve 192.0.2.11" "ch2 geneve 192.0.2.12"; do
		set -- $c
		wait_for 30 sh -c "[ \"\$(ovn-sbctl --db=$SBDB --bare --columns=type,ip find Encap chassis_name=$1 | grep -v '^\$' | tr '\n' ' ')\" = '$2 $3 ' ]" ||
			{ echo "chassis $1: Encap '$(encap $1)', want '$2 $3'"; sb show; return 1; }
		echo "chassis $1: Encap $(encap $1)"
	done
}
check o_chassis registered
# binding LSP: "chassis up" of the LSP's Port_Binding.
binding() {
	local ch up
	ch=$(sb --bare --columns=chassis find Port_Binding logical_port=$1)
	up=$(sb --bare --columns=up find Port_Binding logical_port=$1)
	[ -n "$ch" ] && ch=$(sb --bare --columns=name list Chassis "$ch")
	echo "${ch:-none} ${up:-none}"
}
bound() { # bound LSP CHASSIS: the LSP's Port_Binding is on CHASSIS and up
	[ "$(binding $1)" = "$2 true" ]
}
all_bound() {
	local b
	for b in "p1 ch1" "vm1 ch1" "p2 ch2" "vm2 ch2"; do
		set -- $b
		wait_for 30 bound $1 $2 || { echo "$1: $(binding $1), want $2 true"; return 1; }
		echo "$1: on $2, up"
	done
}
check o_bound all_bound
installed() { # installed VSCTL IFACE: ovn-controller set ovn-installed on IFACE
	[ "$($1 --if-exists get Interface $2 external_ids:ovn-installed)" = '"true"' ]
}
all_installed() {
	local i
	for i in "vs1 $REP1" "vs1 oa" "vs2 $REP2" "vs2 ob"; do
		set -- $i
		wait_for 30 installed $1 $2 || { echo "$2 ($1): not ovn-installed: $($1 get Interface $2 external_ids)"; return 1; }
		echo "$2 ($1): ovn-installed"
	done
}
check o_installed all_installed
# tunnel VSCTL PEER-IP: a Geneve port ovn-* of br-int to PEER-IP.
tunnel() {
	local p
	for p in $($1 --bare --columns=name find Interface type=geneve); do
		case $p in ovn-*) ;; *) continue ;; esac
		[ "$($1 get Interface $p options:remote_ip)" = "\"$2\"" ] && { echo "$p: $($1 get Interface $p options)"; return 0; }
	done
	return 1
}
tunnels() {
	wait_for 30 tunnel vs1 192.0.2.12 || { echo "ch1 has no Geneve port to 192.0.2.12"; vs1 show; return 1; }
	tunnel vs1 192.0.2.12
	wait_for 30 tunnel vs2 192.0.2.11 || { echo "ch2 has no Geneve port to 192.0.2.11"; vs2 show; return 1; }
	tunnel vs2 192.0.2.11
}
check o_tunnels tunnels

step "traffic vm1 -> vm2 over Geneve on the bonds"
ping_vm2() { ip netns exec vm1 ping -c 1 -W 1 10.10.0.2; }
pinged() {
	wait_for 30 ping_vm2 || { echo "vm1 does not reach vm2"; return 1; }
	ip netns exec vm1 ping -c 3 -i 0.2 -W 1 10.10.0.2 | tail -n 2
}
check o_ping pinged
txb() { cat /sys/class/net/$1/statistics/tx_bytes; }
iperf() {
	local b0 g0 b1 g1 r
	b0=$(txb bond0)
	g0=$(txb genev_sys_6081)
	ip netns exec vm2 iperf3 -s -1 -D --logfile $L/iperf3-s.log
	sleep 0.5
	ip netns exec vm1 iperf3 -c 10.10.0.2 -t 3 -J >"$OUT/iperf3.json" 2>&1 || { tail -n 5 "$OUT/iperf3.json"; return 1; }
	b1=$(txb bond0)
	g1=$(txb genev_sys_6081)
	echo "bond0 sent $((b1 - b0)) bytes, genev_sys_6081 $((g1 - g0))"
	# what vm2 received crossed genev_sys_6081 and bond0 (with Geneve's headers on top)
	r=$(jq .end.sum_received.bytes "$OUT/iperf3.json")
	[ $((g1 - g0)) -gt "$r" ] && [ $((b1 - b0)) -gt "$r" ] || { echo "vm2 received $r bytes: more than went through Geneve and bond0"; return 1; }
	jq -r '"iperf3 vm1 -> vm2 over Geneve (bond0, slave vs1): \(.end.sum_received.bits_per_second / 1e6 | floor) Mbit/s"' "$OUT/iperf3.json"
}
check o_iperf3 iperf
active() { cat /sys/class/net/bond0/bonding/active_slave; }
is_active() { [ "$(active)" = "$1" ]; }
# failover: a 10 s iperf3; 3 s in, the switch port of bond0's active
# slave (vr1) goes down, miimon makes vs2 active; iperf3 must finish and
# move bytes in the intervals a second or more after.
failover() {
	local t0 t1 off after pid
	ip netns exec vm2 iperf3 -s -1 -D --logfile $L/iperf3-f.log
	sleep 0.5
	t0=$(date +%s%N)
	ip netns exec vm1 iperf3 -c 10.10.0.2 -t 10 -i 1 -J >"$OUT/iperf3-failover.json" 2>&1 &
	pid=$!
	sleep 3
	t1=$(date +%s%N)
	ip -n sw link set vr1 down
	wait_for 5 is_active vs2 || echo "vs2 did not become active: $(active)"
	echo "active slave after vr1 went down: $(active)"
	wait $pid || { echo "iperf3 failed"; tail -n 5 "$OUT/iperf3-failover.json"; return 1; }
	is_active vs2 || return 1
	off=$(((t1 - t0) / 1000000000 + 1))
	after=$(jq --argjson o "$off" '[.intervals[].sum | select(.start >= $o) | .bytes] | add // 0' "$OUT/iperf3-failover.json")
	jq -r --argjson o "$off" '"iperf3 10 s, vr1 down at ~\($o - 1) s: \(.end.sum_received.bytes) bytes received; from \($o) s on: \([.intervals[].sum | select(.start >= $o) | .bytes] | add // 0) bytes"' "$OUT/iperf3-failover.json"
	[ "$after" -gt 0 ]
}
check o_failover failover
ip -n sw link set vr1 up

step "ACL: a drop ACL takes effect, its removal restores the traffic"
DROP='ip4.src == 10.10.0.1 && ip4.dst == 10.10.0.2'
acl_drop() {
	nb --wait=hv acl-add ls0 to-lport 1001 "$DROP" drop || return 1
	nb acl-list ls0
	if ip netns exec vm1 ping -c 3 -i 0.3 -W 1 10.10.0.2; then
		echo "vm1 still reaches vm2 with the drop ACL"
		return 1
	fi
	echo "no reply with the drop ACL"
}
check o_acl_drop acl_drop
acl_restored() {
	nb --wait=hv acl-del ls0 to-lport 1001 "$DROP" || return 1
	wait_for 10 ping_vm2 || { echo "vm1 does not reach vm2 after the ACL's removal"; return 1; }
	echo "vm1 reaches vm2 again"
}
check o_acl_restored acl_restored

step "ovn-controller of ch2 restarted"
released() {
	in2 ovn-appctl -t ovn-controller exit || return 1
	wait_for 10 sh -c "! kill -0 $(cat $C2/ovn-controller.pid) 2>/dev/null" || { echo "ovn-controller still running"; return 1; }
	echo "ch2: p2 $(binding p2), vm2 $(binding vm2); ob ovn-installed: $(vs2 --if-exists get Interface ob external_ids:ovn-installed)"
	# An exiting ovn-controller releases its ports (the Port_Binding has
	# no chassis; 23.03 leaves up true) and leaves ovn-installed on the
	# Interfaces: taken off here, so that o_restart_back sees the new
	# controller set it.
	vs2 remove Interface ob external_ids ovn-installed -- remove Interface "$REP2" external_ids ovn-installed || return 1
	[ "$(binding vm2 | cut -d' ' -f1)" = none ] && [ "$(binding p2 | cut -d' ' -f1)" = none ]
}
check o_restart_released released
back() {
	in2 ovn-controller unix:$C2/db.sock --pidfile=$C2/ovn-controller.pid \
		--log-file=$C2/ovn-controller.log --detach || return 1
	wait_for 30 bound vm2 ch2 && wait_for 30 bound p2 ch2 || { echo "p2 $(binding p2), vm2 $(binding vm2)"; return 1; }
	wait_for 30 installed vs2 ob && wait_for 30 installed vs2 "$REP2" || { echo "not ovn-installed again"; return 1; }
	wait_for 30 ping_vm2 || { echo "vm1 does not reach vm2 after the restart"; return 1; }
	echo "p2 and vm2 on ch2, up, ovn-installed; vm1 reaches vm2"
}
check o_restart_back back
exit 0
