package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
)

func TestWaitPFs(t *testing.T) {
	se := newStepEnv(t, nil)
	se.Poll = 10 * time.Millisecond
	se.Boot = true // the NIC may still probe: the wait goes on
	if err := se.WaitPFs(context.Background(), time.Second); err != nil {
		t.Fatalf("PFs present: %v", err)
	}
	se.g.PFs = append([]string(nil), se.g.PFs...)
	se.g.PFs[1] = "late0"
	start := time.Now()
	err := se.WaitPFs(context.Background(), 150*time.Millisecond)
	var we *PFWaitError
	if !errors.As(err, &we) {
		t.Fatalf("missing PF: want a *PFWaitError, got %v", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("waited %s for a bound of 150ms", d)
	}
	for _, w := range []string{`groups[0].pfs[1] "late0"`, "within pf_wait 150ms", "pf_wait"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if len(we.Missing) != 1 {
		t.Errorf("missing %v: want only late0", we.Missing)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := se.WaitPFs(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
}

// TestWaitPFsRefusesANetdevThatIsNoPF: a PF reference naming a netdev that
// exists and can never become a PF ends the wait at once with what it is,
// instead of waiting out pf_wait and saying it "did not appear" (issue 21:
// the real kernel waited 60 s for bond0). The context bounds a regression.
func TestWaitPFsRefusesANetdevThatIsNoPF(t *testing.T) {
	se := newStepEnv(t, nil)
	se.Poll = 10 * time.Millisecond
	if err := se.k.AddBond(eswitch.BondSpec{Name: "bond9", Mode: "active-backup", Miimon: 100}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ref, want string }{
		{"bond9", `groups[0].pfs[1]: "bond9" is a bond, not a physical port (PF) of an SR-IOV NIC`},
		{"lo", `groups[0].pfs[1]: "lo" is a virtual interface (no device behind it), not a physical port (PF) of an SR-IOV NIC`},
	} {
		se.g.PFs = append([]string(nil), se.g.PFs...)
		se.g.PFs[1] = tc.ref
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := se.WaitPFs(ctx, time.Hour)
		cancel()
		var he HostErrors
		if !errors.As(err, &he) {
			t.Errorf("%s: want HostErrors at once, got %v", tc.ref, err)
			continue
		}
		if len(he) != 1 || he[0].Error() != tc.want {
			t.Errorf("%s: got %q, want %q", tc.ref, err, tc.want)
		}
	}
}

// TestRefuseVFsWithoutPool: on a NIC whose two ports are one device with one
// VF pool (netdevsim: every VF on the first port), a VF entry or attachment
// on the second port has nothing to realize it and is refused with its
// field path; on two devices (mlx5) both ports take VFs.
func TestRefuseVFsWithoutPool(t *testing.T) {
	cg := &config.Group{
		VFs:         []config.VFConfig{{PF: 0, VF: 0}, {PF: 1, VF: 0, VLAN: 7}},
		Attachments: []config.Attachment{{Domain: "vm1", PF: 1, VF: 1}},
	}
	for _, tc := range []struct {
		name string
		pfs  []eswitch.PF
		want []string
	}{
		{"netdevsim: one device", []eswitch.PF{{Dev: "netdevsim/netdevsim10", Netdev: "eth1"}, {Dev: "netdevsim/netdevsim10", Netdev: "eth2"}}, []string{
			`groups[0].vfs[1].pf: "1" has no VFs of its own: eth2 and pfs[0] eth1 are one device (netdevsim/netdevsim10) with one VF pool, on pfs[0]; name the VF with pf: 0`,
			`groups[0].attachments[0].pf: "1" has no VFs of its own: eth2 and pfs[0] eth1 are one device (netdevsim/netdevsim10) with one VF pool, on pfs[0]; name the VF with pf: 0`,
		}},
		{"mlx5: a device per port", []eswitch.PF{{Dev: "pci/0000:61:00.0", Netdev: "p0"}, {Dev: "pci/0000:61:00.1", Netdev: "p1"}}, nil},
	} {
		g := Group{Group: cg, PFs: tc.pfs, Owners: Owners(tc.pfs)}
		var got []string
		for _, v := range PoollessVFs(g) { // as preflight words them
			got = append(got, config.FieldError{Path: fmt.Sprintf("groups[0].%s.pf", v.Field), Value: v.PF, Msg: v.Why(g)}.Error())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestWaitPFsOutlivesAMomentaryNoPF: a PF reference that names a netdev
// which is no PF for an instant (at boot a PF udev was renaming showed no
// device link: "a virtual interface") is waited for, not refused at once:
// when it goes, the wait goes on as for any PF still to come.
func TestWaitPFsOutlivesAMomentaryNoPF(t *testing.T) {
	se := newStepEnv(t, nil)
	se.Poll = 10 * time.Millisecond
	se.Boot = true
	if err := se.k.AddBond(eswitch.BondSpec{Name: "late0", Mode: "active-backup", Miimon: 100}); err != nil {
		t.Fatal(err)
	}
	se.g.PFs = append([]string(nil), se.g.PFs...)
	se.g.PFs[1] = "late0"
	go func() {
		time.Sleep(wrongFor / 4)
		_ = se.k.DeleteLink("late0")
	}()
	err := se.WaitPFs(context.Background(), wrongFor/2)
	var we *PFWaitError
	if !errors.As(err, &we) {
		t.Fatalf("a netdev that was no PF for %s, then gone: want the wait's own end (*PFWaitError), got %v", wrongFor/4, err)
	}
}

// TestWaitPFsSaysWhatExists: a PF reference that does not resolve (a
// misspelt name) makes up say at once, not after pf_wait, how long it will
// wait and which netdevs of the group's driver the host has, naming the
// nearest; the error at the end says the same.
func TestWaitPFsSaysWhatExists(t *testing.T) {
	se := newStepEnv(t, nil)
	se.Poll = 10 * time.Millisecond
	se.Boot = true // at boot: the wait, with its first line at once
	var log syncLog
	se.Env.log = slog.New(slog.NewTextHandler(&log, nil))
	se.g.PFs = append([]string(nil), se.g.PFs...)
	se.g.PFs[1] = "ens1f1np2"
	start := time.Now()
	err := se.WaitPFs(context.Background(), 300*time.Millisecond)
	if err == nil {
		t.Fatal("a misspelt PF resolved")
	}
	first, at := log.first()
	if at.Sub(start) > 200*time.Millisecond {
		t.Errorf("the first line came %s after the start", at.Sub(start))
	}
	for _, want := range []string{"at most pf_wait 300ms", "mlx5_core netdevs here: ens1f0np0 (0000:61:00.0), ens1f1np1 (0000:61:00.1)", "did you mean ens1f1np1?"} {
		if !strings.Contains(first, want) {
			t.Errorf("the wait's first line lacks %q:\n%s", want, first)
		}
		if want != "at most pf_wait 300ms" && !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	// A PCI address: the PCI functions of that driver.
	se.g.PFs[1] = "0000:61:00.2"
	err = se.WaitPFs(context.Background(), 50*time.Millisecond)
	if want := "(mlx5_core PCI functions here: 0000:61:00.0 (ens1f0np0), 0000:61:00.1 (ens1f1np1))"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a PCI address: the error lacks %q: %v", want, err)
	}
}

// syncLog keeps what a logger wrote and when it first did.
type syncLog struct {
	mu    sync.Mutex
	lines []string
	at    time.Time
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		l.at = time.Now()
	}
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *syncLog) first() (string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return "", time.Time{}
	}
	return l.lines[0], l.at
}

// TestWaitPFsMisspeltFailsAtOnce: outside the boot, a PF name the host
// does not have, with udev settled and the NIC's other port there, fails
// the wait at once with the field, the ports of the driver and the nearest
// one; plan's preflight says the same. A group none of whose PFs resolved
// (the driver not loaded yet) is still waited for, as is every PF at boot.
// The context bounds a regression (the wait would run for an hour).
func TestWaitPFsMisspeltFailsAtOnce(t *testing.T) {
	se := newStepEnv(t, nil)
	se.Poll = 10 * time.Millisecond
	se.g.PFs = append([]string(nil), se.g.PFs...)
	se.g.PFs[1] = "ens1f1np9"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := se.WaitPFs(ctx, time.Hour)
	var he HostErrors
	if !errors.As(err, &he) || len(he) != 1 {
		t.Fatalf("a misspelt PF beside its NIC's other port: want one HostError at once, got %v", err)
	}
	for _, want := range []string{`groups[0].pfs[1]: "ens1f1np9"`, "did you mean ens1f1np1?", "will not appear"} {
		if !strings.Contains(he[0].Error(), want) {
			t.Errorf("the error lacks %q: %v", want, he[0])
		}
	}
	if _, err := se.Preflight(ctx); err == nil || !strings.Contains(err.Error(), `groups[0].pfs[1]: "ens1f1np9" not usable`) || !strings.Contains(err.Error(), "did you mean ens1f1np1?") {
		t.Errorf("preflight (plan) does not name the nearest port: %v", err)
	}

	var we *PFWaitError
	se.Boot = true
	if err := se.WaitPFs(ctx, 50*time.Millisecond); !errors.As(err, &we) {
		t.Errorf("at boot: want the wait's end (*PFWaitError), got %v", err)
	}
	se.Boot = false
	se.g.PFs[0] = "ens1f0np9"
	if err := se.WaitPFs(ctx, 50*time.Millisecond); !errors.As(err, &we) {
		t.Errorf("no PF of the group there (the driver may still probe): want the wait's end (*PFWaitError), got %v", err)
	}
}
