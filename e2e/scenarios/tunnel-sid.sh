#!/bin/bash
# Scenario TS: what netdevsim of Debian unstable's kernel (7.x) shows of a
# VXLAN tunnel's tc rules with OVS hw-offload. Its block callback (tc.c
# nsim_setup_tc_block_cb) returns 0 for every flower rule without reading
# it, so a rule on a netdevsim port is in_hw whatever its actions; it
# registers no indirect block (no flow_indr_dev_register in netdevsim), and
# a VXLAN device has no ndo_setup_tc, so cls_api.c tcf_block_offload_cmd
# finds no callback for vxlan_sys_4789's block: a rule there is not_in_hw
# and runs in tc's software path.
#
#   ns a: nsim13 p1 ==link== nsim14 p1 -- br-vf (vflag's, hw-offload, vx5000r0)
#                          bond0 (active-backup) . VLAN 30 . 192.0.2.11
#          PF p1 ==link== nsim12 p1 --+-- brr in ns r . VLAN 30 . 192.0.2.12
#          PF p2 ==link== nsim12 p2 --+   vxlan0 (VNI 5000) 10.77.0.2
#
# The port of nsim14 stands in for a VF's representor (representors do not
# link, see offload-sid.sh). Checks: traffic crosses the tunnel over the
# linked PFs; the encap flow (from the port, set(tunnel(...)) to the
# datapath's vxlan port) is offloaded:yes, its rule in_hw with a
# tunnel_key set action; the decap flow (in_port vxlan_sys_4789) is in tc
# but not in hardware, its rule not_in_hw with software hits, and validate
# --offload says so with its decap reason.
#
# MACHINE: default
# KERNEL: sid
# TIMEOUT: 420
# EXPECT: ts_kernel ts_up ts_traffic ts_encap_in_hw ts_decap_in_sw ts_validate_offload ts_down
. "$(dirname "$0")/lib.sh"

check ts_kernel sid_kernel || exit 1


step "bed: netdevsim NIC (11), switch (12), VM end (13), representor stand-in (14); bonding, vxlan, Open vSwitch"
nsim_new 11 2 || exit 1
PF1=$(netdev_by_ppn 11 p1)
PF2=$(netdev_by_ppn 11 p2)
nsim_new 12 2 || exit 1
SW1=$(netdev_by_ppn 12 p1)
SW2=$(netdev_by_ppn 12 p2)
nsim_new 13 1 || exit 1
M1=$(netdev_by_ppn 13 p1)
nsim_new 14 1 || exit 1
N1=$(netdev_by_ppn 14 p1)
modprobe bonding max_bonds=0
modprobe vxlan
ip netns add r
ip netns add a
ip link set "$SW1" netns r
ip link set "$SW2" netns r
ip link set "$M1" netns a
nsim_link "$PF1" "" "$SW1" r || exit 1
nsim_link "$PF2" "" "$SW2" r || exit 1
nsim_link "$M1" a "$N1" "" || exit 1
# The switch and the remote endpoint: a bridge over the two ports, VLAN 30.
ip -n r link set lo up
ip -n r link add brr type bridge
ip -n r link set "$SW1" mtu 1600 master brr up
ip -n r link set "$SW2" mtu 1600 master brr up
ip -n r link set brr up
ip -n r link add link brr name brr.30 type vlan id 30
ip -n r link set brr.30 up
ip -n r addr add 192.0.2.12/24 dev brr.30
ip -n r link add vxlan0 type vxlan id 5000 local 192.0.2.12 remote 192.0.2.11 dstport 4789 dev brr.30
ip -n r addr add 10.77.0.2/24 dev vxlan0
ip -n r link set vxlan0 up
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
      hw_offload: true
    tunnel:
      type: vxlan
      local: 192.0.2.11/24
      underlay_vlan: 30
      underlay_mtu: 1600
      remotes: [192.0.2.12]
      vni: 5000
EOC
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

step "TS: vflag up (switchdev, bond, underlay, VXLAN port, hw-offload)"
check ts_up V up
traffic() {
	ip -n a link set lo up
	ip -n a link set "$M1" up
	ip -n a addr add 10.77.0.1/24 dev "$M1"
	ip link set "$N1" up
	ovs-vsctl add-port br-vf "$N1" || return 1
	wait_for 30 ip netns exec a ping -c 1 -W 1 10.77.0.2 || { echo "no ping through the tunnel"; ip neigh show dev bond0.30; return 1; }
	ip netns exec a ping -c 30 -i 0.05 -q 10.77.0.2 | tail -n 2
}
check ts_traffic traffic

