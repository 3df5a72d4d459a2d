package main

import (
	"strings"
	"testing"
)

// TestStatusTreeAfterUp: on the simulated host after up, the example's VF
// 0 of each PF hangs under its representor in br-lag with domain vm1; -o
// json with --tree is refused.
func TestStatusTreeAfterUp(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, exampleConfig)
	b.initSim()
	b.upJSON(2)
	out := b.mustVflag(0, "status", "--tree")
	t.Logf("status --tree:\n%s", out)
	for _, want := range []string{
		"group lag0 (switchdev, lag active)\n",
		"└─ bond bond0 over ens1f0np0 + ens1f1np1 (802.3ad, 2/2 slaves up)\n",
		"   └─ bridge br-lag (hw-offload true)\n",
		"      │  └─ vf ens1f0np0/0 (0000:61:00.2, -, 52:54:00:10:00:00)\n      │     └─ domain vm1\n",
		"      │  └─ vf ens1f1np1/0 (0000:61:01.2, -, 52:54:00:10:01:00)\n      │     └─ domain vm1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status --tree lacks %q", want)
		}
	}
	if _, errs, code := b.vflag("status", "--tree", "-o", "json"); code != 1 || !strings.Contains(errs, "--tree is a picture for the terminal: not with -o json") {
		t.Errorf("--tree -o json: exit %d: %s", code, errs)
	}
}
