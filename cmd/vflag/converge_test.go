package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/testbed"
	"time"
)

// variant is one config of the convergence table: the demo group (lag0 on
// a dual-port ConnectX) with its settings changed, and optionally a second
// group (lag1 on a second NIC).
type variant struct {
	name                  string
	mode, lacp, hash      string
	miimon, numvfs, vlan0 int
	mac01, bridge         string
	driver11, driver02    bool
	attach10              string // domain of pf 1 vf 0 ("" none)
	group2                bool
	// bond options beyond the base (0/"": not in the config)
	updelay, downdelay, minLinks int
	adSelect, primary            string
	mtu                          int // group mtu (0: not in the config)
	// pf 0 vf 0's OVS port: vlan_mode and trunks ("": not in the config)
	vf0Mode, vf0Trunks string
	maxIdle            int // lag0's ovs.max_idle (0: not in the config)
	// rates: 0 none; 1 a rate group with per-VF tx_max/tx_share; 2 the
	// same with the group's and one VF's tx_max changed.
	rates int
	// tunnel: 0 none (the bond in the bridge); 1 VXLAN on VLAN 30 of the
	// bond with a route, pf 0 vf 0 on its own segment; 2 Geneve on the bond
	// itself with remote_ip=flow.
	tunnel int
	// ovn: 0 none; 1 an OVN chassis, Geneve on VLAN 30 of the bond, pf 0
	// vf 0 (vm1's) and pf 0 vf 1 bound to logical ports the simulated
	// Southbound knows (daemons.ovn); 2 VXLAN on the bond itself over
	// IPv6, a provider network, pf 0 vf 1 bound elsewhere. The VFs carry
	// no VLAN (br-int's ports take none).
	ovn int
}

func baseVariant() variant {
	return variant{name: "base", mode: "802.3ad", lacp: "fast", hash: "layer3+4", miimon: 100, numvfs: 4, vlan0: 100,
		mac01: "52:54:00:10:00:01", bridge: "br-lag", driver11: true, attach10: "vm1"}
}

// variants are the table: each differs from base in one respect.
func variants() []variant {
	v := func(name string, f func(*variant)) variant { x := baseVariant(); x.name = name; f(&x); return x }
	return []variant{
		baseVariant(),
		v("vlan", func(x *variant) { x.vlan0 = 300 }),
		v("miimon", func(x *variant) { x.miimon = 200 }),
		v("hash", func(x *variant) { x.hash = "layer2" }),
		v("active-backup", func(x *variant) { x.mode, x.lacp, x.hash = "active-backup", "", "" }),
		v("numvfs2", func(x *variant) { x.numvfs = 2 }),
		v("numvfs6", func(x *variant) { x.numvfs = 6 }),
		v("mac", func(x *variant) { x.mac01 = "52:54:00:10:00:99" }),
		v("bridge", func(x *variant) { x.bridge = "br-new" }),
		v("no-driver", func(x *variant) { x.driver11 = false }),
		v("driver-added", func(x *variant) { x.driver02 = true }),
		v("attach-moved", func(x *variant) { x.attach10 = "vm2" }),
		v("attach-removed", func(x *variant) { x.attach10 = "" }),
		v("group2", func(x *variant) { x.group2 = true }),
		v("bond-delays", func(x *variant) { x.updelay, x.downdelay, x.minLinks = 200, 100, 1 }),
		v("ad-select", func(x *variant) { x.adSelect = "bandwidth" }),
		v("mtu", func(x *variant) { x.mtu = 9000 }),
		v("native-trunks", func(x *variant) { x.vf0Mode, x.vf0Trunks = "native-untagged", "[20, 30]" }),
		v("native-trunk20", func(x *variant) { x.vf0Mode, x.vf0Trunks = "native-tagged", "[20]" }),
		v("trunk-mode", func(x *variant) { x.vlan0, x.vf0Mode, x.vf0Trunks = 0, "trunk", "[300, 400]" }),
		v("untagged-only", func(x *variant) { x.vlan0, x.vf0Mode = 0, "access" }),
		v("max-idle", func(x *variant) { x.maxIdle = 2000 }),
		v("max-idle-mtu", func(x *variant) { x.maxIdle, x.mtu = 15000, 9000 }),
		v("mtu-trunks", func(x *variant) { x.mtu, x.vf0Mode, x.vf0Trunks = 4000, "native-untagged", "[20]" }),
		v("ab-primary", func(x *variant) { x.mode, x.lacp, x.hash, x.primary = "active-backup", "", "", "ens1f1np1" }),
		v("rates", func(x *variant) { x.rates = 1 }),
		v("rates-changed", func(x *variant) { x.rates = 2 }),
		// numvfs changes that make every VF again with MACs, VLANs, a host
		// driver, mtu and rate leaves on them: all of it is set again.
		v("rates-numvfs6", func(x *variant) { x.rates, x.numvfs = 1, 6 }),
		v("mtu-numvfs2", func(x *variant) { x.mtu, x.numvfs, x.rates = 9000, 2, 2 }),
		// the tunnel layout: the bond leaves the bridge for an underlay.
		// VFs with a VLAN on the default segment: an inner VLAN tag, so
		// 1546 + 50 + 4 fills underlay_mtu 1600 (and 1500 + 70 + 4 Geneve's 1574).
		v("tunnel-vxlan", func(x *variant) { x.tunnel, x.mtu = 1, 1546 }),
		v("tunnel-geneve", func(x *variant) { x.tunnel = 2 }),
		// the OVN layout: the bond leaves the bridge for the encap
		// address; the representors on br-int with their bindings.
		v("ovn-geneve", func(x *variant) { x.ovn, x.mtu = 1, 1600 }),
		v("ovn-vxlan", func(x *variant) { x.ovn, x.mtu = 2, 1600 }),
	}
}

