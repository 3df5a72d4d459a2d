package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vflag/vflag/ovs"
)

// benchConfig is the example config with n VFs per PF and no simulated
// latency, so that a benchmark measures vflag's own work (plus the simulated
// kernel's and the real daemons').
func benchConfig(n int) string {
	cfg := exampleConfig
	for old, repl := range map[string]string{
		"    numvfs: 4 ":             fmt.Sprintf("    numvfs: %d ", n),
		"      total_vfs: 8\n":       fmt.Sprintf("      total_vfs: %d\n", max(n, 8)),
		"    vf_create: 2ms\n":       "    vf_create: 0s\n",
		"    mode_change: 20ms\n":    "    mode_change: 0s\n",
		"    lag_activation: 50ms\n": "    lag_activation: 0s\n",
	} {
		if !strings.Contains(cfg, old) {
			panic("example config lacks " + old)
		}
		cfg = strings.Replace(cfg, old, repl, 1)
	}
	return cfg
}

// benchUpDown times one `vflag up` from a fresh host and one `vflag down`
// (both in-process, zero latency); the re-run on the converged host is
// reported as noop-ms/op.
func benchUpDown(b *testing.B, n int) {
	d := startDaemons(b)
	var up, noop, down float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bed := newBed(b, d, benchConfig(n))
		bed.initSim()
		settleOVS(b, d)
		b.StartTimer()
		t0 := nowMS()
		bed.mustVflag(0, "up")
		t1 := nowMS()
		bed.mustVflag(0, "up")
		t2 := nowMS()
		bed.mustVflag(0, "down")
		t3 := nowMS()
		up, noop, down = up+t1-t0, noop+t2-t1, down+t3-t2
	}
	b.ReportMetric(up/float64(b.N), "up-ms/op")
	b.ReportMetric(noop/float64(b.N), "noop-ms/op")
	b.ReportMetric(down/float64(b.N), "down-ms/op")
}

func BenchmarkUpDown2x16(b *testing.B) { benchUpDown(b, 16) }
func BenchmarkUpDown2x64(b *testing.B) { benchUpDown(b, 64) }

// settleOVS waits until ovs-vswitchd has applied every change so far: the
// previous iteration's down does not wait for it, and the removal of a
// bridge with many ports takes ovs-vswitchd seconds, which the next up
// would otherwise spend waiting in its verify step.
func settleOVS(b *testing.B, d daemons) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := ovs.Connect(ctx, d.ovs.Endpoint())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitApplied(ctx); err != nil {
		b.Fatal(err)
	}
}

func nowMS() float64 { return float64(time.Now().UnixNano()) / 1e6 }

// BenchmarkNoopUp2x64 times `vflag up` on a converged 2 x 64 host: reads
// only, no write.
func BenchmarkNoopUp2x64(b *testing.B) {
	d := startDaemons(b)
	bed := newBed(b, d, benchConfig(64))
	bed.mustVflag(0, "up")
	b.Cleanup(func() { bed.mustVflag(0, "down") })
	b.ResetTimer()
	cpu0 := cpuMS()
	for i := 0; i < b.N; i++ {
		bed.mustVflag(0, "up")
	}
	b.ReportMetric((cpuMS()-cpu0)/float64(b.N), "cpu-ms/op")
}

// cpuMS is the CPU time (user and system) this process used so far: less
// sensitive than the wall to other jobs on a shared machine.
func cpuMS() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}
