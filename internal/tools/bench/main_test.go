package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs/ovstest"
)

// TestReportExitsOneOnAnyMiss: make bench exits 1 when any target is
// missed, a measured one (MISS) as an asserted one (FAIL), and 0 when every
// target is met; rows without a target never count.
func TestReportExitsOneOnAnyMiss(t *testing.T) {
	for _, c := range []struct {
		name string
		rows []row
		want int
		says string
	}{
		{"all met", []row{ratioRow("teardown", "down", 3050*time.Millisecond, 3*time.Second, 1.03), {section: "s", what: "report only", status: "report"}}, 0, ""},
		{"a ratio missed", []row{ratioRow("teardown", "down", 3100*time.Millisecond, 3*time.Second, 1.03)}, 1, "targets missed: teardown / down"},
		{"a no-op missed", []row{noopRow("no-op", "up", result{wall: 51 * time.Millisecond})}, 1, "targets missed: no-op / up"},
		{"an asserted target missed", []row{{section: "transitions", what: "VLAN", measured: "61 ms", target: "< 60 ms", status: "FAIL"}}, 1, "FAILED (asserted): transitions / VLAN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &bencher{}
			for _, r := range c.rows {
				b.add(r)
			}
			var out bytes.Buffer
			if got := b.report(&out); got != c.want {
				t.Errorf("exit %d, want %d\n%s", got, c.want, out.String())
			}
			if c.says != "" && !strings.Contains(out.String(), c.says) {
				t.Errorf("output does not say %q:\n%s", c.says, out.String())
			}
		})
	}
}

// TestBenchCardsCanEnterVFLAG: every config the bench runs with a switchdev
// group is on a simulated card whose firmware has at most 64 VFs per port:
// mlx5 never puts a card with more in VF-LAG, so the bench would measure
// what no host can do.
func TestBenchCardsCanEnterVFLAG(t *testing.T) {
	b := &bencher{srv: &ovstest.Server{}, virt: &virttest.Daemon{}}
	configs := map[string]string{}
	for _, sd := range []bool{true, false} {
		s := &scenario{b: b, switchdev: sd, numvfs: 64}
		configs[fmt.Sprintf("scenario switchdev=%v", sd)] = s.config()
	}
	tun := &scenario{b: b, switchdev: true, numvfs: 64, tunnel: true}
	configs["scenario switchdev with a tunnel"] = tun.config()
	if !strings.Contains(configs["scenario switchdev with a tunnel"], "    tunnel: {type: vxlan") {
		t.Errorf("the tunnel scenario's config has no tunnel:\n%s", configs["scenario switchdev with a tunnel"])
	}
	for _, n := range []int{2, 4} {
		s := &scenario{b: b, switchdev: true, numvfs: 64 / (n / 2), nics: n}
		configs[fmt.Sprintf("several NICs: %d", n)] = s.multiConfig()
	}
	c := baseTconf()
	c.groupB = true
	configs["transitions"] = b.tconfig(c, sim.Latency{})
	for name, cfg := range configs {
		cfg = strings.Replace(cfg, "ovsdb: unix:\n", "ovsdb: unix:/db.sock\n", 1) // no daemons here
		configs[name] = cfg
		over, err := testbed.LAGCardsOver(cfg, eswitch.LAGMaxTotalVFs)
		if err != nil || len(over) > 0 {
			t.Errorf("%s: switchdev groups on %v %v", name, over, err)
		}
	}
	if over, err := testbed.LAGCardsOver(strings.Replace(configs["transitions"], "total_vfs: 64", "total_vfs: 127", 1), eswitch.LAGMaxTotalVFs); len(over) != 1 {
		t.Errorf("a card with 127 VFs is not found: %v %v", over, err)
	}
}
