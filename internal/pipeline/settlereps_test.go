package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sysfs"
)

// udevFS is the simulated host's files plus a udev database
// (/run/udev/data) kept in a directory: the simulator keeps none.
type udevFS struct {
	sysfs.FS
	dir string // "": no udev database at all
}

func (f udevFS) local(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/run/udev/data")
	if !ok || f.dir == "" {
		return "", false
	}
	return filepath.Join(f.dir, rest), true
}

func (f udevFS) ReadFile(path string) ([]byte, error) {
	if p, ok := f.local(path); ok {
		return os.ReadFile(p)
	}
	if strings.HasPrefix(path, "/run/udev/") {
		return nil, os.ErrNotExist
	}
	return f.FS.ReadFile(path)
}

func (f udevFS) ReadDir(path string) ([]string, error) {
	if p, ok := f.local(path); ok {
		es, err := os.ReadDir(p)
		names := make([]string, len(es))
		for i, e := range es {
			names[i] = e.Name()
		}
		return names, err
	}
	if strings.HasPrefix(path, "/run/udev/") {
		return nil, os.ErrNotExist
	}
	return f.FS.ReadDir(path)
}

// TestSettleRepsWaitsForUdev: after the representors appear, up waits until
// udev has processed each (its /run/udev/data/n<ifindex>) before it names
// them anywhere (udev's rules may rename them an instant later), and goes on
// at once where udev keeps no database.
func TestSettleRepsWaitsForUdev(t *testing.T) {
	se := newStepEnv(t, nil)
	toSwitchdev(t, se)
	pf := se.pfs[0]
	n := se.g.NumVFs
	reps, err := eswitch.RepresentorsOf(se.k, se.fs, pf, n)
	if err != nil || len(reps) != n {
		t.Fatalf("representors of %s: %v, %v", pf.Netdev, reps, err)
	}
	se.Poll = 10 * time.Millisecond

	simFS := se.fs
	se.fs = udevFS{FS: simFS}
	t0 := time.Now()
	if got := se.settleReps(context.Background(), pf, n, reps); len(got) != n {
		t.Errorf("without a udev database: %v", got)
	}
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Errorf("without a udev database it waited %v, want no wait", d)
	}

	db := t.TempDir()
	se.fs = udevFS{FS: simFS, dir: db}
	const late = 300 * time.Millisecond
	go func() {
		time.Sleep(late)
		for _, name := range reps {
			l, err := se.k.Link(name)
			if err != nil {
				continue
			}
			_ = os.WriteFile(filepath.Join(db, fmt.Sprintf("n%d", l.Index)), []byte("I:1\n"), 0o600)
		}
	}()
	t0 = time.Now()
	got := se.settleReps(context.Background(), pf, n, reps)
	d := time.Since(t0)
	if d < late || d > repsSettleBound/2 {
		t.Errorf("settleReps returned after %v, want once udev processed every representor (%v)", d, late)
	}
	if len(got) != n {
		t.Errorf("representors after settling: %v, want %d", got, n)
	}
}
