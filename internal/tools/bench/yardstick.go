package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vflag/vflag/internal/atomicfile"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
)

// ---- yardsticks: what this machine does, measured in the same run ----
//
// A millisecond target holds on one machine and not on another of the same
// kind (a process start of 15 ms on one, 30 ms on the next), so no target
// of the table is in milliseconds: each is judged against a yardstick the
// bench measures on the machine, alongside the run it judges (interleaved
// with it, or right before and after it), so that both see the same
// machine under the same load:
//
//   - floor: what a run cannot avoid (the process start, and the reads of
//     the simulated host, OVSDB and libvirt a no-op makes). A no-op, a
//     status or the hook is held within a factor of its floor.
//   - write: what the one write of a one-port change costs on its own
//     (one OVSDB transaction until ovs-vswitchd applied it; one sysfs write
//     of the simulated host). A one-port change is held within a factor of
//     the no-op up plus that write.
//   - start: the wall time of `vflag --version`, a fixed amount of CPU work
//     (mostly the dynamic loader). The hardware bound of an up or a down is
//     the model's; what a run adds above it (wall - bound) is CPU work, and
//     is held to a number of starts.
//
// The factors come from the figures of today's code on three machines of
// the same kind: one whose process start is 14 ms, one whose is 31 ms
// (each to itself), and a third whose start was 23-31 ms with all of it
// and 44-63 ms with half a core's worth, the bench's processes ahead of
// four other jobs in the CPU scheduler (docs/performance.md, "The
// factors"). Each factor is the largest of their medians with a margin of
// 10-60% (the smallest where a row's rounds spread least), so that 20 ms
// of CPU in the no-op path misses on all three and an up whose extra grew
// by half misses on the fast machine; a machine shared with other jobs at
// full load needs more (docs/performance.md gives its figures).

// Factors of the floor (wall <= factor x floor). The figures: fast, slow;
// the third machine's with all of it / half a core.
const (
	// noopFactor: a no-op up of one NIC, and a down with nothing to undo:
	// 1.4, 1.38; 0.84-1.39 / 1.16-1.56.
	noopFactor = 1.8
	// noop2Factor: a no-op up or status of 2 NICs (two groups' steps,
	// two bridges read): -, -; 1.35-1.67 / 1.44-2.13.
	noop2Factor = 2.4
	// statusFactor: status of one NIC: 1.41, 1.50; 1.36 / 1.96.
	statusFactor = 2.2
	// ovnNoopFactor: a no-op up of an OVN group with 128 ports bound,
	// which reads beyond the floor the chassis's external_ids, every
	// bound Interface's ovn-installed and the attached domains' UUIDs:
	// -, -; 1.73 / 2.09.
	ovnNoopFactor = 2.4
	// hookFactor: the qemu hook through the installed script against the
	// start of the binary it runs and the opening of the simulated host
	// (the shell that runs the script is not in the floor): prepare 1.5,
	// 2.14; 2.08 / 1.95.
	hookFactor = 2.6
	// changeFactor: a one-setting change against the no-op up plus its
	// write (vflag's write waits for ovs-vswitchd over a second
	// connection with a monitor of the database, more than ovs-vsctl's):
	// 1.0-1.1, 1.1; 1.10-1.23 / 0.95-1.14.
	changeFactor = 1.5
)

// Starts a run may add above its hardware bound (wall - bound <= n x
// start): today's code needs, fast, slow; the third machine's all / half:
const (
	upStarts      = 32 // up 2 x 64 switchdev (or with a tunnel): 20-23, 16.8; 12.7-25.6 / 19.2-19.4; 2 x 127 legacy: 4-15
	up2Starts     = 45 // up 2 NICs x 2 x 64: 25-26, -; 28.3 / 36.7
	up4Starts     = 48 // up 4 NICs x 2 x 32: 29-30, 27; 34.3 / 33.6
	downStarts    = 7  // down 2 x 64 switchdev: 3.6-3.8, 3.5; 5.3 / 5.2
	down2Starts   = 10 // down 2 NICs x 2 x 64: 5.4-5.8, 4.8; 5.9 / 8.0
	numvfsStarts  = 22 // transition numvfs 64 -> 32: 11-14, 12.4; 13.7 / 11.6
	scalingStarts = 4  // scaling: a deviation from the line below this is noise (the 50 ms it replaces: 3.5 starts of 14 ms)
)

