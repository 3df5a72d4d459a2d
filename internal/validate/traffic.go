package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Load generates traffic through the bond until it is done or ctx ends.
type Load interface {
	Run(ctx context.Context) (LoadResult, error)
}

// LoadResult is what the traffic generator measured.
type LoadResult struct {
	Summary       string  `json:"summary"`
	BitsPerSecond float64 `json:"bits_per_second,omitempty"`
}

// Iperf3 runs iperf3 as a client against Peer, or as a one-shot server.
type Iperf3 struct {
	Bin      string // default "iperf3"
	Peer     string // client mode: the server's address
	Server   bool   // serve one test (iperf3 -s -1)
	Bind     string // -B
	Port     int    // -p
	Duration time.Duration
	Parallel int // -P (active-active bonds hash flows: several are needed to use both ports)
	Reverse  bool
}

// Args is the iperf3 command line.
func (i Iperf3) Args() []string {
	var a []string
	if i.Server {
		a = []string{"-s", "-1", "-J"}
	} else {
		secs := int(i.Duration.Round(time.Second) / time.Second)
		if secs < 1 {
			secs = 1
		}
		a = []string{"-c", i.Peer, "-t", strconv.Itoa(secs), "-J"}
		if i.Parallel > 1 {
			a = append(a, "-P", strconv.Itoa(i.Parallel))
		}
		if i.Reverse {
			a = append(a, "-R")
		}
	}
	if i.Bind != "" {
		a = append(a, "-B", i.Bind)
	}
	if i.Port != 0 {
		a = append(a, "-p", strconv.Itoa(i.Port))
	}
	return a
}

// ErrToolMissing marks a traffic tool that is not installed.
var ErrToolMissing = errors.New("not installed")

func lookTool(bin, pkg string) (string, error) {
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%s not found in PATH: %w (install the %s package)", bin, ErrToolMissing, pkg)
	}
	return p, nil
}

func (i Iperf3) Run(ctx context.Context) (LoadResult, error) {
	bin := i.Bin
	if bin == "" {
		bin = "iperf3"
	}
	p, err := lookTool(bin, "iperf3")
	if err != nil {
		return LoadResult{}, err
	}
	if !i.Server && i.Peer == "" {
		return LoadResult{}, errors.New("iperf3: no peer (--peer or groups[].validate.peer)")
	}
	cmd := exec.CommandContext(ctx, p, i.Args()...)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.Output()
	res, perr := parseIperf3(out)
	if err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("iperf3 %s: %w", strings.Join(i.Args(), " "), ctx.Err())
		}
		msg := res.Summary
		if ee, ok := err.(*exec.ExitError); ok && msg == "" {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return res, fmt.Errorf("iperf3 %s: %v: %s", strings.Join(i.Args(), " "), err, msg)
	}
	return res, perr
}

