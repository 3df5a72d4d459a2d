package hook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
)

// loadConfig is a switchdev group of 2 x 30 VFs, one per domain of the
// load test, in the layout of the variant: VLAN (the bond in br-lag, each
// VF its own VLAN, 100+i) or OVN (br-int, no VLANs). The hook's config
// (hook: true) gives, under OVN, the VFs of pf 0 to a pool and those of
// pf 1 to one attachment each, bound to lsp-att-<i>; up's has neither (up
// here has no libvirt).
func loadConfig(ovn, hook bool) string {
	var b strings.Builder
	b.WriteString("ovsdb: unix:/var/run/openvswitch/db.sock\nlibvirt: qemu:///system\nlag_timeout: 30s\ngroups:\n  - name: lag0\n    eswitch: switchdev\n")
	b.WriteString("    pfs: [ens1f0np0, ens1f1np1]\n    numvfs: 30\n    bond: {name: bond0, mode: 802.3ad, miimon: 100}\n    vfs:\n")
	for i := range loadDomains {
		pf, vf := i/30, i%30
		if ovn {
			fmt.Fprintf(&b, "      - {pf: %d, vf: %d, mac: %q}\n", pf, vf, fmt.Sprintf("52:54:00:10:%02x:%02x", pf, vf))
		} else {
			fmt.Fprintf(&b, "      - {pf: %d, vf: %d, mac: %q, vlan: %d}\n", pf, vf, fmt.Sprintf("52:54:00:10:%02x:%02x", pf, vf), 100+i)
		}
	}
	if ovn {
		b.WriteString("    ovs:\n      bridge: br-int\n      hw_offload: true\n")
		b.WriteString("    ovn: {remote: \"tcp:192.0.2.1:6642\", encap_ip: 192.0.2.11/24, underlay_mtu: 1558, system_id: chassis-1}\n")
		if hook {
			b.WriteString("    network: {vfs: [")
			for vf := range 30 {
				if vf > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "{pf: 0, vf: %d}", vf)
			}
			b.WriteString("]}\n    attachments:\n")
			for i := 30; i < loadDomains; i++ {
				fmt.Fprintf(&b, "      - {domain: %s, pf: 1, vf: %d, ovn_port: lsp-att-%d}\n", loadName(i), i-30, i)
			}
		}
	} else {
		b.WriteString("    ovs:\n      bridge: br-lag\n      hw_offload: true\n")
	}
	b.WriteString("sim:\n  nics:\n    - name: cx6lx\n      total_vfs: 32\n      pfs:\n        - {pci: \"0000:61:00.0\", netdev: ens1f0np0}\n        - {pci: \"0000:61:00.1\", netdev: ens1f1np1}\n")
	b.WriteString("  latency:\n    vf_create: 1ms\n    mode_change: 1ms\n    lag_activation: 1ms\n")
	return b.String()
}

// loadDomains start at once in the load test: libvirt runs a domain's
// hooks one after the other, but 60 domains' hooks side by side.
const loadDomains = 60

func loadName(i int) string { return fmt.Sprintf("vm%02d", i) }
func loadMAC(i int) string  { return fmt.Sprintf("52:54:00:77:00:%02x", i) }
func loadUUID(i int) string { return fmt.Sprintf("0f3c2a51-6b7d-4e8f-9a0b-%012x", i) }

// loadVF is domain i's VF: its PF's netdev, its index and its PCI address.
type loadVF struct {
	pf   string
	vf   int
	pci  string
	rep  string
	mac  string // the config's MAC (the VF's after up)
	uuid string
}

// TestSixtyDomainsAtOnce: 60 domains, each with one VF, start at once (60
// hooks side by side), then stop at once. VLAN: every representor's port,
// deleted beforehand, is back on br-lag with its VF's own VLAN, and every
// VF has its domain's MAC. OVN: 30 domains take a VF from the pool and
// name their logical port in their metadata, 30 have an attachment with
// ovn_port; every representor gets its own domain's iface-id,
// attached-mac and vm-uuid (none lost, none swapped). In both, each
// domain's journal holds exactly its own VF's changes; after the releases
// the host is as before and no journal is left.
func TestSixtyDomainsAtOnce(t *testing.T) {
	t.Parallel()
	for _, ovn := range []bool{false, true} {
		name := "vlan"
		if ovn {
			name = "ovn"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sixtyDomains(t, ovn)
		})
	}
}

