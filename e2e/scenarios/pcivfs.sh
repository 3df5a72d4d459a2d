#!/bin/bash
# Scenario B: real PCI VFs on an emulated Intel 82576 (igb, no devlink
# eswitch: a legacy-mode group). vflag up creates the VFs with
# sriov_drivers_autoprobe honoured, sets a VF MAC through the PF, brings the
# PF up and attaches the VF to a libvirt domain; the domain starts (libvirt
# moves the VF to vfio-pci); down refuses while the domain holds the VF,
# then, once it is stopped, detaches and removes the VFs. Then the legacy
# VF policy through the PF on VFs that exist before up: trust, spoofchk,
# vlan+qos and max_tx_rate read back from `ip link show $PF`, a change of
# one setting changes one step, link_state (igb has no
# ndo_set_vf_link_state) fails with vflag's error and rolls back, and down
# restores the values read before up. Last, a VF pool (issue 23): the
# group's libvirt hostdev network, two domains taking VFs from it with their
# portgroups' VLANs, a third refused, down refused while they run.
#
# MACHINE: igb
# TIMEOUT: 300
# EXPECT: b_pf b_up b_virtfn_links b_autoprobe_honoured b_vf_mac b_pf_up b_attach_xml b_status
# EXPECT: b_second_up_no_change b_domain_starts b_vf_on_vfio b_vf_mac_running
# EXPECT: b_down_refuses b_down_refused_no_change b_down b_vfs_removed b_xml_clean b_autoprobe_restored
# EXPECT: b_pol_up b_pol_readback b_pol_rate b_pol_status b_pol_validate b_pol_no_change b_pol_change_one
# EXPECT: b_pol_link_state_error b_pol_rolled_back b_pol_down_restores
# EXPECT: p_up p_net_active p_net_pool p_domains_start p_vlans p_hook_sees_vf p_status p_second_up_no_change
# EXPECT: p_third_refused p_down_refused p_down
. "$(dirname "$0")/lib.sh"

igb_pf
expect_match b_pf '^eth' echo "$PF"
# A qemu hook that keeps what libvirt gives it (the pool part checks what a
# domain on a hostdev network shows the hook at "start begin").
mkdir -p /etc/libvirt/hooks
cat >/etc/libvirt/hooks/qemu <<'EOF'
#!/bin/sh
cat >"/tmp/qemu-hook-$1-$2-$3.xml"
EOF
chmod 755 /etc/libvirt/hooks/qemu
libvirt_start || exit 1
define_domain vm1
cat >/root/vflag.yaml <<EOF
libvirt: qemu:///system
groups:
  - name: igb0
    eswitch: legacy
    pfs: ["$PCI"]
    numvfs: 2
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:0b:00:00"}
    attachments:
      - {domain: vm1, pf: 0, vf: 0}
EOF
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

step "vflag up"
check b_up V up
virtfn() { for i in 0 1; do test -L "$PFDIR/virtfn$i" || return 1; done; echo "virtfn0 -> $(readlink "$PFDIR/virtfn0"), virtfn1 -> $(readlink "$PFDIR/virtfn1")"; }
check b_virtfn_links virtfn
VF0=$(basename "$(readlink "$PFDIR/virtfn0")")
VF1=$(basename "$(readlink "$PFDIR/virtfn1")")
# Autoprobe honoured: set to 0 before the VFs existed, so igbvf (loaded)
# never probed them; unbinding afterwards would leave the same sysfs state,
# so the kernel log is the witness.
unbound() {
	for i in 0 1; do ! test -e "$PFDIR/virtfn$i/driver" || { echo "virtfn$i bound to $(basename "$(readlink "$PFDIR/virtfn$i/driver")")"; return 1; }; done
	[ "$(cat "$PFDIR/sriov_drivers_autoprobe")" = 0 ] || { echo "sriov_drivers_autoprobe is $(cat "$PFDIR/sriov_drivers_autoprobe")"; return 1; }
	if dmesg | grep -E "igbvf $VF0|igbvf $VF1"; then echo "igbvf probed a VF"; return 1; fi
	echo "no VF bound, never probed by igbvf (sriov_drivers_autoprobe=0)"
}
check b_autoprobe_honoured unbound
expect_match b_vf_mac 'vf 0 .*52:54:00:0b:00:00' ip link show "$PF"
expect_match b_pf_up 'state UP|,UP' ip link show "$PF"
hostdev_xml() { virsh dumpxml --inactive vm1 | grep -A6 "<interface type='hostdev'"; }
expect_match b_attach_xml "52:54:00:0b:00:00" hostdev_xml
V status -o json >"$OUT/status.json"
expect b_status vm1 jq -r ".groups[0].vfs[] | select(.pci == \"$VF0\") | .domain" "$OUT/status.json"
second_up() { V up --detailed-exit-codes; }
expect_match b_second_up_no_change 'no changes' second_up

step "the domain starts with the VF"
check b_domain_starts virsh start vm1
expect b_vf_on_vfio vfio-pci sh -c "basename \$(readlink $PFDIR/virtfn0/driver)"
expect_match b_vf_mac_running 'vf 0 .*52:54:00:0b:00:00' ip link show "$PF"

