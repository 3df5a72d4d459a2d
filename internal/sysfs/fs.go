// Package sysfs gives vflag's view of the kernel's pseudo-filesystems
// (/sys, /proc, debugfs, configfs) as a value, never a global.
//
// Paths are absolute kernel paths ("/sys/class/net/p0/address"). The real
// implementation, Dir, prefixes them with a root directory; the simulated
// host (internal/sim) answers them from its model. Errors are *fs.PathError
// wrapping a syscall.Errno, so callers test them with errors.Is(err,
// syscall.EBUSY) or errors.Is(err, fs.ErrNotExist) whatever the backend.
package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// FS is the subset of file operations vflag performs on kernel files.
type FS interface {
	// ReadFile returns a file's whole content ("cat $path").
	ReadFile(path string) ([]byte, error)
	// WriteFile writes data in one write(2) to an existing file ("echo -n $data > $path").
	WriteFile(path string, data []byte) error
	// ReadDir returns the names in a directory, sorted ("ls $path").
	ReadDir(path string) ([]string, error)
	// Readlink returns a symlink's target ("readlink $path").
	Readlink(path string) (string, error)
}

// Dir is the real kernel filesystem rooted at a directory: "/" on a host,
// a fixture tree in tests.
type Dir string

func (d Dir) real(path string) string { return filepath.Join(string(d), path) }

// ReadFile implements FS.
func (d Dir) ReadFile(path string) ([]byte, error) { return os.ReadFile(d.real(path)) }

// WriteFile implements FS. The file must exist: kernel attributes are never created.
func (d Dir) WriteFile(path string, data []byte) error {
	f, err := os.OpenFile(d.real(path), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

// ReadDir implements FS.
func (d Dir) ReadDir(path string) ([]string, error) {
	entries, err := os.ReadDir(d.real(path))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// Readlink implements FS.
func (d Dir) Readlink(path string) (string, error) { return os.Readlink(d.real(path)) }

// ReadString reads a file and trims the trailing newline and spaces.
func ReadString(f FS, path string) (string, error) {
	b, err := f.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Exists tells whether path exists (a file, directory or link).
func Exists(f FS, path string) bool {
	if _, err := f.Readlink(path); err == nil {
		return true
	}
	if _, err := f.ReadDir(path); err == nil {
		return true
	}
	_, err := f.ReadFile(path)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}
