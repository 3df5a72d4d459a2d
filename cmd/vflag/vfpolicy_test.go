package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/internal/validate"
)

// policyVariant is one config of the legacy VF policy table: a legacy
// group on both ports of one simulated ConnectX with VF 0 of the first PF
// and VF 1 of the second; vf00 and vf11 are the extra settings of each
// (YAML flow-map entries, "" none).
type policyVariant struct {
	name, vf00, vf11 string
	numvfs           int // per PF; 0: 2
}

// policyVariants: each setting alone, all of them, and all of them changed.
// TestConvergeTransitions has no legacy group, so this is its legacy part.
func policyVariants() []policyVariant {
	return []policyVariant{
		{name: "none"},
		{name: "trust", vf00: "trust: true"},
		{name: "spoofchk", vf00: "spoofchk: true"},
		{name: "link_state", vf11: "link_state: disable"},
		{name: "rates", vf11: "min_tx_rate: 100, max_tx_rate: 1000"},
		{name: "max_rate", vf11: "max_tx_rate: 500"},
		{name: "vlan_qos", vf00: "vlan: 100, qos: 3"},
		{name: "vlan", vf00: "vlan: 42"},
		{name: "all", vf00: "trust: true, spoofchk: true, vlan: 100, qos: 3", vf11: "link_state: disable, min_tx_rate: 100, max_tx_rate: 1000"},
		{name: "all-changed", vf00: "trust: false, spoofchk: true, vlan: 200", vf11: "link_state: enable, max_tx_rate: 2000"},
		// numvfs 2 -> 4 and back makes every VF again: its MAC and policy
		// are gone with it and set again (plan must say so too).
		{name: "all-numvfs4", numvfs: 4, vf00: "trust: true, spoofchk: true, vlan: 100, qos: 3", vf11: "link_state: disable, min_tx_rate: 100, max_tx_rate: 1000"},
		{name: "trust-numvfs4", numvfs: 4, vf00: "trust: true"},
	}
}

