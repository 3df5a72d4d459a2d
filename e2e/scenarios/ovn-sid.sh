#!/bin/bash
# Scenario OS: OVN's datapath flows on Debian unstable's kernel (7.x), whose
# netdevsim takes tc flower rules into "hardware" (in_hw) and links two of
# its ports as peers. One chassis: the OVN central (Northbound,
# Southbound on a unix socket, ovn-northd) and ovn-controller on the
# guest's Open vSwitch (bookworm's OVN 23.03 and OVS 3.1 on the 7.x
# kernel); vflag's group on netdevsim 11 (bond0 with the encap address,
# VF 0's representor bound to p1); the VMs' ends in namespaces a and b on
# netdevsim 13, linked to the ports of netdevsim 14 that stand in for
# their representors on br-int (bound to vm1 and vm2 by hand: a VF
# representor does not link). A second chassis ch2 is registered in the
# Southbound by hand (ovn-sbctl chassis-add, Geneve at 192.0.2.12) with
# vm3 bound to it: ovn-controller makes the Geneve port ovn-ch2-0 and
# traffic to vm3 is encapsulated into genev_sys_6081 (nothing answers;
# the next hop's neighbour is set by hand, so the encap is resolved).
#
#   ns a: nsim13 p1 ==link== nsim14 p1 (vm1) --+
#   ns b: nsim13 p2 ==link== nsim14 p2 (vm2) --+-- br-int (ovn-controller's, hw-offload)
#                        VF 0 representor (p1) --+-- ovn-ch2-0 ~~geneve~~ bond0 (192.0.2.11)
#
# An allow-related ACL puts conntrack in the path. Checks: validate
# --traffic from p1 to vm2 passes; validate --offload classifies the
# flows (ct, encap) and each flow's place agrees with the kernel's tc
# filters on its port (in_hw for a flow in hardware, not_in_hw for a flow
# in tc software) and every flow outside the hardware has a reason.
#
# MACHINE: default
# KERNEL: sid
# TIMEOUT: 420
# EXPECT: sv_kernel sv_central sv_up sv_bound sv_tunnel sv_ping sv_vtraffic sv_offload sv_kernel_agrees
# EXPECT: sv_offload_noct sv_kernel_agrees_noct
. "$(dirname "$0")/lib.sh"

check sv_kernel sid_kernel || exit 1

L=/tmp/ovn
NBDB=unix:/run/ovn/ovnnb_db.sock
SBDB=unix:/run/ovn/ovnsb_db.sock
mkdir -p $L /run/ovn
trap 'mkdir -p "$OUT/ovn-logs"; cp $L/*.log /var/log/openvswitch/*.log "$OUT/ovn-logs/" 2>/dev/null' EXIT
nb() { ovn-nbctl --db=$NBDB --timeout=10 "$@"; }
sb() { ovn-sbctl --db=$SBDB --timeout=10 "$@"; }

step "bed: netdevsim NIC (11), VM ends (13, in ns a and b), their stand-ins (14); Open vSwitch"
modprobe bonding max_bonds=0
modprobe openvswitch
modprobe geneve
nsim_new 11 2 || exit 1
PF1=$(netdev_by_ppn 11 p1)
PF2=$(netdev_by_ppn 11 p2)
nsim_new 13 2 || exit 1
M1=$(netdev_by_ppn 13 p1)
M2=$(netdev_by_ppn 13 p2)
nsim_new 14 2 || exit 1
N1=$(netdev_by_ppn 14 p1)
N2=$(netdev_by_ppn 14 p2)
ip netns add a
ip netns add b
ip link set "$M1" netns a
ip link set "$M2" netns b
nsim_link "$M1" a "$N1" "" || exit 1
nsim_link "$M2" b "$N2" "" || exit 1
ip -n a link set lo up
ip -n b link set lo up
ip -n a link set "$M1" address 02:00:00:00:00:01 up
ip -n b link set "$M2" address 02:00:00:00:00:02 up
ip -n a addr add 10.10.0.1/24 dev "$M1"
ip -n b addr add 10.10.0.2/24 dev "$M2"
ip link set "$N1" up
ip link set "$N2" up
ovs_start || exit 1

