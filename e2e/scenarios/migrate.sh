#!/bin/bash
# Live migration of a domain holding an SR-IOV VF, by libvirt teaming, between
# two "hosts" in one guest. Two emulated igb NICs (82576, real PCI VFs):
# host A owns the first PF, host B the second. Each host is a libvirtd (with
# its own virtlogd) in its own mount namespace, with its own /run/libvirt,
# /var/lib/libvirt, /etc/libvirt (hooks included) and /var/log/libvirt (bind
# mounts of /hosts/<h>/...) and a distinct host_uuid in libvirtd.conf (libvirt
# refuses a migration to the same host by that UUID); /var/cache/libvirt
# (QEMU's probed capabilities) is shared, so B does not probe QEMU again.
# Both share the guest's network namespace and one Open vSwitch (bridge
# br-mig holds both hosts' standby ports). Clients reach each daemon through
# its own socket, qemu+unix:///system?socket=/hosts/<h>/run/libvirt-sock;
# QEMU's migration stream goes over TCP on 127.0.0.1 (no TLS).
#
# Each host has its own vflag config (a legacy group igb0 on its PF: VF 0 for
# domains, VF 1 for the host's igbvf) and state dir in /hosts/<h>, and
# vflag's qemu hook in its own hooks dir; vflag runs in the host's mount
# namespace (nsenter). A probe hook after vflag's logs VF 0's MAC of both
# PFs at every event and keeps the XML vflag's hook hands on at "migrate
# begin".
#
# The domain: q35, no OS (it sits in SeaBIOS), defined on A without any
# interface; A's config attaches VF 0 to it as a migratable attachment
# (vlan 42 in vfs), with standby_bridge br-mig (the bed's igb group is
# legacy: it has no bridge of its own), so `vflag up` makes the teaming
# pair: a persistent virtio interface on br-mig (VLAN 42) and VF 0 as a
# transient hostdev interface with the same MAC and VLAN, with vflag's
# claim in <metadata> (v_pair_a checks the definition vflag wrote). libvirt
# puts the VF on a hotpluggable pcie-root-port. The guest never negotiates
# the standby feature, so QEMU keeps the VF hidden (never plugged) at both
# ends; libvirt still prepares each end's VF (vfio-pci, MAC, VLAN) and
# releases the source's. `virsh migrate --live` A -> B, without --xml:
# vflag's hook on the destination rewrites the VF to its own free VF at
# "migrate begin" (v_rewrite_*), reserves it (v_reserved_*) and prepares it
# (the domain's MAC on it at "prepare begin", before libvirt touches it:
# v_dest_prepared_*); the pair arrives as vflag wrote it, on the
# destination's VF (v_pair_b, v_pair_a2); the source frees its VF after the
# migration (MAC back to zero, no hook state, no reservation:
# v_src_released_*); `validate` passes at both ends (A's with the pair's
# teaming check; once the domain runs on A again, that check is the only
# failure and says the VF is hidden: no OS). Then a migration back
# to a destination whose probe refuses "prepare begin": it fails, the
# domain runs on at B with its VF, A keeps nothing (v_refused_dropped); and
# the migration back, which takes that VF.
#
# MACHINE: igb
# QEMU_ARGS: -netdev hubport,id=n1,hubid=0 -device igb,netdev=n1
# TIMEOUT: 900
# EXPECT: m_pfs m_ovs m_hosts m_hosts_apart
# EXPECT: v_setup_b v_define v_setup_a v_pair_a v_start_a m_root_port m_qemu_failover m_vf_a_prepared
# EXPECT: v_migrate_ab v_on_b v_rewrite_b v_pair_b v_dest_prepared_b v_vf_b_ready v_reserved_b v_failover_b v_standby_b v_src_released_a
# EXPECT: v_validate_a v_validate_b v_refused v_refused_dropped
# EXPECT: v_migrate_ba v_on_a v_rewrite_a v_pair_a2 v_dest_prepared_a v_vf_a_ready v_reserved_a v_standby_a v_src_released_b v_validate_a2 v_validate_b2
. "$(dirname "$0")/lib.sh"

MAC=52:54:00:51:00:01
VLAN=42
DOM=mig
ZERO=00:00:00:00:00:00

