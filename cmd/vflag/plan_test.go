package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/testbed"
)

// simulatedExample turns an example config into one for the test bed: the
// bed's OVSDB and libvirt, the userspace datapath, and (when it has none) a
// sim section with one simulated NIC per group carrying its PFs.
func simulatedExample(t *testing.T, d daemons, text string) (string, *config.Config) {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	m["ovsdb"], m["libvirt"] = d.ovs.Endpoint(), d.virt.URI()
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	groups := m["groups"].([]any)
	for _, g := range groups {
		gm := g.(map[string]any)
		if _, ovn := gm["ovn"]; ovn && gm["ovs"] == nil { // br-int's ovs section, for its datapath
			gm["ovs"] = map[string]any{}
		}
		if o, ok := gm["ovs"].(map[string]any); ok {
			o["datapath_type"] = "netdev"
		}
	}
	if _, ok := m["sim"]; !ok {
		var nics []any
		for gi, g := range cfg.Groups {
			var pfs []any
			for pi, ref := range g.PFs {
				pci, netdev := fmt.Sprintf("0000:%02x:00.%d", 0x61+gi, pi), ref
				if strings.Contains(ref, ":") {
					pci, netdev = ref, fmt.Sprintf("enp%ds0f%d", 0x61+gi, pi)
				}
				pfs = append(pfs, map[string]any{"pci": pci, "netdev": netdev})
			}
			nics = append(nics, map[string]any{"name": fmt.Sprintf("nic%d", gi), "total_vfs": max(g.NumVFs, 8), "pfs": pfs})
		}
		m["sim"] = map[string]any{"nics": nics}
	}
	if sim, ok := m["sim"].(map[string]any); ok && d.ovs.Netns() != "" {
		sim["mirror_netns"] = d.ovs.Netns()
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), cfg
}

// changedIDs are the ids of the steps a report says changed, sorted.
func changedIDs(t testing.TB, out string) []string {
	t.Helper()
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, out)
	}
	return rep.ChangedIDs()
}

// TestPlanMatchesUp: for every example config, on a fresh simulated host
// with a real OVS and libvirtd, the steps plan says would change are
// exactly the steps up then changes, by id; after up, plan says nothing.
func TestPlanMatchesUp(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	d := poolDaemons(t) // an example may have a VF pool (vflag-simhost.yaml)
	defined := map[string]bool{"vm1": true}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text, cfg := simulatedExample(t, d, string(raw))
			for _, g := range cfg.Groups {
				for _, a := range g.Attachments {
					if !defined[a.Domain] { // the examples share the daemons
						d.virt.DefineDomain(t, a.Domain)
						defined[a.Domain] = true
					}
				}
			}
			b := newBed(t, d, "")
			if err := os.WriteFile(b.config, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			b.initSim()
			plan := changedIDs(t, b.mustVflag(2, "plan", "-o", "json", "--detailed-exit-codes"))
			up := changedIDs(t, b.mustVflag(2, "up", "-o", "json", "--detailed-exit-codes"))
			if strings.Join(plan, "\n") != strings.Join(up, "\n") {
				t.Fatalf("plan and up differ:\n%s", testbed.DiffText(strings.Join(plan, "\n"), strings.Join(up, "\n")))
			}
			if len(up) < 5 {
				t.Fatalf("up changed only %v", up)
			}
			t.Logf("%d steps, plan == up: %s", len(up), strings.Join(up, " "))
			if again := changedIDs(t, b.mustVflag(0, "plan", "-o", "json", "--detailed-exit-codes")); len(again) != 0 {
				t.Fatalf("plan after up: %v", again)
			}
			b.mustVflag(0, "down")
		})
	}
}

// TestPFMustBeAPort: a bond or a VF representor given as a PF is refused
// for what it is, before any write.
func TestPFMustBeAPort(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.upJSON(2)
	var st struct {
		Groups []struct {
			VFs []struct {
				Representor string `json:"representor"`
			} `json:"vfs"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(b.mustVflag(0, "status", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	rep := st.Groups[0].VFs[0].Representor
	if rep == "" {
		t.Fatal("no representor in status")
	}
	text := strings.Replace(mustReadFile(t, b.config), "pfs: [ens1f0np0, ens1f1np1]", "pfs: [bond0, "+rep+"]", 1)
	text = strings.Replace(text, "name: lag0", "name: lag1", 1)
	text = strings.Replace(text, "name: bond0", "name: bond1", 1)
	text = strings.Replace(text, "bridge: br-lag", "bridge: br-x", 1)
	if err := os.WriteFile(b.config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	base := b.dump()
	_, errs, code := b.vflag("plan")
	if code != 1 {
		t.Fatalf("plan: exit %d\n%s", code, errs)
	}
	for _, want := range []string{`groups[0].pfs[0]: "bond0" is a bond, not a physical port`, `groups[0].pfs[1]: "` + rep + `" is a VF representor (phys_port_name pf0vf0)`, "preflight failed", "vflag doctor"} {
		if !strings.Contains(errs, want) {
			t.Errorf("error lacks %q:\n%s", want, errs)
		}
	}
	if got := b.dump(); got != base {
		t.Fatalf("plan changed the host:\n%s", testbed.DiffText(base, got))
	}
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
