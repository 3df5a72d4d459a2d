package validaterun

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/validate"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovnsb"
	"github.com/vflag/vflag/ovs/ovnsb/sbtest"
	"github.com/vflag/vflag/ovs/ovstest"
)

// ovnBed is a chassis hv1 with a real ovn-controller: a private Open
// vSwitch (userspace datapath), a private Southbound with a second chassis
// hv2 and the logical ports as ovn-northd writes them, and representor
// stand-ins (veths) with their iface-id on br-int.
type ovnBed struct {
	t    *testing.T
	ovs  *ovstest.Server
	sb   *sbtest.Server
	ctl  *sbtest.Controller
	oc   *ovs.Client
	want validate.OVNWant
}

func newOVNBed(t *testing.T) *ovnBed {
	b := &ovnBed{t: t, ovs: ovstest.Start(t), sb: sbtest.Start(t)}
	b.ovs.MustVsctl("set", "Open_vSwitch", ".", "external_ids:system-id=hv1", "external_ids:ovn-remote="+b.sb.Endpoint(),
		"external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=10.0.0.1", "external_ids:ovn-set-local-ip=true",
		"external_ids:ovn-bridge-datapath-type=netdev")
	b.sb.AddChassis("hv2", "geneve", "10.0.0.2")
	for _, p := range []string{"vm1-eth0", "vm2-eth0", "vm4-eth0"} {
		b.sb.AddPort(p)
	}
	b.ctl = sbtest.StartController(t, b.ovs)
	b.until("ovn-controller made br-int", func() bool { _, err := b.ovs.Vsctl("br-exists", "br-int"); return err == nil })
	for i, lsp := range []string{"vm1-eth0", "vm2-eth0", "vm3-eth0"} {
		rep := fmt.Sprintf("rep%d", i)
		b.ovs.AddVeth(rep, rep+"p")
		b.ovs.MustVsctl("add-port", "br-int", rep, "--", "set", "Interface", rep, "external_ids:iface-id="+lsp)
		b.want.Ports = append(b.want.Ports, validate.OVNPortWant{LSP: lsp, Interface: rep, Field: fmt.Sprintf("groups[0].vfs[%d].ovn_port", i)})
	}
	// Two pool VFs' representors: rep3 held by a domain whose metadata
	// names vm4-eth0 (the hook bound it), rep4 free.
	for i, ids := range []string{"external_ids:iface-id=vm4-eth0 external_ids:vm-uuid=0f3c2a51-6b7d-4e8f-9a0b-1c2d3e4f5a6b", ""} {
		rep := fmt.Sprintf("rep%d", 3+i)
		b.ovs.AddVeth(rep, rep+"p")
		args := []string{"add-port", "br-int", rep}
		if ids != "" {
			args = append(append(args, "--", "set", "Interface", rep), strings.Fields(ids)...)
		}
		b.ovs.MustVsctl(args...)
		b.want.Pool = append(b.want.Pool, validate.OVNPoolWant{Interface: rep, Field: fmt.Sprintf("groups[0].network pf 0 vf %d", 3+i)})
	}
	b.want.Remote, b.want.EncapType, b.want.EncapIP, b.want.Bridge = b.sb.Endpoint(), "geneve", "10.0.0.1", "br-int"
	var err error
	if b.oc, err = ovs.Connect(context.Background(), b.ovs.Endpoint()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.oc.Close)
	return b
}

