package main

// Host integration: `vflag install-hook`, `vflag install`, `vflag uninstall`
// and `vflag udev-rules`. Every path is under --root (default /), so tests
// install into a temp dir. Installs are idempotent (a file already as
// wanted is not rewritten) and never touch a file vflag did not write (it
// carries packaging.Marker): a foreign /etc/libvirt/hooks/qemu stays, the
// hook goes to qemu.d/ next to it (libvirt >= 6.5 runs both).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/atomicfile"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/packaging"
)

// Installed paths, relative to --root.
const (
	hookPath      = "etc/libvirt/hooks/qemu.d/vflag"
	legacyHook    = "etc/libvirt/hooks/qemu"
	unitDir       = "etc/systemd/system"
	unitWantsDir  = "etc/systemd/system/multi-user.target.wants"
	udevRulesPath = "etc/udev/rules.d/70-vflag.rules"
)

// installFile is one file vflag installs.
type installFile struct {
	Path string // relative to the root
	Mode fs.FileMode
	Data []byte
	// Link, when set, makes the file a symlink to Link (Data unused).
	Link string
}

func rootFlag(cmd *cobra.Command) {
	cmd.Flags().String("root", "/", "install under this directory instead of / (packaging, tests)")
	cmd.Flags().String("binary", "", "path of the vflag binary the hook and units run (default: this executable)")
}

// paths are the paths the installed files name: this binary, the config
// and state directory of this invocation.
func (a *app) paths(cmd *cobra.Command) (packaging.Paths, error) {
	bin, _ := cmd.Flags().GetString("binary")
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return packaging.Paths{}, fmt.Errorf("find this executable (set --binary): %w", err)
		}
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		bin = exe
	}
	if !filepath.IsAbs(bin) {
		return packaging.Paths{}, fmt.Errorf("--binary %q: want an absolute path", bin)
	}
	cfg, _ := filepath.Abs(a.v.GetString("config"))
	state, _ := filepath.Abs(a.stateDir())
	return packaging.Paths{Binary: bin, Config: cfg, StateDir: state}, nil
}

func (a *app) hookFile(p packaging.Paths) (installFile, error) {
	data, err := packaging.Render("libvirt/qemu-hook", p)
	return installFile{Path: hookPath, Mode: 0o755, Data: data}, err
}

func (a *app) unitFiles(p packaging.Paths) ([]installFile, error) {
	var out []installFile
	for _, u := range packaging.Units {
		data, err := packaging.Render("systemd/"+u, p)
		if err != nil {
			return nil, err
		}
		out = append(out, installFile{Path: filepath.Join(unitDir, u), Mode: 0o644, Data: data},
			// What `systemctl enable` makes (WantedBy=multi-user.target).
			installFile{Path: filepath.Join(unitWantsDir, u), Link: "/" + filepath.Join(unitDir, u)})
	}
	return out, nil
}

func (a *app) installHookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install-hook",
		Short: "Install the libvirt qemu hook as /etc/libvirt/hooks/qemu.d/vflag (idempotent; a foreign hooks/qemu is left alone)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.paths(cmd)
			if err != nil {
				return err
			}
			f, err := a.hookFile(p)
			if err != nil {
				return err
			}
			root, _ := cmd.Flags().GetString("root")
			if err := a.installFiles(root, []installFile{f}); err != nil {
				return err
			}
			a.hookNotes(root)
			return nil
		},
	}
	rootFlag(cmd)
	return cmd
}

func (a *app) hookNotes(root string) {
	if data, err := os.ReadFile(filepath.Join(root, legacyHook)); err == nil && !bytes.Contains(data, []byte(packaging.Marker)) {
		fmt.Fprintf(a.stdout, "note: %s is not vflag's and stays; libvirt runs it, then the scripts in qemu.d/\n", "/"+legacyHook)
	}
	fmt.Fprintln(a.stdout, "libvirt looks for hooks when it starts: restart libvirtd (or virtqemud) once to enable the hook")
}

