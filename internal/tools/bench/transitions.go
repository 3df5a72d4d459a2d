package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vflag/vflag/internal/sim"
)

// ---- (7) transitions: up from a converged host to a changed config ----
//
// One simulated host with two dual-port ConnectX NICs (cx6lx for group lag0,
// cx6dx for group lag1), the private OVS and libvirtd. Each timed run starts
// from a host converged to the transition's from-config: an untimed `vflag
// up` with the simulated host's latencies set to zero (a converged host's
// state does not depend on how long converging took: every VF is present,
// the LAG is active), then ovs-vswitchd is let apply it (settleOVS); then the
// hardware latencies are set and `vflag up -o json` with the to-config is
// timed. The latencies live in the simulated host's state (host.json's
// spec, which the config's sim section only seeds), so setLatency edits
// them there, under the simulated host's lock.

// tconf is one config of the transitions: group lag0 (2 x numvfs,
// switchdev, VF-LAG, OVS bridge, two attachments to vm1) and optionally
// group lag1 on the second NIC.
type tconf struct {
	numvfs, vlan, miimon int
	groupB               bool
	vlanB, miimonB       int
	macB                 string
}

func baseTconf() tconf {
	return tconf{numvfs: 64, vlan: 100, miimon: 100, vlanB: 100, miimonB: 100, macB: "52:54:00:20:00:00"}
}

func (b *bencher) tconfig(c tconf, lat sim.Latency) string {
	var w strings.Builder
	fmt.Fprintf(&w, "ovsdb: %s\nlibvirt: %s\nlag_timeout: 60s\nvf_timeout: 10m\ngroups:\n", b.srv.Endpoint(), b.virt.URI())
	fmt.Fprintf(&w, `  - name: lag0
    eswitch: switchdev
    pfs: [ens1f0np0, ens1f1np1]
    numvfs: %d
    flow_steering_mode: smfs
    bond: {name: bond0, mode: 802.3ad, miimon: %d, lacp_rate: fast, xmit_hash_policy: layer3+4}
    ovs: {bridge: br-lag, hw_offload: true, datapath_type: netdev}
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:10:00:00", vlan: %d}
      - {pf: 1, vf: 0, mac: "52:54:00:10:01:00"}
    attachments:
      - {domain: vm1, pf: 0, vf: 0}
      - {domain: vm1, pf: 1, vf: 0}
`, c.numvfs, c.miimon, c.vlan)
	if c.groupB {
		fmt.Fprintf(&w, `  - name: lag1
    eswitch: switchdev
    pfs: [ens2f0np0, ens2f1np1]
    numvfs: 64
    flow_steering_mode: smfs
    bond: {name: bond1, mode: 802.3ad, miimon: %d, lacp_rate: fast, xmit_hash_policy: layer3+4}
    ovs: {bridge: br-lag1, hw_offload: true, datapath_type: netdev}
    vfs:
      - {pf: 0, vf: 0, mac: %q, vlan: %d}
      - {pf: 1, vf: 0, mac: "52:54:00:20:01:00"}
`, c.miimonB, c.macB, c.vlanB)
	}
	fmt.Fprintf(&w, `sim:
  mirror_netns: %s
  nics:
    - name: cx6lx
      total_vfs: 64
      pfs:
        - {pci: "0000:61:00.0", netdev: ens1f0np0}
        - {pci: "0000:61:00.1", netdev: ens1f1np1}
    - name: cx6dx
      total_vfs: 64
      pfs:
        - {pci: "0000:62:00.0", netdev: ens2f0np0}
        - {pci: "0000:62:00.1", netdev: ens2f1np1}
  latency:
    vf_create: %s
    mode_change: %s
    lag_activation: %s
`, b.srv.Netns(), lat.VFCreate, lat.ModeChange, lat.LAGActivation)
	return w.String()
}

// transition is one row pair of the section.
type transition struct {
	name     string
	from, to tconf
	reps     int
	// minimal: the step ids that must change (the lower bound of the writes).
	minimal []string
	// bound: the hardware time of what must change, from the latency model;
	// how: how it is derived.
	bound time.Duration
	how   string
	// write measures, after the timed run, the one write the change
	// makes, on its own (nil: none), to which the journal's rewrite
	// (scenario.journalWrite) is added; the wall is asserted within
	// changeFactor x (no-op up + write). assertWrites: changed steps ==
	// minimal asserted. Failing either makes the bench exit 1 (FAIL).
	write        func(h *scenario) time.Duration
	assertWrites bool
	// maxStarts: when bound > 0, the extra over it is held to that many
	// process starts, measured before and after the timed run.
	maxStarts float64
}

