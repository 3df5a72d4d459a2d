package sriov_test

import (
	"testing"

	"github.com/vflag/vflag/sriov"
)

// PredictVF follows the routing-ID rule: rid(pf) + sriov_offset + i *
// sriov_stride, across a device and a bus boundary; no answer without
// the PF's offset and stride.
func TestPredictVF(t *testing.T) {
	x := newFixture(t)
	pf := func(addr, off, stride string) sriov.Addr {
		x.file("/sys/bus/pci/devices/"+addr+"/sriov_offset", off+"\n")
		x.file("/sys/bus/pci/devices/"+addr+"/sriov_stride", stride+"\n")
		return sriov.Addr(addr)
	}
	cx := pf("0000:61:00.0", "2", "1")
	cx1 := pf("0000:61:00.1", "9", "1")
	wide := pf("0000:3b:00.0", "256", "2")
	h := sriov.Host{FS: x.fs()}
	for _, c := range []struct {
		pf    sriov.Addr
		index int
		want  sriov.Addr
		ok    bool
	}{
		{cx, 0, "0000:61:00.2", true},
		{cx, 5, "0000:61:00.7", true},
		{cx, 6, "0000:61:01.0", true},
		{cx1, 0, "0000:61:01.2", true},
		{wide, 1, "0000:3c:00.2", true},
		{cx, -1, "", false},
		{"0000:62:00.0", 0, "", false},
	} {
		got, ok := h.PredictVF(c.pf, c.index)
		if got != c.want || ok != c.ok {
			t.Errorf("PredictVF(%s, %d) = %s, %v; want %s, %v", c.pf, c.index, got, ok, c.want, c.ok)
		}
	}
}
