package sim

import (
	"fmt"
	"net"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/sriov"
)

// benchHost is a converged 2 x 64 switchdev host at zero latency (as the
// whole-command bench's hook section), mirrored into a network namespace
// when the benchmark runs as root.
func benchHost(b *testing.B, mirror bool) (dir string) {
	b.Helper()
	spec := testSpec()
	spec.NICs[0].TotalVFs = 64
	spec.Latency = Latency{}
	if mirror {
		spec.MirrorNetns, _ = newTestNetns(b)
	}
	dir = b.TempDir()
	h, err := Open(dir, spec)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	f := h.FS()
	for _, pf := range []string{pf0, "0000:61:00.1"} {
		for _, w := range [][2]string{{"sriov_drivers_autoprobe", "0"}, {"sriov_numvfs", "64"}} {
			if err := f.WriteFile("/sys/bus/pci/devices/"+pf+"/"+w[0], []byte(w[1])); err != nil {
				b.Fatal(err)
			}
		}
		if err := h.SetEswitchMode(dl(pf), eswitch.ModeSwitchdev); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkOpen2x64 is one opening of the simulated host (state file and
// mirror) and its close.
func BenchmarkOpen2x64(b *testing.B) {
	for _, mirror := range []bool{false, true} {
		b.Run(fmt.Sprintf("mirror=%v", mirror), func(b *testing.B) {
			dir := benchHost(b, mirror)
			b.ResetTimer()
			for b.Loop() {
				h, err := Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				_ = h.Close()
			}
		})
	}
}

// BenchmarkListVFs2x64 lists the VFs of both PFs (sriov.Host.VFs: a
// directory and 64 virtfn links each) and reads each VF's driver link.
func BenchmarkListVFs2x64(b *testing.B) {
	dir := benchHost(b, false)
	h, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	s := sriov.Host{FS: h.FS()}
	b.ResetTimer()
	for b.Loop() {
		for _, pf := range []sriov.Addr{pf0, "0000:61:00.1"} {
			vfs, err := s.VFs(pf)
			if err != nil || len(vfs) != 64 {
				b.Fatalf("VFs: %d, %v", len(vfs), err)
			}
			for _, v := range vfs {
				if _, err := s.Driver(v.Addr); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkSetVFMAC2x64 is one simulated kernel write (the hook's VF MAC),
// with the mirror when root.
func BenchmarkSetVFMAC2x64(b *testing.B) {
	dir := benchHost(b, true)
	h, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	macs := []net.HardwareAddr{{0x52, 0x54, 0, 0, 0, 1}, {0x52, 0x54, 0, 0, 0, 2}}
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		if err := h.SetVFMAC("p0", 1, macs[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}
