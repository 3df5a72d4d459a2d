package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorSim runs `vflag doctor -o json` on the simulated host of
// examples/vflag-sim.yaml, with OVSDB and libvirt pointed at sockets that
// do not exist: the simulated NIC passes, the daemons fail with fixes, the
// JSON has the documented shape and the exit code says not ready.
func TestDoctorSim(t *testing.T) {
	example, err := os.ReadFile("../../examples/vflag-sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := strings.Replace(string(example), "ovsdb: unix:/var/run/openvswitch/db.sock", "ovsdb: unix:"+filepath.Join(dir, "no-db.sock"), 1)
	cfg = strings.Replace(cfg, "libvirt: qemu:///system", "libvirt: qemu+unix:///system?socket="+filepath.Join(dir, "no-libvirt.sock"), 1)
	if cfg == string(example) {
		t.Fatal("examples/vflag-sim.yaml no longer has the ovsdb/libvirt lines this test rewrites")
	}
	path := filepath.Join(dir, "vflag.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(dir, "doctor.xml")
	var out, errs bytes.Buffer
	code := run(context.Background(), []string{"--sim", filepath.Join(dir, "sim"), "--config", path, "-o", "json", "doctor", "--junit", junit}, &out, &errs)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errs.String())
	if code != 1 {
		t.Fatalf("exit %d, want 1 (OVSDB and libvirt are unreachable)", code)
	}

	var doc map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("stdout is not one JSON document: %v", err)
	}
	if len(doc) != 2 || doc["checks"] == nil || string(doc["ready"]) != "false" {
		t.Fatalf("want exactly {\"checks\", \"ready\": false}, got %s", out.String())
	}
	var checks []map[string]any
	if err := json.Unmarshal(doc["checks"], &checks); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"name": true, "status": true, "detail": true, "fix": true, "area": true, "group": true}
	byName := map[string]map[string]any{}
	for _, c := range checks {
		for _, k := range []string{"name", "status", "detail", "fix"} {
			if _, ok := c[k]; !ok {
				t.Errorf("check %v lacks %q", c["name"], k)
			}
		}
		for k := range c {
			if !allowed[k] {
				t.Errorf("check %v has an unexpected field %q", c["name"], k)
			}
		}
		switch c["status"] {
		case "pass", "fail", "warn", "skip":
		default:
			t.Errorf("check %v: status %v", c["name"], c["status"])
		}
		if (c["status"] == "fail" || c["status"] == "warn") && c["fix"] == "" {
			t.Errorf("check %v is %v without a fix", c["name"], c["status"])
		}
		byName[c["name"].(string)] = c
	}
	for _, name := range []string{"platform/sriov ens1f0np0", "platform/sriov ens1f1np1", "firmware/numvfs", "nic/same-nic",
		"nic/eswitch ens1f0np0", "nic/eswitch ens1f1np1", "nic/debugfs", "conflicts/bond-name bond0", "conflicts/numvfs ens1f0np0"} {
		c := byName[name]
		if c == nil || c["status"] != "pass" {
			t.Errorf("%s on the simulated NIC: %v", name, c)
		}
	}
	for _, name := range []string{"platform/iommu", "firmware/mstconfig 0000:61:00.0", "kernel/version"} {
		if c := byName[name]; c == nil || c["status"] != "skip" {
			t.Errorf("%s with --sim: %v, want skip", name, c)
		}
	}
	db := byName["daemons/ovsdb unix:"+filepath.Join(dir, "no-db.sock")]
	if db == nil || db["status"] != "fail" || !strings.Contains(db["fix"].(string), "openvswitch-switch") {
		t.Errorf("daemons/ovsdb: %v", db)
	}

	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatalf("--junit: %v", err)
	}
	var ju struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(b, &ju); err != nil || ju.Tests != len(checks) || ju.Failures == 0 {
		t.Errorf("junit: %+v %v\n%s", ju, err, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "sim", "state")); err == nil {
		t.Error("doctor created the state directory")
	}
}

// TestDoctorRealMachine runs `vflag doctor` without a config on the machine
// the tests run on: a build machine without SR-IOV, IOMMU, bonding or Open
// vSwitch must come out not ready, with fixes, and without a crash.
func TestDoctorRealMachine(t *testing.T) {
	if m, _ := filepath.Glob("/sys/class/net/*/device/sriov_totalvfs"); len(m) > 0 {
		t.Skipf("this machine has SR-IOV capable NICs (%s): it may be ready", strings.Join(m, " "))
	}
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run(context.Background(), []string{"--config", filepath.Join(dir, "none.yaml"), "--state-dir", filepath.Join(dir, "state"), "doctor"}, &out, &errs)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errs.String())
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	text := out.String()
	for _, want := range []string{"platform\n", "nic\n", "  FAIL  discovery", "fix: ", "NOT READY: "} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(text, "\x1b[") {
		t.Error("colour on a non-terminal")
	}
	if errs.Len() != 0 {
		t.Errorf("stderr: %s", errs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("doctor created the state directory")
	}
}