step "two igb PFs, one per host"
modprobe igb && modprobe igbvf && modprobe vfio-pci && modprobe tun
mapfile -t PFDIRS < <(pci_by_id 8086:10c9)
pfs() {
	[ "${#PFDIRS[@]}" = 2 ] || { echo "want 2 igb PFs, have ${#PFDIRS[@]}: ${PFDIRS[*]}"; return 1; }
	wait_for 10 test -d "${PFDIRS[0]}/net" && wait_for 10 test -d "${PFDIRS[1]}/net" || { echo "no netdevs"; return 1; }
	PFDIR_A=${PFDIRS[0]} PFDIR_B=${PFDIRS[1]}
	PF_A=$(ls "$PFDIR_A/net") PF_B=$(ls "$PFDIR_B/net")
	PCI_A=$(basename "$PFDIR_A") PCI_B=$(basename "$PFDIR_B")
	echo "host A: $PCI_A ($PF_A), host B: $PCI_B ($PF_B)"
}
check m_pfs pfs || exit 0
pfs >/dev/null
# libvirt refuses a VF whose PF is down (vflag's hook would set it up).
ip link set "$PF_A" up && ip link set "$PF_B" up
driver_of() { basename "$(readlink "/sys/bus/pci/devices/$1/driver")" 2>/dev/null; }
# vf_line PF N: the PF's line for VF N ("vf 0 link/ether ... vlan 42 ...").
vf_line() { ip link show "$1" | grep -E "^ +vf $2 "; }
vf_mac() { vf_line "$1" "$2" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }

ovs_br() { ovs_start && ovs-vsctl add-br br-mig && echo "bridge br-mig"; }
check m_ovs ovs_br

