package ovs_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/ovs/ovstest"
)

// OVNChassis reads the Open_vSwitch row's external_ids and br-int's
// interfaces with their type, options and external_ids, a tunnel port's
// too; another bridge's interfaces are not in it.
func TestOVNChassis(t *testing.T) {
	t.Parallel()
	s := ovstest.Start(t)
	s.AddVeth("rep0", "rep0p")
	s.MustVsctl("set", "Open_vSwitch", ".", "external_ids:system-id=hv1", "external_ids:ovn-encap-ip=10.0.0.1",
		"--", "add-br", "br-int", "--", "set", "Bridge", "br-int", "datapath_type=netdev",
		"--", "add-port", "br-int", "rep0", "--", "set", "Interface", "rep0", "external_ids:iface-id=vm1-eth0", "external_ids:ovn-installed=true",
		"--", "add-port", "br-int", "ovn-hv2-0", "--", "set", "Interface", "ovn-hv2-0", "type=geneve", "options:remote_ip=10.0.0.2", "external_ids:ovn-chassis-id=hv2@10.0.0.2",
		"--", "add-br", "br-other", "--", "set", "Bridge", "br-other", "datapath_type=netdev")
	c, err := ovs.Connect(context.Background(), s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.OVNChassis(context.Background(), "br-int")
	if err != nil {
		t.Fatal(err)
	}
	if got.ExternalIDs["system-id"] != "hv1" || got.ExternalIDs["ovn-encap-ip"] != "10.0.0.1" || !got.BridgeExists {
		t.Errorf("external_ids %v, bridge exists %v", got.ExternalIDs, got.BridgeExists)
	}
	want := []ovs.OVNInterface{
		{Name: "br-int", Type: "internal", Options: map[string]string{}, ExternalIDs: map[string]string{}},
		{Name: "ovn-hv2-0", Type: "geneve", Options: map[string]string{"remote_ip": "10.0.0.2"}, ExternalIDs: map[string]string{"ovn-chassis-id": "hv2@10.0.0.2"}},
		{Name: "rep0", Options: map[string]string{}, ExternalIDs: map[string]string{"iface-id": "vm1-eth0", "ovn-installed": "true"}},
	}
	if d := cmp.Diff(want, got.Interfaces); d != "" {
		t.Errorf("interfaces (-want +got):\n%s", d)
	}
	if none, err := c.OVNChassis(context.Background(), "br-none"); err != nil || none.BridgeExists || len(none.Interfaces) != 0 {
		t.Errorf("a bridge that does not exist: %+v, %v", none, err)
	}
}
