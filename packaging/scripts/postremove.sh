#!/bin/sh
# vflag postremove: the host's VF-LAG state stays (undo it with `vflag down`
# before removing the package); systemd forgets the units.
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload || true
fi
exit 0
