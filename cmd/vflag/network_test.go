package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs/ovstest"
)

// poolDaemons are the bed's daemons with a libvirtd that sees the
// simulated NIC's VF addresses as SR-IOV VFs (libvirt refuses a hostdev
// network of other addresses): 0000:61:00.2 on, as the sim numbers them.
func poolDaemons(t *testing.T) daemons {
	var vfs []string
	for dev := 0; dev < 3; dev++ {
		for fn := 0; fn < 8; fn++ {
			if dev == 0 && fn < 2 {
				continue // the PFs
			}
			vfs = append(vfs, fmt.Sprintf("0000:61:%02x.%d", dev, fn))
		}
	}
	d := daemons{ovs: ovstest.Start(t), virt: virttest.Start(t, virttest.FakeVFs(vfs...))}
	d.virt.DefineDomain(t, "vm1")
	d.startOVN(t)
	return d
}

// point writes config text pointed at the bed's daemons.
func (b *bed) point(text string) {
	b.t.Helper()
	b.useConfig(testbed.PointConfig(text, b.ovs.Endpoint(), b.virt.URI(), b.ovs.Netns()))
}

// networkConfig is the example config with a VF pool for libvirt. The
// pool takes pf 0 vf 1, whose own vlan goes: a default portgroup would
// shadow it (config refuses that).
func networkConfig(t *testing.T, network string) string {
	t.Helper()
	const vf1 = `mac: "52:54:00:10:00:01", vlan: 100}`
	cfg := strings.Replace(exampleConfig, vf1, `mac: "52:54:00:10:00:01"}`, 1)
	cfg = strings.Replace(cfg, "    attachments:\n", network+"    attachments:\n", 1)
	if !strings.Contains(exampleConfig, vf1) || !strings.Contains(cfg, network) {
		t.Fatal("example config changed: no vf 1 line or no attachments to put the network before")
	}
	return cfg
}

const poolNetwork = `    network:
      portgroups:
        - {name: tenant-a, vlan: 100, default: true}
        - {name: trunk, vlan_mode: trunk, trunks: [10, 20]}
`

var portAddrRE = regexp.MustCompile(`bus='0x([0-9a-f]{2})' slot='0x([0-9a-f]{2})' function='0x([0-7])'`)

var netAddrRE = regexp.MustCompile(`<address type='pci' domain='0x0000' bus='0x([0-9a-f]{2})' slot='0x([0-9a-f]{2})' function='0x([0-7])'/>`)

// netPool is the network's pool as virsh net-dumpxml shows it, "" when the
// network does not exist.
func netPool(t *testing.T, b *bed, name string) (xml string, addrs int) {
	t.Helper()
	out, err := b.virt.Virsh("net-dumpxml", name)
	if err != nil {
		if strings.Contains(out+err.Error(), "no network with matching name") || strings.Contains(out, "Network not found") {
			return "", 0
		}
		t.Fatalf("virsh net-dumpxml %s: %v\n%s", name, err, out)
	}
	return out, len(netAddrRE.FindAllString(out, -1))
}

func netInfo(t *testing.T, b *bed, name string) string {
	t.Helper()
	out, err := b.virt.Virsh("net-info", name)
	if err != nil {
		t.Fatalf("virsh net-info %s: %v\n%s", name, err, out)
	}
	return out
}

