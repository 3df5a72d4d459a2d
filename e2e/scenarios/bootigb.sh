#!/bin/bash
# The boot path with VMs (igb machine, real PCI VFs, legacy group), under
# the guest's own systemd. Boot 1 installs the .deb, writes the config (2
# VFs: VF 0 with a MAC, attached to domain vm1; VF 1 for the host driver
# igbvf), enables libvirtd, runs `vflag install` and the units once (they
# attach VF 0 to vm1's persistent definition), defines vm1 and vm3 (vm3 asks
# for VF 1, which the config gives to the host), both autostarted, and
# reboots. At boot 2 libvirtd autostarts both before vflag.service has run
# (vflag.service needs libvirtd): the package's qemu hook defers vm1 (its VF
# must not be used before vflag's up, internal/bootgate) and refuses vm3 for
# its VF. After boot 2, with nobody running vflag by hand: vm1 runs with its
# VF on vfio-pci and the config's MAC, started by vflag's up after it had
# marked the boot ready; vm3 is shut off, with vflag's refusal in libvirtd's
# log.
#
# MACHINE: igb
# INIT: systemd
# BOOTS: 2
# DEB: yes
# TIMEOUT: 900
# EXPECT: bi_deb bi_install bi_first_up bi_define
# EXPECT: bi_units_ok bi_vm_running bi_vm_vf bi_vm_mac bi_vm_deferred bi_vm_after_ready bi_refused
. "$(dirname "$0")/lib.sh"

V=/usr/bin/vflag
MAC0=52:54:00:0b:00:10
MAC3=52:54:00:0b:00:13
PFDIR=$(pci_by_id 8086:10c9 | head -n 1)
PCI=$(basename "$PFDIR")
pf_netdev() { ls "$PFDIR/net" 2>/dev/null | head -n 1; }

domain() { # domain NAME [VF-PCI MAC]: defined and autostarted
	define_domain "$1" "${2:+$(hostdev_iface "$2" "$3")}" && virsh autostart "$1"
}

if [ "$BOOT" = 1 ]; then
	step "boot 1: package, config, libvirtd, domains, units"
	check bi_deb dpkg -i "$SHARE/vflag.deb"
	wait_for 30 test -n "$(pf_netdev)"
	mkdir -p /etc/vflag
	cat >/etc/vflag/vflag.yaml <<-EOF2
		libvirt: qemu:///system
		groups:
		  - name: igb0
		    eswitch: legacy
		    pfs: ["$PCI"]
		    numvfs: 2
		    vfs:
		      - {pf: 0, vf: 0, mac: "$MAC0"}
		      - {pf: 0, vf: 1, driver: igbvf}
		    attachments:
		      - {domain: vm1, pf: 0, vf: 0}
	EOF2
	check bi_install $V install
	# The image has libvirt-daemon without libvirt-daemon-system (no units):
	# units as that package's, without socket activation.
	cat >/etc/systemd/system/virtlogd.service <<-'EOF2'
		[Unit]
		Description=e2e: virtlogd
		[Service]
		ExecStart=/usr/sbin/virtlogd
	EOF2
	cat >/etc/systemd/system/libvirtd.service <<-'EOF2'
		[Unit]
		Description=e2e: libvirtd (as libvirt-daemon-system's, without sockets)
		Requires=virtlogd.service
		After=virtlogd.service network.target
		Before=libvirt-guests.service
		[Service]
		Type=notify
		ExecStart=/usr/sbin/libvirtd
		TimeoutStartSec=300
		[Install]
		WantedBy=multi-user.target
	EOF2
	mkdir -p /var/log/libvirt /var/lib/libvirt
	systemctl daemon-reload
	systemctl enable libvirtd.service 2>&1
	systemctl start libvirtd.service
	wait_for 90 virsh -c qemu:///system version || { systemctl --no-pager status libvirtd.service; exit 1; }
	domain vm1 || exit 1
	check bi_first_up systemctl start vflag-pre.service vflag.service
	journalctl -b --no-pager -u vflag-pre.service -u vflag.service | tail -n 20
	VF1=$(basename "$(readlink "$PFDIR/virtfn1")")
	check bi_define domain vm3 "$VF1" $MAC3
	virsh dumpxml --inactive vm1 | grep -A4 hostdev
	exit 100
fi

step "boot $BOOT"
# Bounded: a boot that never finishes (a job waiting forever) still gets
# its checks, and the jobs left say what waits.
timeout 240 systemctl is-system-running --wait || { echo "boot not finished after 240 s:"; systemctl --no-pager list-jobs; }
systemctl --no-pager list-units --failed
journalctl -b --no-pager -u vflag.service | tail -n 15
journalctl -b --no-pager -u libvirtd.service | grep -i 'vflag\|hook' | tail -n 8
PF=$(pf_netdev)
check bi_units_ok units_ok vflag-pre.service vflag.service
wait_for 60 sh -c '[ "$(virsh domstate vm1)" = running ]'
expect bi_vm_running running virsh domstate vm1
VF0=$(basename "$(readlink "$PFDIR/virtfn0")")
vm_vf() {
	virsh dumpxml vm1 | grep -A6 "<interface type='hostdev'" || return 1
	local drv
	drv=$(basename "$(readlink /sys/bus/pci/devices/$VF0/driver)")
	echo "VF 0 $VF0 driver $drv"
	[ "$drv" = vfio-pci ]
}
check bi_vm_vf vm_vf
expect_match bi_vm_mac "vf 0 .*$MAC0" ip link show "$PF"
# libvirtd autostarted vm1 before vflag.service ran: the hook deferred it,
# and vflag's up started it.
deferred() {
	journalctl -b --no-pager -u libvirtd.service | grep -q 'deferring the autostart of domain vm1' ||
		{ echo "no deferral of vm1 in libvirtd's log"; return 1; }
	journalctl -b --no-pager -u vflag.service | grep -q 'started domain vm1 (the hook deferred its autostart' ||
		{ echo "vflag.service did not start vm1"; return 1; }
	echo "vm1 deferred by the hook at autostart, started by vflag.service"
}
check bi_vm_deferred deferred
after_ready() {
	local ready start
	ready=$(stat -c %Y /var/lib/vflag/ready) || return 1
	start=$(sed -n 's/^\([0-9-]* [0-9:]*\)\.[0-9]*+0000: starting up.*/\1/p' /var/log/libvirt/qemu/vm1.log | tail -n 1)
	echo "marked ready: $(date -u -d @$ready '+%F %T'); vm1 started: $start UTC"
	[ -n "$start" ] && [ "$(date -u -d "$start UTC" +%s)" -ge "$ready" ]
}
check bi_vm_after_ready after_ready
refused() {
	local st
	st=$(virsh domstate vm3)
	echo "vm3: $st"
	[ "$st" = "shut off" ] || return 1
	journalctl -b --no-pager -u libvirtd.service | grep 'refusing to start domain vm3' | tail -n 1 |
		grep 'the config gives it to the host (driver igbvf)'
}
check bi_refused refused
exit 0
