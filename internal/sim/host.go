package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/crashpoint"
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

	// mmu guards the mirror (mirror.go): a full sync holds it throughout, a
	// delta only to take its turn (syncMirror); it is taken before mu, and
	// an update syncs the mirror holding mmu alone.
	mmu   sync.Mutex
	mu    sync.Mutex
	lock  *os.File // flock(2) serialises processes
	st    *state
	stamp fileStamp
	// file is the state file h.st was last read from or written to, kept
	// open: an fstat of it tells whether it is still the saved state (a
	// save renames a new file over it, leaving it no link), which costs a
	// read less than a stat of the path.
	file   *os.File
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

func stampOf(st *syscall.Stat_t) fileStamp {
	return fileStamp{Ino: st.Ino, Size: st.Size, MTime: st.Mtim.Nano()}
}

// fstat is the stamp of an open file, and whether the file still has a
// name (Nlink > 0).
func fstat(f *os.File) (fileStamp, bool, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fileStamp{}, false, err
	}
	return stampOf(&st), st.Nlink > 0, nil
}

// keepFile makes f the state file h.st came from.
func (h *Host) keepFile(f *os.File) {
	if h.file != nil && h.file != f {
		_ = h.file.Close()
	}
	h.file = f
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
			h.keepFile(nil)
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
// this Host last read or wrote it: the file it read or wrote then lost its
// name to a rename, or was changed in place.
func (h *Host) reload() error {
	if h.st != nil && h.file != nil {
		if stamp, linked, err := fstat(h.file); err == nil && linked && stamp == h.stamp {
			return nil
		}
	}
	f, err := os.Open(h.statePath())
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	stamp, _, err := fstat(f)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(f)
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("sim: %s: %w", h.statePath(), err)
	}
	st := new(state)
	if err := json.Unmarshal(data, st); err != nil {
		_ = f.Close()
		return fmt.Errorf("sim: %s: %w", h.statePath(), err)
	}
	if st.Version != stateVersion {
		_ = f.Close()
		return fmt.Errorf("sim: %s: state version %d, want %d", h.statePath(), st.Version, stateVersion)
	}
	st.fixup()
	h.st = st
	h.keepFile(f)
	// Stat again: the stamp must describe the bytes we read; a change in
	// place meanwhile only makes the next call read once more.
	if stamp2, _, err := fstat(f); err == nil && stamp2 == stamp {
		h.stamp = stamp
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
	if werr == nil {
		werr = os.Rename(tmp.Name(), h.statePath())
	}
	if werr != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		h.stamp = fileStamp{}
		return fmt.Errorf("sim: save state: %w", werr)
	}
	// The file written is the state file now: keep it open (reload's
	// fstat), with its stamp.
	h.keepFile(tmp)
	if stamp, _, err := fstat(tmp); err == nil {
		h.stamp = stamp
	} else {
		h.stamp = fileStamp{}
	}
	return nil
}

var errClosed = errors.New("sim: host is closed")

// view runs fn on the current state without changing it. It takes no
// flock: every save replaces the state file by a rename, so the file
// always holds one whole saved state, and reading it without the lock is
// reading it just before or just after a writer's lock (reload checks the
// file's stamp after reading). That saves a read two of its three system
// calls (the stat that tells whether the file changed stays).
func (h *Host) view(fn func(st *state, now int64) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("%w: %w", errClosed, syscall.EBADF)
	}
	err := h.reload()
	if err == nil {
		h.st.viewing = true
		err = fn(h.st, h.now().UnixNano())
		h.st.viewing = false
	}
	return err
}

// update runs fn on the current state and saves it when fn reports a change
// (even together with an error: failures may log to dmesg). When fn fails
// without a change, the in-memory state is dropped so that a half-applied
// change can never be seen.
func (h *Host) update(fn func(st *state, now int64) (changed bool, err error)) error {
	what := ""
	if crashpoint.Armed() {
		what = "kernel: " + callerName()
	}
	return h.updateAs(what, fn)
}

// callerName names the Host method that called update ("AddBond").
func callerName() string {
	pc, _, _, ok := runtime.Caller(2)
	if !ok {
		return "?"
	}
	name := runtime.FuncForPC(pc).Name()
	return name[strings.LastIndex(name, ".")+1:]
}

// updateAs is update, naming the write what for crashpoint.
func (h *Host) updateAs(what string, fn func(st *state, now int64) (changed bool, err error)) error {
	crashpoint.Begin() // the state and its mirror land whole
	changed, err := h.updateMirrored(fn)
	crashpoint.End()
	if changed {
		crashpoint.Wrote(what)
	}
	return err
}

// updateMirrored is updateAs without the crash point: changed tells
// whether the state was saved.
func (h *Host) updateMirrored(fn func(st *state, now int64) (changed bool, err error)) (bool, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false, fmt.Errorf("%w: %w", errClosed, syscall.EBADF)
	}
	if err := h.flock(syscall.LOCK_EX); err != nil {
		h.mu.Unlock()
		return false, err
	}
	err := h.reload()
	if err != nil {
		h.funlock()
		h.mu.Unlock()
		return false, err
	}
	h.st.pciIdx = nil // fn may change what it indexes
	changed, ferr := fn(h.st, h.now().UnixNano())
	if changed {
		if serr := h.save(); serr != nil && ferr == nil {
			ferr = serr
		}
	} else if ferr != nil {
		h.st, h.stamp = nil, fileStamp{}
	}
	h.funlock()
	mirror := changed && h.mirror != nil
	h.mu.Unlock()
	if mirror {
		if merr := h.syncMirror(); merr != nil && ferr == nil {
			ferr = merr
		}
	}
	return changed, ferr
}

// FS returns the host's /sys as seen by vflag, with the /proc and /dev/vfio
// of its simulated processes (vfio.go).
func (h *Host) FS() sysfs.FS { return hostFS{h} }

// Close releases the host. The state stays in its directory (and mirrored
// veths stay in their namespace) for the next Open.
func (h *Host) Close() error {
	h.mmu.Lock()
	defer h.mmu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.mirror != nil {
		h.mirror.close()
	}
	h.keepFile(nil)
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
