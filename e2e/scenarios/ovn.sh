#!/bin/bash
# Scenario O: vflag makes two OVN chassis on one guest, joined by Geneve
# over their bonds. The guest runs the OVN central (Northbound and
# Southbound ovsdb-servers, ovn-northd; the Southbound on tcp
# 10.0.0.1:6642, a management veth) and two chassis: ch1 is the guest's own
# Open vSwitch in the initial namespace, ch2 has its own ovsdb-server,
# ovs-vswitchd and ovn-controller in network namespace ch2 (own rundir,
# database, pidfiles and control sockets; the kernel datapath is per
# namespace). Each chassis has a netdevsim device (netdevsim10;
# netdevsim11 moved into ch2 with devlink reload), and `vflag up` with the
# chassis's own config and state dir (ch2's under `ip netns exec ch2`, its
# config's ovsdb naming ch2's database) makes its VFs, switchdev, the bond
# of the two PFs with the encap address (the bond in no bridge), sets the
# Open_vSwitch row's external_ids, puts the representors on br-int and
# binds VF 0's to its logical switch port. netdevsim of 6.1 passes no
# packets, so each bond also takes two veths whose peers are ports of a
# bridge in namespace sw (the switch), as tunnel.sh does, with the PFs down.
#
#   vm1 ns --oa-- br-int (ch1) ~~geneve~~ bond0 =vs1,vs2= [sw: brs] =ws1,ws2= bond1 (ch2) ~~ br-int (ch2) --ob-- vm2 ns
#
# The operator's side is ovn-nbctl: logical switch ls0 with ports p1 and p2
# (VF 0's representor of each chassis, bound by vflag) and vm1 and vm2 (the
# representor stand-ins oa and ob, veths bound by hand whose peers are the
# "VMs" in namespaces vm1 and vm2: netdevsim's representors pass no
# packets), and a stateful ACL (allow-related), so conntrack is in the path.
#
# Checks: up on ch1, where ovn-controller runs and made br-int (adopted);
# up on ch2 before its ovn-controller runs: degraded (exit 1, the port
# named), nothing rolled back, then clean once it runs; both chassis
# registered with their Geneve Encap; every port ovn-installed and up on
# the right chassis; the ovn-* Geneve ports to each other; ping and iperf3
# vm1 -> vm2 over Geneve on the bonds; validate --offload classifies
# OVN's datapath flows (encap, decap, ct: on 6.1 none in hardware, each
# with its reason); a bond slave failed during iperf3
# and traffic carries on; a drop ACL takes effect and its removal restores
# the traffic; ch2's ovn-controller stopped (validate fails the port) and
# started again (the ports come back ovn-installed, validate passes); down
# on ch1 leaves ch1 as before up (the external_ids' values before, br-int
# and the hand-bound port kept) and ch2 untouched.
#
# MACHINE: default
# TIMEOUT: 900
# EXPECT: o_central o_nb o_up1_refused o_up1 o_ids1 o_adopted o_up2_degraded o_up2 o_again
# EXPECT: o_chassis o_bound o_installed o_tunnels o_validate
# EXPECT: o_ping o_iperf3 o_offload o_failover o_acl_drop o_acl_restored
# EXPECT: o_vtraffic_remote o_vtraffic_local o_vtraffic_acl o_vtraffic_acl_to o_vtraffic_bad
# EXPECT: o_restart_released o_restart_validate_fails o_restart_back o_restart_validate
# EXPECT: o_down1 o_down_baseline o_down_other
. "$(dirname "$0")/lib.sh"

L=/tmp/ovn                    # the central's databases and logs (copied to $OUT at exit)
C2=/run/ch2                   # chassis 2's rundir, database and logs
NBDB=unix:/run/ovn/ovnnb_db.sock
SBDB=unix:/run/ovn/ovnsb_db.sock
SBREMOTE=tcp:10.0.0.1:6642
mkdir -p $L $C2 /run/ovn
trap 'mkdir -p "$OUT/ovn-logs"; cp $L/*.log $C2/*.log /var/log/openvswitch/*.log "$OUT/ovn-logs/" 2>/dev/null' EXIT

