package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/teardown"
)

// A rowKey step sets one key of a map column of the Open_vSwitch row
// (other_config: ovsConfigKind; external_ids: ovnIDKind). Its record keeps
// the value found before (nil: the key was absent), which the undo puts
// back unconditionally: the journal keeps the record of the first change,
// and a later up may have set another value since (max-idle changed live,
// a new remote). Keys vflag does not set are never touched.
//
//	ovs-vsctl set Open_vSwitch . $column:$key=$value

// rowKeyRecord is the journal record of a rowKey step; ovsConfigRecord
// and ovnIDRecord are its names in the two kinds.
type rowKeyRecord struct {
	Endpoint string  `json:"endpoint"`
	Key      string  `json:"key"`
	Value    string  `json:"value"`
	Prior    *string `json:"prior"` // nil: the key was absent
}

// rowColumn is a map column of the Open_vSwitch row: its name, its read
// and its write (value nil: remove the key).
type rowColumn struct {
	name string
	read func(c *ovs.Client, ctx context.Context) (map[string]string, error)
	set  func(c *ovs.Client, ctx context.Context, key string, value *string) error
}

var (
	otherConfigColumn = rowColumn{name: "other_config",
		read: (*ovs.Client).OtherConfig,
		set: func(c *ovs.Client, ctx context.Context, key string, value *string) error {
			return c.SetOtherConfig(ctx, key, value, nil)
		}}
	externalIDsColumn = rowColumn{name: "external_ids",
		read: (*ovs.Client).ExternalIDs,
		set: func(c *ovs.Client, ctx context.Context, key string, value *string) error {
			return c.SetExternalID(ctx, key, value, nil)
		}}
)

// rowValue is a key's wanted value given the current one (ok: the key is
// set) and the whole column; note is added to the change's summary;
// persist, when set, is what Apply does before the write (keep a made
// system-id in the state directory); leave, when not "", is why the key is
// left as it is (the step's converged summary).
type rowValue func(cur string, ok bool, row map[string]string) (want, note string, persist func() error, leave string, err error)

// fixed is a rowValue of one value.
func fixed(v string) rowValue {
	return func(string, bool, map[string]string) (string, string, func() error, string, error) {
		return v, "", nil, "", nil
	}
}

// rowRead is a column of the Open_vSwitch row as the checks of one batch
// of rowKey steps read it: once for all of them (they run together,
// before any applies; one read instead of one per key, each a round trip
// to ovsdb-server), again after a step of the batch wrote.
//
//	ovs-vsctl get Open_vSwitch . $column
type rowRead struct {
	e   *Env
	col rowColumn
	mu  sync.Mutex
	row map[string]string // nil: not read since the last write
}

func newRowRead(e *Env, col rowColumn) *rowRead { return &rowRead{e: e, col: col} }

func (r *rowRead) get(ctx context.Context) (map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.row != nil {
		return r.row, nil
	}
	c, err := r.e.h.OVS(ctx)
	if err != nil {
		return nil, err
	}
	row, err := r.col.read(c, ctx)
	if err != nil {
		return nil, err
	}
	r.row = row
	return row, nil
}

// forget drops what was read: a step of the batch wrote the row.
func (r *rowRead) forget() {
	r.mu.Lock()
	r.row = nil
	r.mu.Unlock()
}

// rowKeyStep is the step of kind that sets key of the column row reads to
// value's want.
func rowKeyStep(e *Env, kind string, row *rowRead, key string, value rowValue) teardown.Step {
	col := row.col
	var (
		mu      sync.Mutex
		want    string
		persist func() error
	)
	return teardown.Step{
		Kind: kind, ID: kind + "/" + key,
		Check: func(ctx context.Context) (teardown.Change, error) {
			ids, err := row.get(ctx)
			if err != nil {
				return teardown.Change{}, err
			}
			cur, ok := ids[key]
			w, note, p, leave, err := value(cur, ok, ids)
			if err != nil {
				return teardown.Change{}, err
			}
			mu.Lock()
			want, persist = w, p
			mu.Unlock()
			switch {
			case ok && cur == w:
				return teardown.Change{Summary: fmt.Sprintf("%s:%s=%s", col.name, key, w)}, nil
			case leave != "":
				return teardown.Change{Summary: leave}, nil
			}
			r := rowKeyRecord{Endpoint: e.h.OVSDB, Key: key, Value: w}
			if ok {
				r.Prior = &cur
			}
			return teardown.Change{Needed: true, Record: r,
				Summary: fmt.Sprintf("%s:%s %s -> %s%s", col.name, key, orDash(cur), w, note),
				Revert:  fmt.Sprintf("%s:%s %s -> %s", col.name, key, w, orDash(cur))}, nil
		},
		Apply: func(ctx context.Context) error {
			mu.Lock()
			w, p := want, persist
			mu.Unlock()
			if p != nil {
				if err := p(); err != nil {
					return err
				}
			}
			c, err := e.h.OVS(ctx)
			if err != nil {
				return err
			}
			defer row.forget()
			return col.set(c, ctx, key, &w)
		},
	}
}

// undoRowKey puts the record's prior value of col back.
func undoRowKey(ctx context.Context, e *Env, col rowColumn, r rowKeyRecord) (string, error) {
	c, done, err := e.ovsAt(ctx, r.Endpoint)
	if err != nil {
		return "", err
	}
	defer done()
	if err := col.set(c, ctx, r.Key, r.Prior); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s:%s -> %s", col.name, r.Key, orDash(deref(r.Prior))), nil
}
