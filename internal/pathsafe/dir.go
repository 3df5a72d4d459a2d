package pathsafe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks bounds the symlinks followed on the way (the kernel's is 40).
const maxLinks = 40

// CheckDir tells whether root may create and open files in dir without
// following something a user who is not root (nor the running user) could
// have planted. Every existing component of the path, symlinks included,
// must be owned by root or the running user; every directory on the way
// must not be writable by others (group writable with a group other than
// root counts) unless it has the sticky bit (then only the owner of the next
// component can replace it, and that owner is checked); dir itself, where
// files are made, must not be writable by others at all. Components that do
// not exist yet are fine for now (the sticky exemption holds for the last
// existing one): EnsureDir creates them and checks again, and only that
// second check makes the directory safe to use.
//
// The rule is OpenSSH's StrictModes (safe_path), with /tmp-like sticky
// directories allowed on the way.
func CheckDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if err := walk(abs, 0); err != nil {
		return fmt.Errorf("state directory %s is not safe for root to use: %w", dir, err)
	}
	return nil
}

// EnsureDir checks dir, creates it (mode perm, parents too) when missing,
// and checks it again: the second check is the one that counts, as nobody
// but root or the running user can change a path that passes it.
func EnsureDir(dir string, perm fs.FileMode) error {
	if err := CheckDir(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	return CheckDir(dir)
}

func walk(path string, links int) error {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	cur := "/"
	fi, err := os.Lstat(cur)
	if err != nil {
		return err
	}
	if err := trusted(cur, fi); err != nil {
		return err
	}
	for i, c := range parts {
		if c == "" {
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			// Made by EnsureDir, which checks again once it exists.
			return writableByOthers(cur, parentMode(cur), true)
		}
		if err != nil {
			return err
		}
		if err := trusted(next, fi); err != nil {
			return err
		}
		// The directory holding next must not let others replace next.
		if err := writableByOthers(cur, parentMode(cur), true); err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if links >= maxLinks {
				return fmt.Errorf("%s: too many levels of symbolic links", next)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			rest := filepath.Join(append([]string{target}, parts[i+1:]...)...)
			return walk(rest, links+1)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", next)
		}
		cur = next
	}
	// Files are made in the last directory: no sticky exemption.
	return writableByOthers(cur, parentMode(cur), false)
}

// parentMode is the mode and group of dir (a directory already checked).
func parentMode(dir string) *syscall.Stat_t {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return nil
	}
	return &st
}

// trusted: owned by root or the running user.
func trusted(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner information", path)
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not root", path, st.Uid)
	}
	return nil
}

// writableByOthers refuses a directory that someone other than root (or
// the running user) may write, unless stickyOK and it has the sticky bit.
func writableByOthers(dir string, st *syscall.Stat_t, stickyOK bool) error {
	if st == nil {
		return fmt.Errorf("%s: cannot read its mode", dir)
	}
	mode := st.Mode
	others := mode&0o002 != 0 || (mode&0o020 != 0 && st.Gid != 0)
	if !others {
		return nil
	}
	if stickyOK && mode&syscall.S_ISVTX != 0 {
		return nil
	}
	return fmt.Errorf("%s is writable by users other than root (mode %04o): a link planted there would be followed", dir, mode&0o7777)
}
