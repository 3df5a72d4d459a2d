package ovnsb

import (
	lmodel "github.com/ovn-kubernetes/libovsdb/model"
)

// Table names of the Southbound database.
const (
	chassisTable     = "Chassis"
	encapTable       = "Encap"
	portBindingTable = "Port_Binding"
	logicalFlowTable = "Logical_Flow"
)

// chassisRow is the part of a Chassis row vflag reads.
type chassisRow struct {
	UUID     string   `ovsdb:"_uuid"`
	Name     string   `ovsdb:"name"`
	Hostname string   `ovsdb:"hostname"`
	Encaps   []string `ovsdb:"encaps"`
}

// encapRow is the part of an Encap row vflag reads.
type encapRow struct {
	UUID        string `ovsdb:"_uuid"`
	Type        string `ovsdb:"type"`
	IP          string `ovsdb:"ip"`
	ChassisName string `ovsdb:"chassis_name"`
}

// portBindingRow is the part of a Port_Binding row vflag reads. Chassis
// is a weak reference (unset: bound to no chassis); Up is unset until
// ovn-northd or ovn-controller writes it.
type portBindingRow struct {
	UUID        string   `ovsdb:"_uuid"`
	LogicalPort string   `ovsdb:"logical_port"`
	Chassis     *string  `ovsdb:"chassis"`
	Up          *bool    `ovsdb:"up"`
	MAC         []string `ovsdb:"mac"`
}

// logicalFlowRow is the part of a Logical_Flow row vflag reads (the OVN
// traffic check names the stage of the flow that dropped its probe).
type logicalFlowRow struct {
	UUID        string            `ovsdb:"_uuid"`
	Pipeline    string            `ovsdb:"pipeline"`
	TableID     int               `ovsdb:"table_id"`
	Match       string            `ovsdb:"match"`
	Actions     string            `ovsdb:"actions"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// databaseModel is the client model: the four tables, no other.
func databaseModel() (lmodel.ClientDBModel, error) {
	return lmodel.NewClientDBModel("OVN_Southbound", map[string]lmodel.Model{
		chassisTable:     &chassisRow{},
		encapTable:       &encapRow{},
		portBindingTable: &portBindingRow{},
		logicalFlowTable: &logicalFlowRow{},
	})
}
