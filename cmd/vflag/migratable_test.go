package main

import (
	"strings"
	"testing"
)

// migratableConfig is the example config with vm1's attachments in domain
// dom, the first one migratable (when mig).
func migratableConfig(t *testing.T, dom string, mig bool) string {
	t.Helper()
	old := "      - {domain: vm1, pf: 0, vf: 0, live: true}\n      - {domain: vm1, pf: 1, vf: 0, live: true}\n"
	att := "      - {domain: " + dom + ", pf: 0, vf: 0, live: true"
	if mig {
		att += ", migratable: true"
	}
	att += "}\n"
	cfg := strings.Replace(exampleConfig, old, att, 1)
	if cfg == exampleConfig {
		t.Fatal("example config's attachments not found")
	}
	return cfg
}

// TestMigratable: up makes the teaming pair in a q35 domain, validate
// passes its teaming check, plan then shows nothing; turning migratable
// off is a change plan shows and up makes; down removes it all. A pc
// domain is refused before any write, naming the field.
func TestMigratable(t *testing.T) {
	d := startDaemons(t)
	d.virt.DefineDomainMachine(t, "vmq", "q35")

	// Refused before any write: vm1 is a pc machine.
	b := newBed(t, d, migratableConfig(t, "vm1", true))
	b.initSim()
	before := b.dump()
	_, errs, code := b.vflag("up")
	if code == 0 || !strings.Contains(errs, `groups[0].attachments[0].domain: "vm1" has machine type "pc-`) || !strings.Contains(errs, "needs a q35 machine") {
		t.Fatalf("up on a pc domain: exit %d\n%s", code, errs)
	}
	if got := b.dump(); got != before {
		t.Fatal("a refused up changed the host")
	}
	if _, errs, code := b.vflag("plan"); code == 0 || !strings.Contains(errs, "needs a q35 machine") {
		t.Fatalf("plan on a pc domain: exit %d\n%s", code, errs)
	}

	b = newBed(t, d, migratableConfig(t, "vmq", true))
	plan := b.mustVflag(2, "plan", "--detailed-exit-codes")
	if !strings.Contains(plan, "attach standby ua-vflag-525400100000 (virtio on br-lag, vlan 100)") && !strings.Contains(plan, "attach the teaming pair (standby ua-vflag-525400100000 on br-lag) of VF") {
		t.Fatalf("plan does not show the pair:\n%s", plan)
	}
	b.upJSON(2)
	x := d.virt.DomainXML(t, "vmq")
	for _, want := range []string{
		"<teaming type='persistent'/>",
		"<alias name='ua-vflag-525400100000'/>",
		"<teaming type='transient' persistent='ua-vflag-525400100000'/>",
		"<source bridge='br-lag'/>",
		"<virtualport type='openvswitch'>",
		"<tag id='100'/>",
	} {
		if !strings.Contains(x, want) {
			t.Errorf("vmq lacks %s:\n%s", want, x)
		}
	}
	out, _, _ := b.vflag("validate")
	if !strings.Contains(out, "teaming/vmq/pf0vf0") || !strings.Contains(out, "standby ua-vflag-525400100000 on br-lag vlan 100") {
		t.Errorf("validate lacks a passing teaming check:\n%s", out)
	}
	b.mustVflag(0, "plan", "--detailed-exit-codes")

	// migratable off: a change plan shows; up makes it.
	b2 := newBed(t, d, migratableConfig(t, "vmq", false))
	b2.state, b2.simDir = b.state, b.simDir
	plan = b2.mustVflag(2, "plan", "--detailed-exit-codes")
	if !strings.Contains(plan, "detach VF") || !strings.Contains(plan, "detach standby ua-vflag-525400100000") {
		t.Fatalf("plan of migratable off:\n%s", plan)
	}
	b2.upJSON(2)
	if x := d.virt.DomainXML(t, "vmq"); strings.Contains(x, "teaming") || !strings.Contains(x, "<interface type='hostdev'") {
		t.Errorf("after migratable off:\n%s", x)
	}
	// On again, then down: nothing of the pair left.
	b.upJSON(2)
	b.mustVflag(0, "down")
	if x := d.virt.DomainXML(t, "vmq"); strings.Contains(x, "teaming") || strings.Contains(x, "<interface") || strings.Contains(x, "vflag.dev") {
		t.Errorf("after down:\n%s", x)
	}
}
