#!/bin/bash
# check.sh DEB: the package holds what it must, installs into an empty root
# (dpkg --root, scripts chrootless), and removes and purges cleanly.
set -euo pipefail
deb=$1
fail() { echo "check.sh: $*" >&2; exit 1; }
list=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
for want in /usr/bin/vflag /usr/bin/vflag-hook /usr/lib/systemd/system/vflag-pre.service /usr/lib/systemd/system/vflag.service /usr/lib/udev/rules.d/71-vflag-representors.rules \
    /etc/libvirt/hooks/qemu.d/vflag /etc/libvirt/hooks/network.d/vflag /usr/share/doc/vflag/examples/vflag.yaml \
    /usr/share/doc/vflag/examples/ansible/playbook.yml /usr/share/man/man1/vflag.1.gz \
    /usr/share/man/man1/vflag-hook-qemu.1.gz /usr/share/man/man1/vflag-up.1.gz /usr/share/man/man5/vflag.yaml.5.gz \
    /usr/share/doc/vflag/README.md /usr/share/doc/vflag/docs/troubleshooting.md /usr/share/doc/vflag/docs/monitoring/vflag-alerts.yml \
    /usr/share/bash-completion/completions/vflag /usr/share/zsh/vendor-completions/_vflag \
    /usr/share/fish/vendor_completions.d/vflag.fish /var/lib/vflag/; do
  grep -qxF "$want" <<<"$list" || fail "$deb lacks $want"
done
long=$(dpkg-deb -c "$deb"); info=$(dpkg-deb -I "$deb")
grep -q '^-rwxr-xr-x .* ./etc/libvirt/hooks/qemu.d/vflag$' <<<"$long" || fail "hook not executable"
grep -q '^-rwxr-xr-x .* ./etc/libvirt/hooks/network.d/vflag$' <<<"$long" || fail "network hook not executable"
grep -q 'Depends: libvirt0' <<<"$info" || fail "no Depends"
root=$(mktemp -d); trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/var/lib/dpkg/{info,updates,triggers} && : >"$root/var/lib/dpkg/status" && : >"$root/var/lib/dpkg/available"
dpkg() { command dpkg --root="$root" --force-script-chrootless --force-depends --force-not-root --log=/dev/null "$@"; }
dpkg -i "$deb" >/dev/null 2>&1
[ -x "$root/usr/bin/vflag" ] || fail "install: no binary"
"$root/usr/bin/vflag" --help >/dev/null || fail "installed binary does not run"
"$root/usr/bin/vflag-hook" --version >/dev/null || fail "installed vflag-hook does not run"
if ldd "$root/usr/bin/vflag-hook" 2>&1 | grep -q libvirt; then fail "vflag-hook loads libvirt (build it with -tags vflag_nolibvirt)"; fi
grep -q 'hook qemu' "$root/etc/libvirt/hooks/qemu.d/vflag" || fail "install: no hook"
grep -q 'hook network' "$root/etc/libvirt/hooks/network.d/vflag" || fail "install: no network hook"
dpkg -r vflag >/dev/null 2>&1
[ ! -e "$root/usr/bin/vflag" ] && [ ! -e "$root/usr/bin/vflag-hook" ] || fail "remove left a binary"
[ -e "$root/etc/libvirt/hooks/qemu.d/vflag" ] || fail "remove dropped the conffile (only purge may)"
dpkg -P vflag >/dev/null 2>&1
[ ! -e "$root/etc/libvirt/hooks/qemu.d/vflag" ] || fail "purge left the hook"
[ ! -e "$root/etc/libvirt/hooks/network.d/vflag" ] || fail "purge left the network hook"
echo "check.sh: $deb: contents, install, remove and purge OK"
