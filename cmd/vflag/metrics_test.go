package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/status"
	"github.com/vflag/vflag/internal/status/statustest"
	"github.com/vflag/vflag/internal/validate"
)

// legacyConfig is a legacy-mode group on the example's simulated NIC: VFs
// with MACs and one attachment, no bond, LAG or OVS.
const legacyConfig = `
ovsdb: unix:/var/run/openvswitch/db.sock
libvirt: qemu:///system
groups:
  - name: leg0
    eswitch: legacy
    pfs: [ens1f0np0]
    numvfs: 3
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:20:00:00"}
      - {pf: 0, vf: 1, mac: "52:54:00:20:00:01"}
    attachments:
      - {domain: vm1, pf: 0, vf: 0}
sim:
  nics:
    - name: cx6lx
      total_vfs: 8
      pfs:
        - {pci: "0000:61:00.0", netdev: ens1f0np0}
        - {pci: "0000:61:00.1", netdev: ens1f1np1}
`

// TestStatusPrometheus runs `status -o prometheus` on simulated hosts in
// several states and checks the samples, and that node_exporter's parser
// (prometheus/common/expfmt) accepts the whole output with HELP and TYPE
// for every family.
func TestStatusPrometheus(t *testing.T) {
	d := startDaemons(t)
	setLink := func(name string, up bool) func(t *testing.T, b *bed) {
		return func(t *testing.T, b *bed) {
			h := b.openSim(t)
			defer h.Close()
			if err := h.SetLinkUp(name, up); err != nil {
				t.Fatal(err)
			}
		}
	}
	switchdevOnly := []string{"vflag_lag_active", "vflag_lag_info", "vflag_bond_slaves", "vflag_bond_slaves_up", "vflag_bond_mtu", "vflag_bond_min_links", "vflag_bond_updelay_seconds", "vflag_bond_downdelay_seconds", "vflag_bond_lacp_ports", "vflag_bond_lacp_partner", "vflag_ovs_hw_offload", "vflag_ovs_bridge_ports", "vflag_ovs_interface_mtu", "vflag_ovs_max_idle_seconds"}
	tests := []struct {
		name   string
		config string // "" = the example (switchdev, VF-LAG)
		up     bool
		setup  func(t *testing.T, b *bed) // after up
		want   []string                   // exact sample lines
		absent []string                   // families without samples
	}{
		{
			name: "switchdev before up",
			want: []string{
				`vflag_group_info{group="lag0",eswitch="switchdev"} 1`,
				// Never brought up: the one problem "not up", not the
				// differences from the config one by one.
				`vflag_group_problems{group="lag0"} 1`,
				`vflag_lag_active{group="lag0"} 0`,
				`vflag_bond_slaves{group="lag0",bond="bond0"} 0`,
				`vflag_bond_slaves_up{group="lag0",bond="bond0"} 0`,
				`vflag_pf_vfs{group="lag0",pf="ens1f0np0",pci="0000:61:00.0"} 0`,
				`vflag_vfs{group="lag0"} 0`,
				`vflag_vfs_attached{group="lag0"} 0`,
			},
			absent: []string{"vflag_vf_info"},
		},
		{
			name: "switchdev after up", up: true,
			config: strings.Replace(strings.Replace(strings.Replace(exampleConfig, "      miimon: 100\n", "      miimon: 100\n      updelay: 200\n      min_links: 1\n", 1), "    numvfs: 4", "    mtu: 9000\n    numvfs: 4", 1), "      hw_offload: true\n", "      hw_offload: true\n      max_idle: 2500\n", 1),
			want: []string{
				`vflag_group_problems{group="lag0"} 0`,
				`vflag_pf_up{group="lag0",pf="ens1f0np0",pci="0000:61:00.0"} 1`,
				`vflag_pf_up{group="lag0",pf="ens1f1np1",pci="0000:61:00.1"} 1`,
				`vflag_pf_vfs{group="lag0",pf="ens1f1np1",pci="0000:61:00.1"} 4`,
				`vflag_lag_active{group="lag0"} 1`,
				`vflag_bond_slaves{group="lag0",bond="bond0"} 2`,
				`vflag_bond_slaves_up{group="lag0",bond="bond0"} 2`,
				`vflag_bond_lacp_ports{group="lag0",bond="bond0"} 2`,
				`vflag_bond_lacp_partner{group="lag0",bond="bond0"} 1`,
				`vflag_bond_min_links{group="lag0",bond="bond0"} 1`,
				`vflag_bond_mtu{group="lag0",bond="bond0"} 9000`,
				`vflag_pf_mtu{group="lag0",pf="ens1f1np1",pci="0000:61:00.1"} 9000`,
				`vflag_ovs_interface_mtu{group="lag0",bridge="br-lag",port="bond0"} 9000`,
				`vflag_ovs_max_idle_seconds{group="lag0",bridge="br-lag"} 2.5`,
				`vflag_bond_updelay_seconds{group="lag0",bond="bond0"} 0.2`,
				`vflag_bond_downdelay_seconds{group="lag0",bond="bond0"} 0`,
				`vflag_ovs_hw_offload{group="lag0",bridge="br-lag"} 1`,
				`vflag_vfs{group="lag0"} 8`,
				`vflag_vfs_attached{group="lag0"} 2`,
			},
		},
		{
			name: "switchdev, one slave without link", up: true, setup: setLink("ens1f1np1", false),
			want: []string{
				`vflag_pf_up{group="lag0",pf="ens1f0np0",pci="0000:61:00.0"} 1`,
				`vflag_pf_up{group="lag0",pf="ens1f1np1",pci="0000:61:00.1"} 0`,
				`vflag_bond_slaves{group="lag0",bond="bond0"} 2`,
				`vflag_bond_slaves_up{group="lag0",bond="bond0"} 1`,
				`vflag_bond_lacp_ports{group="lag0",bond="bond0"} 1`,
				`vflag_group_problems{group="lag0"} 2`, // validate's bond/slave/ens1f1np1 and the bond's link.up plan would do; LACP is fine
			},
		},
		{
			name: "switchdev, switch ports without LACP", up: true,
			setup: func(t *testing.T, b *bed) {
				b.withSim(func(h *sim.Host) error { return h.SetSwitchLACP("cx6lx", false) })
			},
			want: []string{
				`vflag_bond_slaves_up{group="lag0",bond="bond0"} 2`,
				`vflag_bond_lacp_ports{group="lag0",bond="bond0"} 1`,
				`vflag_bond_lacp_partner{group="lag0",bond="bond0"} 0`,
				`vflag_group_problems{group="lag0"} 2`, // bond/lacp, and lag/ports: port 2 carries no VF traffic
			},
		},
		{
			name: "legacy after up", config: legacyConfig, up: true,
			want: []string{
				`vflag_group_info{group="leg0",eswitch="legacy"} 1`,
				`vflag_group_problems{group="leg0"} 0`,
				`vflag_pf_up{group="leg0",pf="ens1f0np0",pci="0000:61:00.0"} 1`,
				`vflag_pf_vfs{group="leg0",pf="ens1f0np0",pci="0000:61:00.0"} 3`,
				`vflag_vfs{group="leg0"} 3`,
				`vflag_vfs_attached{group="leg0"} 1`,
			},
			absent: switchdevOnly,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, d, tc.config)
			b.initSim()
			if tc.up {
				b.upJSON(2)
				// The daemons are shared: leave them at their baseline.
				defer b.mustVflag(0, "down")
			}
			if tc.setup != nil {
				tc.setup(t, b)
			}
			out := b.statusAny("-o", "prometheus")
			t.Log(out)
			fams := statustest.CheckExposition(t, out)
			lines := map[string]bool{}
			for _, l := range strings.Split(out, "\n") {
				lines[l] = true
			}
			for _, w := range tc.want {
				if !lines[w] {
					t.Errorf("no sample line %s", w)
				}
			}
			for _, name := range tc.absent {
				if fams[name] > 0 {
					t.Errorf("%s has %d samples, want none", name, fams[name])
				}
			}
			// Every VF has one info sample, with what status -o json says.
			hs := b.statusJSON()
			nvf := 0
			for _, g := range hs.Groups {
				nvf += len(g.VFs)
				for _, v := range g.VFs {
					if v.Domain == "" {
						continue
					}
					want := `domain="` + v.Domain + `"`
					found := false
					for l := range lines {
						if strings.HasPrefix(l, "vflag_vf_info{") && strings.Contains(l, `pci="`+v.PCI+`"`) && strings.Contains(l, want) && strings.Contains(l, `mac="`+v.MAC+`"`) {
							found = true
						}
					}
					if !found {
						t.Errorf("no vflag_vf_info for %s with %s and mac %s", v.PCI, want, v.MAC)
					}
				}
			}
			if fams["vflag_vf_info"] != nvf {
				t.Errorf("vflag_vf_info has %d samples, status has %d VFs", fams["vflag_vf_info"], nvf)
			}
		})
	}
}

