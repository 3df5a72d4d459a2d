// Command bench measures vflag as a whole command against the time the
// hardware itself needs, and its OVS step against the shell ways of building
// the same bridge. It runs the built binary as a child process against the
// simulated host (internal/sim, latency model set to measured ConnectX
// figures), a private ovsdb-server/ovs-vswitchd (ovs/ovstest) and a private
// libvirtd (libvirtx/virttest), and prints one table.
//
//	go run ./internal/tools/bench -vflag bin/vflag
//
// The hardware lower bound of a run is the longest chain of kernel
// operations when both PFs work in parallel, computed from the latency model:
// up in switchdev = numvfs*vf_create + mode_change + lag_activation; up in
// legacy = numvfs*vf_create; down in switchdev = mode_change (`down` is the
// median of 5, each from the same converged host: timedDowns). The critical
// path also runs the 2 x 64 switchdev group with a VXLAN tunnel
// (tunnelPath): same bound, same targets.
//
// No target is in milliseconds: each is judged against a yardstick measured
// on the machine in the same run (yardstick.go): a no-op, a status and the
// hook within a factor of their floor, a one-setting change within a
// factor of the no-op up plus its one write, what an up or a down adds
// above its bound in process starts. The table's last column says what
// each verdict was judged against. Every target missed makes the command
// exit 1: a row marked MISS, and the asserted ones, marked FAIL (below).
//
// The several section (multi.go; alone: -only several) runs hosts with 2
// and 4 NICs, each its own group: the groups run side by side, so each run
// is held to one NIC's bound.
//
// The hook section (alone: -only hook) times the qemu hook through the
// script install-hook writes, which runs vflag-hook when it is next to the
// vflag binary (make build puts bin/vflag-hook there).
//
// The transitions section (transitions.go; alone: -only transitions) times
// `vflag up` from a converged host to a changed config (VLAN, miimon, one
// group of two, numvfs) and compares the steps it changed with the minimal
// set. Its asserted targets (FAIL when missed): the VLAN and the miimon
// change at 2 x 64 VFs within changeFactor x (no-op up + their one write),
// and exactly the minimal steps for both. VFLAG_BENCH_WRAP runs the
// timed runs under a command, "%s" replaced by the run's name:
//
//	VFLAG_BENCH_WRAP='perf record -g -q -o /tmp/%s.perf.data --' go run ./internal/tools/bench -only transitions
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

func main() {
	bin := flag.String("vflag", "bin/vflag", "the vflag binary")
	vfCreate := flag.Duration("vf-create", 500*time.Millisecond, "latency: per VF creation (ConnectX-6 Lx: 125 VFs ~65 s)")
	modeChange := flag.Duration("mode-change", 3*time.Second, "latency: devlink eswitch mode change (mlx5: ~3-4 s per PF)")
	lagAct := flag.Duration("lag-activation", 5*time.Second, "latency: hardware LAG activation (mlx5: up to ~10 s)")
	skipHW := flag.Bool("skip-hw", false, "skip the runs with hardware latencies (about 4 minutes)")
	skipOVS := flag.Bool("skip-ovs", false, "skip the OVS stage comparison")
	only := flag.String("only", "", "run only these sections, comma-separated: critical, several, hook, scaling, ovs, transitions, ovn (default: all)")
	reps := flag.Int("reps", 7, "transitions: timed runs of each fast transition (the median is reported)")
	filter := flag.String("transition", "", "transitions: run only those whose name contains this")
	slowReps := flag.Int("slow-reps", 1, "transitions: timed runs of the numvfs transition (~16 s each at hardware latencies)")
	verbose := flag.Bool("v", false, "show the daemons' logs and each vflag report")
	flag.Parse()

	dropVflagEnv()
	r := &testbed.Runner{Verbose: *verbose}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		r.Fatalf("%v", err)
	}
	b := &bencher{r: r, bin: abs, verbose: *verbose,
		hw: sim.Latency{VFCreate: *vfCreate, ModeChange: *modeChange, LAGActivation: *lagAct}}
	sections := map[string]bool{"critical": !*skipHW, "several": !*skipHW, "ovn": !*skipHW, "hook": true, "scaling": true, "ovs": !*skipOVS, "transitions": true}
	if *only != "" {
		want := map[string]bool{}
		for _, name := range strings.Split(*only, ",") {
			if _, ok := sections[name]; !ok {
				r.Fatalf("-only: unknown section %q (critical, several, hook, scaling, ovs, transitions, ovn)", name)
			}
			want[name] = true
		}
		for name := range sections {
			sections[name] = sections[name] && want[name]
		}
	}
	if *reps < 1 || *slowReps < 1 {
		r.Fatalf("-reps and -slow-reps must be at least 1")
	}
	b.reps, b.slowReps, b.filter = *reps, *slowReps, *filter
	// The flags are checked before the daemons start.
	progress("starting a private ovsdb-server + ovs-vswitchd and libvirtd")
	b.srv = ovstest.Start(r)
	b.virt = virttest.Start(r)
	b.virt.DefineDomain(r, "vm1")
	code := b.run(sections)
	r.Close()
	os.Exit(code)
}

type bencher struct {
	r       *testbed.Runner
	bin     string
	verbose bool
	hw      sim.Latency
	srv     *ovstest.Server
	virt    *virttest.Daemon
	rows    []row
	missed  []string // targets missed (MISS): exit 1
	failed  []string // asserted targets missed (FAIL): exit 1

	reps, slowReps int // transitions
	filter         string
}

// row is one line of the table.
type row struct {
	section, what, measured, bound, ratio, target, status string
	// floor is what the measurement cannot avoid (floor), where given.
	floor string
	// against is what the verdict was judged against: the yardstick
	// measured in the same run, the factor and the limit they give.
	against string
}

