#!/bin/bash
# The libvirt qemu hook through a real libvirtd, on real PCI VFs (igb,
# legacy group). `vflag install-hook` puts the hook in qemu.d before libvirtd
# starts; vflag up creates 2 VFs without setting VF 0's MAC and gives VF 1 to
# the host driver igbvf. A second hook script (qemu.d/zz-probe, run after
# vflag's) logs VF 0's MAC at every event, so the hook's own effect is seen
# before libvirt touches the VF. vm1 (VF 0 as <interface type='hostdev'>)
# starts with the hook having set the domain's MAC; destroy resets it and
# drops the per-domain state; vm2 (no passthrough) starts untouched; vm3
# (VF 1, which the config keeps for the host) is refused with vflag's message.
# A transient domain named ".." (virsh create) takes VF 0: the hook keeps its
# state in hook/%2E. (STATE_DIR/hook/.. would be STATE_DIR, the host's own
# journal), and its destroy leaves the host's VF-LAG and journal as they
# were. A domain named "--state-dir=evil" is a name, not an option.
#
# MACHINE: igb
# TIMEOUT: 240
# EXPECT: h_pf h_install_hook h_install_idempotent h_libvirtd h_up h_vf0_mac_unset h_vf1_host_driver
# EXPECT: h_start h_hook_ran h_mac_at_prepare h_mac_running h_vf_on_vfio
# EXPECT: h_destroy h_release_mac_reset h_release_state_removed
# EXPECT: h_unmanaged_starts h_unmanaged_untouched
# EXPECT: h_refused_start h_refused_untouched h_release_after_refusal
# EXPECT: h_dotdot_start h_dotdot_state_inside h_dotdot_destroy h_dotdot_host_intact
# EXPECT: h_flaglike_start h_flaglike_released
. "$(dirname "$0")/lib.sh"

ZERO=00:00:00:00:00:00
MAC1=52:54:00:0b:00:01 # vm1's MAC for VF 0
MAC3=52:54:00:0b:00:03 # vm3's MAC for VF 1
STATE=/root/state
PROBE_LOG=/root/hook-events.log

igb_pf
expect_match h_pf '^eth' echo "$PF"

cat >/root/vflag.yaml <<EOF
libvirt: qemu:///system
groups:
  - name: igb0
    eswitch: legacy
    pfs: ["$PCI"]
    numvfs: 2
    vfs:
      - {pf: 0, vf: 1, driver: igbvf}
EOF
V() { "$VFLAG" --config /root/vflag.yaml --state-dir "$STATE" "$@"; }

# vf_mac N: VF N's MAC as the PF reports it.
vf_mac() { ip link show "$PF" | sed -n "s/^ *vf $1 .*link\/ether \([0-9a-f:]*\).*/\1/p"; }

step "install the hook, then start libvirtd (it looks for hooks at startup)"
# vflag-hook (cmd/vflag-hook: no cgo, no libvirt) next to vflag, as the
# package installs it: the hook script runs it, so every hook event below
# is that binary's.
HOOK_BIN=$(dirname "$VFLAG")/vflag-hook
[ -f "$SHARE/vflag-hook" ] && install -m 755 "$SHARE/vflag-hook" "$HOOK_BIN"
hook_installed() {
	V install-hook || return 1
	local h=/etc/libvirt/hooks/qemu.d/vflag
	test -x "$h" || { echo "$h is not executable"; return 1; }
	grep -q -- "--config /root/vflag.yaml --state-dir $STATE hook qemu" "$h" || { cat "$h"; echo "$h does not run vflag with this config and state dir"; return 1; }
	grep -q "bin=$HOOK_BIN" "$h" || { cat "$h"; echo "$h does not prefer $HOOK_BIN"; return 1; }
	test -x "$HOOK_BIN" || { echo "no $HOOK_BIN: the share has no vflag-hook (e2e_test.go builds it beside vflag)"; return 1; }
	if ldd "$HOOK_BIN" 2>&1 | grep -q libvirt; then ldd "$HOOK_BIN"; echo "$HOOK_BIN links libvirt"; return 1; fi
	echo "$h: $(grep '^exec' "$h"), runs $HOOK_BIN ($(ldd "$HOOK_BIN" 2>&1 | head -1 | tr -s '\t ' ' '))"
}
check h_install_hook hook_installed
idempotent() { out=$(V install-hook) || return 1; echo "$out"; echo "$out" | grep -q '^unchanged /etc/libvirt/hooks/qemu.d/vflag$'; }
check h_install_idempotent idempotent
# The probe: runs after vflag's hook (qemu.d runs in name order) and logs
# "<domain> <op> <subop> vf0=<MAC> vf1=<MAC>" for every event.
cat >/etc/libvirt/hooks/qemu.d/zz-probe <<EOF
#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
cat >/dev/null
m() { ip link show $PF | sed -n "s/^ *vf \$1 .*link\\/ether \\([0-9a-f:]*\\).*/\\1/p"; }
echo "\$1 \$2 \$3 vf0=\$(m 0) vf1=\$(m 1)" >>$PROBE_LOG
EOF
chmod 755 /etc/libvirt/hooks/qemu.d/zz-probe
check h_libvirtd libvirt_start || exit 1

