package hook

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/teardown"
)

// ovnConfig is testConfig's host as an OVN chassis: no VLANs, the group's
// bridge the integration bridge; no VF bound by up.
const ovnConfig = `ovsdb: unix:/var/run/openvswitch/db.sock
libvirt: qemu:///system
lag_timeout: 30s
groups:
  - name: lag0
    eswitch: switchdev
    pfs: [ens1f0np0, ens1f1np1]
    numvfs: 2
    bond: {name: bond0, mode: 802.3ad, miimon: 100}
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:10:00:00"}
      - {pf: 0, vf: 1, mac: "52:54:00:10:00:01"}
    ovs:
      bridge: br-int
      hw_offload: true
    ovn: {remote: "tcp:192.0.2.1:6642", encap_ip: 192.0.2.11/24, underlay_mtu: 1558, system_id: chassis-1}
sim:
  nics:
    - name: cx6lx
      total_vfs: 8
      pfs:
        - {pci: "0000:61:00.0", netdev: ens1f0np0}
        - {pci: "0000:61:00.1", netdev: ens1f1np1}
  latency:
    vf_create: 1ms
    mode_change: 1ms
    lag_activation: 1ms
`

const vmAUUID = "0f3c2a51-6b7d-4e8f-9a0b-1c2d3e4f5a6b"

// newOVNBed is a simulated OVN chassis after up (VF 1's representor a
// port of br-int, unbound), whose Interface then has prior keys of
// someone else's; the hook's config adds the attachment that gives VF 1
// to vm-a with ovn_port lsp-a, and vm-a's XML has a UUID.
func newOVNBed(t *testing.T) (*bed, string) {
	b := upBed(t, ovnConfig)
	b.uuid = vmAUUID
	text := strings.Replace(ovnConfig, "sim:\n", "    attachments:\n      - {domain: vm-a, pf: 0, vf: 1, ovn_port: lsp-a}\nsim:\n", 1)
	cfg, err := config.Parse([]byte(testbed.PointConfig(text, b.srv.Endpoint(), "qemu:///none", b.srv.Netns())))
	if err != nil {
		t.Fatal(err)
	}
	b.cfg = cfg
	b.srv.MustVsctl("set", "Interface", b.rep, "external_ids:iface-id=lsp-old", "external_ids:iface-status=inactive", "external_ids:other=keep")
	return b, b.ifaceIDs()
}

// ifaceIDs is the external_ids of VF 1's representor's Interface.
func (b *bed) ifaceIDs() string {
	b.t.Helper()
	return strings.TrimSpace(b.srv.MustVsctl("get", "Interface", b.rep, "external_ids"))
}

// TestOVNBindPrepareRelease: prepare binds VF 1's representor to the
// attachment's logical port with the domain's UUID from its XML (and the
// config's MAC), journaled in the domain's journal; release puts back the
// Interface's keys exactly as they were (the prior iface-id and
// iface-status, attached-mac and vm-uuid absent again, a key vflag never
// sets untouched). A representor whose port is missing is added, bound,
// and removed again at release.
func TestOVNBindPrepareRelease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delPort bool
	}{
		{"port on br-int", false},
		{"port missing", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, prior := newOVNBed(t)
			want := `{attached-mac="52:54:00:10:00:01", iface-id=lsp-a, iface-status=active, other=keep, vflag-owner=lag0, vm-uuid="` + vmAUUID + `"}`
			if tc.delPort {
				b.srv.MustVsctl("del-port", "br-int", b.rep)
				want = `{attached-mac="52:54:00:10:00:01", iface-id=lsp-a, iface-status=active, vflag-owner=lag0, vm-uuid="` + vmAUUID + `"}`
			}
			ctx := context.Background()
			if err := Run(ctx, b.opts("prepare", "begin")); err != nil {
				t.Fatalf("prepare: %v", err)
			}
			if got := b.ifaceIDs(); got != want {
				t.Fatalf("after prepare: external_ids %s, want %s", got, want)
			}
			var kinds []string
			for _, e := range b.journal("vm-a") {
				kinds = append(kinds, e.Kind)
			}
			if !strings.Contains(strings.Join(kinds, " "), "ovn.bind") {
				t.Fatalf("the binding is not in the domain's journal: %v", kinds)
			}
			if err := Run(ctx, b.opts("release", "end")); err != nil {
				t.Fatalf("release: %v", err)
			}
			if tc.delPort {
				if ports := b.srv.MustVsctl("list-ports", "br-int"); slices.Contains(strings.Fields(ports), b.rep) {
					t.Fatalf("release left port %s on br-int: %s", b.rep, ports)
				}
			} else if got := b.ifaceIDs(); got != prior {
				t.Fatalf("after release: external_ids %s, want as before %s", got, prior)
			}
			if _, err := os.Stat(b.dir("vm-a")); !os.IsNotExist(err) {
				t.Errorf("hook journal directory left after release: %v", err)
			}
		})
	}
}

// TestOVNBindCrashThenRelease: prepare dies around the binding's OVSDB
// write, its journal entry pending: after the write (FailAt), and before
// it (the write undone again: the host as the crash left it). Release
// puts the Interface's keys back exactly as before in both cases, and
// removes the domain's journal.
func TestOVNBindCrashThenRelease(t *testing.T) {
	for _, tc := range []struct {
		name        string
		beforeWrite bool
	}{
		{"after the write", false},
		{"before the write", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, prior := newOVNBed(t)
			ctx := context.Background()
			o := b.opts("prepare", "begin")
			o.FailAt = "ovn.bind/" + b.rep
			if err := Run(ctx, o); err == nil || !strings.Contains(err.Error(), "refusing to start domain vm-a") {
				t.Fatalf("prepare: err %v, want a refusal", err)
			}
			es := b.journal("vm-a")
			if len(es) == 0 || es[len(es)-1].Kind != "ovn.bind" || es[len(es)-1].State != teardown.StatePending {
				t.Fatalf("journal after the crash: %+v", es)
			}
			if tc.beforeWrite {
				b.srv.MustVsctl("remove", "Interface", b.rep, "external_ids", "attached-mac", "vm-uuid")
				b.srv.MustVsctl("set", "Interface", b.rep, "external_ids:iface-id=lsp-old", "external_ids:iface-status=inactive")
				if got := b.ifaceIDs(); got != prior {
					t.Fatalf("the crash's host: %s, want %s", got, prior)
				}
			}
			if err := Run(ctx, b.opts("release", "end")); err != nil {
				t.Fatalf("release: %v", err)
			}
			if got := b.ifaceIDs(); got != prior {
				t.Fatalf("after release: external_ids %s, want as before %s", got, prior)
			}
			if _, err := os.Stat(b.dir("vm-a")); !os.IsNotExist(err) {
				t.Errorf("hook journal directory left after release: %v", err)
			}
		})
	}
}
