package validate

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
)

func TestJudgeShares(t *testing.T) {
	sh := func(a, b uint64) []Share {
		ss := []Share{{Slave: "p0", Packets: a}, {Slave: "p1", Packets: b}}
		if a+b > 0 {
			ss[0].Share, ss[1].Share = float64(a)/float64(a+b), float64(b)/float64(a+b)
		}
		return ss
	}
	tests := []struct {
		mode, active string
		a, b         uint64
		want         Verdict
		detail       string
	}{
		{"802.3ad", "", 500, 500, Pass, "both slaves carried traffic"},
		{"802.3ad", "", 1000, 10, Fail, "p1 carried less than 5%"},
		{"balance-xor", "", 0, 0, Fail, "no packets"},
		{"active-backup", "p0", 1000, 3, Pass, "active slave p0"},
		{"active-backup", "p0", 500, 500, Fail, "active slave p0 carried only 50.0%"},
		{"active-backup", "p1", 1000, 0, Fail, "active slave p1 carried only 0.0%"},
		{"active-backup", "", 1000, 0, Fail, "no active slave"},
	}
	for _, tc := range tests {
		v, d := JudgeShares(tc.mode, tc.active, sh(tc.a, tc.b), 0.05)
		if v != tc.want || !strings.Contains(d, tc.detail) {
			t.Errorf("%s active %q %d/%d: %s %q, want %s %q", tc.mode, tc.active, tc.a, tc.b, v, d, tc.want, tc.detail)
		}
	}
}

func TestParseSendBW(t *testing.T) {
	out := `---------------------------------------------------------------------------------------
                    Send BW Test
 Dual-port       : OFF		Device         : rxe0
 Number of qps   : 1		Transport type : IB
 Connection type : RC		Using SRQ      : OFF
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      1000             60.12              58.34  		   0.000933
---------------------------------------------------------------------------------------
`
	bw, unit, ok := ParseSendBW(out)
	if !ok || bw != 58.34 || unit != "MB/sec" {
		t.Fatalf("got %v %q %v", bw, unit, ok)
	}
	if _, _, ok := ParseSendBW("Couldn't connect to 10.0.0.1:18515\n"); ok {
		t.Fatal("parsed a failure")
	}
}

func TestParseIperf3(t *testing.T) {
	r, err := parseIperf3([]byte(`{"end":{"sum_sent":{"bits_per_second":2e9},"sum_received":{"bits_per_second":1.5e9}}}`))
	if err != nil || r.BitsPerSecond != 1.5e9 || r.Summary != "iperf3 1.50 Gbit/s" {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := parseIperf3([]byte(`{"error":"unable to connect to server: Connection refused"}`)); err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Fatalf("error not reported: %v", err)
	}
	a := Iperf3{Peer: "10.0.0.2", Duration: 5 * time.Second, Parallel: 4}.Args()
	if strings.Join(a, " ") != "-c 10.0.0.2 -t 5 -J -P 4" {
		t.Fatalf("args %v", a)
	}
}

