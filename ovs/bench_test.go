package ovs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

func benchSpec(n int) ovs.BridgeSpec {
	s := ovs.BridgeSpec{Owner: "bench", Bridge: "br-bench", DatapathType: "netdev", HWOffload: true,
		Ports: []ovs.PortSpec{{Name: "bond0"}}}
	for i := 1; i < n; i++ {
		s.Ports = append(s.Ports, ovs.PortSpec{Name: fmt.Sprintf("rep%d", i), Tag: 100 + i%3000})
	}
	return s
}

// benchEnsure times one Ensure that creates the bridge with n ports (bond
// plus n-1 representors) and sets hw-offload: read, plan and the single
// transaction. Undo runs outside the timer. apply-ms/op is how long
// ovs-vswitchd then took to apply it (WaitApplied), also outside the timer;
// the ports have no network devices here, so the switch records an error for
// each, which is not what a real host costs.
func benchEnsure(b *testing.B, n int) {
	srv := ovstest.Start(b)
	ctx := context.Background()
	c, err := ovs.Connect(ctx, srv.Endpoint())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	spec := benchSpec(n)
	var apply time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec, ch, err := c.Ensure(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if !ch.CreateBridge || len(ch.AddPorts) != n {
			b.Fatalf("change: create %v, %d ports", ch.CreateBridge, len(ch.AddPorts))
		}
		t0 := time.Now()
		if err := c.WaitApplied(ctx); err != nil {
			b.Fatal(err)
		}
		apply += time.Since(t0)
		if err := c.Undo(ctx, rec); err != nil {
			b.Fatal(err)
		}
		if err := c.WaitApplied(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(apply.Milliseconds())/float64(b.N), "apply-ms/op")
}

func BenchmarkEnsure128(b *testing.B) { benchEnsure(b, 128) }
func BenchmarkEnsure254(b *testing.B) { benchEnsure(b, 254) }

// BenchmarkEnsureConverged254 times a re-run on a converged host (read and
// plan, no transaction).
func BenchmarkEnsureConverged254(b *testing.B) {
	srv := ovstest.Start(b)
	ctx := context.Background()
	c, err := ovs.Connect(ctx, srv.Endpoint())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	spec := benchSpec(254)
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ch, err := c.Ensure(ctx, spec); err != nil || !ch.Empty() {
			b.Fatalf("change %+v, err %v", ch, err)
		}
	}
}
