package ovnsb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	lmodel "github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// TLS are the files an ssl: remote needs, as ovn-controller takes them
// (--private-key, --certificate, --ca-cert).
type TLS struct {
	PrivateKey  string
	Certificate string
	CACert      string
}

// Encap is one encapsulation a chassis offers.
type Encap struct {
	Type string `json:"type"`
	IP   string `json:"ip"`
}

// Chassis is one Chassis row with its Encap rows.
type Chassis struct {
	Name     string  `json:"name"`
	Hostname string  `json:"hostname,omitempty"`
	Encaps   []Encap `json:"encaps"`
}

// Binding is the Port_Binding of one logical port.
type Binding struct {
	LogicalPort string `json:"logical_port"`
	// Chassis is the name of the chassis the port is bound to, "" none.
	Chassis string `json:"chassis,omitempty"`
	// Up is the row's up column; nil while unset.
	Up *bool `json:"up,omitempty"`
	// MAC is the row's mac column: the LSP's addresses ("MAC [IP...]"),
	// as ovn-northd copies them from the Northbound.
	MAC []string `json:"mac,omitempty"`
}

// Snapshot is what Read found.
type Snapshot struct {
	// Chassis are every chassis of the Southbound, sorted by name.
	Chassis []Chassis `json:"chassis"`
	// Bindings are the port bindings of the logical ports asked for, by
	// logical port; a port without one is absent (no such logical switch
	// port in the Northbound, or ovn-northd has not run).
	Bindings map[string]Binding `json:"bindings"`
}

// ChassisNamed is the chassis called name, nil none.
func (s *Snapshot) ChassisNamed(name string) *Chassis {
	for i := range s.Chassis {
		if s.Chassis[i].Name == name {
			return &s.Chassis[i]
		}
	}
	return nil
}

// Endpoints splits a remote ("tcp:10.0.0.1:6642,tcp:10.0.0.2:6642") into
// its connection methods and checks each one's form: unix:PATH,
// tcp:HOST:PORT or ssl:HOST:PORT.
func Endpoints(remote string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(remote, ",") {
		e = strings.TrimSpace(e)
		method, rest, ok := strings.Cut(e, ":")
		switch {
		case e == "":
			return nil, fmt.Errorf("ovnsb: remote %q: an empty connection method", remote)
		case !ok || rest == "":
			return nil, fmt.Errorf("ovnsb: remote %q: %q is not unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT", remote, e)
		case method == "unix":
		case method == "tcp" || method == "ssl":
			i := strings.LastIndex(rest, ":")
			if i <= 0 || i == len(rest)-1 {
				return nil, fmt.Errorf("ovnsb: remote %q: %q has no HOST:PORT (%s:HOST:PORT)", remote, e, method)
			}
		default:
			return nil, fmt.Errorf("ovnsb: remote %q: connection method %q is not unix, tcp or ssl", remote, method)
		}
		out = append(out, e)
	}
	return out, nil
}

// tlsConfig is the client side of an ssl: remote: our key and certificate,
// and the server's chain verified against the CA. The host name is not
// checked, as Open vSwitch's SSL streams do not check it.
func tlsConfig(t *TLS) (*tls.Config, error) {
	if t == nil || t.PrivateKey == "" || t.Certificate == "" || t.CACert == "" {
		return nil, errors.New("an ssl: remote needs a private key, a certificate and a CA certificate")
	}
	cert, err := tls.LoadX509KeyPair(t.Certificate, t.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("key %s, certificate %s: %w", t.PrivateKey, t.Certificate, err)
	}
	pem, err := os.ReadFile(t.CACert)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA certificate %s: no PEM certificate in it", t.CACert)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		// The chain is verified below, without the host name.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyPeerCertificate
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("the server sent no certificate")
			}
			certs := make([]*x509.Certificate, len(raw))
			for i, r := range raw {
				c, err := x509.ParseCertificate(r)
				if err != nil {
					return fmt.Errorf("the server's certificate: %w", err)
				}
				certs[i] = c
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			if err != nil {
				return fmt.Errorf("the server's certificate is not signed by CA %s: %w", t.CACert, err)
			}
			return nil
		},
	}, nil
}