func (b *bencher) add(r row) {
	b.rows = append(b.rows, r)
	switch r.status {
	case "MISS":
		b.missed = append(b.missed, r.section+" / "+r.what+": "+r.measured)
	case "FAIL":
		b.failed = append(b.failed, r.section+" / "+r.what+": "+r.measured+", target "+r.target)
	}
	progress(fmt.Sprintf("%s / %s: %s", r.section, r.what, r.measured))
}

func progress(s string) { fmt.Fprintf(os.Stderr, "bench: %s\n", s) }

func (b *bencher) run(sections map[string]bool) int {
	if sections["critical"] {
		b.criticalPath()
	}
	if sections["several"] {
		b.severalNICs()
	}
	if sections["hook"] {
		b.hookRows()
	}
	if sections["scaling"] {
		b.scaling()
	}
	if sections["ovs"] {
		b.ovsStage()
	}
	if sections["transitions"] {
		b.transitions(b.reps, b.slowReps)
	}
	if sections["ovn"] {
		// Last: its ovn-controller and br-int stay on the shared Open
		// vSwitch until the end.
		b.ovnPath()
	}
	return b.report(os.Stdout)
}

// report prints the table and what was missed, and returns the exit code:
// 1 when any target was missed (a MISS or a FAIL row), else 0.
func (b *bencher) report(w io.Writer) int {
	b.print(w)
	if len(b.missed) > 0 {
		fmt.Fprintf(w, "\ntargets missed: %s\n", strings.Join(b.missed, "; "))
	}
	if len(b.failed) > 0 {
		fmt.Fprintf(w, "\nFAILED (asserted): %s\n", strings.Join(b.failed, "; "))
	}
	if len(b.missed)+len(b.failed) > 0 {
		return 1
	}
	return 0
}

// ---- scenarios ----

// scenario is one simulated host and config.
type scenario struct {
	b         *bencher
	switchdev bool
	numvfs    int
	lat       sim.Latency
	dir       string
	cfg       string
	simDir    string
	state     string
	wrap      []string // run vflag under this command (perf record ... --)
	nics      int      // several NICs (multi): that many cards, one group each
	// tunnel gives the switchdev group a VXLAN tunnel (tunnelConfig).
	tunnel bool
	// ovn makes the switchdev group an OVN chassis whose Southbound is
	// this remote (ovnConfig); env is added to vflag's environment.
	ovn string
	env []string
}

func (b *bencher) scenario(switchdev bool, numvfs int, lat sim.Latency) *scenario {
	dir := b.r.TempDir()
	s := &scenario{b: b, switchdev: switchdev, numvfs: numvfs, lat: lat, dir: dir,
		cfg: filepath.Join(dir, "vflag.yaml"), simDir: filepath.Join(dir, "sim"), state: filepath.Join(dir, "state")}
	if err := os.WriteFile(s.cfg, []byte(s.config()), 0o600); err != nil {
		b.r.Fatalf("%v", err)
	}
	return s
}

// config: one dual-port ConnectX; a switchdev group (VF-LAG, OVS bridge
// with every representor) on a card whose firmware has 64 VFs per port (mlx5
// refuses VF-LAG above: eswitch.LAGMaxTotalVFs), or a legacy group (VFs
// only) on one with 127; two VF MACs and two attachments to vm1 in both.
func (s *scenario) config() string {
	var c strings.Builder
	fmt.Fprintf(&c, "ovsdb: %s\nlibvirt: %s\nlag_timeout: 60s\nvf_timeout: 10m\ngroups:\n", s.b.srv.Endpoint(), s.b.virt.URI())
	if s.switchdev {
		fmt.Fprintf(&c, `  - name: lag0
    eswitch: switchdev
    pfs: [ens1f0np0, ens1f1np1]
    numvfs: %d
    flow_steering_mode: smfs
    bond: {name: bond0, mode: 802.3ad, miimon: 100, lacp_rate: fast, xmit_hash_policy: layer3+4}
`, s.numvfs)
		if s.ovn != "" {
			c.WriteString(s.ovnConfig())
		} else {
			c.WriteString("    ovs: {bridge: br-lag, hw_offload: true, datapath_type: netdev}\n")
		}
		if s.tunnel {
			c.WriteString(tunnelConfig)
		}
	} else {
		fmt.Fprintf(&c, `  - name: sriov0
    eswitch: legacy
    pfs: [ens1f0np0, ens1f1np1]
    numvfs: %d
`, s.numvfs)
	}
	if s.ovn != "" {
		c.WriteString(s.ovnVFs())
	} else {
		c.WriteString(`    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:10:00:00"}
      - {pf: 1, vf: 0, mac: "52:54:00:10:01:00"}
`)
	}
	c.WriteString(`    attachments:
      - {domain: vm1, pf: 0, vf: 0}
      - {domain: vm1, pf: 1, vf: 0}
`)
	fmt.Fprintf(&c, `sim:
  mirror_netns: %s
  nics:
    - name: cx6lx
      total_vfs: %d
      pfs:
        - {pci: "0000:61:00.0", netdev: ens1f0np0}
        - {pci: "0000:61:00.1", netdev: ens1f1np1}
  latency:
    vf_create: %s
    mode_change: %s
    lag_activation: %s
`, s.b.srv.Netns(), s.totalVFs(), s.lat.VFCreate, s.lat.ModeChange, s.lat.LAGActivation)
	return c.String()
}