// The pool: up defines, starts and autostarts the group's hostdev network
// with every free VF (not the host's, not attached); a second up changes
// nothing; a VF given to an attachment leaves the pool; dropping the network
// from the config removes it, and down removes it too.
func TestNetworkPool(t *testing.T) {
	d := poolDaemons(t)
	b := newBed(t, d, networkConfig(t, poolNetwork))
	b.initSim()

	rep := b.upJSON(2)
	if rep.Error != "" {
		t.Fatalf("up: %+v", rep)
	}
	xml, n := netPool(t, b, "vflag-lag0")
	// 2 PFs x 4 VFs, minus pf0 vf0 and pf1 vf0 (attached) and pf1 vf1 (the host's).
	if n != 5 {
		t.Fatalf("pool of %d VFs, want 5:\n%s", n, xml)
	}
	for _, want := range []string{"<forward mode='hostdev' managed='yes'>", "portgroup name='tenant-a' default='yes'", "portgroup name='trunk'"} {
		if !strings.Contains(xml, want) {
			t.Errorf("network XML lacks %q:\n%s", want, xml)
		}
	}
	// switchdev: no VLAN for libvirt to put on the VF through the PF.
	if strings.Contains(xml, "<vlan") {
		t.Errorf("switchdev pool with a libvirt <vlan> (mlx5 refuses a VF VLAN in switchdev):\n%s", xml)
	}
	info := netInfo(t, b, "vflag-lag0")
	for _, re := range []string{`Active:\s+yes`, `Persistent:\s+yes`, `Autostart:\s+yes`} {
		if !regexp.MustCompile(re).MatchString(info) {
			t.Errorf("net-info lacks %s:\n%s", re, info)
		}
	}
	if again := b.upJSON(0); again.Changed {
		t.Fatalf("second up changed: %+v", again)
	}
	metrics, _, _ := b.vflag("status", "-o", "prometheus")
	for _, w := range []string{
		`vflag_network_active{group="lag0",network="vflag-lag0"} 1`,
		`vflag_network_vfs{group="lag0",network="vflag-lag0",state="free"} 5`,
	} {
		if !strings.Contains(metrics, w+"\n") {
			t.Errorf("metrics lack %s", w)
		}
	}

	// pf 0 vf 2 to an attachment: out of the pool.
	cfg := strings.Replace(networkConfig(t, poolNetwork), "      - {domain: vm1, pf: 1, vf: 0, live: true}\n",
		"      - {domain: vm1, pf: 1, vf: 0, live: true}\n      - {domain: vm1, pf: 0, vf: 2, mac: \"52:54:00:10:00:02\"}\n", 1)
	b.point(cfg)
	b.upJSON(2)
	if _, n := netPool(t, b, "vflag-lag0"); n != 4 {
		t.Errorf("after attaching pf 0 vf 2: pool of %d VFs, want 4", n)
	}

	// The network dropped from the config: removed.
	b.point(exampleConfig)
	b.upJSON(2)
	if xml, _ := netPool(t, b, "vflag-lag0"); xml != "" {
		t.Errorf("network still defined after it left the config:\n%s", xml)
	}

	// down removes it.
	b.point(networkConfig(t, poolNetwork))
	b.upJSON(2)
	b.mustVflag(0, "down")
	if xml, _ := netPool(t, b, "vflag-lag0"); xml != "" {
		t.Errorf("network still defined after down:\n%s", xml)
	}
}

// defineNetwork defines a network of someone else's (virsh net-define).
func defineNetwork(t *testing.T, b *bed, doc string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "net.xml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := b.virt.Virsh("net-define", f); err != nil {
		t.Fatalf("net-define: %v\n%s", err, out)
	}
}

// A network of the same name that is not vflag's is refused by the
// preflight, before any write, naming the field, and left as it was.
func TestNetworkForeignRefused(t *testing.T) {
	d := poolDaemons(t)
	b := newBed(t, d, networkConfig(t, poolNetwork))
	b.initSim()
	base := b.dump()
	defineNetwork(t, b, "<network><name>vflag-lag0</name><forward mode='hostdev' managed='yes'><address type='pci' domain='0x0000' bus='0x61' slot='0x02' function='0x7'/></forward></network>")
	defer func() { _, _ = b.virt.Virsh("net-undefine", "vflag-lag0") }()
	before, _ := netPool(t, b, "vflag-lag0")
	_, errs, code := b.vflag("up")
	if code != 1 || !strings.Contains(errs, `groups[0].network.name: "vflag-lag0" is a libvirt network that is not vflag's`) {
		t.Fatalf("up: exit %d, want 1 with the foreign network named:\n%s", code, errs)
	}
	if got := b.dump(); got != base {
		t.Errorf("the refused up changed the host")
	}
	if after, _ := netPool(t, b, "vflag-lag0"); after != before {
		t.Errorf("the foreign network changed:\n%s\n->\n%s", before, after)
	}
}

// netHook runs `vflag hook network` as libvirt does: the hookData on stdin.
func (b *bed) netHook(network, op, sub, hookData string) (string, string, int) {
	b.t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		b.t.Fatal(err)
	}
	go func() { _, _ = w.WriteString(hookData); w.Close() }()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	return b.vflag("hook", "network", "--", network, op, sub, "-")
}

// hookData is what libvirt gives the network hook for one port: the
// running network and the port, as libvirt formats them.
func hookData(t *testing.T, b *bed, network, portUUID string) string {
	t.Helper()
	net, err := b.virt.Virsh("net-dumpxml", network)
	if err != nil {
		t.Fatal(err)
	}
	port, err := b.virt.Virsh("net-port-dumpxml", network, portUUID)
	if err != nil {
		t.Fatal(err)
	}
	return "<hookData>\n" + net + port + "</hookData>\n"
}

