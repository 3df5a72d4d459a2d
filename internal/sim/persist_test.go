package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vflag/vflag/eswitch"
)

func beforeDmesg(d string) string {
	before, _, _ := strings.Cut(d, "dmesg:\n")
	return before
}

func TestPersistenceAcrossOpen(t *testing.T) {
	x := newTH(t, testSpec())
	x.vfs(pf0, "2")
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	x.ok(x.h.SetVFMAC("p0", 1, mac))
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Alias: "vflag"}))
	x.ok(x.h.SetMaster("p0", "bond0"))
	want := x.h.Dump()
	x.ok(x.h.Close())

	other := &Spec{NICs: []NICSpec{{Name: "other", PFs: []PFSpec{{PCI: "0000:03:00.0", Netdev: "x0"}}}}}
	h2, err := open(x.dir, other, x.clk.Now, x.clk.Sleep)
	x.ok(err)
	defer h2.Close()
	if got := h2.Dump(); got != want {
		t.Fatalf("reopened dump differs (-want +got):\n%s", cmp.Diff(want, got))
	}
	// The saved file is the only one: temp files are renamed away.
	entries, _ := os.ReadDir(x.dir)
	for _, e := range entries {
		if e.Name() != stateFile && e.Name() != lockFile {
			t.Errorf("stray file %s", e.Name())
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Fatal("Open of an empty dir without spec succeeded")
	}
	if err := x.h.SetLinkUp("p0", true); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("use after Close: %v", err)
	}
}

func TestTwoHostsShareOneState(t *testing.T) {
	x := newTH(t, testSpec())
	h2, err := open(x.dir, nil, x.clk.Now, x.clk.Sleep)
	x.ok(err)
	defer h2.Close()
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad"}))
	if _, err := h2.Link("bond0"); err != nil {
		t.Fatalf("second host does not see the bond: %v", err)
	}
	x.ok(h2.SetMaster("p0", "bond0"))
	if l, _ := x.h.Link("p0"); l.Master != "bond0" {
		t.Fatalf("first host sees master %q", l.Master)
	}
	if err := x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad"}); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("EEXIST across hosts: %v", err)
	}
}

