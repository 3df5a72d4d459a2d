package ovs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// selectConn is a JSON-RPC connection of vflag's own to ovsdb-server for
// read-only select transactions (RFC 7047 section 4.1.3, "transact"): what
// every read of this package sends. libovsdb's client decodes each row of a
// reply by unmarshalling it into a map and then marshalling and
// unmarshalling every set, map and UUID again (ovsdb.Row.UnmarshalJSON,
// ovsSliceToGoNotation): measured on the bench's bridge of 130 ports, a
// select of the plan's columns took 12-18 ms through it against 2.2 ms for
// the round trip and 1.1 ms to decode the same 62 KB reply once. This
// connection sends the same select operations (libovsdb's ovsdb.Operation
// encodes them), keeps each row of a reply as its JSON text and decodes
// that straight into the typed models (modelFromWire).
//
// Writes, waits and the next_cfg monitor stay on libovsdb's client
// (Client.lib), which is connected only when the first of them is needed:
// a run that only reads (a converged up, status, the hooks' reads) never
// fetches the schema or sets up the monitor.
//
// One request is in flight at a time (mu). ovsdb-server may send an "echo"
// request on an idle connection (its inactivity probe); it is answered when
// read. A connection that fails is closed and dialed again once for the
// request that found it broken: a select changes nothing, so sending it
// again is safe.
type selectConn struct {
	network, addr string

	mu   sync.Mutex
	conn net.Conn
	dec  *json.Decoder
	w    *bufio.Writer
	id   uint64
}

// errNoSelectConn: the endpoint's scheme (ssl:) is not one selectConn
// speaks; reads go through libovsdb's client.
var errNoSelectConn = errors.New("no select connection for this endpoint scheme")

// newSelectConn parses endpoint ("unix:/path", "tcp:host:port").
func newSelectConn(endpoint string) (*selectConn, error) {
	switch {
	case strings.HasPrefix(endpoint, "unix:"):
		return &selectConn{network: "unix", addr: strings.TrimPrefix(endpoint, "unix:")}, nil
	case strings.HasPrefix(endpoint, "tcp:"):
		return &selectConn{network: "tcp", addr: strings.TrimPrefix(endpoint, "tcp:")}, nil
	}
	return nil, errNoSelectConn
}

// dial connects (s.mu held).
func (s *selectConn) dial(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, s.network, s.addr)
	if err != nil {
		return err
	}
	s.conn, s.dec, s.w = conn, json.NewDecoder(bufio.NewReaderSize(conn, 64<<10)), bufio.NewWriter(conn)
	return nil
}

// close closes the connection (s.mu held); the next call dials again.
func (s *selectConn) close() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn, s.dec, s.w = nil, nil, nil
	}
}

// Close closes the connection.
func (s *selectConn) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.close()
}

// rpcMessage is any message ovsdb-server sends: a reply (id, result,
// error) or a request (method, params, id). Result holds a pointer to
// where the awaited reply's result is decoded, in the one pass over the
// message (a json.RawMessage decoded again would scan it twice more).
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result any             `json:"result"`
	Error  any             `json:"error"`
}

// selectResult is one operation's result in a transact reply: its rows,
// each the text of one JSON object (a part of the reply, not a copy).
type selectResult struct {
	Rows    []json.RawMessage
	Error   string
	Details string
}

// call sends method with params and decodes the reply's result into
// *result: once on the open connection, and once more on a fresh one if
// that failed.
func (s *selectConn) call(ctx context.Context, method string, params []any, result any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	reused := s.conn != nil
	err := s.callOnce(ctx, method, params, result)
	if err != nil && reused && ctxEnded(ctx) == nil && !errors.As(err, new(*rpcError)) {
		err = s.callOnce(ctx, method, params, result)
	}
	return err
}

// rpcError is an error ovsdb-server answered with (not a broken connection).
type rpcError struct{ v any }

func (e *rpcError) Error() string { return fmt.Sprintf("ovsdb-server: %v", e.v) }