// createPort allocates a port of the pool for domain in portgroup pg (""
// none) the way a domain start does (virsh net-port-create), and returns
// the VF libvirt picked.
func createPort(t *testing.T, b *bed, network, uuid, domain, pg string) string {
	t.Helper()
	group := ""
	if pg != "" {
		group = "<group>" + pg + "</group>"
	}
	doc := fmt.Sprintf("<networkport><uuid>%s</uuid><owner><name>%s</name><uuid>11111111-2222-3333-4444-555555555555</uuid></owner><mac address='52:54:00:ab:00:01'/>%s</networkport>", uuid, domain, group)
	f := filepath.Join(t.TempDir(), "port.xml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := b.virt.Virsh("net-port-create", network, f); err != nil {
		t.Fatalf("net-port-create: %v\n%s", err, out)
	}
	x, err := b.virt.Virsh("net-port-dumpxml", network, uuid)
	if err != nil {
		t.Fatal(err)
	}
	m := portAddrRE.FindStringSubmatch(x)
	if m == nil {
		t.Fatalf("port without a PCI plug:\n%s", x)
	}
	return fmt.Sprintf("0000:%s:%s.%s", m[1], m[2], m[3])
}

// repPort is the OVS port of the representor of the VF at pci, as status
// shows it: "rep tag N vlan_mode M trunks T".
func repPort(t *testing.T, b *bed, pci string) string {
	t.Helper()
	var hs struct {
		Groups []struct {
			VFs []struct {
				PCI      string `json:"pci"`
				OVSPort  string `json:"ovs_port"`
				VLANMode string `json:"vlan_mode"`
				Tag      int    `json:"tag"`
				Trunks   []int  `json:"trunks"`
			} `json:"vfs"`
		} `json:"groups"`
	}
	out := b.statusAny("-o", "json")
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		t.Fatalf("status json: %v\n%s", err, out)
	}
	for _, v := range hs.Groups[0].VFs {
		if v.PCI == pci {
			return fmt.Sprintf("%s tag %d vlan_mode %q trunks %v", v.OVSPort, v.Tag, v.VLANMode, v.Trunks)
		}
	}
	t.Fatalf("no VF %s in status", pci)
	return ""
}

