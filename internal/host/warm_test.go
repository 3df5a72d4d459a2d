package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/ovs/ovstest"
)

// TestWarmOVS: a connection Options.Warm started while the host opened is
// the one OVS returns, its prefetched read serving the first Status (one
// read in all); an endpoint changed before the first use (down takes it
// from the journal) gets a connection of its own; a warm connection that
// failed leaves OVS to connect itself and report the error.
func TestWarmOVS(t *testing.T) {
	a, b := ovstest.Start(t), ovstest.Start(t)
	a.MustVsctl("add-br", "br-a")
	b.MustVsctl("add-br", "br-b")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	h, err := Open(Options{OVSDB: a.Endpoint(), Warm: Warm{OVS: true, PrefetchOVS: true}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.OVS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, "br-a")
	if err != nil || !st.Exists {
		t.Fatalf("Status(br-a) through the warm connection: %+v, %v", st, err)
	}
	if n := c.Reads(); n != 1 {
		t.Errorf("the warm connection's prefetch and Status made %d reads, want 1", n)
	}
	h.Close()

	h, err = Open(Options{OVSDB: a.Endpoint(), Warm: Warm{OVS: true}})
	if err != nil {
		t.Fatal(err)
	}
	h.OVSDB = b.Endpoint()
	c, err = h.OVS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status(ctx, "br-b"); err != nil || !st.Exists {
		t.Errorf("after the endpoint changed: Status(br-b) = %+v, %v; want the bridge of the new endpoint", st, err)
	}
	h.Close()

	bad := "unix:" + t.TempDir() + "/none.sock"
	h, err = Open(Options{OVSDB: bad, Warm: Warm{OVS: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.OVS(ctx); err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("OVS with an unreachable endpoint: %v, want the connection's error", err)
	}
}
