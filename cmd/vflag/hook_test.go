package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/hook"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/status"
	"github.com/vflag/vflag/internal/testbed"
)

// Domain XML shapes as libvirt passes them to the qemu hook. VF addresses
// are those of the example config's simulated NIC after up:
// ens1f0np0 VFs 0000:61:00.2-5, ens1f1np1 VFs 0000:61:01.2-5 (VF 1 of
// ens1f1np1 is the host's: driver mlx5_core).
func hookDomainXML(name string, devices ...string) string {
	return `<domain type='kvm' id='7'>
  <name>` + name + `</name>
  <uuid>6d1c0b32-8f7e-4a8e-b6a5-1f3c2e9d0a11</uuid>
  <memory unit='KiB'>524288</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <interface type='bridge'><mac address='52:54:00:00:00:99'/><source bridge='virbr0'/><model type='virtio'/></interface>
` + strings.Join(devices, "") + `  </devices>
</domain>
`
}

func xmlHostdevIface(bus, slot, fn, mac string) string {
	return `    <interface type='hostdev' managed='yes'>
      <mac address='` + mac + `'/>
      <source><address type='pci' domain='0x0000' bus='` + bus + `' slot='` + slot + `' function='` + fn + `'/></source>
    </interface>
`
}

func xmlHostdev(bus, slot, fn string) string {
	return `    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='` + bus + `' slot='` + slot + `' function='` + fn + `'/></source>
    </hostdev>
`
}

const xmlPoolIface = `    <interface type='network'>
      <mac address='52:54:00:77:00:04'/>
      <source network='vf-pool'/>
    </interface>
`

const xmlUSB = `    <hostdev mode='subsystem' type='usb' managed='yes'>
      <source><vendor id='0x046d'/><product id='0xc52b'/></source>
    </hostdev>
`

// hook runs `vflag hook qemu` for one lifecycle event with the domain XML.
func (b *bed) hook(extra []string, domain, op, sub, xml string) (stdout, stderr string, code int) {
	b.t.Helper()
	f := filepath.Join(b.t.TempDir(), "domain.xml")
	if err := os.WriteFile(f, []byte(xml), 0o600); err != nil {
		b.t.Fatal(err)
	}
	return b.vflag(append(extra, "hook", "qemu", "--domain-xml", f, domain, op, sub, "-")...)
}