// The switchdev path of a pool: a port libvirt allocates gets its
// portgroup's VLAN on the VF's representor port (the network hook, with the
// VLAN from vflag's metadata: libvirt's <vlan> is not used), up keeps it,
// validate checks it, port-deleted puts back the representor's own; a hook
// run for a network that is not vflag's changes nothing.
func TestNetworkHookPortVLAN(t *testing.T) {
	d := poolDaemons(t)
	b := newBed(t, d, networkConfig(t, poolNetwork))
	b.upJSON(2)

	const uuid = "aaaaaaaa-0000-0000-0000-000000000001"
	pci := createPort(t, b, "vflag-lag0", uuid, "vmX", "trunk")
	before := repPort(t, b, pci)
	data := hookData(t, b, "vflag-lag0", uuid)

	// Before up has run in this boot (the boot gate's mark absent), a port
	// passes untouched: the qemu hook defers the domain at its start.
	ready := filepath.Join(b.state, "ready")
	mark, err := os.ReadFile(ready)
	if err != nil {
		t.Fatalf("up left no boot gate mark: %v", err)
	}
	if err := os.Remove(ready); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := b.netHook("vflag-lag0", "port-created", "begin", data); code != 0 || !strings.Contains(errs, "not brought the VF-LAG up in this boot") {
		t.Fatalf("hook before the boot's up: exit %d, want 0 and a pass:\n%s", code, errs)
	}
	if got := repPort(t, b, pci); got != before {
		t.Fatalf("hook before the boot's up changed the port: %s -> %s", before, got)
	}
	if err := os.WriteFile(ready, mark, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := b.netHook("vflag-lag0", "port-created", "begin", data); code != 0 {
		t.Fatalf("hook port-created: exit %d\n%s", code, errs)
	}
	got := repPort(t, b, pci)
	if !strings.Contains(got, `tag 0 vlan_mode "trunk" trunks [10 20]`) {
		t.Fatalf("representor port after port-created: %s (before: %s), want trunk 10,20", got, before)
	}
	// up keeps it (it reads the ports from libvirt), validate checks it.
	if again := b.upJSON(0); again.Changed {
		t.Fatalf("up after the hook changed something: %+v", again)
	}
	if got2 := repPort(t, b, pci); got2 != got {
		t.Errorf("up changed the pool port: %s -> %s", got, got2)
	}
	val := b.mustVflag(0, "validate")
	if !strings.Contains(val, "libvirt/network/vflag-lag0/"+pci) {
		t.Errorf("validate has no check of the port's representor:\n%s", val)
	}
	if st := b.mustVflag(0, "status"); !strings.Contains(st, pci+" held by domain vmX portgroup trunk") {
		t.Errorf("status does not show the held VF:\n%s", st)
	}

	// A changed pool while the port is allocated: refused before any write.
	host := b.dump()
	b.point(networkConfig(t, strings.Replace(poolNetwork, "{name: tenant-a, vlan: 100", "{name: tenant-a, vlan: 101", 1)))
	if _, errs, code := b.vflag("up"); code != 1 || !strings.Contains(errs, "while domains hold its VFs (domain vmX on "+pci+")") {
		t.Errorf("portgroup change with a port allocated: exit %d, want 1 naming vmX:\n%s", code, errs)
	}
	if b.dump() != host {
		t.Errorf("the refused up changed the host")
	}
	// The network dropped from the config while the port is allocated: the
	// same, before any write.
	b.point(exampleConfig)
	if _, errs, code := b.vflag("up"); code != 1 || !strings.Contains(errs, "removing libvirt.network/vflag-lag0 would break running domain(s): domain vmX on "+pci) {
		t.Errorf("network dropped with a port allocated: exit %d, want 1 naming vmX:\n%s", code, errs)
	}
	if b.dump() != host {
		t.Errorf("the refused up changed the host")
	}
	if xml, _ := netPool(t, b, "vflag-lag0"); xml == "" {
		t.Errorf("the refused up removed the network")
	}
	b.point(networkConfig(t, poolNetwork))

	// port-deleted: back to the representor's own settings.
	if _, errs, code := b.netHook("vflag-lag0", "port-deleted", "begin", data); code != 0 {
		t.Fatalf("hook port-deleted: exit %d\n%s", code, errs)
	}
	if got := repPort(t, b, pci); got != before {
		t.Errorf("after port-deleted: %s, want %s", got, before)
	}

	// Not vflag's network: nothing.
	foreign := strings.Replace(data, "https://vflag.dev/xmlns/vflag/1", "https://example.com/other", -1)
	if _, errs, code := b.netHook("vflag-lag0", "port-created", "begin", foreign); code != 0 {
		t.Fatalf("foreign network: exit %d\n%s", code, errs)
	}
	if got := repPort(t, b, pci); got != before {
		t.Errorf("a hook run for a foreign network changed the port: %s", got)
	}
	if _, err := b.virt.Virsh("net-port-delete", "vflag-lag0", uuid); err != nil {
		t.Fatal(err)
	}
	b.mustVflag(0, "down")
}

// A pool VF that another libvirt network's pool lists too: libvirt 9.0
// takes both and hands the VF out from each. Where the VFs exist, and
// where up makes them (at the address the PF's SR-IOV offset and stride
// give them), up refuses before any write, naming the VF and the other
// network (plan says the same).
func TestNetworkPoolVFInAnotherNetwork(t *testing.T) {
	d := poolDaemons(t)
	b := newBed(t, d, exampleConfig)
	b.initSim()
	defineNetwork(t, b, "<network><name>other</name><forward mode='hostdev' managed='yes'><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x3'/></forward></network>")
	const why = "VF pf 0 vf 1 (0000:61:00.3) is already in the pool of libvirt network other"

	// From a clean host: refused by the preflight, at the VF's address to be.
	b.point(networkConfig(t, poolNetwork))
	base := b.dump()
	for _, cmd := range []string{"plan", "up"} {
		if _, errs, code := b.vflag(cmd); code != 1 || !strings.Contains(errs, `groups[0].network: "vflag-lag0" VF pf 0 vf 1 (0000:61:00.3, its address once up makes it) is already in the pool of libvirt network other`) {
			t.Fatalf("%s on a clean host: exit %d, want 1 with the preflight naming the VF and the other network:\n%s", cmd, code, errs)
		}
	}
	if got := b.dump(); got != base {
		t.Errorf("the refused first up left the host changed:\n%s", testbed.DiffText(base, got))
	}
	if xml, _ := netPool(t, b, "vflag-lag0"); xml != "" {
		t.Errorf("the refused up defined the network:\n%s", xml)
	}

	// VFs made (up without the pool), then the pool: refused by preflight.
	b.point(exampleConfig)
	b.upJSON(2)
	b.point(networkConfig(t, poolNetwork))
	host := b.dump()
	for _, cmd := range []string{"plan", "up"} {
		if _, errs, code := b.vflag(cmd); code != 1 || !strings.Contains(errs, "groups[0].network: \"vflag-lag0\" "+why) {
			t.Errorf("%s: exit %d, want 1 with preflight naming the VF:\n%s", cmd, code, errs)
		}
	}
	if got := b.dump(); got != host {
		t.Errorf("the refused up changed the host:\n%s", testbed.DiffText(host, got))
	}
	b.point(exampleConfig)
	b.mustVflag(0, "down")
}
