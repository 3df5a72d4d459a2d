package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/teardown"
)

// The edits, on the first group.

func bondSet(f func(*config.Bond)) func(*config.Config) {
	return func(c *config.Config) { f(&c.Groups[0].Bond) }
}

// activeBackup: an active-backup bond (no lacp_rate, no xmit_hash_policy).
func activeBackup(c *config.Config) {
	b := &c.Groups[0].Bond
	b.Mode, b.LacpRate, b.XmitHashPolicy = "active-backup", "", ""
}

func groupMTU(mtu int) func(*config.Config) {
	return func(c *config.Config) { c.Groups[0].MTU = mtu }
}

func numVFs(n int) func(*config.Config) {
	return func(c *config.Config) { c.Groups[0].NumVFs = n }
}

func pfRefs(refs ...string) func(*config.Config) {
	return func(c *config.Config) { c.Groups[0].PFs = refs }
}

func ovsOther(tcPolicy string, maxIdle int) func(*config.Config) {
	return func(c *config.Config) { c.Groups[0].OVS.TCPolicy, c.Groups[0].OVS.MaxIdle = tcPolicy, maxIdle }
}

// vfSet edits the vfs entry of pf's VF vf (it must be listed).
func vfSet(pf, vf int, f func(*config.VFConfig)) func(*config.Config) {
	return func(c *config.Config) {
		g := &c.Groups[0]
		for i := range g.VFs {
			if g.VFs[i].PF == pf && g.VFs[i].VF == vf {
				f(&g.VFs[i])
				return
			}
		}
		panic(fmt.Sprintf("no vfs entry for pf %d vf %d", pf, vf))
	}
}

func rateGroups(rgs ...config.RateGroup) func(*config.Config) {
	return func(c *config.Config) { c.Groups[0].RateGroups = rgs }
}

// convergeBed is a bed, with the real OVS and libvirtd, that whole
// pipeline runs (Preflight + Up, Down) visit with changing configs, on
// the bed's host.Host and one journal.
type convergeBed struct {
	*bed
	journal *teardown.Journal
}

func newConvergeBed(t *testing.T, d *daemons, bc bedConfig) *convergeBed {
	t.Helper()
	b := newBed(t, d, bc)
	j, err := teardown.OpenJournal(b.journalDir)
	if err != nil {
		t.Fatal(err)
	}
	return &convergeBed{bed: b, journal: j}
}

// up runs preflight and up (a plan with dry) for the config and returns
// the events.
func (b *convergeBed) up(bc bedConfig, dry bool) []teardown.Event {
	b.t.Helper()
	e := New(b.config(bc), b.h, slog.New(slog.DiscardHandler))
	e.Poll = 5 * time.Millisecond
	ctx := context.Background()
	gs, err := e.Preflight(ctx)
	if err != nil {
		b.t.Fatalf("preflight: %v", err)
	}
	r := &teardown.Runner{Journal: b.journal, Undo: e.Undoers(), DryRun: dry}
	if err := e.Up(ctx, r, gs); err != nil {
		b.t.Fatalf("up (dry %v): %v", dry, err)
	}
	if err := b.journal.Flush(); err != nil { // as apply.Up at a run's end
		b.t.Fatalf("up (dry %v): %v", dry, err)
	}
	return r.Results()
}

func (b *convergeBed) down() {
	b.t.Helper()
	e := New(nil, b.h, nil)
	r := &teardown.Runner{Journal: b.journal, Undo: e.Undoers()}
	if err := r.Down(context.Background()); err != nil {
		b.t.Fatalf("down: %v", err)
	}
}

