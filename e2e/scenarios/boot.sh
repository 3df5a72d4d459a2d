#!/bin/bash
# The boot path every production host runs, booted: the guest's own systemd
# is PID 1. Boot 1 installs the .deb of `make package` with dpkg, writes
# /etc/vflag/vflag.yaml (the two ports of a netdevsim device, 802.3ad, 4 VFs,
# a bridge), runs `vflag install`, enables Open vSwitch and NetworkManager
# and a unit that creates the NIC 5 s after udev starts, with no ordering
# against vflag (a slow mlx5 probe), then reboots. After boots 2 and 3,
# with nobody running vflag by hand, the checks below must hold.
# Kernel command line boot.break=pfwait,nm,udevname (VFLAG_E2E_APPEND)
# removes those product pieces in boot 1, to show the checks that cover them
# fail (docs/host-integration.md, "Boot").
#
# MACHINE: default
# INIT: systemd
# BOOTS: 3
# DEB: yes
# TIMEOUT: 1200
# EXPECT: boot_deb boot_install boot_install_nm_rules
# EXPECT: boot_units_ok boot_pre_waited_for_pfs boot_eswitch boot_bond_slaves boot_bridge_ports boot_ofports boot_hw_offload
# EXPECT: boot_rep_names boot_pf_names boot_validate boot_up_no_change boot_status_clean
# EXPECT: boot_nm_unmanaged boot_nm_no_connection boot_nm_ingress_qdisc boot_nm_foreign_managed
# EXPECT: boot_to_ready boot_fail_unit boot_fail_status boot_fail_recovered boot_uninstall
. "$(dirname "$0")/lib.sh"

V=/usr/bin/vflag
PF1=eni10np1 PF2=eni10np2 FOREIGN=eni20np1
BREAK=$(sed -n 's/.*boot\.break=\([^ ]*\).*/\1/p' /proc/cmdline)
broken() { case ",$BREAK," in *",$1,"*) return 0 ;; esac; return 1; }

