package sim

import (
	"fmt"
	"path"
	"slices"
	"testing"
	"time"
)

// TestVFAddrs: VFAddrs are the addresses of the VFs the simulated kernel
// makes, every one of each PF (its virtfn links at total_vfs).
func TestVFAddrs(t *testing.T) {
	spec := testSpec()
	spec.NICs[0].TotalVFs = 4
	got, err := spec.VFAddrs()
	if err != nil {
		t.Fatal(err)
	}
	x := newTH(t, spec)
	var want []string
	for _, pf := range []string{"0000:61:00.0", "0000:61:00.1"} {
		x.write("/sys/bus/pci/devices/"+pf+"/sriov_numvfs", "4")
		x.clk.Advance(time.Second)
		for i := range 4 {
			want = append(want, path.Base(x.readlink(fmt.Sprintf("/sys/bus/pci/devices/%s/virtfn%d", pf, i))))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("VFAddrs = %q, want the virtfn links' %q", got, want)
	}
	if _, err := (&Spec{}).VFAddrs(); err == nil {
		t.Error("VFAddrs of a spec without NICs: no error")
	}
}