// totalVFs is the simulated card's sriov_totalvfs: 64 for VF-LAG (the most
// mlx5 allows), 127 for legacy SR-IOV.
func (s *scenario) totalVFs() int {
	if s.switchdev {
		return eswitch.LAGMaxTotalVFs
	}
	return 127
}

// upBound is the hardware lower bound of `vflag up` from an empty host: both
// PFs create their VFs in parallel (VF i appears vf_create*(i+1) after the
// write), then, in switchdev, both eswitches change mode in parallel and the
// LAG activates.
func (s *scenario) upBound() time.Duration {
	d := time.Duration(s.numvfs) * s.lat.VFCreate
	if s.switchdev {
		d += s.lat.ModeChange + s.lat.LAGActivation
	}
	return d
}

// downBound: both eswitches back to legacy in parallel; removing VFs, the
// bond and OVS rows costs no modelled latency.
func (s *scenario) downBound() time.Duration {
	if s.switchdev {
		return s.lat.ModeChange
	}
	return 0
}

// result is one vflag invocation.
type result struct {
	wall    time.Duration
	started time.Time     // when the process was started
	maxRSS  int64         // KiB
	cpu     time.Duration // user + system time of the process
	code    int
	rep     report
	writes  writes
	stdout  string
	stderr  string
	command string
}

type report struct {
	Command string `json:"command"`
	Changes int    `json:"changes"`
	Error   string `json:"error"`
	Steps   []struct {
		ID      string `json:"id"`
		Changed bool   `json:"changed"`
		Action  string `json:"action"`
	} `json:"steps"`
}

// writes counts what an invocation changed: simulated-kernel mutations (the
// sim's generation counter, one per write), journal rewrites, changed steps
// in vflag's report, and whether OVSDB or vm1's XML differ afterwards.
type writes struct {
	kernel  int64
	journal bool
	steps   int
	ovsdb   bool
	libvirt bool
}

func (w writes) total() int64 {
	n := w.kernel + int64(w.steps)
	for _, b := range []bool{w.journal, w.ovsdb, w.libvirt} {
		if b {
			n++
		}
	}
	return n
}

// plus is the writes of two runs together.
func (w writes) plus(o writes) writes {
	return writes{kernel: w.kernel + o.kernel, steps: w.steps + o.steps, journal: w.journal || o.journal,
		ovsdb: w.ovsdb || o.ovsdb, libvirt: w.libvirt || o.libvirt}
}

func (w writes) String() string {
	return fmt.Sprintf("%d (kernel %d, journal %d, steps %d, ovsdb %d, libvirt %d)", w.total(), w.kernel, b2i(w.journal), w.steps, b2i(w.ovsdb), b2i(w.libvirt))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *scenario) simGen() int64 {
	data, err := os.ReadFile(filepath.Join(s.simDir, "host.json"))
	if err != nil {
		return 0
	}
	var st struct {
		Gen int64 `json:"gen"`
	}
	_ = json.Unmarshal(data, &st)
	return st.Gen
}

