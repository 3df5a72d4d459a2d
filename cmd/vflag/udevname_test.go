package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestUdevName: after up, every representor's udev name is <pf>_<vf> of its
// own PF (taken from the kernel, not from vflag's map), and non-representors
// get none.
func TestUdevName(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.initSim()
	b.upJSON(2)
	hs := b.statusJSON()
	if len(hs.Groups) == 0 || len(hs.Groups[0].VFs) != 8 {
		t.Fatalf("status: %+v", hs)
	}
	for _, vf := range hs.Groups[0].VFs {
		out, errs, code := b.vflag("udev-name", vf.Representor)
		want := vf.PF + "_" + strconv.Itoa(vf.Index)
		if code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("udev-name %s (VF %d of %s): %q exit %d %s, want %s", vf.Representor, vf.Index, vf.PF, out, code, errs, want)
		}
	}
	for _, notRep := range []string{"ens1f0np0", "bond0", "lo", "../x"} {
		if out, _, code := b.vflag("udev-name", notRep); code == 0 {
			t.Errorf("udev-name %s: %q, want a failure", notRep, out)
		}
	}
	b.mustVflag(0, "down")
}
