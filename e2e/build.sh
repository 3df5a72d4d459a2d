#!/bin/bash
# Builds the vflag e2e test bed from Debian packages (run as root; `make e2e-image`).
#
# Everything lands in ${VFLAG_E2E_CACHE:-/var/cache/vflag-e2e}, outside the repo,
# one directory per stage and key. A key is a hash of the stage's inputs: the
# Debian package versions it uses and the text of the shell function that
# builds it, so a rerun rebuilds only the stages whose inputs changed:
#
#   kernel/<key>/      vmlinux (uncompressed, PVH boot), modules/ (trimmed
#                      /lib/modules tree with the out-of-tree netdevsim.ko)
#   kernel-sid/<key>/  the same for Debian unstable's kernel (7.x): its
#                      netdevsim offloads tc flower rules and links ports as
#                      peers; built in a sid chroot (its gcc and kbuild)
#   rootfs/<key>/root  debootstrap --variant=minbase bookworm + test tools
#   image/<key>/       root.ext4 (rootfs + both kernels' modules +
#                      /sbin/testbed-init), initrd.cpio.gz and
#                      initrd-sid.cpio.gz (busybox, virtio/ext4/9p modules)
#   qemu-trixie/<key>/root   trixie chroot with QEMU 10 (igb SR-IOV NIC)
#   debs/, debootstrap-cache{,-sid}/, apt-trixie/, apt-sid/   download caches
#   current.env        what run-guest.sh boots
#
# Environment: VFLAG_E2E_CACHE, VFLAG_E2E_MIRROR (Debian mirror),
# VFLAG_E2E_KEEP_OLD=1 (do not prune superseded stage directories),
# VFLAG_E2E_SKIP_APT=1 (no apt-get update/install of host tools).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ "$(id -u)" = 0 ] || die "build.sh must run as root (debootstrap, chroot, mke2fs -d with ownership)"
mkdir -p "$CACHE"
CACHE=$(realpath "$CACHE")
exec 9>"$CACHE/.lock"
flock -n -x 9 || { log "waiting for another build or boot holding $CACHE/.lock"; flock -x 9; }

export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
APT=(-q -o APT::Sandbox::User=root)

# Debian package names (versions are resolved below, never hardcoded).
ROOTFS_PKGS=(kmod iproute2 iputils-ping openvswitch-switch rdma-core ibverbs-utils perftest
	rdmacm-utils iperf3 ethtool pciutils procps busybox libvirt-daemon libvirt-daemon-driver-qemu
	libvirt-clients qemu-system-x86 jq util-linux systemd systemd-sysv udev dbus libpam-systemd network-manager
	ovn-central ovn-host)
HOST_PKGS=(debootstrap qemu-system-x86 e2fsprogs cpio python3 kmod gcc-12 make xz-utils zstd
	ca-certificates debian-archive-keyring util-linux coreutils findutils)
INITRD_MODULES=(virtio_pci virtio_blk ext4 9pnet_virtio 9p)

# ---------------------------------------------------------------- timing
T_START=$(date +%s.%N)
PHASES=()
PHASE='' PHASE_T=''
phase() { # phase NAME: ends the running phase, starts NAME ("" only ends)
	local now; now=$(date +%s.%N)
	if [ -n "$PHASE" ]; then
		PHASES+=("$(printf '%-28s %7.1f s' "$PHASE" "$(awk "BEGIN{print $now - $PHASE_T}")")")
		log "phase $PHASE done"
	fi
	PHASE=$1 PHASE_T=$now
	[ -z "$PHASE" ] || log "phase $PHASE ..."
}
report_timings() {
	phase ""
	local now; now=$(date +%s.%N)
	echo "==== e2e-image timings ===="
	printf '%s\n' "${PHASES[@]}"
	printf '%-28s %7.1f s\n' total "$(awk "BEGIN{print $now - $T_START}")"
}

# ---------------------------------------------------------------- helpers
sha() { sha256sum | cut -c1-16; }

# Candidate version apt reports for a package (empty if none).
candidate() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '^(none)$' || true; }

