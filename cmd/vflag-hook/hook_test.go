package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/cmd/internal/hookcli"
	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/hook"
	"github.com/vflag/vflag/internal/host"
)

const hookConfig = `groups:
  - name: sriov0
    eswitch: legacy
    pfs: [ens1f0np0]
    numvfs: 2
sim:
  nics:
    - name: cx6lx
      total_vfs: 8
      pfs:
        - {pci: "0000:61:00.0", netdev: ens1f0np0}
        - {pci: "0000:61:00.1", netdev: ens1f1np1}
`

// domainXML is a domain with VF 1 of ens1f0np0 (0000:61:00.3).
const domainXML = `<domain type='kvm'><name>vm1</name><devices>
<interface type='hostdev' managed='yes'><mac address='52:54:00:aa:00:01'/>
<source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x3'/></source></interface>
</devices></domain>`

// hookBed is a simulated host with the group's VFs, after up in this boot.
type hookBed struct{ cfg, sim, state string }

func newHookBed(t *testing.T) hookBed {
	t.Helper()
	dir := t.TempDir()
	b := hookBed{cfg: filepath.Join(dir, "vflag.yaml"), sim: filepath.Join(dir, "sim"), state: filepath.Join(dir, "state")}
	if err := os.WriteFile(b.cfg, []byte(hookConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := hookcli.LoadConfig(b.cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(host.Options{SimDir: b.sim, SimSpec: cfg.Sim})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pf, err := eswitch.ResolvePF(h.Kernel, h.FS, "ens1f0np0")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.PCI.SetNumVFs(pf.Dev, 2); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(b.state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := bootgate.New(b.state).MarkReady(); err != nil {
		t.Fatal(err)
	}
	return b
}

// vfMAC is the MAC of VF vf of ens1f0np0 as the PF reports it.
func (b hookBed) vfMAC(t *testing.T, vf int) string {
	t.Helper()
	h, err := host.Open(host.Options{SimDir: b.sim})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.Kernel.Link("ens1f0np0")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range l.VFs {
		if v.ID == vf {
			return v.MAC
		}
	}
	t.Fatalf("ens1f0np0 has no VF %d: %+v", vf, l.VFs)
	return ""
}

func runHook(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &o, &e)
	return o.String(), e.String(), code
}

// TestHookPrepareRelease: vflag-hook, called as the installed script calls
// it (flags before "hook", "--" before libvirt's arguments), sets the VF's
// MAC on prepare, journals it in the domain's journal, and puts the MAC back
// on release; the simulated host comes from --sim or VFLAG_SIM.
func TestHookPrepareRelease(t *testing.T) {
	for _, viaEnv := range []bool{false, true} {
		t.Run(map[bool]string{false: "flag", true: "env"}[viaEnv], func(t *testing.T) {
			b := newHookBed(t)
			before := b.vfMAC(t, 1)
			args := func(op, sub string) []string {
				a := []string{"--config", b.cfg, "--state-dir", b.state}
				if !viaEnv {
					a = append(a, "--sim", b.sim)
				}
				return append(a, "hook", "qemu", "--", "vm1", op, sub, "-")
			}
			if viaEnv {
				t.Setenv("VFLAG_SIM", b.sim)
			}
			dir, err := hook.Dir(b.state, "vm1")
			if err != nil {
				t.Fatal(err)
			}
			if _, stderr, code := runHook(t, domainXML, args("prepare", "begin")...); code != 0 {
				t.Fatalf("prepare: exit %d: %s", code, stderr)
			}
			if got := b.vfMAC(t, 1); got != "52:54:00:aa:00:01" {
				t.Errorf("after prepare: VF 1 MAC %s, want the domain's 52:54:00:aa:00:01", got)
			}
			if _, err := os.Stat(filepath.Join(dir, "journal.json")); err != nil {
				t.Errorf("after prepare: no domain journal: %v", err)
			}
			if _, stderr, code := runHook(t, domainXML, args("release", "end")...); code != 0 {
				t.Fatalf("release: exit %d: %s", code, stderr)
			}
			if got := b.vfMAC(t, 1); got != before {
				t.Errorf("after release: VF 1 MAC %s, want %s back", got, before)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("after release: the domain's journal directory is left: %v", err)
			}
		})
	}
}

// TestRunArgs: what vflag-hook refuses or passes without touching the host.
func TestRunArgs(t *testing.T) {
	state := t.TempDir()
	plain := `<domain type='kvm'><name>vm2</name><devices></devices></domain>`
	for _, c := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string // substring wanted
		stderr string // substring wanted ("" = empty)
	}{
		{"version", []string{"--version"}, "", 0, "vflag-hook dev", ""},
		{"domain named like an option", []string{"--state-dir", state, "hook", "qemu", "--state-dir=/tmp/x", "prepare", "begin", "-"}, plain, 1, "",
			`argument "--state-dir=/tmp/x" would be read as an option`},
		{"no passthrough", []string{"--config", filepath.Join(state, "none.yaml"), "--state-dir", state, "hook", "qemu", "--", "vm2", "prepare", "begin", "-"}, plain, 0, "", ""},
		{"no config: not vflag's", []string{"--config", filepath.Join(state, "none.yaml"), "--state-dir", state, "hook", "qemu", "--", "vm1", "prepare", "begin", "-"}, domainXML, 0, "", ""},
		{"too few arguments", []string{"hook", "qemu", "--", "vm1", "prepare"}, "", 1, "", "accepts between 3 and 4 arg(s)"},
		{"network event passes", []string{"--config", filepath.Join(state, "none.yaml"), "--state-dir", state, "hook", "network", "--", "net1", "started", "begin", "-"}, "<hookData/>", 0, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runHook(t, c.stdin, c.args...)
			if code != c.code || !strings.Contains(stdout, c.stdout) ||
				(c.stderr == "" && stderr != "") || !strings.Contains(stderr, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", code, stdout, stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
}
