// Package install is vflag's host integration: the files `vflag install`,
// `install-hook` and `uninstall` write or remove under a root (boot units,
// the libvirt qemu hook, the udev naming rules), and the udev naming itself
// (the rules generated from the config and the host, and the <pf>_<vf>
// name of a representor). Installs are idempotent (a file already as
// wanted is not rewritten) and never touch a file vflag did not write (it
// carries packaging.Marker): a foreign /etc/libvirt/hooks/qemu stays, the
// hook goes to qemu.d/ next to it (libvirt >= 6.5 runs both).
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vflag/vflag/internal/atomicfile"
	"github.com/vflag/vflag/packaging"
)

// Installed paths, relative to the root.
const (
	HookPath      = "etc/libvirt/hooks/qemu.d/vflag"
	NetHookPath   = "etc/libvirt/hooks/network.d/vflag"
	LegacyHook    = "etc/libvirt/hooks/qemu"
	UnitDir       = "etc/systemd/system"
	UnitWantsDir  = "etc/systemd/system/multi-user.target.wants"
	UdevRulesPath = "etc/udev/rules.d/70-vflag.rules"
)

// File is one file vflag installs.
type File struct {
	Path string // relative to the root
	Mode fs.FileMode
	Data []byte
	// Link, when set, makes the file a symlink to Link (Data unused).
	Link string
}

// HookFile is the libvirt qemu hook running the binary of p.
func HookFile(p packaging.Paths) (File, error) {
	data, err := packaging.Render("libvirt/qemu-hook", p)
	return File{Path: HookPath, Mode: 0o755, Data: data}, err
}

// NetworkHookFile is the libvirt network hook running the binary of p.
func NetworkHookFile(p packaging.Paths) (File, error) {
	data, err := packaging.Render("libvirt/network-hook", p)
	return File{Path: NetHookPath, Mode: 0o755, Data: data}, err
}

// UnitFiles are the boot units and their enabling links.
func UnitFiles(p packaging.Paths) ([]File, error) {
	var out []File
	for _, u := range packaging.Units {
		data, err := packaging.Render("systemd/"+u, p)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: filepath.Join(UnitDir, u), Mode: 0o644, Data: data},
			// What `systemctl enable` makes (WantedBy=multi-user.target).
			File{Path: filepath.Join(UnitWantsDir, u), Link: "/" + filepath.Join(UnitDir, u)})
	}
	return out, nil
}

// ForeignLegacyHook tells whether root has an /etc/libvirt/hooks/qemu that
// vflag did not write (it stays; libvirt runs it before qemu.d/).
func ForeignLegacyHook(root string) bool {
	data, err := os.ReadFile(filepath.Join(root, LegacyHook))
	return err == nil && !bytes.Contains(data, []byte(packaging.Marker))
}

// Files writes files under root, skipping those already as wanted, and
// refuses to replace a file vflag did not write. It says what it did on w.
func Files(root string, files []File, w io.Writer) error {
	if root == "" {
		root = "/"
	}
	for _, f := range files {
		full := filepath.Join(root, f.Path)
		show := "/" + f.Path
		if f.Link != "" {
			cur, err := os.Readlink(full)
			if err == nil && cur == f.Link {
				fmt.Fprintf(w, "unchanged %s\n", show)
				continue
			}
			if _, lerr := os.Lstat(full); lerr == nil {
				return fmt.Errorf("%s exists and is not vflag's link to %s: left alone", show, f.Link)
			}
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(f.Link, full); err != nil {
				return err
			}
			fmt.Fprintf(w, "installed %s -> %s\n", show, f.Link)
			continue
		}
		cur, err := os.ReadFile(full)
		switch {
		case err == nil && bytes.Equal(cur, f.Data):
			if fi, err := os.Stat(full); err == nil && fi.Mode().Perm() == f.Mode {
				fmt.Fprintf(w, "unchanged %s\n", show)
				continue
			}
		case err == nil && !bytes.Contains(cur, []byte(packaging.Marker)):
			return fmt.Errorf("%s exists and was not written by vflag: left alone", show)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if err := atomicfile.WriteFile(full, f.Data, f.Mode); err != nil {
			return fmt.Errorf("install %s: %w", show, err)
		}
		fmt.Fprintf(w, "installed %s\n", show)
	}
	return nil
}

// Uninstall removes from under root what Files installed (units, their
// links, the udev naming and NetworkManager rules, the hook), only files vflag wrote. It says what
// it did on w.
func Uninstall(root string, w io.Writer) error {
	var paths []string
	for _, u := range packaging.Units {
		paths = append(paths, filepath.Join(UnitWantsDir, u), filepath.Join(UnitDir, u))
	}
	paths = append(paths, UdevRulesPath, NMRulesPath, HookPath, NetHookPath)
	for _, p := range paths {
		full := filepath.Join(root, p)
		fi, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(full)
			if target != "/"+filepath.Join(UnitDir, filepath.Base(p)) {
				fmt.Fprintf(w, "left %s (links to %s, not vflag's)\n", "/"+p, target)
				continue
			}
		} else if data, err := os.ReadFile(full); err != nil {
			return err
		} else if !bytes.Contains(data, []byte(packaging.Marker)) {
			fmt.Fprintf(w, "left %s (not written by vflag)\n", "/"+p)
			continue
		}
		if err := os.Remove(full); err != nil {
			return err
		}
		fmt.Fprintf(w, "removed %s\n", "/"+p)
	}
	return nil
}
