package validaterun

import (
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/config"
)

func TestOptionsCheck(t *testing.T) {
	cfg := &config.Config{Groups: []config.Group{{Name: "lag0"},
		{Name: "ovn0", OVN: &config.OVN{}, VFs: []config.VFConfig{{PF: 0, VF: 0, OVNPort: "p1"}, {PF: 0, VF: 1, OVNPort: "p2"}}}}}
	ok := Options{Interval: time.Second}
	tests := []struct {
		name string
		edit func(*Options)
		want string // "" no error
	}{
		{"defaults", func(*Options) {}, ""},
		{"bond and group", func(o *Options) { o.Bond, o.Group = "bond0", "lag0" }, "--bond and --group exclude each other"},
		{"bad bond name", func(o *Options) { o.Bond = "a/b" }, "--bond: "},
		{"bad bond mode", func(o *Options) { o.Bond, o.BondMode = "bond0", "lacp" }, `--bond-mode: "lacp" is not a bonding mode (balance-rr, `},
		{"bond mode alone", func(o *Options) { o.BondMode = "802.3ad" }, "--bond-mode needs --bond"},
		{"rdma iters", func(o *Options) { o.RDMAIters = -1 }, "--rdma-iters: -1 must be positive"},
		{"unknown group", func(o *Options) { o.Group = "x" }, `--group: "x" is not a group of the config`},
		{"roce mode", func(o *Options) { o.RoCEMode = "v3" }, "--roce-mode: "},
		{"min share", func(o *Options) { o.MinShare = 0.5 }, "--min-share: 0.5 must be in [0, 0.5)"},
		{"interval", func(o *Options) { o.Interval = 0 }, "--interval: 0s must be positive"},
		{"ovn ports", func(o *Options) { o.OVNFrom, o.OVNTo = "p2", "vm9" }, ""},
		{"ovn-to name", func(o *Options) { o.OVNTo = "vm 9" }, `--ovn-to: "vm 9" is not a logical switch port name`},
		{"ovn-from name", func(o *Options) { o.OVNFrom = "" + "-x" }, `--ovn-from: "-x" is not a logical switch port name`},
		{"ovn-to is ovn-from", func(o *Options) { o.OVNFrom, o.OVNTo = "p1", "p1" }, `--ovn-to: "p1" is --ovn-from too`},
		{"ovn-to with bond", func(o *Options) { o.Bond, o.OVNTo = "bond0", "vm9" }, `--ovn-to: "vm9" needs a group with ovn, not --bond`},
		{"ovn-from not a port of the group", func(o *Options) { o.OVNFrom = "vm9" }, `--ovn-from: "vm9" is not an ovn_port of the group (p1, p2) (group ovn0)`},
		{"ovn-to without an ovn group", func(o *Options) { o.Group, o.OVNTo = "lag0", "vm9" }, `--ovn-to: "vm9" needs a group with an ovn section (none selected)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			err := o.CheckFlags()
			if err == nil {
				err = o.CheckConfig(cfg)
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Errorf("error %v, want %q...", err, tt.want)
			}
		})
	}
}