// policyConfig renders a legacy group; nic is extra YAML of the NIC (sim).
func policyConfig(d daemons, x policyVariant, nic string) string {
	entry := func(pf, vf int, mac, extra string) string {
		if extra != "" {
			extra = ", " + extra
		}
		return fmt.Sprintf("      - {pf: %d, vf: %d, mac: %q%s}\n", pf, vf, mac, extra)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ovsdb: %s\nlibvirt: %s\ngroups:\n", d.ovs.Endpoint(), d.virt.URI())
	numvfs := x.numvfs
	if numvfs == 0 {
		numvfs = 2
	}
	fmt.Fprintf(&b, "  - name: leg0\n    eswitch: legacy\n    pfs: [ens1f0np0, ens1f1np1]\n    numvfs: %d\n    vfs:\n", numvfs)
	b.WriteString(entry(0, 0, "52:54:00:30:00:00", x.vf00))
	b.WriteString(entry(1, 1, "52:54:00:30:01:01", x.vf11))
	fmt.Fprintf(&b, "sim:\n  mirror_netns: %s\n  nics:\n", d.ovs.Netns())
	b.WriteString("    - name: cx6lx\n      total_vfs: 8\n" + nic + "      pfs:\n        - {pci: \"0000:61:00.0\", netdev: ens1f0np0}\n        - {pci: \"0000:61:00.1\", netdev: ens1f1np1}\n")
	b.WriteString("  latency:\n    vf_create: 1ms\n")
	return b.String()
}

// TestConvergeLegacyVFPolicy: each VF policy setting applies on a clean
// host, converges (a second up changes nothing), changes, is pruned when
// removed from the config (the prior value comes back) and is undone by
// down: every config's fresh state is recorded, then the configs are
// visited twice in random order on one host (VFLAG_CONVERGE_SEED). Before
// every up, on the clean host and at every transition, plan predicts
// exactly the steps up changes (the same ids, as many).
func TestConvergeLegacyVFPolicy(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	vs := policyVariants()
	fresh := map[string]string{}
	var baseline string
	for _, x := range vs {
		b := newBed(t, d, "")
		b.useConfig(policyConfig(d, x, ""))
		b.initSim()
		base := canonical(b.dump())
		if baseline == "" {
			baseline = base
		}
		plan := changedIDs(t, b.mustVflag(2, "plan", "-o", "json", "--detailed-exit-codes"))
		if up := upReport(t, b).ChangedIDs(); !slices.Equal(plan, up) {
			t.Fatalf("%s: plan on a clean host changes %v, up %v", x.name, plan, up)
		}
		fresh[x.name] = canonical(b.dump())
		b.mustVflag(0, "down")
		if got := canonical(b.dump()); got != base {
			t.Fatalf("%s: down after a fresh up does not give the baseline:\n%s", x.name, testbed.DiffText(base, got))
		}
	}
	if fresh["all"] == fresh["none"] || fresh["all"] == fresh["all-changed"] {
		t.Fatal("the policy settings change nothing on the host")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("VFLAG_CONVERGE_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (VFLAG_CONVERGE_SEED=%d reproduces the order)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	order := append(rng.Perm(len(vs)), rng.Perm(len(vs))...)
	b := newBed(t, d, "")
	b.useConfig(policyConfig(d, vs[0], ""))
	b.initSim()
	prev := "(clean)"
	for _, i := range order {
		x := vs[i]
		b.useConfig(policyConfig(d, x, ""))
		plan := changedIDs(t, b.mustVflagAny(0, 2)("plan", "-o", "json", "--detailed-exit-codes"))
		rep := upReport(t, b)
		if rep.Error != "" {
			t.Fatalf("%s -> %s: up failed: %s", prev, x.name, rep.Error)
		}
		if up := rep.ChangedIDs(); !slices.Equal(plan, up) {
			t.Errorf("%s -> %s: plan predicts %d change(s), up made %d:\n%s", prev, x.name, len(plan), len(up), testbed.DiffText(strings.Join(plan, "\n"), strings.Join(up, "\n")))
		}
		if got := canonical(b.dump()); got != fresh[x.name] {
			t.Fatalf("%s -> %s: the host differs from %s's fresh state (changed %v):\n%s", prev, x.name, x.name, rep.ChangedIDs(), testbed.DiffText(fresh[x.name], got))
		}
		if again := upReport(t, b).ChangedIDs(); len(again) != 0 {
			t.Fatalf("%s -> %s: a second up changed %v", prev, x.name, again)
		}
		t.Logf("%s -> %s: %d change(s) %v", prev, x.name, len(rep.ChangedIDs()), rep.ChangedIDs())
		prev = x.name
	}
	b.mustVflag(0, "down")
	if got := canonical(b.dump()); got != baseline {
		t.Fatalf("down after the walk does not give the baseline:\n%s", testbed.DiffText(baseline, got))
	}
}

// TestVFPolicyFields: per setting, on a host whose VFs already exist with
// an operator's policy: plan and up change exactly that setting's step,
// status shows the value (text, JSON, Prometheus for the rates), validate
// checks it, a change behind vflag's back fails validate and the next up
// repairs it, removing the setting from the config restores the operator's
// value, and down restores it too.
func TestVFPolicyFields(t *testing.T) {
	d := startDaemons(t)
	// The operator's policy, before vflag: VFs exist, every value non-default.
	prior := eswitch.VFPolicy{Vlan: 7, Qos: 1, Trust: true, Spoofchk: true, LinkState: eswitch.VFLinkEnable, MinTxRate: 5, MaxTxRate: 50}
	tests := []struct {
		field  string // the config's setting
		vf00   string
		id     string
		want   func(p eswitch.VFPolicy) bool
		status string // in the status text
		tamper func(h *sim.Host) error
	}{
		{"trust", "trust: false", "sriov.vftrust/ens1f0np0/0",
			func(p eswitch.VFPolicy) bool { return !p.Trust }, "trust off",
			func(h *sim.Host) error { return h.SetVFTrust("ens1f0np0", 0, true) }},
		{"spoofchk", "spoofchk: false", "sriov.vfspoofchk/ens1f0np0/0",
			func(p eswitch.VFPolicy) bool { return !p.Spoofchk }, "spoofchk off",
			func(h *sim.Host) error { return h.SetVFSpoofchk("ens1f0np0", 0, true) }},
		{"link_state", "link_state: disable", "sriov.vflinkstate/ens1f0np0/0",
			func(p eswitch.VFPolicy) bool { return p.LinkState == eswitch.VFLinkDisable }, "link-state disable",
			func(h *sim.Host) error { return h.SetVFLinkState("ens1f0np0", 0, "auto") }},
		{"rates", "min_tx_rate: 100, max_tx_rate: 1000", "sriov.vfrate/ens1f0np0/0",
			func(p eswitch.VFPolicy) bool { return p.MinTxRate == 100 && p.MaxTxRate == 1000 }, "min_tx_rate 100 max_tx_rate 1000",
			func(h *sim.Host) error { return h.SetVFRate("ens1f0np0", 0, 0, 0) }},
		{"vlan", "vlan: 100, qos: 3", "sriov.vfvlan/ens1f0np0/0",
			func(p eswitch.VFPolicy) bool { return p.Vlan == 100 && p.Qos == 3 }, "vlan 100 qos 3",
			func(h *sim.Host) error { return h.SetVFVlanQos("ens1f0np0", 0, 100, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			b := newBed(t, d, "")
			b.useConfig(policyConfig(d, policyVariant{name: "none"}, ""))
			b.initSim()
			b.withSim(func(h *sim.Host) error {
				if err := h.FS().WriteFile("/sys/bus/pci/devices/0000:61:00.0/sriov_numvfs", []byte("2")); err != nil {
					return err
				}
				time.Sleep(20 * time.Millisecond) // the VFs appear after vf_create
				return setPolicy(h, "ens1f0np0", 0, prior)
			})
			b.mustVflag(2, "up", "--detailed-exit-codes") // MACs, drivers: the setting is not in the config yet
			baseline := canonical(b.dump())
			policyOf := func() eswitch.VFPolicy {
				for _, g := range b.statusJSON().Groups {
					for _, v := range g.VFs {
						if v.PF == "ens1f0np0" && v.Index == 0 && v.Policy != nil {
							return *v.Policy
						}
					}
				}
				t.Fatal("status has no policy for ens1f0np0 vf 0")
				return eswitch.VFPolicy{}
			}
			if got := policyOf(); got != prior {
				t.Fatalf("status policy before %+v, want the operator's %+v", got, prior)
			}

			b.useConfig(policyConfig(d, policyVariant{name: tt.field, vf00: tt.vf00}, ""))
			plan := changedIDs(t, b.mustVflag(2, "plan", "-o", "json", "--detailed-exit-codes"))
			if !slices.Equal(plan, []string{tt.id}) {
				t.Fatalf("plan changes %v, want [%s]", plan, tt.id)
			}
			if got := upReport(t, b).ChangedIDs(); !slices.Equal(got, []string{tt.id}) {
				t.Fatalf("up changed %v, want [%s]", got, tt.id)
			}
			if got := policyOf(); !tt.want(got) {
				t.Fatalf("after up the PF reports %+v", got)
			}
			if again := upReport(t, b).ChangedIDs(); len(again) != 0 {
				t.Fatalf("a second up changed %v", again)
			}
			if text := b.mustVflag(0, "status"); !strings.Contains(text, tt.status) {
				t.Fatalf("status text lacks %q:\n%s", tt.status, text)
			}
			if tt.field == "rates" {
				prom := b.mustVflag(0, "status", "-o", "prometheus")
				for _, l := range []string{`vflag_vf_max_tx_rate_mbps{group="leg0",pf="ens1f0np0",vf="0"} 1000`, `vflag_vf_min_tx_rate_mbps{group="leg0",pf="ens1f0np0",vf="0"} 100`} {
					if !strings.Contains(prom, l+"\n") {
						t.Fatalf("prometheus lacks %s:\n%s", l, prom)
					}
				}
			}
			check := "vf/ens1f0np0/0/policy"
			if c, ok := checksBy(b.validateJSON(0), validate.Pass)[check]; !ok || !strings.Contains(c.Detail, tt.status) {
				t.Fatalf("validate: no passing %s with %q: %+v", check, tt.status, c)
			}
			b.withSim(tt.tamper)
			if _, ok := checksBy(b.validateJSON(1), validate.Fail)[check]; !ok {
				t.Fatalf("validate does not fail %s after the change behind vflag's back", check)
			}
			if got := upReport(t, b).ChangedIDs(); !slices.Equal(got, []string{tt.id}) {
				t.Fatalf("repair changed %v, want [%s]", got, tt.id)
			}

			// Removed from the config: the prune restores the operator's value.
			b.useConfig(policyConfig(d, policyVariant{name: "none"}, ""))
			rep := upReport(t, b)
			if rep.Error != "" {
				t.Fatalf("up without the setting: %s", rep.Error)
			}
			if got := policyOf(); got != prior {
				t.Fatalf("after the prune the PF reports %+v, want the operator's %+v", got, prior)
			}
			if got := canonical(b.dump()); got != baseline {
				t.Fatalf("the prune did not give the state before:\n%s", testbed.DiffText(baseline, got))
			}

			// Set again, then down restores the operator's value too.
			b.useConfig(policyConfig(d, policyVariant{name: tt.field, vf00: tt.vf00}, ""))
			b.mustVflag(2, "up", "--detailed-exit-codes")
			b.mustVflag(0, "down")
			if got := policyOf(); got != prior {
				t.Fatalf("after down the PF reports %+v, want the operator's %+v", got, prior)
			}
		})
	}
}

func setPolicy(h *sim.Host, pf string, vf int, p eswitch.VFPolicy) error {
	for _, err := range []error{
		h.SetVFVlanQos(pf, vf, p.Vlan, p.Qos), h.SetVFTrust(pf, vf, p.Trust), h.SetVFSpoofchk(pf, vf, p.Spoofchk),
		h.SetVFLinkState(pf, vf, p.LinkState), h.SetVFRate(pf, vf, p.MinTxRate, p.MaxTxRate),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestVFPolicyUnsupportedRollsBack: a driver without ndo_set_vf_link_state
// (igb): up fails naming the PF, VF, setting and driver, and the run rolls
// back (the trust set in the same batch, the VFs, the MACs).
func TestVFPolicyUnsupportedRollsBack(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	nic := "      driver: igb\n      no_vf_ops: [link_state]\n"
	b.useConfig(policyConfig(d, policyVariant{name: "none"}, nic))
	b.initSim()
	baseline := canonical(b.dump())
	b.useConfig(policyConfig(d, policyVariant{name: "igb", vf00: "trust: true, link_state: enable"}, nic))
	out, errs, code := b.vflag("up")
	if code == 0 {
		t.Fatalf("up succeeded:\n%s", out)
	}
	for _, want := range []string{"ens1f0np0 vf 0", "driver igb", "link_state", "EOPNOTSUPP", "remove link_state"} {
		if !strings.Contains(errs, want) {
			t.Errorf("the error lacks %q:\n%s", want, errs)
		}
	}
	if got := canonical(b.dump()); got != baseline {
		t.Fatalf("the failed up was not rolled back:\n%s", testbed.DiffText(baseline, got))
	}
}