func TestTCChangeValidate(t *testing.T) {
	i := func(v int) *int { return &v }
	tests := []struct {
		c    TCChange
		want string
	}{
		{TCChange{TrafficClass: i(106), TTL: i(64)}, ""},
		{TCChange{TrafficClass: i(-1)}, ""},
		{TCChange{TrafficClass: i(256)}, "traffic_class: 256 is out of range 0-255"},
		{TCChange{DSCP: i(64)}, "dscp: 64 is out of range 0-63"},
		{TCChange{TTL: i(256)}, "ttl: 256 is out of range 0-255"},
		{TCChange{TrafficClass: i(1), DSCP: i(2)}, "give one of them"},
	}
	for _, tc := range tests {
		err := tc.c.Validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	if v := (TCChange{DSCP: i(26)}).TClass(); *v != 104 {
		t.Fatalf("dscp 26 -> tclass %d", *v)
	}
}

func TestGIDIPv4(t *testing.T) {
	if got := gidIPv4("0000:0000:0000:0000:0000:ffff:0a62:0001"); got != "10.98.0.1" {
		t.Fatal(got)
	}
}

func TestReportFormats(t *testing.T) {
	r := Report{Groups: []GroupReport{{Group: "lag0", Checks: []Check{
		pass("bond", "ok"), failed("lag", "hardware LAG is inactive"), skip("rdma/devices", "none"),
	}}}}
	r.Tally()
	if r.OK || r.Passed != 1 || r.Failed != 1 || r.Skipped != 1 {
		t.Fatalf("%+v", r)
	}
	var b bytes.Buffer
	r.WriteText(&b)
	if !strings.Contains(b.String(), "FAIL  lag") || !strings.Contains(b.String(), "NOT OK: 1 passed, 1 failed, 1 skipped") {
		t.Fatalf("text:\n%s", b.String())
	}
	b.Reset()
	if err := r.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	var ju junitSuites
	if err := xml.Unmarshal(b.Bytes(), &ju); err != nil {
		t.Fatal(err)
	}
	if ju.Tests != 3 || ju.Failures != 1 || ju.Skipped != 1 || ju.Suites[0].Cases[1].Failure.Message != "hardware LAG is inactive" {
		t.Fatalf("junit %+v", ju)
	}
	r = Report{AllowSkip: true, Groups: []GroupReport{{Checks: []Check{pass("a", ""), skip("b", "")}}}}
	r.Tally()
	if !r.OK {
		t.Fatal("allow-skip: skipped checks made the report fail")
	}
}

// fakeBond is an in-memory active-backup or hashing bond: a load ticks
// packets onto the slaves that are up.
type fakeBond struct {
	mu     sync.Mutex
	mode   string
	up     map[string]bool
	active string
	count  map[string]uint64
	sets   []string // SetLink calls
}

func newFakeBond(mode string) *fakeBond {
	return &fakeBond{mode: mode, up: map[string]bool{"p0": true, "p1": true}, active: "p0", count: map[string]uint64{}}
}

func (f *fakeBond) Read(n string) (Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Sample{Packets: f.count[n], Bytes: f.count[n] * 1500}, nil
}
func (f *fakeBond) Source(string) string { return "fake" }

func (f *fakeBond) SetLink(n string, up bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up[n] = up
	f.sets = append(f.sets, map[bool]string{true: "up ", false: "down "}[up]+n)
	if !f.up[f.active] {
		for _, s := range []string{"p0", "p1"} {
			if f.up[s] {
				f.active = s
			}
		}
	}
	return nil
}

func (f *fakeBond) LinkUp(n string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up[n], nil
}

func (f *fakeBond) Run(ctx context.Context, d time.Duration) (LoadResult, error) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return LoadResult{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		f.mu.Lock()
		for _, s := range []string{"p0", "p1"} {
			if f.up[s] && (f.mode != "active-backup" || f.active == s) {
				f.count[s] += 10
			}
		}
		f.mu.Unlock()
	}
	return LoadResult{Summary: "fake"}, nil
}

type loadFunc func(ctx context.Context) (LoadResult, error)

func (l loadFunc) Run(ctx context.Context) (LoadResult, error) { return l(ctx) }