func (s *scenario) journalStamp() string {
	fi, err := os.Stat(filepath.Join(s.state, "journal.json"))
	if err != nil {
		return "absent"
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d/%d/%d", st.Ino, fi.Size(), fi.ModTime().UnixNano())
}

func (s *scenario) domainXML() string {
	out, err := s.b.virt.Virsh("dumpxml", "--inactive", "vm1")
	if err != nil {
		s.b.r.Fatalf("virsh dumpxml: %v", err)
	}
	return out
}

// vflag runs the binary once and measures it.
func (s *scenario) vflag(args ...string) result {
	gen0, j0, ovs0, xml0 := s.simGen(), s.journalStamp(), s.b.srv.Dump(), s.domainXML()
	all := append([]string{"--config", s.cfg, "--sim", s.simDir, "--state-dir", s.state, "-o", "json"}, args...)
	cmd := exec.Command(s.b.bin, all...)
	if len(s.wrap) > 0 { // profiling (transitions, VFLAG_BENCH_WRAP): the wall includes the wrapper's
		cmd = exec.Command(s.wrap[0], append(append(s.wrap[1:], s.b.bin), all...)...)
	}
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	res := result{wall: wall, started: t0, stdout: out.String(), stderr: errb.String(), command: strings.Join(args, " ")}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		s.b.r.Fatalf("run vflag: %v", err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.maxRSS = ru.Maxrss
		res.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if err := json.Unmarshal(out.Bytes(), &res.rep); err != nil {
		s.b.r.Fatalf("vflag %s: exit %d, no report: %v\n%s\n%s", res.command, res.code, err, out.String(), errb.String())
	}
	if res.code != 0 || res.rep.Error != "" {
		s.b.r.Fatalf("vflag %s failed (exit %d): %s\n%s", res.command, res.code, res.rep.Error, errb.String())
	}
	res.writes = writes{kernel: s.simGen() - gen0, journal: s.journalStamp() != j0, steps: res.rep.Changes,
		ovsdb: s.b.srv.Dump() != ovs0, libvirt: s.domainXML() != xml0}
	if s.b.verbose {
		fmt.Fprintf(os.Stderr, "vflag %s: %s, %s\n%s", res.command, res.wall, res.writes, res.stdout)
	}
	return res
}

// ---- (1) critical path, (3) no-op, (4) down, (5) memory ----

func (b *bencher) criticalPath() {
	lat := b.hw
	latency := fmt.Sprintf("vf_create %s, mode_change %s, lag_activation %s", lat.VFCreate, lat.ModeChange, lat.LAGActivation)
	for _, c := range []struct {
		switchdev bool
		numvfs    int
	}{{true, 64}, {false, 127}} {
		s := b.scenario(c.switchdev, c.numvfs, lat)
		name := fmt.Sprintf("2 x %d %s", c.numvfs, map[bool]string{true: "switchdev", false: "legacy"}[c.switchdev])
		progress(fmt.Sprintf("vflag up, %s, hardware latencies (%s)", name, latency))
		up, p := s.timedUp()
		b.add(judgeExtra("critical path", "up "+name, p, s.upBound(), upStarts))
		if !c.switchdev {
			b.add(row{section: "memory", what: "up " + name + ": peak RSS", measured: fmt.Sprintf("%.1f MiB", float64(up.maxRSS)/1024), status: "report"})
		}
		b.quiesceOVS("up " + name)
		noop, p, fp := s.noopWithFloor("up")
		b.add(judgeFloor("no-op re-run", fmt.Sprintf("up %s (converged, median of %d)", name, floorRounds), noop, p, fp.String(), noopFactor, true))
		if c.switchdev {
			b.add(s.statusRow("commands", fmt.Sprintf("status (median of %d)", floorRounds), statusFactor))
			b.add(s.validateOffloadRow())
		}
		if db := s.downBound(); db > 0 {
			p, first := s.timedDowns(5)
			b.add(judgeExtra("teardown", "down "+name+" (median of 5)", p, db, downStarts))
			runs := make([]string, len(p.runs))
			for i, w := range p.runs {
				runs[i] = fmt.Sprintf("%.3f", float64(w)/float64(db))
			}
			b.add(row{section: "teardown", what: "down " + name + ": each run / bound", measured: strings.Join(runs, " "), status: "report"})
			b.add(row{section: "teardown", what: "down " + name + ": writes", measured: first.writes.String(), status: "report"})
		} else {
			down := s.vflag("down")
			b.add(row{section: "teardown", what: "down " + name, measured: secs(down.wall), bound: "0 s", ratio: "-", target: "-", status: "report"})
			b.add(row{section: "teardown", what: "down " + name + ": writes", measured: down.writes.String(), status: "report"})
		}
		b.add(s.downNoopRow("teardown", fmt.Sprintf("down %s again (nothing to undo, median of %d)", name, floorRounds)))
	}
	b.tunnelPath()
}

// tunnelConfig is the switchdev group's tunnel in the tunnel rows: the
// bond leaves the bridge and carries the underlay (VLAN 30, the local
// address, a route through a gateway), the bridge holds a VXLAN port for
// each of the two remotes beside the representors.
const tunnelConfig = `    tunnel: {type: vxlan, local: 192.0.2.11/24, underlay_vlan: 30, underlay_mtu: 1600, gateway: 192.0.2.254, routes: [198.51.100.0/24], remotes: [192.0.2.12, 198.51.100.7], vni: 5000}
`

// tunnelPath: the 2 x 64 switchdev group of the critical path with a VXLAN
// tunnel. Its up has the same hardware lower bound (the underlay and the
// tunnel ports cost no modelled latency) and the same bound ratio target;
// its no-op re-run the same target. The down is reported.
func (b *bencher) tunnelPath() {
	s := b.scenario(true, 64, b.hw)
	s.tunnel = true
	if err := os.WriteFile(s.cfg, []byte(s.config()), 0o600); err != nil {
		b.r.Fatalf("%v", err)
	}
	name := "2 x 64 switchdev, VXLAN tunnel"
	progress("vflag up, " + name + ", hardware latencies")
	up, p := s.timedUp()
	var tunnelSteps int
	for _, st := range up.rep.Steps {
		if st.Changed && strings.HasPrefix(st.ID, "tunnel.") {
			tunnelSteps++
		}
	}
	if tunnelSteps == 0 {
		b.r.Fatalf("up %s changed no tunnel step: the tunnel was not built", name)
	}
	b.add(judgeExtra("critical path", "up "+name, p, s.upBound(), upStarts))
	b.quiesceOVS("up " + name)
	noop, p, fp := s.noopWithFloor("up")
	b.add(judgeFloor("no-op re-run", fmt.Sprintf("up %s (converged, median of %d)", name, floorRounds), noop, p, fp.String(), noopFactor, true))
	down := s.vflag("down")
	b.add(row{section: "teardown", what: "down " + name, measured: secs(down.wall), bound: secs(s.downBound()), status: "report"})
}

// timedUp runs `vflag up` (at the scenario's latencies) with the process
// start sampled during it (bencher.during), the CPU yardstick of its extra
// over the bound; it returns the run and the run beside the start.
func (s *scenario) timedUp() (result, paired) {
	var up result
	start := s.b.during(func() { up = s.vflag("up") })
	var p paired
	p.add(up.wall, start)
	return up, p
}

// timedDowns times n downs of the scenario, the first from the host as it
// is (converged), each other from the same converged host: an untimed up
// at zero latency (a converged host's state does not depend on how long
// converging took), ovs-vswitchd let apply it, then the down at the
// scenario's latencies, the process start sampled during it (the CPU
// yardstick). The previous down's bridge removal is let apply first
// (settleOVS): ovs-vswitchd takes seconds to remove 129 ports, which the
// untimed up would wait for. The latency is set in the config too: vflag
// takes the config's sim latencies over into the saved host
// (sim.Host.Reconcile), so with the state file's alone the up ran at the
// scenario's latencies. It returns each down's wall beside its start, and
// the first run.
func (s *scenario) timedDowns(n int) (p paired, first result) {
	lat := s.lat
	defer func() { s.lat = lat; s.writeConfig(s.render()) }()
	for i := range n {
		if i > 0 {
			s.b.settleOVS()
			s.lat = sim.Latency{}
			s.writeConfig(s.render())
			s.setLatency(s.lat)
			s.vflag("up")
			s.b.quiesceOVS(fmt.Sprintf("down %d of %d: before the timed run", i+1, n))
			s.lat = lat
			s.writeConfig(s.render())
			s.setLatency(s.lat)
		}
		var down result
		start := s.b.during(func() { down = s.vflag("down") })
		p.add(down.wall, start)
		if i == 0 {
			first = down
		}
	}
	return p, first
}

// render is the scenario's config at its latencies (s.lat).
func (s *scenario) render() string {
	if s.nics > 0 {
		return s.multiConfig()
	}
	return s.config()
}

// statusRow times `vflag status` on the converged host (median of 5),
// each run followed by a sample of the floor (noopWithFloor): status reads
// what a no-op up reads.
func (s *scenario) statusRow(section, what string, factor float64) row {
	r, p, fp := s.noopWithFloor("status")
	return judgeFloor(section, what, r, p, fp.String(), factor, false)
}

// downNoopRow times a down with nothing to undo (median of floorRounds,
// writes none), each run followed by a sample of the floor: it reads what
// a no-op up reads (the links, the journal, OVSDB and libvirt for what it
// would undo) and finds nothing to do.
func (s *scenario) downNoopRow(section, what string) row {
	r, p, fp := s.noopWithFloor("down")
	return judgeFloor(section, what, r, p, fp.String(), noopFactor, true)
}

// validateOffloadRow times `vflag validate --offload` on the converged host
// without traffic (median of 5, no target: issue 20 asks what it costs):
// the static checks, then the offload check's reads (the bridge from
// OVSDB, ovs-vswitchd's datapath flows over its control socket, the
// shared block, ovs-vswitchd's log). The exit code is not judged (the
// simulated host's skips make it 1); the run must print a report with the
// offload check, whose verdict the row names.
func (s *scenario) validateOffloadRow() row {
	var walls []time.Duration
	verdict := ""
	for range 5 {
		cmd := exec.Command(s.b.bin, "--config", s.cfg, "--sim", s.simDir, "--state-dir", s.state, "-o", "json", "validate", "--offload")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		t0 := time.Now()
		err := cmd.Run()
		walls = append(walls, time.Since(t0))
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			s.b.r.Fatalf("vflag validate --offload: %v", err)
		}
		var rep struct {
			Groups []struct {
				Checks []struct{ Name, Verdict string }
			}
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			s.b.r.Fatalf("vflag validate --offload: no report: %v\n%s\n%s", err, out.String(), errb.String())
		}
		verdict = ""
		for _, g := range rep.Groups {
			for _, c := range g.Checks {
				if c.Name == "offload" {
					verdict = c.Verdict
				}
			}
		}
		if verdict == "" {
			s.b.r.Fatalf("vflag validate --offload: no offload check in the report\n%s", out.String())
		}
	}
	return row{section: "commands", what: "validate --offload, no traffic (median of 5)", measured: fmt.Sprintf("%s (offload: %s)", ms(median(walls)), verdict), target: "-", status: "report"}
}

// hookRows times the qemu hook as libvirt runs it once vflag is installed:
// the hook script `vflag install-hook` writes (qemu.d/vflag, which runs
// vflag-hook when it is next to the vflag binary, else vflag), on a
// converged switchdev group (2 x 64 VFs, zero latency: the hook waits for
// no hardware operation the model times). Each of 21 rounds is a prepare
// (the VF MAC journaled and set), then the release that undoes it, through
// the script, then the same through `vflag hook qemu` (the compatibility
// path, libvirt's C library loaded; reported only), so both see the same
// load; the medians are reported. The floor is what a run cannot avoid
// here: the process start of the binary (--version), the opening of the
// simulated host (its state file and the mirror of its netdevs into OVS's
// namespace, which a real host does not have) and the durable rewrite of
// the journal (a prepare records the MAC it sets, a release that it undid
// it), sampled at the end of each round.
func (b *bencher) hookRows() {
	s := b.scenario(true, 64, sim.Latency{})
	progress("qemu hook: up 2 x 64 switchdev at zero latency, then prepare/release rounds")
	s.vflag("up")
	b.quiesceOVS("hook: up 2 x 64 switchdev")
	root := b.r.TempDir()
	inst := exec.Command(b.bin, "--config", s.cfg, "--state-dir", s.state, "install-hook", "--root", root, "--binary", b.bin)
	if out, err := inst.CombinedOutput(); err != nil {
		b.r.Fatalf("vflag install-hook: %v\n%s", err, out)
	}
	script := filepath.Join(root, "etc/libvirt/hooks/qemu.d/vflag")
	runs := b.bin
	if fi, err := os.Stat(b.bin + "-hook"); err == nil && fi.Mode()&0o111 != 0 {
		runs = b.bin + "-hook"
	}
	ways := []hookWay{
		{name: "script", cmd: func(args ...string) *exec.Cmd {
			cmd := exec.Command(script, args...)
			// The script names the config and state dir; the simulated
			// host comes from the environment (VFLAG_SIM), as --sim would.
			cmd.Env = append(os.Environ(), "VFLAG_SIM="+s.simDir)
			return cmd
		}},
		{name: "vflag", cmd: func(args ...string) *exec.Cmd {
			all := append([]string{"--config", s.cfg, "--sim", s.simDir, "--state-dir", s.state, "hook", "qemu", "--"}, args...)
			return exec.Command(b.bin, all...)
		}},
	}
	const rounds = 21
	// The floor, sampled at the end of every round (so that it sees the
	// load the round's runs saw): the start of each binary and the
	// opening of the simulated host.
	var hookStarts, vflagStarts, simOpens, journals []time.Duration
	timed := func(f func()) time.Duration {
		t0 := time.Now()
		f()
		return time.Since(t0)
	}
	startOf := func(bin string) time.Duration {
		return timed(func() {
			if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil {
				s.b.r.Fatalf("%s --version: %v: %s", bin, err, out)
			}
		})
	}
	s.hookRounds(rounds, []byte(s.hookDomain()), ways, func() {
		hookStarts = append(hookStarts, startOf(runs))
		vflagStarts = append(vflagStarts, startOf(b.bin))
		simOpens = append(simOpens, timed(func() {
			h, err := sim.Open(s.simDir, nil)
			if err != nil {
				s.b.r.Fatalf("open the simulated host: %v", err)
			}
			_ = h.Close()
		}))
		journals = append(journals, s.journalWrite())
	})
	simOpen, journal := median(simOpens), median(journals)
	floor := func(starts []time.Duration) (time.Duration, string) {
		start := median(starts)
		return start + simOpen + journal, fmt.Sprintf("%s (start %s + sim open %s + journal write %s)", ms(start+simOpen+journal), ms(start), ms(simOpen), ms(journal))
	}
	n := fmt.Sprintf("median of %d", rounds)
	_, scriptFloorText := floor(hookStarts)
	for _, op := range []string{"prepare", "release"} {
		var p paired
		for i, d := range ways[0].walls[op] {
			p.add(d, hookStarts[i]+simOpens[i]+journals[i])
		}
		b.add(judgeFloor("hook", fmt.Sprintf("qemu hook %s, one VF (installed script, runs %s; %s)", op, filepath.Base(runs), n),
			result{}, p, scriptFloorText, hookFactor, false))
	}
	_, vflagFloorText := floor(vflagStarts)
	for _, op := range []string{"prepare", "release"} {
		b.add(row{section: "hook", what: fmt.Sprintf("vflag hook qemu %s, one VF (%s)", op, n), measured: ms(ways[1].medians[op]), floor: vflagFloorText, status: "report"})
	}
	s.vflag("down")
}

// hookWay is one way of running the qemu hook.
type hookWay struct {
	name    string
	cmd     func(args ...string) *exec.Cmd // DOMAIN OPERATION SUB-OPERATION EXTRA
	walls   map[string][]time.Duration
	medians map[string]time.Duration // by operation
}

// hookRounds runs n rounds; in each, every way runs a prepare then a
// release of the hook domain, then each is called (the yardsticks). A
// failing run is fatal. VFLAG_BENCH_WRAP wraps each run ("%s":
// way-operation-round).
func (s *scenario) hookRounds(n int, dom []byte, ways []hookWay, each func()) {
	for i := range n {
		for w := range ways {
			if ways[w].walls == nil {
				ways[w].walls = map[string][]time.Duration{}
			}
			for _, ev := range [][]string{{"vmh", "prepare", "begin", "-"}, {"vmh", "release", "end", "-"}} {
				c := ways[w].cmd(ev...)
				if wr := os.Getenv("VFLAG_BENCH_WRAP"); wr != "" {
					wrap := strings.Fields(strings.ReplaceAll(wr, "%s", fmt.Sprintf("%s-%s-%d", ways[w].name, ev[1], i)))
					env := c.Env
					c = exec.Command(wrap[0], append(append(wrap[1:], c.Path), c.Args[1:]...)...)
					c.Env = env
				}
				c.Stdin = bytes.NewReader(dom)
				t0 := time.Now()
				out, err := c.CombinedOutput()
				d := time.Since(t0)
				if err != nil {
					s.b.r.Fatalf("hook (%s) %s: %v\n%s", ways[w].name, strings.Join(ev, " "), err, out)
				}
				ways[w].walls[ev[1]] = append(ways[w].walls[ev[1]], d)
			}
		}
		each()
	}
	for w := range ways {
		ways[w].medians = map[string]time.Duration{}
		for op, ds := range ways[w].walls {
			ways[w].medians[op] = median(ds)
		}
	}
}

// hookDomain is a domain with one VF of the group's (pf 0 vf 1, no
// attachment) as libvirt hands it to the qemu hook.
func (s *scenario) hookDomain() string {
	return `<domain type='kvm'><name>vmh</name><devices>
<interface type='hostdev' managed='yes'><mac address='52:54:00:aa:00:01'/>
<source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x3'/></source></interface>
</devices></domain>`
}

// medianRun is the run with the median wall; its writes are the sum of
// all runs' (a no-op must write nothing in any of them).
func medianRun(rs []result) result {
	var all writes
	for _, r := range rs {
		all = all.plus(r.writes)
	}
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b result) int { return cmp.Compare(a.wall, b.wall) })
	m := sorted[len(sorted)/2]
	m.writes = all
	return m
}

