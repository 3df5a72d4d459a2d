# Helpers for e2e scenario scripts. Source it first thing:
#
#   . "$(dirname "$0")/lib.sh"
#
# Result protocol: one line per check on stdout,
#
#   RESULT <name> PASS|FAIL|SKIP <detail on one line>
#
# The Go harness (e2e/e2e_test.go) turns each name into a subtest and
# requires every name listed in the scenario's "# EXPECT:" header lines.
# lib.sh does not set -e: a failed check should not hide the checks after it.
# check/expect/expect_match return the status of the check (0 = PASS), so
# a scenario can skip dependent steps: `check x cmd || exit 0` is fine
# (the checks never reached are then reported missing).
#
# Environment from /sbin/testbed-init: VFLAG (the vflag binary), SHARE
# (the 9p share), OUT (files left here are kept by the harness), SCENARIO
# (name without .sh), E2E_MACHINE (default, igb, nvme).

# ---------------------------------------------------------------- results

_oneline() { # squeeze stdin into one line of at most 300 characters
	tr '\n\r\t' '   ' | sed 's/  */ /g; s/^ //; s/ $//' | cut -c1-300
}

# result NAME STATUS DETAIL...: prints one RESULT line.
result() {
	local name=$1 st=$2
	shift 2
	case $name in *[!A-Za-z0-9_.-]* | "") name="bad-check-name:$(echo "$name" | tr -c 'A-Za-z0-9_.-' _)" ;; esac
	echo "RESULT $name $st $(printf '%s' "$*" | _oneline)"
}
ok() { result "$1" PASS "${@:2}"; }
fail() {
	result "$1" FAIL "${@:2}"
	return 1
}
# skip: a SKIP line; the harness fails an EXPECTed check that skipped (a
# check that did not run proves nothing).
skip() { result "$1" SKIP "${@:2}"; }

# check NAME CMD [ARG...]: PASS when CMD exits 0. Its output is logged
# (indented) and its last line becomes the detail.
check() {
	local name=$1 o rc
	shift
	o=$("$@" 2>&1)
	rc=$?
	_show "$name" "$o"
	if [ $rc = 0 ]; then
		ok "$name" "$(printf '%s\n' "$o" | tail -n 1)"
	else
		fail "$name" "exit $rc from '$*': $(printf '%s\n' "$o" | tail -n 3)"
	fi
}

# expect NAME WANT CMD [ARG...]: PASS when CMD exits 0 and prints WANT
# (leading/trailing white space ignored).
expect() {
	local name=$1 want=$2 o rc
	shift 2
	o=$("$@" 2>&1)
	rc=$?
	_show "$name" "$o"
	o=$(printf '%s' "$o" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//')
	if [ $rc = 0 ] && [ "$o" = "$want" ]; then
		ok "$name" "$want"
	else
		fail "$name" "want '$want', got '$o' (exit $rc) from '$*'"
	fi
}

# expect_match NAME ERE CMD [ARG...]: PASS when CMD exits 0 and its output
# matches the extended regular expression ERE.
expect_match() {
	local name=$1 re=$2 o rc
	shift 2
	o=$("$@" 2>&1)
	rc=$?
	_show "$name" "$o"
	if [ $rc = 0 ] && printf '%s\n' "$o" | grep -Eq -- "$re"; then
		ok "$name" "$(printf '%s\n' "$o" | grep -E -- "$re" | head -n 1)"
	else
		fail "$name" "no match for /$re/ (exit $rc) from '$*': $(printf '%s\n' "$o" | tail -n 3)"
	fi
}

_show() { [ -z "$2" ] || printf '%s\n' "$2" | sed "s/^/    [$1] /"; }

# ---------------------------------------------------------------- flow

# step TEXT: a visible section header with the guest uptime.
step() { echo "==== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }

# run CMD [ARG...]: echo the command, then run it (output not captured).
run() {
	echo "+ $*"
	"$@"
}

# wait_for SECONDS CMD [ARG...]: polls CMD every 0.2 s until it succeeds;
# returns 1 if it never did.
wait_for() {
	local end=$(($(date +%s%N) + $1 * 1000000000))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s%N)" -lt "$end" ] || return 1
		sleep 0.2
	done
}

# ---------------------------------------------------------------- devices

# nsim_new ID [PORTS]: loads netdevsim, creates device ID with PORTS ports
# (default 2) and waits for its netdevs. Device directory:
# /sys/bus/netdevsim/devices/netdevsim<ID>; devlink handle netdevsim/netdevsim<ID>.
nsim_new() {
	local id=$1 ports=${2:-2}
	modprobe netdevsim || return 1
	echo "$id $ports" >/sys/bus/netdevsim/new_device || return 1
	wait_for 10 _nsim_has "$id" "$ports" || return 1
	echo "netdevsim$id netdevs: $(nsim_netdevs "$id")"
}
_nsim_has() { [ "$(nsim_netdevs "$1" | wc -w)" -ge "$2" ]; }

# nsim_netdevs ID: the netdevs of netdevsim device ID (PFs and representors).
nsim_netdevs() { ls "/sys/bus/netdevsim/devices/netdevsim$1/net" 2>/dev/null | sort -V | tr '\n' ' '; }

# netdev_by_ppn ID PHYS_PORT_NAME: the netdev of netdevsim device ID whose
# phys_port_name is the given one (p1, p2, pf0vf0, ...).
netdev_by_ppn() {
	local n
	for n in $(nsim_netdevs "$1"); do
		[ "$(cat "/sys/class/net/$n/phys_port_name" 2>/dev/null)" = "$2" ] && { echo "$n"; return 0; }
	done
	return 1
}

# pci_by_id VENDOR:DEVICE: sysfs directories of matching PCI functions
# (e.g. pci_by_id 8086:10c9 for the igb PF).
pci_by_id() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor"):$(cat "$d/device")" = "0x${1%:*}:0x${1#*:}" ] && echo "$d"
	done
}

