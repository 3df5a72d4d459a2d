package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vflag/vflag/internal/sysfs"
)

// RoCEPort is one port as `vflag roce show` shows it.
type RoCEPort struct {
	Dev          string `json:"dev"`
	Port         int    `json:"port"`
	State        string `json:"state"`
	RoCEMode     string `json:"default_roce_mode"`
	TrafficClass *int   `json:"traffic_class"`
	TTL          *int   `json:"ttl"`
	TCSupported  bool   `json:"tc_supported"`
}

// RoCEPorts reads every port of the RDMA devices devs.
func RoCEPorts(f sysfs.FS, devs []string) ([]RoCEPort, error) {
	var out []RoCEPort
	for _, dev := range devs {
		ports, err := Ports(f, dev)
		if err != nil {
			return nil, err
		}
		// The default RoCE mode is only readable through the device's
		// configfs group, which mkdir creates.
		if err := EnsureCMGroup(f, dev); err != nil {
			return nil, err
		}
		for _, p := range ports {
			rp := RoCEPort{Dev: dev, Port: p}
			rp.State, _ = PortState(f, dev, p)
			if rp.RoCEMode, err = ReadRoCEMode(f, dev, p); err != nil {
				return nil, err
			}
			tc, err := ReadTC(f, dev, p)
			if err != nil {
				return nil, err
			}
			rp.TrafficClass, rp.TTL, rp.TCSupported = tc.TrafficClass, tc.TTL, tc.Supported
			out = append(out, rp)
		}
	}
	return out, nil
}

// GIDTable is the GID tables of every port of the RDMA devices devs.
func GIDTable(f sysfs.FS, devs []string) ([]GID, error) {
	all := []GID{}
	for _, dev := range devs {
		ports, err := Ports(f, dev)
		if err != nil {
			return nil, err
		}
		for _, p := range ports {
			gs, err := GIDs(f, dev, p)
			if err != nil {
				return nil, err
			}
			all = append(all, gs...)
		}
	}
	return all, nil
}

// RoCESettings are what `vflag roce set` writes to one port of a device.
type RoCESettings struct {
	Dev  string
	Port int
	Mode *string // the default RoCE mode (nil: unchanged)
	TC   TCChange
}

// Check checks every value before anything is written, and normalizes Mode.
func (s *RoCESettings) Check() error {
	var errs []string
	if s.Mode != nil {
		m, err := ParseRoCEMode(*s.Mode)
		if err != nil {
			errs = append(errs, err.Error())
		}
		s.Mode = &m
	}
	if err := s.TC.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if s.Port < 1 {
		errs = append(errs, fmt.Sprintf("port: %d is not a port number (1..)", s.Port))
	}
	if len(errs) > 0 {
		return fmt.Errorf("roce set %s: %s", s.Dev, strings.Join(errs, "; "))
	}
	if s.Mode == nil && s.TC.TClass() == nil && s.TC.TTL == nil {
		return fmt.Errorf("roce set %s: nothing to set (--mode, --tclass, --dscp or --ttl)", s.Dev)
	}
	return nil
}

// Apply writes the checked settings; done is told each value set.
func (s RoCESettings) Apply(f sysfs.FS, done func(string)) error {
	dev, port, tcs := s.Dev, s.Port, s.TC.TClass() != nil || s.TC.TTL != nil
	ports, err := Ports(f, dev)
	if err != nil {
		return fmt.Errorf("roce set: %w", err)
	}
	if !slices.Contains(ports, port) {
		return fmt.Errorf("roce set %s: port: %d is not a port of %s (ports %v)", dev, port, dev, ports)
	}
	if tcs {
		if tc, err := ReadTC(f, dev, port); err != nil {
			return err
		} else if !tc.Supported {
			return fmt.Errorf("roce set %s: %s/tc/%d does not exist: traffic_class and ttl are MLNX_OFED-only files (upstream: rdma_cm default_roce_tos)", dev, dev, port)
		}
	}
	if s.Mode != nil {
		if err := SetRoCEMode(f, dev, port, *s.Mode); err != nil {
			return err
		}
		done(fmt.Sprintf("%s port %d: default RoCE mode %q", dev, port, *s.Mode))
	}
	if tcs {
		if err := ApplyTC(f, dev, port, s.TC); err != nil {
			return err
		}
		if tc := s.TC.TClass(); tc != nil {
			done(fmt.Sprintf("%s port %d: traffic_class %d", dev, port, *tc))
		}
		if s.TC.TTL != nil {
			done(fmt.Sprintf("%s port %d: ttl %d", dev, port, *s.TC.TTL))
		}
	}
	return nil
}