// floorRounds: rounds of a no-op, status or down with nothing to undo,
// each followed by a sample of its floor.
const floorRounds = 11

// startOnce is one `vflag --version` (the process start).
func (b *bencher) startOnce() time.Duration {
	t0 := time.Now()
	if out, err := exec.Command(b.bin, "--version").CombinedOutput(); err != nil {
		b.r.Fatalf("vflag --version: %v: %s", err, out)
	}
	return time.Since(t0)
}

// floorSample is one sample of each part of a no-op's floor.
type floorSample struct{ start, links, ovsdb, virt time.Duration }

// floorParts are the samples of a floor; their medians, part by part, are
// the floor.
type floorParts []floorSample

func (fp floorParts) part(f func(floorSample) time.Duration) time.Duration {
	var ds []time.Duration
	for _, s := range fp {
		ds = append(ds, f(s))
	}
	return median(ds)
}

func (fp floorParts) start() time.Duration {
	return fp.part(func(s floorSample) time.Duration { return s.start })
}

// total is the floor: the sum of the parts' medians.
func (fp floorParts) total() time.Duration {
	return fp.start() + fp.part(func(s floorSample) time.Duration { return s.links }) +
		fp.part(func(s floorSample) time.Duration { return s.ovsdb }) + fp.part(func(s floorSample) time.Duration { return s.virt })
}

func (fp floorParts) String() string {
	links := fp.part(func(s floorSample) time.Duration { return s.links })
	ovsdb := fp.part(func(s floorSample) time.Duration { return s.ovsdb })
	virt := fp.part(func(s floorSample) time.Duration { return s.virt })
	return fmt.Sprintf("%s (start %s + links %s + ovsdb %s + libvirt %s)", ms(fp.total()), ms(fp.start()), ms(links), ms(ovsdb), ms(virt))
}

// floorSample measures once what a no-op up of the scenario cannot avoid:
// the process start of the binary (`vflag --version`), one dump of the
// links (the simulated host opened and read), one OVSDB read of each bridge
// the config names (connect, select) and one libvirt lookup of the
// attached domain (connect, read its XML). The sum is the floor of reads
// made one after the other; made in parallel, the start and the largest
// read would be.
func (s *scenario) floorSample() floorSample {
	timed := func(f func()) time.Duration {
		t0 := time.Now()
		f()
		return time.Since(t0)
	}
	var fs floorSample
	fs.start = s.b.startOnce()
	fs.links = timed(func() {
		h, err := sim.Open(s.simDir, nil)
		if err != nil {
			s.b.r.Fatalf("open the simulated host: %v", err)
		}
		if _, err := h.Links(); err != nil {
			s.b.r.Fatalf("links: %v", err)
		}
		_ = h.Close()
	})
	fs.ovsdb = timed(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := ovs.Connect(ctx, s.b.srv.Endpoint())
		if err != nil {
			s.b.r.Fatalf("ovsdb: %v", err)
		}
		for _, br := range s.bridges() {
			if _, err := c.Status(ctx, br); err != nil {
				s.b.r.Fatalf("ovsdb: %v", err)
			}
		}
		c.Close()
	})
	fs.virt = timed(func() {
		c, err := libvirtx.Open(s.b.virt.URI())
		if err != nil {
			s.b.r.Fatalf("libvirt: %v", err)
		}
		if _, err := c.Domain("vm1"); err != nil {
			s.b.r.Fatalf("libvirt: %v", err)
		}
		_ = c.Close()
	})
	return fs
}

// paired is rounds of a timed run each beside the yardstick sampled in
// the same round: the verdict is on the median of the rounds' ratios, so
// that a round the machine's load slowed is compared with a yardstick the
// same load slowed.
type paired struct{ runs, yards []time.Duration }

func (p *paired) add(run, yard time.Duration) {
	p.runs, p.yards = append(p.runs, run), append(p.yards, yard)
}

// ratio is the median of run/yard over the rounds.
func (p paired) ratio() float64 {
	rs := p.ratios()
	return rs[len(rs)/2]
}

// ratios is run/yard of each round, sorted.
func (p paired) ratios() []float64 {
	var rs []float64
	for i := range p.runs {
		rs = append(rs, float64(p.runs[i])/float64(p.yards[i]))
	}
	slices.Sort(rs)
	return rs
}

