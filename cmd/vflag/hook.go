package main

// `vflag hook qemu`: the libvirt qemu hook (/etc/libvirt/hooks/qemu.d/vflag).
// The logic is internal/hook's; this is the command and the call.

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/hook"
	"github.com/vflag/vflag/internal/host"
)

func (a *app) hookCommand() *cobra.Command {
	hookCmd := &cobra.Command{
		Use:   "hook",
		Short: "libvirt hook entry points (installed by install-hook)",
	}
	qemu := &cobra.Command{
		Use:   "qemu DOMAIN OPERATION SUB-OPERATION [EXTRA]",
		Short: "libvirt qemu hook: ready the host side of vflag's VFs on prepare/start, reset it on release",
		Long: `Run by libvirt as /etc/libvirt/hooks/qemu.d/vflag with the domain XML on stdin.
On "prepare begin" and "start begin" it makes the host side of every VF vflag manages that the
domain uses ready: PF up, VF MAC = the domain's MAC (through the PF), representor up and in the
group's bridge with the VF's VLAN tag. It refuses (exit 1, reason on stderr: libvirt aborts the
start) when that is impossible. On "release end" it resets what it did. Domains without a VF of
vflag's pass at once, silently. It never calls libvirt.`,
		Args: cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if p, _ := cmd.Flags().GetString("domain-xml"); p != "-" {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer func() { _ = f.Close() }()
				in = f
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), hook.Timeout)
			defer cancel()
			return a.runHook(ctx, args[0], args[1], args[2], in)
		},
	}
	qemu.Flags().String("domain-xml", "-", "read the domain XML from this file instead of stdin (testing, debugging)")
	network := &cobra.Command{
		Use:   "network NETWORK OPERATION SUB-OPERATION [EXTRA]",
		Short: "libvirt network hook: the VLAN of a VF pool port goes on its representor's OVS port",
		Long: `Run by libvirt as /etc/libvirt/hooks/network.d/vflag with the network (and port) XML on stdin.
On "port-created begin" of a port of a group's VF pool (a network of vflag's, switchdev group) it
puts the port's portgroup VLAN (tag, vlan_mode, trunks, from vflag's metadata in the network) on
the OVS port of the allocated VF's representor, and fails (libvirt then fails the domain's start)
when it cannot. On "port-deleted" it puts back the representor's own settings. Networks that are
not vflag's, legacy groups' (libvirt sets the VLAN on the VF) and other events pass at once. It
never calls libvirt.`,
		Args: cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), hook.Timeout)
			defer cancel()
			gate := bootgate.New(a.stateDir())
			return hook.RunNetwork(ctx, hook.NetworkOptions{
				Gate:    &gate,
				Network: args[0], Op: args[1], SubOp: args[2], XML: cmd.InOrStdin(),
				Config: func() (*config.Config, error) { return a.loadConfig(true) },
				Host:   func(cfg *config.Config) (*host.Host, error) { return a.openHost(cfg, cfg) },
				Log:    a.log, Stderr: a.stderr,
			})
		},
	}
	hookCmd.AddCommand(qemu, network)
	return hookCmd
}

// hookArgsAreLibvirts refuses a `hook qemu` command line in which an
// argument after "qemu" would be read as a flag although libvirt put it
// there: libvirt passes the domain's name first, and a domain named
// "--state-dir=/tmp/x" or "--config=..." must not steer the hook, which
// runs as root. The installed hook passes "--" before libvirt's arguments
// (everything after it is an argument); without it (a hook script of an
// earlier release, a call by hand), only --domain-xml may follow "qemu".
func hookArgsAreLibvirts(args []string) error {
	i := slices.Index(args, "qemu")
	if i < 1 || args[i-1] != "hook" {
		i = slices.Index(args, "network")
		if i < 1 || args[i-1] != "hook" {
			return nil
		}
	}
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--":
			return nil
		case a == "--domain-xml":
			j++ // its value
		case strings.HasPrefix(a, "--domain-xml="), a == "-" || !strings.HasPrefix(a, "-"):
		default:
			return fmt.Errorf("hook %s: argument %q would be read as an option, but libvirt passes a domain or network name there: refused (a hook script must pass \"--\" before libvirt's arguments: run `vflag install-hook`)", args[i], a)
		}
	}
	return nil
}

// runHook is the qemu hook for one event.
func (a *app) runHook(ctx context.Context, domain, op, subop string, in io.Reader) error {
	gate := bootgate.New(a.stateDir())
	return hook.Run(ctx, hook.Options{
		Gate:     &gate,
		StateDir: a.stateDir(), Domain: domain, Op: op, SubOp: subop, XML: in,
		Config: func() (*config.Config, error) { return a.loadConfig(true) },
		Host: func(cfg *config.Config) (*host.Host, error) {
			envCfg := cfg
			if envCfg == nil {
				envCfg = &config.Config{}
				envCfg.ApplyDefaults()
			}
			return a.openHost(cfg, envCfg)
		},
		Log: a.log, Stderr: a.stderr,
		StopAfter: a.v.GetInt("stop-after"), FailAt: a.v.GetString("fail-at"),
	})
}
