// Package atomicfile is vflag's one atomic file write: a reader, and the
// file system after a crash, sees either the old content or the new, never
// a part. It is a leaf: it imports the standard library only.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DirPerm is the mode WriteFile creates missing parent directories with
// (before the umask), as mkdir -p does.
const DirPerm fs.FileMode = 0o755

// testHookBeforeRename, when set by a test, runs after the temp file is
// written and synced and before it replaces path; its error fails the write.
var testHookBeforeRename func(tmp string) error

// WriteFile replaces path with a regular file holding data, atomically: it
// writes a temp file in path's directory (".<name>.tmp-*"), gives it perm
// (exactly: the umask does not apply), fsyncs it, renames it over path and
// fsyncs the directory. Missing parent directories are created with DirPerm
// and their creation is made durable too.
//
// When it fails before the rename, path is as it was and no temp file is
// left. A failure of the last fsync (of the directory) means the new content
// is in place but may not survive a crash. A symbolic link at path is
// replaced, not written through.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	if path == "" {
		return errors.New("atomic write: empty path")
	}
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if name == "" {
		return fmt.Errorf("atomic write %s: not a file name", path)
	}
	if err := mkdirParents(filepath.Clean(dir)); err != nil {
		return fmt.Errorf("atomic write %s: %w", path, err)
	}
	if err := replace(dir, name, path, data, perm); err != nil {
		return fmt.Errorf("atomic write %s: %w", path, err)
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("atomic write %s: written, but %w", path, err)
	}
	return nil
}

// ReplaceFile is WriteFile without the directory's fsync, for a write
// whose loss in a crash is harmless: after a crash path holds the new
// content or the old one, whole (the temp file is fsynced before the
// rename, so the rename can be lost, never the data). The next WriteFile in
// the directory makes it durable. The journal's removals use it: an entry
// that comes back after a power cut is undone again, and undo is
// repeatable. path's directory must exist.
func ReplaceFile(path string, data []byte, perm fs.FileMode) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if name == "" {
		return fmt.Errorf("atomic write %s: not a file name", path)
	}
	if err := replace(dir, name, path, data, perm); err != nil {
		return fmt.Errorf("atomic write %s: %w", path, err)
	}
	return nil
}

// replace writes the temp file and renames it over path; on error it
// removes the temp file.
func replace(dir, name, path string, data []byte, perm fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if testHookBeforeRename != nil {
		if err := testHookBeforeRename(tmp.Name()); err != nil {
			return err
		}
	}
	return os.Rename(tmp.Name(), path)
}

// mkdirParents creates dir and its missing parents (DirPerm), then fsyncs
// the directory each new one was created in.
func mkdirParents(dir string) error {
	var created []string
	for d := dir; ; {
		_, err := os.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	if len(created) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, DirPerm); err != nil {
		return err
	}
	// Each new directory's entry is made durable in its parent.
	for _, d := range created {
		if err := SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// SyncDir fsyncs the directory dir, making a creation, rename or removal of
// an entry in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, serr)
	}
	if cerr != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, cerr)
	}
	return nil
}