func TestAsyncProgressAcrossReopen(t *testing.T) {
	x := newTH(t, testSpec())
	x.write("/sys/bus/pci/devices/"+pf0+"/sriov_drivers_autoprobe", "0")
	x.write("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", "4")
	x.ok(x.h.Close())

	x.clk.Advance(2*latVF + latVF/2)
	h2, err := open(x.dir, nil, x.clk.Now, x.clk.Sleep)
	x.ok(err)
	fs2 := h2.FS()
	var virtfns []string
	names, err := fs2.ReadDir("/sys/bus/pci/devices/" + pf0)
	x.ok(err)
	for _, n := range names {
		if strings.HasPrefix(n, "virtfn") {
			virtfns = append(virtfns, n)
		}
	}
	if !cmp.Equal(virtfns, []string{"virtfn0", "virtfn1"}) {
		t.Fatalf("after 2.5 VF latencies: %v", virtfns)
	}
	if d := h2.Dump(); !strings.Contains(d, "ready=2/4") || !strings.Contains(d, "vf 3 0000:61:00.5 creating") {
		t.Fatalf("dump does not show the creation progress:\n%s", d)
	}
	x.ok(h2.Close())
	x.clk.Advance(2 * latVF)
	h3, err := open(x.dir, nil, x.clk.Now, x.clk.Sleep)
	x.ok(err)
	defer h3.Close()
	if _, err := h3.FS().Readlink("/sys/bus/pci/devices/" + pf0 + "/virtfn3"); err != nil {
		t.Fatalf("virtfn3 after the full latency: %v", err)
	}

	// LAG activation progresses between processes too.
	x.h = h3
	x.fs = h3.FS()
	x.vfs(pf1, "4")
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	x.ok(x.mode(pf1, eswitch.ModeSwitchdev))
	x.ok(h3.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad"}))
	x.ok(h3.SetMaster("p0", "bond0"))
	x.ok(h3.SetMaster("p1", "bond0"))
	x.ok(h3.Close())
	x.clk.Advance(latLAG)
	h4, err := open(x.dir, nil, x.clk.Now, x.clk.Sleep)
	x.ok(err)
	defer h4.Close()
	b, err := h4.FS().ReadFile(lagDir + "state")
	if err != nil || string(b) != "active\n" {
		t.Fatalf("lag state %q, %v", b, err)
	}
}

// TestConcurrentPipeline works both PFs in parallel from several goroutines
// and two hosts on one directory, with the real clock. Run with -race.
func TestConcurrentPipeline(t *testing.T) {
	spec := testSpec()
	spec.Latency = Latency{VFCreate: time.Millisecond, ModeChange: 2 * time.Millisecond, LAGActivation: 3 * time.Millisecond}
	dir := t.TempDir()
	h, err := Open(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h2, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i, pci := range []string{pf0, pf1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := []*Host{h, h2}[i]
			f := host.FS()
			p := "/sys/bus/pci/devices/" + pci + "/"
			for round := range 3 {
				steps := []func() error{
					func() error { return f.WriteFile(p+"sriov_drivers_autoprobe", []byte("0")) },
					func() error { return f.WriteFile(p+"sriov_numvfs", []byte("4")) },
					func() error {
						for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
							if _, err := f.Readlink(p + "virtfn3"); err == nil {
								return nil
							}
						}
						return fmt.Errorf("virtfn3 never appeared")
					},
					func() error { return host.SetEswitchMode(dl(pci), eswitch.ModeSwitchdev) },
					func() error {
						mac := net.HardwareAddr{0x52, 0x54, 0, 0, byte(i), byte(round)}
						return host.SetVFMAC([]string{"p0", "p1"}[i], 2, mac)
					},
					func() error { return host.SetEswitchMode(dl(pci), eswitch.ModeLegacy) },
					func() error { return f.WriteFile(p+"sriov_numvfs", []byte("0")) },
				}
				for _, s := range steps {
					if err := s(); err != nil {
						errs <- fmt.Errorf("%s round %d: %w", pci, round, err)
						return
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for _, host := range []*Host{h, h2} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = host.Dump()
				if _, err := host.Links(); err != nil {
					errs <- err
					return
				}
				if _, err := host.Ports(); err != nil {
					errs <- err
					return
				}
				_, _ = host.FS().ReadDir("/sys/class/net")
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := beforeDmesg(h.Dump()); got != beforeDmesg(h2.Dump()) {
		t.Fatal("hosts disagree")
	}
	ls, _ := h.Links()
	if len(ls) != 3 {
		t.Fatalf("links left: %+v", ls)
	}
}

// TestBaselineRestored runs vflag's pipeline and its teardown and compares
// the dumps, the way the project's integration tests use the sim.
func TestBaselineRestored(t *testing.T) {
	x := newTH(t, testSpec())
	baseline := x.h.Dump()
	dev := func(pci string) string { return "/sys/bus/pci/devices/" + pci + "/" }
	// up
	for _, pci := range []string{pf0, pf1} {
		x.ok(x.h.SetParam(dl(pci), "flow_steering_mode", "smfs"))
		x.write(dev(pci)+"sriov_drivers_autoprobe", "0")
		x.write(dev(pci)+"sriov_numvfs", "4")
	}
	x.settle()
	for i, pf := range []string{"p0", "p1"} {
		for vf := range 4 {
			x.ok(x.h.SetVFMAC(pf, vf, net.HardwareAddr{0x52, 0x54, 0, 0, byte(i), byte(vf)}))
		}
	}
	for _, pci := range []string{pf0, pf1} {
		x.ok(x.mode(pci, eswitch.ModeSwitchdev))
	}
	x.ok(x.h.SetFeature("p0", "hw-tc-offload", true))
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4", Alias: "vflag:g"}))
	for _, p := range []string{"p0", "p1"} {
		x.ok(x.h.SetMaster(p, "bond0"))
	}
	for _, p := range []string{"bond0", "p0", "p1"} {
		x.ok(x.h.SetLinkUp(p, true))
	}
	x.settle()
	if x.lagState() != "active" {
		t.Fatal("LAG not active")
	}
	x.write(dev("0000:61:00.2")+"driver_override", "vfio-pci")
	x.write("/sys/bus/pci/drivers_probe", "0000:61:00.2")
	for _, pci := range []string{pf0, pf1} {
		for _, r := range x.reps(pci) {
			x.ok(x.h.SetLinkUp(r, true))
		}
	}
	if beforeDmesg(x.h.Dump()) == beforeDmesg(baseline) {
		t.Fatal("up changed nothing")
	}
	// down, in reverse
	x.write("/sys/bus/pci/drivers/vfio-pci/unbind", "0000:61:00.2")
	x.write(dev("0000:61:00.2")+"driver_override", "")
	x.ok(x.h.DeleteLink("bond0"))
	for _, p := range []string{"p0", "p1"} {
		x.ok(x.h.SetLinkUp(p, false))
	}
	for _, pci := range []string{pf0, pf1} {
		x.ok(x.mode(pci, eswitch.ModeLegacy))
		x.write(dev(pci)+"sriov_numvfs", "0")
		x.write(dev(pci)+"sriov_drivers_autoprobe", "1")
		x.ok(x.h.SetParam(dl(pci), "flow_steering_mode", "dmfs"))
	}
	if diff := cmp.Diff(beforeDmesg(baseline), beforeDmesg(x.h.Dump())); diff != "" {
		t.Fatalf("host not back to baseline (-baseline +after):\n%s", diff)
	}
}

// TestReadsTakeNoLock: a read is served while another process holds the
// host's lock (as a writer between its reload and its save): every save
// renames a whole file into place, so a read needs no lock.
func TestReadsTakeNoLock(t *testing.T) {
	x := newTH(t, testSpec())
	lf, err := os.OpenFile(filepath.Join(x.dir, lockFile), os.O_RDWR, 0)
	x.ok(err)
	defer lf.Close()
	x.ok(syscall.Flock(int(lf.Fd()), syscall.LOCK_EX))
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck
	done := make(chan string, 1)
	go func() {
		b, err := x.fs.ReadFile("/sys/class/net/p0/mtu")
		done <- fmt.Sprintf("%q %v", b, err)
	}()
	select {
	case got := <-done:
		if got != `"1500\n" <nil>` {
			t.Fatalf("read = %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waited for the lock")
	}
}

// TestStateFileChanges: a Host sees the state file replaced (a save by
// another Host: rename) and changed in place (written over by hand).
func TestStateFileChanges(t *testing.T) {
	tests := []struct {
		name    string
		replace func(t *testing.T, path string, data []byte)
	}{
		{"renamed over", func(t *testing.T, path string, data []byte) {
			if err := os.WriteFile(path+".new", data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}},
		{"written in place", func(t *testing.T, path string, data []byte) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			if got := x.read("/sys/class/net/p0/mtu"); got != "1500\n" {
				t.Fatalf("mtu = %q", got)
			}
			path := filepath.Join(x.dir, stateFile)
			data, err := os.ReadFile(path)
			x.ok(err)
			var st map[string]any
			x.ok(json.Unmarshal(data, &st))
			p0 := st["netdevs"].(map[string]any)["p0"].(map[string]any)
			p0["mtu"], p0["alias"] = 9000, "changed" // and a size of its own
			data, err = json.Marshal(st)
			x.ok(err)
			tc.replace(t, path, data)
			if got := x.read("/sys/class/net/p0/mtu"); got != "9000\n" {
				t.Fatalf("mtu after the state file changed = %q, want 9000", got)
			}
		})
	}
}
