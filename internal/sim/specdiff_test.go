package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vflag/vflag/eswitch"
)

// TestReconcile: a config's sim section that differs from the spec the host
// was created from is reported field by field; latencies are taken over in
// place, everything else is kept as saved.
func TestReconcile(t *testing.T) {
	for _, tt := range []struct {
		name    string
		change  func(s *Spec)
		want    []string
		latency bool
	}{
		{name: "same", change: func(*Spec) {}},
		{name: "defaults written out", change: func(s *Spec) { s.NICs[0].TotalVFs, s.NICs[0].Driver = 8, "mlx5_core" }},
		{name: "latency", change: func(s *Spec) { s.Latency.ModeChange = 3 * time.Second }, latency: true},
		{name: "netdev renamed", change: func(s *Spec) { s.NICs[0].PFs[1].Netdev = "q1" },
			want: []string{"nics[0].pfs[1].netdev: p1 in the simulated host, q1 in the config"}},
		{name: "total_vfs and latency", change: func(s *Spec) { s.NICs[0].TotalVFs = 16; s.Latency.VFCreate = time.Second },
			want: []string{"nics[0].total_vfs: 8 in the simulated host, 16 in the config"}, latency: true},
		{name: "second NIC", change: func(s *Spec) {
			s.NICs = append(s.NICs, NICSpec{Name: "nic1", PFs: []PFSpec{{PCI: "0000:62:00.0", Netdev: "r0"}}})
		}, want: []string{"nics: 1 entries in the simulated host, 2 entries in the config"}},
		{name: "mirror_netns and no_vf_ops", change: func(s *Spec) { s.MirrorNetns = "/run/netns/x"; s.NICs[0].NoVFOps = []string{"trust"} },
			want: []string{
				"nics[0].no_vf_ops: [] in the simulated host, [trust] in the config",
				`mirror_netns: "" (unset) in the simulated host, /run/netns/x in the config`,
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			cfg := testSpec()
			tt.change(cfg)
			changes, latency, err := x.h.Reconcile(cfg)
			x.ok(err)
			var got []string
			for _, c := range changes {
				got = append(got, c.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if latency != tt.latency {
				t.Errorf("latency updated: %v, want %v", latency, tt.latency)
			}
			// The latencies are the config's now, in the saved file too;
			// nothing else changed.
			h2, err := open(x.dir, nil, x.clk.Now, x.clk.Sleep)
			x.ok(err)
			defer h2.Close()
			x.ok(h2.view(func(st *state, _ int64) error {
				if st.Spec.Latency != cfg.Latency {
					t.Errorf("saved latency %+v, want %+v", st.Spec.Latency, cfg.Latency)
				}
				if st.Spec.NICs[0].PFs[1].Netdev != "p1" || len(st.Spec.NICs) != 1 || st.Spec.MirrorNetns != "" {
					t.Errorf("saved spec changed beyond the latency: %+v", st.Spec)
				}
				return nil
			}))
			again, latency, err := h2.Reconcile(cfg)
			x.ok(err)
			if latency || len(again) != len(tt.want) {
				t.Errorf("second Reconcile: %v, latency %v", again, latency)
			}
		})
	}
}

// TestReconcileLatencyTakesEffect: a latency taken over in place times the
// next operation.
func TestReconcileLatencyTakesEffect(t *testing.T) {
	x := newTH(t, testSpec())
	cfg := testSpec()
	cfg.Latency.VFCreate = time.Second
	_, _, err := x.h.Reconcile(cfg)
	x.ok(err)
	x.write("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", "1")
	x.clk.Advance(latVF * 2)
	if x.exists("/sys/bus/pci/devices/" + pf0 + "/virtfn0") {
		t.Fatal("VF 0 appeared after the old latency")
	}
	x.clk.Advance(time.Second)
	if !x.exists("/sys/bus/pci/devices/" + pf0 + "/virtfn0") {
		t.Fatal("VF 0 missing after the new latency")
	}
}

// TestReset: the host re-created from a different spec is the host a fresh
// directory gets from it, whatever the old one held.
func TestReset(t *testing.T) {
	x := newTH(t, testSpec())
	x.vfs(pf0, "2")
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	x.ok(x.h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Alias: "vflag"}))
	x.settle()

	next := testSpec()
	next.NICs[0].PFs[1].Netdev = "q1"
	next.NICs[0].TotalVFs = 4
	x.ok(x.h.Reset(next))
	fresh := newTH(t, next)
	fresh.clk.Advance(x.clk.Now().Sub(fresh.clk.Now()))
	if diff := cmp.Diff(beforeDmesg(fresh.h.Dump()), beforeDmesg(x.h.Dump())); diff != "" {
		t.Fatalf("reset host differs from a fresh one (-fresh +reset):\n%s", diff)
	}
	changes, _, err := x.h.Reconcile(next)
	x.ok(err)
	if len(changes) != 0 {
		t.Fatalf("after reset: %v", changes)
	}
	if err := x.h.Reset(&Spec{}); err == nil || !strings.Contains(err.Error(), "no NICs") {
		t.Fatalf("reset to an empty spec: %v", err)
	}
}

// TestResetMovesMirror: a reset to another mirror_netns empties the old
// namespace of the host's veths and fills the new one.
func TestResetMovesMirror(t *testing.T) {
	pathA, nsA := newTestNetns(t)
	pathB, nsB := newTestNetns(t)
	spec := testSpec()
	spec.Latency = Latency{}
	spec.MirrorNetns = pathA
	h, err := Open(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.AddBond(eswitch.BondSpec{Name: "bond0", Mode: "active-backup", Alias: "vflag"}); err != nil {
		t.Fatal(err)
	}
	if got := len(listMirror(t, nsA)); got != 3 {
		t.Fatalf("%d netdevs mirrored into A, want 3 (p0 p1 bond0)", got)
	}
	next := testSpec()
	next.NICs[0].PFs[1].Netdev = "q1"
	next.MirrorNetns = pathB
	if err := h.Reset(next); err != nil {
		t.Fatal(err)
	}
	if got := listMirror(t, nsA); len(got) != 0 {
		t.Errorf("left in the old namespace: %v", got)
	}
	got := listMirror(t, nsB)
	if _, ok := got["q1"]; !ok || len(got) != 2 {
		t.Errorf("mirrored into the new namespace: %v, want p0 q1", got)
	}
}

// TestMirrorNetnsMissing: a mirror_netns that does not exist says what it
// is for and where it comes from.
func TestMirrorNetnsMissing(t *testing.T) {
	spec := testSpec()
	spec.MirrorNetns = "/run/netns/vflag-no-such-ns"
	_, err := Open(t.TempDir(), spec)
	want := "sim: mirror_netns /run/netns/vflag-no-such-ns: no such network namespace: it is where ovs-vswitchd runs and opens the simulated netdevs (make simhost CONFIG=<config> makes it; README: Try it on the simulated host): no such file or directory"
	if err == nil || err.Error() != want {
		t.Fatalf("Open: %v\nwant: %s", err, want)
	}
}
