package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/teardown"
)

// TestRepPortsLeaveBeforeRemake: a numvfs change that makes the VFs again
// takes their representors' ports off the bridge before the write (so that
// ovs-vswitchd deletes them while the kernel makes the new VFs): stopped
// right after the numvfs writes, without rollback, the bridge holds none of
// the old representors' ports, only the bond. Ports vflag does not own stay.
func TestRepPortsLeaveBeforeRemake(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	if _, err := ce.run(false, nil); err != nil {
		t.Fatal(err)
	}
	ports := strings.Fields(d.ovs.MustVsctl("list-ports", "br-lag"))
	if len(ports) < 3 {
		t.Fatalf("bridge after up: %v, want the bond and the representors", ports)
	}
	d.ovs.MustVsctl("add-port", "br-lag", "foreign0", "--", "set", "interface", "foreign0", "type=internal")

	c, err := config.Parse([]byte(testbed.PointConfig(exampleConfig(t), d.ovs.Endpoint(), d.virt.URI(), d.ovs.Netns())))
	if err != nil {
		t.Fatal(err)
	}
	c.Groups[0].NumVFs = 2
	h := host.New(ce.sim, ce.sim.FS(), c.OVSDB, c.Libvirt)
	defer h.Close()
	e := New(c, h, slog.New(slog.DiscardHandler))
	e.Holding = func([]string) (map[string]string, error) { return map[string]string{}, nil }
	j, err := teardown.OpenJournal(ce.journalDir)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := e.Preflight(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pf0 := gs[0].PFs[gs[0].Owners[0]]
	r := &teardown.Runner{Journal: j, Undo: e.Undoers(), NoRollback: true, FailAt: numVFsKind{}.Name() + "/" + string(pf0.Dev)}
	if err := e.Up(context.Background(), r, gs); !errors.Is(err, teardown.ErrInjected) {
		t.Fatalf("up stopped at the numvfs write: %v, want the injected failure", err)
	}
	left := strings.Fields(d.ovs.MustVsctl("list-ports", "br-lag"))
	if want := []string{c.Groups[0].Bond.Name, "foreign0"}; !slices.Equal(left, want) {
		t.Errorf("bridge right after the numvfs writes: %v, want %v (the old representors' ports gone before the write, the foreign port kept)", left, want)
	}
}
