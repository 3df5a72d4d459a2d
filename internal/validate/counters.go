package validate

import (
	"fmt"
	"path"
	"strconv"
	"sync"

	"github.com/safchain/ethtool"

	"github.com/vflag/vflag/internal/sysfs"
)

// Sample is one interface's counters at one instant, both directions summed.
type Sample struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Counters reads per-interface traffic counters.
type Counters interface {
	Read(ifname string) (Sample, error)
	// Source says which counters Read used for ifname ("ethtool *_phy", "statistics").
	Source(ifname string) string
}

// SysfsCounters reads the generic /sys/class/net/<if>/statistics counters.
type SysfsCounters struct{ FS sysfs.FS }

func (s SysfsCounters) Read(ifname string) (Sample, error) {
	var out Sample
	for _, f := range []struct {
		name string
		dst  *uint64
	}{{"rx_packets", &out.Packets}, {"tx_packets", &out.Packets}, {"rx_bytes", &out.Bytes}, {"tx_bytes", &out.Bytes}} {
		p := path.Join("/sys/class/net", ifname, "statistics", f.name)
		v, err := sysfs.ReadString(s.FS, p)
		if err != nil {
			return Sample{}, fmt.Errorf("read %s: %w", p, err)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Sample{}, fmt.Errorf("read %s: %q: %w", p, v, err)
		}
		*f.dst += n
	}
	return out, nil
}

func (SysfsCounters) Source(string) string { return "statistics" }

// EthtoolCounters reads the physical port counters of `ethtool -S`
// (rx_packets_phy/tx_packets_phy, rx_bytes_phy/tx_bytes_phy: mlx5 PFs)
// where the driver has them, and falls back to the generic counters.
type EthtoolCounters struct {
	Fallback Counters

	mu  sync.Mutex
	et  *ethtool.Ethtool
	phy map[string]bool
}

// NewEthtoolCounters opens the ethtool ioctl socket.
func NewEthtoolCounters(fallback Counters) (*EthtoolCounters, error) {
	et, err := ethtool.NewEthtool()
	if err != nil {
		return nil, fmt.Errorf("ethtool: %w", err)
	}
	return &EthtoolCounters{Fallback: fallback, et: et, phy: map[string]bool{}}, nil
}

// Close releases the socket.
func (e *EthtoolCounters) Close() { e.et.Close() }

func (e *EthtoolCounters) Read(ifname string) (Sample, error) {
	e.mu.Lock()
	stats, err := e.et.Stats(ifname)
	e.mu.Unlock()
	if err == nil {
		rp, ok1 := stats["rx_packets_phy"]
		tp, ok2 := stats["tx_packets_phy"]
		if ok1 && ok2 {
			e.mu.Lock()
			e.phy[ifname] = true
			e.mu.Unlock()
			return Sample{Packets: rp + tp, Bytes: stats["rx_bytes_phy"] + stats["tx_bytes_phy"]}, nil
		}
	}
	return e.Fallback.Read(ifname)
}

func (e *EthtoolCounters) Source(ifname string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.phy[ifname] {
		return "ethtool -S rx/tx_packets_phy"
	}
	return e.Fallback.Source(ifname)
}
