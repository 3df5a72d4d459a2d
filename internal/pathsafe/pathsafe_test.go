package pathsafe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestComponent(t *testing.T) {
	for _, tc := range []struct {
		name, want, err string
	}{
		{name: "vm1", want: "vm1"},
		{name: "web_01.prod-a", want: "web_01.prod-a"},
		{name: "vm:1@x", want: "vm:1@x"}, // url.PathEscape kept these: same path as before
		{name: "..", want: "%2E."},
		{name: ".", want: "%2E"},
		{name: ".hidden", want: "%2Ehidden"},
		{name: "a..b", want: "a..b"},
		{name: "../x", want: "%2E.%2Fx"},
		{name: "a/b", want: "a%2Fb"},
		{name: "nul\x00x", want: "nul%00x"},
		{name: "new\nline", want: "new%0Aline"},
		{name: "100%", want: "100%25"},
		{name: "sp ace", want: "sp%20ace"},
		{name: "", err: "empty name"},
		{name: strings.Repeat("a", 300), err: "name of 300 bytes is too long"},
		{name: strings.Repeat("a", MaxComponent), want: strings.Repeat("a", MaxComponent)},
		{name: strings.Repeat("/", MaxComponent/3+1), err: "too long"},
	} {
		got, err := Component(tc.name)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Component(%q) = %q, %v; want error %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Component(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
			continue
		}
		if back, ok := Decode(got); !ok || back != tc.name {
			t.Errorf("Decode(%q) = %q, %v; want %q", got, back, ok, tc.name)
		}
	}
}

func TestDecodeRefusesWhatComponentDoesNotMake(t *testing.T) {
	for _, s := range []string{"", ".", "..", ".x.tmp-123", "%61", "a%2", "a%zz", "a/b", "%2e%2e", "x y"} {
		if name, ok := Decode(s); ok {
			t.Errorf("Decode(%q) = %q, true; want refused", s, name)
		}
	}
}

func TestJoinStaysInDir(t *testing.T) {
	for _, name := range []string{"..", ".", "../x", "a/b", "../../etc/passwd", "/abs"} {
		p, err := Join("/var/lib/vflag/hook", "domain", name)
		if err != nil {
			t.Fatalf("Join(%q): %v", name, err)
		}
		if filepath.Dir(p) != "/var/lib/vflag/hook" {
			t.Errorf("Join(%q) = %s: left its directory", name, p)
		}
	}
	if _, err := Join("/d", "domain", strings.Repeat("x", 300)); err == nil || !strings.Contains(err.Error(), `domain "xxx`) {
		t.Errorf("long name: err %v, want it to name the domain", err)
	}
}

// FuzzComponent: whatever the name, an accepted component is one path
// element that stays in its directory, and Decode gives the name back.
func FuzzComponent(f *testing.F) {
	for _, s := range []string{"vm1", "..", ".", "../x", "a/b", "\x00", "x\ny", "%2E", strings.Repeat("é", 80), "-config=/tmp/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c, err := Component(name)
		if err != nil {
			if name != "" && len(name) <= MaxComponent/3 {
				t.Fatalf("Component(%q) refused a short name: %v", name, err)
			}
			return
		}
		if c == "" || c == "." || c == ".." || strings.HasPrefix(c, ".") || len(c) > MaxComponent {
			t.Fatalf("Component(%q) = %q", name, c)
		}
		if strings.ContainsAny(c, "/\x00") || !utf8.ValidString(c) {
			t.Fatalf("Component(%q) = %q: not a plain path element", name, c)
		}
		for _, r := range c {
			if r < 0x21 || r > 0x7e {
				t.Fatalf("Component(%q) = %q: byte %q is not printable ASCII", name, c, r)
			}
		}
		dir := "/state/hook"
		if p := filepath.Join(dir, c); filepath.Dir(p) != dir || filepath.Base(p) != c {
			t.Fatalf("Component(%q) = %q leaves %s: %s", name, c, dir, p)
		}
		back, ok := Decode(c)
		if !ok || back != name {
			t.Fatalf("Decode(Component(%q)) = %q, %v", name, back, ok)
		}
	})
}

func mkdir(t *testing.T, path string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Lchown(path, uid, -1); err != nil {
			t.Fatalf("chown %s (the test needs root): %v", path, err)
		}
	}
}

const nobody = 65534

func TestCheckDir(t *testing.T) {
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(base, "ok"), 0o700, -1)
	mkdir(t, filepath.Join(base, "world"), 0o777, -1)
	mkdir(t, filepath.Join(base, "world", "in"), 0o755, -1)
	mkdir(t, filepath.Join(base, "sticky"), os.ModeSticky|0o777, -1)
	mkdir(t, filepath.Join(base, "sticky", "ours"), 0o755, -1)
	mkdir(t, filepath.Join(base, "sticky", "theirs"), 0o755, nobody)
	mkdir(t, filepath.Join(base, "foreign"), 0o755, nobody)
	if err := os.Symlink(filepath.Join(base, "ok"), filepath.Join(base, "link-ours")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(base, "sticky", "planted")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(base, "sticky", "planted"), nobody, -1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, err string }{
		{dir: "ok"},
		{dir: "ok/not-yet/deeper"},
		{dir: "link-ours"},
		{dir: "link-ours/hook"},
		{dir: "sticky/ours"},
		{dir: "sticky/not-yet"}, // only a pre-check: EnsureDir checks again
		{dir: "world", err: "world is writable by users other than root (mode 0777)"},
		{dir: "world/in", err: "world is writable by users other than root"},
		{dir: "sticky", err: "sticky is writable by users other than root (mode 1777)"},
		{dir: "sticky/theirs", err: "theirs is owned by uid 65534, not root"},
		{dir: "sticky/planted/x", err: "planted is owned by uid 65534"},
		{dir: "foreign/x", err: "foreign is owned by uid 65534"},
	} {
		err := CheckDir(filepath.Join(base, tc.dir))
		if tc.err == "" && err != nil {
			t.Errorf("CheckDir(%s): %v", tc.dir, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckDir(%s) = %v, want %q", tc.dir, err, tc.err)
		}
	}
	// A directory created in a sticky one by someone else before us is
	// caught by EnsureDir's second look.
	if err := EnsureDir(filepath.Join(base, "sticky", "theirs", "hook"), 0o700); err == nil {
		t.Error("EnsureDir under another user's directory: no error")
	}
	if err := EnsureDir(filepath.Join(base, "sticky", "mine", "hook"), 0o700); err != nil {
		t.Errorf("EnsureDir(sticky/mine/hook): %v", err)
	}
}
