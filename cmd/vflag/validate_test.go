package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/internal/validate"
)

// rdmaConfig is the example config with RDMA on the simulated NIC and RoCE required.
func rdmaConfig(t *testing.T, mode string) string {
	t.Helper()
	cfg := strings.Replace(exampleConfig, "    - name: cx6lx\n", "    - name: cx6lx\n      rdma: true\n", 1)
	cfg = strings.Replace(cfg, "    attachments:\n", "    validate:\n      roce: true\n      roce_mode: v2\n    attachments:\n", 1)
	if mode != "" {
		cfg = strings.Replace(cfg, "      mode: 802.3ad ", "      mode: "+mode+" ", 1)
		if mode != "802.3ad" {
			cfg = strings.Replace(cfg, "      lacp_rate: fast\n", "", 1)
		}
		if mode == "active-backup" {
			cfg = strings.Replace(cfg, "      xmit_hash_policy: layer3+4\n", "", 1)
		}
	}
	if cfg == exampleConfig || !strings.Contains(cfg, "rdma: true") || !strings.Contains(cfg, "roce: true") {
		t.Fatal("example config changed: rdmaConfig cannot patch it")
	}
	return cfg
}

// withSim runs fn on the bed's simulated host.
func (b *bed) withSim(fn func(h *sim.Host) error) {
	b.t.Helper()
	h, err := sim.Open(b.simDir, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	defer h.Close()
	if err := fn(h); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bed) validateJSON(want int, args ...string) validate.Report {
	b.t.Helper()
	out := b.mustVflag(want, append([]string{"validate", "-o", "json"}, args...)...)
	var rep validate.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		b.t.Fatalf("decode validate report: %v\n%s", err, out)
	}
	return rep
}

// dropDrift takes the failed drift/<step> checks out of failed, which must
// be exactly the changes plan would make on the bed.
func (b *bed) dropDrift(failed map[string]validate.Check) {
	b.t.Helper()
	var drift []string
	for n := range failed {
		if id, ok := strings.CutPrefix(n, "drift/"); ok {
			drift = append(drift, id)
			delete(failed, n)
		}
	}
	sort.Strings(drift)
	plan := changedIDs(b.t, b.mustVflagAny(0, 2)("plan", "-o", "json", "--detailed-exit-codes"))
	sort.Strings(plan)
	if !slices.Equal(drift, plan) && len(drift)+len(plan) > 0 {
		b.t.Errorf("validate fails drift of %v, plan changes %v", drift, plan)
	}
}

func checksBy(rep validate.Report, v validate.Verdict) map[string]validate.Check {
	out := map[string]validate.Check{}
	for _, g := range rep.Groups {
		for _, c := range g.Checks {
			if c.Verdict == v {
				out[c.Name] = c
			}
		}
	}
	return out
}