// spread is the rounds' smallest and largest ratio.
func (p paired) spread() string {
	rs := p.ratios()
	return fmt.Sprintf("%.2f-%.2f", rs[0], rs[len(rs)-1])
}

// noopWithFloor runs `vflag args` floorRounds times on the converged host,
// each run followed by a sample of the floor, and returns the run with the
// median wall (its writes the sum of all runs': a no-op must write
// nothing in any of them), the rounds and the floor samples.
func (s *scenario) noopWithFloor(args ...string) (result, paired, floorParts) {
	var rs []result
	var p paired
	var fp floorParts
	for range floorRounds {
		r, f := s.vflag(args...), s.floorSample()
		rs, fp = append(rs, r), append(fp, f)
		p.add(r.wall, f.start+f.links+f.ovsdb+f.virt)
	}
	return medianRun(rs), p, fp
}

// judgeFloor is the row of a run held within factor x floor (and, when
// noWrites, to no write at all): the median over the rounds of each run's
// ratio to the floor sampled in its round. r is the median run (its writes
// all runs'); the row prints the median run and the median floor.
func judgeFloor(section, what string, r result, p paired, floorText string, factor float64, noWrites bool) row {
	ratio := p.ratio()
	floor := median(p.yards)
	st := "ok"
	if ratio > factor || noWrites && r.writes.total() != 0 {
		st = "MISS"
	}
	measured, target := ms(median(p.runs)), fmt.Sprintf("<= %.1f x floor", factor)
	if noWrites {
		measured += ", writes " + r.writes.String()
		target += ", 0 writes"
	}
	return row{section: section, what: what, measured: measured, floor: floorText, ratio: fmt.Sprintf("%.2f x floor", ratio), target: target, status: st,
		against: fmt.Sprintf("the floor of each round: median %.2f (rounds %s) x (floor %s x %.1f = %s)", ratio, p.spread(), ms(floor), factor, ms(scale(floor, factor)))}
}

// judgeExtra is the row of runs against their hardware bound: what each
// adds above the bound (wall - bound) is counted in process starts sampled
// during it (p: each run's wall beside the median start sampled during
// it), and the median over the runs is held to maxStarts. The ratio to
// the bound is printed, not judged.
func judgeExtra(section, what string, p paired, bound time.Duration, maxStarts float64) row {
	extras := paired{yards: p.yards}
	for _, w := range p.runs {
		extras.runs = append(extras.runs, w-bound)
	}
	n := extras.ratio()
	wall := median(p.runs)
	start := median(p.yards)
	st := "ok"
	if n > maxStarts {
		st = "MISS"
	}
	against := fmt.Sprintf("start %s during the run: extra %.1f starts (limit %s)", ms(start), n, ms(scale(start, maxStarts)))
	if len(p.runs) > 1 {
		against = fmt.Sprintf("start %s during each run: extra median %.1f starts (runs %s; limit %s)", ms(start), n, extras.spread(), ms(scale(start, maxStarts)))
	}
	return row{section: section, what: what, measured: secs(wall), bound: fmt.Sprintf("%s, extra %s", secs(bound), ms(wall-bound)),
		ratio:   fmt.Sprintf("%.3f", float64(wall)/float64(bound)),
		target:  fmt.Sprintf("extra <= %g starts", maxStarts),
		status:  st,
		against: against}
}

// during runs f while it samples the process start: once before, every
// startEvery while f runs, once after; it returns the median sample. A
// long run is so compared with the machine as it was while it ran (the
// other jobs on it come and go within seconds).
func (b *bencher) during(f func()) time.Duration {
	samples := []time.Duration{b.startOnce()}
	done := make(chan struct{})
	got := make(chan []time.Duration)
	go func() {
		var ds []time.Duration
		t := time.NewTicker(startEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				got <- ds
				return
			case <-t.C:
				ds = append(ds, b.startOnce())
			}
		}
	}()
	f()
	close(done)
	samples = append(samples, <-got...)
	samples = append(samples, b.startOnce())
	return median(samples)
}

// startEvery: how often during a long run the process start is sampled.
const startEvery = 250 * time.Millisecond

