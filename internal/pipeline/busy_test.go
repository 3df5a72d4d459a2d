package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/teardown"
)

// TestEswitchBusyWhileRulesAreOffloaded (issue 36, rule 7): mlx5 refuses
// an eswitch mode change with EBUSY "Can't change mode, E-Switch is busy"
// while offloaded tc rules hold the eswitch. down's way back to legacy
// waits for them, with a bound: past it, a clear error; when the rules go
// within it (as ovs-vswitchd's datapath flows do after their ports left),
// down completes.
func TestEswitchBusyWhileRulesAreOffloaded(t *testing.T) {
	d := startDaemons(t)
	ce := newConvergeEnv(t, d)
	if _, err := ce.run(false, nil); err != nil {
		t.Fatalf("up: %v", err)
	}
	holdRule := func() string {
		ports, err := ce.sim.Ports()
		if err != nil {
			t.Fatal(err)
		}
		rep := ""
		for _, p := range ports {
			if p.Flavour == eswitch.FlavourPCIVF && p.Devlink == pf0Devlink {
				rep = p.Netdev
				break
			}
		}
		if err := ce.sim.SetIngressBlock(rep, 0); err != nil {
			t.Fatal(err)
		}
		if err := ce.sim.AddFlower(rep, 1, false, false); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	downWaiting := func(wait time.Duration) error {
		j, err := teardown.OpenJournal(ce.journalDir)
		if err != nil {
			t.Fatal(err)
		}
		h := host.New(ce.sim, ce.sim.FS(), "", "")
		defer h.Close()
		e := New(nil, h, nil)
		e.BusyWait = wait
		return (&teardown.Runner{Journal: j, Undo: e.Undoers()}).Down(context.Background())
	}
	// The rule goes within the bound: down waits for it and completes.
	rep := holdRule()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = ce.sim.DelIngress(rep)
	}()
	start := time.Now()
	if err := downWaiting(10 * time.Second); err != nil {
		t.Fatalf("down once the rule goes: %v", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("down took %s: it did not wait for the rule to go", took)
	}
	if m, _ := ce.sim.EswitchMode(pf0Devlink); m != eswitch.ModeLegacy {
		t.Fatalf("eswitch %s after down", m)
	}
	// The rule stays: past the bound, a clear error.
	if _, err := ce.run(false, nil); err != nil {
		t.Fatalf("up again: %v", err)
	}
	holdRule()
	err := downWaiting(300 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "the eswitch stayed busy for 300ms") || !strings.Contains(err.Error(), "offloaded tc rules") {
		t.Fatalf("down with a rule held in hardware: %v", err)
	}
}
