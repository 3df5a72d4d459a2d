// Package packaging holds the files vflag installs on a host: systemd units
// and the libvirt qemu hook (written by `vflag install` / `vflag
// install-hook`, shipped by the .deb/.rpm built with nfpm.yaml). They name
// the packaged paths (/usr/bin/vflag, /etc/vflag/vflag.yaml,
// /var/lib/vflag); Render substitutes others.
package packaging

import (
	"embed"
	"strings"
)

//go:embed systemd/*.service libvirt/qemu-hook libvirt/network-hook
var files embed.FS

// Marker is in every file vflag installs: uninstall removes only files that carry it.
const Marker = "Installed by vflag."

// Packaged paths, as the files name them. The hook scripts run HookBinary
// when it is there, else Binary: rendered for another Binary, HookBinary is
// that path with "-hook" appended.
const (
	Binary     = "/usr/bin/vflag"
	HookBinary = Binary + "-hook"
	Config     = "/etc/vflag/vflag.yaml"
	StateDir   = "/var/lib/vflag"
)

// Units are the systemd units, by file name.
var Units = []string{"vflag-pre.service", "vflag.service"}

// Paths are the paths a file refers to.
type Paths struct{ Binary, Config, StateDir string }

// Render returns a file ("systemd/vflag.service", "libvirt/qemu-hook",
// "libvirt/network-hook") with
// the packaged paths replaced by p's (empty fields keep the packaged ones).
func Render(name string, p Paths) ([]byte, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	s := string(b)
	for _, r := range [][2]string{{Binary, p.Binary}, {Config, p.Config}, {StateDir, p.StateDir}} {
		if r[1] != "" {
			s = strings.ReplaceAll(s, r[0], r[1])
		}
	}
	return []byte(s), nil
}
