package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveRecordedArchives holds the resolution to recorded `apt-cache
// show` answers (trimmed to the fields it reads): what each stage must
// resolve to, or the error it must give.
func TestResolveRecordedArchives(t *testing.T) {
	for _, tc := range []struct {
		file, stage string
		want        string   // the whole output, when it resolves
		wantErr     []string // substrings of the error, when it does not
		wantSkipped []string // substrings of the skipped plans' notes
	}{{
		// The archive on 2026-11-28: linux-kbuild-6.1 was rebuilt as
		// 6.1.192-3, the image and headers are 6.1.192-2; the headers
		// ask for kbuild (>= 6.1.192-2).
		file: "bookworm-kbuild-skew.txt", stage: "kernel",
		want: `abi 6.1.0-56-amd64
version 6.1.192-2
series 6.1
pkg linux-image-6.1.0-56-amd64 6.1.192-2
pkg linux-headers-6.1.0-56-amd64 6.1.192-2
pkg linux-headers-6.1.0-56-common 6.1.192-2
pkg linux-kbuild-6.1 6.1.192-3
pkg linux-source-6.1 6.1.192-2
`,
	}, {
		// A new ABI's image published before its headers: the ABI
		// before it is built, and the skip is said.
		file: "bookworm-new-abi-no-headers.txt", stage: "kernel",
		want: `abi 6.1.0-56-amd64
version 6.1.192-2
series 6.1
pkg linux-image-6.1.0-56-amd64 6.1.192-2
pkg linux-headers-6.1.0-56-amd64 6.1.192-2
pkg linux-headers-6.1.0-56-common 6.1.192-2
pkg linux-kbuild-6.1 6.1.192-3
pkg linux-source-6.1 6.1.192-2
`,
		wantSkipped: []string{"6.1.0-57-amd64 6.1.193-1: linux-headers-6.1.0-57-amd64: the archive offers no version at all"},
	}, {
		// Only the point release's kbuild: the security ABIs are
		// skipped, the point release's kernel (all its parts at
		// 6.1.176-1) is built.
		file: "bookworm-kbuild-old.txt", stage: "kernel",
		want: `abi 6.1.0-50-amd64
version 6.1.176-1
series 6.1
pkg linux-image-6.1.0-50-amd64 6.1.176-1
pkg linux-headers-6.1.0-50-amd64 6.1.176-1
pkg linux-headers-6.1.0-50-common 6.1.176-1
pkg linux-kbuild-6.1 6.1.176-1
pkg linux-source-6.1 6.1.176-1
`,
		wantSkipped: []string{"6.1.0-56-amd64 6.1.192-2: linux-kbuild-6.1: no version satisfies linux-kbuild-6.1 (>= 6.1.192-2), needed by linux-headers-6.1.0-56-amd64 6.1.192-2; the archive offers 6.1.176-1"},
	}, {
		file: "bookworm-one-abi-kbuild-old.txt", stage: "kernel",
		wantErr: []string{"stage kernel (", "linux-kbuild-6.1 (>= 6.1.192-2), needed by linux-headers-6.1.0-56-amd64 6.1.192-2", "the archive offers 6.1.176-1"},
	}, {
		file: "sid-today.txt", stage: "kernel-sid",
		want: `abi 7.2.13+deb14-amd64
version 7.2.13-1
series 7.2
pkg linux-image-amd64 7.2.13-1
pkg linux-image-7.2.13+deb14-amd64 7.2.13-1
pkg linux-binary-7.2.13+deb14-amd64 7.2.13-1
pkg linux-modules-7.2.13+deb14-amd64 7.2.13-1
pkg linux-base-7.2.13+deb14-amd64 7.2.13-1
pkg linux-headers-7.2.13+deb14-amd64 7.2.13-1
pkg linux-source-7.2 7.2.13-1
`,
	}, {
		// sid moved on by one ABI: nothing of the day before is asked for.
		file: "sid-next-abi.txt", stage: "kernel-sid",
		want: `abi 7.2.14+deb14-amd64
version 7.2.14-1
series 7.2
pkg linux-image-amd64 7.2.14-1
pkg linux-image-7.2.14+deb14-amd64 7.2.14-1
pkg linux-binary-7.2.14+deb14-amd64 7.2.14-1
pkg linux-modules-7.2.14+deb14-amd64 7.2.14-1
pkg linux-base-7.2.14+deb14-amd64 7.2.14-1
pkg linux-headers-7.2.14+deb14-amd64 7.2.14-1
pkg linux-source-7.2 7.2.14-1
`,
	}, {
		// A new series whose source package is not in the archive yet.
		file: "sid-source-missing.txt", stage: "kernel-sid",
		wantErr: []string{"stage kernel-sid (", "linux-source-7.3", "upstream 7.3.1", "the archive offers no version at all"},
	}} {
		t.Run(tc.file, func(t *testing.T) {
			dump, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			err = run([]string{"-stage", tc.stage}, bytes.NewReader(dump), &out, &errOut)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("resolved, want an error; output:\n%s", out.String())
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if out.String() != tc.want {
				t.Errorf("resolved to\n%s\nwant\n%s", out.String(), tc.want)
			}
			for _, s := range tc.wantSkipped {
				if !strings.Contains(errOut.String(), s) {
					t.Errorf("stderr %q does not say %q", errOut.String(), s)
				}
			}
			if tc.wantSkipped == nil && errOut.Len() > 0 {
				t.Errorf("unexpected notes: %s", errOut.String())
			}
		})
	}
}

// TestNamesGrowToAFixedPoint: build.sh asks apt-cache for the names the
// stage prints until they stop growing; on a recorded archive the second
// round adds nothing.
func TestNamesGrowToAFixedPoint(t *testing.T) {
	for _, tc := range []struct{ file, stage, first string }{
		{"sid-today.txt", "kernel-sid", "linux-image-amd64 linux-image-7.2.13+deb14-amd64 linux-binary-7.2.13+deb14-amd64 linux-modules-7.2.13+deb14-amd64 linux-base-7.2.13+deb14-amd64 linux-headers-7.2.13+deb14-amd64 linux-source-7.2"},
	} {
		dump, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		// Only the metapackage's stanza: the first round.
		meta, _, _ := strings.Cut(string(dump), "\n\n")
		var out bytes.Buffer
		if err := run([]string{"-stage", tc.stage, "-names"}, strings.NewReader(meta), &out, &out); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(out.String()), " "); got != tc.first {
			t.Errorf("names from the metapackage alone: %s, want %s", got, tc.first)
		}
		out.Reset()
		if err := run([]string{"-stage", tc.stage, "-names"}, bytes.NewReader(dump), &out, &out); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(out.String()), " "); got != tc.first {
			t.Errorf("names from the whole dump: %s, want %s (no growth)", got, tc.first)
		}
	}
}

func TestBadStageAndDump(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-stage", "rootfs"}, strings.NewReader(""), &out, &out); err == nil || !strings.Contains(err.Error(), `-stage "rootfs": not a stage`) {
		t.Errorf("unknown stage: %v", err)
	}
	if err := run([]string{"-stage", "kernel"}, strings.NewReader("Package: linux-image-6.1.0-1-amd64\nVersion: $(reboot)\n"), &out, &out); err == nil || !strings.Contains(err.Error(), "Version") {
		t.Errorf("a version that is not a Debian version: %v", err)
	}
	if err := run([]string{"-stage", "kernel"}, strings.NewReader("Package: x\nVersion: 1\nDepends: a (>= 1\n"), &out, &out); err == nil || !strings.Contains(err.Error(), "cannot read the relation") {
		t.Errorf("a broken Depends: %v", err)
	}
}
