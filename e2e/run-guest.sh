#!/bin/bash
# Boots one e2e scenario in a QEMU (TCG) guest built by e2e/build.sh.
#
#   run-guest.sh SCENARIO [OUTDIR]
#
# SCENARIO is a scenario script path or a name in e2e/scenarios (bed, bed.sh).
# OUTDIR (default: a new /tmp/vflag-e2e.XXXXXX) receives:
#   share/            the 9p share: vflag, scenarios/ (all of e2e/scenarios)
#   share/out/NAME.log    what the scenario printed (RESULT lines included)
#   share/out/dmesg.log   the guest kernel log at the end
#   console.log       the serial console (kernel + init + scenario output)
#
# Environment:
#   VFLAG_BIN              vflag binary to put in the guest (/usr/local/bin/vflag);
#                          VFLAG_BIN-hook, when there, goes in the share as vflag-hook
#   VFLAG_DEB              vflag .deb to put in the share ($SHARE/vflag.deb), for
#                          scenarios that install the package (# DEB: yes)
#   VFLAG_E2E_CACHE        build cache (default /var/cache/vflag-e2e)
#   VFLAG_E2E_TIMEOUT      override the scenario's "# TIMEOUT:" (seconds)
#   VFLAG_E2E_APPEND       more kernel command line (boot.sh: boot.break=...)
#   VFLAG_E2E_EXTRA        a directory whose files go in the share as extra/
#                          (make e2e-migrate-guest: the nested guest's kernel)
#   VFLAG_E2E_ALLOW_STALE=1  boot even if e2e/build.sh or e2e/guest changed
#                          since the image was built
#
# Scenario header lines (read here and by the Go harness):
#   # MACHINE: default | igb | nvme
#   # TIMEOUT: SECONDS     guest-side limit for the script (default 600)
#   # QEMU_ARGS: ...       extra QEMU arguments
#   # APPEND: ...          extra kernel command line
#   # EXPECT: NAME...      checks the harness requires (see README.md)
#   # INIT: testbed | systemd   PID 1: testbed-init (default) or the image's
#                          systemd, which runs the scenario from testbed.service
#   # KERNEL: bookworm | sid   the guest kernel: bookworm's 6.1 (default) or
#                          Debian unstable's (7.x: netdevsim offloads tc
#                          flower and links ports as peers)
#   # BOOTS: N             systemd only: the scenario may reboot the guest
#                          (exit 100, lib.sh reboot_guest) up to N boots in all,
#                          inside this one QEMU process (default 1)
#
# Exit status: 0 when the scenario script ran to its end and exited 0,
# 124 when the host-side timeout killed QEMU, 125 when the guest stalled
# before its first RESULT (see stall_watch), 1 otherwise.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 SCENARIO [OUTDIR]"
scen=$1
[ -f "$scen" ] || scen="$E2E_DIR/scenarios/${1%.sh}.sh"
[ -f "$scen" ] || die "no scenario $1 (looked for $scen)"
scen=$(realpath "$scen")
name=$(basename "$scen")

[ "$(id -u)" = 0 ] || die "run-guest.sh must run as root"
[ -f "$CACHE/current.env" ] || die "no test bed in $CACHE: build it first with 'make e2e-image' (bash e2e/build.sh)"
exec 9>"$CACHE/.lock"
flock -s 9
# shellcheck disable=SC1091
. "$CACHE/current.env"
if [ "$BUILDER_HASH" != "$(builder_hash)" ] && [ "${VFLAG_E2E_ALLOW_STALE:-0}" != 1 ]; then
	die "the test bed in $CACHE was built from other versions of e2e/build.sh, e2e/common.sh or e2e/guest/: run 'make e2e-image' (or set VFLAG_E2E_ALLOW_STALE=1)"
fi
for f in "$VMLINUX" "$INITRD" "$ROOT_IMG"; do [ -f "$f" ] || die "$f missing: run 'make e2e-image'"; done

# header NAME: the values of "# NAME: ..." lines (a trailing " # comment" is dropped)
header() { sed -n "s/^# $1:[[:space:]]*//p" "$scen" | sed 's/[[:space:]]\{1,\}#.*$//' | tr '\n' ' ' | sed 's/ *$//'; }
machine=$(header MACHINE)
machine=${machine:-default}
timeout=${VFLAG_E2E_TIMEOUT:-$(header TIMEOUT)}
timeout=${timeout:-600}
extra_args=$(header QEMU_ARGS)
extra_append=$(header APPEND)
init=$(header INIT)
init=${init:-testbed}
boots=$(header BOOTS)
boots=${boots:-1}
kernel=$(header KERNEL)
kernel=${kernel:-bookworm}
accel=tcg
case $kernel in
bookworm) ;;
sid)
	[ -z "${SID_UNAVAILABLE:-}" ] || die "the bed has no sid kernel: $SID_UNAVAILABLE (e2e/README.md, 'When the archive cannot satisfy a stage')"
	[ -n "${VMLINUX_SID:-}" ] && [ -f "$VMLINUX_SID" ] && [ -f "${INITRD_SID:-}" ] ||
		die "no sid kernel in $CACHE: run 'make e2e-image'"
	VMLINUX=$VMLINUX_SID INITRD=$INITRD_SID KVER=$KVER_SID
	# One host thread for the vCPUs: under multi-threaded TCG this kernel
	# once died at 2 s with "Oops: int3" in sched_clock_cpu (a CPU ran
	# kernel text another CPU was patching).
	accel=tcg,thread=single
	;;
