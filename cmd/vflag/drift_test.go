package main

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/status"
	"github.com/vflag/vflag/internal/validate"
)

// driftSeen is what plan, status and validate say of one host and config:
// the step ids plan would change, the drift/<id> problems of status (by
// group, with the groups status calls not up) and the failed drift/<id>
// checks of validate.
type driftSeen struct {
	plan, status, validate   []string
	notUp                    []string
	statusCode, validateCode int
}

// seeDrift runs plan, status and validate on the bed as it stands.
func (b *bed) seeDrift() driftSeen {
	b.t.Helper()
	var s driftSeen
	planOut := b.mustVflagAny(0, 2)("plan", "-o", "json", "--detailed-exit-codes")
	s.plan = changedIDs(b.t, planOut)
	out, errs, code := b.vflag("status", "-o", "json")
	if code != 0 && code != exitProblems && code != exitNotUp {
		b.t.Fatalf("status: exit %d\n%s\n%s", code, out, errs)
	}
	s.statusCode = code
	var hs status.HostStatus
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		b.t.Fatal(err)
	}
	for _, g := range hs.Groups {
		if g.NotUp {
			s.notUp = append(s.notUp, g.Name)
		}
		for _, p := range g.Problems {
			if id, ok := strings.CutPrefix(p, "drift/"); ok {
				id, _, _ = strings.Cut(id, ": ")
				s.status = append(s.status, id)
			}
		}
	}
	out, errs, code = b.vflag("validate", "-o", "json")
	if code != 0 && code != 1 {
		b.t.Fatalf("validate: exit %d\n%s\n%s", code, out, errs)
	}
	var rep validate.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		b.t.Fatal(err)
	}
	for n := range checksBy(rep, validate.Fail) {
		if id, ok := strings.CutPrefix(n, "drift/"); ok {
			s.validate = append(s.validate, id)
		}
	}
	s.validateCode = code
	for _, l := range []*[]string{&s.plan, &s.status, &s.validate} {
		sort.Strings(*l)
		*l = slices.Compact(*l)
	}
	return s
}

// TestDriftPlanStatusValidateAgree is the property of drift: on a host
// converged to one config, whatever plan would change (a config of the
// convergence table in its place, every kind of change the table has; or
// an object changed by hand) is a problem of status that names it (exit
// 4) and a failed check of validate, and what plan would not change is
// neither. A group up never brought up reads "not up" (exit 5).
func TestDriftPlanStatusValidateAgree(t *testing.T) {
	d := startDaemons(t)
	d.virt.DefineDomain(t, "vm2")
	b := newBed(t, d, "")
	base := baseVariant()
	b.useConfig(base.config(d))
	b.initSim()
	upReport(t, b)
	t.Cleanup(func() { b.mustVflag(0, "down") })
	assertDriftAgrees(t, "converged", b.seeDrift())

	// Every config of the convergence table in place of the base: each
	// kind of change up makes, as drift of the host from that config.
	for _, x := range variants()[1:] {
		b.useConfig(x.config(d))
		s := b.seeDrift()
		if len(s.plan) == 0 {
			t.Errorf("%s: plan changes nothing from the base", x.name)
		}
		var notUp []string
		if x.group2 {
			notUp = []string{"lag1"} // its one problem, its changes not one by one
		}
		assertDriftAgrees(t, x.name, s, notUp...)
		t.Logf("%s: %d change(s)", x.name, len(s.plan))
	}
	b.useConfig(base.config(d))

	// Changes by hand of what plan compares: each seen by all three, then
	// repaired by up.
	port := func() string {
		for _, p := range strings.Fields(b.ovs.MustVsctl("list-ports", "br-lag")) {
			if p != "bond0" && strings.TrimSpace(b.ovs.MustVsctl("get", "Port", p, "tag")) == "100" {
				return p
			}
		}
		t.Fatal("no port with tag 100 in br-lag")
		return ""
	}()
	untagged := func() string {
		for _, p := range strings.Fields(b.ovs.MustVsctl("list-ports", "br-lag")) {
			if p != "bond0" && strings.TrimSpace(b.ovs.MustVsctl("get", "Port", p, "tag")) == "[]" {
				return p
			}
		}
		t.Fatal("no untagged port in br-lag")
		return ""
	}()
	for _, h := range []struct {
		name string
		args []string
	}{
		{"tag", []string{"set", "Port", port, "tag=999"}},
		{"trunks", []string{"set", "Port", port, "trunks=10,20"}},
		{"vlan_mode", []string{"set", "Port", port, "vlan_mode=native-untagged"}},
		{"untagged port tagged", []string{"set", "Port", untagged, "tag=42"}},
		{"mtu_request", []string{"set", "Interface", port, "mtu_request=1400"}},
	} {
		b.ovs.MustVsctl(h.args...)
		s := b.seeDrift()
		if len(s.plan) == 0 {
			t.Errorf("%s by hand (%s): plan changes nothing", h.name, strings.Join(h.args, " "))
		}
		assertDriftAgrees(t, h.name+" by hand", s)
		if rep := upReport(t, b); rep.Error != "" {
			t.Fatalf("%s: up: %s", h.name, rep.Error)
		}
		assertDriftAgrees(t, h.name+" repaired", b.seeDrift())
	}
}