step "down while the domain holds the VF"
refuses() { out=$(V down 2>&1); rc=$?; echo "$out"; [ $rc = 1 ] && echo "$out" | grep -q "held by running domain vm1"; }
check b_down_refuses refuses
unchanged() { [ "$(cat "$PFDIR/sriov_numvfs")" = 2 ] && virsh dumpxml --inactive vm1 | grep -q "<interface type='hostdev'" && echo "VFs and attachment still in place"; }
check b_down_refused_no_change unchanged

step "down after the domain stopped"
virsh destroy vm1
check b_down V down
expect b_vfs_removed 0 cat "$PFDIR/sriov_numvfs"
no_hostdev() { ! virsh dumpxml --inactive vm1 | grep -q hostdev && echo "no hostdev in vm1"; }
check b_xml_clean no_hostdev
expect b_autoprobe_restored 1 cat "$PFDIR/sriov_drivers_autoprobe"

step "VF policy through the PF (VFs made before up)"
# The VFs exist before up, so that down has non-vflag values to restore
# (igb's: spoof checking on, trust off). The PF is down: vflag sets it up
# (link.up) just before the policy, and igb takes max_tx_rate only once it
# knows the link speed (igb_ndo_set_vf_bw: EINVAL below 1000 Mb/s, and
# the speed is 0 until the watchdog sees the link): vflag waits for it.
echo "$PF $(cat "/sys/class/net/$PF/operstate")"
echo 2 >"$PFDIR/sriov_numvfs"
vflines() { ip link show "$PF" | grep -E '^ +vf [0-9]' | sed -E 's/link\/ether [0-9a-f:]+ (brd [0-9a-f:]+,? ?)?//'; }
BEFORE=$(vflines)
printf 'before up:\n%s\n' "$BEFORE"
pol() { # pol EXTRA: the policy config, VF 1 with EXTRA
	cat >/root/pol.yaml <<EOF
libvirt: qemu:///system
groups:
  - name: igb0
    eswitch: legacy
    pfs: ["$PCI"]
    numvfs: 2
    vfs:
      - {pf: 0, vf: 1, spoofchk: false, vlan: 100, qos: 3$1}
EOF
}
P() { "$VFLAG" --config /root/pol.yaml --state-dir /root/state-pol "$@"; }
pol ", trust: true, max_tx_rate: 100"
# If QEMU's igb link were not at 1000 Mb/s the kernel would refuse the
# rate (EINVAL): then vflag's error must say so, and the rest runs without it.
RATE=100
pol_up() {
	out=$(P up 2>&1); rc=$?; echo "$out"
	[ $rc = 0 ] && return 0
	echo "$out" | grep -q "refused the VF setting min_tx_rate/max_tx_rate" || return 1
	echo "igb refused the rate (link not at 1000 Mb/s): vflag's error is the clear one; again without it"
	RATE=refused
	pol ", trust: true"
	P up
}
check b_pol_up pol_up
vf1() { ip link show "$PF" | grep -E '^ +vf 1 '; }
readback() { vf1 | grep -E 'vlan 100, qos 3' | grep -E 'spoof checking off' | grep -E 'trust on'; }
check b_pol_readback readback
rate() {
	if [ "$RATE" = refused ]; then
		echo "refused by igb with vflag's clear error (see b_pol_up) at link speed $(cat "/sys/class/net/$PF/speed")"
		[ "$(cat "/sys/class/net/$PF/speed")" != 1000 ]
		return
	fi
	vf1 | grep -E 'max_tx_rate 100Mbps|tx rate 100 \(Mbps\)'
}
check b_pol_rate rate
P status -o json >"$OUT/pol-status.json"
expect b_pol_status "true false 100 3" jq -r '.groups[0].vfs[] | select(.index == 1) | .policy | "\(.trust) \(.spoofchk) \(.vlan) \(.qos)"' "$OUT/pol-status.json"
pol_validate() { P validate -o json | jq -e '.groups[0].checks[] | select(.name | endswith("/1/policy")) | select(.verdict == "pass") | .detail'; }
check b_pol_validate pol_validate
pol_again() { P up --detailed-exit-codes; }
expect_match b_pol_no_change 'no changes' pol_again
if [ "$RATE" = refused ]; then pol ", trust: false"; else pol ", trust: false, max_tx_rate: 100"; fi
one_step() {
	P up -o json >"$OUT/pol-change.json" || return 1
	ids=$(jq -r '[.steps[] | select(.changed) | .id] | join(" ")' "$OUT/pol-change.json")
	echo "changed: $ids; $(vf1)"
	[ "$ids" = "sriov.vftrust/$PF/1" ] && vf1 | grep -q 'trust off'
}
check b_pol_change_one one_step
AFTER_CHANGE=$(vflines)
if [ "$RATE" = refused ]; then pol ", trust: false, link_state: enable"; else pol ", trust: false, max_tx_rate: 100, link_state: enable"; fi
ls_error() {
	out=$(P up 2>&1); rc=$?; echo "$out"
	[ $rc != 0 ] && echo "$out" | grep -q "$PF vf 1: the PF's driver igb does not support the VF setting link_state (EOPNOTSUPP"
}
check b_pol_link_state_error ls_error
rolled_back() { [ "$(vflines)" = "$AFTER_CHANGE" ] && echo "VF lines as before the failed up: $(vf1)"; }
check b_pol_rolled_back rolled_back
pol ""
down_restores() {
	P down || return 1
	now=$(vflines)
	printf 'after down:\n%s\n' "$now"
	[ "$now" = "$BEFORE" ]
}
check b_pol_down_restores down_restores
echo 0 >"$PFDIR/sriov_numvfs"