// statusJSON runs `status -o json` and decodes it; it exits 0 when no
// group has a problem, exitProblems when one has.
func (b *bed) statusJSON() status.HostStatus {
	b.t.Helper()
	out, errs, code := b.vflag("status", "-o", "json")
	var hs status.HostStatus
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		b.t.Fatalf("status -o json: exit %d: %v\n%s\n%s", code, err, out, errs)
	}
	want := 0
	for _, g := range hs.Groups {
		switch {
		case g.NotUp && len(g.Problems) == 1:
			if want == 0 {
				want = exitNotUp
			}
		case len(g.Problems) > 0:
			want = exitProblems
		}
	}
	if code != want {
		b.t.Fatalf("status -o json: exit %d, want %d\n%s\n%s", code, want, out, errs)
	}
	return hs
}

func TestStatusPrometheusOnlyForStatus(t *testing.T) {
	var out, errb strings.Builder
	if code := run(t.Context(), []string{"--config", "/nonexistent", "plan", "-o", "prometheus"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "--output prometheus is for `vflag status` only") {
		t.Fatalf("plan -o prometheus: exit %d, stderr %q", code, errb.String())
	}
	if code := run(t.Context(), []string{"--config", "/nonexistent", "status", "-o", "yaml"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `"yaml" is not text or json`) {
		t.Fatalf("status -o yaml: exit %d, stderr %q", code, errb.String())
	}
}

// rateConfig is the example with a rate group and per-VF limits.
var rateConfig = strings.NewReplacer(
	`      - {pf: 0, vf: 0, mac: "52:54:00:10:00:00", vlan: 100}`, `      - {pf: 0, vf: 0, mac: "52:54:00:10:00:00", vlan: 100, tx_max: 100, tx_share: 10, rate_group: tenant1}`,
	`      - {pf: 1, vf: 0, mac: "52:54:00:10:01:00", vlan: 200}`, `      - {pf: 1, vf: 0, mac: "52:54:00:10:01:00", vlan: 200, tx_max: 300}`,
	"    ovs:\n", "    rate_groups:\n      - {name: tenant1, tx_max: 1000, tx_share: 50}\n    ovs:\n",
).Replace(exampleConfig)

// TestStatusRates: after up with rates, status shows the leaves and nodes
// in text, JSON and Prometheus; a node deleted behind vflag's back is a
// problem.
func TestStatusRates(t *testing.T) {
	if rateConfig == exampleConfig {
		t.Fatal("rateConfig edits nothing: the example changed")
	}
	d := startDaemons(t)
	b := newBed(t, d, rateConfig)
	b.initSim()
	b.upJSON(2)
	defer b.mustVflag(0, "down")
	text := b.mustVflag(0, "status")
	for _, w := range []string{
		"domain vm1 rate tx_max 100Mbit tx_share 10Mbit group tenant1\n",
		"rate tx_max 300Mbit tx_share - group -\n",
		"  rate group tenant1 on pci/0000:61:00.0 tx_max 1000Mbit tx_share 50Mbit leaves 1\n",
		"  rate group tenant1 on pci/0000:61:00.1 tx_max 1000Mbit tx_share 50Mbit leaves 0\n",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("status text lacks %q:\n%s", w, text)
		}
	}
	hs := b.statusJSON()
	g := hs.Groups[0]
	var got []string
	for _, v := range g.VFs {
		if r := v.Rate; r != nil && r.TxMax != 0 {
			got = append(got, fmt.Sprintf("%s/%d port %d max %d share %d group %s", v.PF, v.Index, r.Port, r.TxMax, r.TxShare, r.Parent))
		}
	}
	if w := "ens1f0np0/0 port 1 max 100 share 10 group tenant1,ens1f1np1/0 port 65537 max 300 share 0 group "; strings.Join(got, ",") != w {
		t.Errorf("status json leaves %q, want %q", strings.Join(got, ","), w)
	}
	if len(g.RateGroups) != 2 || !g.RateGroups[0].Present || g.RateGroups[0].TxMax != 1000 || g.RateGroups[0].Leaves != 1 {
		t.Errorf("status json rate groups %+v", g.RateGroups)
	}
	out := b.mustVflag(0, "status", "-o", "prometheus")
	statustest.CheckExposition(t, out)
	for _, w := range []string{
		`vflag_vf_tx_max_mbps{group="lag0",pf="ens1f0np0",vf="0",rate_group="tenant1"} 100`,
		`vflag_vf_tx_share_mbps{group="lag0",pf="ens1f0np0",vf="0",rate_group="tenant1"} 10`,
		`vflag_vf_tx_max_mbps{group="lag0",pf="ens1f1np1",vf="0",rate_group=""} 300`,
		`vflag_vf_tx_max_mbps{group="lag0",pf="ens1f1np1",vf="1",rate_group=""} 0`,
		`vflag_rate_group_tx_max_mbps{group="lag0",rate_group="tenant1",devlink="pci/0000:61:00.0"} 1000`,
		`vflag_rate_group_tx_share_mbps{group="lag0",rate_group="tenant1",devlink="pci/0000:61:00.1"} 50`,
		`vflag_rate_group_vfs{group="lag0",rate_group="tenant1",devlink="pci/0000:61:00.0"} 1`,
	} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("no sample line %s", w)
		}
	}
	// Behind vflag's back: the node on the second PF goes.
	b.withSim(func(h *sim.Host) error {
		return h.DelRateNode(eswitch.Devlink{Bus: "pci", Device: "0000:61:00.1"}, "tenant1")
	})
	if text := b.mustVflag(exitProblems, "status"); !strings.Contains(text, "problem: rate/pci/0000:61:00.1/tenant1: no rate node tenant1 on pci/0000:61:00.1\n") {
		t.Errorf("status does not report the missing node:\n%s", text)
	}
}

