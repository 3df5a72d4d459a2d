package bootgate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vflag/vflag/internal/atomicfile"
	"github.com/vflag/vflag/internal/pathsafe"
)

// BootIDPath is where the kernel gives this boot's id.
const BootIDPath = "/proc/sys/kernel/random/boot_id"

// Gate is the readiness of one state directory.
type Gate struct {
	Dir string
	// BootID returns the current boot's id (default: BootIDPath).
	BootID func() (string, error)
}

// New is the gate of stateDir for the running kernel.
func New(stateDir string) Gate {
	return Gate{Dir: stateDir, BootID: func() (string, error) {
		b, err := os.ReadFile(BootIDPath)
		if err != nil {
			return "", fmt.Errorf("read boot id: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}}
}

func (g Gate) readyPath() string   { return filepath.Join(g.Dir, "ready") }
func (g Gate) deferredDir() string { return filepath.Join(g.Dir, "deferred") }

// deferredPath is deferred/<pathsafe.Component(domain)>: never outside
// deferred/, whatever libvirt's name.
func (g Gate) deferredPath(domain string) (string, error) {
	return pathsafe.Join(g.deferredDir(), "domain", domain)
}

// thisBoot tells whether the file at path holds the current boot id.
func (g Gate) thisBoot(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	id, err := g.BootID()
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == id, nil
}

func (g Gate) write(path string) error {
	id, err := g.BootID()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, []byte(id+"\n"), 0o644)
}

// MarkReady records that up brought the VF-LAG up in this boot (a mark of
// this boot already there is left as it is: a converged up writes nothing).
func (g Gate) MarkReady() error {
	if ok, err := g.thisBoot(g.readyPath()); err == nil && ok {
		return nil
	}
	if err := g.write(g.readyPath()); err != nil {
		return fmt.Errorf("mark %s ready: %w", g.Dir, err)
	}
	return nil
}

// Ready tells whether up brought the VF-LAG up in this boot.
func (g Gate) Ready() (bool, error) {
	ok, err := g.thisBoot(g.readyPath())
	if err != nil {
		return false, fmt.Errorf("read %s: %w", g.readyPath(), err)
	}
	return ok, nil
}

// Unready clears the mark (down).
func (g Gate) Unready() error {
	if err := os.Remove(g.readyPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Defer records that the hook refused to start domain until up is done.
func (g Gate) Defer(domain string) error {
	path, err := g.deferredPath(domain)
	if err == nil {
		// Written as root by the hook: no link planted on the way.
		err = pathsafe.EnsureDir(g.deferredDir(), 0o755)
	}
	if err == nil {
		err = g.write(path)
	}
	if err != nil {
		return fmt.Errorf("record deferred domain %s: %w", domain, err)
	}
	return nil
}

// Undefer forgets a deferral.
func (g Gate) Undefer(domain string) error {
	path, err := g.deferredPath(domain)
	if err != nil {
		return nil // never deferred: Defer refuses such a name
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Deferred lists the domains deferred in this boot, sorted; deferrals of
// earlier boots are removed.
func (g Gate) Deferred() ([]string, error) {
	ents, err := os.ReadDir(g.deferredDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name, ok := pathsafe.Decode(e.Name())
		if !ok {
			continue // not ours (atomicfile's temp files start with a dot)
		}
		path := filepath.Join(g.deferredDir(), e.Name())
		ok, err := g.thisBoot(path)
		if err != nil {
			return nil, err
		}
		if !ok {
			_ = os.Remove(path) // an earlier boot's
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// Starter starts a deferred domain if it is still autostarted and shut off
// (libvirtx.Conn.StartAutostarted).
type Starter interface {
	StartAutostarted(domain string) (bool, error)
}

// Started is what StartDeferred did with one deferred domain.
type Started struct {
	Domain  string
	Started bool  // false: running already, undefined, or no longer autostarted
	Err     error // libvirt's reason (the hook's refusal among them)
}

// ReadyAndStart marks this boot ready, then starts the domains deferred in
// it, in that order (see doc.go); each deferral is forgotten once tried.
// connect is called only when a domain was deferred.
func (g Gate) ReadyAndStart(connect func() (Starter, error)) ([]Started, error) {
	if err := g.MarkReady(); err != nil {
		return nil, err
	}
	names, err := g.Deferred()
	if err != nil || len(names) == 0 {
		return nil, err
	}
	s, err := connect()
	if err != nil {
		return nil, fmt.Errorf("start deferred domains %s: %w", strings.Join(names, ", "), err)
	}
	out := make([]Started, 0, len(names))
	for _, d := range names {
		ok, err := s.StartAutostarted(d)
		_ = g.Undefer(d)
		out = append(out, Started{Domain: d, Started: ok, Err: err})
	}
	return out, nil
}
