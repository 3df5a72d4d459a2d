package eswitch

import "fmt"

// EthtoolStats is what a Kernel may add to read a device's driver
// statistics ("ethtool -S $name": ETHTOOL_GSTRINGS/ETHTOOL_GSTATS). The
// real Netlink and the simulated host do. Which names a driver reports is
// its own: an mlx5 representor has rx_packets/tx_packets (its software
// rings: the packets that took the slow path) and
// vport_rx_packets/vport_tx_packets (the eswitch vport: every packet of
// the VF, in hardware or not).
type EthtoolStats interface {
	Stats(name string) (map[string]uint64, error)
}

// AsEthtoolStats returns k's EthtoolStats, or an error wrapping ErrNotSupported.
func AsEthtoolStats(k Kernel) (EthtoolStats, error) {
	s, ok := k.(EthtoolStats)
	if !ok {
		return nil, fmt.Errorf("ethtool -S: %w", ErrNotSupported)
	}
	return s, nil
}

var _ EthtoolStats = Netlink{}

// Stats implements EthtoolStats ("ethtool -S $name").
func (n Netlink) Stats(name string) (map[string]uint64, error) {
	e, done, err := n.ethtool()
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := e.Stats(name)
	if err != nil {
		return nil, fmt.Errorf("ethtool -S %s: %w", name, err)
	}
	return st, nil
}