func names(m map[string]validate.Check) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestValidateStatic: a healthy group passes every check; each fault gives
// exactly its own failing check with a detail that names the cause.
func TestValidateStatic(t *testing.T) {
	d := startDaemons(t)
	tests := []struct {
		name        string
		fault       func(t *testing.T, b *bed)
		failed      string // the one failing check ("" healthy; a prefix when it ends in '*')
		detail      []string
		also        map[string][]string // other checks the same fault fails, with words of their detail
		skipped     []string
		wantRDMADev string
	}{
		{name: "healthy", wantRDMADev: "mlx5_bond_0"},
		{
			name: "slave down",
			fault: func(t *testing.T, b *bed) {
				b.withSim(func(h *sim.Host) error { return h.SetLinkUp("ens1f1np1", false) })
			},
			failed: "bond/slave/ens1f1np1", detail: []string{"ens1f1np1 is down"},
		},
		{
			name: "representor missing from the bridge",
			fault: func(t *testing.T, b *bed) {
				ports := strings.Fields(b.ovs.MustVsctl("list-ports", "br-lag"))
				i := slices.IndexFunc(ports, func(p string) bool { return strings.HasPrefix(p, "eth") })
				if i < 0 {
					t.Fatalf("no representor port in %v", ports)
				}
				b.ovs.MustVsctl("del-port", "br-lag", ports[i])
				t.Logf("removed port %s", ports[i])
			},
			failed: "ovs/port/pf*", detail: []string{"is not a port of bridge br-lag"},
		},
		{
			name: "hw-offload off",
			fault: func(t *testing.T, b *bed) {
				b.ovs.MustVsctl("set", "Open_vSwitch", ".", "other_config:hw-offload=false")
			},
			failed: "ovs/hw-offload", detail: []string{"hw-offload is false"},
		},
		{
			name: "LAG inactive",
			// Re-enslaving a port while a VF is bound (pf 1 vf 1 has a host
			// driver) re-evaluates the LAG, and activation fails.
			fault: func(t *testing.T, b *bed) {
				b.withSim(func(h *sim.Host) error {
					for _, step := range []func() error{
						func() error { return h.SetMaster("ens1f1np1", "") },
						func() error { return h.SetLinkUp("ens1f1np1", false) },
						func() error { return h.SetMaster("ens1f1np1", "bond0") },
						func() error { return h.SetLinkUp("ens1f1np1", true) },
					} {
						if err := step(); err != nil {
							return err
						}
					}
					return nil
				})
			},
			failed: "lag", detail: []string{"hardware LAG is inactive"},
			skipped: []string{"rdma/devices", "rdma/mlx5_0/port1/roce-mode", "rdma/mlx5_1/port1/roce-mode"},
		},
		{
			name: "switch ports without LACP",
			fault: func(t *testing.T, b *bed) {
				b.withSim(func(h *sim.Host) error { return h.SetSwitchLACP("cx6lx", false) })
			},
			failed: "bond/lacp", detail: []string{"no LACP partner answers on bond bond0", "ens1f0np0:1 ens1f1np1:2"},
			// The NIC follows the bond: only the active aggregator's port carries VF traffic.
			also: map[string][]string{"lag/ports": {"ens1f1np1 (port 2) is up but carries no VF traffic: no LACP partner answers", "only aggregator 1 is active", "lag/mapping: 1"}},
		},
		{
			name: "PF off the bond's shared tc block",
			fault: func(t *testing.T, b *bed) {
				b.withSim(func(h *sim.Host) error { return h.DelIngress("ens1f1np1") })
			},
			failed: "tc/shared-block", detail: []string{"ens1f1np1 (no ingress qdisc)", "vflag up"},
		},
		{
			name: "RDMA device did not bond",
			fault: func(t *testing.T, b *bed) {
				b.withSim(func(h *sim.Host) error { return h.SetRDMABondFault("cx6lx", true) })
			},
			failed: "rdma/devices", detail: []string{"RDMA devices did not bond", "mlx5_0 (0000:61:00.0)", "mlx5_1 (0000:61:00.1)"},
			skipped: []string{"rdma/mlx5_0/port1/roce-mode", "rdma/mlx5_1/port1/roce-mode"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, d, rdmaConfig(t, ""))
			b.upJSON(2)
			t.Cleanup(func() { b.mustVflag(0, "down") })
			// The configfs group exists on a host where the RoCE mode was set.
			b.withSim(func(h *sim.Host) error {
				return sysfs.Mkdir(h.FS(), "/sys/kernel/config/rdma_cm/mlx5_bond_0")
			})
			if tc.fault != nil {
				tc.fault(t, b)
			}
			want := 0
			if tc.failed != "" {
				want = 1
			}
			junit := filepath.Join(t.TempDir(), "junit.xml")
			rep := b.validateJSON(want, "--junit", junit)
			failed := checksBy(rep, validate.Fail)
			skipped := checksBy(rep, validate.Skip)
			// What plan would repair fails drift/<step> besides: exactly that.
			b.dropDrift(failed)
			if tc.failed == "" {
				if len(failed) != 0 || len(skipped) != 0 || !rep.OK || rep.Passed == 0 {
					t.Fatalf("healthy group: failed %v skipped %v ok %v\n%+v", names(failed), names(skipped), rep.OK, rep)
				}
				// The simulated switch answers LACP: both PFs in one aggregator.
				if c := checksBy(rep, validate.Pass)["bond/lacp"]; !strings.Contains(c.Detail, "aggregator 1 holds 2 slave(s), LACP partner 02:") {
					t.Errorf("bond/lacp: %q", c.Detail)
				}
			} else {
				for also, words := range tc.also {
					c, ok := failed[also]
					if !ok {
						t.Fatalf("%s did not fail: failed %v", also, names(failed))
					}
					for _, w := range words {
						if !strings.Contains(c.Detail, w) {
							t.Errorf("%s: detail %q lacks %q", also, c.Detail, w)
						}
					}
					delete(failed, also)
				}
				if len(failed) != 1 {
					t.Fatalf("failed checks %v, want exactly %s\n%+v", names(failed), tc.failed, failed)
				}
				name := names(failed)[0]
				if p, ok := strings.CutSuffix(tc.failed, "*"); (ok && !strings.HasPrefix(name, p)) || (!ok && name != tc.failed) {
					t.Fatalf("failed check %s, want %s", name, tc.failed)
				}
				for _, s := range tc.detail {
					if !strings.Contains(failed[name].Detail, s) {
						t.Errorf("detail %q lacks %q", failed[name].Detail, s)
					}
				}
				t.Logf("%s: %s", name, failed[name].Detail)
				if got := names(skipped); !slices.Equal(got, tc.skipped) && !(len(got) == 0 && len(tc.skipped) == 0) {
					t.Errorf("skipped %v, want %v", got, tc.skipped)
				}
			}
			if tc.wantRDMADev != "" {
				c := checksBy(rep, validate.Pass)["rdma/devices"]
				if !strings.Contains(c.Detail, tc.wantRDMADev) {
					t.Errorf("rdma/devices: %q lacks %s", c.Detail, tc.wantRDMADev)
				}
				g := checksBy(rep, validate.Pass)["rdma/"+tc.wantRDMADev+"/port1/gids"]
				if !strings.Contains(g.Detail, "v2  bond0") {
					t.Errorf("GID table does not show a RoCE v2 GID on bond0:\n%s", g.Detail)
				}
			}
			// JUnit: one testcase per check, failures counted.
			data, err := os.ReadFile(junit)
			if err != nil {
				t.Fatal(err)
			}
			var ju struct {
				Tests    int `xml:"tests,attr"`
				Failures int `xml:"failures,attr"`
			}
			if err := xml.Unmarshal(data, &ju); err != nil {
				t.Fatalf("junit: %v\n%s", err, data)
			}
			if ju.Tests != rep.Passed+rep.Failed+rep.Skipped || ju.Failures != rep.Failed {
				t.Errorf("junit tests=%d failures=%d, report %d/%d/%d", ju.Tests, ju.Failures, rep.Passed, rep.Failed, rep.Skipped)
			}
		})
	}
}

