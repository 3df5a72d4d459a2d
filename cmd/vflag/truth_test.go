package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/status"
	"github.com/vflag/vflag/internal/validate"
)

// TestValidateAskedForIsNeverAbsent: on a legacy group (no bond, no
// bridge) --traffic and --failover cannot run: each check asked for is an
// explicit skip with the reason, and a skip fails the run unless
// --allow-skip. RDMA, which the config does not configure and the
// simulated NIC does not have, is n/a and fails nothing.
func TestValidateAskedForIsNeverAbsent(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, legacyConfig)
	b.upJSON(2)
	t.Cleanup(func() { b.mustVflag(0, "down") })

	// Nothing asked for beyond the static checks: OK, rdma/devices n/a.
	rep := b.validateJSON(0, "--group", "leg0")
	if c, ok := checksBy(rep, validate.NA)["rdma/devices"]; !ok || rep.NotApplicable != 1 || rep.Skipped != 0 || !rep.OK {
		t.Fatalf("static checks of leg0: rdma/devices %+v, report %+v", c, rep)
	}
	// A legacy group's VF count and attachments are checked too.
	for _, n := range []string{"pf/ens1f0np0/numvfs", "libvirt/vm1/pf0vf0"} {
		if _, ok := checksBy(rep, validate.Pass)[n]; !ok {
			t.Errorf("no passing %s: %+v", n, rep)
		}
	}

	rep = b.validateJSON(1, "--group", "leg0", "--traffic", "--failover", "--duration", "1s")
	skipped := checksBy(rep, validate.Skip)
	if got := names(skipped); !slices.Equal(got, []string{"failover", "offload", "traffic"}) {
		t.Fatalf("skipped %v, want failover, offload, traffic; report %+v", got, rep)
	}
	for n, c := range skipped {
		if !strings.Contains(c.Detail, "group leg0 is eswitch legacy") {
			t.Errorf("%s: detail %q does not say why", n, c.Detail)
		}
	}
	if rep.OK || rep.Failed != 0 || rep.Skipped != 3 {
		t.Errorf("report ok %v failed %d skipped %d, want not ok, 0, 3", rep.OK, rep.Failed, rep.Skipped)
	}
	// --allow-skip: OK, the skips still shown.
	out := b.mustVflag(0, "validate", "--group", "leg0", "--traffic", "--failover", "--duration", "1s", "--allow-skip")
	for _, want := range []string{"  SKIP  traffic ", "  SKIP  failover ", "  SKIP  offload ", "  N/A   rdma/devices ",
		"OK: ", " 0 failed, 3 skipped, 1 n/a (skips allowed: --allow-skip)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	out, _, code := b.vflag("validate", "--group", "leg0", "--offload")
	if code != 1 || !strings.Contains(out, "  SKIP  offload ") || !strings.Contains(out, "NOT OK: ") {
		t.Errorf("validate --offload on a legacy group: exit %d\n%s", code, out)
	}
}

// TestValidateNoRoCEConfiguredIsNotApplicable: a healthy switchdev group on
// a NIC without RDMA, with no RoCE in the config, passes (exit 0 without
// --allow-skip): rdma/devices is n/a. With a roce_mode configured the check
// applies and cannot run: a skip, exit 1 unless --allow-skip.
func TestValidateNoRoCEConfiguredIsNotApplicable(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.upJSON(2)
	t.Cleanup(func() { b.mustVflag(0, "down") })
	rep := b.validateJSON(0)
	c, ok := checksBy(rep, validate.NA)["rdma/devices"]
	if !ok || !rep.OK || rep.Failed != 0 || rep.Skipped != 0 || rep.NotApplicable != 1 {
		t.Fatalf("healthy switchdev group without RDMA: rdma/devices %+v; failed %v skipped %v", c, names(checksBy(rep, validate.Fail)), names(checksBy(rep, validate.Skip)))
	}
	if !strings.Contains(c.Detail, "asks for no RoCE") {
		t.Errorf("rdma/devices: %q", c.Detail)
	}
	rep = b.validateJSON(1, "--roce-mode", "v2")
	if c, ok := checksBy(rep, validate.Skip)["rdma/devices"]; !ok || !strings.Contains(c.Detail, `configured RoCE mode "RoCE v2" cannot be checked`) {
		t.Errorf("--roce-mode v2 without an RDMA device: %+v", rep)
	}
	b.validateJSON(0, "--roce-mode", "v2", "--allow-skip")
}