if [ "$BOOT" = 1 ]; then
	step "boot 1: install the package, configure, install the units"
	check boot_deb dpkg -i "$SHARE/vflag.deb"
	# A host's own preparation (vflag doctor says it): bonding must not
	# make a bond0 of its own when it loads.
	echo 'options bonding max_bonds=0' >/etc/modprobe.d/vflag-bonding.conf
	# The NIC, now for vflag install (udev rules from the host as it is);
	# at the next boots the late unit below makes it.
	modprobe netdevsim
	echo "10 2" >/sys/bus/netdevsim/new_device
	echo "20 1" >/sys/bus/netdevsim/new_device
	udevadm settle
	wait_for 10 test -e /sys/class/net/$PF2
	ip -br link
	mkdir -p /etc/vflag
	cat >/etc/vflag/vflag.yaml <<-EOF2
		lag_timeout: 10s
		pf_wait: 60s
		groups:
		  - name: lag0
		    pfs: [$PF1, $PF2]
		    numvfs: 4
		    bond:
		      name: bond0
		      mode: 802.3ad
		      miimon: 100
		      lacp_rate: fast
		    ovs:
		      bridge: br-vf
	EOF2
	broken pfwait && sed -i 's/^pf_wait: .*/pf_wait: 1ms/' /etc/vflag/vflag.yaml
	check boot_install $V install
	expect_match boot_install_nm_rules 'KERNELS=="netdevsim10", ENV\{NM_UNMANAGED\}="1"' cat /etc/udev/rules.d/69-vflag-nm-unmanaged.rules
	broken nm && rm -f /etc/udev/rules.d/69-vflag-nm-unmanaged.rules
	broken udevname && { rm -f /usr/lib/udev/rules.d/71-vflag-representors.rules; sed -i '/phys_port_name}=="pf[0-9]*vf/d' /etc/udev/rules.d/70-vflag.rules; }
	cat /etc/udev/rules.d/70-vflag.rules /etc/udev/rules.d/69-vflag-nm-unmanaged.rules 2>/dev/null
	# The late NIC: no ordering against vflag; it appears 3 s after vflag-pre
	# logged that it waits for the PFs (a slow mlx5 probe). Under TCG on a
	# loaded machine vflag-pre may start a minute after udev, and the binary
	# take seconds to load, so a fixed delay would not be late: the unit
	# watches vflag-pre's journal (at most 300 s), or its end. ($$: a
	# literal $ for the shell, not systemd's variable expansion.)
	cat >/etc/systemd/system/nic-late.service <<-'EOF2'
		[Unit]
		Description=e2e: the NIC appears late (a slow mlx5 probe)
		DefaultDependencies=no
		After=systemd-udevd.service systemd-journald.service
		Wants=systemd-udevd.service
		[Service]
		Type=simple
		ExecStart=/bin/sh -c 'i=0; until journalctl -b -q --no-pager -u vflag-pre.service | grep -q "waiting for PFs" || [ "$$(systemctl show -p ActiveState --value vflag-pre.service)" = failed ] || [ $$i -ge 600 ]; do sleep 0.5; i=$$((i+1)); done; echo "vflag-pre: $$(systemctl show -p ActiveState --value vflag-pre.service)"; sleep 3; modprobe netdevsim; echo "10 2" >/sys/bus/netdevsim/new_device; echo "20 1" >/sys/bus/netdevsim/new_device; echo NIC created'
		[Install]
		WantedBy=sysinit.target
	EOF2
	systemctl enable nic-late.service openvswitch-switch.service NetworkManager.service 2>&1
	systemctl daemon-reload
	# The host's own network: a static NetworkManager profile on the foreign
	# port (no DHCP server here: the automatic "Wired connection" would hold
	# NM's startup, and with it network-online, for its DHCP timeout). NM's
	# automatic profiles stay on: a device of vflag's that NM managed would
	# get one (boot_nm_no_connection).
	mkdir -p /etc/NetworkManager/system-connections
	cat >/etc/NetworkManager/system-connections/foreign.nmconnection <<-EOF2
		[connection]
		id=foreign
		type=ethernet
		interface-name=$FOREIGN
		[ipv4]
		method=manual
		address1=192.0.2.20/24
		[ipv6]
		method=ignore
	EOF2
	chmod 600 /etc/NetworkManager/system-connections/foreign.nmconnection
	exit 100 # reboot
fi

step "boot $BOOT: wait for the boot to finish"
# Bounded: a boot that never finishes (a job waiting forever) still gets
# its checks, and the jobs left say what waits.
timeout 300 systemctl is-system-running --wait || { echo "boot not finished after 300 s:"; systemctl --no-pager list-jobs; }
systemctl --no-pager list-units --failed
for u in vflag-pre.service vflag.service; do
	systemctl --no-pager status $u | head -n 12
	journalctl -b --no-pager -u $u | tail -n 20
