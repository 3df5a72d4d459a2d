package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/internal/doctor"
)

func (a *app) doctorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check whether this host is ready for VF-LAG and say how to fix what it lacks (reads only)",
		Long: `Check whether this host is ready for VF-LAG, for the config's groups or, without
a readable config, for every SR-IOV capable NIC found. One check per prerequisite,
grouped by area: platform (IOMMU, vfio-pci, SR-IOV on the PFs), firmware (numvfs
against sriov_totalvfs, mstconfig's SRIOV_EN/NUM_OF_VFS/LINK_TYPE_P1/P2/
LAG_RESOURCE_ALLOCATION, devlink dev info), nic (one NIC, driver, devlink eswitch,
mlx5 debugfs, RoCE alike on both ports), kernel (VF-LAG features of the version,
bonding and max_bonds, openvswitch), daemons (ovs-vswitchd and its version's known
problems, OVSDB, libvirt) and conflicts (NetworkManager, foreign bonds, a VF count
set by someone else). Every fail or warn comes with its fix. It never writes.

Exit 0 when the host is ready (no check failed; warnings allowed), 1 when not.
-o json prints {"checks":[{"name","status","detail","fix","area","group"}],"ready"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runDoctor(cmd) },
	}
	cmd.Flags().String("junit", "", "also write the checks as JUnit XML to this file")
	_ = a.v.BindPFlag("doctor-junit", cmd.Flags().Lookup("junit"))
	return cmd
}

func (a *app) runDoctor(cmd *cobra.Command) error {
	cfg, cfgErr := a.loadConfig(true)
	t := doctor.TargetFromConfig(cfg)
	t.ConfigError = cfgErr
	t.StateDir = a.stateDir()
	h, err := a.openHost(cfg, cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	rep := doctor.Run(cmd.Context(), doctor.HostEnv(h), t)
	if path := a.v.GetString("doctor-junit"); path != "" {
		if err := rep.WriteJUnitFile(path); err != nil {
			return fmt.Errorf("--junit %s: %w", path, err)
		}
	}
	if a.v.GetString("output") == "json" {
		err = rep.WriteJSON(a.stdout)
	} else {
		err = rep.WriteText(a.stdout, isTerminal(a.stdout) && os.Getenv("NO_COLOR") == "")
	}
	if err != nil {
		return err
	}
	if !rep.Ready {
		return exitError{code: 1}
	}
	return nil
}