nb() { ovn-nbctl --db=$NBDB --timeout=10 "$@"; }
sb() { ovn-sbctl --db=$SBDB --timeout=10 "$@"; }
vs1() { ovs-vsctl --timeout=10 "$@"; }
vs2() { ovs-vsctl --timeout=10 --db=unix:$C2/db.sock "$@"; }
# in2 CMD...: CMD in chassis 2's namespace with its Open vSwitch and OVN
# directories. ovn-controller finds br-int's OpenFlow socket
# <OVS_RUNDIR>/br-int.mgmt through OVS_RUNDIR; it has no --unixctl: its
# control socket is <OVN_RUNDIR>/ovn-controller.<pid>.ctl, which
# `in2 ovn-appctl -t ovn-controller` and vflag (OVN_RUNDIR) find.
in2() { ip netns exec ch2 env OVS_RUNDIR=$C2 OVS_DBDIR=$C2 OVS_LOGDIR=$C2 OVN_RUNDIR=$C2 OVN_LOGDIR=$C2 "$@"; }
# lib2 FUNC ARGS...: a lib.sh function run in ch2 (its sysfs and devlink).
lib2() { ip netns exec ch2 bash -c ". $SHARE/scenarios/lib.sh; $*"; }

step "bed: netdevsim 10 (ch1) and 11 (moved into ch2), namespaces ch2, sw, vm1, vm2"
modprobe bonding max_bonds=0
modprobe openvswitch
modprobe geneve
nsim_new 10 2 || exit 1
nsim_new 11 2 || exit 1
for n in ch2 sw vm1 vm2; do ip netns add $n; ip -n $n link set lo up; done
devlink dev reload netdevsim/netdevsim11 netns ch2 || exit 1
A1=$(netdev_by_ppn 10 p1)
A2=$(netdev_by_ppn 10 p2)
B1=$(lib2 netdev_by_ppn 11 p1)
B2=$(lib2 netdev_by_ppn 11 p2)
echo "ch1 PFs $A1 $A2; ch2 PFs $B1 $B2"
[ -n "$B1" ] && [ -n "$B2" ] || { echo "netdevsim11's PFs are not in ch2"; exit 1; }
# management link: the Southbound listens on 10.0.0.1, ch2 reaches it on m2
ip link add m1 type veth peer name m2
ip link set m2 netns ch2
ip addr add 10.0.0.1/24 dev m1
ip link set m1 up
ip -n ch2 addr add 10.0.0.2/24 dev m2
ip -n ch2 link set m2 up
# the switch's side of the underlay (the bonds take vs* and ws* after up)
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

step "central: Northbound, Southbound (ptcp 10.0.0.1:6642), ovn-northd; the operator's logical switch"
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
		--pidfile=$C2/ovsdb-server.pid --log-file=$C2/ovsdb-server.log --detach || return 1
	vs2 --no-wait init || return 1
	vs2 --no-wait set Open_vSwitch . ovs_version="$(vs1 get Open_vSwitch . ovs_version | tr -d '"')" || return 1
	in2 ovs-vswitchd unix:$C2/db.sock --pidfile=$C2/ovs-vswitchd.pid --log-file=$C2/ovs-vswitchd.log --detach || return 1
	wait_for 20 vs2 show || return 1
	echo "ch2's Open vSwitch started"
}
ch2_ovs || exit 1
controller1() { ovn-controller unix:/var/run/openvswitch/db.sock --pidfile=/run/ovn/ovn-controller.pid --log-file=$L/ch1-ovn-controller.log --detach; }
controller2() { in2 ovn-controller unix:$C2/db.sock --pidfile=$C2/ovn-controller.pid --log-file=$C2/ovn-controller.log --detach; }
# ch1's ovn-controller runs before vflag: it makes br-int (it is not
# connected yet: no ovn-remote), which vflag adopts. The VM end's stand-in
# oa is bound to vm1 by hand: a port of br-int vflag did not make.
controller1 || exit 1
wait_for 20 vs1 br-exists br-int || { echo "ovn-controller made no br-int"; vs1 show; exit 1; }
vs1 add-port br-int oa -- set Interface oa external_ids:iface-id=vm1 external_ids:attached-mac=02:00:00:00:00:01 || exit 1

