package main

// Host integration: `vflag install-hook`, `vflag install`, `vflag uninstall`
// and `vflag udev-rules` (internal/install does the work). Every path is
// under --root (default /), so tests install into a temp dir.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/install"
	"github.com/vflag/vflag/packaging"
)

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

func (a *app) installHookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install-hook",
		Short: "Install the libvirt hooks: qemu.d/vflag and network.d/vflag under /etc/libvirt/hooks (idempotent; a foreign hooks/qemu is left alone)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.paths(cmd)
			if err != nil {
				return err
			}
			f, err := install.HookFile(p)
			if err != nil {
				return err
			}
			nf, err := install.NetworkHookFile(p)
			if err != nil {
				return err
			}
			root, _ := cmd.Flags().GetString("root")
			if err := install.Files(root, []install.File{f, nf}, a.stdout); err != nil {
				return err
			}
			a.hookNotes(root, p.Binary)
			return nil
		},
	}
	rootFlag(cmd)
	return cmd
}

func (a *app) hookNotes(root, bin string) {
	if install.ForeignLegacyHook(root) {
		fmt.Fprintf(a.stdout, "note: %s is not vflag's and stays; libvirt runs it, then the scripts in qemu.d/\n", "/"+install.LegacyHook)
	}
	// The scripts run bin-hook when it is there (packaging.HookBinary).
	if fi, err := os.Stat(filepath.Join(root, bin+"-hook")); err != nil || fi.Mode()&0o111 == 0 {
		fmt.Fprintf(a.stdout, "note: no %s-hook (make build and the packages have it): the hooks run %s, which loads libvirt's libraries at every start\n", bin, bin)
	}
	fmt.Fprintln(a.stdout, "libvirt looks for hooks when it starts: restart libvirtd (or virtqemud) once to enable the hook")
}

func (a *app) installCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the boot units (vflag-pre.service, vflag.service, enabled), the udev naming rules and the libvirt hook (idempotent)",
		Long: `Writes, under --root:
  /etc/systemd/system/vflag-pre.service   oneshot before network-pre.target and OVS: vflag up --stage pre
  /etc/systemd/system/vflag.service       oneshot after OVS and libvirtd, before network-online and libvirt-guests: vflag up
  /etc/systemd/system/multi-user.target.wants/*   (enabled, as systemctl enable does)
  /etc/udev/rules.d/70-vflag.rules        PF names pinned by PCI address; representors named <pf>_<vf>
  /etc/udev/rules.d/69-vflag-nm-unmanaged.rules   ENV{NM_UNMANAGED}="1" on the groups' PFs, representors, VFs and bonds
  /etc/libvirt/hooks/qemu.d/vflag         the qemu hook
  /etc/libvirt/hooks/network.d/vflag      the network hook (VLANs of VF pool ports on their representors)
The udev rules come from the config and the host as they are now (see vflag udev-rules).
uninstall removes them all.
A file already as wanted is left untouched; files vflag did not write are never replaced.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.paths(cmd)
			if err != nil {
				return err
			}
			files, err := install.UnitFiles(p)
			if err != nil {
				return err
			}
			hook, err := install.HookFile(p)
			if err != nil {
				return err
			}
			netHook, err := install.NetworkHookFile(p)
			if err != nil {
				return err
			}
			files = append(files, hook, netHook)
			if noUdev, _ := cmd.Flags().GetBool("no-udev"); !noUdev {
				rules, err := a.udevRules()
				if err != nil {
					return fmt.Errorf("udev rules: %w (--no-udev skips them)", err)
				}
				files = append(files, install.File{Path: install.UdevRulesPath, Mode: 0o644, Data: rules})
			}
			if noNM, _ := cmd.Flags().GetBool("no-nm"); !noNM {
				rules, err := a.nmRules()
				if err != nil {
					return fmt.Errorf("NetworkManager udev rules: %w (--no-nm skips them)", err)
				}
				files = append(files, install.File{Path: install.NMRulesPath, Mode: 0o644, Data: rules})
			}
			root, _ := cmd.Flags().GetString("root")
			if err := install.Files(root, files, a.stdout); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "next: systemctl daemon-reload; udevadm control --reload (names and NM_UNMANAGED apply from the next boot, or: udevadm trigger --subsystem-match=net --action=change)")
			a.hookNotes(root, p.Binary)
			return nil
		},
	}
	rootFlag(cmd)
	cmd.Flags().Bool("no-udev", false, "do not write the udev naming rules")
	cmd.Flags().Bool("no-nm", false, "do not write the udev rules that keep NetworkManager off vflag's interfaces")
	return cmd
}

func (a *app) uninstallCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what install and install-hook wrote (only files vflag wrote; host state is vflag down's job)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, _ := cmd.Flags().GetString("root")
			return install.Uninstall(root, a.stdout)
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

// nmRules are the NetworkManager rules for the config and the host as they are now.
func (a *app) nmRules() ([]byte, error) { return a.rules(install.NMRules) }

// udevRules are the naming rules for the config and the host as they are now.
func (a *app) udevRules() ([]byte, error) { return a.rules(install.UdevRules) }

// rules renders udev rules from the config and the host as it is now.
func (a *app) rules(render func(*config.Config, *host.Host, string) ([]byte, error)) ([]byte, error) {
	cfg, err := a.loadConfig(false)
	if err != nil {
		return nil, err
	}
	h, err := a.openHost(cfg, cfg)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return render(cfg, h, a.v.GetString("config"))
}