step "two libvirt hosts"
# The hosts' logs go to $OUT however the scenario ends.
save_logs() {
	local h
	for h in a b; do
		cp /hosts/$h/log/libvirtd.log "$OUT/libvirtd-$h.log" 2>/dev/null
		cp /hosts/$h/events.log "$OUT/hook-events-$h.log" 2>/dev/null
		cp /hosts/$h/log/qemu/$DOM.log "$OUT/qemu-$h.log" 2>/dev/null
	done
}
trap save_logs EXIT
# uri H: the libvirt URI of host H.
uri() { echo "qemu+unix:///system?socket=/hosts/$1/run/libvirt-sock"; }
VA() { virsh -c "$(uri a)" "$@"; }
VB() { virsh -c "$(uri b)" "$@"; }
# host_start H UUID: libvirtd and virtlogd of host H in a mount namespace of
# their own, over copies of the image's libvirt directories.
host_start() {
	local h=/hosts/$1 d
	mkdir -p /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt
	for d in run lib etc log; do mkdir -p "$h/$d"; done
	cp -a /etc/libvirt/. "$h/etc/"
	cp -a /var/lib/libvirt/. "$h/lib/"
	mkdir -p "$h/etc/hooks/qemu.d" "$h/log/qemu"
	# The probe: the last qemu hook script (qemu.d runs in name order, each
	# script's XML output feeding the next), so it sees what vflag's hook did
	# before libvirt acts: it logs "<domain> <op> <subop> a=<MAC> b=<MAC>
	# t=<uptime>" (VF 0 of each PF) in $h/events.log, keeps the XML it is given at
	# "migrate begin" (vflag's rewrite, if any) in $h/migrate-<domain>.xml, and
	# refuses "prepare begin" while $h/refuse exists (a destination that
	# refuses a migration). It also makes libvirtd look for qemu hooks at all:
	# libvirtd notes at startup whether any is there.
	cat >"$h/etc/hooks/qemu.d/zz-probe" <<PROBE
#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
if [ "\$2 \$3" = "migrate begin" ]; then cat >"$h/migrate-\$1.xml"; else cat >/dev/null; fi
m() { ip link show \$1 | sed -n "s/^ *vf 0 .*link\\/ether \\([0-9a-f:]*\\).*/\\1/p"; }
echo "\$1 \$2 \$3 a=\$(m $PF_A) b=\$(m $PF_B) t=\$(cut -d' ' -f1 /proc/uptime)" >>"$h/events.log"
if [ "\$2 \$3" = "prepare begin" ] && [ -e "$h/refuse" ]; then echo "the test's probe refuses \$1" >&2; exit 1; fi
exit 0
PROBE
	chmod 755 "$h/etc/hooks/qemu.d/zz-probe"
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
UUID_A=a0a0a0a0-5151-4a00-8000-00000000000a
UUID_B=b0b0b0b0-5151-4b00-8000-00000000000b
hosts() {
	# B starts once A has probed QEMU's capabilities into the shared
	# /var/cache/libvirt (a probe takes ~15 s under TCG).
	host_start a $UUID_A && wait_for 90 VA version && host_start b $UUID_B && wait_for 60 VB version || { tail -n 20 /hosts/*/log/libvirtd.log 2>/dev/null; echo "a daemon did not answer"; return 1; }
	local ua ub
	ua=$(VA capabilities | sed -n 's/.*<uuid>\(.*\)<\/uuid>.*/\1/p' | head -n 1)
	ub=$(VB capabilities | sed -n 's/.*<uuid>\(.*\)<\/uuid>.*/\1/p' | head -n 1)
	echo "host A: libvirtd pid $(cat /hosts/a/run/libvirtd.pid) uuid $ua; host B: libvirtd pid $(cat /hosts/b/run/libvirtd.pid) uuid $ub"
	[ "$ua" = $UUID_A ] && [ "$ub" = $UUID_B ]
}
check m_hosts hosts || exit 0
# Each daemon sees its own /etc/libvirt and /run/libvirt.
apart() {
	local pa pb
	pa=$(cat /hosts/a/run/libvirtd.pid) pb=$(cat /hosts/b/run/libvirtd.pid)
	[ "$(readlink /proc/"$pa"/ns/mnt)" != "$(readlink /proc/"$pb"/ns/mnt)" ] &&
		[ "$(readlink /proc/"$pa"/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ] || { echo "mount namespaces not apart"; return 1; }
	grep -q " /etc/libvirt " /proc/"$pa"/mountinfo && grep -q " /run/libvirt " /proc/"$pb"/mountinfo || return 1
	echo "libvirtd A ($pa) and B ($pb) in mount namespaces $(readlink /proc/"$pa"/ns/mnt) $(readlink /proc/"$pb"/ns/mnt)"
}
check m_hosts_apart apart

# bare_xml NAME: a q35 domain without an OS and without interfaces (vflag
# attaches the pair).
bare_xml() {
	cat <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}
ALIAS=ua-vflag-$(echo $MAC | tr -d :)
# pair H PCI [--inactive]: the domain's definition on H (live, or the
# persistent one) has the pair vflag writes: the standby (bridge br-mig,
# openvswitch, VLAN 42, virtio, teaming persistent, the alias), the VF at
# PCI (hostdev, VLAN 42, teaming transient naming the alias), both with the
# MAC, and vflag's claim of the VF for igb0 naming the standby.
pair() {
	local x sb vf w bad= d b sf
	d=${2%%:*} b=$(echo "$2" | cut -d: -f2) sf=${2##*:}
	x=$(virsh -c "$(uri "$1")" dumpxml ${3:-} $DOM) || return 1
	sb=$(printf '%s\n' "$x" | sed -n "/<interface type='bridge'>/,/<\/interface>/p")
	vf=$(printf '%s\n' "$x" | sed -n "/<interface type='hostdev'/,/<\/interface>/p")
	for w in "<mac address='$MAC'/>" "<source bridge='br-mig'/>" "<virtualport type='openvswitch'" "<tag id='$VLAN'/>" "<model type='virtio'/>" "<teaming type='persistent'/>" "<alias name='$ALIAS'/>"; do
		printf '%s\n' "$sb" | grep -qF "$w" || bad="$bad standby:$w"
	done
	for w in "<mac address='$MAC'/>" "<address type='pci' domain='0x$d' bus='0x$b' slot='0x${sf%.*}' function='0x${sf#*.}'/>" "<tag id='$VLAN'/>" "<teaming type='transient' persistent='$ALIAS'/>"; do
		printf '%s\n' "$vf" | grep -qF "$w" || bad="$bad vf:$w"
	done
	printf '%s\n' "$x" | grep -qF "<vflag:vf pci=\"$2\" mac=\"$MAC\" owner=\"igb0\" standby=\"$ALIAS\"/>" || bad="$bad claim"
	[ -z "$bad" ] || { printf '%s\n' "$x"; echo "host $1: missing$bad"; return 1; }
	echo "host $1 ${3:-live}: standby $ALIAS on br-mig vlan $VLAN, VF $2 transient, claim for igb0"
}
# The VF's guest-side slot: a pcie-root-port with hotplug (libvirt's default).
root_port() {
	local x bus c
	x=$(VA dumpxml $DOM) || return 1
	bus=$(printf '%s\n' "$x" | sed -n "/<interface type='hostdev'/,/<\/interface>/p" | grep -o "<address type='pci' domain='0x0000' bus='0x[0-9a-f]*'" | tail -n 1 | sed "s/.*bus='0x\([0-9a-f]*\)'/\1/")
	[ -n "$bus" ] || { printf '%s\n' "$x"; echo "no guest address for the hostdev"; return 1; }
	c=$(printf '%s\n' "$x" | grep "<controller type='pci' index='$((16#$bus))' model='pcie-root-port'")
	[ -n "$c" ] && ! echo "$c" | grep -q "hotplug='off'" || { printf '%s\n' "$x" | grep "<controller type='pci'"; echo "bus $bus is not a hotpluggable pcie-root-port"; return 1; }
	echo "the VF sits on bus 0x$bus: $c"
}
# qemu_cmd H: host H's QEMU command line for the domain.
qemu_cmd() { tr '\0' ' ' <"/proc/$(cat /hosts/$1/run/qemu/$DOM.pid)/cmdline"; }
# failover H PCI: H's QEMU has the standby with failover on and the VF at
# PCI paired with it.
failover() {
	local c v p
	c=$(qemu_cmd "$1") || return 1
	v=$(echo "$c" | grep -o '[^ ]*virtio-net-pci[^ ]*' | grep 'failover')
	p=$(echo "$c" | grep -o '[^ ]*vfio-pci[^ ]*' | grep 'failover_pair_id' | grep "$2")
	[ -n "$v" ] && [ -n "$p" ] || { echo "$c"; echo "no virtio-net-pci with failover or no vfio-pci of $2 with failover_pair_id"; return 1; }
	echo "$v"
	echo "$p"
}
# prepared PF N VF-PCI: VF N of PF on vfio-pci with the domain's MAC and VLAN.
prepared() {
	local l
	l=$(vf_line "$1" "$2")
	echo "$3 on $(driver_of "$3"); $l"
	[ "$(driver_of "$3")" = vfio-pci ] && echo "$l" | grep -q "link/ether $MAC" && echo "$l" | grep -q "vlan $VLAN"
}

state_is() { [ "$(virsh -c "$(uri "$1")" domstate $DOM 2>&1 | head -n 1)" = "$2" ]; }
on() { # on H OTHER: running on H, not running on OTHER
	echo "$1: $(virsh -c "$(uri "$1")" domstate $DOM 2>&1 | head -n 1); $2: $(virsh -c "$(uri "$2")" domstate $DOM 2>&1 | head -n 1)"
	state_is "$1" running && ! state_is "$2" running
}
# standby H: the standby's tap of the domain on host H is a port of br-mig
# with tag 42, and it is the only port of the bridge.
standby() {
	local tap ports
	tap=$(virsh -c "$(uri "$1")" domiflist $DOM | awk '$2 == "bridge" {print $1}')
	ports=$(ovs-vsctl list-ports br-mig | tr '\n' ' ')
	echo "host $1 tap $tap, br-mig ports: $ports, tag $(ovs-vsctl get port "$tap" tag 2>&1)"
	[ -n "$tap" ] && [ "$ports" = "$tap " ] && [ "$(ovs-vsctl get port "$tap" tag)" = $VLAN ]
}

step "vflag at both ends"
# Each host: its own vflag config (a legacy group on its PF: VF 0 for
# domains, VF 1 for the host's igbvf) and state dir in /hosts/<h>, its hook
# installed in its own /etc/libvirt/hooks; vflag runs in the host's mount
# namespace (nsenter), so qemu:///system is that host's libvirtd.
HOOK_BIN=$(dirname "$VFLAG")/vflag-hook
[ -f "$SHARE/vflag-hook" ] && install -m 755 "$SHARE/vflag-hook" "$HOOK_BIN"
# A's config attaches VF 0 to the domain as a migratable attachment, its
# standby on br-mig (the host's bridge: the test made it) with the VF's
# VLAN; B's receives the domain (the hook takes its group by the claim).
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
# V H ARGS: vflag of host H, in its mount namespace.
V() {
	local h=$1
	shift
	nsenter -t "$(cat /hosts/$h/run/libvirtd.pid)" -m -- "$VFLAG" --config /hosts/$h/vflag.yaml --state-dir /hosts/$h/state "$@"
}
setup() {
	V "$1" install-hook || return 1
	grep -q -- "--state-dir /hosts/$1/state hook qemu" /hosts/$1/etc/hooks/qemu.d/vflag || { cat /hosts/$1/etc/hooks/qemu.d/vflag; return 1; }
	V "$1" up || return 1
	echo "host $1: hook in /hosts/$1/etc/hooks/qemu.d/vflag, up done"
}
check v_setup_b setup b || exit 0
bare_xml $DOM >/root/$DOM-a.xml
check v_define VA define /root/$DOM-a.xml
# up on A makes A's VFs and attaches the pair to the defined domain.
check v_setup_a setup a || exit 0
VF_A=$(basename "$(readlink "$PFDIR_A/virtfn0")") VF_B=$(basename "$(readlink "$PFDIR_B/virtfn0")")
check v_pair_a pair a "$VF_A" --inactive
# igb gives a new VF a random MAC: zero both, so that a MAC seen later is
# vflag's or libvirt's doing.
ip link set "$PF_A" vf 0 mac $ZERO
ip link set "$PF_B" vf 0 mac $ZERO
check v_start_a VA start $DOM
check m_root_port root_port
check m_qemu_failover failover a "$VF_A"
check m_vf_a_prepared prepared "$PF_A" 0 "$VF_A"
# at_event H OP SUBOP: the probe's last line for the domain at that event on host H.
at_event() { grep "^$DOM $2 $3 " /hosts/$1/events.log | tail -n 1 | grep . || { cat /hosts/$1/events.log; echo "no '$DOM $2 $3' on host $1"; return 1; }; }
# hostdev_of H: the PCI address of the domain's VF on host H (live XML).
hostdev_of() {
	virsh -c "$(uri "$1")" dumpxml $DOM | sed -n "/<interface type='hostdev'/,/<\/interface>/p" |
		sed -n "s/.*<address type='pci' domain='0x\(....\)' bus='0x\(..\)' slot='0x\(..\)' function='0x\(.\)'.*/\1:\2:\3.\4/p" | head -n 1
}
# rewritten H PCI: on H the domain's VF is PCI (H's own VF 0).
rewritten() {
	local got
	got=$(hostdev_of "$1")
	echo "host $1 runs $DOM on $got; the XML after vflag's migrate begin names $(sed -n "/<interface type='hostdev'/,/<\/interface>/p" /hosts/$1/migrate-$DOM.xml 2>/dev/null | grep -o "<address type='pci'[^>]*>" | head -n 1)"
	[ "$got" = "$2" ]
}
# dest_prepared H LETTER: at "prepare begin" on H, before libvirt touched
# the VF (it sets the MAC later), VF 0 of H's PF had the domain's MAC.
dest_prepared() { at_event "$1" prepare begin | grep -E " $2=$MAC( |$)"; }
# src_released H PF: the VF 0 MAC is back to zero, the hook keeps no state
# for the domain and H holds no VF reservation.
src_released() {
	local m r
	m=$(vf_mac "$2" 0)
	r=$(ls /hosts/$1/state/hook/reserved/*.json 2>/dev/null)
	echo "host $1: VF 0 MAC $m, hook state: $(ls /hosts/$1/state/hook 2>/dev/null | tr '\n' ' '), reservations: ${r:-none}"
	[ "$m" = $ZERO ] && ! test -e /hosts/$1/state/hook/$DOM && [ -z "$r" ]
}
# reserved H PCI: H's hook reserved its VF PCI for the domain, and marked
# the reservation started (QEMU runs): it lasts until the domain's release.
reserved() {
	local f=/hosts/$1/state/hook/reserved/$2.json
	cat "$f" || { ls -la /hosts/$1/state/hook/reserved; return 1; }
	jq -e --arg d $DOM '.domain == $d and .started == true' "$f" >/dev/null
}
# validate_ok H [hidden]: vflag validate passes on H; on A, whose config
# has the migratable attachment, with the pair's teaming check passing. With
# hidden (the domain runs on A): the teaming check is the only one failing,
# and says the VF is hidden (the domain has no OS: the guest never
# negotiates the standby feature).
validate_ok() {
	local out rc fails
	out=$(V "$1" validate 2>&1)
	rc=$?
	printf '%s\n' "$out"
	[ "$1" = a ] || return $rc
	fails=$(printf '%s\n' "$out" | grep -E '^ *FAIL ')
	if [ -z "${2:-}" ]; then
		[ $rc = 0 ] && printf '%s\n' "$out" | grep -qE "^ *PASS +teaming/$DOM/pf0vf0 "
		return
	fi
	[ "$(printf '%s\n' "$fails" | grep -c .)" = 1 ] && printf '%s\n' "$fails" | grep -qE "^ *FAIL +teaming/$DOM/pf0vf0 .*the VF is hidden"
}
migrate_v() { # migrate_v FROM TO PORT: without --xml (vflag's hook rewrites)
	local t0 t1 rc secs
	t0=$(date +%s.%N)
	virsh -c "$(uri "$1")" migrate --live --verbose $DOM "$(uri "$2")" "tcp://127.0.0.1:$3"
	rc=$?
	t1=$(date +%s.%N)
	secs=$(awk "BEGIN{printf \"%.2f\", $t1 - $t0}")
	[ $rc != 0 ] || echo "$secs" >>"$OUT/migrate-$1-$2.secs"
	echo "virsh migrate --live $1 -> $2: exit $rc in ${secs}s"
	return $rc
}

step "vflag: migrate A -> B"
check v_migrate_ab migrate_v a b 49154
check v_on_b on b a
check v_rewrite_b rewritten b "$VF_B"
check v_pair_b pair b "$VF_B"
check v_dest_prepared_b dest_prepared b b
check v_vf_b_ready prepared "$PF_B" 0 "$VF_B"
check v_reserved_b reserved b "$VF_B"
check v_failover_b failover b "$VF_B"
check v_standby_b standby b
check v_src_released_a src_released a "$PF_A"
check v_validate_a validate_ok a
check v_validate_b validate_ok b

step "vflag: a destination that refuses"
touch /hosts/a/refuse
refused() {
	local out rc
	out=$(migrate_v b a 49155 2>&1)
	rc=$?
	echo "$out"
	echo "B: $(virsh -c "$(uri b)" domstate $DOM) on $(hostdev_of b), VF 0 MAC $(vf_mac "$PF_B" 0)"
	[ $rc != 0 ] && state_is b running && [ "$(hostdev_of b)" = "$VF_B" ] && [ "$(vf_mac "$PF_B" 0)" = $MAC ]
}
check v_refused refused
rm -f /hosts/a/refuse
# The destination's reservation and preparation are gone: A's VF 0 has no
# MAC, no hook state for the domain (and the next migration takes VF 0).
check v_refused_dropped src_released a "$PF_A"

step "vflag: migrate B -> A"
check v_migrate_ba migrate_v b a 49156
check v_on_a on a b
check v_rewrite_a rewritten a "$VF_A"
check v_pair_a2 pair a "$VF_A"
check v_dest_prepared_a dest_prepared a a
check v_vf_a_ready prepared "$PF_A" 0 "$VF_A"
check v_reserved_a reserved a "$VF_A"
check v_standby_a standby a
check v_src_released_b src_released b "$PF_B"
check v_validate_a2 validate_ok a hidden
check v_validate_b2 validate_ok b
VA destroy $DOM >/dev/null
exit 0