func (b *bencher) transitionList(reps, slowReps int) []transition {
	base := baseTconf()
	with := func(f func(*tconf)) tconf { c := base; f(&c); return c }
	two := with(func(c *tconf) { c.groupB = true })
	twoChanged := with(func(c *tconf) { c.groupB, c.vlanB, c.miimonB, c.macB = true, 300, 200, "52:54:00:20:00:99" })
	const half = 32
	numvfsBound := max(half*b.hw.VFCreate, b.hw.LAGActivation)
	return []transition{
		{name: "VLAN 100 -> 300 on lag0 pf0 vf0 (2 x 64 switchdev)", from: base, to: with(func(c *tconf) { c.vlan = 300 }), reps: reps,
			minimal: []string{"ovs.bridge/br-lag"}, how: "no kernel write, 1 OVSDB txn",
			write: func(*scenario) time.Duration { return b.ovsWrite(b.portWithTag(300), 100, 300) }, assertWrites: true},
		{name: "bond0 miimon 100 -> 200 (2 x 64 switchdev)", from: base, to: with(func(c *tconf) { c.miimon = 200 }), reps: reps,
			minimal: []string{"bond.create/bond0"}, how: "1 sysfs write, live",
			write: func(h *scenario) time.Duration {
				return h.simWrite("/sys/class/net/bond0/bonding/miimon", "100", "200")
			}, assertWrites: true},
		{name: "lag1 of lag0+lag1 (2 x 2 x 64): VLAN, miimon, one VF MAC", from: two, to: twoChanged, reps: reps,
			minimal: []string{"bond.create/bond1", "ovs.bridge/br-lag1", "sriov.vfmac/ens2f0np0/0"},
			how:     "2 kernel writes, 1 OVSDB txn"},
		{name: fmt.Sprintf("lag0 numvfs 64 -> %d on both PFs (switchdev)", half), from: base, to: with(func(c *tconf) { c.numvfs = half }), reps: slowReps,
			minimal: []string{"ovs.bridge/br-lag", "reps.up/ens1f0np0", "reps.up/ens1f1np1",
				"sriov.numvfs/pci/0000:61:00.0", "sriov.numvfs/pci/0000:61:00.1", "sriov.vfmac/ens1f0np0/0", "sriov.vfmac/ens1f1np1/0"},
			bound: numvfsBound, maxStarts: numvfsStarts,
			how: fmt.Sprintf("max(%d x vf_create, lag_activation)", half)},
	}
}

func (b *bencher) transitions(reps, slowReps int) {
	dir := b.r.TempDir()
	h := &scenario{b: b, dir: dir, cfg: filepath.Join(dir, "vflag.yaml"), simDir: filepath.Join(dir, "sim"), state: filepath.Join(dir, "state")}
	zero := sim.Latency{}
	for _, t := range b.transitionList(reps, slowReps) {
		if b.filter != "" && !strings.Contains(t.name, b.filter) {
			continue
		}
		progress(fmt.Sprintf("transition %s: %d timed run(s)", t.name, t.reps))
		var walls, cpus, noops, wrs []time.Duration
		var p paired  // each round's wall beside its no-op + write
		var sp paired // each round's wall beside the start sampled during it
		var last result
		var lastIDs []string
		for i := range t.reps {
			// The from-state, untimed and at zero latency.
			h.writeConfig(b.tconfig(t.from, zero))
			if _, err := os.Stat(filepath.Join(h.simDir, "host.json")); err == nil {
				h.setLatency(zero)
			}
			h.vflag("up")
			b.quiesceOVS("transition " + t.name + ": from-config")
			again := h.vflag("up")
			if again.rep.Changes != 0 {
				b.r.Fatalf("transition %s: the from-config does not converge: a second up changed %v", t.name, changedIDs(again.rep))
			}
			noops = append(noops, again.wall)
			b.settleOVS()
			b.quiesceOVS("transition " + t.name + ": before the timed run")
			// The timed run, at hardware latencies.
			h.setLatency(b.hw)
			h.writeConfig(b.tconfig(t.to, b.hw))
			if w := os.Getenv("VFLAG_BENCH_WRAP"); w != "" {
				h.wrap = strings.Fields(strings.ReplaceAll(w, "%s", fmt.Sprintf("%s-%d", strings.Fields(t.name)[0], i)))
			}
			var res result
			if t.bound > 0 {
				sp.add(0, b.during(func() { res = h.vflag("up") }))
				sp.runs[len(sp.runs)-1] = res.wall
			} else {
				res = h.vflag("up")
			}
			h.wrap = nil
			walls, cpus = append(walls, res.wall), append(cpus, res.cpu)
			if t.write != nil {
				w := t.write(h) + h.journalWrite()
				wrs = append(wrs, w)
				p.add(res.wall, again.wall+w)
				progress(fmt.Sprintf("transition %s: round %d: up %s, no-op up %s, write %s", t.name, i+1, ms(res.wall), ms(again.wall), ms(w)))
			}
			ids := changedIDs(res.rep)
			if i > 0 && !slices.Equal(ids, lastIDs) {
				b.r.Fatalf("transition %s: run %d changed %v, run %d %v", t.name, i, ids, i+1, lastIDs)
			}
			last, lastIDs = res, ids
		}
		y := yard{noop: median(noops), rounds: p}
		if len(wrs) > 0 {
			y.write = median(wrs)
		}
		y.starts = sp
		b.transitionRows(t, median(walls), median(cpus), y, last, lastIDs)
	}
}