func (b *ovnBed) until(what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.t.Fatalf("waited 20s for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checks reads the facts as validate does and judges them.
func (b *ovnBed) checks() (map[string]validate.Check, validate.OVNFacts) {
	w := b.want
	w.Chassis = "" // from the Open_vSwitch row's system-id, as without ovn.system_id
	f := ReadOVNFacts(context.Background(), &w, b.oc, nil, nil, b.ctl.RunDir())
	if w.Chassis != "hv1" {
		b.t.Fatalf("chassis %q read from the Open_vSwitch row, want hv1", w.Chassis)
	}
	out := map[string]validate.Check{}
	for _, c := range validate.OVNChecks(w, f) {
		out[c.Name] = c
	}
	return out, f
}

// expect waits until the named check has the verdict and a detail with
// want in it (ovn-controller acts on its own time), and fails the test
// naming the last detail otherwise.
func (b *ovnBed) expect(name string, v validate.Verdict, want string) {
	b.t.Helper()
	var last validate.Check
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		cs, _ := b.checks()
		last = cs[name]
		if last.Verdict == v && strings.Contains(last.Detail, want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.t.Fatalf("%s: %s %q\nwant %s containing %q", name, last.Verdict, last.Detail, v, want)
}

// TestOVNChecksRealController: against a real ovn-controller and
// Southbound, the chassis registers with its encap, the ports it can bind
// are bound here, ovn-installed and up, and it makes a tunnel port to hv2;
// then each piece is taken away and the check covering it fails naming
// it: a port without a logical port in the Southbound, a port bound to
// another chassis, the tunnel port deleted, ovn-installed removed, the
// controller gone, the chassis's Encap replaced.
func TestOVNChecksRealController(t *testing.T) {
	t.Parallel()
	b := newOVNBed(t)
	b.expect("ovn/chassis", validate.Pass, "chassis hv1 registered with encap geneve 10.0.0.1")
	b.expect("ovn/port/vm1-eth0", validate.Pass, "vm1-eth0 on rep0: bound to hv1, ovn-installed, up")
	b.expect("ovn/port/vm2-eth0", validate.Pass, "bound to hv1")
	b.expect("ovn/tunnel/hv2", validate.Pass, "geneve to 10.0.0.2")
	// A pool VF a domain holds is checked as a configured port; a free
	// one has no check.
	b.expect("ovn/port/vm4-eth0", validate.Pass, "vm4-eth0 on rep3: bound to hv1, ovn-installed, up")
	cs, f := b.checks()
	var pool []string
	for name := range cs {
		if strings.HasPrefix(name, "ovn/port/") {
			pool = append(pool, name)
		}
	}
	if len(pool) != 4 {
		t.Errorf("port checks %v, want the three configured ports' and the held pool port's", pool)
	}
	if f.Controller != "connected" {
		t.Errorf("connection-status %q, want connected", f.Controller)
	}
	if c := cs["ovn/tunnel/hv2"]; !strings.Contains(c.Detail, "tunnel port ovn-hv2-0") {
		t.Errorf("the tunnel port is not ovn-controller's ovn-hv2-0: %s", c.Detail)
	}

	// validate --offload's view of OVN's tunnel: genev_sys_6081, and the
	// remote of ovn-controller's tunnel port (the log's refusals name it).
	w := b.want
	w.Chassis = "hv1"
	to := ovnTunnelOffload(nil, &config.Group{OVN: &config.OVN{EncapType: "geneve", EncapIP: "10.0.0.1/24"}}, &OVNState{Want: w, Facts: f})
	if to.VPort != "genev_sys_6081" || !to.OVN || to.RemoteOf["ovn-hv2-0"] != "10.0.0.2" {
		t.Errorf("tunnel offload facts %+v", to)
	}

	// No logical port vm3-eth0 in the Southbound: nothing binds it.
	b.expect("ovn/port/vm3-eth0", validate.Fail, "vm3-eth0 (groups[0].vfs[2].ovn_port): no such logical switch port in the Southbound")
	b.ovs.MustVsctl("set", "Interface", "rep4", "external_ids:iface-id=vm5-eth0")
	b.expect("ovn/port/vm5-eth0", validate.Fail, "vm5-eth0 (groups[0].network pf 0 vf 4, bound by the metadata of domain -): no such logical switch port in the Southbound")

	// vm2-eth0 requested by hv2 (as ovn-northd writes requested-chassis):
	// hv1's controller releases it, then hv2 claims it.
	uuid := b.sb.MustSbctl("--bare", "--columns=_uuid", "find", "Chassis", "name=hv2")
	b.sb.MustSbctl("set", "Port_Binding", "vm2-eth0", "requested_chassis="+uuid, "options:requested-chassis=hv2")
	b.until("hv1 releases vm2-eth0", func() bool {
		out, err := b.sb.Sbctl("--bare", "--columns=chassis", "find", "Port_Binding", "logical_port=vm2-eth0")
		return err == nil && out == ""
	})
	b.sb.MustSbctl("set", "Port_Binding", "vm2-eth0", "chassis="+uuid)
	b.expect("ovn/port/vm2-eth0", validate.Fail, "vm2-eth0 is bound to another chassis, hv2, not this one (hv1)")

	// The tunnel port deleted under a stopped controller (a running one
	// makes it again), ovn-installed removed, the controller not running.
	b.ctl.Stop()
	b.ovs.MustVsctl("del-port", "br-int", "ovn-hv2-0", "--", "remove", "Interface", "rep0", "external_ids", "ovn-installed")
	b.expect("ovn/tunnel/hv2", validate.Fail, "no tunnel port ovn-* on br-int to chassis hv2 (geneve remote_ip 10.0.0.2)")
	b.expect("ovn/port/vm1-eth0", validate.Fail, "bound here, but interface rep0 has no external_ids:ovn-installed=true: ovn-controller has not installed the port's flows yet; ovn-controller is not connected to the Southbound (ovn-controller not running)")

	// hv1's Encap replaced by one of another type.
	b.sb.MustSbctl("--", "--id=@e", "create", "Encap", "type=vxlan", "ip=10.0.0.1", "chassis_name=hv1", "--", "set", "Chassis", "hv1", "encaps=@e")
	b.expect("ovn/chassis", validate.Fail, "chassis hv1 is registered with encaps vxlan 10.0.0.1, not geneve 10.0.0.1")

	// The chassis gone from the Southbound.
	b.sb.MustSbctl("chassis-del", "hv1")
	b.expect("ovn/chassis", validate.Fail, "chassis hv1 is not registered in the Southbound (registered: hv2)")
	b.expect("ovn/port/vm1-eth0", validate.Fail, "the Port_Binding is bound to no chassis")

	// The Southbound unreachable.
	w = b.want
	w.Remote = "tcp:127.0.0.1:1"
	f = ReadOVNFacts(context.Background(), &w, b.oc, nil, nil, "")
	if c := validate.OVNChecks(w, f)[0]; c.Name != "ovn/southbound" || c.Verdict != validate.Fail || !strings.Contains(c.Detail, "cannot read the OVN Southbound at tcp:127.0.0.1:1") {
		t.Errorf("unreachable: %+v", c)
	}
}

// TestOVNControllerNotConnected: ovn-controller with an unreachable
// Southbound reports "not connected", and the check of a port it has not
// bound names it.
func TestOVNControllerNotConnected(t *testing.T) {
	t.Parallel()
	b := newOVNBed(t)
	b.expect("ovn/port/vm1-eth0", validate.Pass, "bound to hv1")
	b.ovs.MustVsctl("set", "Open_vSwitch", ".", "external_ids:ovn-remote=tcp:127.0.0.1:1")
	b.until("connection-status not connected", func() bool {
		st, err := ovnsb.ControllerStatus(b.ctl.RunDir())
		return err == nil && st == "not connected"
	})
	b.sb.MustSbctl("clear", "Port_Binding", "vm1-eth0", "chassis")
	b.expect("ovn/port/vm1-eth0", validate.Fail, "the Port_Binding is bound to no chassis: ovn-controller on this host has not claimed it; ovn-controller is not connected to the Southbound (not connected)")
	v, err := ovnsb.ControllerVersion(b.ctl.RunDir())
	if err != nil || !strings.HasPrefix(v, "ovn-controller ") {
		t.Errorf("version %q, %v", v, err)
	}
}

// TestOVNWant: the config's ovn section and ports become what the checks
// want: the encap address without its prefix, each port's representor
// and config field; a VF without a representor keeps a name no interface
// has.
func TestOVNWant(t *testing.T) {
	g := &config.Group{Name: "ovn0",
		OVN:         &config.OVN{Remote: "ssl:192.0.2.1:6642", SystemID: "hv1", EncapType: "vxlan", EncapIP: "192.0.2.11/24", Bridge: "br-int"},
		VFs:         []config.VFConfig{{PF: 0, VF: 0, OVNPort: "vm1-eth0"}, {PF: 0, VF: 1}},
		Attachments: []config.Attachment{{Domain: "vm2", PF: 0, VF: 3, OVNPort: "vm2-eth0"}},
		Network:     &config.Network{VFs: []config.NetworkVF{{PF: 0, VF: 1}, {PF: 0, VF: 2}}}}
	w := OVNWant(g, "groups[1]", map[config.VFRef]string{{PF: 0, VF: 0}: "eth5", {PF: 0, VF: 1}: "eth6"})
	want := validate.OVNWant{Remote: "ssl:192.0.2.1:6642", Chassis: "hv1", EncapType: "vxlan", EncapIP: "192.0.2.11", Bridge: "br-int",
		Ports: []validate.OVNPortWant{
			{LSP: "vm1-eth0", Interface: "eth5", Field: "groups[1].vfs[0].ovn_port"},
			{LSP: "vm2-eth0", Interface: "pf0vf3", Field: "groups[1].attachments[0].ovn_port"},
		},
		Pool: []validate.OVNPoolWant{{Interface: "eth6", Field: "groups[1].network pf 0 vf 1"}}}
	if fmt.Sprintf("%+v", w) != fmt.Sprintf("%+v", want) {
		t.Errorf("OVNWant:\n got %+v\nwant %+v", w, want)
	}
	cfg := &config.Config{Groups: []config.Group{{Name: "a"}, *g}}
	if p := groupPath(cfg, g); p != "groups[1]" {
		t.Errorf("groupPath = %q", p)
	}
	if tl := sbTLS(&config.OVN{SSL: &config.OVNSSL{PrivateKey: "k", Certificate: "c", CACert: "ca"}}); tl == nil || *tl != (ovnsb.TLS{PrivateKey: "k", Certificate: "c", CACert: "ca"}) {
		t.Errorf("sbTLS = %+v", tl)
	}
}

// TestOVNUnderlayWant: an OVN group's underlay is judged by the tunnel
// checks: pipeline.TunnelWant's (the encap address on the bond's VLAN
// interface, the configured routes, OVN's 58 bytes of Geneve over IPv4, 78
// over IPv6, in the MTU chain) with a remote per other chassis's encap of
// the configured type (not this chassis's, not another type's), the fixes
// naming the ovn section.
func TestOVNUnderlayWant(t *testing.T) {
	g := &config.Group{Name: "ovn0", Eswitch: "switchdev", MTU: 1500, Bond: config.Bond{Name: "bond0"},
		OVN: &config.OVN{EncapType: "geneve", EncapIP: "192.0.2.11/24", UnderlayVLAN: 30, Gateway: "192.0.2.254", Routes: []string{"198.51.100.0/24"}}}
	st := &OVNState{Want: validate.OVNWant{Chassis: "hv1"}, Facts: validate.OVNFacts{SB: &ovnsb.Snapshot{Chassis: []ovnsb.Chassis{
		{Name: "hv1", Encaps: []ovnsb.Encap{{Type: "geneve", IP: "192.0.2.11"}}},
		{Name: "hv2", Encaps: []ovnsb.Encap{{Type: "geneve", IP: "192.0.2.12"}}},
		{Name: "hv3", Encaps: []ovnsb.Encap{{Type: "vxlan", IP: "10.9.9.9"}, {Type: "geneve", IP: "198.51.100.7"}}},
	}}}}
	w := ovnUnderlayWant(g, st)
	got := fmt.Sprintf("%s %s %s remotes %v routes %v overhead %d section %s ports %d", w.Type, w.Dev, w.Local, w.Remotes, w.Routes, w.Overhead, w.Section, len(w.Ports))
	want := "OVN geneve bond0.30 192.0.2.11/24 remotes [192.0.2.12 198.51.100.7] routes [198.51.100.0/24 via 192.0.2.254 dev bond0.30] overhead 58 section ovn ports 0"
	if got != want {
		t.Errorf("underlay want:\n got %s\nwant %s", got, want)
	}
	g.OVN.EncapIP = "2001:db8::11/64"
	if w := ovnUnderlayWant(g, nil); w.Overhead != 78 || len(w.Remotes) != 0 {
		t.Errorf("IPv6, the Southbound unread: overhead %d remotes %v", w.Overhead, w.Remotes)
	}
}
