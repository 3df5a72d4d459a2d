#!/bin/bash
# The test bed checks itself: netdevsim in switchdev mode with VF
# representors, 802.3ad bonding over the netdevsim ports, Open vSwitch on the
# kernel datapath with hw-offload, iperf3 through an OVS bridge. It does not
# run vflag: its pass is recorded per image (# BED), not per binary.
#
# BED: yes   # checks the bed itself: booted again only when the image or the scripts change
# MACHINE: default
# TIMEOUT: 300
# EXPECT: nsim_device nsim_port_names nsim_numvfs nsim_switchdev nsim_representors nsim_switch_id
# EXPECT: bond_8023ad
# EXPECT: ovs_start ovs_hw_offload ovs_bridge ovs_kernel_datapath
# EXPECT: ping_netns_ovs iperf3_netns_ovs
# EXPECT: nsim_teardown
. "$(dirname "$0")/lib.sh"

step "netdevsim"
ID=10
DEV=/sys/bus/netdevsim/devices/netdevsim$ID
DL=netdevsim/netdevsim$ID
check nsim_device nsim_new $ID 2
PF1=$(netdev_by_ppn $ID p1)
PF2=$(netdev_by_ppn $ID p2)
echo "PFs: p1=$PF1 p2=$PF2"
expect nsim_port_names "p1 p2" sh -c "cat /sys/class/net/$PF1/phys_port_name /sys/class/net/$PF2/phys_port_name | tr '\n' ' '"

echo 4 >"$DEV/sriov_numvfs"
expect nsim_numvfs 4 cat "$DEV/sriov_numvfs"

run devlink dev eswitch set $DL mode switchdev
expect_match nsim_switchdev 'mode switchdev' devlink dev eswitch show $DL

reps_ok() { for v in 0 1 2 3; do netdev_by_ppn $ID pf0vf$v >/dev/null || return 1; done; }
if wait_for 10 reps_ok; then
	REPS=$(for v in 0 1 2 3; do netdev_by_ppn $ID pf0vf$v; done | tr '\n' ' ')
	ok nsim_representors "pf0vf0..3 = $REPS"
else
	fail nsim_representors "netdevs: $(for n in $(nsim_netdevs $ID); do echo "$n=$(cat "/sys/class/net/$n/phys_port_name")"; done)"
	REPS=
fi
run devlink port show
ids=$(for n in $(nsim_netdevs $ID); do cat "/sys/class/net/$n/phys_switch_id"; done | sort -u)
if [ "$(echo "$ids" | wc -l)" = 1 ] && [[ $ids =~ ^[0-9a-f]{64}$ ]]; then
	ok nsim_switch_id "$(nsim_netdevs $ID | wc -w) netdevs share $ids"
else
	fail nsim_switch_id "switch ids: $ids"
fi

step "bonding 802.3ad over the netdevsim PFs"
modprobe bonding max_bonds=0
run ip link add bond0 type bond mode 802.3ad xmit_hash_policy layer3+4 lacp_rate fast miimon 100
for p in $PF1 $PF2; do
	ip link set "$p" down
	ip link set "$p" master bond0
done
ip link set bond0 up
bond_ok() {
	grep -q 'Bonding Mode: IEEE 802.3ad Dynamic link aggregation' /proc/net/bonding/bond0 &&
		[ "$(grep -c '^Slave Interface' /proc/net/bonding/bond0)" = 2 ] &&
		echo "802.3ad, slaves: $(sed -n 's/^Slave Interface: //p' /proc/net/bonding/bond0 | tr '\n' ' ')"
}
check bond_8023ad bond_ok

step "Open vSwitch, kernel datapath, hw-offload"
check ovs_start ovs_start
ovs-vsctl set Open_vSwitch . other_config:hw-offload=true
# shellcheck disable=SC2046
run ovs-vsctl add-br br-vf -- add-port br-vf bond0 $(for r in $REPS; do echo "-- add-port br-vf $r"; done)
OVSLOG=/var/log/openvswitch/ovs-vswitchd.log
wait_for 10 grep -q "Flow API Enabled" $OVSLOG
expect_match ovs_hw_offload 'Flow API Enabled' grep -E "Flow API Enabled|flow API" $OVSLOG
# shellcheck disable=SC2086
expect ovs_bridge "$(printf '%s\n' bond0 $REPS | sort | tr '\n' ' ' | sed 's/ $//')" \
	sh -c 'ovs-vsctl list-ports br-vf | sort | tr "\n" " "'
expect_match ovs_kernel_datapath 'system@ovs-system' sh -c 'lsmod | grep -w ^openvswitch && ovs-dpctl show'

step "iperf3 between two network namespaces through an OVS bridge"
ovs-vsctl add-br br-perf
for i in 1 2; do
	ip netns add ns$i
	ip link add v${i}h type veth peer name v${i}n
	ip link set v${i}n netns ns$i
	ip -n ns$i addr add 198.18.0.$i/24 dev v${i}n
	ip -n ns$i link set v${i}n up
	ip -n ns$i link set lo up
	ip link set v${i}h up
	ovs-vsctl add-port br-perf v${i}h
done
ip link set br-perf up
check ping_netns_ovs ip netns exec ns1 ping -c 3 -i 0.2 -W 2 198.18.0.2
ip netns exec ns2 iperf3 -s -1 -D --logfile /tmp/iperf3-server.log
wait_for 10 sh -c 'ip netns exec ns2 ss -ltn | grep -q :5201'
# 3 s: the bed checks itself; switchdev.sh runs the 10 s product check.
ip netns exec ns1 iperf3 -c 198.18.0.2 -t 3 -J >/tmp/iperf3.json 2>&1
rate=$(jq -r '.end.sum_received.bits_per_second // empty' /tmp/iperf3.json 2>/dev/null)
# With hw-offload=true OVS puts the flows in TC (flower, software path for
# veths): the datapath counts only the first packets of each flow.
tcflows=$(ovs-appctl dpctl/dump-flows type=tc 2>/dev/null | grep -c .)
dpflows=$(ovs-appctl dpctl/dump-flows type=ovs 2>/dev/null | grep -c .)
if [ -n "$rate" ]; then
	ok iperf3_netns_ovs "$(awk -v r="$rate" 'BEGIN { printf "%.2f Gbit/s", r / 1e9 }') received over 3 s; datapath flows: $tcflows in tc, $dpflows in ovs"
else
	fail iperf3_netns_ovs "$(tail -n 5 /tmp/iperf3.json)"
fi

step "teardown"
teardown() {
	ovs-vsctl del-br br-perf && ovs-vsctl del-br br-vf &&
		ip link del bond0 &&
		devlink dev eswitch set $DL mode legacy &&
		echo 0 >"$DEV/sriov_numvfs" &&
		echo $ID >/sys/bus/netdevsim/del_device &&
		[ ! -e "$DEV" ] && echo "device $ID removed"
}
check nsim_teardown teardown