// statusProblems runs `status -o json` and `status -o prometheus`, which
// must exit want, and returns the problems of group with the gauge's line.
func (b *bed) statusProblems(want int, group string) (problems []string, gauge string) {
	b.t.Helper()
	var hs status.HostStatus
	if err := json.Unmarshal([]byte(b.mustVflag(want, "status", "-o", "json")), &hs); err != nil {
		b.t.Fatal(err)
	}
	for _, g := range hs.Groups {
		if g.Name == group {
			problems = g.Problems
		}
	}
	for _, l := range strings.Split(b.mustVflag(want, "status", "-o", "prometheus"), "\n") {
		if strings.HasPrefix(l, `vflag_group_problems{group="`+group+`"} `) {
			gauge = l
		}
	}
	return problems, gauge
}

// TestStatusCountsWhatValidateFails: status counts, names and exits
// exitProblems for every difference validate's static checks fail on, and
// for a corrupt journal; the problems gauge has the same count. A healthy
// host: no problem, exit 0.
func TestStatusCountsWhatValidateFails(t *testing.T) {
	d := startDaemons(t)
	tests := []struct {
		name  string
		fault func(t *testing.T, b *bed) (restore func())
		want  []string // a problem containing each
	}{
		{name: "healthy"},
		{
			name: "corrupt journal",
			fault: func(t *testing.T, b *bed) func() {
				p := filepath.Join(b.state, "journal.json")
				orig, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, orig[:len(orig)/2], 0o600); err != nil {
					t.Fatal(err)
				}
				return func() { os.WriteFile(p, orig, 0o600) }
			},
			want: []string{"journal: ", "is corrupt"},
		},
		{
			name: "representor port without an ofport",
			fault: func(t *testing.T, b *bed) func() {
				ports := strings.Fields(b.ovs.MustVsctl("list-ports", "br-lag"))
				i := slices.IndexFunc(ports, func(p string) bool { return p != "bond0" })
				if i < 0 {
					t.Fatalf("no representor port in %v", ports)
				}
				// ovs-vswitchd cannot open an interface of an unknown type: no ofport.
				b.ovs.MustVsctl("set", "Interface", ports[i], "type=vflag-bogus")
				t.Logf("port %s: type vflag-bogus", ports[i])
				return func() { b.ovs.MustVsctl("set", "Interface", ports[i], `type=""`) }
			},
			want: []string{"ovs/port/pf", "without an ofport"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, d, "")
			b.upJSON(2)
			t.Cleanup(func() { b.mustVflag(0, "down") })
			want := 0
			if tc.fault != nil {
				restore := tc.fault(t, b)
				t.Cleanup(restore) // before down
				want = exitProblems
			}
			problems, gauge := b.statusProblems(want, "lag0")
			t.Logf("problems: %q", problems)
			if tc.fault == nil {
				if len(problems) != 0 || gauge != `vflag_group_problems{group="lag0"} 0` {
					t.Fatalf("healthy host: problems %q, %s", problems, gauge)
				}
				return
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
					t.Errorf("no problem contains %q: %q", w, problems)
				}
			}
			if g := `vflag_group_problems{group="lag0"} ` + strconv.Itoa(len(problems)); gauge != g || len(problems) == 0 {
				t.Errorf("gauge %q, want %q", gauge, g)
			}
			text := b.mustVflag(want, "status")
			for _, p := range problems {
				if !strings.Contains(text, "  problem: "+p+"\n") {
					t.Errorf("text status lacks problem %q:\n%s", p, text)
				}
			}
		})
	}

	// An interrupted up: the eswitches switched, no bond, no LAG, no bridge
	// ports. validate fails each; status names each one validate fails.
	t.Run("interrupted up", func(t *testing.T) {
		b := newBed(t, d, "")
		if rep := b.upJSON(2, "--stage", "pre"); rep.Error != "" {
			t.Fatalf("stage pre: %+v", rep)
		}
		t.Cleanup(func() { b.mustVflag(0, "down") })
		problems, gauge := b.statusProblems(exitProblems, "lag0")
		t.Logf("problems: %q", problems)
		rep := b.validateJSON(1)
		failed := checksBy(rep, validate.Fail)
		if len(problems) != len(failed) || gauge != `vflag_group_problems{group="lag0"} `+strconv.Itoa(len(failed)) {
			t.Errorf("status: %d problems (%s), validate: %d failed checks %v\n%q", len(problems), gauge, len(failed), names(failed), problems)
		}
		for _, n := range names(failed) {
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, n+": ") }) {
				t.Errorf("validate fails %s (%s); status does not name it: %q", n, failed[n].Detail, problems)
			}
		}
		for _, n := range []string{"bond", "lag"} {
			if _, ok := failed[n]; !ok {
				t.Errorf("validate after an interrupted up does not fail %s: %v", n, names(failed))
			}
		}
	})
}