central() {
	ovsdb-tool create $L/nb.db /usr/share/ovn/ovn-nb.ovsschema || return 1
	ovsdb-tool create $L/sb.db /usr/share/ovn/ovn-sb.ovsschema || return 1
	ovsdb-server $L/nb.db --remote=punix:/run/ovn/ovnnb_db.sock --pidfile=/run/ovn/ovnnb_db.pid \
		--unixctl=/run/ovn/ovnnb_db.ctl --log-file=$L/ovsdb-nb.log --detach || return 1
	ovsdb-server $L/sb.db --remote=punix:/run/ovn/ovnsb_db.sock --pidfile=/run/ovn/ovnsb_db.pid \
		--unixctl=/run/ovn/ovnsb_db.ctl --log-file=$L/ovsdb-sb.log --detach || return 1
	ovn-northd --ovnnb-db=$NBDB --ovnsb-db=$SBDB --pidfile=/run/ovn/ovn-northd.pid \
		--unixctl=/run/ovn/ovn-northd.ctl --log-file=$L/ovn-northd.log --detach || return 1
	wait_for 20 sb show || { echo "no Southbound"; return 1; }
	nb ls-add ls0 || return 1
	nb lsp-add ls0 p1 -- lsp-set-addresses p1 "02:00:00:00:01:01 10.10.0.11" || return 1
	nb lsp-add ls0 vm1 -- lsp-set-addresses vm1 "02:00:00:00:00:01 10.10.0.1" || return 1
	nb lsp-add ls0 vm2 -- lsp-set-addresses vm2 "02:00:00:00:00:02 10.10.0.2" || return 1
	nb lsp-add ls0 vm3 -- lsp-set-addresses vm3 "02:00:00:00:00:03 10.10.0.3" || return 1
	nb acl-add ls0 from-lport 1000 ip4 allow-related || return 1
	ovn-controller unix:/var/run/openvswitch/db.sock --pidfile=/run/ovn/ovn-controller.pid --log-file=$L/ovn-controller.log --detach || return 1
	wait_for 20 ovs-vsctl br-exists br-int || { echo "ovn-controller made no br-int"; return 1; }
	echo "OVN $(ovn-northd --version | head -n 1), Southbound schema $(ovsdb-client get-schema-version $SBDB OVN_Southbound), $(ovs-vswitchd --version | head -n 1), kernel $(uname -r)"
}
check sv_central central || exit 1

cat >/root/vflag.yaml <<EOC
ovsdb: unix:/var/run/openvswitch/db.sock
lag_timeout: 20s
groups:
  - name: ovn0
    pfs: [$PF1, $PF2]
    numvfs: 2
    bond: {name: bond0, mode: active-backup, miimon: 100}
    ovn:
      remote: $SBDB
      encap_ip: 192.0.2.11/24
      underlay_mtu: 1600
    vfs:
      - {pf: 0, vf: 0, ovn_port: p1}
EOC
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }
step "vflag up: the chassis (br-int adopted, hw-offload), p1 bound; vm1, vm2 on the stand-ins; ch2 by hand"
check sv_up V up
REP=$(reps 11 | head -n 1)
xid() { ovs-vsctl --if-exists get Interface $1 external_ids:$2 | tr -d '"'; }
installed() { [ "$(xid $1 ovn-installed)" = true ]; }
bound() {
	ovs-vsctl add-port br-int "$N1" -- set Interface "$N1" external_ids:iface-id=vm1 external_ids:attached-mac=02:00:00:00:00:01 || return 1
	ovs-vsctl add-port br-int "$N2" -- set Interface "$N2" external_ids:iface-id=vm2 external_ids:attached-mac=02:00:00:00:00:02 || return 1
	for i in "$REP" "$N1" "$N2"; do
		wait_for 30 installed $i || { echo "$i: not ovn-installed: $(ovs-vsctl get Interface $i external_ids)"; return 1; }
	done
	echo "$REP (p1), $N1 (vm1), $N2 (vm2): ovn-installed; hw-offload $(ovs-vsctl get Open_vSwitch . other_config:hw-offload)"
}
check sv_bound bound
tunnel() {
	sb chassis-add ch2 geneve 192.0.2.12 || return 1
	sb lsp-bind vm3 ch2 || return 1
	ip neigh replace 192.0.2.12 lladdr 02:00:00:00:99:12 dev bond0 nud permanent || return 1
	ip -n a neigh replace 10.10.0.3 lladdr 02:00:00:00:00:03 dev "$M1" nud permanent || return 1
	wait_for 30 sh -c "ovs-vsctl --bare --columns=name find Interface type=geneve options:remote_ip=192.0.2.12 | grep -q ." ||
		{ echo "no Geneve port to ch2"; ovs-vsctl show; return 1; }
	echo "$(ovs-vsctl --bare --columns=name find Interface type=geneve options:remote_ip=192.0.2.12): $(ip -d link show genev_sys_6081 | grep -o 'geneve.*' | head -n 1)"
}
check sv_tunnel tunnel