cat >/root/c1.yaml <<EOC
ovsdb: unix:/var/run/openvswitch/db.sock
lag_timeout: 20s
groups:
  - name: ovn0
    pfs: [$A1, $A2]
    numvfs: 2
    bond: {name: bond0, mode: active-backup, miimon: 100}
    ovn:
      remote: $SBREMOTE
      encap_ip: 192.0.2.11/24
      underlay_mtu: 1600
    vfs:
      - {pf: 0, vf: 0, ovn_port: p1}
EOC
# ch2: its own OVSDB (ovsdb) and ovs-vswitchd log (ovs_log); a short
# install_timeout: its first up runs without ovn-controller.
cat >/root/c2.yaml <<EOC
ovsdb: unix:$C2/db.sock
ovs_log: $C2/ovs-vswitchd.log
lag_timeout: 20s
groups:
  - name: ovn0
    pfs: [$B1, $B2]
    numvfs: 2
    bond: {name: bond1, mode: active-backup, miimon: 100}
    ovn:
      remote: $SBREMOTE
      encap_ip: 192.0.2.12/24
      underlay_mtu: 1600
      system_id: ch2
      install_timeout: 5s
    vfs:
      - {pf: 0, vf: 0, ovn_port: p2}
EOC
cp /root/c1.yaml /root/c2.yaml "$OUT/"
V1() { "$VFLAG" --config /root/c1.yaml --state-dir /root/state1 "$@"; }
V2() { in2 "$VFLAG" --config /root/c2.yaml --state-dir /root/state2 "$@"; }

# binding LSP: "chassis up" of the LSP's Port_Binding.
binding() {
	local ch up
	ch=$(sb --bare --columns=chassis find Port_Binding logical_port=$1)
	up=$(sb --bare --columns=up find Port_Binding logical_port=$1)
	[ -n "$ch" ] && ch=$(sb --bare --columns=name list Chassis "$ch")
	echo "${ch:-none} ${up:-none}"
}
bound() { [ "$(binding $1)" = "$2 true" ]; } # bound LSP CHASSIS: on CHASSIS and up
# xid VSCTL IFACE KEY: the Interface's external_ids:KEY, unquoted ("" when absent).
xid() { $1 --if-exists get Interface $2 external_ids:$3 | tr -d '"'; }
installed() { [ "$(xid $1 $2 ovn-installed)" = true ]; } # installed VSCTL IFACE
# strip_installed: an Interface's external_ids without ovn-controller's
# ovn-installed and ovn-installed-ts
strip_installed() { sed -E 's/ovn-installed(-ts)?="[^"]*"(, )?//g; s/, \}/}/'; }
# snap1 NAME, snap2 NAME: what vflag's down on ch1 must restore, and what
# it must leave alone on ch2. ovn-controller's own columns are left out:
# the ovn-* tunnel ports, br-int's external_ids, ovn-installed(-ts).
snap1() {
	{
		vs1 get Open_vSwitch . external_ids
		vs1 list-br
		vs1 --columns=_uuid,name,fail_mode,other_config list Bridge br-int
		for p in $(vs1 list-ports br-int | grep -v '^ovn-'); do echo "$p $(vs1 get Interface $p external_ids | strip_installed)"; done
		ip -o -4 addr show | grep -v ' lo ' | awk '{print $2, $3, $4}'
		ip -4 route show
		ip link show bond0 2>&1 | head -n 1
		ip -d link show dev "$A1" | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /'
		ip -d link show dev "$A2" | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /'
		devlink dev eswitch show netdevsim/netdevsim10
		echo "numvfs $(cat /sys/bus/netdevsim/devices/netdevsim10/sriov_numvfs)"
	} >"$OUT/ch1-$1.state" 2>&1
}
snap2() {
	{
		vs2 get Open_vSwitch . external_ids
		vs2 list-br
		vs2 --columns=_uuid,name,fail_mode,other_config list Bridge br-int
		for p in $(vs2 list-ports br-int | grep -v '^ovn-'); do echo "$p $(vs2 get Interface $p external_ids | strip_installed)"; done
		ip -n ch2 -o -4 addr show | grep -v ' lo ' | awk '{print $2, $3, $4}'
		ip -n ch2 -4 route show
		ip -n ch2 -d link show bond1 | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /'
		echo "p2 $(binding p2), vm2 $(binding vm2)"
	} >"$OUT/ch2-$1.state" 2>&1
}
snap1 base
# verdicts V VERDICT CHECK...: one vflag validate of chassis V (V1 or V2);
# each CHECK has VERDICT.
verdicts() {
	local v=$1 want=$2 c got r=0
	shift 2
	$v validate -o json --allow-skip >"$OUT/validate-$v.json" 2>"$OUT/validate-$v.err"
	for c in "$@"; do
		got=$(jq -r --arg n "$c" '.groups[0].checks[] | select(.name == $n) | "\(.verdict) \(.detail)"' "$OUT/validate-$v.json")
		echo "$c: ${got:-no such check}"
		case "$got" in "$want "*) ;; *) r=1 ;; esac
	done
	return $r
}

