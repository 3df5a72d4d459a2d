package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// TestCtrlCDuringNumVFsReport: Ctrl-C while a numvfs change (4 -> 6) waits
// for its VFs. The step in progress finishes (its line shows no context
// canceled: docs/pipeline.md says the current step is finished), the run is
// rolled back, and the report's header says the host ended as it was, not
// "changed N step(s)"; the undo line says the restore it made (6 -> 4).
func TestCtrlCDuringNumVFsReport(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	slow := strings.Replace(exampleConfig, "vf_create: 2ms", "vf_create: 400ms", 1)
	if slow == exampleConfig {
		t.Fatal("example config has no vf_create latency")
	}
	b := newBed(t, d, slow)
	b.initSim()
	b.mustVflag(0, "up")
	t.Cleanup(func() { b.mustVflag(0, "down") })
	converged := b.dump()
	b.useConfig(strings.Replace(mustReadFile(t, b.config), "    numvfs: 4 ", "    numvfs: 6 ", 1))
	args := []string{"--config", b.config, "--sim", b.simDir, "--state-dir", b.state, "up"}
	p := startOnPTY(t, args...)
	p.waitFor("the VFs are being made", func() bool { return strings.Contains(p.output(), "VFs 2/6") })
	p.ctrlC()
	if code := p.exitCode(); code != 1 {
		t.Errorf("exit %d, want 1\n%s", code, p.output())
	}
	p.waitFor("the report's last line", func() bool { return strings.Contains(p.output(), "the host is as before the run") })
	out := p.output()
	t.Logf("output:\n%s", out)
	if strings.Contains(out, "vflag up: changed ") {
		t.Errorf("a rolled-back run reports %q", "changed N step(s)")
	}
	if !strings.Contains(out, "vflag up: interrupted: applied ") || !strings.Contains(out, "the host is as before the run") {
		t.Errorf("the report does not say the run was interrupted and rolled back")
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  ! ") || strings.Contains(l, "FAILED") {
			t.Errorf("a step failed: the interrupted step should have finished: %s", l)
		}
	}
	for _, want := range []string{"  ~ sriov.numvfs/pci/0000:61:00.0 ", "  - sriov.numvfs/pci/0000:61:00.0 ", "sriov_numvfs 6 -> 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q (the numvfs change made, then undone 6 -> 4)", want)
		}
	}
	if got := canonical(b.dump()); got != canonical(converged) {
		t.Errorf("after the rollback the host differs:\n%s", testbed.DiffText(canonical(converged), got))
	}

	// A second Ctrl-C while the rollback makes the 4 VFs again: the cut
	// numvfs undo's line says the restore it was making (6 -> 4), not the
	// undo of vflag's first change (the entry's own: 4 -> 0).
	p = startOnPTY(t, args...)
	p.waitFor("the VFs are being made", func() bool { return strings.Contains(p.output(), "VFs 2/6") })
	p.ctrlC()
	p.waitFor("the rollback makes the VFs again", func() bool { return strings.Contains(p.output(), "VFs 1/4") })
	p.ctrlC()
	p.exitCode()
	p.waitFor("the report's last line", func() bool { return strings.Contains(p.output(), "vflag down cleans up") })
	out = p.output()
	if !strings.Contains(out, "vflag up: interrupted: applied ") {
		t.Errorf("the stopped rollback's report does not say the run was interrupted")
	}
	t.Logf("output:\n%s", out)
	var undo []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  ! sriov.numvfs/") || strings.HasPrefix(l, "  - sriov.numvfs/") {
			undo = append(undo, l)
		}
	}
	if len(undo) == 0 {
		t.Errorf("no numvfs undo line after the second interrupt")
	}
	for _, l := range undo {
		if !strings.Contains(l, "sriov_numvfs 6 -> 4") {
			t.Errorf("the numvfs undo line does not say the restore 6 -> 4: %s", l)
		}
	}
}
