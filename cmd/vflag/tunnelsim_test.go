package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/validate"
)

// TestTunnelValidatesOnSimulatedHost: a VXLAN group converged on the
// simulated host whose switch answers for the remote endpoint and the
// gateway (sim.switch_peers) passes every check of validate, the
// neighbours of its remotes resolved; without the peers the neighbour
// checks fail as on a host whose remotes do not answer.
func TestTunnelValidatesOnSimulatedHost(t *testing.T) {
	d := startDaemons(t)
	d.virt.DefineDomain(t, "vm2")
	x := baseVariant()
	x.tunnel, x.mtu = 1, 1546
	cfg := x.config(d)
	withPeers := strings.Replace(cfg, "sim:\n", "sim:\n  switch_peers: [192.0.2.12, 192.0.2.254]\n", 1)
	if withPeers == cfg {
		t.Fatal("the variant's config has no sim section")
	}
	b := newBed(t, d, "")
	b.useConfig(withPeers)
	b.initSim()
	if rep := upReport(t, b); rep.Error != "" {
		t.Fatalf("up: %s", rep.Error)
	}
	t.Cleanup(func() { b.mustVflag(0, "down") })
	rep := b.validateJSON(0)
	pass := checksBy(rep, validate.Pass)
	for _, n := range []string{"tunnel/underlay", "tunnel/route/192.0.2.12", "tunnel/neigh/192.0.2.12", "tunnel/route/198.51.100.7", "tunnel/neigh/198.51.100.7", "tunnel/mtu"} {
		if _, ok := pass[n]; !ok {
			t.Errorf("%s does not pass: %+v", n, rep)
		}
	}
	b.useConfig(cfg) // the switch no longer answers (taken over in place)
	failed := checksBy(b.validateJSON(1), validate.Fail)
	for _, n := range []string{"tunnel/neigh/192.0.2.12", "tunnel/neigh/198.51.100.7"} {
		if _, ok := failed[n]; !ok {
			t.Errorf("without switch_peers %s does not fail: %v", n, names(failed))
		}
	}
	b.useConfig(withPeers)
}