step "vflag up on ch1 (its ovn-controller running, br-int there)"
# ch1's config has no system_id: the chassis keeps the name Open vSwitch
# has (ovs-ctl's random one), under which ovn-controller runs. Another
# system_id is refused before any write.
CH1=$(vs1 get Open_vSwitch . external_ids:system-id | tr -d '"')
refused() {
	local rc
	sed 's/^      underlay_mtu: 1600$/&\n      system_id: ch1/' /root/c1.yaml >/root/c1-ch1.yaml
	grep -q 'system_id: ch1' /root/c1-ch1.yaml || return 1
	"$VFLAG" --config /root/c1-ch1.yaml --state-dir /root/state1 up >"$OUT/up1-refused.out" 2>&1
	rc=$?
	tail -n 3 "$OUT/up1-refused.out"
	[ $rc = 1 ] || { echo "exit $rc, want 1"; return 1; }
	grep -q 'groups\[0\].ovn.system_id: "ch1"' "$OUT/up1-refused.out" || { echo "the field is not named"; return 1; }
	snap1 refused
	diff -u "$OUT/ch1-base.state" "$OUT/ch1-refused.state" || return 1
	echo "refused, nothing written"
}
check o_up1_refused refused
check o_up1 V1 up
REP1=$(reps 10 | head -n 1)
ids1() {
	local want k v got
	vs1 get Open_vSwitch . external_ids
	for want in system-id=$CH1 ovn-remote=$SBREMOTE ovn-encap-type=geneve ovn-encap-ip=192.0.2.11 ovn-set-local-ip=true ovn-bridge=br-int; do
		k=${want%%=*} v=${want#*=}
		got=$(vs1 get Open_vSwitch . external_ids:$k | tr -d '"')
		[ "$got" = "$v" ] || { echo "external_ids:$k is '$got', want '$v'"; return 1; }
	done
	ip -o addr show dev bond0 | grep -q 192.0.2.11/24 || { echo "192.0.2.11/24 is not on bond0"; return 1; }
	[ "$(cat /sys/class/net/bond0/mtu)" = 1600 ] || { echo "bond0's MTU is $(cat /sys/class/net/bond0/mtu), want 1600"; return 1; }
	! vs1 list-ports br-int | grep -qx bond0 || { echo "bond0 is a port of br-int"; return 1; }
	echo "ch1: system-id $CH1 (Open vSwitch's), ovn-remote, geneve at 192.0.2.11 (on bond0, MTU 1600, in no bridge), ovn-set-local-ip, br-int"
}
check o_ids1 ids1
adopted() {
	vs1 get Interface "$REP1" external_ids
	[ "$(grep '^_uuid' "$OUT/ch1-base.state")" = "$(vs1 --columns=_uuid list Bridge br-int)" ] || { echo "br-int is not the row ovn-controller made"; return 1; }
	[ "$(xid vs1 "$REP1" iface-id)" = p1 ] || { echo "$REP1 is not bound to p1"; return 1; }
	[ "$(xid vs1 "$REP1" iface-status)" = active ] || { echo "$REP1's iface-status is not active"; return 1; }
	[ "$(xid vs1 oa iface-id)" = vm1 ] || { echo "oa's binding changed"; return 1; }
	echo "br-int adopted (the same row), $REP1 bound to p1 (active), oa still bound to vm1"
}
check o_adopted adopted

step "vflag up on ch2 before its ovn-controller runs: degraded, nothing rolled back; then with it"
up2_degraded() {
	local rc rep
	V2 up >"$OUT/up2-degraded.out" 2>&1
	rc=$?
	cat "$OUT/up2-degraded.out"
	[ $rc = 1 ] || { echo "exit $rc, want 1"; return 1; }
	grep -q 'p2' "$OUT/up2-degraded.out" || { echo "the port p2 is not named"; return 1; }
	rep=$(lib2 reps 11 | head -n 1)
	ip -n ch2 -o addr show dev bond1 | grep -q 192.0.2.12/24 || { echo "rolled back: no 192.0.2.12 on bond1"; return 1; }
	[ "$(xid vs2 "$rep" iface-id)" = p2 ] || { echo "rolled back: $rep is not bound to p2"; return 1; }
	echo "exit 1 naming p2; bond1, its address and $rep's binding kept"
}
check o_up2_degraded up2_degraded
REP2=$(lib2 reps 11 | head -n 1)
up2() {
	controller2 || return 1
	V2 up
}
check o_up2 up2
again1() { V1 up --detailed-exit-codes; } # a second up on ch1 changes nothing (exit 0)
# (o_up2 was ch2's second up: it changed nothing)
check o_again again1

# switch_side: the veths join each bond (down first: bonding refuses an up
# port), the PFs go down, the first veth is the active slave; ob, the
# stand-in of ch2's VM end, is bound to vm2 by hand.
active() { cat /sys/class/net/bond0/bonding/active_slave; }
is_active() { [ "$(active)" = "$1" ]; }
switch_side() {
	local x=$1 bond=$2 p1=$3 p2=$4 s1=$5 s2=$6 p
	for p in $s1 $s2; do
		$x ip link set $p down
		$x ip link set $p master $bond || return 1
		$x ip link set $p up
	done
	$x ip link set $p1 down
	$x ip link set $p2 down
	$x sh -c "echo $s1 >/sys/class/net/$bond/bonding/active_slave"
}
in0() { "$@"; }
switch_side in0 bond0 "$A1" "$A2" vs1 vs2 || exit 1
switch_side in2 bond1 "$B1" "$B2" ws1 ws2 || exit 1
vs2 add-port br-int ob -- set Interface ob external_ids:iface-id=vm2 external_ids:attached-mac=02:00:00:00:00:02 || exit 1

step "OVN: chassis, bindings, tunnels"
# encap NAME: "type ip" of the chassis' Encap rows.
encap() { sb --bare --columns=type,ip find Encap chassis_name=$1 | grep -v '^$' | tr '\n' ' '; }
encap_is() { [ "$(encap $1)" = "$2 " ]; }
registered() {
	wait_for 30 encap_is $CH1 "geneve 192.0.2.11" || { echo "ch1: Encap '$(encap $CH1)'"; sb show; return 1; }
	wait_for 30 encap_is ch2 "geneve 192.0.2.12" || { echo "ch2: Encap '$(encap ch2)'"; sb show; return 1; }
	echo "ch1 ($CH1): Encap $(encap $CH1); ch2: Encap $(encap ch2)"
}
check o_chassis registered
all_bound() {
	local b
	for b in "p1 $CH1" "vm1 $CH1" "p2 ch2" "vm2 ch2"; do
		set -- $b
		wait_for 30 bound $1 $2 || { echo "$1: $(binding $1), want $2 true"; return 1; }
		echo "$1: on $2, up"
	done
}
check o_bound all_bound
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
		[ "$($1 get Interface $p options:remote_ip | tr -d '"')" = "$2" ] && { echo "$p: $($1 get Interface $p options)"; return 0; }
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
# validates: vflag validate's OVN checks pass on both chassis.
OVN1="ovn/southbound ovn/chassis ovn/port/p1 ovn/tunnel/ch2"
OVN2="ovn/southbound ovn/chassis ovn/port/p2 ovn/tunnel/$CH1"
validates() { verdicts V1 pass $OVN1 && verdicts V2 pass $OVN2; }
check o_validate validates

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
	# what vm2 received went through genev_sys_6081 and bond0 (with Geneve's headers on top)
	r=$(jq .end.sum_received.bytes "$OUT/iperf3.json")
	[ $((g1 - g0)) -gt "$r" ] && [ $((b1 - b0)) -gt "$r" ] || { echo "vm2 received $r bytes: more than went through Geneve and bond0"; return 1; }
	jq -r '"iperf3 vm1 -> vm2 over Geneve (bond0, slave vs1): \(.end.sum_received.bits_per_second / 1e6 | floor) Mbit/s"' "$OUT/iperf3.json"
}
check o_iperf3 iperf
# offload: validate --offload on ch1 during an iperf3 classifies OVN's
# datapath flows: the encap into genev_sys_6081 (from oa), the decap out
# of it, conntrack (the allow-related ACL); on 6.1 none is in hardware
# (netdevsim takes no flower rule, veth has no tc offload), each with
# its reason.
offload() {
	local pid
	ip netns exec vm2 iperf3 -s -1 -D --logfile $L/iperf3-o.log
	sleep 0.5
	ip netns exec vm1 iperf3 -c 10.10.0.2 -t 8 >/dev/null 2>&1 &
	pid=$!
	sleep 2
	V1 validate --offload -o json --allow-skip >"$OUT/offload-V1.json" 2>"$OUT/offload-V1.err"
	wait $pid
	jq -r '.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0) |
		"\(.in_port) \(.where) dp:\(.dp) [\(.kinds // [] | join(","))] \(.reasons[0] // "-")"' "$OUT/offload-V1.json" | sort -u
	jq -r '.groups[0].checks[] | select(.name == "offload") | "offload: \(.verdict) \(.detail | split("\n")[0])"' "$OUT/offload-V1.json"
	jq -e '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0)] |
		any(.kinds // [] | index("encap")) and any(.kinds // [] | index("decap")) and any(.kinds // [] | index("ct")) and
		all(.where != "hardware" and (.reasons | length > 0))' "$OUT/offload-V1.json" >/dev/null ||
		{ echo "want encap, decap and ct flows, none in hardware, each with a reason"; return 1; }
	echo "OVN's flows classified (encap, decap, ct), none in hardware on 6.1, each with its reason"
}
check o_offload offload
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

step "validate --traffic between bound ports: p1 (ch1) -> vm2 (ch2) and vm1 (ch1); an ACL drops it"
# vflag sends an echo request from p1's addresses into br-int at p1's
# representor (OpenFlow packet-out through OVN's tables) and watches for
# the reply going out of that representor: the request crosses OVN's
# pipeline on both chassis and Geneve over the bonds; vm2 and vm1 answer.
# vtraffic TO WANT [PATTERN]: ch1's ovn/traffic/TO has verdict WANT (and
# its detail PATTERN).
vtraffic() {
	local got
	V1 validate --traffic --ovn-to "$1" -o json --allow-skip >"$OUT/vtraffic-$1.json" 2>"$OUT/vtraffic-$1.err"
	got=$(jq -r --arg n "ovn/traffic/$1" '.groups[0].checks[] | select(.name == $n) | "\(.verdict) \(.detail)"' "$OUT/vtraffic-$1.json")
	echo "ovn/traffic/$1: ${got:-no such check}"
	case "$got" in "$2 "*) ;; *) return 1 ;; esac
	[ -z "$3" ] || tr '\n' ' ' <<<"$got" | grep -q -- "$3" || { echo "the detail lacks '$3'"; return 1; }
}
ip -d link show "$REP1" | head -n 2
check o_vtraffic_remote vtraffic vm2 pass "on chassis ch2 over ovn-.*in_port(genev_sys_6081) (decap"
check o_vtraffic_local vtraffic vm1 pass "on this chassis"
P1DROP='inport == "p1" && ip4.dst == 10.10.0.2'
vtraffic_acl() {
	nb --wait=hv acl-add ls0 from-lport 1002 "$P1DROP" drop || return 1
	vtraffic vm2 fail "^fail ACL drop: .*ls_in_acl"
	local r=$?
	nb --wait=hv acl-del ls0 from-lport 1002 "$P1DROP" || return 1
	return $r
}
check o_vtraffic_acl vtraffic_acl
# a to-lport ACL runs on the destination's chassis: ch1 sees its request
# leave over Geneve and no reply
P1DROPTO='ip4.src == 10.10.0.11'
vtraffic_acl_to() {
	nb --wait=hv acl-add ls0 to-lport 1002 "$P1DROPTO" drop || return 1
	vtraffic vm2 fail "^fail ACL drop suspected: .*set(tunnel(.*dst=192.0.2.12.*in chassis ch2"
	local r=$?
	nb --wait=hv acl-del ls0 to-lport 1002 "$P1DROPTO" || return 1
	return $r
}
check o_vtraffic_acl_to vtraffic_acl_to
vtraffic_bad() {
	local rc
	V1 validate --traffic --ovn-to 'no such port' >"$OUT/vtraffic-bad.out" 2>&1
	rc=$?
	cat "$OUT/vtraffic-bad.out"
	[ $rc != 0 ] && grep -q -- '--ovn-to: "no such port"' "$OUT/vtraffic-bad.out" || return 1
	vtraffic absent fail "^fail no path: absent"
}
check o_vtraffic_bad vtraffic_bad

