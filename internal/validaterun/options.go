package validaterun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/validate"
)

// BondModes are the kernel's bonding modes (/sys/class/net/<bond>/bonding/mode):
// the values of vflag validate --bond-mode.
var BondModes = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}

// CheckFlags checks the options that need no config: --bond, --bond-mode
// and --rdma-iters (errors name vflag validate's flags). It comes before
// the config is read: with --bond a missing config is no error.
func (o Options) CheckFlags() error {
	if o.Bond != "" {
		if o.Group != "" {
			return fmt.Errorf("--bond and --group exclude each other")
		}
		if err := eswitch.ValidIfName(o.Bond); err != nil {
			return fmt.Errorf("--bond: %w", err)
		}
		if m := o.BondMode; m != "" && !slices.Contains(BondModes, m) {
			return fmt.Errorf("--bond-mode: %q is not a bonding mode (%s)", m, strings.Join(BondModes, ", "))
		}
	} else if o.BondMode != "" {
		return fmt.Errorf("--bond-mode needs --bond")
	}
	for _, f := range []struct{ flag, val string }{{"--ovn-from", o.OVNFrom}, {"--ovn-to", o.OVNTo}} {
		switch {
		case f.val == "":
		case o.Bond != "":
			return fmt.Errorf("%s: %q needs a group with ovn, not --bond", f.flag, f.val)
		case !config.ValidOVNPortName(f.val):
			return fmt.Errorf("%s: %q is not a logical switch port name (1-255 characters of [A-Za-z0-9_.:@/+-])", f.flag, f.val)
		}
	}
	if o.OVNFrom != "" && o.OVNFrom == o.OVNTo {
		return fmt.Errorf("--ovn-to: %q is --ovn-from too: the check runs between two ports", o.OVNTo)
	}
	if n := o.RDMAIters; n < 0 {
		return fmt.Errorf("--rdma-iters: %d must be positive", n)
	}
	return nil
}

// CheckConfig checks the options against the config (nil with --bond and
// no config) and the rest of their values: --group, --roce-mode,
// --min-share and --interval.
func (o Options) CheckConfig(cfg *config.Config) error {
	if g := o.Group; g != "" {
		found := false
		for _, x := range cfg.Groups {
			found = found || x.Name == g
		}
		if !found {
			return fmt.Errorf("--group: %q is not a group of the config", g)
		}
	}
	if err := o.checkOVNFlags(cfg); err != nil {
		return err
	}
	if m := o.RoCEMode; m != "" {
		if _, err := validate.ParseRoCEMode(m); err != nil {
			return fmt.Errorf("--roce-mode: %w", err)
		}
	}
	if s := o.MinShare; s < 0 || s >= 0.5 {
		return fmt.Errorf("--min-share: %v must be in [0, 0.5)", s)
	}
	if o.Interval <= 0 {
		return fmt.Errorf("--interval: %s must be positive", o.Interval)
	}
	return nil
}

// checkOVNFlags: --ovn-from and --ovn-to need a selected group with ovn,
// and --ovn-from names one of its ovn_port (the probe enters br-int at
// that port's representor).
func (o Options) checkOVNFlags(cfg *config.Config) error {
	if o.OVNFrom == "" && o.OVNTo == "" || cfg == nil {
		return nil
	}
	flag, val := "--ovn-to", o.OVNTo
	if o.OVNFrom != "" {
		flag, val = "--ovn-from", o.OVNFrom
	}
	n := 0
	for gi := range cfg.Groups {
		g := &cfg.Groups[gi]
		if g.OVN == nil || o.Group != "" && g.Name != o.Group {
			continue
		}
		n++
		if o.OVNFrom != "" {
			if err := g.OVNTrafficFrom(o.OVNFrom, fmt.Sprintf("groups[%d]", gi)); err != nil {
				return fmt.Errorf("--ovn-from: %q %v (group %s)", o.OVNFrom, err, g.Name)
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: %q needs a group with an ovn section (none selected)", flag, val)
	}
	return nil
}
