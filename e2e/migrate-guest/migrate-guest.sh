#!/bin/bash
# make e2e-migrate-guest (e2e/migrate-guest/run.sh): the live migration of
# e2e/scenarios/migrate.sh with a guest OS in the domain, its traffic
# measured from the host side. Not in make check: the domain is a TCG guest
# inside the TCG bed.
#
# The bed as in migrate.sh: two igb PFs on one emulated wire (QEMU hub 0),
# host A owns the first, host B the second, each a libvirtd in its own mount
# namespace with vflag's hook; A's config attaches VF 0 to the domain as a
# migratable attachment (vlan 42, standby_bridge br-mig), so `vflag up`
# makes the teaming pair. br-mig is the hosts' bridge: its uplink is a
# virtio NIC on the same wire (hub 0), and the measuring end is an internal
# port of br-mig ("pinger", 192.168.51.1, tag 42). So the VF's frames reach
# the pinger through the NIC's legacy eswitch, the wire and the uplink
# (tagged 42), the standby's through br-mig alone.
#
# The domain boots the bed's kernel with an initramfs (run.sh builds it:
# busybox, virtio_net, net_failover, igbvf; nested-init) that puts
# 192.168.51.2 on the failover master and prints its slaves (driver,
# packet counters) every 5 s on the serial console, a file both hosts
# append to. The scenario measures the nested boot (g_boot; it stops there
# when the guest is not up within BOOT_LIMIT seconds), pings the guest every
# 0.2 s from before the migration to after it, and checks: the VF plugged
# on A (the guest has an igbvf slave; validate's teaming check says
# plugged), the standby's OVS port quiet while the VF carries the traffic,
# the migration A -> B, the VF plugged again on B and the standby's port
# quiet there. results.txt in $OUT has the numbers: boot time, migration
# time, replies lost and the longest gap between replies before, during and
# after the migration.
#
# MACHINE: igb
# QEMU_ARGS: -netdev hubport,id=n1,hubid=0 -device igb,netdev=n1 -netdev hubport,id=n2,hubid=0 -device virtio-net-pci,netdev=n2,mac=52:54:00:51:ff:01
# TIMEOUT: 3300
# EXPECT: g_pfs g_ovs g_hosts g_setup_b g_define g_setup_a g_start_a g_boot
# EXPECT: g_plugged_a g_ping_before g_standby_quiet_a g_migrate_ab g_on_b g_plugged_b g_ping_after g_standby_quiet_b g_validate_b
. "$(dirname "$0")/lib.sh"

MAC=52:54:00:51:00:01
UPLINK_MAC=52:54:00:51:ff:01
VLAN=42
DOM=mig
GUEST_IP=192.168.51.2
BOOT_LIMIT=${BOOT_LIMIT:-900}
N=/var/lib/nested
CONSOLE=$N/console.log
RES=$OUT/results.txt
: >"$RES"
res() { echo "$*" | tee -a "$RES"; }

