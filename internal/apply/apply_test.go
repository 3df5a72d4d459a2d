package apply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/teardown"
)

// simEnv is an env on a fresh simulated host of the example config.
func simEnv(t *testing.T) (*pipeline.Env, *config.Config) {
	t.Helper()
	text, err := os.ReadFile("../../examples/vflag-sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(host.Options{SimDir: filepath.Join(t.TempDir(), "sim"), SimSpec: cfg.Sim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return pipeline.New(cfg, h, nil), cfg
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	if _, err := Lock(t.Context(), Options{StateDir: dir, LockWait: -time.Second}); err == nil || err.Error() != "--lock-wait: -1s is negative" {
		t.Errorf("negative bound: %v", err)
	}
	release, err := Lock(t.Context(), Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(t.Context(), Options{StateDir: dir}); !errors.Is(err, teardown.ErrLocked) {
		t.Errorf("second lock: %v, want ErrLocked", err)
	}
	release()
	again, err := Lock(t.Context(), Options{StateDir: dir, LockWait: time.Second})
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
	if n, err := Recorded(dir); n != 0 || err != nil {
		t.Errorf("Recorded of an empty state dir: %d, %v", n, err)
	}
}

// TestDownOrder: down takes the lock first (a held lock leaves the gate
// alone), then closes the boot gate, and only then reads the journal (a
// corrupt journal fails down with the gate already closed).
func TestDownOrder(t *testing.T) {
	e, _ := simEnv(t)
	dir := t.TempDir()
	gate := bootgate.New(dir)
	if err := gate.MarkReady(); err != nil {
		t.Fatal(err)
	}
	ready := func() bool {
		t.Helper()
		ok, err := gate.Ready()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	release, err := Lock(t.Context(), Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res := Down(t.Context(), e, false, Options{StateDir: dir}); res.Ran || !errors.Is(res.Err, teardown.ErrLocked) {
		t.Fatalf("down under another's lock: ran %v, err %v", res.Ran, res.Err)
	}
	if !ready() {
		t.Fatal("down closed the gate without the lock")
	}
	release()
	if err := os.WriteFile(filepath.Join(dir, "journal.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := Down(t.Context(), e, false, Options{StateDir: dir})
	if res.Ran || res.Err == nil || !strings.Contains(res.Err.Error(), "journal") {
		t.Fatalf("down on a corrupt journal: ran %v, err %v", res.Ran, res.Err)
	}
	if ready() {
		t.Error("down read the journal before closing the gate")
	}
}

// TestDownEmpty: down on an empty journal runs, undoes nothing, and calls
// the hooks around its (no) steps.
func TestDownEmpty(t *testing.T) {
	e, _ := simEnv(t)
	var calls []string
	o := Options{StateDir: t.TempDir(), BeforeSteps: func() { calls = append(calls, "before") }, AfterSteps: func() { calls = append(calls, "after") }}
	res := Down(t.Context(), e, true, o)
	if !res.Ran || res.Err != nil || len(res.Events) != 0 {
		t.Fatalf("down: ran %v err %v events %v", res.Ran, res.Err, res.Events)
	}
	if strings.Join(calls, " ") != "before after" {
		t.Errorf("hooks: %v", calls)
	}
}

// TestPlanTakesNoLock: plan reads only and runs under another vflag's lock.
func TestPlanTakesNoLock(t *testing.T) {
	e, _ := simEnv(t)
	dir := t.TempDir()
	release, err := Lock(t.Context(), Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res := Up(ctx, e, 0, Options{StateDir: dir, DryRun: true})
	if errors.Is(res.Err, teardown.ErrLocked) {
		t.Fatalf("plan waited for the lock: %v", res.Err)
	}
}
