package main

// Shell completion of flag values (cobra's __complete, used by the bash,
// zsh and fish scripts of `vflag completion` and the packages), and
// `vflag version`.

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/internal/cfgdecode"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/validaterun"
)

// fixedValues completes a flag from a list of "value\tdescription".
func fixedValues(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeOutput offers the formats the command takes: prometheus for
// status, and before a command is named (`vflag -o <TAB> status`).
func completeOutput(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	out := []string{"text\thuman-readable", "json\tmachine-readable"}
	if cmd.CommandPath() == "vflag status" || !cmd.HasParent() {
		out = append(out, "prometheus\tnode_exporter textfile metrics (status only)")
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeGroups offers the group names of the config --config names
// (VFLAG_CONFIG, default /etc/vflag/vflag.yaml), with their PFs. It reads
// only the groups' names, so a config with an error elsewhere still
// completes; one that cannot be read or parsed completes nothing.
func (a *app) completeGroups(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return configGroupNames(a.v.GetString("config")), cobra.ShellCompDirectiveNoFileComp
}

// configGroupNames is "name\tpfs" for each group of the config at path.
func configGroupNames(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	raw, err := cfgdecode.YAML(data)
	if err != nil {
		return nil
	}
	groups, _ := raw["groups"].([]any)
	var out []string
	for _, g := range groups {
		m, _ := g.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" || strings.ContainsAny(name, "\t\n ") {
			continue
		}
		var pfs []string
		if l, ok := m["pfs"].([]any); ok {
			for _, p := range l {
				pfs = append(pfs, fmt.Sprint(p))
			}
		}
		if len(pfs) > 0 {
			name += "\t" + strings.Join(pfs, ", ")
		}
		out = append(out, name)
	}
	return out
}

// registerCompletions attaches the completion of every flag with a fixed
// or config-given set of values.
func (a *app) registerCompletions(root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("output", completeOutput)
	for _, c := range root.Commands() {
		switch c.Name() {
		case "up":
			_ = c.RegisterFlagCompletionFunc("stage", fixedValues(
				string(pipeline.StageAll)+"\teverything",
				string(pipeline.StagePre)+"\tonly what needs neither the network, OVS nor libvirt (vflag-pre.service at boot)"))
		case "validate":
			_ = c.RegisterFlagCompletionFunc("group", a.completeGroups)
			_ = c.RegisterFlagCompletionFunc("rdma-tool", fixedValues("ib_send_bw", "rping", "ucmatose", "ibv_rc_pingpong"))
			_ = c.RegisterFlagCompletionFunc("roce-mode", fixedValues("v1", "v2"))
			_ = c.RegisterFlagCompletionFunc("bond-mode", fixedValues(validaterun.BondModes...))
		case "roce":
			for _, sub := range c.Commands() {
				if sub.Name() == "set" {
					_ = sub.RegisterFlagCompletionFunc("mode", fixedValues("v1\tIB/RoCE v1", "v2\tRoCE v2"))
				}
			}
		}
	}
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print vflag's version (the same as --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(a.stdout, "vflag %s\n", version)
			return err
		},
	}
}
