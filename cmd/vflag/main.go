// Command vflag provisions SR-IOV VF-LAG on libvirt hypervisors with
// dual-port mlx5 NICs: `vflag up` converges the host to the config,
// `vflag down` undoes what up did, from its journal alone.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"golang.org/x/sys/unix"

	"github.com/vflag/vflag/cmd/internal/hookcli"
	"github.com/vflag/vflag/internal/apply"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/report"
)

const (
	defaultConfig   = "/etc/vflag/vflag.yaml"
	defaultStateDir = "/var/lib/vflag"
)

// exitError carries a process exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	// A run lives for milliseconds and its heap stays small: collect a
	// quarter as often as Go's default (a 2 x 64 no-op up: 13 ms less CPU,
	// 1.6 MiB more peak memory), unless GOGC says otherwise.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	// VFLAG_CPUPROFILE=FILE writes a CPU profile of this run (make bench's
	// hot spots: go tool pprof bin/vflag FILE).
	if path := os.Getenv("VFLAG_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer func() { _ = f.Close() }()
				defer pprof.StopCPUProfile()
			}
		}
	}
	in, stop := watchInterrupts(os.Stderr)
	signalled = in
	code := run(in.run, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}

func newViper() *viper.Viper { return viper.New() }

// app is one invocation's settings, read through viper (flags > VFLAG_* env > config file).
type app struct {
	v      *viper.Viper
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
	// force: up/down --force (a disruptive change that cannot be shown
	// safe goes ahead, noted).
	force bool
	// intr says what an interrupt does and bounds the rollback (nil in tests).
	intr *interrupts
	// live is the progress line of up and down on a terminal (nil otherwise).
	live *report.Live
	// warm: the connections openHost starts while the host opens (warmFor).
	warm host.Warm
	// configFrom says where --config's value came from: "flag", "env", or
	// "" (the default).
	configFrom string
}

// warmFor is what a command on cfg connects to at once: OVSDB when a group
// has a bridge (prefetch: its bridges' read too, for commands that only
// read: status, validate), libvirtd when a group attaches VFs.
func warmFor(cfg *config.Config, prefetch bool) host.Warm {
	var w host.Warm
	if cfg == nil {
		return w
	}
	for i := range cfg.Groups {
		g := &cfg.Groups[i]
		if g.Switchdev() {
			w.OVS, w.PrefetchOVS = true, prefetch
		}
		if len(g.Attachments) > 0 {
			w.Virt = true
		}
	}
	return w
}

