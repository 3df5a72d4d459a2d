package ovs

import (
	"context"
	"fmt"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
)

// SSLPaths are the files of the Open_vSwitch database's SSL row: what
// ovn-controller (and ovs-vswitchd) take for ssl: connections when their
// command line names none.
type SSLPaths struct {
	PrivateKey  string `json:"private_key"`
	Certificate string `json:"certificate"`
	CACert      string `json:"ca_cert"`
}

// SSL reads the SSL row the Open_vSwitch row references; ok false when it
// references none.
//
//	ovs-vsctl get-ssl
func (c *Client) SSL(ctx context.Context) (p SSLPaths, ok bool, err error) {
	root, row, err := c.readSSL(ctx)
	if err != nil || root == nil || row == nil {
		return SSLPaths{}, false, err
	}
	return SSLPaths{PrivateKey: row.PrivateKey, Certificate: row.Certificate, CACert: row.CaCert}, true, nil
}

// readSSL reads the root row's ssl reference and the SSL row.
func (c *Client) readSSL(ctx context.Context) (*model.OpenvSwitch, *model.SSL, error) {
	ops := []ovsdb.Operation{
		{Op: ovsdb.OperationSelect, Table: model.OpenvSwitchTable, Columns: []string{"_uuid", "ssl"}},
		{Op: ovsdb.OperationSelect, Table: model.SSLTable, Columns: []string{"_uuid", "private_key", "certificate", "ca_cert"}},
	}
	rows, err := c.selectRows(ctx, ops)
	if err != nil {
		return nil, nil, fmt.Errorf("ovs: read SSL: %w", err)
	}
	roots, err := modelsOf[model.OpenvSwitch](model.OpenvSwitchTable, rows[0])
	if err != nil {
		return nil, nil, err
	}
	ssls, err := modelsOf[model.SSL](model.SSLTable, rows[1])
	if err != nil {
		return nil, nil, err
	}
	if len(roots) != 1 {
		return nil, nil, nil
	}
	root := roots[0]
	if root.SSL == nil {
		return root, nil, nil
	}
	for _, s := range ssls {
		if s.UUID == *root.SSL {
			return root, s, nil
		}
	}
	return root, nil, nil
}

// SetSSL makes the Open_vSwitch row's SSL row hold p: the row it
// references updated in place, or a new row referenced; nil drops the
// reference (the row, referenced by nothing else, is garbage collected).
// One transaction, guarded by the reference it read.
//
//	ovs-vsctl set-ssl $key $cert $ca   (del-ssl)
func (c *Client) SetSSL(ctx context.Context, p *SSLPaths) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	root, row, err := c.readSSL(ctx)
	if err != nil {
		return err
	}
	if root == nil {
		return fmt.Errorf("ovs: set SSL: %w", errNoRoot)
	}
	if p == nil && root.SSL == nil || p != nil && row != nil && row.PrivateKey == p.PrivateKey && row.Certificate == p.Certificate && row.CaCert == p.CACert {
		return nil
	}
	t := &txn{}
	ru := root.UUID
	switch {
	case p == nil:
		t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
			m := &model.OpenvSwitch{UUID: ru}
			return api.Where(m).Update(m, &m.SSL)
		})
	case row != nil:
		su, q := row.UUID, *p
		t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
			m := &model.SSL{UUID: su, PrivateKey: q.PrivateKey, Certificate: q.Certificate, CaCert: q.CACert}
			return api.Where(m).Update(m, &m.PrivateKey, &m.Certificate, &m.CaCert)
		})
	default:
		q := *p
		t.add(-1, func(api client.API) ([]ovsdb.Operation, error) {
			return api.Create(&model.SSL{UUID: "newssl", PrivateKey: q.PrivateKey, Certificate: q.Certificate, CaCert: q.CACert})
		})
		t.add(1, func(api client.API) ([]ovsdb.Operation, error) {
			ref := "newssl"
			m := &model.OpenvSwitch{UUID: ru, SSL: &ref}
			return api.Where(m).Update(m, &m.SSL)
		})
	}
	if err := c.commit(ctx, t, ru); err != nil {
		return fmt.Errorf("ovs: set SSL: %w", err)
	}
	return nil
}
