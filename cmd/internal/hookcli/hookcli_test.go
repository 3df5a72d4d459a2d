package hookcli

import (
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
)

// TestWarm: a hook connects to OVSDB ahead only for a config with a bridge,
// and never to libvirtd (a hook that calls libvirt deadlocks libvirtd).
func TestWarm(t *testing.T) {
	group := func(eswitch string, attach bool) config.Group {
		g := config.Group{Name: "lag0", Eswitch: eswitch}
		if attach {
			g.Attachments = []config.Attachment{{Domain: "vm1"}}
		}
		return g
	}
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		want host.Warm
	}{
		{"no config", nil, host.Warm{}},
		{"legacy with attachments", &config.Config{Groups: []config.Group{group("legacy", true)}}, host.Warm{}},
		{"switchdev with attachments", &config.Config{Groups: []config.Group{group("switchdev", true)}}, host.Warm{OVS: true}},
		{"legacy and switchdev", &config.Config{Groups: []config.Group{group("legacy", false), group("switchdev", false)}}, host.Warm{OVS: true}},
	} {
		if got := Warm(tc.cfg); got != tc.want {
			t.Errorf("%s: Warm = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