*) die "bad # KERNEL: '$kernel' in $scen (bookworm, sid)" ;;
esac
case $init in testbed | systemd) ;; *) die "bad # INIT: '$init' in $scen (testbed, systemd)" ;; esac
case $boots in '' | *[!0-9]* | 0) die "bad # BOOTS: '$boots' in $scen (a number >= 1)" ;; esac
[ "$boots" = 1 ] || [ "$init" = systemd ] || die "# BOOTS: $boots needs # INIT: systemd in $scen"

out=${2:-$(mktemp -d /tmp/vflag-e2e.XXXXXX)}
mkdir -p "$out"
out=$(realpath "$out")
share=$out/share
rm -rf "$share" "$out/console.log"
mkdir -p "$share/scenarios" "$share/out"
cp -r "$E2E_DIR/scenarios/." "$share/scenarios/"
cp "$scen" "$share/scenarios/$name"
if [ -n "${VFLAG_DEB:-}" ]; then
	[ -f "$VFLAG_DEB" ] || die "VFLAG_DEB=$VFLAG_DEB does not exist"
	cp "$VFLAG_DEB" "$share/vflag.deb"
fi
if [ -n "${VFLAG_E2E_EXTRA:-}" ]; then
	[ -d "$VFLAG_E2E_EXTRA" ] || die "VFLAG_E2E_EXTRA=$VFLAG_E2E_EXTRA is not a directory"
	cp -r "$VFLAG_E2E_EXTRA" "$share/extra"
fi
if [ -n "${VFLAG_BIN:-}" ]; then
	[ -f "$VFLAG_BIN" ] || die "VFLAG_BIN=$VFLAG_BIN does not exist"
	cp "$VFLAG_BIN" "$share/vflag"
	# cmd/vflag-hook built beside it (e2e_test.go): hook.sh installs it.
	if [ -f "$VFLAG_BIN-hook" ]; then cp "$VFLAG_BIN-hook" "$share/vflag-hook"; fi
fi

append="console=ttyS0 quiet panic=-1 testbed.script=$name testbed.timeout=$timeout testbed.machine=$machine"
# Guest reboots: -no-reboot turns a guest reboot into QEMU's exit, so a
# scenario that reboots runs without it. -snapshot's temporary overlay lives
# as long as the QEMU process, so the guest's disk writes survive its
# reboots (and are thrown away when QEMU exits). A reset reloads -kernel and
# -initrd. The guest powers off at the end either way.
reboot_flag=(-no-reboot)
if [ "$init" = systemd ]; then
	append="$append testbed.init=systemd testbed.boots=$boots"
	[ "$boots" = 1 ] || reboot_flag=()
fi
# Paths as QEMU sees them (inside the trixie chroot they are bind mounts).
k=$VMLINUX i=$INITRD img=$ROOT_IMG sh=$share
chroot_root=
case $machine in
default)
	qemu=(qemu-system-x86_64)
	;;
nvme) # QEMU 7.2 NVMe with SR-IOV (2 VFs): PCI VFs that are not NICs
	qemu=(qemu-system-x86_64 -M q35 -device intel-iommu
		-device pcie-root-port,id=rp1,bus=pcie.0,chassis=1 -device nvme-subsys,id=subsys0
		-device nvme,serial=deadbeef,bus=rp1,subsys=subsys0,sriov_max_vfs=2,sriov_vq_flexible=4,sriov_vi_flexible=2,max_ioqpairs=6,msix_qsize=4)
	append="$append intel_iommu=on"
	;;
igb) # QEMU 10 (trixie chroot) igb: 82576 PF with 7 VFs, driven by igb/igbvf
	[ -x "$QEMU_TRIXIE_ROOT/usr/bin/qemu-system-x86_64" ] || die "no trixie QEMU in $QEMU_TRIXIE_ROOT: run 'make e2e-image'"
	chroot_root=$QEMU_TRIXIE_ROOT
	qemu=(qemu-system-x86_64 -M q35 -device intel-iommu
		-netdev hubport,id=n0,hubid=0 -device igb,netdev=n0)
	append="$append intel_iommu=on"
	k=/mnt/vflag-e2e/kernel/$(basename "$VMLINUX") i=/mnt/vflag-e2e/image/$(basename "$INITRD")
	img=/mnt/vflag-e2e/image/$(basename "$ROOT_IMG") sh=/mnt/vflag-e2e/out/share
	;;