// signalled is the process's interrupt handler (main; nil in tests, which
// call run in-process).
var signalled *interrupts

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{v: newViper(), stdout: stdout, stderr: stderr, intr: signalled}
	if err := hookArgsAreLibvirts(args); err != nil {
		fmt.Fprintln(stderr, "vflag:", err)
		return 1
	}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case err != nil:
		fmt.Fprintln(stderr, "vflag:", err)
		return 1
	}
	return 0
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "vflag",
		Short: "Provision SR-IOV VF-LAG (mlx5 switchdev, bond, OVS offload, libvirt) on a hypervisor",
		Long: `Provision SR-IOV VF-LAG (mlx5 switchdev, bond, OVS offload, libvirt) on a hypervisor.
vflag up converges the host to the config file, vflag down undoes what up did;
vflag doctor, status and validate say what the host lacks, how it stands and
whether it works.
The config file is --config (default /etc/vflag/vflag.yaml): vflag.yaml(5)
describes every field, its default and what changing it costs;
vflag example-config prints an example, /usr/share/doc/vflag/examples/vflag.yaml
is a real host's. Documentation by task, troubleshooting by symptom:
/usr/share/doc/vflag/docs/ (docs/ in the source).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case cmd.Flags().Changed("config"):
				a.configFrom = "flag"
			case os.Getenv("VFLAG_CONFIG") != "":
				a.configFrom = "env"
			}
			level := slog.LevelWarn
			if a.v.GetBool("verbose") {
				level = slog.LevelDebug
			}
			a.log = slog.New(slog.NewTextHandler(logWriter{a}, &slog.HandlerOptions{Level: level}))
			switch out := a.v.GetString("output"); {
			case out == "text", out == "json":
			case out == "prometheus" && cmd.CommandPath() == "vflag status":
				// node_exporter textfile metrics: status only.
			case out == "prometheus":
				return fmt.Errorf("--output prometheus is for `vflag status` only (%s: text or json)", cmd.CommandPath())
			default:
				return fmt.Errorf("--output: %q is not text or json (or prometheus for status)", out)
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.String("config", defaultConfig, "config file (YAML)")
	pf.String("state-dir", defaultStateDir, "journal and lock directory (DIR/state with --sim)")
	pf.StringP("output", "o", "text", "output format: text or json; status also prometheus (node_exporter textfile metrics)")
	pf.String("sim", "", "run against the simulated host kept in this directory (created from the config's sim section)")
	pf.Bool("detailed-exit-codes", false, "exit 0 when nothing changed, 2 when something changed, 1 on error")
	pf.BoolP("verbose", "v", false, "debug logs on stderr")
	pf.Duration("lock-wait", 2*time.Minute, "how long up and down wait for another vflag (boot units, Ansible, an operator) to finish; 0: fail at once")
	pf.Int("sim-crash-after", 0, "testing, with --sim: SIGKILL this process right after its Nth write to the kernel, OVSDB or libvirt (writes logged to SIMDIR/writes.log; negative: only log)")
	_ = pf.MarkHidden("sim-crash-after")
	for _, name := range []string{"config", "state-dir", "output", "sim", "detailed-exit-codes", "verbose", "lock-wait", "sim-crash-after"} {
		_ = a.v.BindPFlag(name, pf.Lookup(name))
	}
	a.v.SetEnvPrefix("VFLAG")
	a.v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	a.v.AutomaticEnv()

	// Every command, in one list.
	root.AddCommand(
		a.upCommand(), a.downCommand(), a.planCommand(), a.statusCommand(), a.validateCommand(),
		a.roceCommand(), a.hookCommand(), a.installHookCommand(), a.installCommand(), a.uninstallCommand(),
		a.udevRulesCommand(), a.udevNameCommand(), a.doctorCommand(), a.exampleCommand(),
		a.versionCommand(), a.simCommand(),
	)
	if c := a.genDocsCommand(); c != nil { // make package's build (tag vflag_gendocs)
		root.AddCommand(c)
	}
	a.registerCompletions(root)
	root.Version = version
	root.SetVersionTemplate("vflag {{.Version}}\n")
	return root
}

// version is set by the build: go build -ldflags "-X main.version=0.1.0".
var version = "dev"

func (a *app) upCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Converge the host to the config (idempotent; resumes an interrupted run)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.force, _ = cmd.Flags().GetBool("force")
			return a.runUp(cmd.Context(), false)
		},
	}
	cmd.Flags().Bool("force", false, forceHelp)
	cmd.Flags().Bool("no-rollback", false, "on failure keep what this run changed (the journal lets up resume and down clean up)")
	cmd.Flags().String("stage", string(pipeline.StageAll), "pre: only the steps that need neither the network, OVS nor libvirt (legacy settings, VFs, VF MACs, unbind, switchdev; vflag-pre.service at boot); all: everything")
	cmd.Flags().Int("stop-after", 0, "testing: stop after this many applied steps, as if killed")
	cmd.Flags().String("fail-at", "", "testing: fail the step with this id after applying it")
	_ = cmd.Flags().MarkHidden("stop-after")
	_ = cmd.Flags().MarkHidden("fail-at")
	for _, name := range []string{"no-rollback", "stage", "stop-after", "fail-at"} {
		_ = a.v.BindPFlag(name, cmd.Flags().Lookup(name))
	}
	return cmd
}

func (a *app) planCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "plan",
		Short: "Show what up would change, step by step, without writing anything",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runUp(cmd.Context(), true)
		},
	}
}

// forceHelp is the --force of up and down.
const forceHelp = "let a change that destroys or rebinds VFs (numvfs, eswitch mode, bond re-form, VF removal) go ahead when vflag cannot tell whether something holds them (the VFs, their drivers or the processes' open files unreadable); noted in the report and the log. VFs known to be held (a process with their vfio group open, a host netdev in use, a running domain) still refuse it"

func (a *app) downCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Undo, in reverse, what up recorded in its journal (no config needed; repeatable)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.force, _ = cmd.Flags().GetBool("force")
			return a.runDown(cmd.Context())
		},
	}
	cmd.Flags().Bool("force", false, forceHelp)
	return cmd
}

func (a *app) statusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the host as it is: PFs, bond, LAG, VFs, representors, OVS ports, domains",
		Long: `Show the host as it is: PFs, bond, LAG, VFs, representors, OVS ports, domains.