// TestValidateTrafficAndRoCE: the traffic and failover checks on the
// simulated host (simulated packets through the bond, counters in
// /sys/class/net/<if>/statistics), the restore of the failed slave when
// validate is interrupted, and `vflag roce`.
func TestValidateTrafficAndRoCE(t *testing.T) {
	d := startDaemons(t)
	slavesUp := func(b *bed) {
		b.t.Helper()
		b.withSim(func(h *sim.Host) error {
			for _, n := range []string{"ens1f0np0", "ens1f1np1"} {
				l, err := h.Link(n)
				if err != nil {
					return err
				}
				if !l.AdminUp || l.Master != "bond0" {
					b.t.Errorf("%s after validate: admin up %v, master %q", n, l.AdminUp, l.Master)
				}
			}
			return nil
		})
	}
	for _, mode := range []string{"802.3ad", "active-backup"} {
		t.Run(mode, func(t *testing.T) {
			b := newBed(t, d, rdmaConfig(t, mode))
			b.upJSON(2)
			t.Cleanup(func() { b.mustVflag(0, "down") })
			rep := b.validateJSON(0, "--allow-skip", "--traffic", "--failover", "--duration", "1200ms", "--interval", "50ms")
			passed := checksBy(rep, validate.Pass)
			tr, ok := passed["traffic"]
			if !ok {
				t.Fatalf("traffic did not pass: %+v", checksBy(rep, validate.Fail))
			}
			t.Logf("traffic: %s", tr.Detail)
			var fo validate.Check
			for n, c := range passed {
				if strings.HasPrefix(n, "failover/") {
					fo = c
				}
			}
			if fo.Name == "" {
				t.Fatalf("failover did not pass: %+v", checksBy(rep, validate.Fail))
			}
			t.Logf("%s: %s", fo.Name, fo.Detail)
			if mode == "active-backup" {
				if !strings.Contains(tr.Detail, "active slave ens1f0np0 carried the traffic") || fo.Name != "failover/ens1f0np0" {
					t.Errorf("active-backup: traffic %q, failover %s", tr.Detail, fo.Name)
				}
			} else if !strings.Contains(tr.Detail, "both slaves carried traffic") {
				t.Errorf("802.3ad: %q", tr.Detail)
			}
			if !strings.Contains(fo.Detail, "gap ") {
				t.Errorf("failover detail lacks the gap: %q", fo.Detail)
			}
			slavesUp(b)
		})
	}

	t.Run("interrupted failover restores the slave", func(t *testing.T) {
		b := newBed(t, d, "")
		b.upJSON(2)
		t.Cleanup(func() { b.mustVflag(0, "down") })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		var out, errb bytes.Buffer
		go func() {
			done <- run(ctx, []string{"--config", b.config, "--sim", b.simDir, "--state-dir", b.state,
				"validate", "--failover", "--duration", "2s", "--interval", "50ms", "--fail-slave", "ens1f1np1"}, &out, &errb)
		}()
		// Traffic check 2 s, then the failover's warm-up 0.5 s: the slave is down at ~2.5 s.
		deadline := time.Now().Add(15 * time.Second)
		for {
			var down bool
			b.withSim(func(h *sim.Host) error {
				l, err := h.Link("ens1f1np1")
				down = err == nil && !l.AdminUp
				return err
			})
			if down {
				break
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("the slave never went down\n%s\n%s", out.String(), errb.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel() // Ctrl-C
		if code := <-done; code != 1 {
			t.Errorf("exit %d, want 1\n%s", code, out.String())
		}
		if !strings.Contains(out.String(), "failover/ens1f1np1") {
			t.Errorf("no failover verdict:\n%s", out.String())
		}
		slavesUp(b)
	})

	t.Run("roce", func(t *testing.T) {
		b := newBed(t, d, rdmaConfig(t, ""))
		b.upJSON(2)
		t.Cleanup(func() { b.mustVflag(0, "down") })
		show := b.mustVflag(0, "roce", "show")
		if !strings.Contains(show, "mlx5_bond_0") || !strings.Contains(show, "RoCE v2") {
			t.Fatalf("roce show:\n%s", show)
		}
		gids := b.mustVflag(0, "roce", "gids")
		if !strings.Contains(gids, "bond0") || !strings.Contains(gids, "n_gids_found=2") {
			t.Fatalf("roce gids:\n%s", gids)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--tclass", "256"}, "traffic_class: 256 is out of range 0-255"},
			{[]string{"--dscp", "64"}, "dscp: 64 is out of range 0-63"},
			{[]string{"--ttl", "-1"}, "ttl: -1 is out of range 0-255"},
			{[]string{"--mode", "v3"}, `mode: "v3" is not a RoCE mode`},
			{[]string{"--mode", "v1", "--ttl", "300"}, "ttl: 300"}, // nothing written: the mode stays
			{[]string{"--port", "2", "--ttl", "1"}, "port: 2 is not a port of mlx5_bond_0"},
		} {
			_, errs, code := b.vflag(append([]string{"roce", "set", "mlx5_bond_0"}, tc.args...)...)
			if code != 1 || !strings.Contains(errs, tc.want) {
				t.Errorf("roce set %v: exit %d, stderr %q, want %q", tc.args, code, errs, tc.want)
			}
		}
		if show2 := b.mustVflag(0, "roce", "show"); !strings.Contains(show2, "RoCE v2") {
			t.Fatalf("a refused set changed the mode:\n%s", show2)
		}
		b.mustVflag(0, "roce", "set", "mlx5_bond_0", "--mode", "v1", "--dscp", "26", "--ttl", "64")
		var ports []validate.RoCEPort
		if err := json.Unmarshal([]byte(b.mustVflag(0, "roce", "show", "-o", "json")), &ports); err != nil {
			t.Fatal(err)
		}
		if len(ports) != 1 || ports[0].RoCEMode != "IB/RoCE v1" || ports[0].TrafficClass == nil || *ports[0].TrafficClass != 104 ||
			ports[0].TTL == nil || *ports[0].TTL != 64 {
			t.Fatalf("after set: %+v", ports)
		}
		// validate now sees v1 where the config wants v2.
		rep := b.validateJSON(1)
		if f := checksBy(rep, validate.Fail); len(f) != 1 || !strings.Contains(f["rdma/mlx5_bond_0/port1/roce-mode"].Detail, `is "IB/RoCE v1", want "RoCE v2"`) {
			t.Fatalf("validate after roce set v1: %v", names(f))
		}
	})
}

// TestValidateBond: `validate --bond` checks a bare bond on the simulated
// host: bond, slaves and the RDMA device on it, traffic and failover, with
// no eswitch, LAG, OVS or libvirt checks; each fault gives its own failure.
func TestValidateBond(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, rdmaConfig(t, "active-backup"))
	b.upJSON(2)
	t.Cleanup(func() { b.mustVflag(0, "down") })
	b.withSim(func(h *sim.Host) error {
		return sysfs.Mkdir(h.FS(), "/sys/kernel/config/rdma_cm/mlx5_bond_0")
	})

	rep := b.validateJSON(0, "--bond", "bond0", "--bond-mode", "active-backup", "--traffic", "--failover",
		"--duration", "1200ms", "--interval", "50ms", "--roce-mode", "v2")
	if len(rep.Groups) != 1 || rep.Groups[0].Group != "bond0" || rep.Groups[0].Kind != "bond" {
		t.Fatalf("report groups: %+v", rep.Groups)
	}
	var got []string
	for _, c := range rep.Groups[0].Checks {
		got = append(got, c.Name)
	}
	want := []string{"bond", "bond/slave/ens1f0np0", "bond/slave/ens1f1np1", "rdma/devices",
		"rdma/mlx5_bond_0/port1/roce-mode", "rdma/mlx5_bond_0/port1/gids", "traffic", "failover/ens1f0np0"}
	if !slices.Equal(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	passed := checksBy(rep, validate.Pass)
	if c := passed["rdma/devices"]; !strings.Contains(c.Detail, "mlx5_bond_0 (0000:61:00.0)") {
		t.Errorf("rdma/devices: %q", c.Detail)
	}
	if c := passed["traffic"]; !strings.Contains(c.Detail, "active slave ens1f0np0 carried the traffic") {
		t.Errorf("traffic: %q", c.Detail)
	}
	if out := b.mustVflag(0, "validate", "--bond", "bond0"); !strings.HasPrefix(out, "bond bond0\n") {
		t.Errorf("text report:\n%s", out)
	}

	for _, tc := range []struct {
		name   string
		args   []string
		fault  func(h *sim.Host) error
		failed string
		detail string
	}{
		{name: "mode", args: []string{"--bond-mode", "802.3ad"}, failed: "bond", detail: "mode active-backup, want 802.3ad"},
		{name: "no bond", args: []string{"--bond", "bond9"}, failed: "bond", detail: "bond bond9 does not exist"},
		{name: "roce mode", args: []string{"--roce-mode", "v1"}, failed: "rdma/mlx5_bond_0/port1/roce-mode", detail: `want "IB/RoCE v1"`},
		{
			name: "slave down", fault: func(h *sim.Host) error { return h.SetLinkUp("ens1f1np1", false) },
			failed: "bond/slave/ens1f1np1", detail: "ens1f1np1 is down (admin down)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				b.withSim(tc.fault)
			}
			args := append([]string{"--bond", "bond0"}, tc.args...)
			rep := b.validateJSON(1, args...)
			f := checksBy(rep, validate.Fail)
			if len(f) != 1 || !strings.Contains(f[tc.failed].Detail, tc.detail) {
				t.Fatalf("failed %v (%+v), want %s: %q", names(f), f, tc.failed, tc.detail)
			}
		})
	}
}

// TestValidateMTU: with a group mtu, `vflag validate` has an mtu check
// that passes after up (PFs, bond, representors and their OVS Interface mtu
// column all at the mtu) and, when one of them differs, fails naming it.
func TestValidateMTU(t *testing.T) {
	d := startDaemons(t)
	cfg := strings.Replace(exampleConfig, "    numvfs: 4 ", "    mtu: 9000\n    numvfs: 4 ", 1)
	if cfg == exampleConfig {
		t.Fatal("example config changed: cannot add mtu")
	}
	b := newBed(t, d, cfg)
	b.upJSON(2)
	t.Cleanup(func() { b.mustVflag(0, "down") })
	var rep validate.Report
	// ovs-vswitchd reports the Interface mtu once it applied mtu_request.
	for i := 0; ; i++ {
		out, _, _ := b.vflag("validate", "-o", "json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("decode validate report: %v\n%s", err, out)
		}
		if _, ok := checksBy(rep, validate.Pass)["mtu"]; ok || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c, ok := checksBy(rep, validate.Pass)["mtu"]
	if !ok {
		t.Fatalf("mtu check did not pass: %+v", checksBy(rep, validate.Fail)["mtu"])
	}
	if !strings.Contains(c.Detail, "mtu 9000 on 20 interfaces") { // 2 PFs, bond, 8 reps; 9 OVS interfaces
		t.Errorf("mtu: %q", c.Detail)
	}
	b.withSim(func(h *sim.Host) error { return h.SetLinkMTU("ens1f1np1", 1500) })
	rep = b.validateJSON(1)
	f, ok := checksBy(rep, validate.Fail)["mtu"]
	if !ok || !strings.Contains(f.Detail, "differ: ens1f1np1 1500") {
		t.Errorf("mtu check after the PF's mtu changed: %+v", f)
	}
}

// TestValidateMTULegacy: a legacy group's mtu check covers its PF and the
// host netdev of a VF on a netdev driver, and names the one that differs.
func TestValidateMTULegacy(t *testing.T) {
	d := startDaemons(t)
	cfg := strings.Replace(legacyConfig, "    numvfs: 3\n", "    mtu: 9000\n    numvfs: 3\n", 1)
	cfg = strings.Replace(cfg, `      - {pf: 0, vf: 1, mac: "52:54:00:20:00:01"}`, `      - {pf: 0, vf: 1, mac: "52:54:00:20:00:01", driver: mlx5_core}`, 1)
	if !strings.Contains(cfg, "mtu: 9000") || !strings.Contains(cfg, "driver: mlx5_core") {
		t.Fatal("legacy config changed: cannot patch it")
	}
	b := newBed(t, d, cfg)
	b.upJSON(2)
	t.Cleanup(func() { b.mustVflag(0, "down") })
	// No RDMA on this NIC: rdma/devices skips.
	rep := b.validateJSON(0, "--allow-skip")
	// The PF and VF 1's netdev.
	if c := checksBy(rep, validate.Pass)["mtu"]; !strings.Contains(c.Detail, "mtu 9000 on 2 interfaces") {
		t.Fatalf("mtu: %+v", c)
	}
	var vfnd string
	for _, v := range b.statusJSON().Groups[0].VFs {
		if v.Index == 1 {
			vfnd = v.Netdev
		}
	}
	if vfnd == "" {
		t.Fatal("status shows no netdev for VF 1")
	}
	b.withSim(func(h *sim.Host) error { return h.SetLinkMTU(vfnd, 1500) })
	rep = b.validateJSON(1, "--allow-skip")
	if f := checksBy(rep, validate.Fail)["mtu"]; !strings.Contains(f.Detail, "differ: "+vfnd+" 1500") {
		t.Errorf("mtu check after the VF netdev's mtu changed: %+v", f)
	}
}
