package hook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vflag/vflag/internal/pipeline"
)

// release is down of the domain's journal. Nothing journaled: nothing to do
// (and no host opened).
func release(ctx context.Context, o Options, domain, dir string) error {
	_, jErr := os.Lstat(filepath.Join(dir, "journal.json"))
	_, sErr := os.Lstat(oldStatePath(dir))
	if errors.Is(jErr, fs.ErrNotExist) && errors.Is(sErr, fs.ErrNotExist) {
		return nil
	}
	dj, err := openDomain(ctx, o, domain, dir)
	if err != nil {
		return fmt.Errorf("release of domain %s: %w", domain, err)
	}
	defer dj.close(o.Log)
	if len(dj.j.Entries()) == 0 {
		return nil
	}
	cfg, cfgErr := o.Config()
	if cfgErr != nil {
		// As down: the domain's journal alone says what to undo.
		o.Log.Warn("config not usable; the release works from the domain's journal alone", "domain", domain, "err", cfgErr)
		cfg = nil
	}
	h, err := o.Host(cfg)
	if err != nil {
		return fmt.Errorf("release of domain %s: %w", domain, err)
	}
	defer h.Close()
	e := pipeline.New(cfg, h, o.Log)
	if err := o.runner(dj.j, e).Down(ctx); err != nil {
		return fmt.Errorf("release of domain %s: %w", domain, err)
	}
	return nil
}