step "traffic: a -> b on this chassis (conntrack), a -> vm3 on ch2 (Geneve encap)"
ping_b() { ip netns exec a ping -c 1 -W 1 10.10.0.2; }
pinged() {
	wait_for 30 ping_b || { echo "a does not reach b"; return 1; }
	ip netns exec a ping -c 5 -i 0.1 -W 1 10.10.0.2 | tail -n 2
}
check sv_ping pinged
vtraffic() {
	V validate --traffic --ovn-to vm2 -o json --allow-skip >"$OUT/vtraffic.json" 2>"$OUT/vtraffic.err"
	jq -r '.groups[0].checks[] | select(.name == "ovn/traffic/vm2") | "\(.verdict) \(.detail)"' "$OUT/vtraffic.json"
	jq -e '.groups[0].checks[] | select(.name == "ovn/traffic/vm2") | .verdict == "pass"' "$OUT/vtraffic.json" >/dev/null
}
check sv_vtraffic vtraffic
# flows NAME: validate --offload while a -> b (ICMP, TCP) and a -> vm3
# (ICMP, encapsulated) run, with the kernel's tc filters and the datapath
# flows beside it; every flow with traffic printed with its kinds, place
# and first reason.
flows() {
	local pids=() d
	ip netns exec b iperf3 -s -1 -D --logfile $L/iperf3-$1.log
	sleep 0.5
	ip netns exec a iperf3 -c 10.10.0.2 -t 6 -b 20M >/dev/null 2>&1 & pids+=($!)
	ip netns exec a ping -c 60 -i 0.1 -q 10.10.0.2 >/dev/null 2>&1 & pids+=($!)
	ip netns exec a ping -c 60 -i 0.1 -q 10.10.0.3 >/dev/null 2>&1 & pids+=($!)
	sleep 3
	V validate --offload -o json --allow-skip >"$OUT/offload-$1.json" 2>"$OUT/offload-$1.err"
	for d in "$N1" "$N2" "$REP" genev_sys_6081 bond0; do
		echo "== tc -s filter show dev $d ingress"
		tc -s filter show dev "$d" ingress
	done >"$OUT/tc-$1.txt" 2>&1
	ovs-appctl dpctl/dump-flows -m >"$OUT/dpflows-$1.txt" 2>&1
	wait "${pids[@]}"
	jq -r '.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0) |
		"\(.in_port) [\(.kinds // [] | join(","))] \(.where) dp:\(.dp) offloaded:\(.offloaded) \(.packets) pk: \(.reasons[0] // "-")"' "$OUT/offload-$1.json" | sort | uniq -c
	grep -o 'failed to offload flow: .*' /var/log/openvswitch/ovs-vswitchd.log | sort | uniq -c | sort -rn | head -n 5
	jq -r '.groups[0].checks[] | select(.name == "offload") | "offload: \(.verdict) \(.detail | split("\n")[0])"' "$OUT/offload-$1.json"
}
# has_kinds NAME KIND...: validate's flows with traffic include each KIND,
# and each flow outside the hardware has a reason.
has_kinds() {
	local f=$OUT/offload-$1.json k
	shift
	for k in "$@"; do
		jq -e --arg k "$k" '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0)] | any(.kinds // [] | index($k))' "$f" >/dev/null ||
			{ echo "no $k flow with traffic"; return 1; }
	done
	jq -e '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0)] | all(.where == "hardware" or (.reasons | length > 0))' "$f" >/dev/null ||
		{ echo "a flow outside the hardware without a reason"; return 1; }
}
# ovs-vswitchd logs why tc refused a flow at debug level only
# (EOPNOTSUPP): the offload check reads the log for its reasons.
ovs-appctl vlog/set netdev_offload_tc:file:dbg dpif_netlink:file:dbg tc:file:dbg >/dev/null
# With the allow-related ACL every flow goes through conntrack and
# recirculates, and ovs-vswitchd refuses each one before tc sees it
# ("flow_put: recirc_id sharing not supported", at its ERR level; the port's
# "Operation not supported" at debug level): Debian's kernel is built
# without CONFIG_NET_TC_SKB_EXT, so its OVS datapath shares no
# recirculation ids with tc. None is in tc, the flows run in the OVS
# kernel datapath, and validate gives that reason for each.
offload_ct() {
	flows ct && has_kinds ct ct encap || return 1
	grep -q 'netdev_offload_tc.*|ERR|flow_put: recirc_id sharing not supported' /var/log/openvswitch/ovs-vswitchd.log ||
		{ echo "ovs-vswitchd logged no recirc_id sharing refusal"; return 1; }
	jq -e '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0)] |
		all(.where == "OVS kernel datapath" and (.kinds | index("ct")) and (.reasons | any(test("recirc_id sharing not supported"))))' "$OUT/offload-ct.json" >/dev/null ||
		{ echo "want every flow in the OVS kernel datapath through conntrack, with the recirc_id sharing reason"; return 1; }
	echo "every flow (ct) in the OVS kernel datapath: ovs-vswitchd's tc layer refused it (recirc_id sharing), as validate says"
}
check sv_offload offload_ct
# kernel_agrees NAME: for each port the flows came in on, validate's places
# agree with its tc filters: a flow in hardware needs an in_hw rule there,
# a flow in tc software a not_in_hw one, a flow in the OVS kernel
# datapath none of either for its match (counted, not matched).
kernel_agrees() {
	local p where tcp r=0 f=$OUT/offload-$1.json
	for p in $(jq -r '.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0) | .in_port' "$f" | sort -u); do
		tcp=$(awk -v d="== tc -s filter show dev $p ingress" '$0 == d {on=1; next} /^== / {on=0} on' "$OUT/tc-$1.txt")
		for where in "hardware" "tc software" "OVS kernel datapath"; do
			jq -e --arg p "$p" --arg w "$where" '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0 and .in_port == $p and .where == $w)] | length > 0' "$f" >/dev/null || continue
			case $where in
			hardware) grep -q ' in_hw' <<<"$tcp" || { echo "$p: validate says a flow is in hardware, tc shows no in_hw rule"; r=1; } ;;
			"tc software") grep -q 'not_in_hw' <<<"$tcp" || { echo "$p: validate says a flow is in tc software, tc shows no not_in_hw rule"; r=1; } ;;
			esac
		done
		echo "$p: validate $(jq -r --arg p "$p" '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0 and .in_port == $p) | .where] | group_by(.) | map("\(length) \(.[0])") | join(", ")' "$f"); tc $(grep -c ' in_hw' <<<"$tcp") in_hw, $(grep -c 'not_in_hw' <<<"$tcp") not_in_hw rule(s)"
	done
	return $r
}
check sv_kernel_agrees kernel_agrees ct

step "without the ACL: no conntrack in the path"
offload_noct() {
	nb --wait=hv acl-del ls0 || return 1
	sleep 11 # the flows with ct idle out (max-idle 10 s)
	flows noct && has_kinds noct encap || return 1
	jq -e '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0)] |
		all(.where == "hardware" and (.kinds // [] | index("ct") | not))' "$OUT/offload-noct.json" >/dev/null ||
		{ echo "want every flow in hardware, none through conntrack"; return 1; }
	# netdevsim takes the encap rule into "hardware" with OVN's Geneve
	# option (it encapsulates nothing: its flower callback accepts any rule)
	awk -v d="== tc -s filter show dev $N1 ingress" '$0 == d {on=1; next} /^== / {on=0} on' "$OUT/tc-noct.txt" |
		tr '\n' ' ' | grep -q 'in_hw in_hw_count 1.*tunnel_key *set.*geneve_opts 0102:80:.*genev_sys_6081' ||
		{ echo "no encap rule with OVN's Geneve option in_hw on $N1"; return 1; }
	echo "without conntrack every flow in hardware, the encap to genev_sys_6081 with OVN's Geneve option too"
}
check sv_offload_noct offload_noct
check sv_kernel_agrees_noct kernel_agrees noct
exit 0
