package ovs_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

// logBuf is a log destination that remembers when it was first written.
type logBuf struct {
	mu    sync.Mutex
	b     bytes.Buffer
	first time.Time
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first.IsZero() {
		l.first = time.Now()
	}
	return l.b.Write(p)
}

func (l *logBuf) get() (string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.first
}

// TestWaitsSayWhatTheyWaitFor: a wait for ovs-vswitchd that does not end at
// once logs, early, what it waits for, its bound and the caller's hint: the
// ports without an ofport with ovs-vswitchd's reason, or the configuration
// nobody applies. A wait that ends at once logs nothing.
func TestWaitsSayWhatTheyWaitFor(t *testing.T) {
	t.Parallel()
	srv := ovstest.Start(t)
	srv.AddVeth("p0", "p0peer")
	c := connect(t, srv)
	var log logBuf
	c.SetWaitLog(slog.New(slog.NewTextHandler(&log, nil)), "look there")
	ctx := ctxT(t)
	spec := ovs.BridgeSpec{Owner: "g", Bridge: "br0", DatapathType: "netdev", Ports: []ovs.PortSpec{{Name: "p0"}}}
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := c.WaitOFPorts(ctx, "br0", "g"); err != nil || len(st.WithoutOFPort("g")) > 0 {
		t.Fatalf("WaitOFPorts: %+v, %v", st, err)
	}
	if out, _ := log.get(); out != "" {
		t.Fatalf("waits that ended at once logged:\n%s", out)
	}

	// A port whose netdev is not in ovs-vswitchd's namespace.
	spec.Ports = append(spec.Ports, ovs.PortSpec{Name: "gone0"})
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	start := time.Now()
	_, err := c.WaitOFPorts(short, "br0", "g")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	out, first := log.get()
	for _, want := range []string{
		`level=WARN msg="waiting for ovs-vswitchd to give ports of bridge br0 an OpenFlow port number (it opens each port's netdev in its own network namespace)"`,
		`ports="gone0 (could not open network device gone0 (No such device))" bound=3s hint="look there"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if d := first.Sub(start); first.IsZero() || d > 500*time.Millisecond {
		t.Errorf("logged %v after the start of the wait, want at its start", d)
	}
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("%d lines logged, want 1:\n%s", n, out)
	}

	// Nobody applies the configuration.
	log = logBuf{}
	c.SetWaitLog(slog.New(slog.NewTextHandler(&log, nil)), "look there")
	srv.StopVswitchd()
	spec.Ports = spec.Ports[:1]
	if _, _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	short, cancel = context.WithTimeout(ctx, 3*time.Second)
	start = time.Now()
	err = c.WaitApplied(short)
	cancel()
	if err == nil {
		t.Fatal("WaitApplied without ovs-vswitchd succeeded")
	}
	out, first = log.get()
	want := `level=WARN msg="waiting for ovs-vswitchd to apply the configuration: is it running, connected to ` + srv.Endpoint() + `?"`
	if !strings.Contains(out, want) || !strings.Contains(out, `hint="look there"`) || !strings.Contains(out, "bound=2s") {
		t.Errorf("log lacks %q, bound=2s and the hint:\n%s", want, out)
	}
	if d := first.Sub(start); first.IsZero() || d > 1500*time.Millisecond {
		t.Errorf("logged %v after the start of the wait, want within a second", d)
	}
}