step "vflag up: VF 0 without a MAC, VF 1 for the host"
check h_up V up || exit 1
VF0=$(basename "$(readlink "$PFDIR/virtfn0")")
VF1=$(basename "$(readlink "$PFDIR/virtfn1")")
driver_of() { basename "$(readlink "/sys/bus/pci/devices/$1/driver")" 2>/dev/null; }
# igb gives new VFs a zero MAC; vflag (no mac in the config) must not set
# one. Zeroed anyway so the hook's effect below cannot be an old value.
ip link set "$PF" vf 0 mac $ZERO
expect h_vf0_mac_unset $ZERO vf_mac 0
expect h_vf1_host_driver igbvf driver_of "$VF1"
VF1_MAC=$(vf_mac 1)

# domain NAME [PCI MAC]: a domain, with PCI as <interface type='hostdev'>.
domain() { # domain NAME [VF-PCI MAC]
	define_domain "$1" "${2:+$(hostdev_iface "$2" "$3")}"
}
domain vm1 "$VF0" $MAC1
domain vm2
domain vm3 "$VF1" $MAC3

step "vm1 starts with VF 0"
check h_start virsh start vm1
hook_ran() {
	local f=$STATE/hook/vm1/journal.json
	test -f "$f" || { echo "no $f"; return 1; }
	cat "$f"
	jq -e --arg pf "$PF" --arg z $ZERO '.entries[] | select(.kind == "sriov.vfmac" and .record.pf == $pf and .record.vf == 0 and .record.prior == $z)' "$f" >/dev/null ||
		{ echo "$f does not record the MAC of $VF0 as set by the hook"; return 1; }
	echo "$f records VF 0 ($VF0) MAC set, prior $ZERO"
}
check h_hook_ran hook_ran
# "prepare begin" comes before libvirt sets a hostdev interface's MAC
# itself: there the MAC can only be vflag's doing.
at_event() { cat $PROBE_LOG; grep "^$1 $2 $3 " $PROBE_LOG | tail -n 1; }
expect_match h_mac_at_prepare "^vm1 prepare begin vf0=$MAC1 " at_event vm1 prepare begin
expect h_mac_running $MAC1 vf_mac 0
expect h_vf_on_vfio vfio-pci driver_of "$VF0"

step "destroy vm1: release resets"
check h_destroy virsh destroy vm1
# libvirt restores the MAC it saved when it started the domain (the hook's,
# so the domain's); release end runs last and puts back the zero MAC.
released() {
	local got
	got=$(vf_mac 0)
	grep '^vm1 release end ' $PROBE_LOG
	[ "$got" = $ZERO ] || { echo "VF 0 MAC after destroy is $got, want $ZERO"; return 1; }
	echo "VF 0 MAC back to $got"
}
check h_release_mac_reset released
gone() { ! test -e "$STATE/hook/vm1" || { cat "$STATE/hook/vm1/journal.json"; echo "$STATE/hook/vm1 still there"; return 1; }; echo "no $STATE/hook/vm1"; }
check h_release_state_removed gone

step "vm2 (no passthrough) starts untouched"
before=$(ip link show "$PF")
check h_unmanaged_starts virsh start vm2
untouched() {
	local after
	after=$(ip link show "$PF")
	grep '^vm2 ' $PROBE_LOG | head -n 2
	grep -q '^vm2 prepare begin ' $PROBE_LOG || { echo "the hooks did not run for vm2"; return 1; }
	! test -e "$STATE/hook/vm2/journal.json" || { echo "hook state for vm2 written"; return 1; }
	[ "$before" = "$after" ] || { printf 'before:\n%s\nafter:\n%s\n' "$before" "$after"; echo "PF $PF changed"; return 1; }
	echo "hooks ran for vm2; $PF and its VFs unchanged; no hook state for vm2"
}
check h_unmanaged_untouched untouched
virsh destroy vm2 >/dev/null