step "two igb PFs, one per host; br-mig with its uplink and the pinger"
modprobe igb && modprobe igbvf && modprobe vfio-pci && modprobe tun && modprobe virtio_net
mapfile -t PFDIRS < <(pci_by_id 8086:10c9)
pfs() {
	[ "${#PFDIRS[@]}" = 2 ] || { echo "want 2 igb PFs, have ${#PFDIRS[@]}"; return 1; }
	wait_for 10 test -d "${PFDIRS[0]}/net" && wait_for 10 test -d "${PFDIRS[1]}/net" || return 1
	PCI_A=$(basename "${PFDIRS[0]}") PCI_B=$(basename "${PFDIRS[1]}")
	PF_A=$(ls "${PFDIRS[0]}/net") PF_B=$(ls "${PFDIRS[1]}/net")
	echo "host A: $PCI_A ($PF_A), host B: $PCI_B ($PF_B)"
}
check g_pfs pfs || exit 0
pfs >/dev/null
ip link set "$PF_A" up && ip link set "$PF_B" up
uplink_of() { grep -l "^$UPLINK_MAC$" /sys/class/net/*/address | head -n 1 | cut -d/ -f5; }
bridge() {
	local up
	wait_for 10 test -n "$(uplink_of)" || { echo "no netdev with $UPLINK_MAC"; return 1; }
	up=$(uplink_of)
	ovs_start && ovs-vsctl add-br br-mig && ovs-vsctl add-port br-mig "$up" &&
		ovs-vsctl add-port br-mig pinger tag=$VLAN -- set interface pinger type=internal || return 1
	ip link set "$up" up && ip link set pinger up && ip addr add 192.168.51.1/24 dev pinger || return 1
	echo "br-mig: uplink $up (hub 0), pinger 192.168.51.1 tag $VLAN"
}
check g_ovs bridge || exit 0

step "two libvirt hosts"
uri() { echo "qemu+unix:///system?socket=/hosts/$1/run/libvirt-sock"; }
VA() { virsh -c "$(uri a)" "$@"; }
VB() { virsh -c "$(uri b)" "$@"; }
save_logs() {
	local h
	for h in a b; do
		cp /hosts/$h/log/libvirtd.log "$OUT/libvirtd-$h.log" 2>/dev/null
		cp /hosts/$h/log/qemu/$DOM.log "$OUT/qemu-$h.log" 2>/dev/null
	done
	cp "$CONSOLE" "$OUT/nested-console.log" 2>/dev/null
	cp /tmp/ping.log "$OUT/ping.log" 2>/dev/null
}
trap save_logs EXIT
# host_start H UUID: as in migrate.sh (libvirtd and virtlogd in a mount
# namespace over copies of the image's libvirt directories), with a hook
# that only makes libvirtd look for qemu hooks (vflag's comes later).
host_start() {
	local h=/hosts/$1 d
	mkdir -p /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt
	for d in run lib etc log; do mkdir -p "$h/$d"; done
	cp -a /etc/libvirt/. "$h/etc/"
	cp -a /var/lib/libvirt/. "$h/lib/"
	mkdir -p "$h/etc/hooks/qemu.d" "$h/log/qemu"
	printf '#!/bin/sh\ncat >/dev/null\nexit 0\n' >"$h/etc/hooks/qemu.d/zz-noop"
	chmod 755 "$h/etc/hooks/qemu.d/zz-noop"
	printf 'host_uuid = "%s"\nlog_outputs = "3:file:/var/log/libvirt/libvirtd.log"\n' "$2" >>"$h/etc/libvirtd.conf"
	unshare --mount --propagation private sh -ec '
		h=$1
		mount --bind "$h/run" /run/libvirt
		mount --bind "$h/lib" /var/lib/libvirt
		mount --bind "$h/etc" /etc/libvirt
		mount --bind "$h/log" /var/log/libvirt
		virtlogd -d -p "$h/run/virtlogd.pid"
		libvirtd -d -p "$h/run/libvirtd.pid"' sh "$h" || return 1
}
hosts() {
	host_start a a0a0a0a0-5151-4a00-8000-00000000000a && wait_for 90 VA version &&
		host_start b b0b0b0b0-5151-4b00-8000-00000000000b && wait_for 60 VB version || return 1
	echo "libvirtd A pid $(cat /hosts/a/run/libvirtd.pid), B pid $(cat /hosts/b/run/libvirtd.pid)"
}
check g_hosts hosts || exit 0

step "vflag at both ends; the domain"
HOOK_BIN=$(dirname "$VFLAG")/vflag-hook
[ -f "$SHARE/vflag-hook" ] && install -m 755 "$SHARE/vflag-hook" "$HOOK_BIN"
for h in a b; do
	pci=$PCI_A
	[ $h = a ] || pci=$PCI_B
	cat >/hosts/$h/vflag.yaml <<CFG
libvirt: qemu:///system
groups:
  - name: igb0
    eswitch: legacy
    pfs: ["$pci"]
    numvfs: 2
    vfs:
      - {pf: 0, vf: 1, driver: igbvf}
CFG
done
cat >>/hosts/a/vflag.yaml <<CFG
      - {pf: 0, vf: 0, vlan: $VLAN}
    standby_bridge: br-mig
    attachments:
      - {domain: $DOM, pf: 0, vf: 0, mac: "$MAC", migratable: true}
CFG
V() {
	local h=$1
	shift
	nsenter -t "$(cat /hosts/$h/run/libvirtd.pid)" -m -- "$VFLAG" --config /hosts/$h/vflag.yaml --state-dir /hosts/$h/state "$@"
}
setup() { V "$1" install-hook && V "$1" up; }
check g_setup_b setup b || exit 0
mkdir -p $N
chmod 755 $N
cp "$SHARE/extra/vmlinux" "$SHARE/extra/initrd.gz" $N/
: >$CONSOLE
cat >/root/$DOM.xml <<EOF
<domain type='qemu'>
  <name>$DOM</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>$N/vmlinux</kernel>
    <initrd>$N/initrd.gz</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 nested.ip=$GUEST_IP/24 nested.mac=$MAC</cmdline>
  </os>
  <features><acpi/><apic/></features>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
    <serial type='file'><source path='$CONSOLE' append='on'/><target port='0'/></serial>
  </devices>
</domain>
EOF
check g_define VA define /root/$DOM.xml
check g_setup_a setup a || exit 0
ip link set "$PF_A" vf 0 mac 00:00:00:00:00:00
ip link set "$PF_B" vf 0 mac 00:00:00:00:00:00

step "the nested guest boots on A"
T_START=$(date +%s.%N)
check g_start_a VA start $DOM
booted() {
	local t
	wait_for "$BOOT_LIMIT" grep -q "NESTED: ready" $CONSOLE
	t=$(awk "BEGIN{printf \"%.0f\", $(date +%s.%N) - $T_START}")
	if grep -q "NESTED: ready" $CONSOLE; then
		res "nested boot: ${t} s from virsh start to the guest's address up ($(grep -m1 'NESTED: ready' $CONSOLE))"
		return 0
	fi
	res "nested boot: not up after ${t} s (BOOT_LIMIT $BOOT_LIMIT); console so far: $(tail -c 300 $CONSOLE | tr '\n' ' ')"
	return 1
}
check g_boot booted || exit 0

# slaves: the guest's last report of its failover master's slaves.
slaves() { grep "NESTED: slaves" $CONSOLE | tail -n 1; }
# plugged H: the guest reports an igbvf slave (the VF plugged) and H's
# validate says the VF is plugged.
plugged() {
	local since v
	# Reports from now on (the last one may be the source's, before the unplug).
	since=$(($(wc -l <$CONSOLE) + 1))
	wait_for 600 sh -c "tail -n +$since $CONSOLE | grep 'NESTED: slaves' | grep -q ':igbvf:'" || { slaves; echo "no igbvf slave in the guest"; return 1; }
	v=$(V "$1" validate 2>&1 | grep "teaming/$DOM")
	echo "$(slaves); $v"
	[ "$1" = b ] || echo "$v" | grep -q "VF plugged"
}
# standby_tx H: packets OVS sent to the domain's standby port on H.
standby_tx() {
	local tap
	tap=$(virsh -c "$(uri "$1")" domiflist $DOM | awk '$2 == "bridge" {print $1}')
	ovs-vsctl get interface "$tap" statistics:tx_packets
}
# quiet H: while the guest is pinged every 0.2 s, the standby's port on H
# gets at most 4 packets in 20 s (broadcasts): the VF carries the traffic.
quiet() {
	local a b
	a=$(standby_tx "$1") || return 1
	sleep 20
	b=$(standby_tx "$1") || return 1
	res "host $1: standby port tx_packets $a -> $b in 20 s while pinging"
	[ $((b - a)) -le 4 ]
}
check g_plugged_a plugged a
P0=$(date +%s.%N)
ping -D -i 0.2 $GUEST_IP >/tmp/ping.log 2>&1 &
PING=$!
sleep 30
replies() { grep -c "bytes from $GUEST_IP" /tmp/ping.log; }
check g_ping_before sh -c "[ \$(grep -c 'bytes from $GUEST_IP' /tmp/ping.log) -gt 0 ] && tail -n 2 /tmp/ping.log"
check g_standby_quiet_a quiet a

step "migrate A -> B while pinging"
M0=$(date +%s.%N)
check g_migrate_ab VA migrate --live --verbose $DOM "$(uri b)" tcp://127.0.0.1:49154
M1=$(date +%s.%N)
res "migration: $(awk "BEGIN{printf \"%.1f\", $M1 - $M0}") s (virsh migrate --live)"
check g_on_b sh -c "[ \"\$(virsh -c '$(uri b)' domstate $DOM)\" = running ] && echo running on B"
check g_plugged_b plugged b
PL=$(date +%s.%N)
res "VF plugged again on B $(awk "BEGIN{printf \"%.0f\", $PL - $M1}") s after the migration ended"
sleep 30
check g_ping_after sh -c "tail -n 2 /tmp/ping.log | grep 'bytes from $GUEST_IP'"
check g_standby_quiet_b quiet b
check g_validate_b V b validate
P1=$(date +%s.%N)
kill -INT $PING
wait $PING 2>/dev/null
# window FROM TO NAME: replies expected at 5 per second, received, and the
# longest gap between replies in [FROM, TO).
window() {
	awk -v a="$1" -v b="$2" -v n="$3" '
		/bytes from/ { t = substr($1, 2, length($1) - 2) + 0; if (t >= a && t < b) { c++; if (p) { g = t - p; if (g > m) m = g }; p = t } }
		END { e = int((b - a) / 0.2); printf "%s: %.1f s, %d of ~%d replies (%.0f%% lost), longest gap between replies %.1f s\n", n, b - a, c, e, (e > c ? (e - c) * 100 / e : 0), m }' /tmp/ping.log
}
res "$(window "$P0" "$M0" "before")"
res "$(window "$M0" "$M1" "during")"
res "$(window "$M1" "$P1" "after")"
res "$(window "$P0" "$P1" "all")"
res "$(tail -n 3 /tmp/ping.log | tr '\n' ' ')"
VB destroy $DOM >/dev/null
exit 0