done
check boot_units_ok units_ok vflag-pre.service vflag.service
expect_match boot_pre_waited_for_pfs 'waiting for PFs to appear' journalctl -b --no-pager -u vflag-pre.service
expect_match boot_eswitch 'mode switchdev' devlink dev eswitch show netdevsim/netdevsim10
slaves() { s=$(cat /sys/class/net/bond0/bonding/slaves) && echo "$s" && [[ " $s " == *" $PF1 "* && " $s " == *" $PF2 "* ]]; }
check boot_bond_slaves slaves
bridge_ports() {
	local p want="bond0 ${PF1}_0 ${PF1}_1 ${PF1}_2 ${PF1}_3" ports
	ports=$(ovs-vsctl list-ports br-vf | tr '\n' ' ')
	echo "br-vf: $ports"
	for p in $want; do [[ " $ports " == *" $p "* ]] || { echo "missing $p"; return 1; }; done
}
check boot_bridge_ports bridge_ports
ofports() {
	local p o r=0 n=0
	for p in $(ovs-vsctl list-ports br-vf); do
		o=$(ovs-vsctl get Interface "$p" ofport)
		echo "$p ofport $o"
		[ "$o" -gt 0 ] 2>/dev/null || r=1
		n=$((n + 1))
	done
	[ $n -ge 5 ] || { echo "$n ports, want the bond and 4 representors"; return 1; }
	return $r
}
check boot_ofports ofports
expect boot_hw_offload '"true"' ovs-vsctl get Open_vSwitch . other_config:hw-offload
rep_names() {
	local n ppn r=0 c=0
	for n in $(ls /sys/bus/netdevsim/devices/netdevsim10/net); do
		ppn=$(cat /sys/class/net/$n/phys_port_name)
		case $ppn in pf0vf*) echo "$n ($ppn)"; c=$((c + 1)); [ "$n" = "${PF1}_${ppn#pf0vf}" ] || r=1 ;; esac
	done
	[ $c = 4 ] || { echo "$c representors, want 4"; return 1; }
	return $r
}
check boot_rep_names rep_names
pf_names() {
	local n ppn
	for n in $(ls /sys/bus/netdevsim/devices/netdevsim10/net); do
		ppn=$(cat /sys/class/net/$n/phys_port_name)
		case $ppn in p1 | p2) echo "$n ($ppn)"; [ "$n" = "eni10n$ppn" ] || return 1 ;; esac
	done
}
check boot_pf_names pf_names
validate() {
	local rc
	$V validate -o json >"$OUT/validate-boot$BOOT.json" 2>"$OUT/validate-boot$BOOT.err"
	rc=$?
	# netdevsim has no wire: no carrier on its ports (operstate unknown), no
	# LACP partner, and no mlx5 LAG state: those aside.
	jq -r '.groups[].checks[] | "\(.verdict) \(.name) \(.detail)"' "$OUT/validate-boot$BOOT.json"
	! jq -e '.groups[].checks[] | select(.verdict == "fail" and .name != "bond/lacp" and (.name | test("lag") | not)
		and ((.name | startswith("bond/slave/")) and (.detail | test("has no link")) | not))' "$OUT/validate-boot$BOOT.json" >/dev/null ||
		{ echo "validate exit $rc: a failure besides LACP/LAG"; return 1; }
	echo "validate exit $rc (LACP/LAG aside: no failure)"
}
check boot_validate validate
check boot_up_no_change $V up --detailed-exit-codes
status_clean() {
	$V status
	local p
	p=$($V status -o prometheus | grep '^vflag_group_problems')
	echo "$p"
	# status's problems are validate's failing static checks: netdevsim has
	# no wire (no carrier, no LACP partner, no mlx5 LAG state), as in
	# boot_validate; any other problem fails.
	$V status -o json | jq -r '.groups[].problems[]?' | grep -v -E '^bond/lacp: |^lag: |^bond/slave/[^:]*: .*has no link' | grep . && return 1
	return 0
}
check boot_status_clean status_clean

step "boot $BOOT: NetworkManager"
nmcli -t -f DEVICE,TYPE,STATE device
nm_unmanaged() {
	local d st r=0
	for d in $PF1 $PF2 bond0 ${PF1}_0 ${PF1}_1 ${PF1}_2 ${PF1}_3; do
		st=$(nmcli -t -f DEVICE,STATE device | awk -F: -v d=$d '$1 == d { print $2 }')
		echo "$d: ${st:-not listed} (udev NM_UNMANAGED=$(udevadm info -q property -p /sys/class/net/$d 2>/dev/null | sed -n 's/^NM_UNMANAGED=//p'))"
		[ "$st" = unmanaged ] || r=1
	done
	return $r
}
check boot_nm_unmanaged nm_unmanaged
nm_no_conn() {
	local c
	c=$(nmcli -t -f NAME,DEVICE connection show --active)
	echo "active: ${c:-none}"
	! printf '%s\n' "$c" | grep -Eq ":($PF1|$PF2|bond0|${PF1}_[0-9]+)$"
}
check boot_nm_no_connection nm_no_conn
ingress() {
	local d r=0
	for d in ${PF1}_0 ${PF1}_3 bond0; do
		q=$(tc qdisc show dev $d ingress)
		echo "$d: ${q:-no ingress qdisc}"
		[ -n "$q" ] || r=1
	done
	return $r
}
check boot_nm_ingress_qdisc ingress
expect_match boot_nm_foreign_managed "^$FOREIGN:(disconnected|connecting|connected|unavailable)" nmcli -t -f DEVICE,STATE device

