package validate

import (
	"errors"
	"strings"
	"testing"

	"github.com/vflag/vflag/ovs/ovnsb"
)

func boolPtr(b bool) *bool { return &b }

// ovnHealthy is a chassis with everything in place: registered with its
// encap, two ports installed, bound here and up, a tunnel to the other
// chassis.
func ovnHealthy() (OVNWant, OVNFacts) {
	w := OVNWant{Remote: "tcp:192.0.2.1:6642", Chassis: "hv1", EncapType: "geneve", EncapIP: "10.0.0.1", Bridge: "br-int",
		Ports: []OVNPortWant{
			{LSP: "vm1-eth0", Interface: "eth2", Field: "groups[0].vfs[0].ovn_port"},
			{LSP: "vm2-eth0", Interface: "eth3", Field: "groups[0].attachments[0].ovn_port"},
		}}
	f := OVNFacts{
		SB: &ovnsb.Snapshot{
			Chassis: []ovnsb.Chassis{
				{Name: "hv1", Encaps: []ovnsb.Encap{{Type: "geneve", IP: "10.0.0.1"}}},
				{Name: "hv2", Encaps: []ovnsb.Encap{{Type: "geneve", IP: "10.0.0.2"}}},
			},
			Bindings: map[string]ovnsb.Binding{
				"vm1-eth0": {LogicalPort: "vm1-eth0", Chassis: "hv1", Up: boolPtr(true)},
				"vm2-eth0": {LogicalPort: "vm2-eth0", Chassis: "hv1", Up: boolPtr(true)},
			},
		},
		Interfaces: map[string]OVNInterface{
			"eth2":         {Name: "eth2", ExternalIDs: map[string]string{"iface-id": "vm1-eth0", "ovn-installed": "true"}},
			"eth3":         {Name: "eth3", ExternalIDs: map[string]string{"iface-id": "vm2-eth0", "ovn-installed": "true"}},
			"ovn-hv2-0":    {Name: "ovn-hv2-0", Type: "geneve", Options: map[string]string{"remote_ip": "10.0.0.2", "local_ip": "10.0.0.1"}, ExternalIDs: map[string]string{"ovn-chassis-id": "hv2@10.0.0.2"}},
			"patch-br-int": {Name: "patch-br-int", Type: "patch"},
		},
		Controller: "connected",
	}
	return w, f
}