// parseIperf3 reads iperf3 -J output: end.sum_received (or sum_sent) bits
// per second, or the error field.
func parseIperf3(out []byte) (LoadResult, error) {
	var doc struct {
		Error string `json:"error"`
		End   struct {
			SumSent struct {
				Bps   float64 `json:"bits_per_second"`
				Bytes uint64  `json:"bytes"`
			} `json:"sum_sent"`
			SumReceived struct {
				Bps   float64 `json:"bits_per_second"`
				Bytes uint64  `json:"bytes"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return LoadResult{}, fmt.Errorf("iperf3: unreadable JSON output: %w", err)
	}
	if doc.Error != "" {
		return LoadResult{Summary: doc.Error}, fmt.Errorf("iperf3: %s", doc.Error)
	}
	bps := doc.End.SumReceived.Bps
	if bps == 0 {
		bps = doc.End.SumSent.Bps
	}
	return LoadResult{BitsPerSecond: bps, Summary: "iperf3 " + formatBits(bps)}, nil
}

func formatBits(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gbit/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2f Mbit/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.2f kbit/s", bps/1e3)
	}
	return fmt.Sprintf("%.0f bit/s", bps)
}

// Point is every slave's counters at one instant.
type Point struct {
	At      time.Duration
	Samples map[string]Sample
}

// Tick is one interval of the live view: per-slave rates.
type Tick struct {
	At    time.Duration
	Rates map[string]Rate
}

// Rate is one slave's traffic over the last interval.
type Rate struct {
	PacketsPerSec float64
	BitsPerSec    float64
}

// Sampler reads the slaves' counters every Interval.
type Sampler struct {
	Counters Counters
	Slaves   []string
	Interval time.Duration
	OnTick   func(Tick) // live view; called from the sampling goroutine

	mu     sync.Mutex
	start  time.Time
	points []Point
	err    error
}

func (s *Sampler) sample() {
	p := Point{At: time.Since(s.start), Samples: map[string]Sample{}}
	for _, n := range s.Slaves {
		v, err := s.Counters.Read(n)
		if err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
			continue
		}
		p.Samples[n] = v
	}
	s.mu.Lock()
	var prev *Point
	if len(s.points) > 0 {
		prev = &s.points[len(s.points)-1]
	}
	s.points = append(s.points, p)
	s.mu.Unlock()
	if prev != nil && s.OnTick != nil {
		dt := (p.At - prev.At).Seconds()
		if dt <= 0 {
			return
		}
		t := Tick{At: p.At, Rates: map[string]Rate{}}
		for _, n := range s.Slaves {
			d := p.Samples[n].sub(prev.Samples[n])
			t.Rates[n] = Rate{PacketsPerSec: float64(d.Packets) / dt, BitsPerSec: float64(d.Bytes) * 8 / dt}
		}
		s.OnTick(t)
	}
}

func (a Sample) sub(b Sample) Sample {
	var d Sample
	if a.Packets >= b.Packets {
		d.Packets = a.Packets - b.Packets
	}
	if a.Bytes >= b.Bytes {
		d.Bytes = a.Bytes - b.Bytes
	}
	return d
}

// Start takes the first sample and samples in the background until stop.
func (s *Sampler) Start() (stop func() []Point) {
	if s.Interval <= 0 {
		s.Interval = time.Second
	}
	s.start = time.Now()
	s.sample()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.Interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return func() []Point {
		close(done)
		wg.Wait()
		s.sample()
		s.mu.Lock()
		defer s.mu.Unlock()
		return append([]Point(nil), s.points...)
	}
}

// Err is the first counter read error.
func (s *Sampler) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Now is the time since Start.
func (s *Sampler) Now() time.Duration { return time.Since(s.start) }

// Share is one slave's part of the traffic.
type Share struct {
	Slave   string  `json:"slave"`
	Packets uint64  `json:"packets"`
	Bytes   uint64  `json:"bytes"`
	Share   float64 `json:"share"` // of all packets, 0..1
	Source  string  `json:"counters"`
}

// Shares computes each slave's part of the packets between two points.
func Shares(from, to Point, slaves []string, c Counters) []Share {
	var total uint64
	var out []Share
	for _, n := range slaves {
		d := to.Samples[n].sub(from.Samples[n])
		total += d.Packets
		out = append(out, Share{Slave: n, Packets: d.Packets, Bytes: d.Bytes, Source: c.Source(n)})
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].Packets) / float64(total)
		}
	}
	return out
}

func formatShares(ss []Share) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, fmt.Sprintf("%s %.1f%% (%d pkts)", s.Slave, s.Share*100, s.Packets))
	}
	return strings.Join(parts, ", ")
}

// JudgeShares applies the bond mode's rule: active-backup carries on the
// active slave only (every other slave at most minShare); the active-active
// modes need every slave to carry at least minShare.
func JudgeShares(mode, active string, ss []Share, minShare float64) (Verdict, string) {
	var total uint64
	for _, s := range ss {
		total += s.Packets
	}
	desc := formatShares(ss)
	if total == 0 {
		return Fail, "no packets counted on the slaves: " + desc
	}
	if mode == "active-backup" {
		if active == "" {
			return Fail, "active-backup bond has no active slave: " + desc
		}
		for _, s := range ss {
			if s.Slave == active && s.Share < 1-minShare {
				return Fail, fmt.Sprintf("active slave %s carried only %.1f%%: %s", active, s.Share*100, desc)
			}
		}
		for _, s := range ss {
			if s.Slave != active && s.Share > minShare {
				return Fail, fmt.Sprintf("backup slave %s carried %.1f%% in active-backup: %s", s.Slave, s.Share*100, desc)
			}
		}
		return Pass, fmt.Sprintf("active slave %s carried the traffic: %s", active, desc)
	}
	var idle []string
	for _, s := range ss {
		if s.Share < minShare {
			idle = append(idle, s.Slave)
		}
	}
	if len(idle) > 0 {
		return Fail, fmt.Sprintf("%s carried less than %.0f%% in %s (both ports must carry traffic; use several flows): %s", strings.Join(idle, " "), minShare*100, mode, desc)
	}
	return Pass, "both slaves carried traffic: " + desc
}

// TrafficConfig is the traffic check of one bond.
type TrafficConfig struct {
	Bond     string
	Mode     string
	Slaves   []string
	Active   func() string // the active slave now (active-backup)
	Counters Counters
	Load     Load
	Interval time.Duration
	MinShare float64 // default 0.05
	OnTick   func(Tick)
	// Probe, when set, samples the representors before and after the run
	// (the slow-path probe; its Check judges them).
	Probe *SlowPathProbe
}

func (c *TrafficConfig) defaults() {
	if c.MinShare <= 0 {
		c.MinShare = 0.05
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Active == nil {
		c.Active = func() string { return "" }
	}
}

// TrafficCheck runs the load while sampling the slaves and judges the shares.
func TrafficCheck(ctx context.Context, c TrafficConfig) Check {
	c.defaults()
	start := time.Now()
	activeBefore := c.Active()
	if c.Probe != nil {
		c.Probe.begin()
	}
	s := &Sampler{Counters: c.Counters, Slaves: c.Slaves, Interval: c.Interval, OnTick: c.OnTick}
	stop := s.Start()
	res, lerr := c.Load.Run(ctx)
	points := stop()
	ch := Check{Name: "traffic", Duration: time.Since(start)}
	if err := s.Err(); err != nil {
		ch.Verdict, ch.Detail = Fail, fmt.Sprintf("cannot read counters: %v", err)
		c.Probe.failed("the traffic check " + ch.Detail)
		return ch
	}
	if lerr != nil {
		ch.Verdict, ch.Detail = Fail, lerr.Error()
		c.Probe.failed(ch.Detail)
		return ch
	}
	ss := Shares(points[0], points[len(points)-1], c.Slaves, c.Counters)
	if c.Probe != nil {
		var sent uint64
		for _, sh := range ss {
			sent += sh.Packets
		}
		c.Probe.end(sent)
	}
	ch.Data = map[string]any{"shares": ss, "load": res}
	active := c.Active()
	if c.Mode == "active-backup" && active != activeBefore {
		ch.Verdict, ch.Detail = Fail, fmt.Sprintf("the active slave changed from %s to %s during the test: %s", orDash(activeBefore), orDash(active), formatShares(ss))
		return ch
	}
	ch.Verdict, ch.Detail = JudgeShares(c.Mode, active, ss, c.MinShare)
	if res.Summary != "" {
		ch.Detail += "; " + res.Summary
	}
	return ch
}

// FailoverConfig is the failover check: one slave goes down during traffic.
type FailoverConfig struct {
	TrafficConfig
	Fail    string                           // the slave to take down
	SetLink func(name string, up bool) error // admin state ("ip link set $if down|up")
	LinkUp  func(name string) (bool, error)  // oper up and still a slave of the bond
	Manual  bool                             // ask the operator to pull and replug the cable
	Prompt  io.Writer                        // where Manual's instructions go
	Warmup  time.Duration                    // traffic before the failure (default 1/4 of the run)
	Hold    time.Duration                    // how long the slave stays down (default 1/3 of the run)
	Wait    time.Duration                    // bound of every wait for a link change (default 10 s; Manual 2 min)
	MaxGap  time.Duration                    // longest tolerated pause of the traffic (0: any, reported only)
}

// FailoverCheck takes Fail down while the load runs, measures the longest
// pause of the traffic, verifies the other slaves carried on, restores Fail
// and verifies it came back. Fail is never left down by this function: its
// restore runs on every return path, also when ctx is cancelled (Ctrl-C).
func FailoverCheck(ctx context.Context, c FailoverConfig, total time.Duration) (ch Check) {
	c.defaults()
	ch = Check{Name: "failover/" + c.Fail}
	start := time.Now()
	defer func() { ch.Duration = time.Since(start) }()
	c.failoverDefaults(total)
	if detail := c.precheck(); detail != "" {
		ch.Verdict, ch.Detail = Fail, detail
		return ch
	}
	sl := &slaveRestore{c: &c}
	// Whatever happens below (an error, a panic, ctx cancelled by SIGINT),
	// the slave goes back up.
	defer sl.deferred(&ch)
	l := startFailoverLoad(ctx, c)
	defer l.cancel()
	tDown, tRestore, tBack, err := c.failAndRestore(ctx, sl, l)
	if err != nil {
		_, _, _ = l.finish()
		ch.Verdict, ch.Detail = Fail, err.Error()
		return ch
	}
	res, points, lerr := l.finish()
	if err := l.s.Err(); err != nil {
		ch.Verdict, ch.Detail = Fail, fmt.Sprintf("cannot read counters: %v", err)
		return ch
	}
	if lerr != nil && !errors.Is(lerr, context.Canceled) {
		ch.Verdict, ch.Detail = Fail, lerr.Error()
		return ch
	}
	if ctx.Err() != nil {
		ch.Verdict, ch.Detail = Fail, "interrupted: "+ctx.Err().Error()
		return ch
	}
	a := analyzeFailover(points, c.Slaves, c.Fail, tDown, tRestore, tBack)
	ch.Data = map[string]any{"gap_ms": a.gap.Milliseconds(), "during": a.during, "after": a.after, "load": res}
	ch.Verdict, ch.Detail = c.judge(a)
	return ch
}

// failoverDefaults fills the failover's times from the run's total.
func (c *FailoverConfig) failoverDefaults(total time.Duration) {
	if c.Warmup <= 0 {
		c.Warmup = total / 4
	}
	if c.Hold <= 0 {
		c.Hold = total / 3
	}
	if c.Wait <= 0 {
		c.Wait = 10 * time.Second
		if c.Manual {
			c.Wait = 2 * time.Minute
		}
	}
}

// precheck says why the failover cannot start ("" it can): Fail must be
// a slave of the bond and up.
func (c *FailoverConfig) precheck() string {
	if !slices.Contains(c.Slaves, c.Fail) {
		return fmt.Sprintf("%s is not a slave of %s (%s)", c.Fail, c.Bond, strings.Join(c.Slaves, " "))
	}
	if up, err := c.LinkUp(c.Fail); err != nil || !up {
		return fmt.Sprintf("%s is not up before the test (%v)", c.Fail, err)
	}
	return ""
}

// slaveRestore sets the failed slave back up once, when this run took it
// down (never in Manual).
type slaveRestore struct {
	c        *FailoverConfig
	tookDown bool
}

func (r *slaveRestore) restore() error {
	if !r.tookDown || r.c.Manual {
		return nil
	}
	if err := r.c.SetLink(r.c.Fail, true); err != nil {
		return fmt.Errorf("restore %s: %w", r.c.Fail, err)
	}
	r.tookDown = false
	return nil
}

// deferred restores the slave on the way out and says so in ch.
func (r *slaveRestore) deferred(ch *Check) {
	wasDown := r.tookDown
	if err := r.restore(); err != nil {
		ch.Verdict = Fail
		ch.Detail += "; " + err.Error()
	} else if wasDown {
		ch.Detail += "; " + r.c.Fail + " set back up"
	}
}

// failoverLoad is the load of a failover check running while the slaves
// are sampled.
type failoverLoad struct {
	ctx    context.Context // the check's (not the load's)
	cancel context.CancelFunc
	s      *Sampler
	stop   func() []Point
	done   chan loadOut
}

type loadOut struct {
	res LoadResult
	err error
}

func startFailoverLoad(ctx context.Context, c FailoverConfig) *failoverLoad {
	lctx, cancel := context.WithCancel(ctx)
	l := &failoverLoad{ctx: ctx, cancel: cancel, done: make(chan loadOut, 1)}
	l.s = &Sampler{Counters: c.Counters, Slaves: c.Slaves, Interval: c.Interval, OnTick: c.OnTick}
	l.stop = l.s.Start()
	go func() {
		r, err := c.Load.Run(lctx)
		l.done <- loadOut{r, err}
	}()
	return l
}

// finish ends the load and the sampling.
func (l *failoverLoad) finish() (LoadResult, []Point, error) {
	l.cancel()
	lo := <-l.done
	points := l.stop()
	return lo.res, points, lo.err
}

// sleep waits d unless the check is cancelled or the load ends first.
func (l *failoverLoad) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.ctx.Done():
		return l.ctx.Err()
	case lo := <-l.done:
		l.done <- lo
		if lo.err != nil {
			return lo.err
		}
		return errors.New("the traffic ended before the failover test did (use a longer --duration)")
	case <-t.C:
		return nil
	}
}

// failAndRestore runs the failure while the load runs: warm-up, Fail down
// (or the operator pulls the cable), hold, Fail back up, settle. It
// returns when the link went down, was restored and was back, on the
// sampler's clock; an error ends the check.
func (c *FailoverConfig) failAndRestore(ctx context.Context, sl *slaveRestore, l *failoverLoad) (tDown, tRestore, tBack time.Duration, err error) {
	if err := l.sleep(c.Warmup); err != nil {
		return 0, 0, 0, fmt.Errorf("before the failure: %v", err)
	}
	if c.Manual {
		fmt.Fprintf(c.Prompt, "\n>>> pull the cable of %s now (waiting up to %s)\n", c.Fail, c.Wait)
	} else if err := c.SetLink(c.Fail, false); err != nil {
		return 0, 0, 0, fmt.Errorf("set %s down: %v", c.Fail, err)
	} else {
		sl.tookDown = true
	}
	if err := waitLink(ctx, c.LinkUp, c.Fail, false, c.Wait); err != nil {
		return 0, 0, 0, err
	}
	tDown = l.s.Now()
	if err := l.sleep(c.Hold); err != nil {
		return 0, 0, 0, fmt.Errorf("while %s was down: %v", c.Fail, err)
	}
	tRestore = l.s.Now()
	if c.Manual {
		fmt.Fprintf(c.Prompt, "\n>>> plug the cable of %s back in (waiting up to %s)\n", c.Fail, c.Wait)
	} else if err := sl.restore(); err != nil {
		return 0, 0, 0, err
	}
	if err := waitLink(ctx, c.LinkUp, c.Fail, true, c.Wait); err != nil {
		return 0, 0, 0, err
	}
	tBack = l.s.Now()
	// Let the restored slave settle and carry some traffic.
	_ = l.sleep(c.Hold / 2)
	return tDown, tRestore, tBack, nil
}

// judge gives the failover's verdict from its analysis.
func (c *FailoverConfig) judge(a failoverAnalysis) (Verdict, string) {
	others := formatShares(a.during)
	switch {
	case a.othersDuring == 0:
		return Fail, fmt.Sprintf("traffic stopped while %s was down: %s", c.Fail, others)
	case a.failedDuring > 0 && !c.Manual && a.failedDuring*20 > a.othersDuring:
		return Fail, fmt.Sprintf("%s still counted traffic while down: %s", c.Fail, others)
	case c.MaxGap > 0 && a.gap > c.MaxGap:
		return Fail, fmt.Sprintf("traffic paused %s after %s went down (limit %s): %s", a.gap.Round(time.Millisecond), c.Fail, c.MaxGap, others)
	case c.Mode != "active-backup" && a.failedAfter == 0:
		return Fail, fmt.Sprintf("%s is back up but carried no traffic afterwards in %s", c.Fail, c.Mode)
	}
	return Pass, fmt.Sprintf("traffic continued while %s was down (gap %s, sampled every %s): %s; %s is back up",
		c.Fail, a.gap.Round(time.Millisecond), c.Interval, others, c.Fail)
}

func waitLink(ctx context.Context, linkUp func(string) (bool, error), name string, want bool, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		up, err := linkUp(name)
		if err == nil && up == want {
			return nil
		}
		if time.Now().After(deadline) {
			state := map[bool]string{true: "up", false: "down"}
			return fmt.Errorf("%s did not go %s within %s (err %v)", name, state[want], bound, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type failoverAnalysis struct {
	gap                        time.Duration
	during, after              []Share
	othersDuring, failedDuring uint64
	failedAfter                uint64
}

// analyzeFailover measures, between the failure and the restore, the longest
// stretch without any packet on any slave (the gap, at sampling
// resolution) and who carried the traffic; and after the slave came back,
// what it carried.
func analyzeFailover(points []Point, slaves []string, failed string, tDown, tRestore, tBack time.Duration) failoverAnalysis {
	var a failoverAnalysis
	sort.Slice(points, func(i, j int) bool { return points[i].At < points[j].At })
	at := func(t time.Duration) Point { // last point at or before t
		p := points[0]
		for _, q := range points {
			if q.At <= t {
				p = q
			}
		}
		return p
	}
	sum := func(p Point) uint64 {
		var n uint64
		for _, s := range slaves {
			n += p.Samples[s].Packets
		}
		return n
	}
	after := func(t time.Duration) Point { // first point at or after t
		for _, q := range points {
			if q.At >= t {
				return q
			}
		}
		return points[len(points)-1]
	}
	// Shares while down: from the first sample taken after the link went
	// down; the gap: from the last sample before.
	from, to := at(tDown), at(tRestore)
	a.during = Shares(after(tDown), to, slaves, SysfsCounters{})
	for _, s := range a.during {
		if s.Slave == failed {
			a.failedDuring = s.Packets
		} else {
			a.othersDuring += s.Packets
		}
	}
	a.during = dropSource(a.during)
	last := points[len(points)-1]
	a.after = dropSource(Shares(at(tBack), last, slaves, SysfsCounters{}))
	for _, s := range a.after {
		if s.Slave == failed {
			a.failedAfter = s.Packets
		}
	}
	// Longest run without progress that starts within [tDown, tRestore].
	lastProgress := from.At
	prev := sum(from)
	for _, p := range points {
		if p.At <= from.At || p.At > to.At {
			continue
		}
		if n := sum(p); n > prev {
			if g := p.At - lastProgress; g > a.gap {
				a.gap = g
			}
			lastProgress, prev = p.At, n
		}
	}
	if g := to.At - lastProgress; g > a.gap {
		a.gap = g
	}
	return a
}

func dropSource(ss []Share) []Share {
	for i := range ss {
		ss[i].Source = ""
	}
	return ss
}

// RDMAPerf is the RDMA traffic check: ib_send_bw -R (connection through
// rdma_cm, which works under QEMU/TCG) or rping against a peer.
type RDMAPerf struct {
	// Tool is what NVIDIA's RoCE documentation has operators run:
	// "ib_send_bw" (default; -R: connected through the RDMA CM), "rping"
	// and "ucmatose" (RDMA CM connect and transfer), "ibv_rc_pingpong"
	// (verbs over the GID of GIDIndex: the RoCE version's).
	Tool     string
	Peer     string // client: the server's address over the bond
	Server   bool
	Dev      string        // -d
	Duration time.Duration // ib_send_bw -D
	Iters    int           // ib_send_bw and ibv_rc_pingpong -n (ib_send_bw: instead of -D, whose timing is unreliable under emulation)
	Port     int           // ib_send_bw -p
	GIDIndex int           // ibv_rc_pingpong -g
	GIDWhy   string        // why that GID (for the detail)
}

// RDMATools are the tools RDMACheck runs, with their Debian packages.
var RDMATools = map[string]string{"ib_send_bw": "perftest", "rping": "rdmacm-utils", "ucmatose": "rdmacm-utils", "ibv_rc_pingpong": "ibverbs-utils"}

// Args is the command line.
func (r RDMAPerf) Args() []string {
	switch r.Tool {
	case "rping":
		if r.Server {
			return []string{"-s", "-C", "10", "-v"}
		}
		return []string{"-c", "-a", r.Peer, "-C", "10", "-v"}
	case "ucmatose":
		if r.Server {
			return []string{}
		}
		return []string{"-s", r.Peer}
	case "ibv_rc_pingpong":
		a := []string{"-g", strconv.Itoa(r.GIDIndex)}
		if r.Dev != "" {
			a = append(a, "-d", r.Dev)
		}
		if r.Iters > 0 {
			a = append(a, "-n", strconv.Itoa(r.Iters))
		}
		if !r.Server {
			a = append(a, r.Peer)
		}
		return a
	}
	a := []string{"-R", "-F", "--report_gbits"}
	if r.Dev != "" {
		a = append(a, "-d", r.Dev)
	}
	if r.Iters > 0 {
		a = append(a, "-n", strconv.Itoa(r.Iters))
	} else if r.Duration > 0 {
		a = append(a, "-D", strconv.Itoa(max(1, int(r.Duration/time.Second))))
	}
	if r.Port != 0 {
		a = append(a, "-p", strconv.Itoa(r.Port))
	}
	if !r.Server {
		a = append(a, r.Peer)
	}
	return a
}

// RDMACheck runs the RDMA tool and reports the bandwidth.
func RDMACheck(ctx context.Context, r RDMAPerf) Check {
	if r.Tool == "" {
		r.Tool = "ib_send_bw"
	}
	ch := Check{Name: "rdma/" + r.Tool}
	start := time.Now()
	defer func() { ch.Duration = time.Since(start) }()
	bin, detail := r.precheck()
	if detail != "" {
		ch.Verdict, ch.Detail = Fail, detail
		return ch
	}
	line := r.Tool + " " + strings.Join(r.Args(), " ")
	if r.Tool == "ibv_rc_pingpong" {
		line += fmt.Sprintf(" (GID %d: %s)", r.GIDIndex, r.GIDWhy)
	}
	run := r.runRetrying(ctx, bin)
	if run.err != nil && run.zeros > 0 {
		line += fmt.Sprintf(" [retry %d after a measured 0]", run.zeros)
	}
	if run.err != nil {
		ch.Verdict, ch.Detail = Fail, fmt.Sprintf("%s: %v\n%s", line, run.err, tail(string(run.out), 8))
		return ch
	}
	ch.Verdict, ch.Detail, ch.Data = r.judge(line, run)
	return ch
}

// precheck finds the tool's binary, or says why the check cannot run.
func (r RDMAPerf) precheck() (bin, detail string) {
	pkg, known := RDMATools[r.Tool]
	if !known {
		return "", fmt.Sprintf("rdma tool: %q is not ib_send_bw, rping, ucmatose or ibv_rc_pingpong", r.Tool)
	}
	if !r.Server && r.Peer == "" {
		return "", "no RDMA peer (--rdma-peer or groups[].validate.rdma_peer)"
	}
	if r.Tool == "ibv_rc_pingpong" && r.GIDIndex < 0 {
		return "", "ibv_rc_pingpong: no GID to use: " + r.GIDWhy
	}
	bin, err := lookTool(r.Tool, pkg)
	if err != nil {
		return "", err.Error()
	}
	return bin, ""
}

// rdmaRun is the outcome of the tool's runs: the last one's output and
// error, and for ib_send_bw its BW average and how many runs measured 0.
type rdmaRun struct {
	out     []byte
	err     error
	bw      float64
	unit    string
	zeros   int
	retried string
}

// runRetrying runs the tool; an ib_send_bw client run that measured 0 is
// run again (zeroRetries), and such a run again whose connect came before
// the server listened again is retried with a backoff (reconnectTries).
func (r RDMAPerf) runRetrying(ctx context.Context, bin string) rdmaRun {
	var x rdmaRun
	reconnects := 0
	for attempt := 0; ; attempt++ {
		x.out, x.err = runRDMATool(ctx, bin, r)
		if x.err != nil && x.zeros > 0 && notListening(x.out) && reconnects < reconnectTries {
			// The run again after a measured 0 came before the server
			// accepted again (its loop restarts ib_send_bw): the RDMA CM
			// connect is rejected. Give it time, a bounded number of times.
			reconnects++
			t := time.NewTimer(time.Duration(reconnects) * reconnectBackoff)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
				attempt--
				continue
			}
		}
		if x.err != nil || r.Tool != "ib_send_bw" || r.Server {
			return x
		}
		var ok bool
		if x.bw, x.unit, ok = ParseSendBW(string(x.out)); !ok || x.bw > 0 || r.Iters <= 0 {
			return x
		}
		// ib_send_bw -n prints 0 when its cycle-counter timing failed
		// under an emulated CPU although the messages went through:
		// measure again (the server must accept again), and say so.
		x.zeros++
		x.retried = fmt.Sprintf(" (after %d run(s) that measured 0 %s: perftest's timing, retried)", x.zeros, x.unit)
		if attempt >= zeroRetries {
			return x
		}
	}
}

// judge reads the verdict from a successful run's output.
func (r RDMAPerf) judge(line string, x rdmaRun) (Verdict, string, any) {
	out := string(x.out)
	switch r.Tool {
	case "rping":
		return Pass, fmt.Sprintf("%s: ok", line), nil
	case "ucmatose":
		if r.Server || strings.Contains(out, "test complete") {
			return Pass, fmt.Sprintf("%s: connected, data transferred, disconnected", line), nil
		}
		return Fail, fmt.Sprintf("%s: no \"test complete\" in the output\n%s", line, tail(out, 8)), nil
	case "ibv_rc_pingpong":
		m := pingpongRE().FindStringSubmatch(out)
		if m == nil {
			return Fail, fmt.Sprintf("%s: no bandwidth line in the output\n%s", line, tail(out, 8)), nil
		}
		return Pass, fmt.Sprintf("%s: %s bytes at %s Mbit/sec", line, m[1], m[2]), map[string]any{"bytes": m[1], "mbit_per_sec": m[2], "gid_index": r.GIDIndex}
	}
	if _, _, ok := ParseSendBW(out); !ok {
		return Fail, fmt.Sprintf("%s: no bandwidth line in the output\n%s", line, tail(out, 8)), nil
	}
	data := map[string]any{"bw_average": x.bw, "unit": x.unit, "zero_runs": x.zeros}
	if x.bw <= 0 {
		// perftest prints zeros when its cycle-counter timing failed
		// (e.g. -D under an emulated CPU): no measurement is no pass.
		return Fail, fmt.Sprintf("%s: ib_send_bw measured no bandwidth (average %.2f %s%s; with -D under emulation use --rdma-iters)\n%s", line, x.bw, x.unit, x.retried, tail(out, 4)), data
	}
	return Pass, fmt.Sprintf("%s: average %.2f %s%s", line, x.bw, x.unit, x.retried), data
}

// pingpongRE is ibv_rc_pingpong's result: "8192000 bytes in 0.05 seconds = 1310.72 Mbit/sec".
var pingpongRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(\d+) bytes in [0-9.]+ seconds = ([0-9.]+) Mbit/sec`)
})

// zeroRetries is how many times an ib_send_bw -n run that measured 0 is
// run again.
const zeroRetries = 2

// reconnectTries bounds the connects of such a run again that the server
// rejected because it was not listening yet (0.5 s, 1 s, ... apart).
const reconnectTries = 5

// reconnectBackoff is the first wait before such a connect (a variable for
// the test).
var reconnectBackoff = 500 * time.Millisecond

// notListening tells whether ib_send_bw's client failed to connect: the
// RDMA CM connect was rejected or refused (no server listening yet).
func notListening(out []byte) bool {
	s := string(out)
	return strings.Contains(s, "Unable to init the socket connection") || strings.Contains(s, "Unexpected CM event")
}

// rdmaTool is the RDMA tool's run (a variable for the retry test).
var rdmaTool = func(ctx context.Context, bin string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 2 * time.Second
	return cmd.CombinedOutput()
}

func runRDMATool(ctx context.Context, bin string, r RDMAPerf) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, r.Duration+30*time.Second)
	defer cancel()
	return rdmaTool(cctx, bin, r.Args())
}

// ParseSendBW finds the result line of ib_send_bw: after the header
// "#bytes #iterations BW peak[UNIT] BW average[UNIT] MsgRate[Mpps]", the
// first line of numbers; it returns BW average and its unit. A BW average
// that is no bandwidth (NaN, Inf, negative) does not make a result line:
// a NaN would pass the check for a zero measurement.
func ParseSendBW(out string) (float64, string, bool) {
	unit := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "BW average[") {
			i := strings.Index(l, "BW average[")
			rest := l[i+len("BW average["):]
			if j := strings.IndexByte(rest, ']'); j >= 0 {
				unit = rest[:j]
			}
			continue
		}
		if unit == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		v, err := strconv.ParseFloat(f[3], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			continue
		}
		if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
			continue
		}
		return v, unit, true
	}
	return 0, "", false
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
