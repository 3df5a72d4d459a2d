package packaging

import (
	"os"
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
		if _, err := os.Stat(filepath.Join("..", c.Src)); err != nil {
			t.Errorf("nfpm.yaml: %s -> %s: %v", c.Src, c.Dst, err)
		}
	}
	for _, want := range []string{"/usr/bin/vflag", "/usr/lib/systemd/system/vflag-pre.service", "/usr/lib/systemd/system/vflag.service",
		"/etc/libvirt/hooks/qemu.d/vflag", "/usr/share/doc/vflag/examples/vflag.yaml", "/usr/share/man/man1/",
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
	if !strings.Contains(string(b), "exec /usr/bin/vflag --config /etc/vflag/vflag.yaml --state-dir /var/lib/vflag hook qemu -- \"$@\"") {
		t.Errorf("hook:\n%s", b)
	}
}
