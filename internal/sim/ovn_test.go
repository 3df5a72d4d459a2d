package sim_test

import (
	"testing"
	"time"

	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

// The simulated ovn-controller: nothing before the chassis is configured;
// then ovn-installed on an Interface of br-int bound to a known logical
// port, only InstallDelay after the binding was first seen, never for an
// unknown one or a port of another bridge; removed when the iface-id goes
// or names a port the Southbound no longer knows.
func TestOVNControllerInstalls(t *testing.T) {
	srv := ovstest.Start(t)
	ctx := t.Context()
	c, err := ovs.Connect(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	srv.MustVsctl("add-br", "br-int", "--", "set", "Bridge", "br-int", "datapath_type=netdev",
		"--", "add-port", "br-int", "rep0", "--", "set", "Interface", "rep0", "type=internal", "external_ids:iface-id=lsp1",
		"--", "add-port", "br-int", "rep1", "--", "set", "Interface", "rep1", "type=internal", "external_ids:iface-id=nosuch",
		"--", "add-br", "br-other", "--", "set", "Bridge", "br-other", "datapath_type=netdev",
		"--", "add-port", "br-other", "rep2", "--", "set", "Interface", "rep2", "type=internal", "external_ids:iface-id=lsp2")
	o := sim.NewOVNController(srv.Endpoint(), "lsp1", "lsp2")
	o.InstallDelay = time.Second
	installed := func() map[string]bool {
		t.Helper()
		ids, err := c.InterfaceIDs(ctx, []string{"rep0", "rep1", "rep2"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for n, m := range ids {
			if m[ovs.OVNInstalledKey] == "true" {
				out[n] = true
			}
		}
		return out
	}
	round := func(at time.Time) {
		t.Helper()
		if err := o.Round(ctx, c, at); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	round(t0)
	round(t0.Add(2 * time.Second))
	if got := installed(); len(got) != 0 {
		t.Fatalf("installed before the chassis is configured: %v", got)
	}
	srv.MustVsctl("set", "Open_vSwitch", ".", "external_ids:system-id=ch1", "external_ids:ovn-remote=tcp:192.0.2.1:6642", "external_ids:ovn-encap-ip=192.0.2.11")
	round(t0)
	if got := installed(); len(got) != 0 {
		t.Fatalf("installed at the first sight of the binding (its flows are not in yet): %v", got)
	}
	round(t0.Add(2 * time.Second))
	if got := installed(); !got["rep0"] || got["rep1"] || got["rep2"] {
		t.Fatalf("installed %v, want rep0 only (rep1: unknown port; rep2: not on br-int)", got)
	}
	srv.MustVsctl("remove", "Interface", "rep0", "external_ids", "iface-id")
	round(t0.Add(3 * time.Second))
	if got := installed(); got["rep0"] {
		t.Fatal("ovn-installed kept after the iface-id went")
	}
	srv.MustVsctl("set", "Interface", "rep0", "external_ids:iface-id=lsp1")
	round(t0.Add(4 * time.Second))
	round(t0.Add(6 * time.Second))
	if got := installed(); !got["rep0"] {
		t.Fatal("a new binding of a known port not installed after InstallDelay")
	}
	o.SetLSPs("lsp2")
	round(t0.Add(7 * time.Second))
	if got := installed(); got["rep0"] {
		t.Fatal("ovn-installed kept for a logical port the Southbound no longer knows")
	}
}
