package teardown

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrLocked is wrapped by AcquireLock's error when another process holds
// the state directory's lock.
var ErrLocked = errors.New("another vflag is running")

const lockName = "lock"

// lockOwner is what the holder writes into the lock file.
type lockOwner struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Command string    `json:"command,omitempty"` // the holder's arguments, to say who waits for whom
}

// Lock is an exclusive flock on <stateDir>/lock, held until Release (or
// until the process exits: the kernel drops it with the file descriptor).
type Lock struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// AcquireLock creates stateDir (0700) if needed and takes an exclusive,
// non-blocking flock on stateDir/lock. When another process (or another open
// file description) holds it, it fails at once with an error wrapping
// ErrLocked that names the holder's pid and start time and the lock file.
func AcquireLock(stateDir string) (*Lock, error) {
	if stateDir == "" {
		return nil, errors.New("acquire lock: empty state directory")
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("acquire lock: create state directory: %w", err)
	}
	path := filepath.Join(stateDir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("acquire lock: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s); lock %s", ErrLocked, holder, path)
		}
		return nil, fmt.Errorf("acquire lock %s: flock: %w", path, err)
	}
	owner, err := json.Marshal(lockOwner{PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Second), Command: ownCommand()})
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		// Not fsynced: other processes read it through the page cache, and
		// after a crash the flock is gone with its holder.
		_, err = f.WriteAt(append(owner, '\n'), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("acquire lock %s: record owner: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

// lockHolder describes the lock's holder from the lock file: "pid 1234,
// started 2026-11-22T10:00:00Z". The holder writes it just after taking the
// lock, so it may not be there yet.
func lockHolder(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "holder unknown: " + err.Error()
	}
	var o lockOwner
	if err := json.Unmarshal(bytes.TrimSpace(data), &o); err != nil || o.PID == 0 {
		return "holder unknown: lock file not written yet"
	}
	if o.Command != "" {
		return fmt.Sprintf("pid %d, %q, started %s", o.PID, o.Command, o.Started.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("pid %d, started %s", o.PID, o.Started.UTC().Format(time.RFC3339))
}

// ownCommand is this process's command line, shortened: "vflag up -o json".
func ownCommand() string {
	if len(os.Args) == 0 {
		return ""
	}
	c := strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " ")
	if len(c) > 160 {
		c = c[:157] + "..."
	}
	return c
}

// lockPoll is how often WaitLock tries the lock again.
const lockPoll = 50 * time.Millisecond

// WaitLock takes the lock as AcquireLock does, waiting at most bound while
// another vflag holds it: boot units, an Ansible run, the qemu hook and an
// operator do collide, and the later one should run after the earlier
// rather than fail. waiting is called once, with the holder, when it has to
// wait. When the bound passes it fails with ErrLocked, the holder and how
// long it waited; a bound of 0 tries once. ctx cancels the wait.
func WaitLock(ctx context.Context, stateDir string, bound time.Duration, waiting func(holder string)) (*Lock, error) {
	start := time.Now()
	told := false
	for {
		l, err := AcquireLock(stateDir)
		if err == nil || !errors.Is(err, ErrLocked) {
			return l, err
		}
		waited := time.Since(start)
		if waited >= bound {
			if bound > 0 {
				return nil, fmt.Errorf("%w; waited --lock-wait %s for it", err, bound)
			}
			return nil, err
		}
		if !told && waiting != nil {
			waiting(lockHolder(filepath.Join(stateDir, lockName)))
			told = true
		}
		t := time.NewTimer(min(lockPoll, bound-waited))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for the lock of %s (%s): %w", stateDir, lockHolder(filepath.Join(stateDir, lockName)), ctx.Err())
		case <-t.C:
		}
	}
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release clears the owner from the lock file and drops the lock. It is
// safe to call more than once.
func (l *Lock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	var errs []error
	if err := f.Truncate(0); err != nil {
		errs = append(errs, fmt.Errorf("clear owner: %w", err))
	}
	if err := flock(f, syscall.LOCK_UN); err != nil {
		errs = append(errs, fmt.Errorf("unlock: %w", err))
	}
	if err := f.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release lock %s: %w", l.path, err)
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
