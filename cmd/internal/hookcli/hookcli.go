// Package hookcli is the command line of the libvirt hooks (`hook qemu`,
// `hook network`), shared by vflag and vflag-hook: vflag-hook is the hooks
// alone, built without libvirt's C library (tag vflag_nolibvirt), which
// the dynamic loader would otherwise load with its ~57 libraries at every
// hook run. The logic is internal/hook's.
package hookcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/cfgdecode"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/hook"
	"github.com/vflag/vflag/internal/host"
)

// Env is what the hook commands take from the program they run in.
type Env struct {
	StateDir   func() string
	LoadConfig func(missingOK bool) (*config.Config, error)
	// OpenHost opens the host (simulated with --sim, its spec from cfg's
	// sim section); endpoints from envCfg.
	OpenHost func(cfg, envCfg *config.Config) (*host.Host, error)
	// Log is the logger, set once the command line is parsed.
	Log    func() *slog.Logger
	Stderr io.Writer
	// StopAfter and FailAt are the runner's test hooks (VFLAG_STOP_AFTER,
	// VFLAG_FAIL_AT).
	StopAfter func() int
	FailAt    func() string
}

// Command is `hook` with its subcommands qemu and network.
func Command(e Env) *cobra.Command {
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
start) when that is impossible. On "release end" it resets what it did. On "migrate begin" (the
destination of a live migration) it moves each VF of a teaming pair vflag made to a free VF of
this host's group, reserved, and prints the changed XML on stdout. Domains without a VF of
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
			return RunQemu(ctx, e, args[0], args[1], args[2], in, cmd.OutOrStdout())
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
			gate := bootgate.New(e.StateDir())
			return hook.RunNetwork(ctx, hook.NetworkOptions{
				Gate:    &gate,
				Network: args[0], Op: args[1], SubOp: args[2], XML: cmd.InOrStdin(),
				Config: func() (*config.Config, error) { return e.LoadConfig(true) },
				Host:   func(cfg *config.Config) (*host.Host, error) { return e.OpenHost(cfg, cfg) },
				Log:    e.Log(), Stderr: e.Stderr,
			})
		},
	}
	hookCmd.AddCommand(qemu, network)
	return hookCmd
}

// RunQemu is the qemu hook for one event; out gets the domain XML a
// "migrate begin" changed (libvirt reads it from the hook's stdout).
func RunQemu(ctx context.Context, e Env, domain, op, subop string, in io.Reader, out io.Writer) error {
	gate := bootgate.New(e.StateDir())
	return hook.Run(ctx, hook.Options{
		Gate:     &gate,
		StateDir: e.StateDir(), Domain: domain, Op: op, SubOp: subop, XML: in, Stdout: out,
		Config: func() (*config.Config, error) { return e.LoadConfig(true) },
		Host: func(cfg *config.Config) (*host.Host, error) {
			envCfg := cfg
			if envCfg == nil {
				envCfg = &config.Config{}
				envCfg.ApplyDefaults()
			}
			return e.OpenHost(cfg, envCfg)
		},
		Log: e.Log(), Stderr: e.Stderr,
		StopAfter: e.StopAfter(), FailAt: e.FailAt(),
	})
}

// ArgsAreLibvirts refuses a `hook qemu` command line in which an
// argument after "qemu" would be read as a flag although libvirt put it
// there: libvirt passes the domain's name first, and a domain named
// "--state-dir=/tmp/x" or "--config=..." must not steer the hook, which
// runs as root. The installed hook passes "--" before libvirt's arguments
// (everything after it is an argument); without it (a hook script of an
// earlier release, a call by hand), only --domain-xml may follow "qemu".
func ArgsAreLibvirts(args []string) error {
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

// LoadConfig reads and validates the config file. missingOK lets down run
// from the journal alone. Errors name the file, then the line of a YAML
// syntax error, or each field path with its value.
func LoadConfig(path string, missingOK bool) (*config.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if missingOK && (errors.As(err, &pe) || errors.Is(err, os.ErrNotExist)) {
			return nil, nil
		}
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	// YAML's own parse first: viper's error would name the line where the
	// enclosing block starts, not the line at fault.
	if _, err := cfgdecode.YAML(data); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cv := viper.New()
	cv.SetConfigType("yaml")
	cv.SetEnvPrefix("VFLAG")
	// Only the top-level scalars below are read from the environment: an
	// automatic mapping would let VFLAG_SIM (the --sim directory) replace the
	// config's sim: section.
	if err := cv.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	// Environment overrides for the top-level scalars (VFLAG_OVSDB, VFLAG_LIBVIRT, ...).
	envKeys := []string{"ovsdb", "libvirt", "lag_timeout", "vf_timeout", "pf_wait"}
	for _, k := range envKeys {
		_ = cv.BindEnv(k)
	}
	cfg, err := config.Decode(cv.AllSettings())
	if err != nil {
		// A value from the environment is not in the file: say where it is.
		var es config.Errors
		if errors.As(err, &es) {
			for i, e := range es {
				env := "VFLAG_" + strings.ToUpper(e.Path)
				if slices.Contains(envKeys, e.Path) && os.Getenv(env) != "" {
					es[i].Path += " (" + env + ")"
				}
			}
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}
