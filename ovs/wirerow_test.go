package ovs

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vflag/vflag/ovs/model"
)

// wireToRow is the reference reading of one row of a select reply:
// encoding/json into a map, each value then turned into libovsdb's Go
// notation (goNotation). modelFromRow of its result is what modelFromWire
// must give.
func wireToRow(raw []byte) (ovsdb.Row, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for col, v := range m {
		gv, err := goNotation(v)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", col, err)
		}
		m[col] = gv
	}
	return ovsdb.Row(m), nil
}

// goNotation turns a value of the OVSDB wire notation (RFC 7047 5.1), as
// encoding/json decodes it into an any, into the Go notation of libovsdb's
// ovsdb.Row: ["uuid", u] and ["named-uuid", u] become ovsdb.UUID,
// ["set", [...]] an ovsdb.OvsSet and ["map", [[k, v], ...]] an ovsdb.OvsMap,
// their elements converted the same way; atoms (string, float64 number,
// bool) stay as they are.
func goNotation(v any) (any, error) {
	a, ok := v.([]any)
	if !ok {
		return v, nil
	}
	if len(a) != 2 {
		return nil, fmt.Errorf("value %v: want [type, value]", a)
	}
	tag, _ := a[0].(string)
	switch tag {
	case "uuid", "named-uuid":
		u, ok := a[1].(string)
		if !ok {
			return nil, fmt.Errorf("%s: %v is not a string", tag, a[1])
		}
		return ovsdb.UUID{GoUUID: u}, nil
	case "set":
		elems, ok := a[1].([]any)
		if !ok {
			return nil, fmt.Errorf("set: %v is not an array", a[1])
		}
		set := ovsdb.OvsSet{GoSet: make([]any, 0, len(elems))}
		for _, e := range elems {
			ge, err := atom(e)
			if err != nil {
				return nil, fmt.Errorf("set element: %w", err)
			}
			set.GoSet = append(set.GoSet, ge)
		}
		return set, nil
	case "map":
		pairs, ok := a[1].([]any)
		if !ok {
			return nil, fmt.Errorf("map: %v is not an array", a[1])
		}
		m := ovsdb.OvsMap{GoMap: make(map[any]any, len(pairs))}
		for _, p := range pairs {
			kv, ok := p.([]any)
			if !ok || len(kv) != 2 {
				return nil, fmt.Errorf("map: pair %v is not [key, value]", p)
			}
			k, err := atom(kv[0])
			if err != nil {
				return nil, fmt.Errorf("map key: %w", err)
			}
			val, err := atom(kv[1])
			if err != nil {
				return nil, fmt.Errorf("map value: %w", err)
			}
			m.GoMap[k] = val
		}
		return m, nil
	}
	return nil, fmt.Errorf("value %v: unknown type %q", a, a[0])
}

// atom is an element of a set or a map: a scalar or a UUID.
func atom(v any) (any, error) {
	a, ok := v.([]any)
	if !ok {
		return v, nil
	}
	if len(a) == 2 {
		if tag, _ := a[0].(string); tag == "uuid" || tag == "named-uuid" {
			if u, ok := a[1].(string); ok {
				return ovsdb.UUID{GoUUID: u}, nil
			}
		}
	}
	return nil, fmt.Errorf("%v is not an atom", a)
}

// TestModelFromWireRefuses: values outside RFC 7047's notation, or of
// another type than the column's, are errors naming the column, not
// guesses; a column the model lacks is skipped whatever it holds.
func TestModelFromWireRefuses(t *testing.T) {
	for _, tc := range []struct{ row, want string }{
		{`{"name": ["set"]}`, "column name: row JSON: want ','"},
		{`{"ofport": ["bag", []]}`, `column ofport: unknown type "bag"`},
		{`{"external_ids": ["map", [["k"]]]}`, "column external_ids: map pair: row JSON: want ','"},
		{`{"mtu_request": ["set", [["set", []]]]}`, `column mtu_request: set element: ["set", ...] is not an atom`},
		{`{"_uuid": ["uuid", 5]}`, "column _uuid: row JSON: want a string"},
		{`{"external_ids": ["map", "x"]}`, "column external_ids: row JSON: want '['"},
		{`{"external_ids": "x"}`, "column external_ids: not a map"},
		{`{"ofport": ["set", [1, 2]]}`, "column ofport: 2 values for an optional int"},
		{`{"name": ["set", []]}`, "column name: a set of 0 values is not a string"},
		{`{"name": 5}`, "column name: 5 is not a string"},
		{`{"ofport": 1.5}`, "column ofport: 1.5 is not a int"},
		{`{"ofport": "1"}`, `column ofport: "1" is not a int`},
		{`{"ofport": 01}`, `column ofport: row JSON: bad number "01"`},
		{`{"name": "a\qb"}`, `column name: row JSON: bad escape \q`},
		{`{"name": "x"} x`, "row JSON: want the end of the row"},
		{`{"name": "x"`, "row JSON: want ',' or '}', found the end"},
		{`["name"]`, "row JSON: want '{'"},
	} {
		var iface model.Interface
		err := modelFromWire(&iface, []byte(tc.row))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("modelFromWire(%s): %v, want an error with %q", tc.row, err, tc.want)
		}
	}
	var iface model.Interface
	if err := modelFromWire(&iface, []byte(`{"bogus": ["bag", [{"a": [null, true]}]], "name": "p\u00e9\ud83d\ude00"}`)); err != nil || iface.Name != "pé😀" {
		t.Errorf("a column the model lacks, then name: %v, name %q", err, iface.Name)
	}
}

