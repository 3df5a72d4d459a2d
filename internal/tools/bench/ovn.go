package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovnsb/sbtest"
)

// ovnPath: the 2 x 64 switchdev group of the critical path as an OVN
// chassis, every representor bound to a logical port (128), against a real
// OVN central (Northbound, Southbound, ovn-northd: sbtest.StartCentral) and
// a real ovn-controller on the bench's Open vSwitch, br-int on the
// userspace datapath, started before vflag as on a host. The ports are
// created in the Northbound first, as the operator does. Its up has the
// critical path's hardware lower bound (the chassis settings, br-int and
// the bindings cost no modelled latency; the wait for ovn-installed is
// ovn-controller's work, which the extra above the bound counts) and the
// same target; its no-op re-run the same floor factor. Reported: the time
// from up's start to the last port ovn-installed (ovn-controller's log:
// "Setting lport L ovn-installed in OVS"), and the down.
func (b *bencher) ovnPath() {
	const name = "2 x 64 switchdev, OVN chassis"
	progress("OVN central (Northbound, Southbound, ovn-northd) and ovn-controller")
	central := sbtest.StartCentral(b.r)
	s := b.scenario(true, 64, b.hw)
	lsps := s.ovnLSPs()
	if err := central.AddSwitch("ls0", lsps...); err != nil {
		b.r.Fatalf("the logical ports: %v", err)
	}
	// ovn-controller makes br-int of this datapath (no openvswitch module).
	b.vsctl("set", "Open_vSwitch", ".", "external_ids:ovn-bridge-datapath-type=netdev")
	ctl := sbtest.StartController(b.r, b.srv)
	defer func() {
		ctl.Stop()
		b.vsctl("--if-exists", "del-br", "br-int", "--", "remove", "Open_vSwitch", ".", "external_ids", "ovn-bridge-datapath-type")
	}()
	s.ovn = central.SB.Endpoint()
	s.env = []string{"OVN_RUNDIR=" + ctl.RunDir()}
	s.writeConfig(s.config())

	// libvirtd's first hypervisor-version query (up's attach step makes
	// it) probes every qemu binary whose capabilities it has not cached,
	// seconds on a fresh libvirtd: made before the timed run, as the
	// sections before this one (and a host's libvirtd) have made it.
	if _, err := b.virt.Virsh("version"); err != nil {
		b.r.Fatalf("virsh version: %v", err)
	}
	progress(fmt.Sprintf("vflag up, %s (%d ports bound), hardware latencies", name, len(lsps)))
	up, p := s.timedUp()
	last, err := lastInstalled(filepath.Join(ctl.RunDir(), "ovn-controller.log"), up.started, lsps)
	if err != nil {
		b.r.Fatalf("up %s: %v", name, err)
	}
	b.add(row{section: "critical path", what: fmt.Sprintf("up %s: start to the last of %d ports ovn-installed", name, len(lsps)),
		measured: secs(last), bound: secs(s.upBound()), ratio: fmt.Sprintf("%.3f", float64(last)/float64(s.upBound())), status: "report",
		against: fmt.Sprintf("up's wall %s; ovn-controller's log", secs(up.wall))})
	b.quiesceOVS("up " + name)
	install := b.ovnInstallYardstick()
	b.add(judgeExtraOVN("critical path", fmt.Sprintf("up %s, %d ports bound", name, len(lsps)), p, s.upBound(), install, upStarts))
	// ovn-controller too: it reports the ports up in the Southbound after
	// their flows are in, and the no-op meets a host at rest.
	b.quiesceOVS("OVN install yardstick")
	b.quiesce("OVN install yardstick", "ovn-controller", filepath.Join(ctl.RunDir(), "ovn-controller.pid"))
	noop, p, fp := s.noopWithFloor("up")
	b.add(judgeFloor("no-op re-run", fmt.Sprintf("up %s (converged, median of %d)", name, floorRounds), noop, p, fp.String(), ovnNoopFactor, true))
	down := s.vflag("down")
	b.add(row{section: "teardown", what: "down " + name, measured: secs(down.wall), bound: secs(s.downBound()), status: "report"})
}