It only reads. -o json prints the same as JSON; -o prometheus prints gauges in the
Prometheus text format for node_exporter's textfile collector (vflag_lag_active,
vflag_bond_slaves_up, vflag_vfs_attached, vflag_ovs_hw_offload, vflag_vf_info, ...;
docs/monitoring.md has every metric, alert rules and a Grafana dashboard).
A problem is every static check of vflag validate that fails (named as there),
each change vflag plan would make (drift/<step>: the host differs from the
config), an unreadable journal, a failed boot unit, or something status could
not read; each is listed (text: "problem:" lines, JSON: problems) and counted in
vflag_group_problems. A group never brought up, or brought down, has the one
problem "not up: run vflag up". Exit 0: no group has a problem; 4: some group
has one (the output is complete); 5: no group has a problem but some group is
not up; 1: status itself failed (no config, no host).
Write the textfile atomically, also when there are problems (exit 4 or 5):
  vflag status -o prometheus >DIR/vflag.prom.$$; case $? in 0|4|5) mv DIR/vflag.prom.$$ DIR/vflag.prom;; *) rm -f DIR/vflag.prom.$$;; esac
--tree draws each group as a tree: PFs, bond, bridge, representors, VFs, domains.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runStatus(cmd.Context())
		},
	}
	cmd.Flags().Bool("tree", false, "draw each group as a tree: PFs, bond, bridge, representors, VFs, domains (text output)")
	_ = a.v.BindPFlag("status-tree", cmd.Flags().Lookup("tree"))
	return cmd
}

func (a *app) exampleCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "example-config",
		Short: "Print the embedded example config (a simulated dual-port NIC)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(a.stdout, exampleConfig)
			return err
		},
	}
}

// loadConfig reads and validates the config file (hookcli.LoadConfig).
// missingOK lets down run from the journal alone.
func (a *app) loadConfig(missingOK bool) (*config.Config, error) {
	path := a.v.GetString("config")
	cfg, err := hookcli.LoadConfig(path, missingOK)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, a.noConfig(path)
	}
	return cfg, err
}

// noConfig says that there is no config file at path, where that path
// came from, and how to get one.
func (a *app) noConfig(path string) error {
	from := "(the default; --config FILE or VFLAG_CONFIG names another)"
	switch a.configFrom {
	case "flag":
		from = "(from --config)"
	case "env":
		from = "(from VFLAG_CONFIG)"
	}
	return fmt.Errorf("no config file at %s %s: write one there, or name yours with --config FILE; "+
		"a real host's example is /usr/share/doc/vflag/examples/vflag.yaml (examples/vflag.yaml in the source), "+
		"`vflag example-config` prints one for the simulated host (docs/configuration.md)", path, from)
}

// openHost opens the host: the simulated one with --sim (its spec from
// cfg's sim section), else the real one; endpoints from envCfg.
func (a *app) openHost(cfg, envCfg *config.Config) (*host.Host, error) {
	o := host.Options{SimDir: a.v.GetString("sim"), Log: a.log, Warm: a.warm, CrashAfter: a.v.GetInt("sim-crash-after")}
	if cfg != nil {
		o.SimSpec = cfg.Sim
	}
	if envCfg != nil {
		o.OVSDB, o.Libvirt = envCfg.OVSDB, envCfg.Libvirt
	}
	h, err := host.Open(o)
	if err == nil && h.Simulated() {
		a.warnSimChanges(h)
	}
	return h, err
}