step "vm3 wants VF 1, which the config gives to the host: refused"
refused() {
	local out rc
	out=$(virsh start vm3 2>&1)
	rc=$?
	echo "$out"
	[ $rc != 0 ] || { echo "vm3 started"; return 1; }
	echo "$out" | grep -q "refusing to start domain vm3: VF not ready: VF 1 of $PF ($VF1), group igb0: the config gives it to the host (driver igbvf)" ||
		{ echo "not vflag's refusal"; return 1; }
	# The installed hook ran vflag-hook (its messages name it).
	echo "$out" | grep -o 'vflag-hook: refusing to start domain vm3: .*' || { echo "the refusal is not vflag-hook's"; return 1; }
}
check h_refused_start refused
refused_untouched() {
	local st drv mac
	st=$(virsh domstate vm3)
	drv=$(driver_of "$VF1")
	mac=$(vf_mac 1)
	[ "$st" = "shut off" ] && [ "$drv" = igbvf ] && [ "$mac" = "$VF1_MAC" ] ||
		{ echo "vm3 $st, VF 1 on ${drv:-no driver} with MAC $mac (want shut off, igbvf, $VF1_MAC)"; return 1; }
	echo "vm3 shut off, VF 1 still on igbvf with MAC $mac"
}
check h_refused_untouched refused_untouched
# libvirt runs release end after an aborted start; nothing of vm3's is kept.
after_refusal() {
	grep '^vm3 ' $PROBE_LOG
	grep -q '^vm3 release end ' $PROBE_LOG || { echo "no release end for vm3"; return 1; }
	! test -e "$STATE/hook/vm3/journal.json" || { cat "$STATE/hook/vm3/journal.json"; echo "hook journal for vm3 left"; return 1; }
	echo "release end ran for vm3; no hook state"
}
check h_release_after_refusal after_refusal

step "a transient domain named '..' takes VF 0; its destroy leaves the host's VF-LAG"
# transient NAME PCI MAC: virsh create of a domain with PCI as a hostdev interface.
transient() {
	domain_xml "$1" "$(hostdev_iface "$2" "$3")" >/root/transient.xml
	virsh create /root/transient.xml
}
# host_sig: what the domain's hook must not change: the host's journal, the
# VF count, VF 1's driver.
host_sig() { echo "journal $(sha256sum <"$STATE/journal.json" | cut -c1-16) numvfs $(cat "$PFDIR/sriov_numvfs") vf1 $(driver_of "$VF1")"; }
SIG=$(host_sig)
echo "host before: $SIG"
check h_dotdot_start transient .. "$VF0" $MAC1
dotdot_inside() {
	local f="$STATE/hook/%2E./journal.json"
	test -f "$f" || { ls -la "$STATE" "$STATE/hook"; echo "no $f"; return 1; }
	[ "$(host_sig)" = "$SIG" ] || { echo "host now: $(host_sig), before: $SIG"; return 1; }
	[ "$(vf_mac 0)" = $MAC1 ] || { echo "VF 0 MAC $(vf_mac 0), want $MAC1"; return 1; }
	echo "domain '..' journaled in $f; VF 0 MAC $MAC1; host journal and VFs unchanged ($SIG)"
}
check h_dotdot_state_inside dotdot_inside
check h_dotdot_destroy virsh destroy ..
dotdot_intact() {
	local now
	now=$(host_sig)
	grep '^\.\. ' $PROBE_LOG | tail -n 3
	[ "$now" = "$SIG" ] || { echo "host after: $now, before: $SIG"; return 1; }
	[ "$(vf_mac 0)" = $ZERO ] || { echo "VF 0 MAC $(vf_mac 0) after destroy, want $ZERO"; return 1; }
	! test -e "$STATE/hook/%2E." || { echo "state of '..' left"; return 1; }
	# 4: status ran and found problems; anything else: it failed.
	V status >/dev/null
	case $? in 0 | 4) ;; *) V status; echo "status after the destroy of '..' fails"; return 1 ;; esac
	echo "after the destroy of '..': $now, VF 0 MAC $ZERO, its state gone"
}
check h_dotdot_host_intact dotdot_intact

step "a domain named --state-dir=evil: a name, not an option"
check h_flaglike_start transient --state-dir=evil "$VF0" $MAC1
flaglike() {
	local mac
	mac=$(vf_mac 0)
	virsh destroy --domain --state-dir=evil >/dev/null || return 1
	[ "$mac" = $MAC1 ] || { echo "VF 0 MAC while it ran: $mac, want $MAC1 (the hook did not handle it)"; return 1; }
	! test -e /evil && ! test -e /root/evil || { ls -la /evil /root/evil; echo "the hook used evil as its state dir"; return 1; }
	[ "$(vf_mac 0)" = $ZERO ] && [ "$(host_sig)" = "$SIG" ] || { echo "after destroy: VF 0 MAC $(vf_mac 0), host $(host_sig)"; return 1; }
	echo "hook handled domain --state-dir=evil (VF 0 MAC $mac while it ran, $ZERO after); no evil state dir"
}
check h_flaglike_released flaglike
cp $PROBE_LOG "$OUT/hook-events.log" 2>/dev/null
exit 0
