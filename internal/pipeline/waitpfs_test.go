package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
)

func TestWaitPFs(t *testing.T) {
	se := newStepEnv(t, nil)
	se.Poll = 10 * time.Millisecond
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