// ---- (6) scaling ----

// scaling runs up and down with zero latency: everything measured is
// vflag's own overhead (plus the simulated kernel's and the daemons'). Each
// point is the median of three runs on fresh hosts, each up started once
// ovs-vswitchd has applied the previous run's teardown (settleOVS). Linearity: a
// least-squares line through the points, and the largest deviation of a
// point from it relative to the largest point.
func (b *bencher) scaling() {
	const reps = 3
	warm := b.scenario(false, 16, sim.Latency{}) // first runs pay for cold caches (binary, libvirt)
	warm.vflag("up")
	warm.vflag("down")
	var starts []time.Duration // the process start, once after each up and down: the noise allowance's unit
	for _, switchdev := range []bool{true, false} {
		mode := map[bool]string{true: "switchdev", false: "legacy"}[switchdev]
		var xs, ys []float64
		for _, n := range []int{16, 32, 64, 127} {
			if switchdev && n > 64 {
				continue // VF-LAG limit
			}
			progress(fmt.Sprintf("scaling: %s 2 x %d, zero latency", mode, n))
			var ups, downs []time.Duration
			for range reps {
				s := b.scenario(switchdev, n, sim.Latency{})
				b.settleOVS()
				ups = append(ups, s.vflag("up").wall)
				downs = append(downs, s.vflag("down").wall)
				starts = append(starts, b.startOnce())
			}
			up, down := median(ups), median(downs)
			xs, ys = append(xs, float64(2*n)), append(ys, float64(up)/1e6)
			b.rows = append(b.rows, row{section: "scaling (zero latency)", what: fmt.Sprintf("%s 2 x %d: up / down (median of %d)", mode, n, reps),
				measured: fmt.Sprintf("%s / %s", ms(up), ms(down)), bound: fmt.Sprintf("%.2f ms/VF", float64(up)/1e6/float64(2*n)), status: "report"})
		}
		slope, icpt := fit(xs, ys)
		dev := 0.0
		for i := range xs {
			dev = max(dev, abs(ys[i]-(icpt+slope*xs[i]))/ys[len(ys)-1])
		}
		// A deviation of a few process starts is noise, not growth.
		start := median(starts)
		noise := float64(scale(start, scalingStarts)) / 1e6
		st := "ok"
		if dev > 0.15 && dev*ys[len(ys)-1] > noise {
			st = "MISS"
		}
		b.add(row{section: "scaling (zero latency)", what: mode + " up: least-squares line, largest deviation",
			measured: fmt.Sprintf("%.1f ms + %.2f ms/VF", icpt, slope), ratio: fmt.Sprintf("%.0f%% (%.1f ms)", dev*100, dev*ys[len(ys)-1]),
			target: fmt.Sprintf("<= 15%% or %d starts (linear)", scalingStarts), status: st,
			against: fmt.Sprintf("start %s: %d starts = %.1f ms", ms(start), scalingStarts, noise)})
	}
}