// config renders the variant for the bed's daemons.
func (x variant) config(d daemons) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ovsdb: %s\nlibvirt: %s\nlag_timeout: 30s\ngroups:\n", d.ovs.Endpoint(), d.virt.URI())
	fmt.Fprintf(&b, "  - name: lag0\n    pfs: [ens1f0np0, ens1f1np1]\n    numvfs: %d\n    flow_steering_mode: smfs\n", x.numvfs)
	if x.mtu != 0 {
		fmt.Fprintf(&b, "    mtu: %d\n", x.mtu)
	}
	fmt.Fprintf(&b, "    bond:\n      name: bond0\n      mode: %s\n      miimon: %d\n", x.mode, x.miimon)
	if x.lacp != "" {
		fmt.Fprintf(&b, "      lacp_rate: %s\n", x.lacp)
	}
	if x.hash != "" {
		fmt.Fprintf(&b, "      xmit_hash_policy: %s\n", x.hash)
	}
	for _, o := range []struct {
		key string
		v   any
	}{{"updelay", x.updelay}, {"downdelay", x.downdelay}, {"min_links", x.minLinks}, {"ad_select", x.adSelect}, {"primary", x.primary}} {
		if o.v != 0 && o.v != "" {
			fmt.Fprintf(&b, "      %s: %v\n", o.key, o.v)
		}
	}
	var r00, r01, r10 string
	if x.rates > 0 {
		group, vf := 1000, 100
		if x.rates == 2 {
			group, vf = 1500, 150
		}
		fmt.Fprintf(&b, "    rate_groups:\n      - {name: tenant1, tx_max: %d}\n", group)
		r00 = fmt.Sprintf(", tx_max: %d, tx_share: 10, rate_group: tenant1", vf)
		r01, r10 = ", tx_max: 200, rate_group: tenant1", ", tx_max: 300"
	}
	b.WriteString("    vfs:\n")
	vf0 := ""
	if x.vf0Mode != "" {
		vf0 += ", vlan_mode: " + x.vf0Mode
	}
	if x.vf0Trunks != "" {
		vf0 += ", trunks: " + x.vf0Trunks
	}
	if x.tunnel == 1 {
		vf0 += ", vni: 5100"
	}
	vlan := func(v int) string { return fmt.Sprintf(", vlan: %d", v) }
	if x.ovn != 0 {
		vlan = func(int) string { return "" }
		r01 += ", ovn_port: lsp-vf01"
		if x.ovn == 2 {
			r01 = ", ovn_port: lsp-elsewhere"
		}
	}
	fmt.Fprintf(&b, "      - {pf: 0, vf: 0, mac: \"52:54:00:10:00:00\"%s%s%s}\n", vlan(x.vlan0), vf0, r00)
	fmt.Fprintf(&b, "      - {pf: 0, vf: 1, mac: %q%s%s}\n", x.mac01, vlan(100), r01)
	fmt.Fprintf(&b, "      - {pf: 1, vf: 0, mac: \"52:54:00:10:01:00\"%s%s}\n", vlan(200), r10)
	if x.driver11 {
		b.WriteString("      - {pf: 1, vf: 1, mac: \"52:54:00:10:01:01\", driver: mlx5_core}\n")
	} else {
		b.WriteString("      - {pf: 1, vf: 1, mac: \"52:54:00:10:01:01\"}\n")
	}
	if x.driver02 {
		b.WriteString("      - {pf: 0, vf: 2, driver: mlx5_core}\n")
	}
	bridge := x.bridge
	if x.ovn != 0 {
		bridge = "br-int"
	}
	fmt.Fprintf(&b, "    ovs:\n      bridge: %s\n      hw_offload: true\n      datapath_type: netdev\n", bridge)
	if x.maxIdle != 0 {
		fmt.Fprintf(&b, "      max_idle: %d\n", x.maxIdle)
	}
	switch x.tunnel {
	case 1:
		b.WriteString("    tunnel: {type: vxlan, local: 192.0.2.11/24, underlay_vlan: 30, underlay_mtu: 1600, gateway: 192.0.2.254, routes: [198.51.100.0/24], remotes: [192.0.2.12, 198.51.100.7], vni: 5000}\n")
	case 2:
		b.WriteString("    tunnel: {type: geneve, local: \"2001:db8::11/64\", underlay_mtu: 1574, remotes: [flow], vni: 7000}\n")
	}
	switch x.ovn {
	case 1:
		fmt.Fprintf(&b, "    ovn: {remote: \"tcp:192.0.2.1:6642\", encap_ip: 192.0.2.11/24, underlay_vlan: 30, underlay_mtu: 1658, system_id: chassis-1, install_timeout: 20s}\n")
	case 2:
		fmt.Fprintf(&b, "    ovn: {remote: \"ssl:[2001:db8::1]:6642\", ssl: {private_key: /etc/ovn/key.pem, certificate: /etc/ovn/cert.pem, ca_cert: /etc/ovn/ca.pem}, encap_type: vxlan, encap_ip: \"2001:db8::11/64\", underlay_mtu: 1670, system_id: chassis-1, bridge_mappings: {physnet1: br-phys}, install_timeout: 20s}\n")
	}
	att0 := ""
	if x.ovn == 1 {
		att0 = ", ovn_port: lsp-vm1"
	}
	fmt.Fprintf(&b, "    attachments:\n      - {domain: vm1, pf: 0, vf: 0, live: true%s}\n", att0)
	if x.attach10 != "" {
		fmt.Fprintf(&b, "      - {domain: %s, pf: 1, vf: 0, live: true}\n", x.attach10)
	}
	if x.group2 {
		b.WriteString("  - name: lag1\n    pfs: [ens2f0np0, ens2f1np1]\n    numvfs: 2\n")
		b.WriteString("    bond:\n      name: bond1\n      mode: active-backup\n      miimon: 100\n")
		b.WriteString("    ovs:\n      bridge: br-lag1\n      hw_offload: true\n      datapath_type: netdev\n")
	}
	fmt.Fprintf(&b, "sim:\n  mirror_netns: %s\n  nics:\n", d.ovs.Netns())
	b.WriteString("    - name: cx6lx\n      total_vfs: 8\n      pfs:\n        - {pci: \"0000:61:00.0\", netdev: ens1f0np0}\n        - {pci: \"0000:61:00.1\", netdev: ens1f1np1}\n")
	b.WriteString("    - name: cx6dx\n      total_vfs: 8\n      pfs:\n        - {pci: \"0000:62:00.0\", netdev: ens2f0np0}\n        - {pci: \"0000:62:00.1\", netdev: ens2f1np1}\n")
	b.WriteString("  latency:\n    vf_create: 1ms\n    mode_change: 5ms\n    lag_activation: 20ms\n")
	return b.String()
}