// FuzzModelFromWire: for any row JSON, modelFromWire gives the model that
// the reference reading (wireToRow of the model's columns, then
// modelFromRow) gives, or both refuse it.
func FuzzModelFromWire(f *testing.F) {
	for _, s := range []string{
		`{"_uuid":["uuid","2f8c7e4a-0000-4000-8000-000000000001"],"name":"eth1","ofport":["set",[]],"mtu":1500,"error":["set",[]],"external_ids":["map",[["vflag-owner","g0"],["k","v"]]]}`,
		`{"name":"p1","ofport":7,"mtu_request":["set",[9000]],"error":"could not open network device p1 (No such device)","statistics":["map",[["rx_packets",12],["tx_packets",0]]]}`,
		`{"name":"bond0","interfaces":["set",[["uuid","a"],["uuid","b"]]],"tag":100,"trunks":["set",[10,20,30]],"vlan_mode":"native-untagged"}`,
		`{"name":"x\u0041\\\"\ud800","ofport":-1,"admin_state":"up","link_speed":1e10,"type":""}`,
		`{"bond_active_slave":["set",[]],"other_config":["map",[]],"ports":["uuid","p"],"stp_enable":false}`,
		`{"name":["set",["a","b"]]}`, `{}`, `{"ofport":9007199254740993}`, `{"mtu":1.0e3}`,
	} {
		f.Add(s, 0)
		f.Add(s, 1)
		f.Add(s, 2)
	}
	models := []func() any{
		func() any { return new(model.Interface) },
		func() any { return new(model.Port) },
		func() any { return new(model.Bridge) },
	}
	f.Fuzz(func(t *testing.T, row string, which int) {
		mk := models[(which%len(models)+len(models))%len(models)]
		got := mk()
		gotErr := modelFromWire(got, []byte(row))
		want := mk()
		wantErr := referenceModel(want, []byte(row))
		switch {
		case gotErr == nil && wantErr != nil:
			t.Fatalf("modelFromWire(%s) = %+v, the reference refuses it: %v", row, got, wantErr)
		case gotErr != nil && wantErr == nil:
			t.Fatalf("modelFromWire(%s): %v, the reference reads %+v", row, gotErr, want)
		case gotErr == nil:
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("modelFromWire(%s) differs from the reference (-reference +wire):\n%s", row, diff)
			}
		}
	})
}

// referenceModel reads row as the select connection did before
// modelFromWire: encoding/json, goNotation of the model's columns (a column
// the model lacks was never converted), modelFromRow.
func referenceModel(dst any, raw []byte) error {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	if m == nil { // JSON null is not a row
		return fmt.Errorf("not an object")
	}
	fields := columnFields(reflect.TypeOf(dst).Elem())
	row := ovsdb.Row{}
	for col, v := range m {
		if _, ok := fields[col]; !ok {
			continue
		}
		gv, err := goNotation(v)
		if err != nil {
			return err
		}
		row[col] = gv
	}
	return modelFromRow(dst, row)
}

// bridgeReply is a select reply's result for a bridge of n representor
// ports and a bond, as the plan reads it: the Port and Interface rows.
func bridgeReply(n int) []byte {
	var ports, ifaces []string
	for i := range n {
		ports = append(ports, fmt.Sprintf(`{"_uuid":["uuid","00000000-0000-4000-8000-%012d"],"name":"eth%d","interfaces":["uuid","10000000-0000-4000-8000-%012d"],"tag":["set",[]],"vlan_mode":["set",[]],"trunks":["set",[]],"external_ids":["map",[["vflag-owner","lag0"],["vflag-vf","pf%d/vf%d"]]]}`, i, i, i, i%2, i/2))
		ifaces = append(ifaces, fmt.Sprintf(`{"_uuid":["uuid","10000000-0000-4000-8000-%012d"],"name":"eth%d","ofport":%d,"error":["set",[]],"mtu":1500,"mtu_request":["set",[]],"external_ids":["map",[["vflag-owner","lag0"]]]}`, i, i, i+1))
	}
	return []byte(`[{"rows":[` + strings.Join(ports, ",") + `]},{"rows":[` + strings.Join(ifaces, ",") + `]}]`)
}

