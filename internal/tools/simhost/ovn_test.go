package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimhostOVN runs examples/ovn.yaml on the simulated host as simhost
// serves it (ovnExample: the changes simhost's check asks for): simhost
// starts an OVN central with the config's logical ports in its Northbound
// and a real ovn-controller; vflag up then binds the representors and
// returns once ovn-controller has installed them (ovn-installed=true on
// both, its Port_Bindings claimed by this chassis), validate passes every
// ovn/* check, and down removes what up set.
func TestSimhostOVN(t *testing.T) {
	dir := t.TempDir()
	vflag := filepath.Join(dir, "vflag")
	if out, err := exec.Command("go", "build", "-o", vflag, "../../../cmd/vflag").CombinedOutput(); err != nil {
		t.Fatalf("go build vflag: %v\n%s", err, out)
	}
	netns := fmt.Sprintf("vflag-ovnt-%d", os.Getpid()) // not the README's vflag-sim: tests run side by side
	cfg := ovnExample(t, filepath.Join(dir, "sb.sock"), netns)
	// A missing install bounds a failing run: up's wait is the config's.
	cfg = strings.Replace(cfg, "install_timeout: 30s", "install_timeout: 10s", 1)
	cfgPath := filepath.Join(dir, "ovn.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, env, err := start(t, &out, cfgPath, "", "")
	if err != nil {
		t.Fatalf("simhost: %v\n%s", err, out.String())
	}
	t.Logf("simhost:\n%s", out.String())
	for _, want := range []string{"created in the Northbound logical switch ls-ovn0 with ports vm1-eth0, vm2-eth0", "on a real deployment the operator creates them"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("simhost's output lacks %q", want)
		}
	}
	environ := os.Environ()
	vars := map[string]string{}
	for _, kv := range env {
		environ = append(environ, kv[0]+"="+kv[1])
		vars[kv[0]] = kv[1]
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = environ
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
		}
		return string(b)
	}

	run(vflag, "up")
	// up returned: ovn-controller has installed both ports' flows.
	installed := run("ovs-vsctl", "--db="+vars["VFLAG_OVSDB"], "--format=csv", "--no-headings", "--columns=name,external_ids",
		"find", "Interface", `external_ids:ovn-installed="true"`)
	for _, lsp := range []string{"vm1-eth0", "vm2-eth0"} {
		if !strings.Contains(installed, "iface-id="+lsp) {
			t.Errorf("no interface bound to %s is ovn-installed after up:\n%s", lsp, installed)
		}
		if ch := run("ovn-sbctl", "--db="+vars["OVN_SB_DB"], "get", "Port_Binding", lsp, "chassis"); strings.TrimSpace(ch) == "[]" {
			t.Errorf("Port_Binding %s is bound to no chassis after up", lsp)
		}
	}
	got := run(vflag, "validate")
	for _, check := range []string{"ovn/southbound", "ovn/chassis", "ovn/port/vm1-eth0", "ovn/port/vm2-eth0"} {
		if !strings.Contains(got, "PASS  "+check+" ") {
			t.Errorf("validate does not pass %s:\n%s", check, got)
		}
	}
	run(vflag, "status")
	run(vflag, "down")
	if ids := run("ovs-vsctl", "--db="+vars["VFLAG_OVSDB"], "get", "Open_vSwitch", ".", "external_ids"); strings.Contains(ids, "ovn-remote") || strings.Contains(ids, "system-id") {
		t.Errorf("down left the chassis's external_ids: %s", ids)
	}
}
