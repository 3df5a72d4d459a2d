package hook

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/sim"
)

// TestRefusesHeldVF: a domain whose VF a process holds through vfio (a
// DPDK application libvirt does not know) is refused at prepare, naming the
// process as vflag's gate names it, before anything is changed; the same
// start goes through once the process is gone. (The hook's caller,
// libvirtd, is not counted: holders.Kernel.Except, tested there.)
func TestRefusesHeldVF(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	s, err := sim.Open(b.simDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const vf = "0000:61:00.3" // VF 1 of ens1f0np0, the domain's
	f := s.FS()
	// In this order (a map's would vary): the override, then the probe that
	// binds vfio-pci by it.
	for _, w := range [][2]string{{"/sys/bus/pci/devices/" + vf + "/driver_override", "vfio-pci"}, {"/sys/bus/pci/drivers_probe", vf}} {
		if err := f.WriteFile(w[0], []byte(w[1])); err != nil {
			t.Fatal(err)
		}
	}
	g, err := s.IOMMUGroup(vf)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := s.Spawn("dpdk-testpmd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(pid, fmt.Sprintf("/dev/vfio/%d", g)); err != nil {
		t.Fatal(err)
	}
	err = Run(ctx, b.opts("prepare", "begin"))
	want := fmt.Sprintf("refusing to start domain vm-a: VF in use: VF %s is held by pid %d (dpdk-testpmd) through /dev/vfio/%d", vf, pid, g)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("prepare with the VF held: %v\nwant %q", err, want)
	}
	if got := b.vfMAC(); got != priorMAC {
		t.Errorf("the refused prepare set the VF MAC: %s", got)
	}
	if _, err := os.Stat(b.dir("vm-a")); !os.IsNotExist(err) {
		t.Errorf("the refused prepare left a journal: %v", err)
	}

	if err := s.Exit(pid); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, b.opts("prepare", "begin")); err != nil {
		t.Fatalf("prepare once the process is gone: %v", err)
	}
	if got := b.vfMAC(); got != domMAC {
		t.Errorf("VF MAC after prepare = %s, want %s", got, domMAC)
	}
	if err := Run(ctx, b.opts("release", "end")); err != nil {
		t.Fatal(err)
	}
	b.assertReleased()
}
