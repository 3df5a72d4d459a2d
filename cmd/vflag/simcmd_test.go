package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSimSectionChanged: a config whose sim section differs from the one the
// --sim directory was created from gets a warning naming each differing
// field and the way out; changed latencies are taken over silently; `sim
// reset` re-creates the host, refused while the journal holds an up's
// entries.
func TestSimSectionChanged(t *testing.T) {
	b := newBed(t, startDaemons(t), "")
	b.initSim()
	orig, err := os.ReadFile(b.config)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(pairs ...string) {
		t.Helper()
		cfg := strings.NewReplacer(pairs...).Replace(string(orig))
		if err := os.WriteFile(b.config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const warn = "the config's sim section differs from the one the simulated host was created from; the host keeps its own"

	// Latencies: taken over, no warning.
	rewrite("mode_change: 20ms", "mode_change: 30ms")
	_, errs, _ := b.vflag("status")
	if strings.Contains(errs, warn) {
		t.Fatalf("latency change warned:\n%s", errs)
	}

	// Another PF name and total_vfs: warned, field by field, with the fix.
	rewrite("netdev: ens1f1np1", "netdev: p1", "pfs: [ens1f0np0, ens1f1np1]", "pfs: [ens1f0np0, p1]", "total_vfs: 8", "total_vfs: 16")
	_, errs, _ = b.vflag("status")
	for _, want := range []string{
		warn,
		"nics[0].total_vfs: 8 in the simulated host, 16 in the config",
		"nics[0].pfs[1].netdev: ens1f1np1 in the simulated host, p1 in the config",
		"fix=\"vflag --sim " + b.simDir + " down (if up ran), then vflag --sim " + b.simDir + " sim reset (re-creates it from the config)\"",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("status stderr lacks %q:\n%s", want, errs)
		}
	}

	// Reset is refused while up's journal holds entries; after down it
	// re-creates the host, which then converges under the new names.
	if err := os.WriteFile(b.config, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	b.mustVflag(0, "up")
	rewrite("netdev: ens1f1np1", "netdev: p1", "pfs: [ens1f0np0, ens1f1np1]", "pfs: [ens1f0np0, p1]")
	_, errs, code := b.vflag("sim", "reset")
	if want := "run `vflag --sim " + b.simDir + " down` first, then `vflag --sim " + b.simDir + " sim reset`"; code != 1 || !strings.Contains(errs, want) {
		t.Fatalf("sim reset with a journal: exit %d, stderr:\n%s\nwant %q", code, errs, want)
	}
	b.mustVflag(0, "down")
	out := b.mustVflag(0, "sim", "reset")
	if want := "re-created from the config's sim section; it differed in:\n  nics[0].pfs[1].netdev: ens1f1np1 in the simulated host, p1 in the config\n"; !strings.Contains(out, want) {
		t.Fatalf("sim reset said:\n%s\nwant %q", out, want)
	}
	_, errs, code = b.vflag("up", "--detailed-exit-codes")
	if code != 2 || strings.Contains(errs, warn) {
		t.Fatalf("up after reset: exit %d\n%s", code, errs)
	}
	if out := b.mustVflag(0, "status"); !strings.Contains(out, "p1") {
		t.Fatalf("status after reset lacks p1:\n%s", out)
	}
	b.mustVflag(0, "down")
}

// lockedBuf is a buffer one goroutine writes and another reads.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestOFPortWaitSaysWhy: with the simulated netdevs mirrored nowhere (no
// sim.mirror_netns), up's wait for ofports says at its start what it waits
// for and why, instead of 30 s of silence.
func TestOFPortWaitSaysWhy(t *testing.T) {
	b := newBed(t, startDaemons(t), "")
	cfg, err := os.ReadFile(b.config)
	if err != nil {
		t.Fatal(err)
	}
	noMirror := strings.Replace(string(cfg), "  mirror_netns: "+b.ovs.Netns()+"\n", "", 1)
	if noMirror == string(cfg) {
		t.Fatal("the bed's config has no mirror_netns line")
	}
	if err := os.WriteFile(b.config, []byte(noMirror), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs lockedBuf
	done := make(chan int, 1)
	start := time.Now()
	go func() {
		done <- run(ctx, []string{"--config", b.config, "--sim", b.simDir, "--state-dir", b.state, "up"}, &out, &errs)
	}()
	const want = `level=WARN msg="waiting for ovs-vswitchd to give ports of bridge br-lag an OpenFlow port number (it opens each port's netdev in its own network namespace)" ports="bond0 (could not open network device bond0 (No such device)), eth0 (could not open network device eth0 (No such device)), `
	const hint = `bound=30s hint="the config's sim section has no mirror_netns: the simulated netdevs exist in no network namespace, so no ovs-vswitchd can open them (README: Try it on the simulated host)"`
	for !strings.Contains(errs.String(), hint) {
		select {
		case code := <-done:
			t.Fatalf("up ended (exit %d) without saying what it waits for:\n%s", code, errs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("no warning after 20 s:\n%s", errs.String())
		}
	}
	if !strings.Contains(errs.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errs.String())
	}
	cancel()
	<-done
	b.mustVflag(0, "down")
}
