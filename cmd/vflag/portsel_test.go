package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/validate"
)

// TestPortSelectionWithoutFlowTable (issue 36, rule 4): on a NIC without
// mlx5's port_select_flow_table capability an 802.3ad bond's LAG selects
// ports by queue affinity. up converges; status shows the port_sel_mode;
// validate passes and says what it means (each VF on its own PF's port),
// and its lag/ports check still finds a port that carries no VF traffic
// (no LACP partner: port 2 maps to port 1).
func TestPortSelectionWithoutFlowTable(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, strings.Replace(exampleConfig, "      total_vfs: 8\n", "      total_vfs: 8\n      port_select_flow_table: \"off\"\n", 1))
	b.upJSON(2)
	if st := b.statusAny(); !strings.Contains(st, "lag active type switchdev port_sel_mode queue_affinity") {
		t.Errorf("status does not show the port selection:\n%s", st)
	}
	rep := b.validateJSON(0)
	if c := checksBy(rep, validate.Pass)["lag"]; !strings.Contains(c.Detail, "port_sel_mode queue_affinity") || !strings.Contains(c.Detail, "each VF sends on its own PF's port") {
		t.Errorf("validate's lag check: %q", c.Detail)
	}
	if c := checksBy(rep, validate.Pass)[validate.LAGPortsName]; !strings.Contains(c.Detail, "lag/mapping: 1:1 2:2") {
		t.Errorf("validate's %s: %q", validate.LAGPortsName, c.Detail)
	}
	b.withSim(func(h *sim.Host) error { return h.SetSwitchLACP("cx6lx", false) })
	if c, ok := checksBy(b.validateJSON(1), validate.Fail)[validate.LAGPortsName]; !ok || !strings.Contains(c.Detail, "lag/mapping: 1:1 2:1") {
		t.Errorf("validate's %s without an LACP partner: %+v", validate.LAGPortsName, c)
	}
	b.mustVflag(0, "down")
}