# deb_get PKG VERSION [sid]: path of that exact .deb in the download cache
# (from bookworm's apt sources, or with "sid" from the private sid index).
deb_get() {
	local pkg=$1 ver=$2 f tmp opts=("${APT[@]}")
	[ "${3:-}" != sid ] || opts=("${SAPT[@]}")
	f="$CACHE/debs/${pkg}_${ver//:/%3a}.deb"
	if [ ! -s "$f" ]; then
		mkdir -p "$CACHE/debs"
		tmp=$(mktemp -d "$CACHE/debs/.dl.XXXXXX")
		(cd "$tmp" && apt-get "${opts[@]}" download "$pkg=$ver") >&2 || { rm -rf "$tmp"; die "apt-get download $pkg=$ver failed"; }
		mv "$tmp"/*.deb "$f"
		rm -rf "$tmp"
	fi
	echo "$f"
}

# stage NAME KEY FUNCTION: builds $CACHE/NAME/KEY with FUNCTION DIR unless it
# is already complete; prints nothing, sets STAGE_DIR.
stage() {
	local name=$1 key=$2 fn=$3 dir tmp
	dir="$CACHE/$name/$key" tmp="$CACHE/$name/$key.tmp"
	if [ -e "$dir/.done" ]; then
		log "$name: cached ($dir)"
	else
		log "$name: building $dir"
		safe_rm "$tmp" "$dir"
		mkdir -p "$tmp"
		"$fn" "$tmp"
		date -u +%FT%TZ >"$tmp/.done"
		mv "$tmp" "$dir"
	fi
	STAGE_DIR=$dir
}

# Removes superseded stage directories (and half-built ones from killed runs).
prune() {
	local name=$1 keep=$2 d
	[ "${VFLAG_E2E_KEEP_OLD:-0}" = 1 ] && return 0
	for d in "$CACHE/$name"/*; do
		[ -d "$d" ] && [ "$d" != "$keep" ] || continue
		log "$name: removing superseded $d"
		safe_rm "$d"
	done
}

# Runs a command in a private mount namespace: every mount it (or debootstrap,
# or a chroot) makes disappears when it exits, even when killed.
in_private_ns() { unshare --mount --propagation private "$@"; }

# ---------------------------------------------------------------- stages
# Each stage function's text is part of its key (declare -f), so editing one
# rebuilds that stage and those built from it.

# extract_vmlinux BZIMAGE OUT: the uncompressed vmlinux (an ELF with a PVH
# note) out of a bzImage.
extract_vmlinux() {
	/usr/bin/python3 - "$1" "$2" <<-'PY'
		import lzma, struct, subprocess, sys, zlib
		d = open(sys.argv[1], "rb").read()
		assert d[0x202:0x206] == b"HdrS", "not a bzImage"
		setup_sects = d[0x1F1] or 4
		start = (setup_sects + 1) * 512
		off, length = struct.unpack_from("<II", d, 0x248)
		p = d[start + off : start + off + length]
		if p[:6] == b"\xfd7zXZ\x00":
		    elf = lzma.LZMADecompressor().decompress(p)
		elif p[:2] == b"\x1f\x8b":
		    elf = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(p)
		elif p[:4] == b"\x28\xb5\x2f\xfd":
		    # zstd (sid's kernels): the build appends the size (4 bytes),
		    # which the zstd tool takes for a second, broken frame.
		    elf = subprocess.run(["zstd", "-dc"], input=p[:-4], check=True, capture_output=True).stdout
		else:
		    sys.exit("unsupported kernel compression, magic %r" % p[:6])
		assert elf[:4] == b"\x7fELF", "payload is not an ELF"
		open(sys.argv[2], "wb").write(elf)
	PY
}

# netdevsim_src DEB SERIES DIR: drivers/net/netdevsim of linux-source-SERIES
# (CONFIG_NETDEVSIM is not set in Debian) unpacked under DIR.
netdevsim_src() {
	dpkg-deb --fsys-tarfile "$1" | tar -xO --wildcards "*/linux-source-$2.tar.xz" |
		tar -xJ -C "$3" "linux-source-$2/drivers/net/netdevsim"
}

