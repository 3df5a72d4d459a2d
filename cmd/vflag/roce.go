package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/internal/validate"
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

// roceFS opens the host and lists the RDMA devices to look at: named when
// given, else those of the groups' PFs, else all. The config is optional
// (it only narrows the devices, and gives the simulated host's spec).
func (a *app) roceFS(named []string) (sysfs.FS, []string, func(), error) {
	cfg, err := a.loadConfig(true)
	if err != nil {
		return nil, nil, nil, err
	}
	k, f, closeHost, err := a.host(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(named) > 0 {
		return f, named, closeHost, nil
	}
	var devs []string
	if cfg != nil {
		var pcis []string
		for _, g := range cfg.Groups {
			for _, ref := range g.PFs {
				if pf, err := eswitch.ResolvePF(k, f, ref); err == nil && pf.Addr != "" {
					pcis = append(pcis, string(pf.Addr))
				}
			}
		}
		ds, err := validate.RDMADevicesOf(f, pcis)
		if err != nil {
			closeHost()
			return nil, nil, nil, err
		}
		for _, d := range ds {
			devs = append(devs, d.Name)
		}
	}
	if len(devs) == 0 {
		ds, err := validate.AllRDMADevices(f)
		if err != nil {
			closeHost()
			return nil, nil, nil, err
		}
		for _, d := range ds {
			devs = append(devs, d.Name)
		}
	}
	return f, devs, closeHost, nil
}

// RoCEPort is one port as `vflag roce show` prints it.
type RoCEPort struct {
	Dev          string `json:"dev"`
	Port         int    `json:"port"`
	State        string `json:"state"`
	RoCEMode     string `json:"default_roce_mode"`
	TrafficClass *int   `json:"traffic_class"`
	TTL          *int   `json:"ttl"`
	TCSupported  bool   `json:"tc_supported"`
}

func (a *app) roceShow(args []string) error {
	f, devs, closeHost, err := a.roceFS(args)
	if err != nil {
		return err
	}
	defer closeHost()
	var out []RoCEPort
	for _, dev := range devs {
		ports, err := validate.Ports(f, dev)
		if err != nil {
			return err
		}
		// The default RoCE mode is only readable through the device's
		// configfs group, which mkdir creates.
		if err := validate.EnsureCMGroup(f, dev); err != nil {
			return err
		}
		for _, p := range ports {
			rp := RoCEPort{Dev: dev, Port: p}
			rp.State, _ = validate.PortState(f, dev, p)
			if rp.RoCEMode, err = validate.ReadRoCEMode(f, dev, p); err != nil {
				return err
			}
			tc, err := validate.ReadTC(f, dev, p)
			if err != nil {
				return err
			}
			rp.TrafficClass, rp.TTL, rp.TCSupported = tc.TrafficClass, tc.TTL, tc.Supported
			out = append(out, rp)
		}
	}
	if a.v.GetString("output") == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
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
		fmt.Fprintf(a.stdout, "%-14s %-4d %-10s %-11s %-13s %s\n", p.Dev, p.Port, pipeline.OrDash(p.State), p.RoCEMode, tcs, ttl)
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
	f, devs, closeHost, err := a.roceFS(args)
	if err != nil {
		return err
	}
	defer closeHost()
	all := []validate.GID{}
	for _, dev := range devs {
		ports, err := validate.Ports(f, dev)
		if err != nil {
			return err
		}
		for _, p := range ports {
			gs, err := validate.GIDs(f, dev, p)
			if err != nil {
				return err
			}
			all = append(all, gs...)
		}
	}
	if a.v.GetString("output") == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	fmt.Fprintln(a.stdout, validate.FormatGIDs(all))
	fmt.Fprintf(a.stdout, "n_gids_found=%d\n", len(all))
	return nil
}

func (a *app) roceSet(cmd *cobra.Command, dev string) error {
	fl := cmd.Flags()
	port, _ := fl.GetInt("port")
	var change validate.TCChange
	if fl.Changed("tclass") {
		v, _ := fl.GetInt("tclass")
		change.TrafficClass = &v
	}
	if fl.Changed("dscp") {
		v, _ := fl.GetInt("dscp")
		change.DSCP = &v
	}
	if fl.Changed("ttl") {
		v, _ := fl.GetInt("ttl")
		change.TTL = &v
	}
	mode, _ := fl.GetString("mode")
	// Every value is checked before anything is written.
	var errs []string
	if fl.Changed("mode") {
		m, err := validate.ParseRoCEMode(mode)
		if err != nil {
			errs = append(errs, err.Error())
		}
		mode = m
	}
	if err := change.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if port < 1 {
		errs = append(errs, fmt.Sprintf("port: %d is not a port number (1..)", port))
	}
	if len(errs) > 0 {
		return fmt.Errorf("roce set %s: %s", dev, strings.Join(errs, "; "))
	}
	if !fl.Changed("mode") && change.TClass() == nil && change.TTL == nil {
		return fmt.Errorf("roce set %s: nothing to set (--mode, --tclass, --dscp or --ttl)", dev)
	}
	f, _, closeHost, err := a.roceFS([]string{dev})
	if err != nil {
		return err
	}
	defer closeHost()
	ports, err := validate.Ports(f, dev)
	if err != nil {
		return fmt.Errorf("roce set: %w", err)
	}
	if !slices.Contains(ports, port) {
		return fmt.Errorf("roce set %s: port: %d is not a port of %s (ports %v)", dev, port, dev, ports)
	}
	if change.TClass() != nil || change.TTL != nil {
		if tc, err := validate.ReadTC(f, dev, port); err != nil {
			return err
		} else if !tc.Supported {
			return fmt.Errorf("roce set %s: %s/tc/%d does not exist: traffic_class and ttl are MLNX_OFED-only files (upstream: rdma_cm default_roce_tos)", dev, dev, port)
		}
	}
	if fl.Changed("mode") {
		if err := validate.SetRoCEMode(f, dev, port, mode); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s port %d: default RoCE mode %q\n", dev, port, mode)
	}
	if change.TClass() != nil || change.TTL != nil {
		if err := validate.ApplyTC(f, dev, port, change); err != nil {
			return err
		}
		if tc := change.TClass(); tc != nil {
			fmt.Fprintf(a.stdout, "%s port %d: traffic_class %d\n", dev, port, *tc)
		}
		if change.TTL != nil {
			fmt.Fprintf(a.stdout, "%s port %d: ttl %d\n", dev, port, *change.TTL)
		}
	}
	return nil
}
