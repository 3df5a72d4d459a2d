package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
)

const (
	stateFile    = "host.json"
	lockFile     = "host.lock"
	stateVersion = 1
)

// Host is a simulated machine with mlx5 NICs. Its state lives in a
// directory, so several processes (or several Host values) opened on the same
// directory see one host. It is safe for concurrent use.
type Host struct {
	dir string

	mu     sync.Mutex
	lock   *os.File // flock(2) serialises processes
	st     *state
	stamp  fileStamp
	closed bool

	now   func() time.Time
	sleep func(time.Duration)

	mirror *mirror
}

var _ eswitch.Kernel = (*Host)(nil)

// fileStamp identifies one saved version of the state file.
type fileStamp struct {
	Ino   uint64
	Size  int64
	MTime int64
}

func stampOf(fi os.FileInfo) fileStamp {
	s := fileStamp{Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Ino = st.Ino
	}
	return s
}

// Open opens the simulated host whose state is in dir/host.json. When dir is
// missing or holds no state, the host is created from spec (an error if spec
// is nil or has no NICs); otherwise the saved host is loaded and spec is
// ignored.
func Open(dir string, spec *Spec) (*Host, error) {
	return open(dir, spec, time.Now, time.Sleep)
}

func open(dir string, spec *Spec, now func() time.Time, sleep func(time.Duration)) (*Host, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	h := &Host{dir: dir, lock: lf, now: now, sleep: sleep}
	if err := h.flock(syscall.LOCK_EX); err != nil {
		_ = lf.Close()
		return nil, err
	}
	err = h.openLocked(spec)
	h.funlock()
	if err != nil {
		_ = lf.Close()
		return nil, err
	}
	if h.st.Spec.MirrorNetns != "" {
		h.mirror = newMirror(h.st.Spec.MirrorNetns)
		h.mu.Lock()
		err := h.syncMirrorLocked()
		h.mu.Unlock()
		if err != nil {
			h.mirror.close()
			_ = lf.Close()
			return nil, err
		}
	}
	return h, nil
}

func (h *Host) openLocked(spec *Spec) error {
	_, err := os.Stat(h.statePath())
	switch {
	case err == nil:
		return h.reload()
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sim: %w", err)
	}
	norm, err := validate(spec)
	if err != nil {
		return err
	}
	h.st = newState(norm, h.now().UnixNano())
	return h.save()
}

func (h *Host) statePath() string { return filepath.Join(h.dir, stateFile) }

func (h *Host) flock(how int) error {
	for {
		err := syscall.Flock(int(h.lock.Fd()), how)
		if err == nil {
			return nil
		}
		if err != syscall.EINTR {
			return fmt.Errorf("sim: lock %s: %w", h.dir, err)
		}
	}
}

func (h *Host) funlock() { _ = syscall.Flock(int(h.lock.Fd()), syscall.LOCK_UN) }

// reload reads the state file if another process (or Host) saved it since
// this Host last read or wrote it.
func (h *Host) reload() error {
	fi, err := os.Stat(h.statePath())
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if h.st != nil && stampOf(fi) == h.stamp {
		return nil
	}
	data, err := os.ReadFile(h.statePath())
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	st := new(state)
	if err := json.Unmarshal(data, st); err != nil {
		return fmt.Errorf("sim: %s: %w", h.statePath(), err)
	}
	if st.Version != stateVersion {
		return fmt.Errorf("sim: %s: state version %d, want %d", h.statePath(), st.Version, stateVersion)
	}
	st.fixup()
	h.st = st
	// Stat again: the stamp must describe the bytes we read; a rename in
	// between only makes the next call read once more.
	if fi2, err := os.Stat(h.statePath()); err == nil && stampOf(fi2) == stampOf(fi) {
		h.stamp = stampOf(fi)
	} else {
		h.stamp = fileStamp{}
	}
	return nil
}

// save writes the state atomically: temp file, rename. (Neither the file nor
// the directory is fsynced: readers in other processes see the rename at
// once, and a simulated host need not survive a power cut. The file is
// compact JSON: the state is rewritten on every simulated kernel write, and
// indenting it doubled the cost of each.)
func (h *Host) save() error {
	h.st.Gen++
	data, err := json.Marshal(h.st)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	tmp, err := os.CreateTemp(h.dir, ".host.json.tmp-*")
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), h.statePath())
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		h.stamp = fileStamp{}
		return fmt.Errorf("sim: save state: %w", werr)
	}
	if fi, err := os.Stat(h.statePath()); err == nil {
		h.stamp = stampOf(fi)
	} else {
		h.stamp = fileStamp{}
	}
	return nil
}

var errClosed = errors.New("sim: host is closed")

// view runs fn on the current state without changing it.
func (h *Host) view(fn func(st *state, now int64) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("%w: %w", errClosed, syscall.EBADF)
	}
	if err := h.flock(syscall.LOCK_SH); err != nil {
		return err
	}
	err := h.reload()
	if err == nil {
		err = fn(h.st, h.now().UnixNano())
	}
	h.funlock()
	return err
}

// update runs fn on the current state and saves it when fn reports a change
// (even together with an error: failures may log to dmesg). When fn fails
// without a change, the in-memory state is dropped so that a half-applied
// change can never be seen.
func (h *Host) update(fn func(st *state, now int64) (changed bool, err error)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("%w: %w", errClosed, syscall.EBADF)
	}
	if err := h.flock(syscall.LOCK_EX); err != nil {
		return err
	}
	err := h.reload()
	if err != nil {
		h.funlock()
		return err
	}
	changed, ferr := fn(h.st, h.now().UnixNano())
	if changed {
		if serr := h.save(); serr != nil && ferr == nil {
			ferr = serr
		}
	} else if ferr != nil {
		h.st, h.stamp = nil, fileStamp{}
	}
	h.funlock()
	if changed && h.mirror != nil {
		if merr := h.syncMirrorLocked(); merr != nil && ferr == nil {
			ferr = merr
		}
	}
	return ferr
}

// FS returns the host's /sys as seen by vflag.
func (h *Host) FS() sysfs.FS { return hostFS{h} }

// Close releases the host. The state stays in its directory (and mirrored
// veths stay in their namespace) for the next Open.
func (h *Host) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.mirror != nil {
		h.mirror.close()
	}
	return h.lock.Close()
}

// MirrorNetns is the network namespace the host mirrors its netdevs into
// (the saved spec's mirror_netns; "" for none).
func (h *Host) MirrorNetns() string {
	var ns string
	_ = h.view(func(st *state, _ int64) error {
		ns = st.Spec.MirrorNetns
		return nil
	})
	return ns
}