// canonical is testbed.Canonical: the dump with kernel-assigned names and
// random MACs made comparable.
func canonical(dump string) string { return testbed.Canonical(dump) }

// fullDump is the bed's whole state: kernel, OVSDB, vm1's and vm2's XML.
func (b *bed) fullDump() string {
	return canonical(b.dump() + "\n== vm2\n" + testbed.NormalizeXML(b.virt.DomainXML(b.t, "vm2")))
}

func upReport(t *testing.T, b *bed) report.Report {
	t.Helper()
	var rep report.Report
	out := b.mustVflagAny(0, 1, 2)("up", "-o", "json", "--detailed-exit-codes")
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decode up report: %v\n%s", err, out)
	}
	return rep
}

// mustVflagAny runs a command that must exit with one of the codes.
func (b *bed) mustVflagAny(codes ...int) func(args ...string) string {
	return func(args ...string) string {
		b.t.Helper()
		out, errs, code := b.vflag(args...)
		for _, c := range codes {
			if code == c {
				return out
			}
		}
		b.t.Fatalf("vflag %s: exit %d, want %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, codes, out, errs)
		return ""
	}
}

func (b *bed) useConfig(text string) {
	b.t.Helper()
	if err := os.WriteFile(b.config, []byte(text), 0o600); err != nil {
		b.t.Fatal(err)
	}
}

// TestConvergeTransitions is the table test of DESIGN.md section 2a: every
// config's fresh state (up on a clean host) is recorded; then the configs
// are visited in random order on one host (logged seed), each reached from
// another: after each up the host equals that config's fresh state, a
// second up changes nothing, and down at the end gives the baseline. Before every up (on the clean host
// and at every transition) plan predicts exactly what up changes: the same
// step ids, as many.
func TestConvergeTransitions(t *testing.T) {
	t.Parallel() // long and mostly waiting (bed_test.go: parallel tests)
	d := startDaemons(t)
	d.startOVN(t) // the OVN variants
	d.virt.DefineDomain(t, "vm2")
	vs := variants()
	fresh := map[string]string{}
	var baseline string
	for _, x := range vs {
		b := newBed(t, d, "")
		b.useConfig(x.config(d))
		b.initSim()
		base := b.fullDump()
		if baseline == "" {
			baseline = base
		}
		plan := changedIDs(t, b.mustVflag(2, "plan", "-o", "json", "--detailed-exit-codes"))
		if up := upReport(t, b).ChangedIDs(); !slices.Equal(plan, up) {
			t.Errorf("(clean) -> %s: plan predicts %d change(s), up made %d:\n%s", x.name, len(plan), len(up), testbed.DiffText(strings.Join(plan, "\n"), strings.Join(up, "\n")))
		}
		fresh[x.name] = b.fullDump()
		b.mustVflag(0, "down")
		if got := b.fullDump(); got != base {
			t.Fatalf("%s: down after a fresh up does not give the baseline:\n%s", x.name, testbed.DiffText(base, got))
		}
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("VFLAG_CONVERGE_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (VFLAG_CONVERGE_SEED=%d reproduces the order)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	order := rng.Perm(len(vs))
	// Every config once, each reached from another: the walk starts on
	// the host converged to the last (the fresh pass above did each from
	// the clean host).
	start := vs[order[len(order)-1]]
	b := newBed(t, d, "")
	b.useConfig(start.config(d))
	b.initSim()
	b.mustVflag(0, "up")
	if got := b.fullDump(); got != fresh[start.name] {
		t.Fatalf("%s: a second fresh up gives another host:\n%s", start.name, testbed.DiffText(fresh[start.name], got))
	}
	prev := start.name
	for _, i := range order {
		x := vs[i]
		b.useConfig(x.config(d))
		plan := changedIDs(t, b.mustVflagAny(0, 2)("plan", "-o", "json", "--detailed-exit-codes"))
		rep := upReport(t, b)
		if rep.Error != "" {
			t.Fatalf("%s -> %s: up failed: %s", prev, x.name, rep.Error)
		}
		if up := rep.ChangedIDs(); !slices.Equal(plan, up) {
			t.Errorf("%s -> %s: plan predicts %d change(s), up made %d:\n%s", prev, x.name, len(plan), len(up), testbed.DiffText(strings.Join(plan, "\n"), strings.Join(up, "\n")))
		}
		if got := b.fullDump(); got != fresh[x.name] {
			t.Fatalf("%s -> %s: the host differs from %s's fresh state (changed %v):\n%s", prev, x.name, x.name, rep.ChangedIDs(), testbed.DiffText(fresh[x.name], got))
		}
		if again := upReport(t, b).ChangedIDs(); len(again) != 0 {
			t.Fatalf("%s -> %s: a second up changed %v", prev, x.name, again)
		}
		t.Logf("%s -> %s: %d change(s)", prev, x.name, len(rep.ChangedIDs()))
		prev = x.name
	}
	b.mustVflag(0, "down")
	if got := b.fullDump(); got != baseline {
		t.Fatalf("down after the walk does not give the baseline:\n%s", testbed.DiffText(baseline, got))
	}
}

// TestConvergeMinimalWrites: from the converged base config, a change
// re-does only the kind that changed and what depends on it.
func TestConvergeMinimalWrites(t *testing.T) {
	d := startDaemons(t)
	d.virt.DefineDomain(t, "vm2")
	byName := map[string]variant{}
	for _, x := range variants() {
		byName[x.name] = x
	}
	group2 := func(id string) bool {
		for _, s := range []string{"ens2f", "0000:62:", "bond1", "br-lag1"} {
			if strings.Contains(id, s) {
				return true
			}
		}
		return false
	}
	tests := []struct {
		to   string
		want func(ids []string) error
	}{
		{"vlan", func(ids []string) error { // no kernel write: one OVS transaction
			if strings.Join(ids, " ") != "ovs.bridge/br-lag" {
				return fmt.Errorf("want only ovs.bridge/br-lag")
			}
			return nil
		}},
		{"native-trunks", func(ids []string) error { // the VLAN columns of one port
			if strings.Join(ids, " ") != "ovs.bridge/br-lag" {
				return fmt.Errorf("want only ovs.bridge/br-lag")
			}
			return nil
		}},
		{"mtu", func(ids []string) error { // the links, and mtu_request in the one OVS transaction
			if strings.Join(ids, " ") != "link.mtu/bond0 link.mtu/reps/ens1f0np0 link.mtu/reps/ens1f1np1 ovs.bridge/br-lag" {
				return fmt.Errorf("want link.mtu of the bond and the representors, and ovs.bridge/br-lag")
			}
			return nil
		}},
		{"mac", func(ids []string) error {
			if strings.Join(ids, " ") != "sriov.vfmac/ens1f0np0/1" {
				return fmt.Errorf("want only sriov.vfmac/ens1f0np0/1")
			}
			return nil
		}},
		{"miimon", func(ids []string) error { // live: no slave released
			if strings.Join(ids, " ") != "bond.create/bond0" {
				return fmt.Errorf("want only bond.create/bond0")
			}
			return nil
		}},
		{"hash", func(ids []string) error {
			// mlx5 takes xmit_hash_policy at the enslave: the bond is
			// re-formed (the PFs enslaved again, the host VF unbound
			// around the LAG's re-activation), nothing beyond it.
			want := "bond.create/bond0 bond.enslave/ens1f0np0 bond.enslave/ens1f1np1 link.up/bond0 sriov.bind/ens1f1np1/vf1 sriov.unbind/pci/0000:61:00.1"
			if strings.Join(ids, " ") != want {
				return fmt.Errorf("want only %s", want)
			}
			return nil
		}},
		{"attach-moved", func(ids []string) error {
			if strings.Join(ids, " ") != "libvirt.attach/vm1/ens1f1np1/vf0 libvirt.attach/vm2/ens1f1np1/vf0" {
				return fmt.Errorf("want the detach from vm1 and the attach to vm2 only")
			}
			return nil
		}},
		{"rates", func(ids []string) error { // devlink-rate only: nodes on both PFs, three leaves
			want := "devlink.rate-leaf/ens1f0np0/0 devlink.rate-leaf/ens1f0np0/1 devlink.rate-leaf/ens1f1np1/0 " +
				"devlink.rate-node/pci/0000:61:00.0/tenant1 devlink.rate-node/pci/0000:61:00.1/tenant1"
			if strings.Join(ids, " ") != want {
				return fmt.Errorf("want only %s", want)
			}
			return nil
		}},
		{"group2", func(ids []string) error { // a new group: no write to group 1
			for _, id := range ids {
				if !group2(id) {
					return fmt.Errorf("%s is not group 2's", id)
				}
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.to, func(t *testing.T) {
			b := newBed(t, d, "")
			b.useConfig(byName["base"].config(d))
			b.mustVflag(2, "up", "--detailed-exit-codes")
			b.useConfig(byName[tt.to].config(d))
			ovsBefore := d.ovs.Dump()
			rep := upReport(t, b)
			if rep.Error != "" {
				t.Fatalf("up: %s", rep.Error)
			}
			ids := rep.ChangedIDs()
			if err := tt.want(ids); err != nil {
				t.Errorf("base -> %s changed %v: %v", tt.to, ids, err)
			}
			if tt.to == "native-trunks" { // one port's row: vlan_mode and trunks added to it
				var diff []string
				before := map[string]bool{}
				for _, l := range strings.Split(ovsBefore, "\n") {
					before[l] = true
				}
				for _, l := range strings.Split(d.ovs.Dump(), "\n") {
					if !before[l] {
						diff = append(diff, l)
					}
				}
				if len(diff) != 1 || !strings.Contains(diff[0], "tag=100 owner=\"lag0\" vlan_mode=native-untagged trunks=[20 30]") {
					t.Errorf("base -> native-trunks: OVS rows new or changed: %q, want one port's", diff)
				}
			}
			if tt.to == "group2" { // and back: group 2 goes, group 1 untouched
				b.useConfig(byName["base"].config(d))
				rep := upReport(t, b)
				back := rep.ChangedIDs()
				for _, id := range back {
					if !group2(id) {
						t.Errorf("group2 -> base changed %s, which is not group 2's", id)
					}
				}
				if len(back) == 0 {
					t.Errorf("group2 -> base removed nothing")
				}
				for _, s := range rep.Steps {
					if s.Changed && s.Action != "remove" {
						t.Errorf("group2 -> base: %s has action %q, want remove", s.ID, s.Action)
					}
				}
			}
			b.mustVflag(0, "down")
		})
	}
}

// TestRebootReconverges: a reboot keeps the journal and Open vSwitch's
// database but not the kernel's state (a fresh simulated host with the same
// NICs). up --stage pre then up, in boot order, converge to the fresh state
// of the config without rolling anything back; a second up changes nothing;
// down still restores the state from before the first up.
func TestRebootReconverges(t *testing.T) {
	d := startDaemons(t)
	d.virt.DefineDomain(t, "vm2")
	x := baseVariant()
	fresh := newBed(t, d, "")
	fresh.useConfig(x.config(d))
	fresh.mustVflag(2, "up", "--detailed-exit-codes")
	want := fresh.fullDump()
	fresh.mustVflag(0, "down")

	for _, pre := range []bool{true, false} {
		t.Run(fmt.Sprintf("stage-pre=%v", pre), func(t *testing.T) {
			b := newBed(t, d, "")
			b.useConfig(x.config(d))
			b.initSim()
			b.mustVflag(2, "up", "--detailed-exit-codes")
			// Reboot: the kernel starts over; the journal and OVSDB remain.
			b.simDir = t.TempDir()
			b.initSim()
			kernel := func() string { return canonical(testbed.Kernel(b.simDump())) }
			baseline := kernel()
			if pre {
				b.mustVflag(2, "up", "--stage", "pre", "--detailed-exit-codes")
			}
			rep := upReport(t, b)
			if rep.Error != "" {
				t.Fatalf("up after the reboot: %s", rep.Error)
			}
			for _, s := range rep.Steps {
				if s.Phase == "undo" {
					t.Errorf("up after the reboot undid %s", s.ID)
				}
			}
			if got := b.fullDump(); got != want {
				t.Fatalf("after the reboot the host differs from the fresh state:\n%s", testbed.DiffText(want, got))
			}
			if again := upReport(t, b).ChangedIDs(); len(again) != 0 {
				t.Fatalf("a second up changed %v", again)
			}
			b.mustVflag(0, "down")
			if got := kernel(); got != baseline {
				t.Fatalf("down after the reboot does not restore the booted host:\n%s", testbed.DiffText(baseline, got))
			}
		})
	}
}
