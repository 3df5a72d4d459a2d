package ovs

import (
	"context"
	"fmt"
	"sort"

	"github.com/vflag/vflag/ovs/model"
)

// OVNInterface is one interface of an OVN integration bridge as the OVN
// checks read it: its type, options (a tunnel's remote_ip, local_ip) and
// external_ids (iface-id, ovn-installed, ovn-chassis-id).
type OVNInterface struct {
	Name        string
	Type        string
	Options     map[string]string
	ExternalIDs map[string]string
}

// OVNChassisView is what the OVN checks read of the Open vSwitch
// database: the Open_vSwitch row's external_ids (system-id, ovn-remote,
// ovn-encap-ip...) and the integration bridge's interfaces.
type OVNChassisView struct {
	ExternalIDs  map[string]string
	BridgeExists bool
	Interfaces   []OVNInterface // sorted by name
}

var ovnView = view{
	model.OpenvSwitchTable: {"_uuid", "external_ids"},
	model.BridgeTable:      {"_uuid", "name", "ports"},
	model.PortTable:        {"_uuid", "name", "interfaces"},
	model.InterfaceTable:   {"_uuid", "name", "type", "options", "external_ids"},
}

// OVNChassis reads the Open_vSwitch row's external_ids and every
// interface of bridge's ports, in one read-only transaction; the shell
// equivalent is
//
//	ovs-vsctl get Open_vSwitch . external_ids
//	ovs-vsctl --columns=name,type,options,external_ids list Interface
func (c *Client) OVNChassis(ctx context.Context, bridge string) (OVNChassisView, error) {
	st, err := c.read(ctx, ovnView)
	if err != nil {
		return OVNChassisView{}, fmt.Errorf("ovs: the OVN chassis on bridge %s: %w", bridge, err)
	}
	var v OVNChassisView
	if st.root != nil {
		v.ExternalIDs = st.root.ExternalIDs
	}
	b := st.bridges[bridge]
	if b == nil {
		return v, nil
	}
	v.BridgeExists = true
	for _, pu := range b.Ports {
		p := st.portByUUID[pu]
		if p == nil {
			continue
		}
		for _, iu := range p.Interfaces {
			if f := st.ifaceByUUID[iu]; f != nil {
				v.Interfaces = append(v.Interfaces, OVNInterface{Name: f.Name, Type: f.Type, Options: f.Options, ExternalIDs: f.ExternalIDs})
			}
		}
	}
	sort.Slice(v.Interfaces, func(i, j int) bool { return v.Interfaces[i].Name < v.Interfaces[j].Name })
	return v, nil
}