func TestFailoverCheck(t *testing.T) {
	for _, mode := range []string{"active-backup", "802.3ad"} {
		t.Run(mode, func(t *testing.T) {
			fb := newFakeBond(mode)
			total := 400 * time.Millisecond
			c := FailoverConfig{
				TrafficConfig: TrafficConfig{Bond: "bond0", Mode: mode, Slaves: []string{"p0", "p1"}, Counters: fb, Interval: 10 * time.Millisecond,
					Load: loadFunc(func(ctx context.Context) (LoadResult, error) { return fb.Run(ctx, total) })},
				Fail: "p0", SetLink: fb.SetLink, LinkUp: fb.LinkUp,
			}
			ch := FailoverCheck(context.Background(), c, total)
			if ch.Verdict != Pass || !strings.Contains(ch.Detail, "traffic continued while p0 was down") {
				t.Fatalf("%s %s", ch.Verdict, ch.Detail)
			}
			if strings.Join(fb.sets, ",") != "down p0,up p0" || !fb.up["p0"] {
				t.Fatalf("link changes %v", fb.sets)
			}
		})
	}
	t.Run("traffic stops", func(t *testing.T) {
		fb := newFakeBond("active-backup")
		total := 400 * time.Millisecond
		c := FailoverConfig{
			TrafficConfig: TrafficConfig{Mode: "active-backup", Slaves: []string{"p0", "p1"}, Counters: fb, Interval: 10 * time.Millisecond,
				Load: loadFunc(func(ctx context.Context) (LoadResult, error) { return fb.Run(ctx, total) })},
			Fail: "p0", LinkUp: fb.LinkUp,
			// A bond that does not fail over: taking p0 down stops everything.
			SetLink: func(n string, up bool) error {
				fb.mu.Lock()
				fb.up[n] = up
				if !up {
					fb.up["p1"] = false
				} else {
					fb.up["p1"] = true
				}
				fb.mu.Unlock()
				return nil
			},
		}
		ch := FailoverCheck(context.Background(), c, total)
		if ch.Verdict != Fail || !strings.Contains(ch.Detail, "traffic stopped while p0 was down") {
			t.Fatalf("%s %s", ch.Verdict, ch.Detail)
		}
		if !fb.up["p0"] {
			t.Fatal("p0 left down")
		}
	})
	t.Run("cancelled while down restores", func(t *testing.T) {
		fb := newFakeBond("active-backup")
		ctx, cancel := context.WithCancel(context.Background())
		c := FailoverConfig{
			TrafficConfig: TrafficConfig{Mode: "active-backup", Slaves: []string{"p0", "p1"}, Counters: fb, Interval: 10 * time.Millisecond,
				Load: loadFunc(func(ctx context.Context) (LoadResult, error) { return fb.Run(ctx, time.Hour) })},
			Fail: "p0", LinkUp: fb.LinkUp, Hold: time.Hour, Warmup: 20 * time.Millisecond,
			SetLink: func(n string, up bool) error {
				if !up {
					time.AfterFunc(30*time.Millisecond, cancel) // Ctrl-C while p0 is down
				}
				return fb.SetLink(n, up)
			},
		}
		ch := FailoverCheck(ctx, c, time.Hour)
		if ch.Verdict != Fail || !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("%s %s", ch.Verdict, ch.Detail)
		}
		if !fb.up["p0"] || strings.Join(fb.sets, ",") != "down p0,up p0" {
			t.Fatalf("p0 not restored: %v", fb.sets)
		}
	})
}

func TestRDMACheckMissingTool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ch := RDMACheck(context.Background(), RDMAPerf{Peer: "10.0.0.2"})
	if ch.Verdict != Fail || !strings.Contains(ch.Detail, "ib_send_bw not found") || !strings.Contains(ch.Detail, "perftest") {
		t.Fatalf("%s %s", ch.Verdict, ch.Detail)
	}
	l := Iperf3{Peer: "10.0.0.2", Duration: time.Second}
	if _, err := l.Run(context.Background()); !errors.Is(err, ErrToolMissing) {
		t.Fatalf("iperf3: %v", err)
	}
}

