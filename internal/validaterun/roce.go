package validaterun

import (
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/validate"
)

// roceDevs are the devices `vflag roce show` and `gids` look at: named
// when given, else RoCEDevices.
func roceDevs(cfg *config.Config, h *host.Host, named []string) ([]string, error) {
	if len(named) > 0 {
		return named, nil
	}
	return RoCEDevices(cfg, h)
}

// RoCEPorts are the RoCE settings of every port of the named devices (none
// named: RoCEDevices) on h: `vflag roce show`.
func RoCEPorts(cfg *config.Config, h *host.Host, named []string) ([]validate.RoCEPort, error) {
	devs, err := roceDevs(cfg, h, named)
	if err != nil {
		return nil, err
	}
	return validate.RoCEPorts(h.FS, devs)
}

// GIDTable is the GID table of the named devices (none named: RoCEDevices)
// on h: `vflag roce gids`.
func GIDTable(cfg *config.Config, h *host.Host, named []string) ([]validate.GID, error) {
	devs, err := roceDevs(cfg, h, named)
	if err != nil {
		return nil, err
	}
	return validate.GIDTable(h.FS, devs)
}

// SetRoCE writes settings s (checked by s.Check) to h's sysfs and
// configfs: `vflag roce set`. done is told each value set.
func SetRoCE(h *host.Host, s validate.RoCESettings, done func(string)) error {
	return s.Apply(h.FS, done)
}