step "ovn-controller of ch2 stopped, then started again"
released() {
	in2 ovn-appctl -t ovn-controller exit || return 1
	wait_for 10 sh -c "! kill -0 $(cat $C2/ovn-controller.pid) 2>/dev/null" || { echo "ovn-controller still running"; return 1; }
	echo "ch2: p2 $(binding p2), vm2 $(binding vm2); $REP2 ovn-installed: $(xid vs2 "$REP2" ovn-installed)"
	# An exiting ovn-controller releases its ports (the Port_Binding has
	# no chassis; 23.03 leaves up true) and leaves ovn-installed on the
	# Interfaces: taken off here, so that o_restart_back sees the new
	# controller set it.
	vs2 remove Interface ob external_ids ovn-installed -- remove Interface "$REP2" external_ids ovn-installed || return 1
	[ "$(binding vm2 | cut -d' ' -f1)" = none ] && [ "$(binding p2 | cut -d' ' -f1)" = none ]
}
check o_restart_released released
check o_restart_validate_fails verdicts V2 fail ovn/port/p2
back() {
	controller2 || return 1
	wait_for 30 bound vm2 ch2 && wait_for 30 bound p2 ch2 || { echo "p2 $(binding p2), vm2 $(binding vm2)"; return 1; }
	wait_for 30 installed vs2 ob && wait_for 30 installed vs2 "$REP2" || { echo "not ovn-installed again"; return 1; }
	wait_for 30 ping_vm2 || { echo "vm1 does not reach vm2 after the restart"; return 1; }
	echo "p2 and vm2 on ch2, up, ovn-installed; vm1 reaches vm2"
}
check o_restart_back back
check o_restart_validate verdicts V2 pass $OVN2

step "vflag down on ch1: ch1 as before up, ch2 untouched"
# the bond back to the PFs alone, as vflag made it
for v in vs1 vs2; do ip link set $v nomaster; done
ip link set "$A1" up
ip link set "$A2" up
snap2 before
check o_down1 V1 down
baseline1() {
	snap1 after
	diff -u "$OUT/ch1-base.state" "$OUT/ch1-after.state" && echo "ch1 as before up ($(wc -l <"$OUT/ch1-after.state") lines: external_ids, br-int's row, oa bound to vm1)"
}
check o_down_baseline baseline1
other() {
	snap2 after
	diff -u "$OUT/ch2-before.state" "$OUT/ch2-after.state" && echo "ch2 untouched ($(wc -l <"$OUT/ch2-after.state") lines)"
}
check o_down_other other
exit 0