func sixtyDomains(t *testing.T, ovn bool) {
	b := upBed(t, loadConfig(ovn, false))
	cfg, err := config.Parse([]byte(testbed.PointConfig(loadConfig(ovn, true), b.srv.Endpoint(), "qemu:///none", b.srv.Netns())))
	if err != nil {
		t.Fatal(err)
	}
	bridge := cfg.Groups[0].OVS.Bridge
	vfs := make([]loadVF, loadDomains)
	h := b.host()
	for p, netdev := range []string{"ens1f0np0", "ens1f1np1"} {
		pf, err := eswitch.ResolvePF(h.Kernel, h.FS, netdev)
		if err != nil {
			t.Fatal(err)
		}
		reps, err := eswitch.Representors(h.Kernel, h.FS, pf)
		if err != nil {
			t.Fatal(err)
		}
		for vf := range 30 {
			a, ok, err := h.PCI.VF(pf.Addr, vf)
			if err != nil || !ok || reps[vf] == "" {
				t.Fatalf("VF %d of %s: %s %v %v, representor %q", vf, netdev, a, ok, err, reps[vf])
			}
			i := p*30 + vf
			vfs[i] = loadVF{pf: netdev, vf: vf, pci: string(a), rep: reps[vf], mac: fmt.Sprintf("52:54:00:10:%02x:%02x", p, vf), uuid: loadUUID(i)}
		}
	}
	h.Close()
	if !ovn {
		var args []string
		for _, v := range vfs {
			args = append(args, "--", "del-port", bridge, v.rep)
		}
		b.srv.MustVsctl(args[1:]...)
	}
	before := b.srv.Dump()
	docs := make([]string, loadDomains)
	for i, v := range vfs {
		meta := ""
		if ovn && i < 30 {
			meta = poolMeta(poolEntry(loadMAC(i), fmt.Sprintf("lsp-pool-%d", i)))
		}
		a := strings.NewReplacer(":", " ", ".", " ").Replace(v.pci) // 0000 61 00 2
		f := strings.Fields(a)
		docs[i] = `<domain type='kvm'><name>` + loadName(i) + `</name><uuid>` + v.uuid + `</uuid>` + meta + `<devices>
    <interface type='hostdev' managed='yes'>
      <mac address='` + loadMAC(i) + `'/>
      <source><address type='pci' domain='0x` + f[0] + `' bus='0x` + f[1] + `' slot='0x` + f[2] + `' function='0x` + f[3] + `'/></source>
    </interface>
  </devices></domain>`
	}
	all := func(op, sub string) {
		t.Helper()
		errs := make([]error, loadDomains)
		var wg sync.WaitGroup
		for i := range loadDomains {
			wg.Go(func() { errs[i] = Run(context.Background(), b.optsXML(cfg, loadName(i), op, sub, docs[i])) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s %s of %s: %v", op, sub, loadName(i), err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	all("start", "begin")

	macs := map[string]string{}
	h = b.host()
	for _, netdev := range []string{"ens1f0np0", "ens1f1np1"} {
		l, err := h.Kernel.Link(netdev)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range l.VFs {
			macs[fmt.Sprintf("%s/%d", netdev, v.ID)] = v.MAC
		}
	}
	h.Close()
	// Each representor's Interface external_ids and Port tag, in one read
	// each.
	column := func(table, col string) map[string]string {
		out := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(b.srv.MustVsctl("--format=csv", "--no-headings", "--columns=name,"+col, "list", table)), "\n") {
			name, val, _ := strings.Cut(line, ",")
			out[name] = strings.ReplaceAll(strings.Trim(val, `"`), `""`, `"`) // csv quoting
		}
		return out
	}
	extIDs, tags := column("Interface", "external_ids"), column("Port", "tag")
	for i, v := range vfs {
		if got := macs[fmt.Sprintf("%s/%d", v.pf, v.vf)]; got != loadMAC(i) {
			t.Errorf("%s: VF %d of %s has MAC %s, want its domain's %s", loadName(i), v.vf, v.pf, got, loadMAC(i))
		}
		want := []string{fmt.Sprintf("sriov.vfmac/%s/%d", v.pf, v.vf)}
		if ovn {
			ids := extIDs[v.rep]
			lsp := fmt.Sprintf("lsp-pool-%d", i)
			if i >= 30 {
				lsp = fmt.Sprintf("lsp-att-%d", i)
			}
			mac := loadMAC(i)
			if i >= 30 {
				mac = v.mac // an attachment's binding carries the config's MAC of the VF
			}
			wantIDs := fmt.Sprintf(`{attached-mac="%s", iface-id=%s, iface-status=active, vflag-owner=lag0, vm-uuid="%s"}`, mac, lsp, v.uuid)
			if ids != wantIDs {
				t.Errorf("%s: representor %s has external_ids %s, want %s", loadName(i), v.rep, ids, wantIDs)
			}
			want = append(want, "ovn.bind/"+v.rep)
		} else {
			if tag := tags[v.rep]; tag != fmt.Sprint(100+i) {
				t.Errorf("%s: representor %s's port has tag %s, want its VF's %d", loadName(i), v.rep, tag, 100+i)
			}
			want = append(want, fmt.Sprintf("ovs.port/%s/%s", bridge, v.rep))
		}
		var got []string
		for _, e := range b.journal(loadName(i)) {
			got = append(got, e.ID)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: journal %v, want %v", loadName(i), got, want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	all("release", "end")
	if got := b.srv.Dump(); got != before {
		t.Errorf("OVSDB after the releases differs from before the starts:\n%s", testbed.DiffText(before, got))
	}
	for i := range loadDomains {
		if es := b.journal(loadName(i)); len(es) > 0 {
			t.Errorf("%s: journal left after release: %v", loadName(i), es)
		}
	}
}