// changed are the ids of the events that changed (or would change) the host, sorted.
func changed(evs []teardown.Event) []string {
	var ids []string
	for _, ev := range evs {
		if ev.Changed {
			ids = append(ids, ev.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

func eventOf(evs []teardown.Event, id string) (teardown.Event, bool) {
	for _, ev := range evs {
		if ev.ID == id && ev.Phase != teardown.PhaseWait {
			return ev, true
		}
	}
	return teardown.Event{}, false
}

// TestBondOptionsConverge changes the bond's options of a converged host
// (DESIGN.md 2a): up changes exactly what differs, at the cost the kernel
// sets (bond_options.c: live, bond down, slaves released), ends with the
// bond as configured and the hardware LAG active; a second up changes
// nothing; the plan shows the same steps with Disruptive exactly for the
// re-forms; down returns the host to its state before the first up.
func TestBondOptionsConverge(t *testing.T) {
	d := startDaemons(t)
	example := exampleBed(t)
	const bond = "bond0"
	tests := []struct {
		name     string
		from, to bedConfig
		want     eswitch.BondInfo // mode, miimon, lacp_rate, xmit_hash_policy after up
		summary  string           // in bond.create's summary
		cost     bondCost
		extra    []string // steps besides bond.create that up changes
	}{
		{name: "miimon 100 to 200 (live)", from: example, to: example.with(bondSet(func(b *config.Bond) { b.Miimon = 200 })),
			want:    eswitch.BondInfo{Mode: "802.3ad", Miimon: 200, LacpRate: "fast", XmitHashPolicy: "layer3+4"},
			summary: "bond0: miimon 100 -> 200 (live)", cost: costLive},
		// Live for the kernel's bond, but mlx5 takes the policy into its
		// LAG only at the enslave: the PFs are enslaved again (issue 36).
		{name: "xmit_hash_policy layer3+4 to layer2 (re-form: mlx5 takes it at the enslave)", from: example, to: example.with(bondSet(func(b *config.Bond) { b.XmitHashPolicy = "layer2" })),
			want:    eswitch.BondInfo{Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer2"},
			summary: "bond0: xmit_hash_policy layer3+4 -> layer2 (re-forms the bond: mlx5 takes xmit_hash_policy into its LAG only when the PFs are enslaved, so they are released and enslaved again; hardware LAG down meanwhile)",
			cost:    costReform,
			extra:   []string{"bond.enslave/ens1f0np0", "bond.enslave/ens1f1np1", "link.up/bond0", "sriov.bind/ens1f1np1/vf1", "sriov.unbind/pci/0000:61:00.1"}},
		{name: "lacp_rate fast to slow (bond down)", from: example, to: example.with(bondSet(func(b *config.Bond) { b.LacpRate = "slow" })),
			want:    eswitch.BondInfo{Mode: "802.3ad", Miimon: 100, LacpRate: "slow", XmitHashPolicy: "layer3+4"},
			summary: "bond0: lacp_rate fast -> slow (bond down and up again: hardware LAG down)", cost: costDown,
			extra: []string{"link.up/bond0"}},
		{name: "mode 802.3ad to active-backup (re-form)", from: example, to: example.with(activeBackup),
			want: eswitch.BondInfo{Mode: "active-backup", Miimon: 100},
			// Leaving 802.3ad puts lacp_rate (first, while it can be written)
			// and xmit_hash_policy back to the defaults a fresh
			// active-backup bond has.
			summary: "bond0: lacp_rate fast -> slow (bond down and up again: hardware LAG down); bond0: mode 802.3ad -> active-backup (re-forms the bond: slaves released, hardware LAG down); bond0: xmit_hash_policy layer3+4 -> layer2 (live)", cost: costReform,
			// The host-side VF (pf 1 vf 1, mlx5_core) is unbound before the
			// LAG re-forms and bound again after it.
			extra: []string{"bond.enslave/ens1f0np0", "bond.enslave/ens1f1np1", "link.up/bond0", "sriov.bind/ens1f1np1/vf1", "sriov.unbind/pci/0000:61:00.1"}},
		{name: "mode active-backup to 802.3ad (re-form, kept options)", from: example.with(activeBackup), to: example,
			want: eswitch.BondInfo{Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4"},
			// The kernel kept lacp_rate and xmit_hash_policy at their
			// defaults while the bond was active-backup.
			summary: "bond0: mode active-backup -> 802.3ad (re-forms the bond: slaves released, hardware LAG down); bond0: lacp_rate slow -> fast (bond down and up again: hardware LAG down); bond0: xmit_hash_policy layer2 -> layer3+4 (live)",
			cost:    costReform,
			extra:   []string{"bond.enslave/ens1f0np0", "bond.enslave/ens1f1np1", "link.up/bond0", "sriov.bind/ens1f1np1/vf1", "sriov.unbind/pci/0000:61:00.1"}},
	}
	primary := func(ref string) func(*config.Config) { return bondSet(func(b *config.Bond) { b.Primary = ref }) }
	adSelect := func(v string) func(*config.Config) { return bondSet(func(b *config.Bond) { b.AdSelect = v }) }
	updelay := func(ms int) func(*config.Config) { return bondSet(func(b *config.Bond) { b.UpDelay = ms }) }
	withPrimary := example.with(activeBackup, primary("ens1f1np1"))
	byPCI := example.with(activeBackup, pfRefs("0000:61:00.0", "0000:61:00.1"))
	tests = append(tests, []struct {
		name     string
		from, to bedConfig
		want     eswitch.BondInfo
		summary  string
		cost     bondCost
		extra    []string
	}{
		{name: "updelay, downdelay, min_links (live)", from: example,
			to:      example.with(updelay(200), bondSet(func(b *config.Bond) { b.DownDelay, b.MinLinks = 100, 1 })),
			want:    eswitch.BondInfo{Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4", MinLinks: 1, UpDelay: 200, DownDelay: 100},
			summary: "bond0: min_links 0 -> 1 (live); bond0: updelay 0 -> 200 (live); bond0: downdelay 0 -> 100 (live)", cost: costLive},
		{name: "miimon scales updelay (kept in intervals)", from: example.with(updelay(200)),
			to:      example.with(updelay(400), bondSet(func(b *config.Bond) { b.Miimon = 200 })),
			want:    eswitch.BondInfo{Mode: "802.3ad", Miimon: 200, LacpRate: "fast", XmitHashPolicy: "layer3+4", UpDelay: 400},
			summary: "bond0: miimon 100 -> 200 (live)", cost: costLive},
		{name: "miimon with updelay kept in ms", from: example.with(updelay(200)),
			to:      example.with(updelay(200), bondSet(func(b *config.Bond) { b.Miimon = 200 })),
			want:    eswitch.BondInfo{Mode: "802.3ad", Miimon: 200, LacpRate: "fast", XmitHashPolicy: "layer3+4", UpDelay: 200},
			summary: "bond0: miimon 100 -> 200 (live); bond0: updelay 200, 400 at miimon 200, -> 200 (live)", cost: costLive},
		{name: "ad_select stable to bandwidth (bond down)", from: example, to: example.with(adSelect("bandwidth")),
			want:    eswitch.BondInfo{Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4", AdSelect: "bandwidth"},
			summary: "bond0: ad_select stable -> bandwidth (bond down and up again: hardware LAG down)", cost: costDown,
			extra: []string{"link.up/bond0"}},
		{name: "primary set (live)", from: example.with(activeBackup), to: withPrimary,
			want:    eswitch.BondInfo{Mode: "active-backup", Miimon: 100, Primary: "ens1f1np1", ActiveSlave: "ens1f1np1"},
			summary: "bond0: primary - -> ens1f1np1 (live)", cost: costLive},
		{name: "primary cleared (live)", from: withPrimary, to: example.with(activeBackup),
			want:    eswitch.BondInfo{Mode: "active-backup", Miimon: 100, ActiveSlave: "ens1f1np1"},
			summary: "bond0: primary ens1f1np1 -> - (live)", cost: costLive},
		{name: "primary by PCI address", from: byPCI, to: byPCI.with(primary("0000:61:00.1")),
			want:    eswitch.BondInfo{Mode: "active-backup", Miimon: 100, Primary: "ens1f1np1", ActiveSlave: "ens1f1np1"},
			summary: "bond0: primary - -> ens1f1np1 (live)", cost: costLive},
		{name: "leaving active-backup clears the primary first", from: withPrimary, to: example.with(adSelect("count")),
			want:    eswitch.BondInfo{Mode: "802.3ad", Miimon: 100, LacpRate: "fast", XmitHashPolicy: "layer3+4", AdSelect: "count"},
			summary: "bond0: primary ens1f1np1 -> - (live); bond0: mode active-backup -> 802.3ad (re-forms the bond: slaves released, hardware LAG down); bond0: lacp_rate slow -> fast (bond down and up again: hardware LAG down); bond0: xmit_hash_policy layer2 -> layer3+4 (live); bond0: ad_select stable -> count (bond down and up again: hardware LAG down)",
			cost:    costReform,
			extra:   []string{"bond.enslave/ens1f0np0", "bond.enslave/ens1f1np1", "link.up/bond0", "sriov.bind/ens1f1np1/vf1", "sriov.unbind/pci/0000:61:00.1"}},
		{name: "entering active-backup with a primary; ad_select back to stable", from: example.with(adSelect("count")), to: withPrimary,
			want:    eswitch.BondInfo{Mode: "active-backup", Miimon: 100, Primary: "ens1f1np1", ActiveSlave: "ens1f1np1"},
			summary: "bond0: lacp_rate fast -> slow (bond down and up again: hardware LAG down); bond0: mode 802.3ad -> active-backup (re-forms the bond: slaves released, hardware LAG down); bond0: xmit_hash_policy layer3+4 -> layer2 (live); bond0: ad_select count -> stable (bond down and up again: hardware LAG down); bond0: primary - -> ens1f1np1 (live)",
			cost:    costReform,
			extra:   []string{"bond.enslave/ens1f0np0", "bond.enslave/ens1f1np1", "link.up/bond0", "sriov.bind/ens1f1np1/vf1", "sriov.unbind/pci/0000:61:00.1"}},
	}...)
	for _, tc := range tests {
		if tc.want.Mode == "802.3ad" && tc.want.AdSelect == "" {
			tc.want.AdSelect = "stable"
		}
		t.Run(tc.name, func(t *testing.T) {
			b := newConvergeBed(t, &d, tc.from)
			baseline := b.world()
			b.up(tc.from, false)
			if again := changed(b.up(tc.from, false)); len(again) != 0 {
				t.Fatalf("the first config did not converge: %v", again)
			}

			// The plan: the change, Disruptive exactly for a re-form.
			plan := b.up(tc.to, true)
			want := append([]string{"bond.create/" + bond}, tc.extra...)
			sort.Strings(want)
			if got := changed(plan); !slices.Equal(got, want) {
				t.Errorf("plan changes %v, want %v", got, want)
			}
			for _, ev := range plan {
				disruptive := ev.ID == "bond.create/"+bond && tc.cost >= costDown
				if ev.Disruptive != disruptive {
					t.Errorf("plan: %s Disruptive=%v, want %v (%s)", ev.ID, ev.Disruptive, disruptive, ev.Summary)
				}
			}
			if ev, _ := eventOf(plan, "bond.create/"+bond); ev.Summary != tc.summary {
				t.Errorf("plan summary\n %q, want\n %q", ev.Summary, tc.summary)
			}

			releases, enslaves := b.dmesgCount("Releasing"), b.dmesgCount("Enslaving")
			evs := b.up(tc.to, false)
			if got := changed(evs); !slices.Equal(got, want) {
				t.Errorf("up changed %v, want %v (the plan's)", got, want)
			}
			if ev, _ := eventOf(evs, "bond.create/"+bond); ev.Disruptive != (tc.cost >= costDown) {
				t.Errorf("up: bond.create Disruptive=%v", ev.Disruptive)
			}
			// Slaves released (and enslaved again) only for a mode change.
			wantReleases := map[bool]int{true: 2, false: 0}[tc.cost == costReform]
			if n := b.dmesgCount("Releasing") - releases; n != wantReleases {
				t.Errorf("%d slave releases, want %d", n, wantReleases)
			}
			if n := b.dmesgCount("Enslaving") - enslaves; n != wantReleases {
				t.Errorf("%d enslaves, want %d", n, wantReleases)
			}

			// The bond is as configured, both PFs in it, the LAG active.
			got, err := eswitch.ReadBond(b.h.FS, bond)
			if err != nil {
				t.Fatal(err)
			}
			if got.Mode != tc.want.Mode || got.Miimon != tc.want.Miimon || got.LacpRate != tc.want.LacpRate || got.XmitHashPolicy != tc.want.XmitHashPolicy ||
				got.AdSelect != tc.want.AdSelect || got.MinLinks != tc.want.MinLinks || got.UpDelay != tc.want.UpDelay || got.DownDelay != tc.want.DownDelay ||
				got.Primary != tc.want.Primary || tc.want.ActiveSlave != "" && got.ActiveSlave != tc.want.ActiveSlave {
				t.Errorf("bond after up: %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(got.Slaves, []string{"ens1f0np0", "ens1f1np1"}) || got.MIIStatus != "up" {
				t.Errorf("bond after up: slaves %v, mii %s", got.Slaves, got.MIIStatus)
			}
			if l, err := b.h.Kernel.Link(bond); err != nil || !l.AdminUp {
				t.Errorf("bond admin up %v, %v", l.AdminUp, err)
			}
			lag, err := eswitch.ReadLAG(b.h.FS, "0000:61:00.0")
			if err != nil || lag.State != eswitch.LAGActive {
				t.Errorf("LAG after up: %+v, %v", lag, err)
			}

			if again := changed(b.up(tc.to, false)); len(again) != 0 {
				t.Errorf("a second up changed %v", again)
			}
			b.down()
			if w := b.world(); w != baseline {
				t.Errorf("down did not restore the baseline:\n%s", testbed.DiffText(baseline, w))
			}
		})
	}
}

// TestMTUConverge: the group's mtu goes on the bond, its PFs and every
// representor; a change converges (only link.mtu steps), a re-formed bond
// keeps it on its PFs (the kernel gives them the bond's again), removing
// it from the config restores the MTUs from before the first change, and
// down gives the baseline.
func TestMTUConverge(t *testing.T) {
	d := startDaemons(t)
	example := exampleBed(t)
	b := newConvergeBed(t, &d, example)
	baseline := b.world()
	mtus := func() map[string]int {
		out := map[string]int{}
		ls, err := b.h.Kernel.Links()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			out[l.Name] = l.MTU
		}
		return out
	}
	reps := func() []string {
		var out []string
		for _, pf := range []string{"ens1f0np0", "ens1f1np1"} {
			m, err := eswitch.Representors(b.h.Kernel, b.h.FS, mustPF(t, b, pf))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range m {
				out = append(out, r)
			}
		}
		return out
	}
	check := func(what string, want int) {
		t.Helper()
		m := mtus()
		names := append([]string{"bond0", "ens1f0np0", "ens1f1np1"}, reps()...)
		if len(names) != 3+8 {
			t.Fatalf("%s: %d representors", what, len(names)-3)
		}
		for _, n := range names {
			if m[n] != want {
				t.Errorf("%s: %s mtu %d, want %d", what, n, m[n], want)
			}
		}
		// The OVS Interface rows of the bond and every representor carry
		// mtu_request = mtu (none without an mtu in the config).
		wantReq := want
		if wantReq == 1500 {
			wantReq = 0
		}
		c, err := ovs.Connect(context.Background(), d.ovs.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := c.Status(context.Background(), "br-lag")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range st.Ports {
			if p.Name == "br-lag" {
				continue
			}
			n++
			if p.MTURequest != wantReq {
				t.Errorf("%s: OVS interface %s mtu_request %d, want %d", what, p.Name, p.MTURequest, wantReq)
			}
		}
		if n != 9 {
			t.Errorf("%s: %d ports on br-lag, want 9", what, n)
		}
	}
	b.up(example, false)
	check("no mtu", 1500)
	for _, tc := range []struct {
		name string
		cfg  bedConfig
		mtu  int
		want []string // changed ids
	}{
		{"mtu 9000", example.with(groupMTU(9000)), 9000, []string{"link.mtu/bond0", "link.mtu/reps/ens1f0np0", "link.mtu/reps/ens1f1np1", "ovs.bridge/br-lag"}},
		{"mtu 4000", example.with(groupMTU(4000)), 4000, []string{"link.mtu/bond0", "link.mtu/reps/ens1f0np0", "link.mtu/reps/ens1f1np1", "ovs.bridge/br-lag"}},
		{"re-formed bond keeps it", example.with(activeBackup, groupMTU(4000)), 4000, nil},
		{"mtu removed: back to 1500", example.with(activeBackup), 1500, []string{"link.mtu/bond0", "link.mtu/reps/ens1f0np0", "link.mtu/reps/ens1f1np1", "ovs.bridge/br-lag"}},
	} {
		plan := changed(b.up(tc.cfg, true))
		evs := b.up(tc.cfg, false)
		got := changed(evs)
		if !slices.Equal(plan, got) {
			t.Errorf("%s: plan %v, up %v", tc.name, plan, got)
		}
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("%s: up changed %v, want %v", tc.name, got, tc.want)
		}
		// ovs-vswitchd sets an interface's mtu_request again when its link
		// MTU changes (the sim's mirror does not model that; e2e
		// converge.sh shows it): a dropped mtu's link undo must follow the
		// change that clears the OVS column.
		lastOVS, firstUndo := -1, len(evs)
		for i, ev := range evs {
			if ev.Changed && ev.Kind == KindOVSBridge && ev.Phase != teardown.PhaseUndo {
				lastOVS = i
			}
			if ev.Changed && ev.Kind == (mtuKind{}).Name() && ev.Phase == teardown.PhaseUndo && i < firstUndo {
				firstUndo = i
			}
		}
		if firstUndo < len(evs) && lastOVS > firstUndo {
			t.Errorf("%s: the link MTU was undone (event %d, %s) before OVS's mtu_request was cleared (event %d, %s)",
				tc.name, firstUndo, evs[firstUndo].ID, lastOVS, evs[lastOVS].ID)
		}
		check(tc.name, tc.mtu)
		if again := changed(b.up(tc.cfg, false)); len(again) != 0 {
			t.Errorf("%s: a second up changed %v", tc.name, again)
		}
	}
	b.up(example.with(groupMTU(9000)), false)
	check("9000 again", 9000)
	b.down()
	if w := b.world(); w != baseline {
		t.Errorf("down did not restore the baseline:\n%s", testbed.DiffText(baseline, w))
	}
}

func mustPF(t *testing.T, b *convergeBed, name string) eswitch.PF {
	t.Helper()
	pf, err := eswitch.ResolvePF(b.h.Kernel, b.h.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

// legacyVFs is a legacy group whose VF 0 is on the host's mlx5_core (a
// netdev), VF 1 on vfio-pci (none) and VF 2 unbound (the base of legacyBed).
const legacyVFs = `
ovsdb: unix:/var/run/openvswitch/db.sock
libvirt: qemu:///system
groups:
  - name: leg0
    eswitch: legacy
    pfs: [ens1f0np0]
    numvfs: 4
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:20:00:00", driver: mlx5_core}
      - {pf: 0, vf: 1, mac: "52:54:00:20:00:01", driver: vfio-pci}
sim:
  nics:
    - name: cx6lx
      total_vfs: 8
      pfs:
        - {pci: "0000:61:00.0", netdev: ens1f0np0}
        - {pci: "0000:61:00.1", netdev: ens1f1np1}
`

// legacyBed is legacyVFs as a bed config.
var legacyBed = bedConfig{base: legacyVFs}

// TestLegacyVFNetdevMTU: in a legacy group the mtu goes on the PFs and on
// the netdev of a VF bound to a host netdev driver (found through
// virtfnN/net/), after the bind; a VF on vfio-pci or unbound has none and
// is left alone. Plan and up change the same ids, a second up nothing, a
// change only the link.mtu steps, and down restores every MTU.
func TestLegacyVFNetdevMTU(t *testing.T) {
	d := startDaemons(t)
	b := newConvergeBed(t, &d, legacyBed)
	baseline := b.world()
	vfNetdev := func() string {
		a, ok, err := b.h.PCI.VF(mustPF(t, b, "ens1f0np0").Dev, 0)
		if err != nil || !ok {
			t.Fatalf("VF 0: %v %v", ok, err)
		}
		nd, err := b.h.PCI.Netdevs(a)
		if err != nil || len(nd) != 1 {
			t.Fatalf("netdevs of VF 0 (%s): %v %v", a, nd, err)
		}
		return nd[0]
	}
	mtuOf := func(n string) int {
		l, err := b.h.Kernel.Link(n)
		if err != nil {
			t.Fatal(err)
		}
		return l.MTU
	}
	for _, tc := range []struct {
		name string
		cfg  bedConfig
		mtu  int
		want []string
	}{
		{"no mtu", legacyBed, 1500, nil},
		{"mtu 9000", legacyBed.with(groupMTU(9000)), 9000, []string{"link.mtu/ens1f0np0", "link.mtu/vfs/ens1f0np0"}},
		{"mtu 4000", legacyBed.with(groupMTU(4000)), 4000, []string{"link.mtu/ens1f0np0", "link.mtu/vfs/ens1f0np0"}},
	} {
		plan := changed(b.up(tc.cfg, true))
		got := changed(b.up(tc.cfg, false))
		if !slices.Equal(plan, got) {
			t.Errorf("%s: plan %v, up %v", tc.name, plan, got)
		}
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("%s: up changed %v, want %v", tc.name, got, tc.want)
		}
		for _, n := range []string{"ens1f0np0", vfNetdev()} {
			if m := mtuOf(n); m != tc.mtu {
				t.Errorf("%s: %s mtu %d, want %d", tc.name, n, m, tc.mtu)
			}
		}
		if again := changed(b.up(tc.cfg, false)); len(again) != 0 {
			t.Errorf("%s: a second up changed %v", tc.name, again)
		}
	}
	b.down()
	if w := b.world(); w != baseline {
		t.Errorf("down did not restore the baseline:\n%s", testbed.DiffText(baseline, w))
	}
}

// TestOVSOtherConfig: tc-policy is set before hw-offload goes on (one
// ovs.other-config step ahead of ovs.bridge); once offload is on, another
// tc-policy is left alone (a restart of ovs-vswitchd would be needed) and
// up stays converged; max-idle changes live; dropping them from the config
// prunes them (the prior values back); down gives the baseline.
func TestOVSOtherConfig(t *testing.T) {
	d := startDaemons(t)
	example := exampleBed(t)
	b := newConvergeBed(t, &d, example)
	baseline := b.world()
	oc := func(key string) string {
		out, err := d.ovs.Vsctl("--if-exists", "get", "Open_vSwitch", ".", "other_config:"+key)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Trim(strings.TrimSpace(out), `"`)
	}
	for _, tc := range []struct {
		name              string
		cfg               bedConfig
		want              []string // changed ids
		tcPolicy, maxIdle string   // after
	}{
		{"fresh: tc-policy before hw-offload", example.with(ovsOther("skip_sw", 2000)), nil, "skip_sw", "2000"},
		{"tc-policy changed with offload on: left alone", example.with(ovsOther("skip_hw", 2000)), []string{}, "skip_sw", "2000"},
		{"max-idle live", example.with(ovsOther("skip_sw", 5000)), []string{"ovs.other-config/max-idle"}, "skip_sw", "5000"},
		{"both dropped: pruned", example, []string{"ovs.other-config/max-idle", "ovs.other-config/tc-policy"}, "", ""},
	} {
		plan := b.up(tc.cfg, true)
		evs := b.up(tc.cfg, false)
		got := changed(evs)
		if !slices.Equal(changed(plan), got) {
			t.Errorf("%s: plan %v, up %v", tc.name, changed(plan), got)
		}
		if tc.want != nil && !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%s: up changed %v, want %v", tc.name, got, tc.want)
		}
		if tc.want == nil { // the fresh up: tc-policy's step strictly before the bridge's
			tcAt, brAt := -1, -1
			for i, ev := range evs {
				switch {
				case ev.ID == "ovs.other-config/tc-policy" && ev.Changed:
					tcAt = i
				case ev.ID == "ovs.bridge/br-lag" && ev.Changed:
					brAt = i
				}
			}
			if tcAt < 0 || brAt < 0 || tcAt > brAt {
				t.Errorf("%s: tc-policy step at %d, bridge (hw-offload) at %d: want tc-policy first", tc.name, tcAt, brAt)
			}
		}
		if g, m := oc("tc-policy"), oc("max-idle"); g != tc.tcPolicy || m != tc.maxIdle {
			t.Errorf("%s: tc-policy %q max-idle %q, want %q %q", tc.name, g, m, tc.tcPolicy, tc.maxIdle)
		}
		if again := changed(b.up(tc.cfg, false)); len(again) != 0 {
			t.Errorf("%s: a second up changed %v", tc.name, again)
		}
	}
	b.up(example.with(ovsOther("skip_sw", 2000)), false)
	b.down()
	if w := b.world(); w != baseline {
		t.Errorf("down did not restore the baseline:\n%s", testbed.DiffText(baseline, w))
	}
}
