# Shared by build.sh and run-guest.sh (sourced, not executed).
# Host side of the vflag e2e test bed. Needs bash, root.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${VFLAG_E2E_CACHE:-/var/cache/vflag-e2e}
MIRROR=${VFLAG_E2E_MIRROR:-http://deb.debian.org/debian}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The files whose content makes up the built image. run-guest.sh refuses a
# cache built from other versions of them (see builder_hash in current.env).
builder_files() {
	printf '%s\n' "$E2E_DIR/common.sh" "$E2E_DIR/build.sh"
	find "$E2E_DIR/guest" -type f | LC_ALL=C sort
}
builder_hash() {
	builder_files | while read -r f; do
		printf '%s  %s\n' "$(sha256sum <"$f" | cut -c1-64)" "${f#"$E2E_DIR"/}"
	done | sha256sum | cut -c1-16
}

# Unmount everything mounted at or below $1 (deepest first). Used before
# deleting a tree that once was a chroot: a leftover bind mount of /dev or
# /proc there would make rm -rf reach into the host.
sweep_mounts() {
	local top=$1 mp
	[ -e "$top" ] || return 0
	top=$(realpath "$top")
	# mountinfo field 5 is the mount point (octal escapes for spaces; our paths have none)
	awk -v t="$top" '$5 == t || index($5, t "/") == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r mp; do
			log "unmounting leftover mount $mp"
			umount -l "$mp" || true
		done
}

# rm -rf that first clears mounts below the tree and never crosses into
# another file system.
safe_rm() {
	local d
	for d in "$@"; do
		[ -e "$d" ] || continue
		sweep_mounts "$d"
		rm -rf --one-file-system "$d"
	done
}
