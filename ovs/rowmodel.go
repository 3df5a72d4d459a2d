package ovs

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// modelFromRow fills the model struct *dst (a generated type of ovs/model,
// its fields tagged `ovsdb:"column"`) from row, a row in libovsdb's Go
// notation with the columns a select named: what libovsdb's
// model.CreateModel does with the schema, done from the model's Go field
// types instead, so a read needs neither the server's schema (a round trip
// and ~2.5 ms to parse the embedded one) nor libovsdb's mapper. A column
// the row lacks leaves its field zero; a column the model lacks is ignored.
// TestModelFromRowMatchesLibovsdb holds it to CreateModel's results. It
// reads the rows of libovsdb's client (an ssl: endpoint); the select
// connection's rows go through modelFromWire, which it is the reference of.
func modelFromRow(dst any, row ovsdb.Row) error {
	rv := reflect.ValueOf(dst).Elem()
	fields := columnFields(rv.Type())
	for col, v := range row {
		i, ok := fields[col]
		if !ok {
			continue
		}
		if err := setField(rv.Field(i), v); err != nil {
			return fmt.Errorf("column %s: %w", col, err)
		}
	}
	return nil
}

var fieldIndex sync.Map // reflect.Type -> map[string]int

// columnFields maps each `ovsdb` tag of struct type t to its field index.
func columnFields(t reflect.Type) map[string]int {
	if m, ok := fieldIndex.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		if col := t.Field(i).Tag.Get("ovsdb"); col != "" {
			m[col] = i
		}
	}
	fieldIndex.Store(t, m)
	return m
}

// setField stores the Go-notation value v in f, converting it to f's type:
// a set of zero or one element into a pointer (optional column) or a
// scalar, a set or a single atom into a slice, a map into a map, a UUID
// into a string, a JSON number into an int.
func setField(f reflect.Value, v any) error {
	t := f.Type()
	switch t.Kind() {
	case reflect.Pointer:
		if s, ok := v.(ovsdb.OvsSet); ok {
			switch len(s.GoSet) {
			case 0:
				f.SetZero()
				return nil
			case 1:
				v = s.GoSet[0]
			default:
				return fmt.Errorf("%d values for an optional %s", len(s.GoSet), t.Elem())
			}
		}
		p := reflect.New(t.Elem())
		if err := setScalar(p.Elem(), v); err != nil {
			return err
		}
		f.Set(p)
		return nil
	case reflect.Slice:
		elems := []any{v}
		if s, ok := v.(ovsdb.OvsSet); ok {
			elems = s.GoSet
		}
		sl := reflect.MakeSlice(t, len(elems), len(elems))
		for i, e := range elems {
			if err := setScalar(sl.Index(i), e); err != nil {
				return err
			}
		}
		f.Set(sl)
		return nil
	case reflect.Map:
		m, ok := v.(ovsdb.OvsMap)
		if !ok {
			return fmt.Errorf("%T is not a map", v)
		}
		mv := reflect.MakeMapWithSize(t, len(m.GoMap))
		for k, val := range m.GoMap {
			kv, vv := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			if err := setScalar(kv, k); err != nil {
				return fmt.Errorf("key: %w", err)
			}
			if err := setScalar(vv, val); err != nil {
				return fmt.Errorf("value: %w", err)
			}
			mv.SetMapIndex(kv, vv)
		}
		f.Set(mv)
		return nil
	}
	if s, ok := v.(ovsdb.OvsSet); ok && len(s.GoSet) == 1 {
		v = s.GoSet[0]
	}
	return setScalar(f, v)
}

// setScalar stores one atom in f (string, int, float64 or bool kind).
func setScalar(f reflect.Value, v any) error {
	switch f.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case string:
			f.SetString(x)
			return nil
		case ovsdb.UUID:
			f.SetString(x.GoUUID)
			return nil
		}
	case reflect.Int:
		if x, ok := v.(float64); ok && x == float64(int64(x)) {
			f.SetInt(int64(x))
			return nil
		}
	case reflect.Float64:
		if x, ok := v.(float64); ok {
			f.SetFloat(x)
			return nil
		}
	case reflect.Bool:
		if x, ok := v.(bool); ok {
			f.SetBool(x)
			return nil
		}
	}
	return fmt.Errorf("%v (%T) is not a %s", v, v, f.Type())
}