// quiesceOVS waits until ovs-vswitchd is idle: two windows of 500 ms in a
// row in which it used at most 20 ms of CPU, at most 10 s in all. In the
// second or two after an up that built a bridge of 130 ports it uses 0.6
// to 1 s of CPU (measured on the simulated host with /proc/PID/stat; its
// log names no cause), and not at once: half a second after the up it had
// not begun. It shares the two cores with vflag. The no-op, status, hook
// and transition rows measure a converged host, as a boot unit's re-run
// or an Ansible pass meets it, not one whose switch is still busy with
// the up before; the wait is logged.
func (b *bencher) quiesceOVS(what string) {
	b.quiesce(what, "ovs-vswitchd", filepath.Join(b.srv.Dir(), "ovs-vswitchd.pid"))
}

// quiesce waits until the daemon whose pid file is pidFile is idle, as
// quiesceOVS does for ovs-vswitchd.
func (b *bencher) quiesce(what, daemon, pidFile string) {
	pidText, err := os.ReadFile(pidFile)
	if err != nil {
		b.r.Fatalf("%s's pid: %v", daemon, err)
	}
	stat := "/proc/" + strings.TrimSpace(string(pidText)) + "/stat"
	ticks := func() int64 {
		data, err := os.ReadFile(stat)
		if err != nil {
			b.r.Fatalf("%s's CPU: %v", daemon, err)
		}
		// Fields after the command's closing parenthesis: state is 3,
		// utime 14 and stime 15 (proc(5)).
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		return u + k
	}
	start, last, idle := time.Now(), ticks(), 0
	for idle < 2 && time.Since(start) < 10*time.Second {
		time.Sleep(500 * time.Millisecond)
		now := ticks()
		if now-last <= 2 { // clock ticks of 10 ms
			idle++
		} else {
			idle = 0
		}
		last = now
	}
	progress(fmt.Sprintf("%s: %s idle after %s", what, daemon, time.Since(start).Round(10*time.Millisecond)))
}

