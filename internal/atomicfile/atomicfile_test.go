package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// entries lists dir's names (hidden ones too: temp files start with a dot).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func onlyEntry(t *testing.T, dir, name string) {
	t.Helper()
	if got := entries(t, dir); len(got) != 1 || got[0] != name {
		t.Errorf("%s holds %q, want only %q (no temp file left)", dir, got, name)
	}
}

func checkFile(t *testing.T, path string, data []byte, perm fs.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("%s holds %q, want %q", path, got, data)
	}
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() != perm {
		t.Errorf("%s mode %v, want a regular file with %v", path, st.Mode(), perm)
	}
}

func TestWriteFileContentAndMode(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, perm := range []fs.FileMode{0o600, 0o644, 0o666, 0o755} {
		dir := t.TempDir()
		path := filepath.Join(dir, "hook.json")
		data := []byte("{\"perm\": \"" + perm.String() + "\"}\n")
		if err := WriteFile(path, data, perm); err != nil {
			t.Fatalf("WriteFile(%v): %v", perm, err)
		}
		checkFile(t, path, data, perm) // exactly perm: no umask
		onlyEntry(t, dir, "hook.json")
	}
	// Empty content is a file too.
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, "empty"), nil, 0o600)
}

func TestWriteFileOverwrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.json")
	if err := WriteFile(path, []byte("a long first version\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("v2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, []byte("v2\n"), 0o600) // no tail of the longer old content; the new mode
	onlyEntry(t, dir, "journal.json")

	// A symbolic link is replaced, its target left alone.
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("target\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkFile(t, link, []byte("new\n"), 0o644)
	checkFile(t, target, []byte("target\n"), 0o644)
}

func TestWriteFileCreatesParents(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	root := t.TempDir()
	path := filepath.Join(root, "a", "b", "f")
	if err := WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, []byte("x"), 0o600)
	for _, d := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != DirPerm {
			t.Errorf("%s mode %v, want %v", d, st.Mode().Perm(), DirPerm)
		}
	}
	// An existing directory keeps its mode.
	priv := filepath.Join(root, "private")
	if err := os.Mkdir(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(priv, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(priv); st.Mode().Perm() != 0o700 {
		t.Errorf("existing directory's mode changed to %v", st.Mode().Perm())
	}
}

func TestWriteFileFails(t *testing.T) {
	t.Run("path is a directory", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "state")
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		err := WriteFile(path, []byte("x"), 0o600)
		if err == nil {
			t.Fatal("WriteFile over a directory succeeded")
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name the path", err)
		}
		if st, serr := os.Stat(path); serr != nil || !st.IsDir() {
			t.Errorf("the directory is gone: %v", serr)
		}
		onlyEntry(t, dir, "state")
	})
	t.Run("parent is a file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "file"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(filepath.Join(dir, "file", "sub", "x"), []byte("x"), 0o600); err == nil {
			t.Fatal("WriteFile under a regular file succeeded")
		}
		checkFile(t, filepath.Join(dir, "file"), []byte("keep"), 0o644)
		onlyEntry(t, dir, "file")
	})

	t.Run("empty path", func(t *testing.T) {
		if err := WriteFile("", []byte("x"), 0o600); err == nil {
			t.Fatal("WriteFile(\"\") succeeded")
		}
	})
}

// A write that fails after the temp file is complete (here: just before
// the rename) leaves the old file whole and no temp file.
func TestWriteFileFailureKeepsOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.json")
	oldData := []byte("old content, complete\n")
	if err := WriteFile(path, oldData, 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("injected failure")
	var sawTemp bool
	testHookBeforeRename = func(tmp string) error {
		// The temp file is complete, in the same directory, with its mode.
		if filepath.Dir(tmp) != dir || !strings.HasPrefix(filepath.Base(tmp), ".journal.json.tmp-") {
			t.Errorf("temp file %s: want .journal.json.tmp-* in %s", tmp, dir)
		}
		checkFile(t, tmp, []byte("new"), 0o600)
		sawTemp = true
		return boom
	}
	defer func() { testHookBeforeRename = nil }()
	err := WriteFile(path, []byte("new"), 0o600)
	if !errors.Is(err, boom) {
		t.Fatalf("WriteFile: %v, want the injected failure", err)
	}
	if !sawTemp {
		t.Fatal("hook not called")
	}
	checkFile(t, path, oldData, 0o644)
	onlyEntry(t, dir, "journal.json")
}

// Readers racing a writer see one whole version or the other, never a
// part, never no file.
func TestWriteFileReadersSeeWholeFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	versions := [][]byte{
		bytes.Repeat([]byte("a"), 256<<10),
		bytes.Repeat([]byte("b"), 384<<10),
	}
	if err := WriteFile(path, versions[0], 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for reads := 0; ; reads++ {
				select {
				case <-stop:
					return
				default:
				}
				got, err := os.ReadFile(path)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
					errs <- fmt.Errorf("a reader saw %d bytes, neither version whole", len(got))
					return
				}
			}
		}()
	}
	for i := range 60 {
		if err := WriteFile(path, versions[i%2], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	onlyEntry(t, dir, "state.json")
}

// ReplaceFile replaces the content and mode as WriteFile does, leaves no
// temp file, keeps the old content on a failure before the rename, and
// creates no directory.
func TestReplaceFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.json")
	if err := WriteFile(path, []byte("a long first version\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFile(path, []byte("v2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, []byte("v2\n"), 0o600)
	onlyEntry(t, dir, "journal.json")

	boom := errors.New("injected failure")
	testHookBeforeRename = func(string) error { return boom }
	err := ReplaceFile(path, []byte("v3\n"), 0o600)
	testHookBeforeRename = nil
	if !errors.Is(err, boom) {
		t.Fatalf("ReplaceFile: %v, want the injected failure", err)
	}
	checkFile(t, path, []byte("v2\n"), 0o600)
	onlyEntry(t, dir, "journal.json")

	missing := filepath.Join(dir, "no", "such", "f")
	if err := ReplaceFile(missing, []byte("x"), 0o600); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReplaceFile into a missing directory: %v, want ErrNotExist", err)
	}
	if err := ReplaceFile(dir+"/", []byte("x"), 0o600); err == nil {
		t.Error("ReplaceFile of a directory path: no error")
	}
}