// ovnInstallYardstick is what ovn-controller takes on this machine, in
// this run, to install the bound ports of the converged host: every
// Interface of br-int with an iface-id is released (one transaction
// removing the iface-ids; ovn-controller takes ovn-installed off), then
// bound again in one transaction, and the yardstick is the time from that
// commit until every one has ovn-installed=true again (polled every 10
// ms). up waits for the same work in its verify step, after the bound
// ports were added, with nothing of its own to overlap it.
//
//	ovs-vsctl --no-wait -- remove Interface eth0 external_ids iface-id -- ...
//	ovs-vsctl --no-wait -- set Interface eth0 external_ids:iface-id=lsp-p0-v0 -- ...
func (b *bencher) ovnInstallYardstick() time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := ovs.Connect(ctx, b.srv.Endpoint())
	if err != nil {
		b.r.Fatalf("ovsdb: %v", err)
	}
	defer c.Close()
	out, err := exec.Command("ovs-vsctl", "--db="+b.srv.Endpoint(), "--timeout=60", "list-ports", "br-int").Output()
	if err != nil {
		b.r.Fatalf("ovs-vsctl list-ports br-int: %v", err)
	}
	ports := strings.Fields(string(out))
	ids, err := c.InterfaceIDs(ctx, ports)
	if err != nil {
		b.r.Fatalf("%v", err)
	}
	bound := map[string]string{}
	unbind, rebind := []string{"--no-wait"}, []string{"--no-wait"}
	for _, p := range ports {
		if lsp := ids[p][ovs.IfaceIDKey]; lsp != "" {
			bound[p] = lsp
			unbind = append(unbind, "--", "remove", "Interface", p, "external_ids", ovs.IfaceIDKey)
			rebind = append(rebind, "--", "set", "Interface", p, "external_ids:"+ovs.IfaceIDKey+"="+lsp)
		}
	}
	if len(bound) == 0 {
		b.r.Fatalf("OVN install yardstick: no bound interface on br-int")
	}
	// installed counts the bound interfaces with ovn-installed=true.
	installed := func() int {
		ids, err := c.InterfaceIDs(ctx, ports)
		if err != nil {
			b.r.Fatalf("%v", err)
		}
		n := 0
		for p := range bound {
			if ids[p][ovs.OVNInstalledKey] == ovs.OVNInstalledValue {
				n++
			}
		}
		return n
	}
	until := func(what string, cond func() bool) {
		for !cond() {
			if ctx.Err() != nil {
				b.r.Fatalf("OVN install yardstick: waited 2 minutes for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	b.vsctl(unbind...)
	until("ovn-controller to release the ports", func() bool { return installed() == 0 })
	b.quiesceOVS("OVN install yardstick: ports released")
	t0 := time.Now()
	b.vsctl(rebind...)
	until("ovn-controller to install the ports", func() bool { return installed() == len(bound) })
	d := time.Since(t0)
	progress(fmt.Sprintf("OVN install yardstick: %d ports installed in %s", len(bound), ms(d)))
	return d
}

// judgeExtraOVN is judgeExtra for an up that binds OVN ports: what it
// adds above the bound is held to maxStarts process starts plus the OVN
// install yardstick (ovn-controller's work, which up waits for).
func judgeExtraOVN(section, what string, p paired, bound, install time.Duration, maxStarts float64) row {
	extras := paired{yards: p.yards}
	for _, w := range p.runs {
		extras.runs = append(extras.runs, w-bound-install)
	}
	n := extras.ratio()
	wall, start := median(p.runs), median(p.yards)
	st := "ok"
	if n > maxStarts {
		st = "MISS"
	}
	return row{section: section, what: what, measured: secs(wall), bound: fmt.Sprintf("%s, extra %s", secs(bound), ms(wall-bound)),
		ratio:   fmt.Sprintf("%.3f", float64(wall)/float64(bound)),
		target:  fmt.Sprintf("extra <= %g starts + OVN install", maxStarts),
		status:  st,
		against: fmt.Sprintf("start %s during the run, OVN install %s: extra %.1f starts beyond the install (limit %s)", ms(start), ms(install), n, ms(scale(start, maxStarts)+install))}
}

// ovnLSPs are the logical ports of the OVN scenario: one per VF of both
// PFs, lsp-p<PF>-v<VF>.
func (s *scenario) ovnLSPs() []string {
	var out []string
	for pf := range 2 {
		for vf := range s.numvfs {
			out = append(out, fmt.Sprintf("lsp-p%d-v%d", pf, vf))
		}
	}
	return out
}

// ovnConfig is the OVN scenario group's ovs and ovn sections: the
// representors on br-int (userspace datapath), the encap address on VLAN
// 30 of the bond, the Southbound at s.ovn.
func (s *scenario) ovnConfig() string {
	return fmt.Sprintf(`    ovs: {hw_offload: true, datapath_type: netdev}
    ovn: {remote: %s, encap_ip: 192.0.2.11/24, underlay_vlan: 30, underlay_mtu: 1600, install_timeout: 2m}
`, s.ovn)
}

// ovnVFs binds every VF's representor to its logical port (ovnLSPs),
// each VF with a MAC.
func (s *scenario) ovnVFs() string {
	var c strings.Builder
	c.WriteString("    vfs:\n")
	for pf := range 2 {
		for vf := range s.numvfs {
			fmt.Fprintf(&c, "      - {pf: %d, vf: %d, mac: \"52:54:00:10:%02x:%02x\", ovn_port: lsp-p%d-v%d}\n", pf, vf, pf, vf, pf, vf)
		}
	}
	return c.String()
}

// lastInstalled is how long after since the last of lsps was set
// ovn-installed, from ovn-controller's log lines "Setting lport L
// ovn-installed in OVS" (UTC, milliseconds) at or after since.
func lastInstalled(log string, since time.Time, lsps []string) (time.Duration, error) {
	f, err := os.Open(log)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	want := map[string]bool{}
	for _, l := range lsps {
		want[l] = true
	}
	at := map[string]time.Time{}
	floor := since.Truncate(time.Millisecond)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		stamp, rest, ok := strings.Cut(line, "|")
		if !ok {
			continue
		}
		i := strings.Index(rest, "Setting lport ")
		if i < 0 || !strings.HasSuffix(rest, " ovn-installed in OVS") {
			continue
		}
		lsp := strings.TrimSuffix(rest[i+len("Setting lport "):], " ovn-installed in OVS")
		t, err := time.Parse("2006-01-02T15:04:05.000Z", stamp)
		if err != nil || t.Before(floor) || !want[lsp] {
			continue
		}
		if _, seen := at[lsp]; !seen {
			at[lsp] = t
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	var last time.Time
	for _, l := range lsps {
		t, ok := at[l]
		if !ok {
			return 0, fmt.Errorf("ovn-controller's log %s says no ovn-installed for %s after %s", log, l, since.UTC().Format(time.RFC3339Nano))
		}
		if t.After(last) {
			last = t
		}
	}
	return last.Sub(since), nil
}
