package ovs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
)

// waitRound bounds one server-side wait of WaitOFPorts. A wait in flight
// holds the connection's read lock in libovsdb, which Close needs, and a
// port deleted meanwhile can never satisfy its wait: after each round the
// state is read again.
const waitRound = time.Second

// WaitOFPorts waits until every port on bridge that carries
// vflag-owner=owner (the bridge's internal port too, when vflag created the
// bridge) has an OpenFlow port number (ofport > 0), or until ctx ends, and
// returns the last status it read. A port whose network device did not exist
// when ovs-vswitchd tried to open it has ofport -1 and an error; when the
// device appears, ovs-vswitchd reconfigures (it listens to the kernel's link
// notifications) and sets the ofport then. Ports not owned by owner are not
// waited for.
//
// The end of ctx is not an error: the status returned is the last one read
// and the caller decides what ports still without an ofport mean
// (BridgeStatus.WithoutOFPort lists them). The error is for a failed read,
// or for a ctx that ended before anything was read.
//
// The wait is event-driven without a client-side monitor of the Interface
// table: it is an OVSDB wait operation with a timeout, which ovsdb-server
// re-evaluates on every commit to the database (ovs-vswitchd writing an
// ofport is one) and answers as soon as it holds; a round ends after at most
// a second or at the ctx deadline, and the status is then read again.
func (c *Client) WaitOFPorts(ctx context.Context, bridge, owner string) (BridgeStatus, error) {
	return c.WaitOFPortsReport(ctx, bridge, owner, nil)
}

// WaitOFPortsReport is WaitOFPorts telling report, before each round of the
// wait, how many of owner's ports still lack an ofport and how many owner
// has on the bridge (progress on a terminal).
func (c *Client) WaitOFPortsReport(ctx context.Context, bridge, owner string, report func(pending, owned int)) (BridgeStatus, error) {
	if owner == "" {
		return BridgeStatus{}, fmt.Errorf("ovs: wait for ofports on bridge %s: empty owner", bridge)
	}
	var last BridgeStatus
	logged := false
	for read := false; ; read = true {
		st, err := c.read(ctx, statusView)
		if err != nil {
			if read && ctxEnded(ctx) != nil {
				return last, nil
			}
			return last, fmt.Errorf("ovs: wait for ofports on bridge %s: %w", bridge, err)
		}
		last = st.status(bridge)
		pending := st.withoutOFPort(bridge, owner)
		if len(pending) == 0 {
			return last, nil
		}
		if report != nil {
			owned := 0
			for _, p := range last.Ports {
				if p.Owner == owner {
					owned++
				}
			}
			report(len(pending), owned)
		}
		// Say what it waits for once the wait lasts: at once when
		// ovs-vswitchd already reported why a port has no ofport, else
		// after the first round.
		if !logged && (read || anyError(pending)) {
			logged = true
			c.logWait(ctx, "waiting for ovs-vswitchd to give ports of bridge "+bridge+" an OpenFlow port number (it opens each port's netdev in its own network namespace)",
				"ports", describePending(pending))
		}
		round := waitRound
		if dl, ok := ctx.Deadline(); ok {
			// End the server's wait a little before ctx, to read the
			// status once more.
			round = min(round, time.Until(dl)-10*time.Millisecond)
		}
		if round < time.Millisecond || ctxEnded(ctx) != nil {
			return last, nil
		}
		if err := c.waitOFPorts(ctx, pending, round); err != nil {
			if ctxEnded(ctx) != nil {
				return last, nil
			}
			return last, fmt.Errorf("ovs: wait for ofports on bridge %s: %w", bridge, err)
		}
	}
}

func anyError(fs []*model.Interface) bool {
	for _, f := range fs {
		if f.Error != nil && *f.Error != "" {
			return true
		}
	}
	return false
}

// describePending names each interface, by name, with its error column:
// "bond0 (could not open network device bond0 (No such device)), eth3 (no
// error reported yet)".
func describePending(fs []*model.Interface) string {
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(a, b *model.Interface) int { return strings.Compare(a.Name, b.Name) })
	parts := make([]string, len(fs))
	for i, f := range fs {
		why := "no error reported yet"
		if f.Error != nil && *f.Error != "" {
			why = *f.Error
		}
		parts[i] = f.Name + " (" + why + ")"
	}
	return strings.Join(parts, ", ")
}

// withoutOFPort returns the interfaces of owner's ports on bridge whose
// ofport is not > 0.
func (st *state) withoutOFPort(bridge, owner string) []*model.Interface {
	b := st.bridges[bridge]
	if b == nil {
		return nil
	}
	var out []*model.Interface
	for _, pu := range b.Ports {
		p := st.portByUUID[pu]
		if p == nil || !ownedBy(p.ExternalIDs, owner) {
			continue
		}
		if f := st.portInterface(p); f != nil && (f.Ofport == nil || *f.Ofport <= 0) {
			out = append(out, f)
		}
	}
	return out
}

// waitOFPorts sends one transaction of wait operations, one per interface,
// each satisfied once that interface row has ofport > 0. ovsdb-server holds
// the transaction until all are satisfied (nil) or the timeout passes (nil
// too: the caller reads the state again).
//
// The waits are built with libovsdb's typed API but for their condition
// ofport > 0, which stays raw: ofport is an optional integer (min 0, max
// 1), which libovsdb's condition check (ovsdb.ValidateCondition) treats as
// a set and allows only ==, !=, includes and excludes on, while
// ovsdb-server orders optional integers (an empty one is never > 0).
func (c *Client) waitOFPorts(ctx context.Context, ifaces []*model.Interface, timeout time.Duration) error {
	ms := int(timeout / time.Millisecond)
	db, err := c.lib(ctx)
	if err != nil {
		return err
	}
	ops := make([]ovsdb.Operation, 0, len(ifaces))
	for _, f := range ifaces {
		row := &model.Interface{UUID: f.UUID}
		op, err := db.Where(&model.Interface{UUID: f.UUID}).Wait(ovsdb.WaitConditionEqual, &ms, row, &row.UUID)
		if err != nil {
			return fmt.Errorf("wait for interface %s: %w", f.Name, err)
		}
		if len(op) != 1 {
			return fmt.Errorf("wait for interface %s: %d operations, want 1", f.Name, len(op))
		}
		op[0].Where = append(op[0].Where, ovsdb.NewCondition("ofport", ovsdb.ConditionGreaterThan, 0))
		ops = append(ops, op[0])
	}
	res, err := db.Transact(ctx, ops...)
	if err != nil {
		return err
	}
	if len(res) < len(ops) {
		return fmt.Errorf("wait: %d results for %d operations", len(res), len(ops))
	}
	for i, r := range res {
		switch {
		case r.Error == "":
		case r.Error == "timed out":
			return nil
		default:
			return fmt.Errorf("wait for interface %s: %s: %s", ifaces[i].Name, r.Error, r.Details)
		}
	}
	return nil
}
