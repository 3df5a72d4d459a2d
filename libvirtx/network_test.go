package libvirtx_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"libvirt.org/go/libvirtxml"

	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/libvirtx/virttest"
)

func TestNetworkXMLGolden(t *testing.T) {
	s := libvirtx.NetworkSpec{
		Name:  "vflag-lag0",
		Owner: "lag0",
		PCIs:  []string{"0000:61:00.4", "61:00.2", "0000:61:00.3"},
		Portgroups: []libvirtx.NetworkPortgroup{
			{Name: "tenant-b", VLAN: 200, LibvirtVLAN: true},
			{Name: "tenant-a", Default: true, VLAN: 100, VLANMode: "native-untagged", Trunks: []int{30, 20, 20}},
			{Name: "tenant-c", VLANMode: "trunk", Trunks: []int{5}},
		},
	}
	got, err := libvirtx.NetworkXML(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `<network>
  <name>vflag-lag0</name>
  <metadata><vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1" owner="lag0"><vflag:portgroup name="tenant-a" vlan="100" vlan_mode="native-untagged" trunks="20,30"></vflag:portgroup><vflag:portgroup name="tenant-b" vlan="200"></vflag:portgroup><vflag:portgroup name="tenant-c" vlan_mode="trunk" trunks="5"></vflag:portgroup></vflag:vflag></metadata>
  <forward mode="hostdev" managed="yes">
    <address type="pci" domain="0x0000" bus="0x61" slot="0x00" function="0x2"></address>
    <address type="pci" domain="0x0000" bus="0x61" slot="0x00" function="0x3"></address>
    <address type="pci" domain="0x0000" bus="0x61" slot="0x00" function="0x4"></address>
  </forward>
  <portgroup name="tenant-a" default="yes"></portgroup>
  <portgroup name="tenant-b">
    <vlan>
      <tag id="200"></tag>
    </vlan>
  </portgroup>
  <portgroup name="tenant-c"></portgroup>
</network>`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NetworkXML (-want +got):\n%s", diff)
	}

	// Semantics, read back with libvirtxml independently of the package.
	var n libvirtxml.Network
	if err := n.Unmarshal(got); err != nil {
		t.Fatal(err)
	}
	if n.Forward == nil || n.Forward.Mode != "hostdev" || n.Forward.Managed != "yes" {
		t.Errorf("forward = %+v, want mode hostdev managed yes", n.Forward)
	}
	var addrs []string
	for _, a := range n.Forward.Addresses {
		addrs = append(addrs, fmt.Sprintf("%04x:%02x:%02x.%x", *a.PCI.Domain, *a.PCI.Bus, *a.PCI.Slot, *a.PCI.Function))
	}
	if !cmp.Equal(addrs, []string{"0000:61:00.2", "0000:61:00.3", "0000:61:00.4"}) {
		t.Errorf("addresses = %q, want sorted pool", addrs)
	}
	for _, pg := range n.PortGroups {
		if (pg.VLAN != nil) != (pg.Name == "tenant-b") {
			t.Errorf("portgroup %s: libvirt <vlan> %+v; only the LibvirtVLAN portgroup tenant-b has one", pg.Name, pg.VLAN)
		}
	}
}