# igb_pf: loads igb, igbvf (loaded first, so that with autoprobe on it
# would grab new VFs at once) and vfio-pci, waits for the 82576 PF's netdev
# and sets PFDIR (its sysfs directory), PCI (its address) and PF (its
# netdev). MACHINE igb only.
igb_pf() {
	modprobe igb && modprobe igbvf && modprobe vfio-pci || return 1
	PFDIR=$(pci_by_id 8086:10c9 | head -n 1)
	[ -n "$PFDIR" ] || { echo "no igb PF (8086:10c9): not the igb machine?"; return 1; }
	wait_for 10 test -d "$PFDIR/net" || { echo "$PFDIR has no netdev"; return 1; }
	PF=$(ls "$PFDIR/net" | head -n 1)
	PCI=$(basename "$PFDIR")
}

# ---------------------------------------------------------------- daemons

# ovs_start: Open vSwitch with the kernel datapath (openvswitch module).
# Logs in /var/log/openvswitch. Extra arguments go to ovs-ctl.
#
# It first waits until the guest has been up for 11 s. Open vSwitch 3.1.0
# (bookworm) caches its CPU count for 10 s from a start of 0 on the
# monotonic clock, so an ovs-vswitchd that opens its datapath within 10 s
# of boot counts 0 CPUs and, in per-cpu upcall dispatch, runs no handler
# thread: the log says "Overriding n-handler-threads to 0", `ovs-dpctl
# show` counts every miss as lost, and no packet reaches OpenFlow. The later
# switch to 2 handlers does not repair the kernel's per-CPU upcall ports;
# only a restart does. Scenarios start at ~5 s of uptime, so without the
# wait about half of the boots had a bridge that forwarded nothing.
ovs_start() {
	while [ "$(cut -d. -f1 /proc/uptime)" -lt 11 ]; do sleep 0.2; done
	ovs-ctl start --system-id=random --no-monitor "$@" >/tmp/ovs-ctl.log 2>&1 || {
		cat /tmp/ovs-ctl.log
		return 1
	}
	wait_for 20 ovs-vsctl --timeout=2 show || return 1
	echo "Open vSwitch $(ovs-vsctl get Open_vSwitch . ovs_version) started"
}