# rules DEV: one line per tc filter of DEV's ingress: its handle, actions
# (kinds) and where it is (in_hw, not_in_hw), its software packets.
rules() {
	tc -s filter show dev "$1" ingress | awk '
		function out() { if (h != "") print "handle " h " actions" a " " w " sw_pkts=" (sw != "" ? sw : (tot == "" ? 0 : tot)) }
		/^filter .* handle / { out(); h = $0; sub(/.* handle /, "", h); sub(/ .*/, "", h); a = ""; w = "-"; sw = ""; tot = ""; next }
		/^ +(in_hw|not_in_hw)/ { w = $1 }
		/action order [0-9]+: / { k = $0; sub(/.*action order [0-9]+: /, "", k); sub(/[ (].*/, "", k); a = a " " k }
		/Sent [0-9]+ bytes / { y = $0; sub(/.*Sent [0-9]+ bytes /, "", y); sub(/ pkt.*/, "", y); if (tot == "") tot = y }
		/Sent software / { x = $0; sub(/.*Sent software [0-9]+ bytes /, "", x); sub(/ pkt.*/, "", x); if (sw == "") sw = x }
		END { out() }'
}
flows() { ovs-appctl dpctl/dump-flows -m "$@" 2>&1; }

step "TS: the encap flow (port -> vxlan_sys_4789) and its rule"
encap_in_hw() {
	ip netns exec a ping -c 20 -i 0.05 -q 10.77.0.2 >/dev/null
	flows type=offloaded >"$OUT/flows-offloaded.txt"
	grep -F "in_port($N1)" "$OUT/flows-offloaded.txt" | grep -F 'set(tunnel(tun_id=0x1388' | head -n 2 | cut -c1-300
	grep -F "in_port($N1)" "$OUT/flows-offloaded.txt" | grep -F 'set(tunnel(tun_id=0x1388' | grep -q 'dp:tc' ||
		{ echo "no offloaded encap flow from $N1"; flows | cut -c1-200; return 1; }
	rules "$N1" | tee "$OUT/rules-$N1.txt"
	grep -q 'tunnel_key.* in_hw ' "$OUT/rules-$N1.txt" || { echo "no tunnel_key rule in_hw on $N1"; return 1; }
	echo "encap rule on $N1 in_hw (netdevsim's flower callback accepts it unread)"
}
check ts_encap_in_hw encap_in_hw

step "TS: the decap flow (vxlan_sys_4789 -> port) and its rule"
decap_in_sw() {
	local f
	flows >"$OUT/flows-all.txt"
	f=$(grep -E '^ufid:.*tunnel\(tun_id=0x1388.*in_port\(vxlan_sys_4789\)' "$OUT/flows-all.txt")
	printf '%s\n' "$f" | head -n 2 | cut -c1-260
	[ -n "$f" ] || { echo "no decap flow"; cut -c1-200 "$OUT/flows-all.txt"; return 1; }
	printf '%s\n' "$f" | grep -q 'offloaded:yes' && { echo "a decap flow says offloaded"; return 1; }
	printf '%s\n' "$f" | grep -q 'dp:tc' || { echo "the decap flows are not in tc"; return 1; }
	tc qdisc show dev vxlan_sys_4789 ingress
	rules vxlan_sys_4789 | tee "$OUT/rules-vxlan.txt"
	grep -q 'tunnel_key.* in_hw ' "$OUT/rules-vxlan.txt" && { echo "a decap rule in_hw"; return 1; }
	grep -q 'tunnel_key.* not_in_hw sw_pkts=[1-9]' "$OUT/rules-vxlan.txt" || { echo "no decap rule not_in_hw with software hits"; return 1; }
	echo "decap rules on vxlan_sys_4789 not_in_hw, run by tc in software (no indirect block in netdevsim)"
}
check ts_decap_in_sw decap_in_sw
validate_offload() {
	V validate -o json --allow-skip --offload >"$OUT/offload.json" 2>"$OUT/offload.err"
	jq -r '.groups[0].checks[] | select(.name == "offload") | "\(.verdict) \(.detail)"' "$OUT/offload.json" | cut -c1-300
	jq -r '.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.packets > 0) |
		"\(.in_port) packets=\(.packets) where=\(.where) dp=\(.dp) offloaded=\(.offloaded) \(.reasons // [] | join("; "))"' "$OUT/offload.json" | cut -c1-300
	# The flows from the port are in hardware; the decap flows are not, and
	# validate gives the decap reason.
	jq -e --arg p "$N1" '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.in_port == $p and .packets > 0)] |
		length > 0 and all(.where == "hardware")' "$OUT/offload.json" >/dev/null || { echo "a flow from $N1 not in hardware"; return 1; }
	jq -e '.groups[0].checks[] | select(.name == "offload") | .verdict == "fail"' "$OUT/offload.json" >/dev/null || return 1
	jq -e '[.groups[0].checks[] | select(.name == "offload") | .data.flows[] | select(.in_port == "vxlan_sys_4789" and .packets > 0)] |
		length > 0 and all(.where != "hardware" and (.reasons | join(" ") | test("decap on vxlan_sys_4789: no tc rule of it in hardware")))' "$OUT/offload.json" >/dev/null
}
check ts_validate_offload validate_offload

ovs-vsctl del-port br-vf "$N1"

step "TS: down"
down() {
	V down || return 1
	! ip link show bond0.30 >/dev/null 2>&1 || { echo "bond0.30 left"; return 1; }
	! ip link show bond0 >/dev/null 2>&1 || { echo "bond0 left"; return 1; }
	! ovs-vsctl br-exists br-vf || { echo "br-vf left"; return 1; }
	echo "bond0, bond0.30 and br-vf gone"
}
check ts_down down
exit 0