func (a *app) installCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the boot units (vflag-pre.service, vflag.service, enabled), the udev naming rules and the libvirt hook (idempotent)",
		Long: `Writes, under --root:
  /etc/systemd/system/vflag-pre.service   oneshot before network-pre.target and OVS: vflag up --stage pre
  /etc/systemd/system/vflag.service       oneshot after network-online, OVS and libvirtd, before libvirt-guests: vflag up
  /etc/systemd/system/multi-user.target.wants/*   (enabled, as systemctl enable does)
  /etc/udev/rules.d/70-vflag.rules        PF names pinned by PCI address; representors named <pf>_<vf>
  /etc/libvirt/hooks/qemu.d/vflag         the qemu hook
The udev rules come from the config and the host as they are now (see vflag udev-rules).
A file already as wanted is left untouched; files vflag did not write are never replaced.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.paths(cmd)
			if err != nil {
				return err
			}
			files, err := a.unitFiles(p)
			if err != nil {
				return err
			}
			hook, err := a.hookFile(p)
			if err != nil {
				return err
			}
			files = append(files, hook)
			if noUdev, _ := cmd.Flags().GetBool("no-udev"); !noUdev {
				rules, err := a.udevRules()
				if err != nil {
					return fmt.Errorf("udev rules: %w (--no-udev skips them)", err)
				}
				files = append(files, installFile{Path: udevRulesPath, Mode: 0o644, Data: rules})
			}
			root, _ := cmd.Flags().GetString("root")
			if err := a.installFiles(root, files); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "next: systemctl daemon-reload; udevadm control --reload (names apply from the next boot or re-trigger)")
			a.hookNotes(root)
			return nil
		},
	}
	rootFlag(cmd)
	cmd.Flags().Bool("no-udev", false, "do not write the udev naming rules")
	return cmd
}

func (a *app) uninstallCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what install and install-hook wrote (only files vflag wrote; host state is vflag down's job)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, _ := cmd.Flags().GetString("root")
			var paths []string
			for _, u := range packaging.Units {
				paths = append(paths, filepath.Join(unitWantsDir, u), filepath.Join(unitDir, u))
			}
			paths = append(paths, udevRulesPath, hookPath)
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
					if target != "/"+filepath.Join(unitDir, filepath.Base(p)) {
						fmt.Fprintf(a.stdout, "left %s (links to %s, not vflag's)\n", "/"+p, target)
						continue
					}
				} else if data, err := os.ReadFile(full); err != nil {
					return err
				} else if !bytes.Contains(data, []byte(packaging.Marker)) {
					fmt.Fprintf(a.stdout, "left %s (not written by vflag)\n", "/"+p)
					continue
				}
				if err := os.Remove(full); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "removed %s\n", "/"+p)
			}
			return nil
		},
	}
	cmd.Flags().String("root", "/", "uninstall from under this directory instead of /")
	return cmd
}

func (a *app) udevRulesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "udev-rules",
		Short: "Print the udev rules that pin the config's PF names and name representors <pf>_<vf>",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules, err := a.udevRules()
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(rules)
			return err
		},
	}
}

// installFiles writes files under root, skipping those already as wanted,
// and refuses to replace a file vflag did not write.
func (a *app) installFiles(root string, files []installFile) error {
	if root == "" {
		root = "/"
	}
	for _, f := range files {
		full := filepath.Join(root, f.Path)
		show := "/" + f.Path
		if f.Link != "" {
			cur, err := os.Readlink(full)
			if err == nil && cur == f.Link {
				fmt.Fprintf(a.stdout, "unchanged %s\n", show)
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
			fmt.Fprintf(a.stdout, "installed %s -> %s\n", show, f.Link)
			continue
		}
		cur, err := os.ReadFile(full)
		switch {
		case err == nil && bytes.Equal(cur, f.Data):
			if fi, err := os.Stat(full); err == nil && fi.Mode().Perm() == f.Mode {
				fmt.Fprintf(a.stdout, "unchanged %s\n", show)
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
		fmt.Fprintf(a.stdout, "installed %s\n", show)
	}
	return nil
}

// udevRules generates the naming rules from the config and the host:
//   - each PF keeps its current name, pinned by PCI address (switchdev adds a
//     phys_port_name, which changes predictable names such as ens1f0 ->
//     ens1f0np0 at the next boot);
//   - each representor of a VF-owning PF is named <pf>_<vf>, matched by its
//     parent device (the PF) and phys_port_name pf<p>vf<n>; the PF's name
//     makes it unique across NICs. Names longer than 15 characters (the
//     kernel's limit) are left to the kernel, with a comment.
//
// vflag itself never finds representors by name (DESIGN.md step 9): the
// names are for operators and monitoring.
func (a *app) udevRules() ([]byte, error) {
	cfg, err := a.loadConfig(false)
	if err != nil {
		return nil, err
	}
	k, f, closeHost, err := a.host(cfg)
	if err != nil {
		return nil, err
	}
	defer closeHost()
	var b strings.Builder
	fmt.Fprintf(&b, "# %s Generated by `vflag udev-rules` from %s; `vflag install` rewrites it.\n", packaging.Marker, a.v.GetString("config"))
	b.WriteString("# PF names pinned by PCI address; VF representors named <pf>_<vf>.\n")
	for _, g := range cfg.Groups {
		var pfs []eswitch.PF
		for i, ref := range g.PFs {
			pf, err := eswitch.ResolvePF(k, f, ref)
			if err != nil {
				return nil, fmt.Errorf("group %s pfs[%d] %s: %w", g.Name, i, ref, err)
			}
			pfs = append(pfs, pf)
		}
		fmt.Fprintf(&b, "\n# group %s\n", g.Name)
		writeUdevGroup(&b, pfs, g.NumVFs, g.Switchdev())
	}
	return []byte(b.String()), nil
}

// writeUdevGroup writes one group's rules (pure: tested on its own).
func writeUdevGroup(w io.Writer, pfs []eswitch.PF, numvfs int, switchdev bool) {
	for _, pf := range pfs {
		if pf.Addr == "" {
			fmt.Fprintf(w, "# %s: not a PCI function (%s), name not pinned\n", pf.Netdev, pf.Dev)
			continue
		}
		fmt.Fprintf(w, "SUBSYSTEM==\"net\", ACTION==\"add\", KERNELS==\"%s\", ATTR{phys_port_name}!=\"pf*vf*\", NAME=\"%s\"\n", pf.Addr, pf.Netdev)
	}
	if !switchdev {
		return
	}
	for _, i := range pipeline.Owners(pfs) {
		pf := pfs[i]
		parent := string(pf.Addr)
		if parent == "" {
			parent = pf.Devlink.Device
		}
		for vf := 0; vf < numvfs; vf++ {
			name := fmt.Sprintf("%s_%d", pf.Netdev, vf)
			rule := fmt.Sprintf("SUBSYSTEM==\"net\", ACTION==\"add\", KERNELS==\"%s\", ATTR{phys_port_name}==\"pf%dvf%d\", NAME=\"%s\"\n", parent, pf.PfNumber, vf, name)
			if eswitch.ValidIfName(name) != nil {
				fmt.Fprintf(w, "# %s is longer than 15 characters: the kernel's name stays\n# %s", name, rule)
				continue
			}
			io.WriteString(w, rule)
		}
	}
}
