package pipeline

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
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

	ce.runner = func(r *teardown.Runner) { r.NoRollback, r.FailAt = true, "sriov.numvfs/pci/0000:61:00.0" }
	if _, err := ce.run(false, func(c *config.Config) { c.Groups[0].NumVFs = 2 }); !errors.Is(err, teardown.ErrInjected) {
		t.Fatalf("up stopped at the numvfs write: %v, want the injected failure", err)
	}
	left := strings.Fields(d.ovs.MustVsctl("list-ports", "br-lag"))
	if want := []string{"bond0", "foreign0"}; !slices.Equal(left, want) {
		t.Errorf("bridge right after the numvfs writes: %v, want %v (the old representors' ports gone before the write, the foreign port kept)", left, want)
	}
}