step "VF pool: a libvirt hostdev network per group"
# VF 2 is the host's (igbvf): the pool is VFs 0 and 1. Two domains ask the
# network for a VF (portgroup t200, and none: the default t100); libvirt
# picks a free VF for each and, in a legacy group, puts the portgroup's
# VLAN on it through the PF. A third finds the pool empty.
cat >/root/pool.yaml <<EOF
libvirt: qemu:///system
groups:
  - name: igb0
    eswitch: legacy
    pfs: ["$PCI"]
    numvfs: 3
    vfs:
      - {pf: 0, vf: 2, driver: igbvf}
    network:
      portgroups:
        - {name: t100, vlan: 100, default: true}
        - {name: t200, vlan: 200}
EOF
PV() { "$VFLAG" --config /root/pool.yaml --state-dir /root/state-pool "$@"; }
netdom() { # netdom NAME MAC [PORTGROUP]
	define_domain "$1" "<interface type='network'><mac address='$2'/><source network='vflag-igb0'${3:+ portgroup='$3'}/></interface>"
}
netdom vmA 52:54:00:0c:00:0a t200
netdom vmB 52:54:00:0c:00:0b
netdom vmC 52:54:00:0c:00:0c
check p_up PV up
net_state() { i=$(virsh net-info vflag-igb0) || return 1; echo "$i"; echo "$i" | grep -Eq '^Active: +yes' && echo "$i" | grep -Eq '^Autostart: +yes'; }
check p_net_active net_state
pool_addrs() {
	x=$(virsh net-dumpxml vflag-igb0) || return 1
	want=""
	for i in 0 1; do
		a=$(basename "$(readlink "$PFDIR/virtfn$i")")
		want="$want $a"
		printf '%s' "$x" | grep -q "bus='0x${a:5:2}' slot='0x${a:8:2}' function='0x${a:11:1}'" || { echo "VF $a not in the pool:"; echo "$x"; return 1; }
	done
	n=$(printf '%s' "$x" | grep -c "<address type='pci'")
	echo "pool:$want ($n addresses)"
	[ "$n" = 2 ]
}
check p_net_pool pool_addrs
check p_domains_start sh -c 'virsh start vmA && virsh start vmB'
vlans() {
	l=$(ip link show "$PF" | grep -E '^ +vf [0-9]')
	echo "$l"
	a=$(echo "$l" | grep -E 'vlan 200' | awk '{print $2}')
	b=$(echo "$l" | grep -E 'vlan 100' | awk '{print $2}')
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] && [ "$a" != 2 ] && [ "$b" != 2 ] && echo "vmA on VF $a (vlan 200), vmB on VF $b (vlan 100)"
}
check p_vlans vlans
# The qemu hook (and its boot gate) sees the VF a port took: at "start
# begin" libvirt's domain XML shows the interface as the hostdev it became
# (at "prepare begin" no VF is allocated yet).
hook_sees_vf() {
	x=$(cat /tmp/qemu-hook-vmA-start-begin.xml) || return 1
	printf '%s\n' "$x" | grep -A4 "<interface type='hostdev'" | grep -E "<address type='pci'" || { printf '%s\n' "$x" | grep -A6 '<interface'; return 1; }
	! grep -q "<interface type='hostdev'" /tmp/qemu-hook-vmA-prepare-begin.xml && echo "prepare begin: no VF yet"
}
check p_hook_sees_vf hook_sees_vf
PV status -o json >"$OUT/pool-status.json"
expect p_status "2 2" jq -r '.groups[0].network | "\(.vfs | length) \([.vfs[] | select(.domain)] | length)"' "$OUT/pool-status.json"
pool_again() { PV up --detailed-exit-codes; }
expect_match p_second_up_no_change 'no changes' pool_again
third() { out=$(virsh start vmC 2>&1); rc=$?; echo "$out"; [ $rc != 0 ]; }
check p_third_refused third
pool_down_refused() { out=$(PV down 2>&1); rc=$?; echo "$out"; [ $rc = 1 ] && virsh net-info vflag-igb0 >/dev/null && [ "$(cat "$PFDIR/sriov_numvfs")" = 3 ]; }
check p_down_refused pool_down_refused
virsh destroy vmA
virsh destroy vmB
pool_down() { PV down || return 1; ! virsh net-info vflag-igb0 2>/dev/null && echo "network gone; numvfs $(cat "$PFDIR/sriov_numvfs")" && [ "$(cat "$PFDIR/sriov_numvfs")" = 0 ]; }
check p_down pool_down
exit 0