# libvirt_start: monolithic libvirtd (+ virtlogd), qemu:///system (takes
# about 6 s). qemu.conf runs guests as root without a security driver. There
# is no /dev/kvm in the guest: domains need <domain type='qemu'> (nested TCG).
libvirt_start() {
	mkdir -p /var/log/libvirt /var/lib/libvirt /run/libvirt
	virtlogd -d || return 1
	libvirtd -d || return 1
	wait_for 60 virsh -c qemu:///system version || return 1
	echo "libvirtd $(virsh -c qemu:///system version --daemon | sed -n 's/^Running against daemon: //p') up"
}

# domain_xml NAME [DEVICE-XML]: a domain of 64 MiB and one vCPU for nested
# TCG (type qemu: no /dev/kvm in the guest), DEVICE-XML in its <devices>.
domain_xml() {
	cat <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    ${2:-}
  </devices>
</domain>
EOF
}

# hostdev_iface PCI MAC: the <interface type='hostdev' managed='yes'> of the
# VF at PCI (dddd:bb:ss.f) with MAC.
hostdev_iface() {
	local d=${1%%:*} rest=${1#*:}
	local b=${rest%%:*} sf=${rest#*:}
	echo "<interface type='hostdev' managed='yes'><mac address='$2'/><source><address type='pci' domain='0x$d' bus='0x$b' slot='0x${sf%.*}' function='0x${sf#*.}'/></source></interface>"
}

# define_domain NAME [DEVICE-XML]: writes /root/NAME.xml (domain_xml) and
# defines it (persistent, shut off).
define_domain() {
	domain_xml "$@" >"/root/$1.xml" && virsh define "/root/$1.xml" >/dev/null
}

# again: a second `V up` (the scenario's vflag wrapper) changes nothing:
# exit 0 with --detailed-exit-codes.
again() {
	local out rc
	out=$(V up --detailed-exit-codes 2>&1)
	rc=$?
	echo "$out"
	[ $rc = 0 ] || { echo "exit $rc"; return 1; }
}

# reps ID: the representor netdevs of netdevsim<ID>, per the kernel's devlink.
reps() {
	devlink -j port show | jq -r --arg d "netdevsim/netdevsim$1/" \
		'.port | to_entries[] | select((.key | startswith($d)) and .value.flavour == "pcivf") | .value.netdev' | sort
}

# units_ok UNIT...: each unit active with result success (systemd boots).
units_ok() {
	local u st r=0
	for u in "$@"; do
		st="$(systemctl show -p ActiveState --value "$u") $(systemctl show -p Result --value "$u")"
		echo "$u: $st"
		[ "$st" = "active success" ] && continue
		r=1
		# Why, in the check's own lines (a CI log keeps only those).
		journalctl -b --no-pager -o short-monotonic -u "$u" | tail -n 25
	done
	return $r
}

# sid_kernel: the scenario runs on the sid (7.x) kernel, whose netdevsim
# links two ports (link_device) and offloads tc rules.
sid_kernel() {
	uname -r
	[ "$(uname -r | cut -d. -f1)" -ge 7 ] || { echo "not the sid kernel"; return 1; }
	modprobe netdevsim || return 1
	[ -e /sys/bus/netdevsim/link_device ] || { echo "netdevsim has no link_device"; return 1; }
}

# nsim_link DEV_A NS_A DEV_B NS_B: makes two netdevsim netdevs peers
# ("netnsfd_a:ifidx_a netnsfd_b:ifidx_b", bus.c link_device_store); an
# empty NS is the initial namespace. The fds are this shell's.
nsim_link() {
	local fa=/proc/self/ns/net fb=/proc/self/ns/net ia ib a b rc
	[ -z "$2" ] || fa=/run/netns/$2
	[ -z "$4" ] || fb=/run/netns/$4
	ia=$(ip ${2:+-n "$2"} -j link show dev "$1" | jq '.[0].ifindex')
	ib=$(ip ${4:+-n "$4"} -j link show dev "$3" | jq '.[0].ifindex')
	exec {a}<"$fa" {b}<"$fb"
	echo "$a:$ia $b:$ib" >/sys/bus/netdevsim/link_device
	rc=$?
	exec {a}<&- {b}<&-
	[ $rc = 0 ] && echo "linked $1${2:+ (ns $2)} <-> $3${4:+ (ns $4)}"
	return $rc
}