func TestNetworkXMLRefuses(t *testing.T) {
	ok := libvirtx.NetworkSpec{Name: "n", Owner: "g", PCIs: []string{"0000:61:00.2"}}
	tests := []struct {
		name string
		edit func(*libvirtx.NetworkSpec)
		want string
	}{
		{"empty name", func(s *libvirtx.NetworkSpec) { s.Name = "" }, "network Name"},
		{"slash in name", func(s *libvirtx.NetworkSpec) { s.Name = "a/b" }, "network Name"},
		{"empty owner", func(s *libvirtx.NetworkSpec) { s.Owner = " " }, "Owner"},
		{"no PCIs", func(s *libvirtx.NetworkSpec) { s.PCIs = nil }, "PCIs is empty"},
		{"bad PCI", func(s *libvirtx.NetworkSpec) { s.PCIs = []string{"0000:61:00.2", "61:0.zz"} }, "PCIs[1]"},
		{"PCI twice", func(s *libvirtx.NetworkSpec) { s.PCIs = []string{"0000:61:00.2", "61:00.2"} }, "PCIs[1]: 0000:61:00.2 listed twice"},
		{"portgroup without name", func(s *libvirtx.NetworkSpec) { s.Portgroups = []libvirtx.NetworkPortgroup{{}} }, "Portgroups[0]: empty Name"},
		{"portgroup twice", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a"}, {Name: "a"}}
		}, `Portgroups[1] ("a"): Name listed twice`},
		{"two defaults", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", Default: true}, {Name: "b", Default: true}}
		}, `Portgroups[1] ("b"): Default`},
		{"bad mode", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLAN: 5, VLANMode: "tagged"}}
		}, `VLANMode "tagged"`},
		{"vlan out of range", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLAN: 4095}}
		}, "VLAN 4095"},
		{"trunk out of range", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLANMode: "trunk", Trunks: []int{0}}}
		}, "Trunks: VLAN 0"},
		{"access without vlan", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLANMode: "access"}}
		}, "access needs a VLAN"},
		{"access with trunks", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLAN: 3, Trunks: []int{4}}}
		}, "Trunks need VLANMode"},
		{"trunk without trunks", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLANMode: "trunk"}}
		}, "trunk needs Trunks"},
		{"trunk with vlan", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLANMode: "trunk", VLAN: 3, Trunks: []int{4}}}
		}, "VLAN 3: VLANMode trunk"},
		{"native without vlan", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLANMode: "native-tagged", Trunks: []int{4}}}
		}, "native-tagged needs a VLAN"},
		{"libvirt vlan trunk", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLANMode: "trunk", Trunks: []int{4}, LibvirtVLAN: true}}
		}, "LibvirtVLAN"},
		{"libvirt vlan native", func(s *libvirtx.NetworkSpec) {
			s.Portgroups = []libvirtx.NetworkPortgroup{{Name: "a", VLANMode: "native-untagged", VLAN: 4, LibvirtVLAN: true}}
		}, "LibvirtVLAN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			_, err := libvirtx.NetworkXML(s)
			mustContain(t, err, tc.want)
		})
	}
	if _, err := libvirtx.NetworkXML(ok); err != nil {
		t.Errorf("valid spec refused: %v", err)
	}
}

// netEnv is a private libvirtd that sees fake VFs and records its network
// hook calls.
type netEnv struct {
	*env
}

var fakeVFs = []string{
	"0000:61:00.2", "0000:61:00.3", "0000:61:00.4", "0000:61:00.5", "0000:61:00.6",
	"0000:62:00.2", "0000:62:00.3",
	"0000:63:00.2", "0000:63:00.3",
	"0000:64:00.2", "0000:64:00.3",
	"0000:65:00.2", "0000:65:00.3", "0000:65:00.4", "0000:65:00.5",
}

func newNetEnv(t *testing.T) *netEnv {
	d := virttest.Start(t, virttest.FakeVFs(fakeVFs...), virttest.CaptureHooks("network"))
	c, err := libvirtx.Open(d.URI())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return &netEnv{&env{d: d, c: c}}
}

// createPort allocates a port of network for domain with virsh.
func (e *netEnv) createPort(t *testing.T, network, uuid, domain, portgroup, mac string) {
	t.Helper()
	doc := fmt.Sprintf(`<networkport>
  <uuid>%s</uuid>
  <owner><name>%s</name><uuid>%s</uuid></owner>
  <mac address='%s'/>
  <group>%s</group>
</networkport>`, uuid, domain, "11111111-2222-3333-4444-"+strings.Repeat("0", 12-len(domain))+hexName(domain), mac, portgroup)
	f := filepath.Join(t.TempDir(), "port.xml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Virsh("net-port-create", network, f); err != nil {
		t.Fatal(err)
	}
}

// hexName turns a short domain name into hex digits for a fake owner UUID.
func hexName(s string) string {
	var b strings.Builder
	for _, c := range s {
		b.WriteString(fmt.Sprintf("%x", c%16))
	}
	return b.String()
}