// TestValidateRates: vflag validate checks each rate group's node and each
// VF's leaf against the config; a leaf changed behind vflag's back fails
// its check, naming what it has and what the config wants.
func TestValidateRates(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, rateConfig)
	b.initSim()
	b.upJSON(2)
	defer b.mustVflag(0, "down")
	rep := b.validateJSON(0, "--allow-skip")
	pass := checksBy(rep, validate.Pass)
	for _, n := range []string{"rate/pci/0000:61:00.0/tenant1", "rate/pci/0000:61:00.1/tenant1", "rate/ens1f0np0/vf0", "rate/ens1f1np1/vf0"} {
		if _, ok := pass[n]; !ok {
			t.Errorf("no passing check %s (failed: %v)", n, names(checksBy(rep, validate.Fail)))
		}
	}
	if c := pass["rate/ens1f0np0/vf0"]; !strings.Contains(c.Detail, "tx_max 100Mbit tx_share 10Mbit parent tenant1") {
		t.Errorf("rate/ens1f0np0/vf0: %q", c.Detail)
	}
	b.withSim(func(h *sim.Host) error {
		return h.SetRateLeaf(eswitch.Devlink{Bus: "pci", Device: "0000:61:00.0"}, 1, 0, 5*eswitch.BytesPerMbit)
	})
	rep = b.validateJSON(1, "--allow-skip")
	failed := checksBy(rep, validate.Fail)
	c, ok := failed["rate/ens1f0np0/vf0"]
	if !ok || !strings.Contains(c.Detail, "has tx_max 5Mbit tx_share - parent tenant1, want tx_max 100Mbit tx_share 10Mbit parent tenant1") {
		t.Errorf("changed leaf: failed %v, detail %q", names(failed), c.Detail)
	}
}
