package main

import (
	"fmt"
	"path"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// udevNameCommand is the PROGRAM of the packaged udev rule
// (packaging/udev/71-vflag-representors.rules).
func (a *app) udevNameCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "udev-name IFNAME",
		Short:  "Print the <pf>_<vf> name of a VF representor (udev PROGRAM); exit 1 for anything else",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, f, closeHost, err := a.host(nil)
			if err != nil {
				return err
			}
			defer closeHost()
			name, err := representorName(f, args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, name)
			return err
		},
	}
}

var repPortRE = regexp.MustCompile(`^pf(\d+)vf(\d+)$`)

// representorName is "<uplink>_<vf>" for a VF representor: the uplink is
// the netdev of the representor's parent device that is not itself a
// representor (mlx5: one per PCI function; netdevsim: the first port).
func representorName(f sysfs.FS, rep string) (string, error) {
	if err := eswitch.ValidIfName(rep); err != nil {
		return "", err
	}
	ppn, err := eswitch.PhysPortName(f, rep)
	if err != nil {
		return "", err
	}
	m := repPortRE.FindStringSubmatch(ppn)
	if m == nil {
		return "", fmt.Errorf("%s is not a VF representor (phys_port_name %q)", rep, ppn)
	}
	dev, err := sriov.Host{FS: f}.DeviceOfNetdev(rep)
	if err != nil {
		return "", err
	}
	names, err := f.ReadDir(path.Join(dev.Dir(), "net"))
	if err != nil {
		return "", fmt.Errorf("netdevs of %s: %w", dev, err)
	}
	for _, n := range names {
		if p, err := eswitch.PhysPortName(f, n); err == nil && p != "" && !repPortRE.MatchString(p) {
			name := n + "_" + m[2]
			if err := eswitch.ValidIfName(name); err != nil {
				return "", fmt.Errorf("%s: %w", rep, err)
			}
			return name, nil
		}
	}
	return "", fmt.Errorf("%s: no uplink netdev under %s", rep, dev)
}
