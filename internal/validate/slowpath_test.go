package validate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/sysfs"
)

// TestJudgeSlowPath: the verdict of the slow-path probe from what each
// representor counted, with the evidence in the detail and the data.
func TestJudgeSlowPath(t *testing.T) {
	hw := func(rep string, sw, vport uint64) RepDelta {
		return RepDelta{Rep: rep, SW: sw, HW: vport, HasHW: true, Source: "ethtool -S rx/tx_packets"}
	}
	sw := func(rep string, n uint64) RepDelta { return RepDelta{Rep: rep, SW: n, Source: "statistics"} }
	tests := []struct {
		name    string
		reps    []RepDelta
		sent    uint64
		want    Verdict
		detail  []string
		allowed uint64
	}{
		{name: "offloaded: software still, vport moved", reps: []RepDelta{hw("rep0", 12, 100000), hw("rep1", 0, 0)}, sent: 100000, want: Pass, allowed: 1000,
			detail: []string{"software counters stayed still", "at most 1000 per representor", "100000 packets on the slaves", "vport counters of 1 moved", "rep0 sw +12 hw +100000"}},
		{name: "first packets of the flows under the floor", reps: []RepDelta{hw("rep0", 200, 5000)}, sent: 5000, want: Pass, allowed: 200},
		{name: "one over the floor", reps: []RepDelta{hw("rep0", 201, 5000)}, sent: 5000, want: Fail,
			detail: []string{"rep0 201 packets in software (ethtool -S rx/tx_packets)", "at most 200 per representor"}},
		{name: "not offloaded: every packet in software", reps: []RepDelta{hw("rep0", 99000, 100000), hw("rep1", 3, 0)}, sent: 100000, want: Fail,
			detail: []string{"crossed 1 representor(s) in software, not in the NIC", "rep0 99000 packets in software", "moved: rep0 sw +99000 hw +100000, rep1 sw +3 hw +0"}},
		{name: "vport counters still: the traffic crossed no VF", reps: []RepDelta{hw("rep0", 0, 0), hw("rep1", 0, 0)}, sent: 100000, want: Fail,
			detail: []string{"vport counters (vport_rx/tx_packets) of none of the 2 representors moved"}},
		{name: "software representor (veth) carrying the traffic", reps: []RepDelta{sw("veth0", 50000)}, sent: 50000, want: Fail,
			detail: []string{"veth0 50000 packets in software (statistics)"}},
		{name: "no vport counters, nothing moved: cannot tell", reps: []RepDelta{sw("veth0", 0)}, sent: 50000, want: Skip,
			detail: []string{"cannot tell whether the traffic crossed a VF"}},
		{name: "no vport counters, a few first packets", reps: []RepDelta{sw("veth0", 10)}, sent: 50000, want: Pass,
			detail: []string{"no vport counters on this driver", "veth0 sw +10"}},
		{name: "no packet on the slaves", reps: []RepDelta{hw("rep0", 0, 0)}, sent: 0, want: Skip, detail: []string{"counted no packets"}},
		{name: "no representor", sent: 1000, want: Skip, detail: []string{"no representor"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, d, data := JudgeSlowPath(tt.reps, tt.sent)
			if v != tt.want {
				t.Errorf("verdict %s, want %s: %s", v, tt.want, d)
			}
			for _, w := range tt.detail {
				if !strings.Contains(d, w) {
					t.Errorf("detail lacks %q:\n%s", w, d)
				}
			}
			if tt.allowed != 0 && data.Allowed != tt.allowed {
				t.Errorf("allowed %d, want %d", data.Allowed, tt.allowed)
			}
			if data.Sent != tt.sent || len(data.Reps) != len(tt.reps) {
				t.Errorf("data %+v", data)
			}
		})
	}
}

// fakeReps are representor counters a load moves: offloaded moves the
// vport counters only, else both.
type fakeReps struct {
	sw, hw    map[string]uint64
	offloaded bool
	noHW      bool
	err       error
}

func (f *fakeReps) ReadRep(n string) (RepSample, error) {
	if f.err != nil {
		return RepSample{}, f.err
	}
	return RepSample{SW: f.sw[n], HW: f.hw[n], HasHW: !f.noHW, Source: "fake"}, nil
}

func (f *fakeReps) carry(reps []string, n uint64) {
	for _, r := range reps {
		f.hw[r] += n
		if !f.offloaded {
			f.sw[r] += n
		}
	}
}