func (e *netEnv) hookOps(t *testing.T, network string) []string {
	t.Helper()
	ops, err := e.d.HookOps("network", network)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func (e *netEnv) netXML(t *testing.T, name string, inactive bool) string {
	t.Helper()
	args := []string{"net-dumpxml", name}
	if inactive {
		args = []string{"net-dumpxml", "--inactive", name}
	}
	out, err := e.d.Virsh(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNetworks(t *testing.T) {
	e := newNetEnv(t)

	t.Run("DefineStartIdempotent", func(t *testing.T) {
		t.Parallel()
		s := libvirtx.NetworkSpec{
			Name: "vflag-idem", Owner: "idem",
			PCIs: []string{"0000:61:00.4", "0000:61:00.2", "0000:61:00.3"},
			Portgroups: []libvirtx.NetworkPortgroup{
				{Name: "tenant-a", Default: true, VLAN: 100, LibvirtVLAN: true},
				{Name: "tenant-b", VLAN: 200, VLANMode: "native-untagged", Trunks: []int{300, 301}},
			},
		}
		changed, err := e.c.EnsureNetwork(s)
		if err != nil || !changed {
			t.Fatalf("first EnsureNetwork = %v, %v; want changed", changed, err)
		}
		st, err := e.c.Network(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		pool := []string{"0000:61:00.2", "0000:61:00.3", "0000:61:00.4"}
		want := libvirtx.NetworkState{
			Name: s.Name, Exists: true, Active: true, Autostart: true, Persistent: true, Owned: true, Owner: "idem",
			PCIs: pool, ConfigPCIs: pool, Portgroups: s.Portgroups,
		}
		if diff := cmp.Diff(want, st, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Network (-want +got):\n%s", diff)
		}
		before := e.netXML(t, s.Name, true)
		if !strings.Contains(before, libvirtx.MetadataNamespace) || !strings.Contains(before, `trunks="300,301"`) {
			t.Errorf("no vflag metadata in the persistent XML:\n%s", before)
		}
		// Reordered input, same meaning: nothing to do.
		s.PCIs = []string{"61:00.3", "0000:61:00.2", "0000:61:00.4"}
		s.Portgroups[0], s.Portgroups[1] = s.Portgroups[1], s.Portgroups[0]
		changed, err = e.c.EnsureNetwork(s)
		if err != nil || changed {
			t.Fatalf("second EnsureNetwork = %v, %v; want unchanged", changed, err)
		}
		if after := e.netXML(t, s.Name, true); after != before {
			t.Errorf("second EnsureNetwork changed the definition:\n%s\n->\n%s", before, after)
		}
	})

	t.Run("InactiveIsStartedAndAutostarted", func(t *testing.T) {
		t.Parallel()
		s := libvirtx.NetworkSpec{Name: "vflag-inactive", Owner: "inactive", PCIs: []string{"0000:62:00.2"}}
		if _, err := e.c.EnsureNetwork(s); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"net-destroy", s.Name}, {"net-autostart", "--disable", s.Name}} {
			if _, err := e.d.Virsh(args...); err != nil {
				t.Fatal(err)
			}
		}
		changed, err := e.c.EnsureNetwork(s)
		if err != nil || !changed {
			t.Fatalf("EnsureNetwork = %v, %v; want changed", changed, err)
		}
		st, err := e.c.Network(s.Name)
		if err != nil || !st.Active || !st.Autostart {
			t.Fatalf("Network = %+v, %v; want active and autostarted", st, err)
		}
	})

	t.Run("PoolChangeRestartsWithoutPorts", func(t *testing.T) {
		t.Parallel()
		s := libvirtx.NetworkSpec{Name: "vflag-pool", Owner: "pool", PCIs: []string{"0000:63:00.2"}}
		if _, err := e.c.EnsureNetwork(s); err != nil {
			t.Fatal(err)
		}
		s.PCIs = []string{"0000:63:00.3", "0000:64:00.2"}
		changed, err := e.c.EnsureNetwork(s)
		if err != nil || !changed {
			t.Fatalf("EnsureNetwork = %v, %v; want changed", changed, err)
		}
		st, err := e.c.Network(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(st.PCIs, s.PCIs) || !cmp.Equal(st.ConfigPCIs, s.PCIs) || !st.Active {
			t.Errorf("after the change: active %v, live pool %q, persistent pool %q; want both %q", st.Active, st.PCIs, st.ConfigPCIs, s.PCIs)
		}
		ops := e.hookOps(t, s.Name)
		if !cmp.Equal(ops, []string{"start begin", "started begin", "stopped end", "start begin", "started begin"}) {
			t.Errorf("hook calls = %q, want a start, then a restart", ops)
		}
	})

	t.Run("PortgroupChangeIsLive", func(t *testing.T) {
		t.Parallel()
		s := libvirtx.NetworkSpec{
			Name: "vflag-pg", Owner: "pg", PCIs: []string{"0000:64:00.3"},
			Portgroups: []libvirtx.NetworkPortgroup{
				{Name: "a", VLAN: 10},
				{Name: "b", Default: true, VLAN: 20, LibvirtVLAN: true},
			},
		}
		if _, err := e.c.EnsureNetwork(s); err != nil {
			t.Fatal(err)
		}
		// The same VLANs (so the same metadata); libvirt's portgroups
		// change: the default moves to a (libvirt refuses a second
		// default, so b must lose it first), the VLAN leaves libvirt's
		// <vlan> of b and enters a's.
		s.Portgroups = []libvirtx.NetworkPortgroup{
			{Name: "a", Default: true, VLAN: 10, LibvirtVLAN: true},
			{Name: "b", VLAN: 20},
		}
		changed, err := e.c.EnsureNetwork(s)
		if err != nil || !changed {
			t.Fatalf("EnsureNetwork = %v, %v; want changed", changed, err)
		}
		st, err := e.c.Network(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.Portgroups, st.Portgroups, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("live portgroups (-want +got):\n%s", diff)
		}
		if x := e.netXML(t, s.Name, true); !strings.Contains(x, "<portgroup name='a' default='yes'>") {
			t.Errorf("persistent definition without the new default:\n%s", x)
		}
		ops := e.hookOps(t, s.Name)
		if !cmp.Equal(ops, []string{"start begin", "started begin", "updated begin", "updated begin"}) {
			t.Errorf("hook calls = %q, want a start and two live updates (no restart)", ops)
		}
	})

	t.Run("PortsBlockLiveChangesAndRemoval", func(t *testing.T) {
		t.Parallel()
		s := libvirtx.NetworkSpec{
			Name: "vflag-ports", Owner: "ports",
			PCIs:       []string{"0000:65:00.2", "0000:65:00.3", "0000:65:00.4"},
			Portgroups: []libvirtx.NetworkPortgroup{{Name: "tenant-a", Default: true, VLAN: 100, LibvirtVLAN: true}, {Name: "tenant-b"}},
		}
		if _, err := e.c.EnsureNetwork(s); err != nil {
			t.Fatal(err)
		}
		e.createPort(t, s.Name, "aaaaaaaa-bbbb-cccc-dddd-000000000001", "vm1", "tenant-a", "52:54:00:00:00:01")
		e.createPort(t, s.Name, "aaaaaaaa-bbbb-cccc-dddd-000000000002", "vm2", "", "52:54:00:00:00:02")
		st, err := e.c.Network(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		wantPorts := []libvirtx.NetworkPort{
			{UUID: "aaaaaaaa-bbbb-cccc-dddd-000000000001", Domain: "vm1", PCI: "0000:65:00.2", Portgroup: "tenant-a", MAC: "52:54:00:00:00:01"},
			{UUID: "aaaaaaaa-bbbb-cccc-dddd-000000000002", Domain: "vm2", PCI: "0000:65:00.3", Portgroup: "", MAC: "52:54:00:00:00:02"},
		}
		if diff := cmp.Diff(wantPorts, st.Ports); diff != "" {
			t.Fatalf("ports (-want +got):\n%s", diff)
		}
		// libvirt puts a port without a group into the default portgroup:
		// vm2's port gets tenant-a's <vlan>, its <group> stays empty.
		if x, err := e.d.Virsh("net-port-dumpxml", s.Name, wantPorts[1].UUID); err != nil || !strings.Contains(x, "<tag id='100'/>") {
			t.Errorf("port without a group: %v\n%s\nwant the default portgroup's <vlan>", err, x)
		}
		if pg, ok := st.Portgroup(st.Ports[1].Portgroup); !ok || pg.Name != "tenant-a" {
			t.Errorf("Portgroup(%q) = %+v, %v; want the default tenant-a", st.Ports[1].Portgroup, pg, ok)
		}

		if changed, err := e.c.EnsureNetwork(s); err != nil || changed {
			t.Errorf("EnsureNetwork unchanged with ports = %v, %v; want no change, no error", changed, err)
		}
		before := e.netXML(t, s.Name, true)
		pool := s
		pool.PCIs = []string{"0000:65:00.2", "0000:65:00.3", "0000:65:00.5"}
		_, err = e.c.EnsureNetwork(pool)
		mustContain(t, err, "VF pool", "while domains hold its VFs", "domain vm1 on 0000:65:00.2", "domain vm2 on 0000:65:00.3")
		pg := s
		// libvirt's portgroups only (the same VLANs in the metadata).
		pg.Portgroups = []libvirtx.NetworkPortgroup{{Name: "tenant-a", Default: true, VLAN: 100}, {Name: "tenant-b"}}
		_, err = e.c.EnsureNetwork(pg)
		mustContain(t, err, "portgroups", "resets libvirt's VF usage counts", "while domains hold its VFs")
		if strings.Contains(err.Error(), "metadata") {
			t.Errorf("a portgroup change reported as a metadata change: %v", err)
		}
		// vflag's metadata only (tenant-b's VLAN is not libvirt's).
		meta := s
		meta.Portgroups = []libvirtx.NetworkPortgroup{{Name: "tenant-a", Default: true, VLAN: 100, LibvirtVLAN: true}, {Name: "tenant-b", VLAN: 7}}
		_, err = e.c.EnsureNetwork(meta)
		mustContain(t, err, "vflag metadata", "while domains hold its VFs")
		if strings.Contains(err.Error(), "portgroups") {
			t.Errorf("a metadata change reported as a portgroup change: %v", err)
		}
		if after := e.netXML(t, s.Name, true); after != before {
			t.Errorf("a refused EnsureNetwork changed the persistent definition:\n%s\n->\n%s", before, after)
		}

		_, err = e.c.RemoveNetwork(s.Name)
		mustContain(t, err, "refusing to remove", "domains vm1, vm2")
		for _, u := range []string{"aaaaaaaa-bbbb-cccc-dddd-000000000001", "aaaaaaaa-bbbb-cccc-dddd-000000000002"} {
			if _, err := e.d.Virsh("net-port-delete", s.Name, u); err != nil {
				t.Fatal(err)
			}
		}
		removed, err := e.c.RemoveNetwork(s.Name)
		if err != nil || !removed {
			t.Fatalf("RemoveNetwork without ports = %v, %v; want removed", removed, err)
		}
		if st, err := e.c.Network(s.Name); err != nil || st.Exists {
			t.Errorf("after RemoveNetwork: Network = %+v, %v; want missing", st, err)
		}
		if removed, err := e.c.RemoveNetwork(s.Name); err != nil || removed {
			t.Errorf("RemoveNetwork of a missing network = %v, %v; want false, nil", removed, err)
		}
	})

	t.Run("ForeignRefused", func(t *testing.T) {
		t.Parallel()
		doc := `<network>
  <name>vflag-foreign</name>
  <forward mode='hostdev' managed='yes'>
    <address type='pci' domain='0x0000' bus='0x62' slot='0x00' function='0x3'/>
  </forward>
</network>`
		f := filepath.Join(t.TempDir(), "net.xml")
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := e.d.Virsh("net-define", f); err != nil {
			t.Fatal(err)
		}
		before := e.netXML(t, "vflag-foreign", true)
		st, err := e.c.Network("vflag-foreign")
		if err != nil || !st.Exists || st.Owned {
			t.Errorf("Network = %+v, %v; want an existing network that is not owned", st, err)
		}
		_, err = e.c.EnsureNetwork(libvirtx.NetworkSpec{Name: "vflag-foreign", Owner: "g", PCIs: []string{"0000:62:00.3"}})
		mustContain(t, err, "vflag-foreign", "not vflag's")
		_, err = e.c.RemoveNetwork("vflag-foreign")
		mustContain(t, err, "vflag-foreign", "not vflag's")
		if after := e.netXML(t, "vflag-foreign", true); after != before {
			t.Errorf("the foreign network changed:\n%s\n->\n%s", before, after)
		}
	})

	t.Run("OtherOwnerRefused", func(t *testing.T) {
		t.Parallel()
		s := libvirtx.NetworkSpec{Name: "vflag-owner", Owner: "first", PCIs: []string{"0000:61:00.6"}}
		if _, err := e.c.EnsureNetwork(s); err != nil {
			t.Fatal(err)
		}
		s.Owner = "second"
		_, err := e.c.EnsureNetwork(s)
		mustContain(t, err, `belongs to vflag group "first", not "second"`)
	})

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		st, err := e.c.Network("no-such-network")
		if err != nil || st.Exists || st.Name != "no-such-network" {
			t.Errorf("Network = %+v, %v; want Exists false", st, err)
		}
		if removed, err := e.c.RemoveNetwork("no-such-network"); err != nil || removed {
			t.Errorf("RemoveNetwork = %v, %v; want false, nil", removed, err)
		}
	})
}

// hookNetwork is the network TestNetworkHookData runs; the fixtures under
// testdata/network-hook were captured from it (VFLAG_UPDATE_FIXTURES=1
// writes them again).
var hookNetwork = libvirtx.NetworkSpec{
	Name: "vflag-lag0", Owner: "lag0",
	PCIs: []string{"0000:61:00.2", "0000:61:00.3"},
	Portgroups: []libvirtx.NetworkPortgroup{
		{Name: "tenant-a", Default: true, VLAN: 100},
		{Name: "tenant-b", VLAN: 200, LibvirtVLAN: true},
		{Name: "trunk", VLANMode: "native-untagged", VLAN: 5, Trunks: []int{6, 7}},
	},
}

var uuidRE = regexp.MustCompile(`(<network[^>]*>\s*<name>[^<]*</name>\s*<uuid>)[0-9a-f-]{36}(</uuid>)`)

// fixtureText makes a captured hookData reproducible: the network's UUID,
// which libvirt generates, becomes a fixed one.
func fixtureText(stdin string) string {
	return uuidRE.ReplaceAllString(stdin, "${1}00000000-0000-0000-0000-000000000000${2}")
}

func TestNetworkHookData(t *testing.T) {
	e := newNetEnv(t)
	// Start with tenant-b as the default, then move it to tenant-a: a
	// live update ("updated").
	first := hookNetwork
	first.Portgroups = append([]libvirtx.NetworkPortgroup(nil), hookNetwork.Portgroups...)
	first.Portgroups[0].Default, first.Portgroups[1].Default = false, true
	for _, s := range []libvirtx.NetworkSpec{first, hookNetwork} {
		if _, err := e.c.EnsureNetwork(s); err != nil {
			t.Fatal(err)
		}
	}
	e.createPort(t, hookNetwork.Name, "aaaaaaaa-bbbb-cccc-dddd-000000000001", "vm1", "tenant-a", "52:54:00:00:00:01")
	if _, err := e.d.Virsh("net-port-delete", hookNetwork.Name, "aaaaaaaa-bbbb-cccc-dddd-000000000001"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.RemoveNetwork(hookNetwork.Name); err != nil {
		t.Fatal(err)
	}
	calls, err := e.d.HookCalls("network")
	if err != nil {
		t.Fatal(err)
	}
	captured := map[string]string{}
	var ops []string
	for _, c := range calls {
		if len(c.Args) != 4 || c.Args[0] != hookNetwork.Name || c.Args[3] != "-" {
			t.Errorf("hook arguments %q, want network name, operation, sub-operation, -", c.Args)
			continue
		}
		op := c.Args[1] + "-" + c.Args[2]
		ops = append(ops, op)
		captured[op] = fixtureText(c.Stdin) // the last call of each operation
	}
	wantOps := []string{"start-begin", "started-begin", "updated-begin", "updated-begin", "port-created-begin", "port-deleted-begin", "stopped-end"}
	if !cmp.Equal(ops, wantOps) {
		t.Fatalf("hook calls %q, want %q", ops, wantOps)
	}
	dir := filepath.Join("testdata", "network-hook")
	if os.Getenv("VFLAG_UPDATE_FIXTURES") != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for op, text := range captured {
			if err := os.WriteFile(filepath.Join(dir, op+".xml"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	pool := []string{"0000:61:00.2", "0000:61:00.3"}
	wantNet := libvirtx.NetworkState{Name: "vflag-lag0", Exists: true, Owned: true, Owner: "lag0", PCIs: pool, Portgroups: hookNetwork.Portgroups}
	port := &libvirtx.NetworkPort{UUID: "aaaaaaaa-bbbb-cccc-dddd-000000000001", Domain: "vm1", PCI: "0000:61:00.2", Portgroup: "tenant-a", MAC: "52:54:00:00:00:01"}
	for op := range captured {
		t.Run(op, func(t *testing.T) {
			fixture, err := os.ReadFile(filepath.Join(dir, op+".xml"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(fixture), captured[op]); diff != "" {
				t.Errorf("libvirtd's hookData differs from the fixture (VFLAG_UPDATE_FIXTURES=1 rewrites it) (-fixture +libvirtd):\n%s", diff)
			}
			got, err := libvirtx.ParseNetworkHook(fixture)
			if err != nil {
				t.Fatal(err)
			}
			want := libvirtx.NetworkHookData{Network: wantNet}
			if strings.HasPrefix(op, "start") {
				want.Network.Portgroups = first.Portgroups
			}
			if strings.HasPrefix(op, "port-") {
				want.Port = port
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseNetworkHook (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNetworkHookRefuses(t *testing.T) {
	for _, in := range []string{"", "<hookData>", "<hookData></hookData>", "<hookData><network></network></hookData>", "<other><network><name>x</name></network></other>"} {
		if _, err := libvirtx.ParseNetworkHook([]byte(in)); err == nil {
			t.Errorf("ParseNetworkHook(%q) succeeded", in)
		}
	}
	// A foreign network: not owned, portgroups from libvirt's <vlan>.
	got, err := libvirtx.ParseNetworkHook([]byte(`<hookData><network><name>other</name>
  <forward mode='hostdev' managed='yes'><address type='pci' domain='0x0000' bus='0x05' slot='0x10' function='0x1'/></forward>
  <portgroup name='t'><vlan trunk='yes'><tag id='4'/><tag id='3' nativeMode='tagged'/></vlan></portgroup>
  <portgroup name='a'><vlan><tag id='9'/></vlan></portgroup>
</network></hookData>`))
	if err != nil {
		t.Fatal(err)
	}
	want := libvirtx.NetworkHookData{Network: libvirtx.NetworkState{
		Name: "other", Exists: true, PCIs: []string{"0000:05:10.1"},
		Portgroups: []libvirtx.NetworkPortgroup{
			{Name: "a", VLAN: 9, VLANMode: "access", LibvirtVLAN: true},
			{Name: "t", VLAN: 3, VLANMode: "native-tagged", Trunks: []int{4}, LibvirtVLAN: true},
		},
	}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("ParseNetworkHook of a foreign network (-want +got):\n%s", diff)
	}
}

func TestNetworkStatePortgroup(t *testing.T) {
	st := libvirtx.NetworkState{Portgroups: []libvirtx.NetworkPortgroup{{Name: "a", VLAN: 1}, {Name: "b", Default: true, VLAN: 2}}}
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"a", "a", true},
		{"b", "b", true},
		{"", "b", true}, // no group: the default
		{"c", "", false},
	}
	for _, tc := range tests {
		pg, ok := st.Portgroup(tc.name)
		if pg.Name != tc.want || ok != tc.ok {
			t.Errorf("Portgroup(%q) = %q, %v; want %q, %v", tc.name, pg.Name, ok, tc.want, tc.ok)
		}
	}
	if _, ok := (libvirtx.NetworkState{Portgroups: []libvirtx.NetworkPortgroup{{Name: "a"}}}).Portgroup(""); ok {
		t.Error(`Portgroup("") without a default portgroup found one`)
	}
}
