package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		rows []row
		want int
		says string
	}{
		{"all met", []row{judgeExtra("teardown", "down", rounds(3050*ms, 14*ms), 3*time.Second, downStarts), {section: "s", what: "report only", status: "report"}}, 0, ""},
		{"an extra missed", []row{judgeExtra("teardown", "down", rounds(3200*ms, 14*ms), 3*time.Second, downStarts)}, 1, "targets missed: teardown / down"},
		{"a no-op missed", []row{judgeFloor("no-op", "up", result{}, rounds(45*ms, 18*ms), "18 ms", noopFactor, true)}, 1, "targets missed: no-op / up"},
		{"a no-op wrote", []row{judgeFloor("no-op", "up", result{writes: writes{kernel: 1}}, rounds(25*ms, 18*ms), "18 ms", noopFactor, true)}, 1, "targets missed: no-op / up"},
		{"an asserted target missed", []row{judgeChange("transitions", "VLAN", rounds(110*ms, 40*ms), 0, 30*ms, 10*ms, changeFactor)}, 1, "FAILED (asserted): transitions / VLAN"},
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

// rounds is five rounds of a run of wall run beside a yardstick of yard.
func rounds(run, yard time.Duration) paired {
	var p paired
	for range 5 {
		p.add(run, yard)
	}
	return p
}

// machine is the yardsticks and today's figures of one machine: a fast one
// (a process start of 14 ms) and a slow one (31 ms), the figures of
// today's code on each (docs/performance.md, "The factors"). Two are
// estimates: the VLAN's write, from the OVS stage's one transaction at 128
// ports on the fast machine (8 ms), scaled by the starts on the slow one;
// the hook's floor on the fast machine, from a shared machine whose start
// was as fast.
type machine struct {
	name string
	// slow: how much slower CPU work is on it than on the fast one (the
	// ratio of the process starts).
	slow float64
	// start: `vflag --version`; floor: a no-op's floor; hookFloor: the
	// hook's; noop: the no-op up; status; hook: prepare; vlan: the VLAN
	// change, write its write; down: down 2 x 64 (bound 3 s); up: up 2 x
	// 64 (bound 40 s).
	start, floor, hookFloor, noop, status, hook, vlan, write, down, up time.Duration
}

var machines = []machine{
	{name: "fast", slow: 1, start: 14 * time.Millisecond, floor: 18 * time.Millisecond, hookFloor: 7 * time.Millisecond,
		noop: 25500 * time.Microsecond, status: 25400 * time.Microsecond, hook: 12100 * time.Microsecond,
		vlan: 33600 * time.Microsecond, write: 8 * time.Millisecond, down: 3051 * time.Millisecond, up: 40320 * time.Millisecond},
	{name: "slow", slow: 31.1 / 14, start: 31100 * time.Microsecond, floor: 43200 * time.Microsecond, hookFloor: 11400 * time.Microsecond,
		noop: 59800 * time.Microsecond, status: 64900 * time.Microsecond, hook: 24400 * time.Microsecond,
		vlan: 87800 * time.Microsecond, write: 18 * time.Millisecond, down: 3110 * time.Millisecond, up: 40520 * time.Millisecond},
}

// verdicts judges a machine's figures, each run slower by regress of CPU
// work on the fast machine (scaled to the machine), and returns the
// status of each row by name.
func (m machine) verdicts(regress time.Duration) map[string]string {
	r := time.Duration(float64(regress) * m.slow)
	noopRound := rounds(m.noop+r, m.floor)
	return map[string]string{
		"no-op up": judgeFloor("no-op", "up", result{}, noopRound, "", noopFactor, true).status,
		"status":   judgeFloor("commands", "status", result{}, rounds(m.status+r, m.floor), "", statusFactor, false).status,
		"hook":     judgeFloor("hook", "prepare", result{}, rounds(m.hook+r, m.hookFloor), "", hookFactor, false).status,
		// The change runs the no-op path too: its yardstick, the no-op
		// up, is slower by the same.
		"VLAN change": judgeChange("transitions", "VLAN", rounds(m.vlan+r, m.noop+r+m.write), 0, m.noop+r, m.write, changeFactor).status,
		"down":        judgeExtra("teardown", "down", rounds(m.down+r, m.start), 3*time.Second, downStarts).status,
		"up":          judgeExtra("critical path", "up", rounds(m.up+r, m.start), 40*time.Second, upStarts).status,
	}
}

// TestVerdictsFollowTheMachine: today's figures meet every target on the
// fast machine and on the slow one alike (where each millisecond target
// was missed on the slow one), and 20 ms more CPU work in the no-op path
// misses the no-op, status and hook targets on both; a down 100 ms of CPU
// work slower (its extra on the fast machine tripled) misses its target on
// both, and an up whose extra grew by half misses on the fast machine. What a run is judged against is the
// machine's yardstick, not a figure of another machine.
func TestVerdictsFollowTheMachine(t *testing.T) {
	for _, m := range machines {
		t.Run(m.name, func(t *testing.T) {
			for name, st := range m.verdicts(0) {
				if st != "ok" {
					t.Errorf("today's figures: %s: %s, want ok", name, st)
				}
			}
			slower := m.verdicts(20 * time.Millisecond)
			for _, name := range []string{"no-op up", "status", "hook"} {
				if slower[name] != "MISS" {
					t.Errorf("20 ms more CPU in the no-op path: %s: %s, want MISS", name, slower[name])
				}
			}
			if st := m.verdicts(100 * time.Millisecond)["down"]; st != "MISS" {
				t.Errorf("100 ms more CPU in down: %s, want MISS", st)
			}
			// What up adds above its bound grown by half (160 ms of
			// the fast machine's 320) misses where it is largest in
			// starts, on the fast machine.
			if st := m.verdicts(160 * time.Millisecond)["up"]; m.name == "fast" && st != "MISS" {
				t.Errorf("up's extra grown by half: %s, want MISS", st)
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
	ovn := &scenario{b: b, switchdev: true, numvfs: 64, ovn: "unix:/sb.sock"}
	configs["scenario switchdev as an OVN chassis"] = ovn.config()
	if c := configs["scenario switchdev as an OVN chassis"]; !strings.Contains(c, "    ovn: {remote: unix:/sb.sock") || strings.Count(c, "ovn_port: lsp-p") != 128 || strings.Contains(c, "br-lag") {
		t.Errorf("the OVN scenario's config lacks its ovn section or its 128 bound ports, or has the VLAN layout's bridge:\n%s", c)
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

// TestLastInstalled: the time from up's start to the last of the ports
// ovn-controller's log says it set ovn-installed, counting each port's
// first line at or after the start (an earlier run's lines and other
// ports' are not), and an error naming a port the log never installs.
func TestLastInstalled(t *testing.T) {
	log := filepath.Join(t.TempDir(), "ovn-controller.log")
	lines := `2026-11-29T11:11:06.341Z|00001|vlog|INFO|opened log file
2026-11-29T11:11:09.000Z|00010|binding|INFO|Setting lport p1 ovn-installed in OVS
2026-11-29T11:11:11.990Z|00026|binding|INFO|Claiming lport p1 for this chassis.
2026-11-29T11:11:12.500Z|00039|binding|INFO|Setting lport p2 ovn-installed in OVS
2026-11-29T11:11:12.800Z|00040|binding|INFO|Setting lport p1 ovn-installed in OVS
2026-11-29T11:11:12.800Z|00041|binding|INFO|Setting lport p1 up in Southbound
2026-11-29T11:11:12.900Z|00042|binding|INFO|Setting lport other ovn-installed in OVS
2026-11-29T11:11:13.000Z|00043|binding|INFO|Setting lport p1 ovn-installed in OVS
`
	if err := os.WriteFile(log, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 11, 29, 11, 11, 10, 0, time.UTC)
	got, err := lastInstalled(log, since, []string{"p1", "p2"})
	if err != nil || got != 2800*time.Millisecond {
		t.Errorf("lastInstalled = %v, %v; want 2.8s (p1's first line after the start)", got, err)
	}
	if _, err := lastInstalled(log, since, []string{"p1", "p3"}); err == nil || !strings.Contains(err.Error(), "no ovn-installed for p3") {
		t.Errorf("a port never installed: %v", err)
	}
}
