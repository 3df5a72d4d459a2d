package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/internal/apply"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sim"
)

// simCommand is `vflag sim`: the simulated host kept in the --sim directory.
func (a *app) simCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "The simulated host kept in the --sim directory",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "reset",
		Short: "Re-create the simulated host (--sim DIR) from the config's sim section",
		Long: `Re-create the simulated host kept in the --sim directory from the config's sim
section. The directory keeps the host it was created from: a changed sim section
(other NICs, PF names, total_vfs, mirror_netns, ...) takes effect only through
this command; changed latencies are taken over without it. Refused while the
journal holds entries of an earlier up: run vflag down first, on the saved host.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runSimReset(cmd.Context())
		},
	})
	return cmd
}

func (a *app) runSimReset(ctx context.Context) error {
	dir := a.v.GetString("sim")
	if dir == "" {
		return fmt.Errorf("sim reset: no simulated host: give its directory with --sim DIR (or VFLAG_SIM)")
	}
	cfg, err := a.loadConfig(false)
	if err != nil {
		return fmt.Errorf("sim reset: %w", err)
	}
	if cfg.Sim == nil {
		return fmt.Errorf("sim reset: config %s has no sim section to create the host from", a.v.GetString("config"))
	}
	release, err := apply.Lock(ctx, apply.Options{StateDir: a.stateDir(), LockWait: a.v.GetDuration("lock-wait"), Log: a.log})
	if err != nil {
		return fmt.Errorf("sim reset: %w", err)
	}
	defer release()
	n, err := apply.Recorded(a.stateDir())
	if err != nil {
		return fmt.Errorf("sim reset: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("sim reset: the journal in %s holds %d entries of an earlier up (VFs, bond, OVS rows, attachments on the saved host): run `vflag --sim %s down` first, then `vflag --sim %s sim reset`", a.stateDir(), n, dir, dir)
	}
	h, err := host.Open(host.Options{SimDir: dir, SimSpec: cfg.Sim})
	if err != nil {
		return fmt.Errorf("sim reset: %w", err)
	}
	defer h.Close()
	was := h.SimChanges
	if err := h.ResetSim(cfg.Sim); err != nil {
		return fmt.Errorf("sim reset: %w", err)
	}
	if len(was) == 0 {
		_, err = fmt.Fprintf(a.stdout, "simulated host %s re-created from the config's sim section (it had the same)\n", dir)
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "simulated host %s re-created from the config's sim section; it differed in:\n  %s\n", dir, joinChanges(was, "\n  "))
	return err
}

// warnSimChanges says when the simulated host keeps a sim section other
// than the config's, and how to re-create it.
func (a *app) warnSimChanges(h *host.Host) {
	if a.log == nil {
		return
	}
	dir := a.v.GetString("sim")
	if h.SimSpecErr != nil {
		a.log.Warn("the config's sim section is not valid; the simulated host keeps the one it was created from", "sim", dir, "err", h.SimSpecErr)
	}
	if h.SimLatency {
		a.log.Info("simulated host: latencies taken over from the config's sim section", "sim", dir)
	}
	if len(h.SimChanges) > 0 {
		a.log.Warn("the config's sim section differs from the one the simulated host was created from; the host keeps its own",
			"sim", dir, "differs", joinChanges(h.SimChanges, "; "),
			"fix", fmt.Sprintf("vflag --sim %s down (if up ran), then vflag --sim %s sim reset (re-creates it from the config)", dir, dir))
	}
}

func joinChanges(cs []sim.SpecChange, sep string) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.String()
	}
	return strings.Join(s, sep)
}