// judgeChange is the row of a one-port change: its wall is held within
// factor x (the no-op up + its one write), both measured in the same
// rounds as the change (p: the change's walls beside each round's no-op +
// write), on the median of the rounds' ratios.
func judgeChange(section, what string, p paired, cpu, noop, write time.Duration, factor float64) row {
	ratio := p.ratio()
	st := "ok"
	if ratio > factor {
		st = "FAIL"
	}
	return row{section: section, what: what, measured: fmt.Sprintf("%s (cpu %s)", ms(median(p.runs)), ms(cpu)),
		floor:   fmt.Sprintf("no-op up %s + write %s", ms(noop), ms(write)),
		ratio:   fmt.Sprintf("%.2f x (no-op + write)", ratio),
		target:  fmt.Sprintf("<= %.1f x (no-op + write)", factor),
		status:  st,
		against: fmt.Sprintf("each round's no-op up + write: median %.2f (rounds %s) x (%s x %.1f = %s)", ratio, p.spread(), ms(noop+write), factor, ms(scale(noop+write, factor)))}
}

func scale(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

// ovsWrite measures one OVSDB write of one port's tag, until ovs-vswitchd
// applied it, as a client other than vflag makes it: `ovs-vsctl set Port
// PORT tag=N`, which connects, reads what it needs, commits and waits for
// cur_cfg, as vflag's change adds a transaction and the wait for
// ovs-vswitchd (over a second connection, with a monitor) to its no-op.
// It sets the tag to from, then back to to (the port ends as it was), and
// returns the mean of the two.
func (b *bencher) ovsWrite(port string, from, to int) time.Duration {
	var sets []time.Duration
	for _, tag := range []int{from, to} {
		t0 := time.Now()
		b.vsctl("set", "Port", port, fmt.Sprintf("tag=%d", tag))
		sets = append(sets, time.Since(t0))
	}
	return mean(sets)
}

// portWithTag is the name of the one port whose tag is tag.
func (b *bencher) portWithTag(tag int) string {
	out, err := exec.Command("ovs-vsctl", "--db="+b.srv.Endpoint(), "--timeout=60", "--bare", "--columns=name", "find", "Port", fmt.Sprintf("tag=%d", tag)).CombinedOutput()
	names := strings.Fields(string(out))
	if err != nil || len(names) != 1 {
		b.r.Fatalf("the port with tag %d: %v: %s", tag, err, out)
	}
	return names[0]
}

// simWrite measures one sysfs write of the simulated host as `vflag up`
// makes it for a live bond option (echo -n VALUE > PATH): it writes from,
// then back to, and returns the mean of the two writes (the host opened
// before, untimed: the no-op opens it too).
func (s *scenario) simWrite(path, from, to string) time.Duration {
	h, err := sim.Open(s.simDir, nil)
	if err != nil {
		s.b.r.Fatalf("open the simulated host: %v", err)
	}
	defer func() { _ = h.Close() }()
	var ds []time.Duration
	for _, v := range []string{from, to} {
		t0 := time.Now()
		if err := h.FS().WriteFile(path, []byte(v)); err != nil {
			s.b.r.Fatalf("write %s to %s: %v", v, path, err)
		}
		ds = append(ds, time.Since(t0))
	}
	return mean(ds)
}

// bridges are the bridges of the scenario's config: br-lag, and for
// several NICs br-lag1, br-lag2... (multiConfig).
func (s *scenario) bridges() []string {
	brs := []string{"br-lag"}
	for i := 1; i < s.nics; i++ {
		brs = append(brs, fmt.Sprintf("br-lag%d", i))
	}
	return brs
}

// journalWrite measures one durable write of a file the size of the
// scenario's journal (4 KiB when it has none) next to its state: written
// to a temporary file, fsynced, renamed over, the directory fsynced
// (atomicfile.ReplaceFile, as the journal is rewritten). A run that
// changes something records it so before it returns; on a machine whose
// disk is busy that costs more than on one whose disk is idle.
func (s *scenario) journalWrite() time.Duration {
	size := 4096
	if fi, err := os.Stat(filepath.Join(s.state, "journal.json")); err == nil && fi.Size() > 0 {
		size = int(fi.Size())
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = 'x'
	}
	t0 := time.Now()
	if err := atomicfile.ReplaceFile(filepath.Join(s.dir, "yardstick.json"), data, 0o600); err != nil {
		s.b.r.Fatalf("yardstick write: %v", err)
	}
	return time.Since(t0)
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}
