package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