// assertDriftAgrees fails t unless plan, status and validate say the same
// of s: nothing (exit 0 each) when plan changes nothing; else validate
// fails exactly plan's steps and status names them (exit 4), or calls the
// notUp groups not up (exit 5).
func assertDriftAgrees(t *testing.T, name string, s driftSeen, notUp ...string) {
	t.Helper()
	if len(s.plan) == 0 {
		if s.statusCode != 0 || s.validateCode != 0 || len(s.status)+len(s.validate) > 0 {
			t.Errorf("%s: plan changes nothing; status exit %d names %v, validate exit %d fails %v", name, s.statusCode, s.status, s.validateCode, s.validate)
		}
		return
	}
	if s.validateCode != 1 {
		t.Errorf("%s: plan changes %v; validate exit %d", name, s.plan, s.validateCode)
	}
	if !slices.Equal(s.notUp, notUp) {
		t.Errorf("%s: status calls %v not up, want %v", name, s.notUp, notUp)
	}
	if len(notUp) > 0 {
		if s.statusCode != exitNotUp {
			t.Errorf("%s: status exit %d, want %d (not up)", name, s.statusCode, exitNotUp)
		}
	} else if s.statusCode != exitProblems || !slices.Equal(s.plan, s.status) {
		t.Errorf("%s: plan changes %v; status exit %d names %v", name, s.plan, s.statusCode, s.status)
	}
	if !slices.Equal(s.plan, s.validate) {
		t.Errorf("%s: plan changes %v; validate fails %v", name, s.plan, s.validate)
	}
}

// TestSimhostExampleDrift walks the simulated host's example as README
// has a newcomer do it: converged, each port of it changed by hand (the
// access VF's tag, the trunk VF's trunks and mode, an MTU) is seen by
// plan, status (exit 4) and validate (exit 1) alike, and up repairs it.
func TestSimhostExampleDrift(t *testing.T) {
	d := poolDaemons(t)
	text, _ := simulatedExample(t, d, mustReadFile(t, "../../examples/vflag-simhost.yaml"))
	b := newBed(t, d, "")
	b.useConfig(text)
	b.initSim()
	if rep := upReport(t, b); rep.Error != "" {
		t.Fatalf("up: %s", rep.Error)
	}
	t.Cleanup(func() { b.mustVflag(0, "down") })
	assertDriftAgrees(t, "converged", b.seeDrift())
	portWith := func(col, val string) string {
		t.Helper()
		for _, p := range strings.Fields(b.ovs.MustVsctl("list-ports", "br-lag")) {
			if p != "bond0" && strings.TrimSpace(b.ovs.MustVsctl("get", "Port", p, col)) == val {
				return p
			}
		}
		t.Fatalf("no port of br-lag with %s %s:\n%s", col, val, b.ovs.MustVsctl("list", "Port"))
		return ""
	}
	access, trunk := portWith("tag", "100"), portWith("trunks", "[100, 200]")
	if got := strings.TrimSpace(b.ovs.MustVsctl("get", "Port", trunk, "vlan_mode")); got != "trunk" {
		t.Fatalf("the trunk VF's port %s has vlan_mode %s", trunk, got)
	}
	for _, h := range []struct {
		name string
		args []string
	}{
		{"access VF retagged", []string{"set", "Port", access, "tag=999"}},
		{"trunk VF given a VLAN more", []string{"set", "Port", trunk, "trunks=100,200,300"}},
		{"trunk VF made access", []string{"set", "Port", trunk, "vlan_mode=access", "tag=100"}},
		{"trunk VF's MTU", []string{"set", "Interface", trunk, "mtu_request=1400"}},
	} {
		b.ovs.MustVsctl(h.args...)
		s := b.seeDrift()
		if len(s.plan) == 0 {
			t.Errorf("%s (%s): plan changes nothing", h.name, strings.Join(h.args, " "))
		}
		assertDriftAgrees(t, h.name, s)
		if rep := upReport(t, b); rep.Error != "" {
			t.Fatalf("%s: up: %s", h.name, rep.Error)
		}
		assertDriftAgrees(t, h.name+" repaired", b.seeDrift())
	}
}

// TestStatusNotUp: on a clean host, before up and after down, each group
// reads as not up in one problem line ("not up: run vflag up"), not its
// differences from the config one by one, and status exits exitNotUp,
// apart from a host that drifted (exitProblems); after up, nothing.
func TestStatusNotUp(t *testing.T) {
	d := startDaemons(t)
	x := baseVariant()
	x.group2 = true
	b := newBed(t, d, "")
	b.useConfig(x.config(d))
	notUp := func(when string) {
		t.Helper()
		out, _, code := b.vflag("status")
		if code != exitNotUp {
			t.Errorf("%s: status exit %d, want %d", when, code, exitNotUp)
		}
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  problem: ") {
				lines = append(lines, l)
			}
		}
		want := "  problem: not up: run vflag up (the group was never brought up, or was brought down; vflag plan shows what up does)"
		if len(lines) != 2 || lines[0] != want || lines[1] != want {
			t.Errorf("%s: problem lines %q, want one per group: %q", when, lines, want)
		}
	}
	notUp("before up")
	upReport(t, b)
	b.mustVflag(0, "status")
	b.mustVflag(0, "down")
	notUp("after down")
}
