package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestNFPMSources: every file the package takes from the repository exists
// (build/ is made by make package), and the scripts are executable.
func TestNFPMSources(t *testing.T) {
	data, err := os.ReadFile("nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Contents []struct{ Src, Dst string }
		Scripts  map[string]string
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	dsts := map[string]bool{}
	for _, c := range cfg.Contents {
		dsts[c.Dst] = true
		if c.Src == "" || strings.HasPrefix(c.Src, "build/") {
			continue
		}
		// A glob (docs/*.md) must match at least one file.
		if m, err := filepath.Glob(filepath.Join("..", c.Src)); err != nil || len(m) == 0 {
			t.Errorf("nfpm.yaml: %s -> %s: no such file (%v)", c.Src, c.Dst, err)
		}
	}
	for _, want := range []string{"/usr/bin/vflag", "/usr/bin/vflag-hook", "/usr/lib/systemd/system/vflag-pre.service", "/usr/lib/systemd/system/vflag.service",
		"/etc/libvirt/hooks/qemu.d/vflag", "/usr/share/doc/vflag/examples/vflag.yaml", "/usr/share/man/man1/", "/usr/share/man/man5/",
		"/usr/share/doc/vflag/README.md", "/usr/share/doc/vflag/docs/",
		"/usr/share/bash-completion/completions/vflag", "/usr/share/zsh/vendor-completions/_vflag", "/usr/share/fish/vendor_completions.d/vflag.fish"} {
		if !dsts[want] {
			t.Errorf("nfpm.yaml does not install %s", want)
		}
	}
	for _, s := range cfg.Scripts {
		fi, err := os.Stat(filepath.Join("..", s))
		if err != nil {
			t.Errorf("script %s: %v", s, err)
		} else if fi.Mode()&0o111 == 0 {
			t.Errorf("script %s is not executable (mode %v)", s, fi.Mode())
		}
	}
}

func TestRender(t *testing.T) {
	for _, u := range Units {
		b, err := Render("systemd/"+u, Paths{Binary: "/opt/vflag/bin/vflag", Config: "/srv/vflag.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.Contains(s, Marker) || !strings.Contains(s, "ExecStart=/opt/vflag/bin/vflag --config /srv/vflag.yaml up") ||
			!strings.Contains(s, "ConditionPathExists=/srv/vflag.yaml") || strings.Contains(s, Binary) {
			t.Errorf("%s rendered:\n%s", u, s)
		}
	}
	b, err := Render("libvirt/qemu-hook", Paths{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "bin=/usr/bin/vflag\n[ -x /usr/bin/vflag-hook ] && bin=/usr/bin/vflag-hook\n"+
		"exec \"$bin\" --config /etc/vflag/vflag.yaml --state-dir /var/lib/vflag hook qemu -- \"$@\"") {
		t.Errorf("hook:\n%s", b)
	}
}

// TestHookScripts runs the rendered hook scripts as libvirt does, with fake
// binaries: vflag-hook next to vflag runs the hook, else vflag does; the
// arguments and stdin pass through; neither binary: exit 0, silent.
func TestHookScripts(t *testing.T) {
	for _, c := range []struct {
		script, sub string
		bins        []string // fake binaries present
		want        string   // the binary that runs ("" none)
	}{
		{"libvirt/qemu-hook", "qemu", []string{"vflag", "vflag-hook"}, "vflag-hook"},
		{"libvirt/qemu-hook", "qemu", []string{"vflag"}, "vflag"},
		{"libvirt/qemu-hook", "qemu", nil, ""},
		{"libvirt/network-hook", "network", []string{"vflag", "vflag-hook"}, "vflag-hook"},
		{"libvirt/network-hook", "network", []string{"vflag"}, "vflag"},
	} {
		t.Run(c.script+"/"+strings.Join(c.bins, "+"), func(t *testing.T) {
			dir := t.TempDir()
			for _, b := range c.bins {
				fake := "#!/bin/sh\necho \"" + b + " $*\"\ncat\n"
				if err := os.WriteFile(filepath.Join(dir, b), []byte(fake), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			data, err := Render(c.script, Paths{Binary: filepath.Join(dir, "vflag"), Config: "/c.yaml", StateDir: "/st"})
			if err != nil {
				t.Fatal(err)
			}
			script := filepath.Join(dir, "hook")
			if err := os.WriteFile(script, data, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(script, "vm1", "prepare", "begin", "-")
			cmd.Stdin = strings.NewReader("<domain/>")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			want := ""
			if c.want != "" {
				want = c.want + " --config /c.yaml --state-dir /st hook " + c.sub + " -- vm1 prepare begin -\n<domain/>"
			}
			if string(out) != want {
				t.Errorf("got %q, want %q", out, want)
			}
		})
	}
}