// connect opens a client of the hand model to remote.
func connect(ctx context.Context, remote string, t *TLS) (client.Client, error) {
	eps, err := Endpoints(remote)
	if err != nil {
		return nil, err
	}
	dbm, err := databaseModel()
	if err != nil {
		return nil, fmt.Errorf("ovnsb: database model: %w", err)
	}
	quiet := logr.Discard()
	opts := []client.Option{client.WithLogger(&quiet)}
	for _, e := range eps {
		opts = append(opts, client.WithEndpoint(e))
	}
	if slices.ContainsFunc(eps, func(e string) bool { return strings.HasPrefix(e, "ssl:") }) {
		tc, err := tlsConfig(t)
		if err != nil {
			return nil, fmt.Errorf("ovnsb: %s: %w", remote, err)
		}
		opts = append(opts, client.WithTLSConfig(tc))
	}
	db, err := client.NewOVSDBClient(dbm, opts...)
	if err != nil {
		return nil, fmt.Errorf("ovnsb: %s: %w", remote, err)
	}
	if err := db.Connect(ctx); err != nil {
		return nil, fmt.Errorf("ovnsb: connect %s: %w", remote, err)
	}
	return db, nil
}

// Read connects to remote, reads every chassis with its encaps and the
// port bindings of ports, and closes the connection. ctx bounds it all.
func Read(ctx context.Context, remote string, t *TLS, ports []string) (*Snapshot, error) {
	db, err := connect(ctx, remote, t)
	if err != nil {
		return nil, err
	}
	defer db.Close()

	// One transaction of selects: a consistent snapshot, and no monitor
	// (libovsdb's cache would want every column of the tables' indexes in
	// the model: Port_Binding's datapath and tunnel_key).
	ops := []ovsdb.Operation{
		{Op: ovsdb.OperationSelect, Table: chassisTable, Where: []ovsdb.Condition{}, Columns: []string{"_uuid", "name", "hostname", "encaps"}},
		{Op: ovsdb.OperationSelect, Table: encapTable, Where: []ovsdb.Condition{}, Columns: []string{"_uuid", "type", "ip", "chassis_name"}},
	}
	for _, p := range ports {
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: portBindingTable,
			Where:   []ovsdb.Condition{ovsdb.NewCondition("logical_port", ovsdb.ConditionEqual, p)},
			Columns: []string{"_uuid", "logical_port", "chassis", "up", "mac"}})
	}
	res, err := db.Transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, ops)
	}
	if err != nil {
		return nil, fmt.Errorf("ovnsb: %s: read: %w", remote, err)
	}
	dbm, _ := databaseModel() // connect built it already
	dbModel, errs := lmodel.NewDatabaseModel(db.Schema(), dbm)
	if len(errs) > 0 {
		return nil, fmt.Errorf("ovnsb: %s: the Southbound schema: %w", remote, errors.Join(errs...))
	}
	var chs []chassisRow
	var ens []encapRow
	var pbs []portBindingRow
	for i, r := range res {
		for j := range r.Rows {
			var m lmodel.Model
			switch {
			case i == 0:
				chs = append(chs, chassisRow{})
				m = &chs[len(chs)-1]
			case i == 1:
				ens = append(ens, encapRow{})
				m = &ens[len(ens)-1]
			default:
				pbs = append(pbs, portBindingRow{})
				m = &pbs[len(pbs)-1]
			}
			info, err := dbModel.NewModelInfo(m)
			if err == nil {
				err = dbModel.Mapper.GetRowData(&r.Rows[j], info)
			}
			if err == nil { // the mapper fills the schema's columns, not _uuid
				u, ok := r.Rows[j]["_uuid"].(ovsdb.UUID)
				if !ok {
					err = errors.New("no _uuid")
				} else {
					err = info.SetField("_uuid", u.GoUUID)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("ovnsb: %s: %s row: %w", remote, ops[i].Table, err)
			}
		}
	}
	return snapshot(chs, ens, pbs, ports), nil
}

