package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/install"
	"github.com/vflag/vflag/internal/testbed"
)

// simCLI runs vflag against a fresh simulated host (the example config)
// without daemons: enough for install, udev-rules and stage pre.
type simCLI struct {
	t                  *testing.T
	config, sim, state string
}

func newSimCLI(t *testing.T) *simCLI {
	dir := t.TempDir()
	c := &simCLI{t: t, config: filepath.Join(dir, "vflag.yaml"), sim: filepath.Join(dir, "sim"), state: filepath.Join(dir, "state")}
	if err := os.WriteFile(c.config, []byte(exampleConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *simCLI) run(want int, args ...string) string {
	c.t.Helper()
	var out, errb bytes.Buffer
	all := append([]string{"--config", c.config, "--sim", c.sim, "--state-dir", c.state}, args...)
	if code := run(context.Background(), all, &out, &errb); code != want {
		c.t.Fatalf("vflag %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out.String(), errb.String())
	}
	return out.String() + errb.String()
}

// tree is every file, directory and link under root with mode and content.
func tree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			lines = append(lines, rel+" -> "+target)
		case fi.IsDir():
			lines = append(lines, rel+"/ "+fi.Mode().String())
		default:
			data, _ := os.ReadFile(p)
			lines = append(lines, rel+" "+fi.Mode().String()+"\n"+string(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestInstallIdempotentAndUninstall(t *testing.T) {
	c := newSimCLI(t)
	root := t.TempDir()
	foreign := filepath.Join(root, "etc/libvirt/hooks/qemu")
	os.MkdirAll(filepath.Dir(foreign), 0o755)
	os.WriteFile(foreign, []byte("#!/bin/sh\n# the site's own hook\nexit 0\n"), 0o755)
	baseline := tree(t, root)

	out := c.run(0, "install", "--root", root, "--binary", "/usr/bin/vflag")
	first := tree(t, root)
	for _, want := range []string{
		"installed /etc/systemd/system/vflag-pre.service",
		"installed /etc/systemd/system/multi-user.target.wants/vflag.service -> /etc/systemd/system/vflag.service",
		"installed /etc/udev/rules.d/70-vflag.rules",
		"installed /etc/libvirt/hooks/qemu.d/vflag",
		"note: /etc/libvirt/hooks/qemu is not vflag's and stays",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		"ExecStart=/usr/bin/vflag --config " + c.config + " up --stage pre",
		"ExecStart=/usr/bin/vflag --config " + c.config + " up\n",
		"Before=network-pre.target openvswitch-switch.service",
		"Before=network-online.target libvirt-guests.service",
		"etc/udev/rules.d/69-vflag-nm-unmanaged.rules -rw-r--r--",
		`KERNELS=="0000:61:00.1", ENV{NM_UNMANAGED}="1"`,
		`KERNEL=="bond0", ENV{NM_UNMANAGED}="1"`,
		"bin=/usr/bin/vflag\n[ -x /usr/bin/vflag-hook ] && bin=/usr/bin/vflag-hook\n",
		"exec \"$bin\" --config " + c.config + " --state-dir " + c.state + " hook qemu -- \"$@\"",
		`KERNELS=="0000:61:00.0", ATTR{phys_port_name}!="pf*vf*", NAME="ens1f0np0"`,
		`KERNELS=="0000:61:00.1", ATTR{phys_port_name}!="pf*vf*", NAME="ens1f1np1"`,
		`KERNELS=="0000:61:00.0", ATTR{phys_port_name}=="pf0vf3", NAME="ens1f0np0_3"`,
		`KERNELS=="0000:61:00.1", ATTR{phys_port_name}=="pf1vf0", NAME="ens1f1np1_0"`,
		"etc/libvirt/hooks/qemu.d/vflag -rwxr-xr-x",
		"#!/bin/sh\n# the site's own hook",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("installed tree lacks %q:\n%s", want, first)
		}
	}

	out = c.run(0, "install", "--root", root, "--binary", "/usr/bin/vflag")
	if strings.Contains(out, "installed") {
		t.Errorf("second install wrote files:\n%s", out)
	}
	if second := tree(t, root); second != first {
		t.Fatalf("second install changed the tree:\n%s", testbed.DiffText(first, second))
	}
	c.run(0, "install-hook", "--root", root, "--binary", "/usr/bin/vflag")
	if again := tree(t, root); again != first {
		t.Fatalf("install-hook after install changed the tree:\n%s", testbed.DiffText(first, again))
	}

	out = c.run(0, "uninstall", "--root", root)
	if !strings.Contains(out, "removed /etc/libvirt/hooks/qemu.d/vflag") || !strings.Contains(out, "removed /etc/udev/rules.d/69-vflag-nm-unmanaged.rules") {
		t.Errorf("uninstall output:\n%s", out)
	}
	c.run(0, "uninstall", "--root", root)
	// Directories install created stay (they may hold others' files); the files go.
	var left []string
	for _, l := range strings.Split(tree(t, root), "\n") {
		if !strings.HasSuffix(l, " drwxr-xr-x") {
			left = append(left, l)
		}
	}
	var want []string
	for _, l := range strings.Split(baseline, "\n") {
		if !strings.HasSuffix(l, " drwxr-xr-x") {
			want = append(want, l)
		}
	}
	if strings.Join(left, "\n") != strings.Join(want, "\n") {
		t.Fatalf("uninstall left:\n%s\nwant:\n%s", strings.Join(left, "\n"), strings.Join(want, "\n"))
	}
}

func TestInstallHookNeverReplacesForeignFiles(t *testing.T) {
	c := newSimCLI(t)
	root := t.TempDir()
	p := filepath.Join(root, install.HookPath)
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("#!/bin/sh\n# someone else's vflag hook\n"), 0o755)
	before := tree(t, root)
	out := c.run(1, "install-hook", "--root", root, "--binary", "/usr/bin/vflag")
	if !strings.Contains(out, "was not written by vflag: left alone") {
		t.Errorf("output:\n%s", out)
	}
	c.run(0, "uninstall", "--root", root)
	if after := tree(t, root); after != before {
		t.Fatalf("foreign hook touched:\n%s", testbed.DiffText(before, after))
	}
}

// TestHookScript runs the installed hook script as libvirt does, with a fake
// vflag binary: it passes the arguments and stdin through, and a missing
// binary never blocks a domain.
func TestHookScript(t *testing.T) {
	c := newSimCLI(t)
	root := t.TempDir()
	bin := filepath.Join(t.TempDir(), "vflag")
	got := filepath.Join(t.TempDir(), "got")
	os.WriteFile(bin, []byte("#!/bin/sh\necho \"$@\" > "+got+"\ncat >> "+got+"\n"), 0o755)
	c.run(0, "install-hook", "--root", root, "--binary", bin)
	script := filepath.Join(root, install.HookPath)
	cmd := exec.Command(script, "vm1", "prepare", "begin", "-")
	cmd.Stdin = strings.NewReader("<domain/>")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hook script: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(got)
	want := "--config " + c.config + " --state-dir " + c.state + " hook qemu -- vm1 prepare begin -\n<domain/>"
	if string(data) != want {
		t.Fatalf("fake vflag got %q, want %q", data, want)
	}
	os.Remove(bin)
	if out, err := exec.Command(script, "vm1", "prepare", "begin", "-").CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("hook script without vflag: %v %q, want exit 0 and no output", err, out)
	}
}

// TestInstallHookBinaryNote: install-hook says when the scripts will run
// vflag itself, there being no vflag-hook next to the binary they name
// (under --root).
func TestInstallHookBinaryNote(t *testing.T) {
	c := newSimCLI(t)
	root := t.TempDir()
	const note = "note: no /opt/v/vflag-hook (make build and the packages have it): the hooks run /opt/v/vflag"
	if out := c.run(0, "install-hook", "--root", root, "--binary", "/opt/v/vflag"); !strings.Contains(out, note) {
		t.Errorf("without vflag-hook: output lacks %q:\n%s", note, out)
	}
	if err := os.MkdirAll(filepath.Join(root, "opt/v"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "opt/v/vflag-hook"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out := c.run(0, "install-hook", "--root", root, "--binary", "/opt/v/vflag"); strings.Contains(out, "note: no") {
		t.Errorf("with vflag-hook: output has the note:\n%s", out)
	}
}
