#!/bin/sh
# vflag postinstall: make systemd see the units. Nothing is enabled or
# started here: write /etc/vflag/vflag.yaml, then
#   systemctl enable vflag-pre.service vflag.service
#   vflag udev-rules > /etc/udev/rules.d/70-vflag.rules   (host-specific names)
# and restart libvirtd once so it loads /etc/libvirt/hooks/qemu.d/vflag.
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload || true
fi
exit 0
