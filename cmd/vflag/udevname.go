package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/internal/install"
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
			h, err := a.openHost(nil, nil)
			if err != nil {
				return err
			}
			defer h.Close()
			name, err := install.RepresentorName(h.FS, args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, name)
			return err
		},
	}
}