// TestOVNChecks: the healthy chassis passes every check; each piece
// removed fails the check that covers it, with its reason.
func TestOVNChecks(t *testing.T) {
	w0, f0 := ovnHealthy()
	for _, c := range OVNChecks(w0, f0) {
		if c.Verdict != Pass {
			t.Fatalf("healthy: %s %s: %s", c.Name, c.Verdict, c.Detail)
		}
	}
	if n := len(OVNChecks(w0, f0)); n != 5 { // southbound, chassis, 2 ports, 1 tunnel
		t.Fatalf("healthy: %d checks, want 5", n)
	}
	iface := func(f *OVNFacts, name string, edit func(*OVNInterface)) {
		i := f.Interfaces[name]
		ids := map[string]string{}
		for k, v := range i.ExternalIDs {
			ids[k] = v
		}
		opts := map[string]string{}
		for k, v := range i.Options {
			opts[k] = v
		}
		i.ExternalIDs, i.Options = ids, opts
		edit(&i)
		f.Interfaces[name] = i
	}
	for _, tc := range []struct {
		name      string
		edit      func(w *OVNWant, f *OVNFacts)
		check     string
		verdict   Verdict
		want      string
		allOthers bool // every other check still passes
	}{
		{"the Southbound unreadable", func(_ *OVNWant, f *OVNFacts) { f.SBErr = errors.New("connection refused") },
			"ovn/southbound", Fail, "cannot read the OVN Southbound at tcp:192.0.2.1:6642: connection refused", false},
		{"the chassis not registered", func(_ *OVNWant, f *OVNFacts) { f.SB.Chassis = f.SB.Chassis[1:] },
			"ovn/chassis", Fail, "chassis hv1 is not registered in the Southbound (registered: hv2)", true},
		{"the Encap row deleted", func(_ *OVNWant, f *OVNFacts) { f.SB.Chassis[0].Encaps = nil },
			"ovn/chassis", Fail, "registered with encaps -, not geneve 10.0.0.1", true},
		{"the encap of another type", func(_ *OVNWant, f *OVNFacts) { f.SB.Chassis[0].Encaps[0].Type = "vxlan" },
			"ovn/chassis", Fail, "registered with encaps vxlan 10.0.0.1, not geneve 10.0.0.1", true},
		{"the encap at another address", func(_ *OVNWant, f *OVNFacts) { f.SB.Chassis[0].Encaps[0].IP = "10.9.9.9" },
			"ovn/chassis", Fail, "registered with encaps geneve 10.9.9.9, not geneve 10.0.0.1", true},
		{"the interface off br-int", func(_ *OVNWant, f *OVNFacts) { delete(f.Interfaces, "eth2") },
			"ovn/port/vm1-eth0", Fail, "its interface eth2 is not a port of br-int", true},
		{"the iface-id of another port", func(_ *OVNWant, f *OVNFacts) {
			iface(f, "eth2", func(i *OVNInterface) { i.ExternalIDs["iface-id"] = "vm9" })
		}, "ovn/port/vm1-eth0", Fail, "external_ids:iface-id=vm9, not vm1-eth0", true},
		{"no such LSP in the Southbound", func(_ *OVNWant, f *OVNFacts) { delete(f.SB.Bindings, "vm1-eth0") },
			"ovn/port/vm1-eth0", Fail, "vm1-eth0 (groups[0].vfs[0].ovn_port): no such logical switch port in the Southbound", true},
		{"bound to another chassis", func(_ *OVNWant, f *OVNFacts) {
			f.SB.Bindings["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0", Chassis: "hv2", Up: boolPtr(true)}
		}, "ovn/port/vm1-eth0", Fail, "vm1-eth0 is bound to another chassis, hv2, not this one (hv1)", true},
		{"unbound, the controller not connected", func(_ *OVNWant, f *OVNFacts) {
			f.SB.Bindings["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0"}
			f.Controller = "not connected"
		}, "ovn/port/vm1-eth0", Fail, "bound to no chassis: ovn-controller on this host has not claimed it; ovn-controller is not connected to the Southbound (not connected)", false},
		{"unbound, the controller connected", func(_ *OVNWant, f *OVNFacts) {
			f.SB.Bindings["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0"}
		}, "ovn/port/vm1-eth0", Fail, "vm1-eth0: the Port_Binding is bound to no chassis", true},
		{"ovn-installed removed", func(_ *OVNWant, f *OVNFacts) {
			iface(f, "eth2", func(i *OVNInterface) { delete(i.ExternalIDs, "ovn-installed") })
		}, "ovn/port/vm1-eth0", Fail, "bound here, but interface eth2 has no external_ids:ovn-installed=true", true},
		{"up false", func(_ *OVNWant, f *OVNFacts) {
			f.SB.Bindings["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0", Chassis: "hv1", Up: boolPtr(false)}
		}, "ovn/port/vm1-eth0", Fail, "the Port_Binding's up is not true", true},
		{"up unset", func(_ *OVNWant, f *OVNFacts) {
			f.SB.Bindings["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0", Chassis: "hv1"}
		}, "ovn/port/vm1-eth0", Fail, "the Port_Binding's up is not true", true},
		{"the Southbound unreadable, a port installed", func(_ *OVNWant, f *OVNFacts) { f.SBErr = errors.New("timeout") },
			"ovn/port/vm1-eth0", Skip, "eth2 is ovn-installed; its Port_Binding is unknown", false},
		{"the Southbound unreadable, a port not installed", func(_ *OVNWant, f *OVNFacts) {
			f.SBErr = errors.New("timeout")
			iface(f, "eth2", func(i *OVNInterface) { i.ExternalIDs["ovn-installed"] = "false" })
		}, "ovn/port/vm1-eth0", Fail, "eth2 has no external_ids:ovn-installed=true", false},
		{"br-int missing", func(_ *OVNWant, f *OVNFacts) { f.BridgeMissing, f.Interfaces = true, nil },
			"ovn/port/vm1-eth0", Fail, "the integration bridge br-int does not exist", false},
		{"the tunnel port removed", func(_ *OVNWant, f *OVNFacts) { delete(f.Interfaces, "ovn-hv2-0") },
			"ovn/tunnel/hv2", Fail, "no tunnel port ovn-* on br-int to chassis hv2 (geneve remote_ip 10.0.0.2)", true},
		{"the tunnel's remote_ip stale", func(_ *OVNWant, f *OVNFacts) {
			iface(f, "ovn-hv2-0", func(i *OVNInterface) { i.Options["remote_ip"] = "10.0.0.99" })
		}, "ovn/tunnel/hv2", Fail, "tunnel port ovn-hv2-0 to chassis hv2 is geneve with remote_ip 10.0.0.99, but the chassis's encap is geneve 10.0.0.2", true},
		{"the tunnel's local_ip another address", func(_ *OVNWant, f *OVNFacts) {
			iface(f, "ovn-hv2-0", func(i *OVNInterface) { i.Options["local_ip"] = "10.0.0.7" })
		}, "ovn/tunnel/hv2", Fail, "has local_ip 10.0.0.7, not this chassis's encap address 10.0.0.1", true},
		{"the other chassis without encap", func(_ *OVNWant, f *OVNFacts) { f.SB.Chassis[1].Encaps = nil },
			"ovn/tunnel/hv2", Fail, "chassis hv2 has no geneve, stt or vxlan encap", true},
		{"a third chassis, no tunnel to it", func(_ *OVNWant, f *OVNFacts) {
			f.SB.Chassis = append(f.SB.Chassis, ovnsb.Chassis{Name: "hv3", Encaps: []ovnsb.Encap{{Type: "vxlan", IP: "10.0.0.3"}, {Type: "geneve", IP: "10.0.0.33"}}})
		}, "ovn/tunnel/hv3", Fail, "to chassis hv3 (geneve remote_ip 10.0.0.33)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, f := ovnHealthy()
			// fresh copies of what the edits change
			sb := *f.SB
			sb.Chassis = append([]ovnsb.Chassis(nil), sb.Chassis...)
			for i := range sb.Chassis {
				sb.Chassis[i].Encaps = append([]ovnsb.Encap(nil), sb.Chassis[i].Encaps...)
			}
			sb.Bindings = map[string]ovnsb.Binding{}
			for k, v := range f.SB.Bindings {
				sb.Bindings[k] = v
			}
			f.SB = &sb
			ifs := map[string]OVNInterface{}
			for k, v := range f.Interfaces {
				ifs[k] = v
			}
			f.Interfaces = ifs
			tc.edit(&w, &f)
			var found bool
			for _, c := range OVNChecks(w, f) {
				if c.Name == tc.check {
					found = true
					if c.Verdict != tc.verdict || !strings.Contains(c.Detail, tc.want) {
						t.Errorf("%s: %s %q\nwant %s containing %q", c.Name, c.Verdict, c.Detail, tc.verdict, tc.want)
					}
				} else if tc.allOthers && c.Verdict != Pass {
					t.Errorf("%s: %s %q; only %s should fail", c.Name, c.Verdict, c.Detail, tc.check)
				}
			}
			if !found {
				t.Errorf("no check %s", tc.check)
			}
		})
	}
}

// TestOVNCounts: the metrics count what the checks judge.
func TestOVNCounts(t *testing.T) {
	w, f := ovnHealthy()
	if got := OVNCounts(w, f); got != (OVNMetrics{Registered: true, Ports: 2, Bound: 2, Installed: 2}) {
		t.Errorf("healthy: %+v", got)
	}
	f.SB.Bindings["vm1-eth0"] = ovnsb.Binding{LogicalPort: "vm1-eth0", Chassis: "hv2"}
	f.Interfaces["eth3"] = OVNInterface{Name: "eth3", ExternalIDs: map[string]string{"iface-id": "vm2-eth0"}}
	f.SB.Chassis = f.SB.Chassis[1:]
	if got := OVNCounts(w, f); got != (OVNMetrics{Registered: false, Ports: 2, Bound: 1, Installed: 1}) {
		t.Errorf("one bound elsewhere, one not installed, the chassis gone: %+v", got)
	}
}