func TestRDMADevicesFor(t *testing.T) {
	root := t.TempDir()
	write := func(p, data string) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// rxe0 on bond0 (parent), rxe1 on vC, mlx5_0 with a GID on bond0 and
	// no parent file, siw0 on eth9.
	write("sys/class/infiniband/rxe0/parent", "bond0")
	write("sys/class/infiniband/rxe0/ports/1/gids/0", zeroGID)
	write("sys/class/infiniband/rxe1/parent", "vC")
	write("sys/class/infiniband/rxe1/ports/1/gids/0", "0000:0000:0000:0000:0000:ffff:0a63:0002")
	write("sys/class/infiniband/rxe1/ports/1/gid_attrs/types/0", RoCEv2)
	write("sys/class/infiniband/rxe1/ports/1/gid_attrs/ndevs/0", "vC")
	write("sys/class/infiniband/mlx5_0/ports/1/gids/3", "0000:0000:0000:0000:0000:ffff:0a63:0001")
	write("sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3", RoCEv2)
	write("sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3", "bond0")
	write("sys/class/infiniband/siw0/parent", "eth9")
	write("sys/class/infiniband/siw0/ports/1/gids/0", zeroGID)
	f := sysfs.Dir(root)
	devs, err := RDMADevicesFor(f, nil, []string{"bond0", "vA1", "vA2"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range devs {
		got = append(got, d.Name+"@"+d.Netdev)
	}
	if strings.Join(got, " ") != "mlx5_0@bond0 rxe0@bond0" {
		t.Fatalf("devices on bond0: %v", got)
	}
	if devs, err := RDMADevicesFor(f, nil, nil); err != nil || len(devs) != 0 {
		t.Fatalf("no netdevs, no PCI: %v %v", devs, err)
	}
	a := RDMAPerf{Peer: "10.0.0.2", Dev: "rxe0", Duration: 5 * time.Second, Iters: 500}.Args()
	if strings.Join(a, " ") != "-R -F --report_gbits -d rxe0 -n 500 10.0.0.2" {
		t.Fatalf("args %v", a)
	}
}

func TestDatapathCheck(t *testing.T) {
	tests := []struct {
		name    string
		st      eswitch.DatapathStats
		err     error
		verdict Verdict
		detail  string
	}{
		{"healthy", eswitch.DatapathStats{Hit: 5, Missed: 10, Flows: 2, PerCPUDispatch: true}, nil, Pass,
			"ovs-system: hit 5, missed 10, lost 0, 2 flows, per-cpu upcall dispatch"},
		{"no upcall yet", eswitch.DatapathStats{}, nil, Pass, "missed 0, lost 0"},
		{"some lost under load", eswitch.DatapathStats{Missed: 1000, Lost: 3}, nil, Pass, "some upcalls were lost under load"},
		{"every upcall lost, per-cpu", eswitch.DatapathStats{Missed: 13, Lost: 13, PerCPUDispatch: true}, nil, Fail,
			`lost every upcall since it was created (hit 0, missed 13, lost 13, 0 flows, per-cpu upcall dispatch)`},
		{"every upcall lost, per-vport", eswitch.DatapathStats{Missed: 4, Lost: 4}, nil, Fail, "ovs-vswitchd stopped or running no handler thread"},
		{"no datapath", eswitch.DatapathStats{}, fmt.Errorf("datapath ovs-system: %w", eswitch.ErrNoDatapath), Fail, "no kernel datapath ovs-system"},
		{"simulated host", eswitch.DatapathStats{}, fmt.Errorf("x: %w", eswitch.ErrNotSupported), Skip, "cannot be read here"},
		{"read error", eswitch.DatapathStats{}, errors.New("OVS_DP_CMD_GET: permission denied"), Fail, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DatapathCheck(tt.st, tt.err)
			if c.Name != "ovs/datapath" || c.Verdict != tt.verdict || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("got %s %s %q, want ovs/datapath %s containing %q", c.Name, c.Verdict, c.Detail, tt.verdict, tt.detail)
			}
		})
	}
	// The Open vSwitch 3.1 hint only where it applies.
	if c := DatapathCheck(eswitch.DatapathStats{Missed: 4, Lost: 4}, nil); strings.Contains(c.Detail, "n-handler-threads") {
		t.Errorf("per-vport failure mentions the per-cpu handler bug: %s", c.Detail)
	}
	if c := DatapathCheck(eswitch.DatapathStats{Missed: 4, Lost: 4, PerCPUDispatch: true}, nil); !strings.Contains(c.Detail, `"Overriding n-handler-threads to 0"`) {
		t.Errorf("per-cpu failure lacks the hint: %s", c.Detail)
	}
}

// linkKernel answers Link from a table of operstates; nothing else.
type linkKernel struct {
	eswitch.Kernel
	oper map[string]string
}

func (k linkKernel) Link(name string) (eswitch.Link, error) {
	o, ok := k.oper[name]
	if !ok {
		return eswitch.Link{}, eswitch.ErrLinkNotFound
	}
	return eswitch.Link{Name: name, AdminUp: true, OperState: o}, nil
}