// openEnv opens the host (simulated with --sim, whose spec comes from cfg)
// and an env on it for envCfg; done releases both.
func (a *app) openEnv(cfg, envCfg *config.Config) (e *pipeline.Env, done func(), err error) {
	if envCfg == nil {
		envCfg = &config.Config{}
		envCfg.ApplyDefaults()
	}
	h, err := a.openHost(cfg, envCfg)
	if err != nil {
		return nil, nil, err
	}
	e = pipeline.New(envCfg, h, a.log)
	return e, h.Close, nil
}

func (a *app) stateDir() string {
	if d := a.v.GetString("state-dir"); d != defaultStateDir || a.v.GetString("sim") == "" {
		return d
	}
	return filepath.Join(a.v.GetString("sim"), "state")
}

// applyOptions are the settings of up, plan and down (internal/apply):
// the lock, up's testing hooks, and on a terminal the progress lines and
// what an interrupt says.
// applyOptions are the runner's options; down says which message the
// first interrupt prints once the steps run (up's rolls back, down's stops).
func (a *app) applyOptions(e *pipeline.Env, dry, down bool) apply.Options {
	o := apply.Options{StateDir: a.stateDir(), LockWait: a.v.GetDuration("lock-wait"), DryRun: dry, Log: a.log, Stderr: a.stderr,
		NoRollback: a.v.GetBool("no-rollback"), StopAfter: a.v.GetInt("stop-after"), FailAt: a.v.GetString("fail-at")}
	if a.intr != nil && !dry {
		o.Abort = a.intr.abort
		o.BeforeSteps = func() {
			switch {
			case down:
				a.intr.expect(interruptDown)
			case o.NoRollback:
				a.intr.expect(interruptUpNoRollback)
			default:
				a.intr.expect(interruptUp)
			}
		}
	}
	if isTerminal(a.stderr) {
		if a.v.GetString("output") == "text" && !dry {
			a.live = report.NewLive(a.stderr)
			o.OnEvent = a.live.Event
			e.Progress = a.live.Set
			o.AfterSteps = a.live.Done
		} else {
			o.OnEvent = report.ProgressTo(a.stderr)
		}
	}
	return o
}

func (a *app) runUp(ctx context.Context, dry bool) error {
	command := map[bool]string{true: "plan", false: "up"}[dry]
	fail := func(err error) error { return a.failed(command, err) }
	cfg, err := a.loadConfig(false)
	if err != nil {
		return fail(err)
	}
	stage, err := pipeline.ParseStage(a.v.GetString("stage"))
	if err != nil {
		return fail(err)
	}
	if stage != pipeline.StagePre { // boot, before OVS and libvirtd: neither is asked
		a.warm = warmFor(cfg, false)
	}
	e, closeEnv, err := a.openEnv(cfg, cfg)
	if err != nil {
		return fail(err)
	}
	defer closeEnv()
	e.Stage = stage
	// Boot: vflag-pre.service (stage pre) waits pf_wait for a NIC that
	// probes late; vflag.service runs after it, and an up by hand fails
	// at once for a PF the settled host does not have.
	e.Boot = stage == pipeline.StagePre
	e.Force = a.force
	res := apply.Up(ctx, e, cfg.PFWait, a.applyOptions(e, dry, false))
	if res.Stopped {
		_ = a.report(command, res) // the stop's exit code (3) wins
		return exitError{code: 3}
	}
	return a.report(command, res)
}

func (a *app) runDown(ctx context.Context) error {
	cfg, err := a.loadConfig(true)
	if err != nil {
		a.log.Warn("config not usable; down works from the journal alone", "err", err)
		cfg = nil
	}
	// The connections the config says down will need, opened while the
	// host opens (the journal decides what is undone).
	a.warm = warmFor(cfg, false)
	a.warm.OVSWrites = a.warm.OVS
	e, closeEnv, err := a.openEnv(cfg, cfg)
	if err != nil {
		return a.failed("down", err)
	}
	defer closeEnv()
	e.Force = a.force
	a.intr.expect(interruptDown)
	return a.report("down", apply.Down(ctx, e, cfg != nil, a.applyOptions(e, false, true)))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// writeJSON prints v as indented JSON (-o json).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
