package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/internal/validaterun"
)

func (a *app) roceCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "roce",
		Short: "Show and set RoCE settings: default RoCE mode (rdma_cm configfs), GIDs, traffic class and TTL",
	}
	show := &cobra.Command{
		Use:   "show [DEV...]",
		Short: "Per device and port: default RoCE mode, port state, traffic_class, ttl (default: the devices behind the config's PFs, else all)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.roceShow(args)
		},
	}
	gids := &cobra.Command{
		Use:   "gids [DEV...]",
		Short: "The GID tables (index, GID, IPv4, RoCE version, netdev) like show_gids",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.roceGIDs(args)
		},
	}
	set := &cobra.Command{
		Use:   "set DEV",
		Short: "Set the default RoCE mode (--mode v1|v2), traffic class (--tclass 0-255 or --dscp 0-63, written as dscp*4) and --ttl 0-255 of a port",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.roceSet(cmd, args[0])
		},
	}
	f := set.Flags()
	f.Int("port", 1, "port number")
	f.String("mode", "", "default RoCE mode: v1 (\"IB/RoCE v1\") or v2 (\"RoCE v2\")")
	f.Int("tclass", 0, "traffic class 0-255 (-1 clears)")
	f.Int("dscp", 0, "DSCP 0-63, written as traffic class dscp*4")
	f.Int("ttl", 0, "TTL 0-255")
	root.AddCommand(show, gids, set)
	return root
}

// roceHost opens the host for `vflag roce`. The config is optional (it
// only narrows the devices, and gives the simulated host's spec).
func (a *app) roceHost() (*config.Config, *host.Host, error) {
	cfg, err := a.loadConfig(true)
	if err != nil {
		return nil, nil, err
	}
	h, err := a.openHost(cfg, cfg)
	return cfg, h, err
}

func (a *app) roceShow(args []string) error {
	cfg, h, err := a.roceHost()
	if err != nil {
		return err
	}
	defer h.Close()
	out, err := validaterun.RoCEPorts(cfg, h, args)
	if err != nil {
		return err
	}
	if a.v.GetString("output") == "json" {
		return writeJSON(a.stdout, out)
	}
	if len(out) == 0 {
		fmt.Fprintln(a.stdout, "no RDMA devices")
		return nil
	}
	fmt.Fprintf(a.stdout, "%-14s %-4s %-10s %-11s %-13s %s\n", "DEV", "PORT", "STATE", "ROCE MODE", "TRAFFIC CLASS", "TTL")
	for _, p := range out {
		tcs, ttl := "n/a", "n/a"
		if p.TCSupported {
			tcs, ttl = optInt(p.TrafficClass), optInt(p.TTL)
		}
		fmt.Fprintf(a.stdout, "%-14s %-4d %-10s %-11s %-13s %s\n", p.Dev, p.Port, report.OrDash(p.State), p.RoCEMode, tcs, ttl)
	}
	return nil
}

func optInt(v *int) string {
	if v == nil {
		return "unset"
	}
	return fmt.Sprint(*v)
}

func (a *app) roceGIDs(args []string) error {
	cfg, h, err := a.roceHost()
	if err != nil {
		return err
	}
	defer h.Close()
	all, err := validaterun.GIDTable(cfg, h, args)
	if err != nil {
		return err
	}
	if a.v.GetString("output") == "json" {
		return writeJSON(a.stdout, all)
	}
	fmt.Fprintln(a.stdout, validate.FormatGIDs(all))
	fmt.Fprintf(a.stdout, "n_gids_found=%d\n", len(all))
	return nil
}

func (a *app) roceSet(cmd *cobra.Command, dev string) error {
	fl := cmd.Flags()
	s := validate.RoCESettings{Dev: dev}
	s.Port, _ = fl.GetInt("port")
	if fl.Changed("mode") {
		m, _ := fl.GetString("mode")
		s.Mode = &m
	}
	if fl.Changed("tclass") {
		v, _ := fl.GetInt("tclass")
		s.TC.TrafficClass = &v
	}
	if fl.Changed("dscp") {
		v, _ := fl.GetInt("dscp")
		s.TC.DSCP = &v
	}
	if fl.Changed("ttl") {
		v, _ := fl.GetInt("ttl")
		s.TC.TTL = &v
	}
	if err := s.Check(); err != nil {
		return err
	}
	_, h, err := a.roceHost()
	if err != nil {
		return err
	}
	defer h.Close()
	return validaterun.SetRoCE(h, s, func(line string) { fmt.Fprintln(a.stdout, line) })
}