step "boot $BOOT: boot to ready"
systemd-analyze
to_ready() {
	local pre0 pre1 v0 v1
	pre0=$(systemctl show -p ExecMainStartTimestampMonotonic --value vflag-pre.service)
	pre1=$(systemctl show -p ExecMainExitTimestampMonotonic --value vflag-pre.service)
	v0=$(systemctl show -p ExecMainStartTimestampMonotonic --value vflag.service)
	v1=$(systemctl show -p ExecMainExitTimestampMonotonic --value vflag.service)
	[ "${v1:-0}" -gt 0 ] || { echo "vflag.service never finished"; return 1; }
	nic=$(journalctl -b -o short-monotonic --no-pager -u nic-late.service | sed -n 's/^\[ *\([0-9.]*\)\].*Started.*/\1/p' | head -n1)
	awk -v a="$pre0" -v b="$pre1" -v c="$v0" -v d="$v1" -v boot="$BOOT" -v sa="$(systemd-analyze | head -n1)" 'BEGIN {
		printf "boot %d: kernel start to vflag.service finished %.1f s (vflag-pre %.1f-%.1f s, vflag %.1f-%.1f s); %s\n", boot, d/1e6, a/1e6, b/1e6, c/1e6, d/1e6, sa }' | tee -a "$OUT/boot-to-ready.txt"
}
check boot_to_ready to_ready

if [ "$BOOT" -lt "$MAXBOOTS" ]; then
	exit 100 # reboot: the same checks again
fi

step "boot $BOOT: a failed vflag.service is visible"
# A PF that never appears (pf_wait 3 s): the unit fails with the reason in
# its journal; with the config good again (the unit still failed), status
# and its metric count the failed unit; a restart with the good config
# brings the unit back.
cp /etc/vflag/vflag.yaml /root/vflag.good.yaml
sed -e "s/pfs: \[$PF1, $PF2\]/pfs: [$PF1, eni99np1]/" -e 's/^pf_wait: .*/pf_wait: 3s/' /root/vflag.good.yaml >/etc/vflag/vflag.yaml
unit_failed() {
	systemctl restart vflag.service && { echo "vflag.service started with a missing PF"; return 1; }
	local st
	st="$(systemctl show -p ActiveState --value vflag.service) $(systemctl show -p Result --value vflag.service)"
	echo "vflag.service: $st"
	[ "$st" = "failed exit-code" ] || return 1
	journalctl -b --no-pager -u vflag.service | grep 'eni99np1' | tail -n 2
	journalctl -b --no-pager -u vflag.service | grep -q 'groups\[0\].pfs\[1\].*eni99np1'
}
check boot_fail_unit unit_failed
cp /root/vflag.good.yaml /etc/vflag/vflag.yaml
fail_status() {
	local n
	$V status -o json | jq -r '.groups[].problems[]?' | grep 'boot: vflag.service (result exit-code) failed' || return 1
	n=$($V status -o prometheus | sed -n 's/^vflag_group_problems{group="lag0"} //p')
	echo "vflag_group_problems{group=\"lag0\"} $n"
	[ "${n:-0}" -ge 1 ]
}
check boot_fail_status fail_status
recovered() {
	systemctl restart vflag.service || return 1
	echo "vflag.service: $(systemctl show -p ActiveState --value vflag.service)"
	! $V status -o json | jq -r '.groups[].problems[]?' | grep 'boot: '
}
check boot_fail_recovered recovered

step "boot $BOOT: vflag uninstall removes the rules it wrote"
uninstall() {
	$V uninstall || return 1
	for f in /etc/udev/rules.d/69-vflag-nm-unmanaged.rules /etc/udev/rules.d/70-vflag.rules /etc/systemd/system/vflag.service; do
		[ ! -e $f ] || { echo "$f left"; return 1; }
	done
}
check boot_uninstall uninstall
exit 0