// yard is the yardsticks of a transition, medians of its rounds: the
// no-op up that checked the from-state, the change's one write on its own
// (transition.write), the process start during the timed run (when it has
// a bound).
type yard struct {
	noop, write time.Duration
	rounds      paired // each round's wall beside its no-op + write
	starts      paired // each round's wall beside the start sampled during it
}

// transitionRows: the wall row (with vflag's CPU time, judged against the
// yardsticks of the same rounds) and the writes row.
func (b *bencher) transitionRows(t transition, wall, cpu time.Duration, y yard, res result, ids []string) {
	what := fmt.Sprintf("%s: up wall, median of %d", t.name, t.reps)
	if t.reps == 1 {
		what = t.name + ": up wall, 1 run"
	}
	wr := row{section: "transitions", what: what, measured: fmt.Sprintf("%s (cpu %s; no-op up %s)", ms(wall), ms(cpu), ms(y.noop)), bound: secs(t.bound), ratio: "-", target: "-", status: "report"}
	switch {
	case t.write != nil:
		wr = judgeChange("transitions", what, y.rounds, cpu, y.noop, y.write, changeFactor)
		wr.bound = secs(t.bound)
	case t.bound > 0:
		wr = judgeExtra("transitions", what, y.starts, t.bound, t.maxStarts)
		wr.measured = fmt.Sprintf("%s (cpu %s; no-op up %s)", secs(wall), ms(cpu), ms(y.noop))
	}
	wr.bound += ": " + t.how
	b.add(wr)

	minimal := slices.Sorted(slices.Values(t.minimal))
	st := "ok"
	if !slices.Equal(ids, minimal) {
		st = "MISS"
		if t.assertWrites {
			st = "FAIL"
		}
	}
	target := "= minimal"
	if t.assertWrites {
		target += " (asserted)"
	}
	b.add(row{section: "transitions", what: t.name + ": writes (changed steps)",
		measured: fmt.Sprintf("%d [%s]; kernel %d, ovsdb %d, libvirt %d", len(ids), strings.Join(ids, " "), res.writes.kernel, b2i(res.writes.ovsdb), b2i(res.writes.libvirt)),
		bound:    fmt.Sprintf("minimal %d", len(minimal)), ratio: fmt.Sprintf("%d/%d", len(ids), len(minimal)), target: target, status: st})
}

func changedIDs(rep report) []string {
	var ids []string
	for _, s := range rep.Steps {
		if s.Changed {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func (s *scenario) writeConfig(text string) {
	if err := os.WriteFile(s.cfg, []byte(text), 0o600); err != nil {
		s.b.r.Fatalf("%v", err)
	}
}

// setLatency sets the simulated host's latency model: the spec saved in
// host.json (the config's sim section only seeds a new host). The rest of
// the state is kept byte for byte (numbers as written), and the generation
// counter is not bumped: this is not a kernel write.
func (s *scenario) setLatency(lat sim.Latency) {
	fatal := func(err error) { s.b.r.Fatalf("set the simulated host's latency: %v", err) }
	lf, err := os.OpenFile(filepath.Join(s.simDir, "host.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fatal(err)
	}
	defer func() { _ = lf.Close() }()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		fatal(err)
	}
	defer func() { _ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) }()
	path := filepath.Join(s.simDir, "host.json")
	data, err := os.ReadFile(path)
	if err != nil {
		fatal(err)
	}
	var st, spec map[string]json.RawMessage
	if err := json.Unmarshal(data, &st); err != nil {
		fatal(err)
	}
	if err := json.Unmarshal(st["spec"], &spec); err != nil {
		fatal(err)
	}
	if spec["latency"], err = json.Marshal(lat); err != nil {
		fatal(err)
	}
	if st["spec"], err = json.Marshal(spec); err != nil {
		fatal(err)
	}
	out, err := json.Marshal(st)
	if err != nil {
		fatal(err)
	}
	tmp := path + ".bench-tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		fatal(err)
	}
}