// snapshot joins the rows: each chassis with its encaps, each binding with
// its chassis's name.
func snapshot(chs []chassisRow, ens []encapRow, pbs []portBindingRow, ports []string) *Snapshot {
	encap := map[string]encapRow{}
	for _, e := range ens {
		encap[e.UUID] = e
	}
	names := map[string]string{}
	s := &Snapshot{Chassis: []Chassis{}, Bindings: map[string]Binding{}}
	for _, c := range chs {
		names[c.UUID] = c.Name
		out := Chassis{Name: c.Name, Hostname: c.Hostname, Encaps: []Encap{}}
		for _, u := range c.Encaps {
			if e, ok := encap[u]; ok {
				out.Encaps = append(out.Encaps, Encap{Type: e.Type, IP: e.IP})
			}
		}
		slices.SortFunc(out.Encaps, func(a, b Encap) int { return strings.Compare(a.Type+" "+a.IP, b.Type+" "+b.IP) })
		s.Chassis = append(s.Chassis, out)
	}
	slices.SortFunc(s.Chassis, func(a, b Chassis) int { return strings.Compare(a.Name, b.Name) })
	want := map[string]bool{}
	for _, p := range ports {
		want[p] = true
	}
	for _, pb := range pbs {
		if !want[pb.LogicalPort] {
			continue
		}
		b := Binding{LogicalPort: pb.LogicalPort, Up: pb.Up}
		if len(pb.MAC) > 0 {
			b.MAC = pb.MAC
		}
		if pb.Chassis != nil {
			b.Chassis = names[*pb.Chassis]
		}
		s.Bindings[pb.LogicalPort] = b
	}
	return s
}

// LogicalFlow is one Logical_Flow row: where it is in the logical
// pipeline and what it does.
type LogicalFlow struct {
	UUID     string `json:"uuid"`
	Pipeline string `json:"pipeline"` // ingress, egress
	Table    int    `json:"table"`
	// Stage is ovn-northd's name of the table ("ls_in_acl", "ls_out_acl_eval").
	Stage   string `json:"stage,omitempty"`
	Match   string `json:"match"`
	Actions string `json:"actions"`
}

// LogicalFlowsByCookie reads the Logical_Flow rows whose UUID begins with
// one of cookies: ovn-controller gives each OpenFlow flow it makes of a
// logical flow the first 32 bits of its UUID as cookie, so a flow seen in
// br-int (ofproto/trace, dump-flows) leads back to its logical flow. The
// result maps each cookie (8 hex digits, lower case) to its rows (32 bits
// can match more than one).
func LogicalFlowsByCookie(ctx context.Context, remote string, t *TLS, cookies []string) (map[string][]LogicalFlow, error) {
	want := map[string]bool{}
	for _, c := range cookies {
		want[strings.ToLower(c)] = true
	}
	db, err := connect(ctx, remote, t)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ops := []ovsdb.Operation{{Op: ovsdb.OperationSelect, Table: logicalFlowTable, Where: []ovsdb.Condition{},
		Columns: []string{"_uuid", "pipeline", "table_id", "match", "actions", "external_ids"}}}
	res, err := db.Transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, ops)
	}
	if err != nil {
		return nil, fmt.Errorf("ovnsb: %s: read Logical_Flow: %w", remote, err)
	}
	dbm, _ := databaseModel() // connect built it already
	dbModel, errs := lmodel.NewDatabaseModel(db.Schema(), dbm)
	if len(errs) > 0 {
		return nil, fmt.Errorf("ovnsb: %s: the Southbound schema: %w", remote, errors.Join(errs...))
	}
	out := map[string][]LogicalFlow{}
	for j := range res[0].Rows {
		u, ok := res[0].Rows[j]["_uuid"].(ovsdb.UUID)
		if !ok || len(u.GoUUID) < 8 || !want[u.GoUUID[:8]] {
			continue
		}
		var lf logicalFlowRow
		info, err := dbModel.NewModelInfo(&lf)
		if err == nil {
			err = dbModel.Mapper.GetRowData(&res[0].Rows[j], info)
		}
		if err != nil {
			return nil, fmt.Errorf("ovnsb: %s: Logical_Flow row: %w", remote, err)
		}
		out[u.GoUUID[:8]] = append(out[u.GoUUID[:8]], LogicalFlow{UUID: u.GoUUID, Pipeline: lf.Pipeline, Table: lf.TableID,
			Stage: lf.ExternalIDs["stage-name"], Match: lf.Match, Actions: lf.Actions})
	}
	return out, nil
}