// settleOVS waits, untimed, until ovs-vswitchd has applied every change
// made so far. `vflag down` does not wait for that, and ovs-vswitchd (3.1,
// userspace datapath) takes about 2.4 s here to apply the removal of a
// bridge with 129 ports: a run timed right after a down would otherwise
// wait for the previous run's teardown in its own verify step.
func (b *bencher) settleOVS() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := ovs.Connect(ctx, b.srv.Endpoint())
	if err != nil {
		b.r.Fatalf("%v", err)
	}
	defer c.Close()
	if err := c.WaitApplied(ctx); err != nil {
		b.r.Fatalf("%v", err)
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	return s[len(s)/2]
}

func fit(xs, ys []float64) (slope, icpt float64) {
	var sx, sy, sxx, sxy float64
	n := float64(len(xs))
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	slope = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return slope, (sy - slope*sx) / n
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// ---- (2) OVS stage ----

// ovsReps: the vflag and chained runs are the median of this many (the
// per-port run, seconds long, runs once).
const ovsReps = 5

func (b *bencher) ovsStage() {
	for _, n := range []int{128, 254} {
		progress(fmt.Sprintf("OVS stage: %d representor ports", n))
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("pf%dvf%d", i%2, i/2)
		}
		// vflag: connect, read, one transaction; then until ovs-vswitchd applied it.
		ctx := context.Background()
		spec := ovs.BridgeSpec{Owner: "bench", Bridge: "br-bench", DatapathType: "netdev", HWOffload: true,
			Ports: []ovs.PortSpec{{Name: "bond0"}}}
		for _, p := range names {
			spec.Ports = append(spec.Ports, ovs.PortSpec{Name: p})
		}
		var txns, applieds []time.Duration
		for range ovsReps {
			t0 := time.Now()
			c, err := ovs.Connect(ctx, b.srv.Endpoint())
			if err != nil {
				b.r.Fatalf("%v", err)
			}
			rec, _, err := c.Ensure(ctx, spec)
			if err != nil {
				b.r.Fatalf("%v", err)
			}
			txns = append(txns, time.Since(t0))
			if err := c.WaitApplied(ctx); err != nil {
				b.r.Fatalf("%v", err)
			}
			applieds = append(applieds, time.Since(t0))
			if err := c.Undo(ctx, rec); err != nil {
				b.r.Fatalf("%v", err)
			}
			if err := c.WaitApplied(ctx); err != nil {
				b.r.Fatalf("%v", err)
			}
			c.Close()
		}
		vflagTxn, vflagApplied := median(txns), median(applieds)

		// The seed's way: one ovs-vsctl per port.
		perPort, perPortApplied := b.vsctlRun(func() {
			b.vsctl("--no-wait", "add-br", "br-bench", "--", "set", "Bridge", "br-bench", "datapath_type=netdev")
			b.vsctl("--no-wait", "add-port", "br-bench", "bond0")
			for _, p := range names {
				b.vsctl("--no-wait", "add-port", "br-bench", p)
			}
			b.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:hw-offload=true")
		})
		// The best shell way: one invocation, commands chained with --.
		chainedRun := func() {
			args := []string{"--no-wait", "add-br", "br-bench", "--", "set", "Bridge", "br-bench", "datapath_type=netdev",
				"--", "add-port", "br-bench", "bond0"}
			for _, p := range names {
				args = append(args, "--", "add-port", "br-bench", p)
			}
			args = append(args, "--", "set", "Open_vSwitch", ".", "other_config:hw-offload=true")
			b.vsctl(args...)
		}
		var chs, chApplieds []time.Duration
		for range ovsReps {
			ch, chA := b.vsctlRun(chainedRun)
			chs, chApplieds = append(chs, ch), append(chApplieds, chA)
		}
		chained, chainedApplied := median(chs), median(chApplieds)
		what := fmt.Sprintf("%d ports", n)
		stPer, stCh := "ok", "ok"
		if n == 254 && float64(perPort)/float64(vflagTxn) < 50 {
			stPer = "MISS"
		}
		if vflagTxn > chained {
			stCh = "MISS"
		}
		if n != 254 {
			stPer = "report"
		}
		b.add(row{section: "OVS stage", what: what + ": vflag (connect, read, 1 txn) / until applied, median of 5", measured: ms(vflagTxn) + " / " + ms(vflagApplied), status: "report"})
		b.add(row{section: "OVS stage", what: what + ": ovs-vsctl per port / until applied", measured: ms(perPort) + " / " + ms(perPortApplied),
			ratio: fmt.Sprintf("%.0fx", float64(perPort)/float64(vflagTxn)), target: map[bool]string{true: ">= 50x at 254", false: "-"}[n == 254], status: stPer})
		b.add(row{section: "OVS stage", what: what + ": ovs-vsctl chained / until applied, median of 5", measured: ms(chained) + " / " + ms(chainedApplied),
			ratio: fmt.Sprintf("%.1fx", float64(chained)/float64(vflagTxn)), target: ">= 1x", status: stCh})
	}
}