func TestLACPCheck(t *testing.T) {
	b := eswitch.BondInfo{Name: "bond0", Mode: "802.3ad", Slaves: []string{"p0", "p1"}}
	bothUp := linkKernel{oper: map[string]string{"p0": "up", "p1": "up"}}
	p1Down := linkKernel{oper: map[string]string{"p0": "up", "p1": "down"}}
	const partner = "02:aa:bb:cc:dd:ee"
	tests := []struct {
		name    string
		k       eswitch.Kernel
		l       *eswitch.LACPInfo
		verdict Verdict
		detail  string
	}{
		{"negotiated", bothUp, &eswitch.LACPInfo{Aggregator: 1, Ports: 2, PartnerMAC: partner}, Pass,
			"aggregator 1 holds 2 slave(s), LACP partner " + partner},
		{"slave without link is not expected", p1Down, &eswitch.LACPInfo{Aggregator: 1, Ports: 1, PartnerMAC: partner}, Pass,
			"without link, not aggregated: p1"},
		{"no partner", bothUp, &eswitch.LACPInfo{Aggregator: 1, Ports: 1, PartnerMAC: eswitch.NoLACPPartner,
			SlaveAggregator: map[string]int{"p0": 1, "p1": 2}}, Fail, "no LACP partner answers on bond bond0: the switch ports behind [p0 p1]"},
		{"a slave with link left out", bothUp, &eswitch.LACPInfo{Aggregator: 1, Ports: 1, PartnerMAC: partner,
			SlaveAggregator: map[string]int{"p0": 1, "p1": 2}}, Fail, "only 1 of the 2 slaves with link are in bond bond0's active aggregator 1 (partner 02:aa:bb:cc:dd:ee)"},
		{"no active aggregator", p1Down, &eswitch.LACPInfo{}, Fail, "has no active aggregator"},
		{"not shown", bothUp, nil, Skip, "shows no 802.3ad state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := LACPCheck(tt.k, b, tt.l)
			if c.Name != "bond/lacp" || c.Verdict != tt.verdict || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("got %s %s %q, want bond/lacp %s containing %q", c.Name, c.Verdict, c.Detail, tt.verdict, tt.detail)
			}
		})
	}
}

// TestRDMACheckRetriesAMeasuredZero: ib_send_bw -n that printed 0 (its
// timing under emulation) is run again, at most zeroRetries times, and the
// detail says so; a zero every time still fails.
func TestRDMACheckRetriesAMeasuredZero(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ib_send_bw"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	result := func(bw string) []byte {
		return []byte(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536      500              0.00               " + bw + "            0.000000\n")
	}
	old := rdmaTool
	t.Cleanup(func() { rdmaTool = old })
	for _, tc := range []struct {
		name    string
		outputs []string
		runs    int
		verdict Verdict
		detail  string
	}{
		{"first run measures", []string{"0.18"}, 1, Pass, "average 0.18 Gb/sec"},
		{"zero then a measure", []string{"0.000000", "0.21"}, 2, Pass, "average 0.21 Gb/sec (after 1 run(s) that measured 0 Gb/sec: perftest's timing, retried)"},
		{"zero every time", []string{"0.000000", "0.000000", "0.000000", "0.5"}, 3, Fail, "measured no bandwidth (average 0.00 Gb/sec (after 3 run(s)"},
		// A NaN passed as a measure (FuzzParseSendBW).
		{"NaN is no measure", []string{"nan", "nan", "nan"}, 1, Fail, "no bandwidth line in the output"},
		{"Inf is no measure", []string{"+Inf", "+Inf", "+Inf"}, 1, Fail, "no bandwidth line in the output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			rdmaTool = func(_ context.Context, _ string, _ []string) ([]byte, error) {
				out := result(tc.outputs[runs])
				runs++
				return out, nil
			}
			ch := RDMACheck(context.Background(), RDMAPerf{Peer: "10.0.0.2", Iters: 500})
			if runs != tc.runs || ch.Verdict != tc.verdict || !strings.Contains(ch.Detail, tc.detail) {
				t.Errorf("%d runs, %s %q; want %d runs, %s with %q", runs, ch.Verdict, ch.Detail, tc.runs, tc.verdict, tc.detail)
			}
		})
	}
}
