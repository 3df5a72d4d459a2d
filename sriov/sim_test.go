package sriov_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// openSim opens a simulated host with one dual-port NIC (8 VFs per PF).
func openSim(t *testing.T, vfCreate time.Duration) *sim.Host {
	t.Helper()
	h, err := sim.Open(t.TempDir(), &sim.Spec{
		NICs: []sim.NICSpec{{
			Name:     "nic0",
			TotalVFs: 8,
			PFs:      []sim.PFSpec{{PCI: string(pf0), Netdev: "p0"}, {PCI: string(pf1), Netdev: "p1"}},
		}},
		Latency: sim.Latency{VFCreate: vfCreate, ModeChange: time.Millisecond, LAGActivation: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// recFS records every write that reaches the filesystem.
type recFS struct {
	sysfs.FS
	mu     sync.Mutex
	writes []string // "path=data"
}

func (r *recFS) WriteFile(p string, data []byte) error {
	r.mu.Lock()
	r.writes = append(r.writes, p+"="+string(data))
	r.mu.Unlock()
	return r.FS.WriteFile(p, data)
}

func (r *recFS) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

func waitVFs(t *testing.T, h sriov.Host, pf sriov.Addr, n int) []sriov.VF {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	vfs, err := h.WaitVFs(ctx, pf, n)
	if err != nil {
		t.Fatal(err)
	}
	return vfs
}

func TestSimSetNumVFsGoesThroughZero(t *testing.T) {
	s := openSim(t, 0)
	rec := &recFS{FS: s.FS()}
	h := sriov.Host{FS: rec}
	numvfs := "/sys/bus/pci/devices/" + string(pf0) + "/sriov_numvfs"

	steps := []struct {
		to     int
		writes []string
	}{
		{3, []string{numvfs + "=3"}}, // from 0: one write
		{3, nil},                     // same count: no write at all
		{5, []string{numvfs + "=0", numvfs + "=5"}}, // non-zero to non-zero: through 0
		{2, []string{numvfs + "=0", numvfs + "=2"}}, // also when shrinking
		{0, []string{numvfs + "=0"}},                // to 0: one write
		{0, nil},
	}
	for _, st := range steps {
		if err := h.SetNumVFs(pf0, st.to); err != nil {
			t.Fatalf("SetNumVFs(%d): %v", st.to, err)
		}
		if got := rec.take(); !reflect.DeepEqual(got, st.writes) {
			t.Errorf("SetNumVFs(%d) wrote %q, want %q", st.to, got, st.writes)
		}
		if n, err := h.NumVFs(pf0); err != nil || n != st.to {
			t.Errorf("after SetNumVFs(%d): NumVFs = %d, %v", st.to, n, err)
		}
		if vfs := waitVFs(t, h, pf0, st.to); len(vfs) != st.to {
			t.Errorf("after SetNumVFs(%d): %d VFs", st.to, len(vfs))
		}
	}
	if strings.Contains(s.Dump(), "already enabled") {
		t.Errorf("the kernel refused a numvfs write (EBUSY):\n%s", s.Dump())
	}

	// The rule SetNumVFs honours: a direct non-zero to non-zero write is EBUSY.
	if err := h.SetNumVFs(pf0, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.FS().WriteFile(numvfs, []byte("4")); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("direct write 2 -> 4: %v, want EBUSY (the model no longer shows why SetNumVFs goes through 0)", err)
	}
}

func TestSimSetNumVFsAboveTotal(t *testing.T) {
	s := openSim(t, 0)
	h := sriov.Host{FS: s.FS()}

	err := h.SetNumVFs(pf0, 9)
	if !errors.Is(err, syscall.ERANGE) {
		t.Fatalf("SetNumVFs(9) with totalvfs 8: %v, want ERANGE", err)
	}
	if !strings.Contains(err.Error(), string(pf0)) || !strings.Contains(err.Error(), "9") {
		t.Errorf("error %q does not name the PF and the count", err)
	}
	if n, _ := h.NumVFs(pf0); n != 0 {
		t.Errorf("NumVFs after a refused SetNumVFs = %d, want 0", n)
	}

	// From a non-zero count the refusal must not have destroyed the VFs
	// that were there: the kernel checks the range before anything else.
	if err := h.SetNumVFs(pf0, 2); err != nil {
		t.Fatal(err)
	}
	before := waitVFs(t, h, pf0, 2)
	rec := &recFS{FS: s.FS()}
	err = sriov.Host{FS: rec}.SetNumVFs(pf0, 9)
	if w := rec.take(); len(w) != 0 {
		t.Errorf("a SetNumVFs that must fail wrote %q", w)
	}
	if !errors.Is(err, syscall.ERANGE) {
		t.Fatalf("SetNumVFs(2 -> 9): %v, want ERANGE", err)
	}
	if n, _ := h.NumVFs(pf0); n != 2 {
		t.Errorf("NumVFs after a refused SetNumVFs(2 -> 9) = %d, want 2 (the VFs were removed)", n)
	}
	if after, err := h.VFs(pf0); err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("VFs after a refused SetNumVFs = %v, %v; want %v", after, err, before)
	}
	if n, err := h.TotalVFs(pf0); err != nil || n != 8 {
		t.Errorf("TotalVFs = %d, %v", n, err)
	}
}

func TestSimWaitVFs(t *testing.T) {
	const lat = 30 * time.Millisecond
	s := openSim(t, lat)
	h := sriov.Host{FS: s.FS(), PollInterval: 2 * time.Millisecond}

	start := time.Now()
	if err := h.SetNumVFs(pf0, 4); err != nil {
		t.Fatal(err)
	}
	// numvfs reads the request at once; the VFs appear one by one, the
	// last one 4*lat after the write.
	if n, _ := h.NumVFs(pf0); n != 4 {
		t.Errorf("NumVFs right after the write = %d, want 4", n)
	}
	if vfs, _ := h.VFs(pf0); len(vfs) == 4 {
		t.Fatalf("all 4 VFs exist right after the write: the creation latency is not modelled, the test proves nothing")
	}
	vfs := waitVFs(t, h, pf0, 4)
	if el := time.Since(start); el < 4*lat {
		t.Errorf("WaitVFs returned after %v, before the last VF can exist (%v)", el, 4*lat)
	}
	var want []sriov.VF
	for i := 0; i < 4; i++ {
		want = append(want, sriov.VF{Index: i, Addr: sriov.Addr(vfAddr(i))})
	}
	if !reflect.DeepEqual(vfs, want) {
		t.Errorf("WaitVFs = %v, want %v", vfs, want)
	}

	// PF1's VFs follow PF0's possible VFs (offset 9 from function 1).
	if err := h.SetNumVFs(pf1, 1); err != nil {
		t.Fatal(err)
	}
	if vfs := waitVFs(t, h, pf1, 1); len(vfs) != 1 || vfs[0].Addr != "0000:61:01.2" {
		t.Errorf("PF1 VFs = %v, want [0000:61:01.2]", vfs)
	}

	// Waiting for 0 after removal returns at once.
	if err := h.SetNumVFs(pf0, 0); err != nil {
		t.Fatal(err)
	}
	if vfs := waitVFs(t, h, pf0, 0); len(vfs) != 0 {
		t.Errorf("WaitVFs(0) = %v", vfs)
	}
}

func TestSimWaitVFsTimeout(t *testing.T) {
	s := openSim(t, time.Hour) // the VFs never appear during the test
	h := sriov.Host{FS: s.FS(), PollInterval: time.Millisecond}
	if err := h.SetNumVFs(pf0, 2); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	vfs, err := h.WaitVFs(ctx, pf0, 2)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitVFs: %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("WaitVFs took %v to notice the deadline", el)
	}
	want := fmt.Sprintf("wait for 2 VFs on %s (have 0)", pf0)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if len(vfs) != 0 {
		t.Errorf("WaitVFs returned %v, want the VFs seen so far (none)", vfs)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := h.WaitVFs(ctx, pf0, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitVFs with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := h.WaitVFs(quick(t), sriov.Addr("0000:99:00.0"), 1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WaitVFs on a missing PF: %v, want fs.ErrNotExist at once", err)
	}
}

func TestSimBindRoundTrip(t *testing.T) {
	s := openSim(t, time.Millisecond)
	h := sriov.Host{FS: s.FS()}
	if err := h.SetNumVFs(pf0, 2); err != nil {
		t.Fatal(err)
	}
	vfs := waitVFs(t, h, pf0, 2)
	vf := vfs[0].Addr

	check := func(when, drv, override string, netdev bool) {
		t.Helper()
		if got, err := h.Driver(vf); err != nil || got != drv {
			t.Errorf("%s: Driver = %q, %v; want %q", when, got, err, drv)
		}
		if got, err := h.DriverOverride(vf); err != nil || got != override {
			t.Errorf("%s: DriverOverride = %q, %v; want %q", when, got, err, override)
		}
		// mlx5_core creates a VF netdev; vfio-pci and no driver do not.
		nds, err := h.Netdevs(vf)
		if err != nil || (len(nds) > 0) != netdev {
			t.Errorf("%s: Netdevs = %v, %v; want a netdev: %v", when, nds, err, netdev)
		}
	}
	check("autoprobed", "mlx5_core", "", true)

	// vfio-pci has no ID table: only driver_override makes it match.
	bindFile := "/sys/bus/pci/drivers/vfio-pci/bind"
	if err := s.FS().WriteFile(bindFile, []byte(vf)); !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("bare vfio-pci bind: %v, want ENODEV (no match without driver_override)", err)
	}

	if err := h.Bind(vf, "vfio-pci"); err != nil {
		t.Fatal(err)
	}
	check("bound to vfio-pci", "vfio-pci", "vfio-pci", false)
	if err := h.Bind(vf, "vfio-pci"); err != nil {
		t.Errorf("Bind to the driver it has: %v", err)
	}

	if err := h.Unbind(vf); err != nil {
		t.Fatal(err)
	}
	check("unbound", "", "vfio-pci", false)
	if err := h.Unbind(vf); err != nil {
		t.Errorf("Unbind of an unbound VF: %v", err)
	}

	if err := h.Bind(vf, "mlx5_core"); err != nil {
		t.Fatal(err)
	}
	check("back on mlx5_core", "mlx5_core", "mlx5_core", true)
	if err := h.ClearDriverOverride(vf); err != nil {
		t.Fatal(err)
	}
	check("override cleared", "mlx5_core", "", true)

	// With the override cleared, drivers_probe picks the NIC driver again.
	if err := h.Unbind(vf); err != nil {
		t.Fatal(err)
	}
	if err := s.FS().WriteFile("/sys/bus/pci/drivers_probe", []byte(vf)); err != nil {
		t.Fatal(err)
	}
	check("reprobed", "mlx5_core", "", true)

	// The other VF was never touched.
	if got, _ := h.Driver(vfs[1].Addr); got != "mlx5_core" {
		t.Errorf("VF1 driver = %q, want mlx5_core", got)
	}
}

func TestSimBindFailure(t *testing.T) {
	s := openSim(t, 0)
	h := sriov.Host{FS: s.FS()}
	if err := h.SetAutoprobe(pf0, false); err != nil {
		t.Fatal(err)
	}
	if err := h.SetNumVFs(pf0, 1); err != nil {
		t.Fatal(err)
	}
	vf := waitVFs(t, h, pf0, 1)[0].Addr
	err := h.Bind(vf, "nosuchdrv")
	if err == nil || !strings.Contains(err.Error(), string(vf)) || !strings.Contains(err.Error(), "nosuchdrv") {
		t.Errorf("Bind to a missing driver: %v, want an error naming the VF and the driver", err)
	}
	if err := h.Bind("0000:61:00.2"+"x", "vfio-pci"); err == nil {
		t.Errorf("Bind of a bad address succeeded")
	}
}

func TestSimAutoprobe(t *testing.T) {
	s := openSim(t, time.Millisecond)
	h := sriov.Host{FS: s.FS()}

	if on, err := h.Autoprobe(pf0); err != nil || !on {
		t.Fatalf("default Autoprobe = %v, %v; want true (kernel default)", on, err)
	}
	if err := h.SetAutoprobe(pf0, false); err != nil {
		t.Fatal(err)
	}
	if on, err := h.Autoprobe(pf0); err != nil || on {
		t.Fatalf("Autoprobe after SetAutoprobe(false) = %v, %v", on, err)
	}
	if on, _ := h.Autoprobe(pf1); !on {
		t.Errorf("SetAutoprobe on PF0 changed PF1")
	}

	drivers := func(pf sriov.Addr, n int) []string {
		t.Helper()
		var ds []string
		for _, vf := range waitVFs(t, h, pf, n) {
			d, err := h.Driver(vf.Addr)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
		return ds
	}

	// Autoprobe off: new VFs get no host driver.
	if err := h.SetNumVFs(pf0, 2); err != nil {
		t.Fatal(err)
	}
	if got := drivers(pf0, 2); !reflect.DeepEqual(got, []string{"", ""}) {
		t.Errorf("VF drivers with autoprobe off = %q, want none", got)
	}
	// Autoprobe on: the setting applies at the next enable, not to existing VFs.
	if err := h.SetAutoprobe(pf0, true); err != nil {
		t.Fatal(err)
	}
	if got := drivers(pf0, 2); !reflect.DeepEqual(got, []string{"", ""}) {
		t.Errorf("existing VFs got drivers %q when autoprobe was turned on", got)
	}
	if err := h.SetNumVFs(pf0, 3); err != nil {
		t.Fatal(err)
	}
	if got := drivers(pf0, 3); !reflect.DeepEqual(got, []string{"mlx5_core", "mlx5_core", "mlx5_core"}) {
		t.Errorf("VF drivers with autoprobe on = %q, want mlx5_core", got)
	}
	// And turning it off does not unbind existing VFs.
	if err := h.SetAutoprobe(pf0, false); err != nil {
		t.Fatal(err)
	}
	if got := drivers(pf0, 3); !reflect.DeepEqual(got, []string{"mlx5_core", "mlx5_core", "mlx5_core"}) {
		t.Errorf("turning autoprobe off changed bound VFs: %q", got)
	}
	if err := h.SetAutoprobe(sriov.Addr("0000:99:00.0"), true); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SetAutoprobe on a missing PF: %v, want fs.ErrNotExist", err)
	}
}

// quick is a context for calls that must return at once: if they poll
// instead, the test fails after a second rather than hanging.
func quick(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	t.Cleanup(cancel)
	return ctx
}

// CountVFs and VF agree with VFs while the VFs appear one by one.
func TestSimCountVFsAndVF(t *testing.T) {
	const lat = 20 * time.Millisecond
	s := openSim(t, lat)
	h := sriov.Host{FS: s.FS(), PollInterval: 2 * time.Millisecond}
	if n, err := h.CountVFs(pf0); err != nil || n != 0 {
		t.Fatalf("CountVFs before = %d, %v", n, err)
	}
	if _, ok, err := h.VF(pf0, 0); ok || err != nil {
		t.Fatalf("VF 0 before: ok %v, err %v", ok, err)
	}
	if err := h.SetNumVFs(pf0, 3); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		vfs, err := h.VFs(pf0)
		if err != nil {
			t.Fatal(err)
		}
		n, err := h.CountVFs(pf0)
		if err != nil {
			t.Fatal(err)
		}
		// A VF may appear between the two reads, never disappear.
		if n < len(vfs) || n > len(vfs)+1 {
			t.Fatalf("CountVFs = %d, VFs lists %d", n, len(vfs))
		}
		for _, v := range vfs {
			if a, ok, err := h.VF(pf0, v.Index); err != nil || !ok || a != v.Addr {
				t.Fatalf("VF(%d) = %s, %v, %v; VFs has %s", v.Index, a, ok, err, v.Addr)
			}
		}
		if len(vfs) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d VFs", len(vfs))
		}
	}
	if _, ok, err := h.VF(pf0, 3); ok || err != nil {
		t.Errorf("VF 3 of 3: ok %v, err %v", ok, err)
	}
	if n, err := h.CountVFs(pf1); err != nil || n != 0 {
		t.Errorf("CountVFs of pf1 = %d, %v", n, err)
	}
}
