package teardown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flock locks belong to the open file description, so two AcquireLock
// calls in one process contend like two processes.
func TestLockContention(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "nested")
	l1, err := AcquireLock(dir)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state dir: %v %v", st, err)
	}
	path := filepath.Join(dir, "lock")
	if l1.Path() != path {
		t.Errorf("path %s", l1.Path())
	}
	var owner lockOwner
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &owner); err != nil || owner.PID != os.Getpid() || time.Since(owner.Started) > time.Minute {
		t.Errorf("lock file %q: %+v %v", data, owner, err)
	}

	start := time.Now()
	l2, err := AcquireLock(dir)
	if err == nil {
		_ = l2.Release()
		t.Fatal("second lock succeeded")
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("contention took %v, want fail-fast", el)
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("error does not wrap ErrLocked: %v", err)
	}
	if owner.Command != ownCommand() || !strings.HasPrefix(owner.Command, filepath.Base(os.Args[0])) {
		t.Errorf("lock file command %q, want %q", owner.Command, ownCommand())
	}
	want := fmt.Sprintf("another vflag is running (pid %d, %q, started %s); lock %s",
		os.Getpid(), ownCommand(), owner.Started.UTC().Format(time.RFC3339), path)
	if err.Error() != want {
		t.Errorf("error:\n got %q\nwant %q", err, want)
	}

	if err := l1.Release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := l1.Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	l3, err := AcquireLock(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	defer l3.Release()
	// A holder that has not written its owner yet.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "holder unknown") || !strings.Contains(err.Error(), path) {
		t.Errorf("contention with an empty lock file: %v", err)
	}
}

func TestLockErrors(t *testing.T) {
	if _, err := AcquireLock(""); err == nil {
		t.Error("AcquireLock(\"\") succeeded")
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireLock(f); err == nil || errors.Is(err, ErrLocked) {
		t.Errorf("AcquireLock on a file: %v", err)
	}
}

// TestWaitLock: a second run waits for the holder (told once, with who
// holds it) and proceeds when the holder releases; with the bound passed it
// fails with ErrLocked, the holder and the time waited; a cancelled context
// ends the wait.
func TestWaitLock(t *testing.T) {
	dir := t.TempDir()
	l1, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	l2, err := WaitLock(context.Background(), dir, time.Hour, func(holder string) {
		told = append(told, holder)
		// The holder finishes while the second run waits.
		go func() {
			time.Sleep(3 * lockPoll)
			_ = l1.Release()
		}()
	})
	if err != nil {
		t.Fatalf("wait for a released lock: %v", err)
	}
	if len(told) != 1 || !strings.Contains(told[0], fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("waiting told %q, want once with pid %d", told, os.Getpid())
	}

	_, err = WaitLock(context.Background(), dir, 2*lockPoll, nil)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "waited") || !strings.Contains(err.Error(), "--lock-wait") {
		t.Errorf("bound passed: %v", err)
	}
	_, err = WaitLock(context.Background(), dir, 0, nil)
	if !errors.Is(err, ErrLocked) || strings.Contains(err.Error(), "waited") {
		t.Errorf("bound 0: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WaitLock(ctx, dir, time.Hour, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if err := l2.Release(); err != nil {
		t.Fatal(err)
	}
}