# module_tree SRC KVER KO OUT: the guest's module tree in OUT/modules from
# the package's SRC (moved): no sound, gpu, media, staging or wireless;
# netdevsim.ko (KO) added; depmod run.
module_tree() {
	local src=$1 kver=$2 ko=$3 out=$4 m
	m="$out/modules/lib/modules/$kver"
	mkdir -p "$out/modules/lib/modules"
	mv "$src" "$m"
	rm -rf "$m/build" "$m/source" "$m/kernel/sound" "$m/kernel/drivers/gpu" \
		"$m/kernel/drivers/media" "$m/kernel/drivers/staging"
	find "$m/kernel" -depth -type d -name wireless -exec rm -rf {} +
	strip --strip-debug "$ko"
	install -D -m 644 "$ko" "$m/kernel/drivers/net/netdevsim/netdevsim.ko"
	depmod -b "$out/modules" "$kver"
	[ -n "$(modprobe -d "$out/modules" -S "$kver" --show-depends netdevsim)" ] || die "netdevsim not found by modprobe ($kver)"
}

stage_kernel() {
	local out=$1 w=$1/work hdr
	mkdir -p "$w/img" "$w/hdr" "$w/src"
	dpkg-deb -x "$(deb_get "linux-image-$KVER" "${KV[linux-image-$KVER]}")" "$w/img"
	local p
	for p in "linux-headers-$KVER" "linux-headers-${KVER%-*}-common" "linux-kbuild-$KSERIES"; do
		dpkg-deb -x "$(deb_get "$p" "${KV[$p]}")" "$w/hdr"
	done
	extract_vmlinux "$w/img/boot/vmlinuz-$KVER" "$out/vmlinux"
	cp "$w/img/boot/config-$KVER" "$out/config"

	# netdevsim out of tree, with bookworm's own compiler.
	hdr="$w/hdr/usr/src/linux-headers-$KVER"
	# The headers Makefile includes the -common Makefile by absolute path.
	sed -i "s|^include /usr/src/|include $w/hdr/usr/src/|" "$hdr/Makefile"
	netdevsim_src "$(deb_get "linux-source-$KSERIES" "${KV[linux-source-$KSERIES]}")" "$KSERIES" "$w/src"
	make -s -C "$hdr" M="$w/src/linux-source-$KSERIES/drivers/net/netdevsim" \
		CONFIG_NETDEVSIM=m -j"$(nproc)" modules
	module_tree "$w/img/lib/modules/$KVER" "$KVER" "$w/src/linux-source-$KSERIES/drivers/net/netdevsim/netdevsim.ko" "$out"
	rm -rf "$w"
}

# Debian unstable's kernel. Its headers need sid's compiler (gcc-16) and its
# kbuild tools need sid's glibc, so netdevsim is built in a sid chroot
# (debootstrap minbase + the headers, about 35 s) thrown away afterwards.
# Its modules are xz-compressed (bookworm's kmod reads them).
stage_kernel_sid() {
	local out=$1 w=$1/work c=$1/work/chroot p
	mkdir -p "$w/img" "$c"
	for p in "linux-binary-$SKVER" "linux-modules-$SKVER" "linux-base-$SKVER"; do
		dpkg-deb -x "$(deb_get "$p" "${SKV[$p]}" sid)" "$w/img"
	done
	extract_vmlinux "$w/img/usr/lib/modules/$SKVER/vmlinuz" "$out/vmlinux"
	cp "$w/img/usr/lib/modules/$SKVER/config" "$out/config"
	grep -q '^# CONFIG_MODULE_SIG_FORCE is not set' "$out/config" || die "sid kernel $SKVER forces module signatures"

	# Its own debootstrap cache: this stage runs beside the bookworm one.
	mkdir -p "$CACHE/debootstrap-cache-sid"
	in_private_ns debootstrap --variant=minbase --cache-dir="$CACHE/debootstrap-cache-sid" \
		--include="linux-headers-$SKVER,make" sid "$c" "$MIRROR" >"$out/debootstrap.log" 2>&1 ||
		{ tail -n 40 "$out/debootstrap.log" >&2; die "debootstrap sid (kernel headers) failed (log: $out/debootstrap.log)"; }
	mkdir -p "$c/build"
	netdevsim_src "$(deb_get "linux-source-$SKSERIES" "${SKV[linux-source-$SKSERIES]}" sid)" "$SKSERIES" "$c/build"
	in_private_ns chroot "$c" sh -c 'mount -t proc proc /proc && exec make -s -C "/usr/src/linux-headers-$1" \
		M="/build/linux-source-$2/drivers/net/netdevsim" CONFIG_NETDEVSIM=m -j"$3" modules' \
		sh "$SKVER" "$SKSERIES" "$(nproc)"
	cp "$c/build/linux-source-$SKSERIES/drivers/net/netdevsim/netdevsim.ko" "$w/netdevsim.ko"
	module_tree "$w/img/usr/lib/modules/$SKVER" "$SKVER" "$w/netdevsim.ko" "$out"
	safe_rm "$w"
}