// callOnce is one try of call. A reply never arrives for another request:
// a call that ends without its reply (a timeout, an I/O error) closes the
// connection, so a reply with another id is a protocol error.
func (s *selectConn) callOnce(ctx context.Context, method string, params []any, result any) error {
	if s.conn == nil {
		if err := s.dial(ctx); err != nil {
			return err
		}
	}
	// The deadline is the context's; a context that ends sooner (canceled)
	// moves it to the past, which unblocks the read. conn, not s.conn: the
	// function may run after this call closed the connection.
	conn := s.conn
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	s.id++
	id := s.id
	req := struct {
		Method string `json:"method"`
		Params []any  `json:"params"`
		ID     uint64 `json:"id"`
	}{method, params, id}
	if err := json.NewEncoder(s.w).Encode(req); err != nil {
		return s.broken(ctx, err)
	}
	if err := s.w.Flush(); err != nil {
		return s.broken(ctx, err)
	}
	for {
		m := rpcMessage{Result: result}
		if err := s.dec.Decode(&m); err != nil {
			return s.broken(ctx, err)
		}
		if m.Method == "echo" { // the server's inactivity probe
			if err := s.reply(m); err != nil {
				return s.broken(ctx, err)
			}
			continue
		}
		if m.Method != "" { // a notification: none is subscribed on this connection
			continue
		}
		var got uint64
		if json.Unmarshal(m.ID, &got) != nil || got != id {
			return s.broken(ctx, fmt.Errorf("reply to request %s while awaiting %d", m.ID, id))
		}
		if m.Error != nil {
			return &rpcError{m.Error}
		}
		return nil
	}
}

// reply answers an echo request with its own params (RFC 7047 4.1.11).
func (s *selectConn) reply(m rpcMessage) error {
	rep := struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  any             `json:"error"`
	}{m.ID, m.Params, nil}
	if len(rep.Result) == 0 {
		rep.Result = json.RawMessage("[]")
	}
	if err := json.NewEncoder(s.w).Encode(rep); err != nil {
		return err
	}
	return s.w.Flush()
}

// broken closes the connection after an I/O error; the context's error
// wins when it ended the call.
func (s *selectConn) broken(ctx context.Context, err error) error {
	s.close()
	if cerr := ctxEnded(ctx); cerr != nil {
		return cerr
	}
	return err
}

// ctxEnded is ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed even if its timer has not fired yet. The connection's deadline
// is the context's and ends a read at that instant; on a loaded machine the
// context's own timer can run milliseconds later, and a read that failed at
// the deadline must not count as a broken connection (dialed again, past
// the deadline: "dial unix ...: i/o timeout").
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// ping asks for the server's databases and checks that Open_vSwitch is one:
// Connect's proof that the endpoint is an ovsdb-server serving vflag's
// database.
func (s *selectConn) ping(ctx context.Context) error {
	var dbs []string
	if err := s.call(ctx, "list_dbs", []any{}, &dbs); err != nil {
		return fmt.Errorf("list_dbs: %w", err)
	}
	for _, d := range dbs {
		if d == "Open_vSwitch" {
			return nil
		}
	}
	return fmt.Errorf("the server has no Open_vSwitch database (it serves %v)", dbs)
}

// transact sends the select operations as one transaction and returns
// each one's rows as ovsdb-server sent them, one JSON object each
// (modelFromWire decodes them). An operation that failed is an error
// naming it.
func (s *selectConn) transact(ctx context.Context, ops []ovsdb.Operation) ([][]json.RawMessage, error) {
	params := make([]any, 0, len(ops)+1)
	params = append(params, "Open_vSwitch")
	for _, op := range ops {
		params = append(params, op)
	}
	// The result is kept as its text and split here (splitSelectResults):
	// encoding/json would scan every row's bytes once more to copy it.
	var raw json.RawMessage
	if err := s.call(ctx, "transact", params, &raw); err != nil {
		return nil, err
	}
	results, err := splitSelectResults(raw)
	if err != nil {
		return nil, fmt.Errorf("transact reply: %w", err)
	}
	if len(results) < len(ops) {
		for _, r := range results {
			if r.Error != "" {
				return nil, fmt.Errorf("%s: %s", r.Error, r.Details)
			}
		}
		return nil, fmt.Errorf("transact reply: %d results for %d operations", len(results), len(ops))
	}
	out := make([][]json.RawMessage, len(ops))
	for i, r := range results[:len(ops)] {
		if r.Error != "" {
			return nil, fmt.Errorf("%s %s: %s: %s", ops[i].Op, ops[i].Table, r.Error, r.Details)
		}
		out[i] = r.Rows
	}
	return out, nil
}
