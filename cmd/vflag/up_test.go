package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

func TestUpStatusDownRoundTrip(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.initSim()
	base := b.dump()

	rep := b.upJSON(2)
	if !rep.Changed || rep.Error != "" {
		t.Fatalf("up: %+v", rep)
	}
	t.Logf("up made %d changes", rep.Changes)
	status := b.mustVflag(0, "status")
	t.Log(status)
	for _, want := range []string{"eswitch switchdev", "bond bond0 mode 802.3ad slaves [ens1f0np0 ens1f1np1]", "lag active", "hw-offload true", "domain vm1"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q", want)
		}
	}
	after := b.dump()
	again := b.upJSON(0)
	if again.Changed {
		t.Fatalf("second up changed: %+v", again)
	}
	if d2 := b.dump(); d2 != after {
		t.Fatalf("second up changed the host:\n%s", testbed.DiffText(after, d2))
	}
	out := b.mustVflag(0, "down")
	t.Log(out)
	if got := b.dump(); got != base {
		t.Fatalf("down did not return to baseline:\n%s", testbed.DiffText(base, got))
	}
}