*) die "unknown MACHINE '$machine' in $scen (default, igb, nvme)" ;;
esac
[ -z "$extra_append" ] || append="$append $extra_append"
[ -z "${VFLAG_E2E_APPEND:-}" ] || append="$append $VFLAG_E2E_APPEND"
# shellcheck disable=SC2206
qemu+=(-accel "$accel" -m 2048 -smp 2 -nographic "${reboot_flag[@]}" -snapshot -nic none
	-kernel "$k" -initrd "$i" -append "$append"
	-drive "file=$img,if=virtio,format=raw"
	-virtfs "local,path=$sh,mount_tag=share,security_model=none,id=share"
	$extra_args)

# Serial console without CRs and SeaBIOS' terminal escapes.
clean_console() { sed -u -e 's/\r//g' -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g'; }

host_timeout=$((timeout + 90))

# stall_watch: a guest that stalls before its first RESULT (seen under TCG:
# "rcu: rcu_preempt kthread timer wakeup didn't happen", then nothing for
# 16 minutes) is stopped after VFLAG_E2E_STALL seconds (default 240; 120
# once the kernel has reported an RCU stall) without a byte on the console
# or in the guest log, rather than at the host-side timeout; this script
# then exits 125 and the harness boots it again. After the first RESULT the
# scenario's own limits apply.
stall_watch() {
	local limit=${VFLAG_E2E_STALL:-240} last=-1 since now size lim
	since=$(date +%s)
	while sleep 5; do
		grep -aq '^RESULT ' "$glog" 2>/dev/null && return 0
		size=$({ cat "$out/console.log" "$glog" 2>/dev/null || true; } | wc -c)
		now=$(date +%s)
		if [ "$size" != "$last" ]; then
			last=$size since=$now
			continue
		fi
		lim=$limit
		grep -aqE 'rcu_preempt kthread timer wakeup|rcu: INFO: rcu_(preempt|sched) (detected|self-detected) stall' "$out/console.log" 2>/dev/null &&
			[ "$lim" -gt 120 ] && lim=120
		[ $((now - since)) -ge "$lim" ] || continue
		echo "no output for $((now - since)) s before the first RESULT$(grep -aqE 'rcu_preempt kthread timer wakeup|rcu: INFO: rcu_' "$out/console.log" && echo ' (the kernel reported an RCU stall)')" >"$out/stalled"
		pkill -TERM -P "$1" -x timeout || true
		return 0
	done
}
glog="$share/out/${name%.sh}.log"
rm -f "$out/stalled"

log "booting $name (machine $machine, kernel $KVER, init $init, boots $boots, guest limit ${timeout}s, host limit ${host_timeout}s), output in $out"
t0=$(date +%s)
stall_watch $$ &
watch_pid=$!
set +e
if [ -z "$chroot_root" ]; then
	timeout -k 10 "$host_timeout" "${qemu[@]}" </dev/null 2>&1 | clean_console | tee "$out/console.log"
	rc=${PIPESTATUS[0]}
else
	# Leftovers from a killed run of an older version of this script.
	sweep_mounts "$chroot_root"
	# The bind mounts live in a private mount namespace: they vanish with it,
	# however QEMU ends. The EXIT trap is a second line of defence.
	trap 'sweep_mounts "$chroot_root"' EXIT
	timeout -k 10 "$host_timeout" unshare --mount --propagation private bash -euc '
		r=$1 kdir=$2 idir=$3 out=$4; shift 4
		mkdir -p "$r/mnt/vflag-e2e/kernel" "$r/mnt/vflag-e2e/image" "$r/mnt/vflag-e2e/out"
		mount --bind /dev "$r/dev"
		mount --bind /proc "$r/proc"
		mount --bind -o ro "$kdir" "$r/mnt/vflag-e2e/kernel"
		mount --bind -o ro "$idir" "$r/mnt/vflag-e2e/image"
		mount --bind "$out" "$r/mnt/vflag-e2e/out"
		exec chroot "$r" "$@"' bash "$chroot_root" "$(dirname "$VMLINUX")" "$(dirname "$ROOT_IMG")" "$out" \
		"${qemu[@]}" </dev/null 2>&1 | clean_console | tee "$out/console.log"
	rc=${PIPESTATUS[0]}
fi
set -e
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
secs=$(($(date +%s) - t0))

exit_line=$(grep -a '^TESTBED-EXIT ' "$glog" 2>/dev/null | tail -n 1 || true)
echo "==== $name: QEMU exit $rc after ${secs}s; ${exit_line:-no TESTBED-EXIT line}"
grep -a '^RESULT ' "$glog" 2>/dev/null || true
if [ -s "$out/stalled" ]; then
	echo "==== $name: stalled: $(cat "$out/stalled"); QEMU stopped"
	exit 125
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
	echo "==== $name: host-side timeout (${host_timeout}s)"
	exit 124
fi
[ "$exit_line" = "TESTBED-EXIT 0" ] || exit 1
