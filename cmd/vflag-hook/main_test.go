package main

import (
	"bytes"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoLibvirtC: built as make builds it (tag vflag_nolibvirt, no cgo),
// vflag-hook's package graph holds no libvirt.org/go/libvirt and the binary
// is static: an import that brings libvirt's C library back into the hook
// path (libvirtx's cgo files, a package using the binding) fails here.
func TestNoLibvirtC(t *testing.T) {
	// go test puts its own GOROOT/bin first on the test's PATH (Go 1.19 on),
	// so this is the toolchain that builds the test, go on PATH or not.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go that runs this test is not on its PATH: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-tags", "vflag_nolibvirt", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "libvirt.org/go/libvirt" {
			t.Errorf("vflag-hook imports %s (go list -deps -tags vflag_nolibvirt ./cmd/vflag-hook)", p)
		}
	}
	bin := filepath.Join(t.TempDir(), "vflag-hook")
	build := exec.Command(goBin, "build", "-tags", "vflag_nolibvirt", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build -tags vflag_nolibvirt: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("vflag-hook needs shared libraries %v, want none", libs)
	}
	var stdout bytes.Buffer
	run := exec.Command(bin, "--version")
	run.Stdout = &stdout
	if err := run.Run(); err != nil || !strings.HasPrefix(stdout.String(), "vflag-hook ") {
		t.Errorf("vflag-hook --version: %v %q", err, stdout.String())
	}
}