// BenchmarkDecodeBridgeRows: a select reply of 130 ports and their
// interfaces into the typed models, the way the select connection reads
// it now (splitSelectResults, modelFromWire) and the way it did
// (encoding/json into maps, goNotation, modelFromRow).
func BenchmarkDecodeBridgeRows(b *testing.B) {
	reply := bridgeReply(130)
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var raw json.RawMessage // as the select connection receives the result
			if err := json.Unmarshal(reply, &raw); err != nil {
				b.Fatal(err)
			}
			res, err := splitSelectResults(raw)
			if err != nil {
				b.Fatal(err)
			}
			var d wireDecoder // as modelsOf decodes a reply's rows
			for _, raw := range res[0].Rows {
				if err := d.model(new(model.Port), raw); err != nil {
					b.Fatal(err)
				}
			}
			for _, raw := range res[1].Rows {
				if err := d.model(new(model.Interface), raw); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("maps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var res []struct {
				Rows []map[string]any `json:"rows"`
			}
			if err := json.Unmarshal(reply, &res); err != nil {
				b.Fatal(err)
			}
			for k, mk := range []func() any{func() any { return new(model.Port) }, func() any { return new(model.Interface) }} {
				for _, m := range res[k].Rows {
					row := ovsdb.Row{}
					for col, v := range m {
						gv, err := goNotation(v)
						if err != nil {
							b.Fatal(err)
						}
						row[col] = gv
					}
					if err := modelFromRow(mk(), row); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}

// TestSplitSelectResults: a transact result splits into each operation's
// rows (each row the text of its object) or its error; what is not a
// result array is an error.
func TestSplitSelectResults(t *testing.T) {
	rs, err := splitSelectResults([]byte(` [{"rows": [{"name": "a"}, {"name":"b","x":[1,{"y":null}]}]}, {"rows":[]},
		{"error": "constraint violation", "details": "no column bogus", "uuid": ["uuid", "u"]}, {}] `))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		var rows []string
		for _, row := range r.Rows {
			rows = append(rows, string(row))
		}
		got = append(got, fmt.Sprintf("rows %q error %q details %q", rows, r.Error, r.Details))
	}
	want := []string{
		`rows ["{\"name\": \"a\"}" "{\"name\":\"b\",\"x\":[1,{\"y\":null}]}"] error "" details ""`,
		`rows [] error "" details ""`,
		`rows [] error "constraint violation" details "no column bogus"`,
		`rows [] error "" details ""`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("split (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{}`, `[{"rows": {}}]`, `[{"rows": [}]`, `[{"error": 5}]`, `[{"rows": []}`, `[{"rows": []}] x`, `[1]`} {
		if rs, err := splitSelectResults([]byte(bad)); err == nil {
			t.Errorf("splitSelectResults(%s) = %+v, want an error", bad, rs)
		}
	}
}

// FuzzSplitSelectResults: splitSelectResults agrees with encoding/json
// (each result object's "rows", "error" and "details", keys matched
// exactly) on every input both accept, and accepts no input it refuses.
func FuzzSplitSelectResults(f *testing.F) {
	f.Add(`[{"rows":[{"a":1},{"b":["set",[]]}]},{"error":"e","details":null}]`)
	f.Add(`[{"rows":null,"count":3},{}]`)
	f.Add(`[]`)
	f.Add(string(bridgeReply(2)))
	f.Fuzz(func(t *testing.T, in string) {
		got, gotErr := splitSelectResults([]byte(in))
		var objs []map[string]json.RawMessage
		wantErr := json.Unmarshal([]byte(in), &objs)
		var want []selectResult
		for _, o := range objs {
			var r selectResult
			for k, dst := range map[string]any{"rows": &r.Rows, "error": &r.Error, "details": &r.Details} {
				if v, ok := o[k]; ok && wantErr == nil {
					wantErr = json.Unmarshal(v, dst)
				}
			}
			if o == nil && wantErr == nil {
				wantErr = fmt.Errorf("null is not a result object")
			}
			want = append(want, r)
		}
		switch {
		case gotErr != nil && wantErr == nil:
			t.Fatalf("splitSelectResults(%s): %v; encoding/json reads %+v", in, gotErr, want)
		case gotErr == nil && wantErr != nil:
			t.Fatalf("splitSelectResults(%s) = %+v; encoding/json refuses it: %v", in, got, wantErr)
		case gotErr == nil:
			if len(got) != len(want) {
				t.Fatalf("splitSelectResults(%s): %d results, encoding/json %d", in, len(got), len(want))
			}
			for i := range got {
				if got[i].Error != want[i].Error || got[i].Details != want[i].Details || len(got[i].Rows) != len(want[i].Rows) {
					t.Fatalf("splitSelectResults(%s) result %d = %+v, encoding/json %+v", in, i, got[i], want[i])
				}
				for j := range got[i].Rows {
					if string(got[i].Rows[j]) != string(want[i].Rows[j]) {
						t.Fatalf("splitSelectResults(%s) result %d row %d = %s, encoding/json %s", in, i, j, got[i].Rows[j], want[i].Rows[j])
					}
				}
			}
		}
	})
}