// TestTrafficCheckProbe: the traffic check samples the representors before
// and after its run, and the probe judges them; a run that did not happen
// is a skip saying why; the JSON and JUnit carry the evidence.
func TestTrafficCheckProbe(t *testing.T) {
	tests := []struct {
		name      string
		offloaded bool
		loadErr   error
		readErr   error
		want      Verdict
		detail    string
	}{
		{name: "offloaded", offloaded: true, want: Pass, detail: "software counters stayed still"},
		{name: "in software", want: Fail, detail: "rep0 "},
		{name: "the load failed", loadErr: errors.New("iperf3: unable to connect"), want: Skip, detail: "the traffic run did not happen: iperf3: unable to connect"},
		{name: "representor unreadable", offloaded: true, readErr: errors.New("gone"), want: Fail, detail: "cannot read the representors' counters: representor rep0: gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFakeBond("802.3ad")
			reps := []string{"rep0", "rep1"}
			fr := &fakeReps{sw: map[string]uint64{"rep0": 7}, hw: map[string]uint64{"rep0": 1000}, offloaded: tt.offloaded, err: tt.readErr}
			p := &SlowPathProbe{Reps: reps, Counters: fr}
			load := loadFunc(func(ctx context.Context) (LoadResult, error) {
				if tt.loadErr != nil {
					return LoadResult{}, tt.loadErr
				}
				r, err := b.Run(ctx, 60e6)
				// Well above the floor whatever the slaves counted.
				fr.carry(reps[:1], 100000)
				return r, err
			})
			tc := TrafficCheck(context.Background(), TrafficConfig{Bond: "bond0", Mode: "802.3ad", Slaves: []string{"p0", "p1"}, Counters: b, Load: load, Probe: p})
			c := p.Check()
			if c.Name != SlowPathName || c.Verdict != tt.want || !strings.Contains(c.Detail, tt.detail) {
				t.Fatalf("probe %s %q, want %s %q (traffic %s %q)", c.Verdict, c.Detail, tt.want, tt.detail, tc.Verdict, tc.Detail)
			}
			if c.Verdict == Skip || c.Data == nil {
				return
			}
			rep := Report{Groups: []GroupReport{{Group: "g", Checks: []Check{c}}}}
			var js, ju strings.Builder
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteJUnit(&ju); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Groups []struct{ Checks []struct{ Data SlowPathData } }
			}
			if err := json.Unmarshal([]byte(js.String()), &doc); err != nil {
				t.Fatal(err)
			}
			d := doc.Groups[0].Checks[0].Data
			if d.Sent == 0 || d.Allowed != SlowPathAllowed(d.Sent) || len(d.Reps) != 2 || d.Reps[0].HW == 0 {
				t.Errorf("JSON data %+v", d)
			}
			if !strings.Contains(ju.String(), "rep0 sw +") {
				t.Errorf("JUnit lacks the evidence:\n%s", ju.String())
			}
		})
	}
}

// TestStatsRepCounters: an mlx5 representor's software counters come from
// ethtool -S rx/tx_packets (its generic statistics are the vport's), a
// driver without vport counters' from the generic statistics.
func TestStatsRepCounters(t *testing.T) {
	root := t.TempDir()
	for p, v := range map[string]string{
		"rep0/statistics/rx_packets": "900", "rep0/statistics/tx_packets": "100",
		"veth0/statistics/rx_packets": "5", "veth0/statistics/tx_packets": "6",
	} {
		dir := filepath.Join(root, "sys/class/net", filepath.Dir(p))
		for _, f := range []string{"rx_bytes", "tx_bytes"} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), []byte("0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(root, "sys/class/net", p), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := sysfs.Dir(root)
	c := StatsRepCounters{Sysfs: SysfsCounters{FS: fs}, Stats: func(n string) (map[string]uint64, error) {
		switch n {
		case "rep0":
			return map[string]uint64{"rx_packets": 3, "tx_packets": 4, "vport_rx_packets": 900, "vport_tx_packets": 100}, nil
		case "half0":
			return map[string]uint64{"vport_rx_packets": 1, "vport_tx_packets": 1}, nil
		}
		return nil, errors.New("operation not supported")
	}}
	if s, err := c.ReadRep("rep0"); err != nil || s != (RepSample{SW: 7, HW: 1000, HasHW: true, Source: "ethtool -S rx/tx_packets"}) {
		t.Errorf("rep0: %+v %v", s, err)
	}
	if s, err := c.ReadRep("veth0"); err != nil || s != (RepSample{SW: 11, Source: "statistics"}) {
		t.Errorf("veth0: %+v %v", s, err)
	}
	if _, err := c.ReadRep("half0"); err == nil {
		t.Error("vport counters without software counters: no error")
	}
}