func (b *bed) openSim(t *testing.T) *sim.Host {
	t.Helper()
	h, err := sim.Open(b.simDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// hookStateExists tells whether the hook journaled changes for the domain
// (its journal, STATE_DIR/hook/<domain>/journal.json, exists: an empty
// journal is removed).
func (b *bed) hookStateExists(domain string) bool {
	_, err := os.Stat(filepath.Join(mustHookDir(b.state, domain), "journal.json"))
	return err == nil
}

// TestHookLifecycle drives the qemu hook through libvirt's event sequence
// for each domain XML shape on a host after `vflag up` (simulated NIC, real
// OVS), and checks that release returns the host to where it was.
func TestHookLifecycle(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.upJSON(2)
	base := b.dump()
	// Representor names depend on creation order: look them up.
	var hs status.HostStatus
	if err := json.Unmarshal([]byte(b.mustVflag(0, "status", "-o", "json")), &hs); err != nil {
		t.Fatal(err)
	}
	rep := map[string]string{}
	for _, v := range hs.Groups[0].VFs {
		rep[v.PCI] = v.Representor
	}
	rep0, rep3 := rep["0000:61:00.2"], rep["0000:61:00.5"]

	type event struct {
		op, sub  string
		xml      string // "" = the case's xml
		code     int
		stderr   string            // substring wanted in stderr ("" = must be empty)
		contains map[string]string // after the event: dump substrings wanted (key: what)
		lacks    []string
		state    bool // hook state file exists afterwards
	}
	tests := []struct {
		name   string
		domain string
		xml    string
		setup  func(t *testing.T)
		extra  []string
		events []event
		// repairs: the hook repairs what setup broke (the host ends as up made it, not as before)
		repairs bool
	}{
		{
			name: "domain without passthrough", domain: "plain", xml: hookDomainXML("plain"),
			events: []event{{op: "prepare", sub: "begin"}, {op: "start", sub: "begin"}, {op: "release", sub: "end"}},
		},
		{
			name: "domain with foreign passthrough (GPU, USB)", domain: "gpu",
			xml:    hookDomainXML("gpu", xmlHostdev("0x3b", "0x00", "0x0"), xmlUSB),
			events: []event{{op: "prepare", sub: "begin"}, {op: "start", sub: "begin"}, {op: "release", sub: "end"}},
		},
		{
			name: "hostdev interface", domain: "vm-a",
			xml: hookDomainXML("vm-a", xmlHostdevIface("0x61", "0x00", "0x3", "52:54:00:aa:00:01")),
			events: []event{
				{op: "prepare", sub: "begin", state: true, contains: map[string]string{"VF MAC": "mac 52:54:00:aa:00:01"}},
				{op: "start", sub: "begin", state: true, contains: map[string]string{"VF MAC": "mac 52:54:00:aa:00:01"}},
				{op: "started", sub: "begin", state: true},
				{op: "stopped", sub: "end", state: true},
				{op: "release", sub: "end"},
			},
		},
		{
			name: "hostdev element keeps the VF's MAC", domain: "vm-b",
			xml: hookDomainXML("vm-b", xmlHostdev("0x61", "0x01", "0x4")),
			events: []event{
				{op: "prepare", sub: "begin"},
				{op: "release", sub: "end"},
			},
		},
		{
			name: "network pool interface", domain: "vm-c", xml: hookDomainXML("vm-c", xmlPoolIface),
			events: []event{
				// prepare: libvirt has not picked a VF yet.
				{op: "prepare", sub: "begin"},
				// start: the allocated VF shows as a hostdev interface.
				{op: "start", sub: "begin", xml: hookDomainXML("vm-c", xmlHostdevIface("0x61", "0x00", "0x4", "52:54:00:77:00:04")),
					state: true, contains: map[string]string{"VF MAC": "mac 52:54:00:77:00:04"}},
				{op: "release", sub: "end"},
			},
		},
		{
			name: "representor port missing from the bridge is added, then removed", domain: "vm-d",
			xml: hookDomainXML("vm-d", xmlHostdevIface("0x61", "0x00", "0x2", "52:54:00:10:00:00")),
			setup: func(t *testing.T) {
				b.ovs.MustVsctl("del-port", "br-lag", rep0)
				t.Cleanup(func() {
					b.upJSON(2) // put the port back for the next case
					if got := b.dump(); got != base {
						t.Fatalf("up after the case did not restore the host:\n%s", testbed.DiffText(base, got))
					}
				})
			},
			events: []event{
				{op: "prepare", sub: "begin", state: true, contains: map[string]string{"port with its VLAN": `port "` + rep0 + `" tag=100 owner="lag0"`}},
				{op: "release", sub: "end", lacks: []string{`port "` + rep0 + `"`}},
			},
		},
		{
			name: "representor port with other VLAN columns and mtu_request is repaired", domain: "vm-k", repairs: true,
			xml: hookDomainXML("vm-k", xmlHostdevIface("0x61", "0x00", "0x2", "52:54:00:10:00:00")),
			setup: func(t *testing.T) {
				b.ovs.MustVsctl("set", "Port", rep0, "vlan_mode=native-tagged", "trunks=5,6", "--", "set", "Interface", rep0, "mtu_request=1234")
				t.Cleanup(func() {
					if got := b.dump(); got != base {
						t.Fatalf("the repair did not give the host as up made it:\n%s", testbed.DiffText(base, got))
					}
				})
			},
			events: []event{
				{op: "prepare", sub: "begin", state: true, contains: map[string]string{"port with its VLAN": `port "` + rep0 + `" tag=100 owner="lag0"`},
					lacks: []string{"vlan_mode=native-tagged", "trunks=[5 6]", "mtu_request=1234"}},
				{op: "release", sub: "end", contains: map[string]string{"port kept": `port "` + rep0 + `" tag=100 owner="lag0"`}},
			},
		},
		{
			name: "representor down is brought up", domain: "vm-e",
			xml: hookDomainXML("vm-e", xmlHostdevIface("0x61", "0x00", "0x5", "52:54:00:10:00:00")),
			setup: func(t *testing.T) {
				h := b.openSim(t)
				if err := h.SetLinkUp(rep3, false); err != nil {
					t.Fatal(err)
				}
				h.Close()
			},
			events: []event{
				{op: "prepare", sub: "begin", state: true},
				{op: "release", sub: "end"},
			},
		},
		{
			name: "VF given to the host refuses", domain: "vm-f",
			xml: hookDomainXML("vm-f", xmlHostdevIface("0x61", "0x01", "0x3", "52:54:00:aa:00:02")),
			events: []event{
				{op: "prepare", sub: "begin", code: 1, stderr: "refusing to start domain vm-f: VF not ready: VF 1 of ens1f1np1 (0000:61:01.3), group lag0: the config gives it to the host (driver mlx5_core)"},
				{op: "release", sub: "end"},
			},
		},
		{
			name: "same VF twice refuses", domain: "vm-g",
			xml: hookDomainXML("vm-g", xmlHostdevIface("0x61", "0x00", "0x3", "52:54:00:aa:00:01"), xmlHostdev("0x61", "0x00", "0x3")),
			events: []event{
				{op: "prepare", sub: "begin", code: 1, stderr: "VF 0000:61:00.3 is used twice"},
				{op: "release", sub: "end"},
			},
		},
		{
			name: "OVSDB unreachable refuses", domain: "vm-h",
			xml: hookDomainXML("vm-h", xmlHostdevIface("0x61", "0x00", "0x3", "52:54:00:aa:00:01")),
			setup: func(t *testing.T) {
				old, _ := os.ReadFile(b.config)
				bad := strings.Replace(string(old), "ovsdb: "+b.ovs.Endpoint(), "ovsdb: unix:"+filepath.Join(t.TempDir(), "nothing.sock"), 1)
				if bad == string(old) {
					t.Fatal("config has no ovsdb line to replace")
				}
				os.WriteFile(b.config, []byte(bad), 0o600)
				t.Cleanup(func() { os.WriteFile(b.config, old, 0o600) })
			},
			events: []event{
				// The MAC is set before OVS is asked; the refusal leaves it
				// recorded, and libvirt's release after the aborted start resets it.
				{op: "prepare", sub: "begin", code: 1, stderr: "refusing to start domain vm-h: VF not ready: VF 1 of ens1f0np0 (0000:61:00.3), group lag0: representor " + rep["0000:61:00.3"] + ":", state: true},
				{op: "release", sub: "end"},
			},
		},
		{
			name: "without config: VFs from the journal", domain: "vm-i",
			xml:   hookDomainXML("vm-i", xmlHostdevIface("0x61", "0x01", "0x2", "52:54:00:aa:00:09")),
			extra: []string{"--config", "/nonexistent/vflag.yaml"},
			events: []event{
				{op: "prepare", sub: "begin", state: true, contains: map[string]string{"VF MAC": "mac 52:54:00:aa:00:09"}},
				{op: "release", sub: "end"},
			},
		},
		{
			name: "unparsable XML never fails a domain", domain: "vm-j", xml: "<domain><name>vm-j",
			events: []event{{op: "prepare", sub: "begin", stderr: "not checked"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			before := b.dump()
			for _, ev := range tt.events {
				xml := ev.xml
				if xml == "" {
					xml = tt.xml
				}
				out, errs, code := b.hook(tt.extra, tt.domain, ev.op, ev.sub, xml)
				if code != ev.code {
					t.Fatalf("%s %s: exit %d, want %d\nstdout: %s\nstderr: %s", ev.op, ev.sub, code, ev.code, out, errs)
				}
				if out != "" {
					t.Errorf("%s %s: stdout %q, want none (libvirt reads a hook's stdout as XML on migrate/restore)", ev.op, ev.sub, out)
				}
				if ev.stderr == "" && errs != "" || ev.stderr != "" && !strings.Contains(errs, ev.stderr) {
					t.Errorf("%s %s: stderr %q, want %q", ev.op, ev.sub, errs, ev.stderr)
				}
				if got := b.hookStateExists(tt.domain); got != ev.state {
					t.Errorf("%s %s: hook state exists = %v, want %v", ev.op, ev.sub, got, ev.state)
				}
				if len(ev.contains) > 0 || len(ev.lacks) > 0 {
					now := b.dump() + "\n" + b.statusAny()
					for what, s := range ev.contains {
						if !strings.Contains(now, s) {
							t.Errorf("%s %s: %s: host lacks %q:\n%s", ev.op, ev.sub, what, s, now)
						}
					}
					for _, s := range ev.lacks {
						if strings.Contains(now, s) {
							t.Errorf("%s %s: host still has %q", ev.op, ev.sub, s)
						}
					}
				}
			}
			// Every case ends with release (or no change): the host is as before.
			if got := b.dump(); got != before && tt.name != "representor down is brought up" && !tt.repairs {
				t.Fatalf("host changed over the lifecycle:\n%s", testbed.DiffText(before, got))
			}
		})
	}
	// The representor the hook brought up stays up (host state, not the
	// domain's); everything else is back at the state after up.
	if got := b.dump(); got != base {
		t.Fatalf("host after all cases differs from after up:\n%s", testbed.DiffText(base, got))
	}
}

// TestHookReadsStdin runs the hook as libvirt does: XML on stdin, four
// arguments. An ignored event must not fail even when stdin is not XML.
func TestHookReadsStdin(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.upJSON(2)
	base := b.dump()
	run := func(op, sub, input string) (string, string, int) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.WriteString(input); w.Close() }()
		old := os.Stdin
		os.Stdin = r
		defer func() { os.Stdin = old; r.Close() }()
		return b.vflag("hook", "qemu", "vm-s", op, sub, "-")
	}
	xml := hookDomainXML("vm-s", xmlHostdevIface("0x61", "0x00", "0x4", "52:54:00:aa:00:05"))
	if out, errs, code := run("migrate", "begin", "garbage"); code != 0 || out != "" || errs != "" {
		t.Fatalf("migrate: exit %d stdout %q stderr %q", code, out, errs)
	}
	if _, errs, code := run("prepare", "begin", xml); code != 0 {
		t.Fatalf("prepare: exit %d: %s", code, errs)
	}
	if !strings.Contains(b.mustVflag(0, "status"), "0000:61:00.4 driver - mac 52:54:00:aa:00:05") {
		t.Fatal("prepare did not set the VF MAC")
	}
	if _, errs, code := run("release", "end", xml); code != 0 {
		t.Fatalf("release: exit %d: %s", code, errs)
	}
	if got := b.dump(); got != base {
		t.Fatalf("release did not reset the host:\n%s", testbed.DiffText(base, got))
	}
}

func mustHookDir(state, domain string) string {
	d, err := hook.Dir(state, domain)
	if err != nil {
		panic(err)
	}
	return d
}

// TestHookArgsAreLibvirts: a domain name that looks like an option must not
// steer the root hook (its state dir, its config) when a hook script does
// not pass "--"; after "--" it is just the domain's name.
func TestHookArgsAreLibvirts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{args: []string{"--config", "/etc/vflag/vflag.yaml", "hook", "qemu", "vm1", "prepare", "begin", "-"}},
		{args: []string{"hook", "qemu", "--domain-xml", "/tmp/d.xml", "vm1", "release", "end", "-"}},
		{args: []string{"hook", "qemu", "--domain-xml=/tmp/d.xml", "vm1", "release", "end", "-"}},
		{args: []string{"--state-dir", "/var/lib/vflag", "hook", "qemu", "--", "--state-dir=/tmp/x", "prepare", "begin", "-"}},
		{args: []string{"up", "--state-dir=/tmp/x"}},
		{args: []string{"hook", "qemu", "--state-dir=/tmp/x", "prepare", "begin", "-"}, err: `argument "--state-dir=/tmp/x" would be read as an option`},
		{args: []string{"hook", "qemu", "-v", "prepare", "begin", "-"}, err: `argument "-v"`},
		{args: []string{"hook", "qemu", "vm1", "prepare", "begin", "--config=/home/u/evil.yaml"}, err: `"--config=/home/u/evil.yaml"`},
	} {
		err := hookArgsAreLibvirts(tc.args)
		if tc.err == "" && err != nil {
			t.Errorf("%q: %v", tc.args, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: err %v, want %q", tc.args, err, tc.err)
		}
	}
	// Through the binary's entry point: nothing runs.
	var out, errb bytes.Buffer
	dir := t.TempDir()
	code := run(context.Background(), []string{"--state-dir", dir, "hook", "qemu", "--state-dir=" + dir + "/evil", "release", "end", "-"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "would be read as an option") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if _, err := os.Stat(dir + "/evil"); !os.IsNotExist(err) {
		t.Errorf("the hook used the state dir its domain name gave: %v", err)
	}
}