// vsctlRun times f (ovs-vsctl --no-wait calls), then the time until
// ovs-vswitchd applied them: one more ovs-vsctl without --no-wait (it bumps
// next_cfg and waits for cur_cfg). The bridge is removed afterwards.
func (b *bencher) vsctlRun(f func()) (noWait, applied time.Duration) {
	t0 := time.Now()
	f()
	noWait = time.Since(t0)
	b.vsctl("set", "Open_vSwitch", ".", "other_config:hw-offload=true")
	applied = time.Since(t0)
	b.vsctl("--if-exists", "del-br", "br-bench", "--", "remove", "Open_vSwitch", ".", "other_config", "hw-offload")
	return noWait, applied
}

func (b *bencher) vsctl(args ...string) {
	cmd := exec.Command("ovs-vsctl", append([]string{"--db=" + b.srv.Endpoint(), "--timeout=60"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.r.Fatalf("ovs-vsctl %s: %v: %s", strings.Join(args[:min(len(args), 6)], " "), err, out)
	}
}

// ---- output ----

func (b *bencher) print(w io.Writer) {
	fmt.Fprintf(w, "\nvflag bench: simulated ConnectX latencies vf_create %s/VF, mode_change %s, lag_activation %s; real ovsdb-server/ovs-vswitchd and libvirtd\n\n",
		b.hw.VFCreate, b.hw.ModeChange, b.hw.LAGActivation)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "section\tmeasurement\tmeasured\tfloor\tbound/extra\tratio\ttarget\tstatus\tjudged against")
	for _, r := range b.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.section, r.what, r.measured, dash(r.floor), dash(r.bound), dash(r.ratio), dash(r.target), r.status, dash(r.against))
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
func ms(d time.Duration) string   { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// dropVflagEnv removes the VFLAG_* settings (but the bench's own,
// VFLAG_BENCH_*) from the environment the measured runs inherit: vflag
// takes them over its config file, so a shell that sourced a simulated
// host's env file (VFLAG_OVSDB, VFLAG_LIBVIRT) sent the bench's runs to
// that host's daemons. Each one dropped is said.
func dropVflagEnv() {
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "VFLAG_") && !strings.HasPrefix(name, "VFLAG_BENCH_") {
			fmt.Fprintf(os.Stderr, "bench: ignoring %s=%s from the environment (the bench's config decides)\n", name, value)
			_ = os.Unsetenv(name)
		}
	}
}
