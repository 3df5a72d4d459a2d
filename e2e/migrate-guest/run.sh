#!/bin/bash
# make e2e-migrate-guest: a live migration with a guest OS in the domain,
# its traffic measured (not part of make check: nested TCG is slow).
#
#   run.sh [OUTDIR]
#
# Builds ./cmd/vflag and ./cmd/vflag-hook, the nested guest's initramfs
# (busybox-static and the bed kernel's virtio_pci, virtio_net, net_failover
# and igbvf modules, nested-init as /init) beside the bed's kernel, and
# boots migrate-guest.sh in the igb bed with them in the share ($SHARE/extra).
# The results are in OUTDIR/share/out (migrate-guest.log, ping.log,
# results.txt, the nested console).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common.sh"
[ "$(id -u)" = 0 ] || die "run.sh must run as root"
[ -f "$CACHE/current.env" ] || die "no test bed in $CACHE: run 'make e2e-image'"
# shellcheck disable=SC1091
. "$CACHE/current.env"
out=${1:-$(mktemp -d /tmp/vflag-e2e-migrate-guest.XXXXXX)}
mkdir -p "$out"
out=$(realpath "$out")
extra=$out/extra
rm -rf "$extra"
mkdir -p "$extra"

# The nested guest: the bed's kernel, an initramfs of its own.
kdir=$(dirname "$VMLINUX")/modules
bbdeb=$(find "$CACHE/debs" -name 'busybox-static_*.deb' | sort | tail -n 1)
[ -n "$bbdeb" ] || die "no busybox-static .deb in $CACHE/debs: run 'make e2e-image'"
ird=$(mktemp -d "$out/initrd.XXXXXX")
mkdir -p "$ird/bin" "$ird/lib/modules" "$ird/proc" "$ird/sys" "$ird/dev"
dpkg-deb --fsys-tarfile "$bbdeb" | tar -xO ./bin/busybox >"$ird/bin/busybox"
chmod 755 "$ird/bin/busybox"
install -m 755 "$here/nested-init" "$ird/init"
for m in virtio_pci virtio_net net_failover igbvf; do
	modprobe -d "$kdir" -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r m; do
	case $m in
	*.ko.xz) xz -dc "$m" >"$ird/lib/modules/$(basename "$m" .xz)" ;;
	*) cp "$m" "$ird/lib/modules/" ;;
	esac
	basename "$m" .xz >>"$ird/modules.order"
done
log "nested initramfs modules: $(tr '\n' ' ' <"$ird/modules.order")"
(cd "$ird" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -6 >"$extra/initrd.gz"
rm -rf "$ird"
cp "$VMLINUX" "$extra/vmlinux"

root=$(cd "$here/../.." && pwd)
(cd "$root" && go build -o "$out/vflag" ./cmd/vflag && CGO_ENABLED=0 go build -tags vflag_nolibvirt -o "$out/vflag-hook" ./cmd/vflag-hook)
rc=0
VFLAG_BIN=$out/vflag VFLAG_E2E_EXTRA=$extra bash "$here/../run-guest.sh" "$here/migrate-guest.sh" "$out" || rc=$?
# Every check the scenario's # EXPECT: lines name must have passed.
glog=$out/share/out/migrate-guest.log
for n in $(sed -n 's/^# EXPECT:[[:space:]]*//p' "$here/migrate-guest.sh"); do
	grep -aq "^RESULT $n PASS" "$glog" 2>/dev/null || { echo "==== $n: $(grep -a "^RESULT $n " "$glog" 2>/dev/null || echo 'no RESULT')"; rc=1; }
done
echo "==== results ($out/share/out/results.txt):"
cat "$out/share/out/results.txt" 2>/dev/null || true
exit $rc
