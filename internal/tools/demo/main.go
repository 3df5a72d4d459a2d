// Command demo shows vflag on the simulated dual-port NIC with a real
// ovsdb-server/ovs-vswitchd and a real libvirtd, all private to this run:
// up, status, plan, up again (no change), down, and checks that down
// returned the simulated host, OVSDB and the domain to their baseline.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs/ovstest"
)

func main() {
	bin := flag.String("vflag", "bin/vflag", "the vflag binary")
	verbose := flag.Bool("v", false, "show the daemons' logs")
	flag.Parse()
	r := &testbed.Runner{Verbose: *verbose}
	code := demo(r, *bin)
	r.Close()
	os.Exit(code)
}

func demo(r *testbed.Runner, bin string) int {
	abs, err := filepath.Abs(bin)
	if err != nil {
		r.Fatalf("%v", err)
	}
	step("starting a private ovsdb-server + ovs-vswitchd (own network namespace) and libvirtd (own mount namespace)")
	srv := ovstest.Start(r)
	virt := virttest.Start(r)
	virt.DefineDomain(r, "vm1")

	dir := r.TempDir()
	example, err := exec.Command(abs, "example-config").Output()
	if err != nil {
		r.Fatalf("vflag example-config: %v", err)
	}
	cfgPath := filepath.Join(dir, "vflag.yaml")
	cfg := testbed.PointConfig(string(example), srv.Endpoint(), virt.URI(), srv.Netns())
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		r.Fatalf("%v", err)
	}
	simDir := filepath.Join(dir, "sim")
	vflag := func(args ...string) (string, int) {
		cmd := exec.Command(abs, append([]string{"--config", cfgPath, "--sim", simDir}, args...)...)
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = os.Stderr
		err := cmd.Run()
		fmt.Print(out.String())
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			r.Fatalf("run vflag: %v", err)
		}
		return out.String(), code
	}
	dump := func() string {
		h, err := sim.Open(simDir, nil)
		if err != nil {
			r.Fatalf("%v", err)
		}
		defer func() { _ = h.Close() }()
		kernel, _, _ := strings.Cut(h.Dump(), "dmesg:\n")
		xml, _ := virt.Virsh("dumpxml", "--inactive", "vm1")
		return kernel + srv.Dump() + strings.ReplaceAll(xml, "  <metadata/>\n", "")
	}
	failures := 0
	expect := func(what string, ok bool) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
			failures++
		}
		fmt.Printf("  [%s] %s\n", mark, what)
	}

	step("vflag plan   (simulated host created from the config's sim section: a ConnectX with 2 ports, 8 VFs each)")
	_, code := vflag("plan", "--detailed-exit-codes")
	expect("plan reports changes (exit 2)", code == 2)
	base := dump()

	step("vflag up")
	_, code = vflag("up", "--detailed-exit-codes")
	expect("up converged the host (exit 2: changed)", code == 2)

	step("vflag status")
	out, code := vflag("status")
	expect("status finds no problem (exit 0)", code == 0)
	expect("LAG active", strings.Contains(out, "lag active"))
	expect("every representor in the bridge with an ofport", strings.Count(out, "(ofport ") == 8)
	expect("hw-offload on", strings.Contains(out, "hw-offload true"))
	expect("VFs attached to vm1", strings.Count(out, "domain vm1") == 2)

	step("vflag up   (again: converged, no write)")
	out, code = vflag("up", "--detailed-exit-codes")
	expect("second up made no change (exit 0)", code == 0 && strings.Contains(out, "no changes"))

	step("vflag plan   (converged)")
	_, code = vflag("plan", "--detailed-exit-codes")
	expect("plan on the converged host: nothing to do (exit 0)", code == 0)

	step("vflag down")
	_, code = vflag("down")
	expect("down succeeded", code == 0)
	expect("simulated host, OVSDB and vm1's XML are back at their baseline", dump() == base)

	step("vflag status   (after down)")
	vflag("status")
	if failures > 0 {
		fmt.Printf("\ndemo: %d check(s) failed\n", failures)
		return 1
	}
	fmt.Println("\ndemo: converged host shown, then a clean teardown")
	return 0
}

func step(s string) { fmt.Printf("\n=== %s\n", s) }