stage_rootfs() {
	local out=$1 r=$1/root
	mkdir -p "$CACHE/debootstrap-cache"
	in_private_ns debootstrap --variant=minbase --cache-dir="$CACHE/debootstrap-cache" \
		--include="$(IFS=,; echo "${ROOTFS_PKGS[*]}")" bookworm "$r" "$MIRROR" >"$out/debootstrap.log" 2>&1 ||
		{ tail -n 40 "$out/debootstrap.log" >&2; die "debootstrap bookworm failed (log: $out/debootstrap.log)"; }

	# libvirt's qemu driver: run guests as root (no libvirt-qemu user delays),
	# and have the user too since libvirt looks it up.
	in_private_ns chroot "$r" sh -c 'getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
		getent passwd libvirt-qemu >/dev/null || useradd -r -g libvirt-qemu -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
		getent group kvm >/dev/null || groupadd -r kvm'
	cat >>"$r/etc/libvirt/qemu.conf" <<-'EOF'

		# vflag e2e test bed
		user = "root"
		group = "root"
		security_driver = "none"
	EOF
	# systemd boots (scenarios with "# INIT: systemd"): the image's services
	# stay off until a scenario enables them (the packages enabled them), no
	# getty on the console, a fixed machine-id (not a first boot), a
	# persistent journal (journalctl -b -1 after a guest reboot).
	in_private_ns chroot "$r" sh -c 'systemctl disable openvswitch-switch.service ovsdb-server.service ovs-vswitchd.service \
			libvirtd.service libvirtd.socket libvirtd-ro.socket libvirtd-admin.socket virtlogd.socket virtlockd.socket \
			libvirt-guests.service NetworkManager.service NetworkManager-wait-online.service \
			NetworkManager-dispatcher.service wpa_supplicant.service \
			ovn-central.service ovn-northd.service ovn-ovsdb-server-nb.service ovn-ovsdb-server-sb.service \
			ovn-host.service ovn-controller.service 2>&1 | grep -v "^Removed" || true
		systemctl mask serial-getty@ttyS0.service getty@tty1.service getty-static.service \
			systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
		systemctl set-default multi-user.target >/dev/null'
	echo 5e1f1a9e2e2e4b0f9a7c1d3b8e6f4a21 >"$r/etc/machine-id"
	mkdir -p "$r/var/log/journal"
	echo vflag-e2e >"$r/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 vflag-e2e\n::1 localhost\n' >"$r/etc/hosts"
	: >"$r/etc/fstab"
	# Smaller image, faster mke2fs.
	rm -rf "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/* \
		"$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/*_Packages
	find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
	in_private_ns chroot "$r" dpkg-query -W -f '${Package} ${Version}\n' >"$out/packages.txt"
}

# make_initrd KERNEL_DIR KVER OUT: the initramfs of one kernel: busybox +
# the modules to reach /dev/vda (ext4) and the 9p share, decompressed
# (busybox insmod reads plain .ko files).
make_initrd() {
	local kdir=$1 kver=$2 outf=$3 ird bb m
	ird=$(mktemp -d "$(dirname "$outf")/initrd.XXXXXX")
	mkdir -p "$ird/bin" "$ird/lib/modules" "$ird/proc" "$ird/sys" "$ird/dev" "$ird/newroot"
	bb=$(mktemp -d "$(dirname "$outf")/bb.XXXXXX")
	dpkg-deb -x "$(deb_get busybox-static "$BUSYBOX_VER")" "$bb"
	cp "$bb/bin/busybox" "$ird/bin/busybox"
	rm -rf "$bb"
	install -m 755 "$E2E_DIR/guest/initrd-init" "$ird/init"
	# CPU-specific variants (crc32c-intel) are left out: TCG's default CPU has
	# no SSE4.2, they fail with ENODEV and the generic ones do the job.
	for m in "${INITRD_MODULES[@]}"; do
		modprobe -d "$kdir/modules" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++ && !/-intel\.ko(\.xz)?$/' | while read -r m; do
		case $m in
		*.ko.xz) xz -dc "$m" >"$ird/lib/modules/$(basename "$m" .xz)" ;;
		*) cp "$m" "$ird/lib/modules/" ;;
		esac
		basename "$m" .xz >>"$ird/modules.order"
	done
	(cd "$ird" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -6 >"$outf"
	rm -rf "$ird"
}

stage_image() {
	local out=$1 st=$1/stage size
	# The rootfs and module trees are hard-linked, never written in place:
	# only new files are added to the stage.
	cp -al "$ROOTFS_DIR/root" "$st"
	mkdir -p "$st/lib/modules"
	cp -al "$KERNEL_DIR/modules/lib/modules/$KVER" "$st/lib/modules/$KVER"
	[ -z "$SKVER" ] || cp -al "$KERNEL_SID_DIR/modules/lib/modules/$SKVER" "$st/lib/modules/$SKVER"
	rm -f "$st/sbin/testbed-init"
	install -m 755 "$E2E_DIR/guest/testbed-init" "$st/sbin/testbed-init"
	# systemd boots run the scenario from testbed.service (enabled here).
	rm -f "$st/etc/systemd/system/testbed.service" "$st/etc/systemd/system/multi-user.target.wants/testbed.service"
	install -m 644 "$E2E_DIR/guest/testbed.service" "$st/etc/systemd/system/testbed.service"
	ln -s /etc/systemd/system/testbed.service "$st/etc/systemd/system/multi-user.target.wants/testbed.service"
	rm -f "$st/etc/vflag-e2e-release"
	printf 'kernel=%s %s\nkernel_sid=%s %s\nimage_key=%s\n' "$KVER" "$KPKGVER" "$SKVER" "$SKPKGVER" "$IMAGE_KEY" >"$st/etc/vflag-e2e-release"
	size=$(du -sm "$st" | cut -f1)
	size=$((size * 5 / 4 + 600))
	mke2fs -q -t ext4 -L vflag-e2e -E root_owner=0:0 -d "$st" "$out/root.ext4" "${size}M"
	rm -rf "$st"

	make_initrd "$KERNEL_DIR" "$KVER" "$out/initrd.cpio.gz"
	[ -z "$SKVER" ] || make_initrd "$KERNEL_SID_DIR" "$SKVER" "$out/initrd-sid.cpio.gz"
}

stage_qemu_trixie() {
	local out=$1 r=$1/root
	mkdir -p "$CACHE/debootstrap-cache"
	in_private_ns debootstrap --variant=minbase --cache-dir="$CACHE/debootstrap-cache" \
		--include=qemu-system-x86 trixie "$r" "$MIRROR" >"$out/debootstrap.log" 2>&1 ||
		{ tail -n 40 "$out/debootstrap.log" >&2; die "debootstrap trixie failed (log: $out/debootstrap.log)"; }
	rm -rf "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*_Packages
	# Check the igb device is there (QEMU needs /dev and /proc: private namespace).
	in_private_ns sh -c 'mount --bind /dev "$1/dev" && mount --bind /proc "$1/proc" &&
		chroot "$1" qemu-system-x86_64 -device help' sh "$r" >"$out/devices.txt"
	grep -q '"igb"' "$out/devices.txt" || die "trixie QEMU has no igb device"
	in_private_ns chroot "$r" qemu-system-x86_64 --version | head -n 1 >"$out/version.txt"
}

# ================================================================ main
# Leftovers of killed runs: mounts under the cache, half-built stages.
sweep_mounts "$CACHE"
for d in "$CACHE"/*/*.tmp; do [ -e "$d" ] && { log "removing unfinished $d"; safe_rm "$d"; }; done

phase "host tools"
if [ "${VFLAG_E2E_SKIP_APT:-0}" != 1 ]; then
	apt-get "${APT[@]}" update >/dev/null
	missing=()
	for p in "${HOST_PKGS[@]}"; do
		[ "$(dpkg-query -W -f '${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing host packages: ${missing[*]}"
		apt-get "${APT[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi

phase "resolve versions"
# Each stage's Debian packages are taken at versions that satisfy what the
# stage's packages declare on one another (e2e/debresolve: Depends, compared
# as dpkg does), never by equality where Debian does not ask for it: the
# archive publishes a kernel's packages over days, and a rebuilt kbuild
# (6.1.192-3) serves the headers of 6.1.192-2 that ask for (>= 6.1.192-2).
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
DEBRESOLVE=$CACHE/.debresolve
(cd "$E2E_DIR/.." && "$GO" build -o "$DEBRESOLVE.tmp" ./e2e/debresolve) && mv "$DEBRESOLVE.tmp" "$DEBRESOLVE" ||
	die "cannot build e2e/debresolve with $GO"

# scenarios_needing STAGE: the scenarios that cannot run without STAGE (from
# their # KERNEL: and # MACHINE: headers).
scenarios_needing() {
	local f
	case $1 in
	kernel) echo "all of them (the image holds this kernel's modules)" ;;
	kernel-sid) for f in "$E2E_DIR"/scenarios/*.sh; do grep -q '^# KERNEL: sid' "$f" && basename "$f" .sh; done | paste -sd' ' ;;
	qemu-trixie) for f in "$E2E_DIR"/scenarios/*.sh; do grep -q '^# MACHINE: igb' "$f" && basename "$f" .sh; done | paste -sd' ' ;;
	esac
}

# resolve_stage STAGE APT_OPTS_ARRAY SEED...: asks apt-cache (with those
# options) for the stage's packages, starting from SEED and adding the names
# debresolve says it needs until they stop growing, then resolves them. Sets
# RES_ABI, RES_VERSION, RES_SERIES, RES_TEXT (debresolve's answer: the
# stage key's versions) and RES (package -> version). Returns 1, with the
# reason in RES_ERR, when the archive cannot satisfy the stage.
resolve_stage() {
	local stage=$1 round dump err
	local -n aopts=$2
	shift 2
	local names=("$@") more=()
	RES_ABI='' RES_VERSION='' RES_SERIES='' RES_TEXT='' RES_ERR=''
	declare -gA RES=()
	for round in 1 2 3 4; do
		dump=$(apt-cache "${aopts[@]}" show "${names[@]}" 2>/dev/null || true)
		mapfile -t more < <(printf '%s\n' "$dump" | "$DEBRESOLVE" -stage "$stage" -names | LC_ALL=C sort -u)
		[ -n "$(LC_ALL=C comm -13 <(printf '%s\n' "${names[@]}" | LC_ALL=C sort -u) <(printf '%s\n' "${more[@]}"))" ] || break
		mapfile -t names < <(printf '%s\n' "${names[@]}" "${more[@]}" | LC_ALL=C sort -u)
	done
	err=$(mktemp)
	if ! RES_TEXT=$(printf '%s\n' "$dump" | "$DEBRESOLVE" -stage "$stage" 2>"$err"); then
		RES_ERR="$(sed 's/^debresolve: //' "$err"); scenarios that cannot run: $(scenarios_needing "$stage")"
		rm -f "$err"
		return 1
	fi
	sed 's/^debresolve: //' "$err" | while read -r l; do log "$l"; done
	rm -f "$err"
	local k a b
	while read -r k a b; do
		case $k in
		abi) RES_ABI=$a ;;
		version) RES_VERSION=$a ;;
		series) RES_SERIES=$a ;;
		pkg) RES[$a]=$b ;;
		esac
	done <<<"$RES_TEXT"
}

# The newest bookworm 6.1 kernel ABI whose packages the archive satisfies
# (bookworm-security included), from the host's own apt sources.
HOST_APT=("${APT[@]}")
mapfile -t seed < <(apt-cache pkgnames linux-image-6.1.0- | grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$')
[ ${#seed[@]} -gt 0 ] || die "apt offers no linux-image-6.1.0-*-amd64 (is bookworm in the apt sources? apt-get update?)"
resolve_stage kernel HOST_APT "${seed[@]}" || die "$RES_ERR"
KSERIES=$RES_SERIES KVER=$RES_ABI KPKGVER=$RES_VERSION KERNEL_RESOLVED=$RES_TEXT
declare -A KV=()
for k in "${!RES[@]}"; do KV[$k]=${RES[$k]}; done
BUSYBOX_VER=$(candidate busybox-static)
[ -n "$BUSYBOX_VER" ] || die "apt offers no busybox-static"
MADISON=$(apt-cache madison "${ROOTFS_PKGS[@]}" 2>/dev/null | awk -F' [|] ' '{ gsub(/ /, ""); print }')
# What debootstrap installs: the bookworm/main versions.
ROOTFS_VERSIONS=$(printf '%s\n' "$MADISON" | awk -F'|' '$3 ~ /bookworm\/main/ { print $1, $2 }' | sort -u)
DEBOOTSTRAP_VER=$(dpkg-query -W -f '${Version}' debootstrap)

# private_apt SUITE VAR: apt options (into the array VAR) for a private
# state dir holding only SUITE's index from the mirror, updated; the build
# machine's own apt sources stay as they are.
private_apt() {
	local d="$CACHE/apt-$1"
	local -n opts=$2
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
	: >"$d/status"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $1 main" >"$d/sources.list"
	opts=("${APT[@]}" -o Dir::Etc::SourceList="$d/sources.list" -o Dir::Etc::SourceParts=/nonexistent
		-o Dir::State::Lists="$d/lists" -o Dir::State::status="$d/status" -o Dir::Cache="$d/cache"
		-o APT::Architectures::=amd64 -o Acquire::Languages=none
		-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false)
	apt-get "${opts[@]}" update >/dev/null || die "apt-get update for $1 failed"
}

# QEMU in trixie (debootstrap resolves its dependencies).
private_apt trixie TAPT
resolve_stage qemu-trixie TAPT qemu-system-x86 || die "$RES_ERR"
TRIXIE_QEMU_VER=${RES[qemu-system-x86]}

# Debian unstable's kernel (KERNEL-FACTS section 11): the ABI that sid's
# linux-image-amd64 depends on. sid changes every day: when it cannot be
# satisfied, the image is built without it and the scenarios that boot it
# fail with the reason (run-guest.sh reads SID_UNAVAILABLE); the others run.
private_apt sid SAPT
declare -A SKV=()
SKVER='' SKPKGVER='' SKSERIES='' SID_RESOLVED='' SID_UNAVAILABLE=''
if resolve_stage kernel-sid SAPT linux-image-amd64; then
	SKVER=$RES_ABI SKPKGVER=$RES_VERSION SKSERIES=$RES_SERIES SID_RESOLVED=$RES_TEXT
	for k in "${!RES[@]}"; do SKV[$k]=${RES[$k]}; done
else
	SID_UNAVAILABLE=$RES_ERR
	log "WARNING: $SID_UNAVAILABLE"
fi

log "kernel $KVER $KPKGVER (kbuild ${KV[linux-kbuild-$KSERIES]}, source ${KV[linux-source-$KSERIES]}); sid kernel ${SKVER:-none} ${SKPKGVER}; busybox-static $BUSYBOX_VER; trixie qemu-system-x86 $TRIXIE_QEMU_VER"

KERNEL_KEY=$({ echo "$KERNEL_RESOLVED"; declare -f stage_kernel extract_vmlinux netdevsim_src module_tree; } | sha)
KERNEL_SID_KEY=$({ echo "$SID_RESOLVED $MIRROR"; declare -f stage_kernel_sid extract_vmlinux netdevsim_src module_tree; } | sha)
ROOTFS_KEY=$({ echo "$ROOTFS_VERSIONS"; echo "debootstrap $DEBOOTSTRAP_VER $MIRROR"; declare -f stage_rootfs; } | sha)
IMAGE_KEY=$({ echo "$KERNEL_KEY $KERNEL_SID_KEY $ROOTFS_KEY busybox-static $BUSYBOX_VER ${INITRD_MODULES[*]}"; declare -f stage_image make_initrd
	cat "$E2E_DIR/guest/testbed-init" "$E2E_DIR/guest/initrd-init" "$E2E_DIR/guest/testbed.service"; } | sha)
QEMU_KEY=$({ echo "qemu-system-x86 $TRIXIE_QEMU_VER debootstrap $DEBOOTSTRAP_VER $MIRROR"; declare -f stage_qemu_trixie; } | sha)

phase "kernel + netdevsim"
stage kernel "$KERNEL_KEY" stage_kernel
KERNEL_DIR=$STAGE_DIR

# The sid kernel stage (about 2 min cold, mostly downloads and a sid
# debootstrap) runs in the background beside the bookworm rootfs and the
# trixie QEMU chroot; the image waits for it.
phase "sid kernel + netdevsim (started in the background)"
SID_LOG=$CACHE/kernel-sid.log
SID_PID='' KERNEL_SID_DIR=''
if [ -n "$SKVER" ]; then
	(stage kernel-sid "$KERNEL_SID_KEY" stage_kernel_sid) >"$SID_LOG" 2>&1 &
	SID_PID=$!
	KERNEL_SID_DIR=$CACHE/kernel-sid/$KERNEL_SID_KEY
fi

phase "rootfs (debootstrap)"
stage rootfs "$ROOTFS_KEY" stage_rootfs
ROOTFS_DIR=$STAGE_DIR

phase "trixie QEMU chroot"
stage qemu-trixie "$QEMU_KEY" stage_qemu_trixie
QEMU_DIR=$STAGE_DIR

phase "wait for the sid kernel"
if [ -n "$SID_PID" ]; then
	wait "$SID_PID" || { tail -n 40 "$SID_LOG" >&2; die "sid kernel stage failed (log: $SID_LOG)"; }
	cat "$SID_LOG" >&2
fi

phase "image + initramfs"
stage image "$IMAGE_KEY" stage_image
IMAGE_DIR=$STAGE_DIR

phase "finish"
cat >"$CACHE/current.env.tmp" <<EOF
# written by e2e/build.sh $(date -u +%FT%TZ); read by e2e/run-guest.sh
BUILDER_HASH=$(builder_hash)
KVER=$KVER
KERNEL_PKG_VERSION=$KPKGVER
VMLINUX=$KERNEL_DIR/vmlinux
INITRD=$IMAGE_DIR/initrd.cpio.gz
ROOT_IMG=$IMAGE_DIR/root.ext4
QEMU_TRIXIE_ROOT=$QEMU_DIR/root
KVER_SID=$SKVER
KERNEL_SID_PKG_VERSION=$SKPKGVER
VMLINUX_SID=${KERNEL_SID_DIR:+$KERNEL_SID_DIR/vmlinux}
INITRD_SID=${KERNEL_SID_DIR:+$IMAGE_DIR/initrd-sid.cpio.gz}
SID_UNAVAILABLE=$(printf '%q' "$SID_UNAVAILABLE")
QEMU_TRIXIE_VERSION=$TRIXIE_QEMU_VER
EOF
mv "$CACHE/current.env.tmp" "$CACHE/current.env"
prune kernel "$KERNEL_DIR"
[ -z "$KERNEL_SID_DIR" ] || prune kernel-sid "$KERNEL_SID_DIR"
prune rootfs "$ROOTFS_DIR"
prune image "$IMAGE_DIR"
prune qemu-trixie "$QEMU_DIR"

report_timings
echo "cache: $CACHE ($(du -sh "$CACHE" 2>/dev/null | cut -f1))"
[ -z "$SID_UNAVAILABLE" ] || log "WARNING: built without the sid kernel: $SID_UNAVAILABLE"
