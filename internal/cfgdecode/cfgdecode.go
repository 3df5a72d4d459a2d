// Package cfgdecode turns a YAML config into Go structs with errors that
// point at their cause: a syntax error names the line where YAML's parser
// stopped (with its text), a value of the wrong type names the field path
// and the value, and a duration must carry a unit. internal/config (the
// config) and internal/sim (its sim: section) decode through it.
package cfgdecode

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"go.yaml.in/yaml/v3"

	"github.com/vflag/vflag/internal/suggest"
)

// FieldError is a config error naming the field path and the bad value
// (nil Value: the message alone follows the path).
type FieldError struct {
	Path  string
	Value any
	Msg   string
}

func (e FieldError) Error() string {
	if e.Value == nil {
		return fmt.Sprintf("%s: %s", e.Path, e.Msg)
	}
	return fmt.Sprintf("%s: %q %s", e.Path, fmt.Sprint(e.Value), e.Msg)
}

// Errors is every error found in a config.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return "invalid config:\n  " + strings.Join(lines, "\n  ")
}

// SyntaxError is a YAML syntax error at Line (1-based), the line whose
// addition makes the document fail to parse; Text is that line.
type SyntaxError struct {
	Line int
	Text string
	Msg  string // YAML's message without its "yaml: line N: " prefix
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("YAML syntax error at line %d: %s: %q", e.Line, e.Msg, e.Text)
}

// maxLocateLines bounds the search for a syntax error's line (it parses
// each prefix of the document).
const maxLocateLines = 10000

// YAML parses a config file's YAML into maps. yaml.v3 reports a parser
// error at the line where the enclosing block starts (an indentation error
// on line 12 comes out as "line 7: did not find expected '-' indicator"):
// the error returned here is a *SyntaxError at the first line whose prefix
// of the document fails with the same message.
func YAML(data []byte) (map[string]any, error) {
	var raw map[string]any
	err := yaml.Unmarshal(data, &raw)
	if err == nil {
		return raw, nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return nil, err // decoder errors carry their own, exact lines
	}
	msg := yamlMessage(err)
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > maxLocateLines {
		return nil, err
	}
	var prefix strings.Builder
	for i, line := range lines {
		prefix.WriteString(line)
		var v any
		perr := yaml.Unmarshal([]byte(prefix.String()), &v)
		if perr != nil && !errors.As(perr, &te) && yamlMessage(perr) == msg {
			return nil, &SyntaxError{Line: i + 1, Text: strings.TrimRight(line, "\r\n"), Msg: msg}
		}
	}
	return nil, err
}

// yamlMessage is a yaml.v3 error's message without "yaml: line N: ".
func yamlMessage(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(s, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if _, err := strconv.Atoi(rest[:i]); err == nil {
				return rest[i+2:]
			}
		}
	}
	return s
}

// Decode decodes raw (YAML decoded into maps) into out as vflag reads its
// config: keys unknown to out are errors, a string is weakly converted to
// the field's type ("8" for an int), "a,b" is a list, a duration needs a
// unit ("30s"; a bare number other than 0 is refused, not read as
// nanoseconds). root prefixes every path ("" for the whole config). The
// error is Errors, one per field, each naming its path and value.
func Decode(raw, out any, root string) error {
	var keyErrs Errors
	nameKeys(raw, root, &keyErrs)
	if len(keyErrs) > 0 {
		return keyErrs
	}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			strictHook,
			mapstructure.StringToSliceHookFunc(","),
		),
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		Result:           out,
	})
	if err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	if err := dec.Decode(raw); err != nil {
		var es Errors
		flatten(err, root, reflect.TypeOf(out), &es)
		return es
	}
	return nil
}

// nameKeys reports every mapping key under v (at path) that is not a string:
// YAML's null ("? : x", "~: x"), a number ("1: x"), a boolean, a list or a
// mapping. Every key of a config is a name, and mapstructure panics on an
// unused key that is not a string (v2.4.0: decodeStructFromMap asserts
// rawKey.(string)).
func nameKeys(v any, path string, es *Errors) {
	switch m := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(m)) {
			nameKeys(m[k], join(path, k), es)
		}
	case map[any]any:
		named := map[string]any{}
		var bad []string
		for k, e := range m {
			switch k := k.(type) {
			case string:
				named[k] = e
			case nil:
				bad = append(bad, "null")
			default:
				bad = append(bad, fmt.Sprintf("%v (%T)", k, k))
			}
		}
		slices.Sort(bad)
		for _, b := range bad {
			p := path
			if p == "" {
				p = "config"
			}
			*es = append(*es, FieldError{Path: p, Msg: "has a key that is not a name: " + b})
		}
		nameKeys(named, path, es)
	case []any:
		for i, e := range m {
			nameKeys(e, fmt.Sprintf("%s[%d]", path, i), es)
		}
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// valueError is a hook's verdict on a value; Decode names the field.
type valueError struct {
	value any
	msg   string
}

func (e *valueError) Error() string { return fmt.Sprintf("%q %s", fmt.Sprint(e.value), e.msg) }

// strictHook refuses what mapstructure would read silently wrong: a
// duration without a unit (mapstructure takes 30 as 30ns) and a fraction
// for an integer (4.5 as 4); and names the value of a scalar given for a
// mapping.
func strictHook(from, to reflect.Type, data any) (any, error) {
	if to == durationType {
		return durationValue(from, data)
	}
	switch to.Kind() {
	case reflect.Struct:
		switch from.Kind() {
		case reflect.Map, reflect.Struct, reflect.Pointer, reflect.Interface:
		default:
			return nil, &valueError{data, wantType(to)}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch from.Kind() {
		case reflect.Float32, reflect.Float64:
			if f := reflect.ValueOf(data).Float(); f != math.Trunc(f) {
				return nil, &valueError{data, "is not an integer"}
			}
		}
	}
	return data, nil
}

// durationValue reads a duration field's value: a Go duration string
// ("30s", "1m30s", "0"), a 0, or a time.Duration.
func durationValue(from reflect.Type, data any) (any, error) {
	if from == durationType {
		return data, nil
	}
	unitless := func(n string) error {
		return &valueError{data, fmt.Sprintf("is a duration without a unit: write %q (units ms, s, m, h)", n+"s")}
	}
	switch from.Kind() {
	case reflect.String:
		s := strings.TrimSpace(reflect.ValueOf(data).String())
		d, err := time.ParseDuration(s)
		if err == nil {
			return d, nil
		}
		if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
			return nil, unitless(s)
		}
		return nil, &valueError{data, "is not a duration (e.g. 30s, 500ms, 5m, 1m30s)"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n := reflect.ValueOf(data).Int(); n != 0 {
			return nil, unitless(strconv.FormatInt(n, 10))
		}
		return time.Duration(0), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n := reflect.ValueOf(data).Uint(); n != 0 {
			return nil, unitless(strconv.FormatUint(n, 10))
		}
		return time.Duration(0), nil
	case reflect.Float32, reflect.Float64:
		if f := reflect.ValueOf(data).Float(); f != 0 {
			return nil, unitless(strconv.FormatFloat(f, 'f', -1, 64))
		}
		return time.Duration(0), nil
	}
	return data, nil // anything else: mapstructure names the type
}

// flatten turns mapstructure's joined errors into one FieldError each; t
// is the type decoded into (for the keys an unknown one may have meant).
func flatten(err error, root string, t reflect.Type, es *Errors) {
	de, ok := err.(*mapstructure.DecodeError)
	if !ok {
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range e.Unwrap() {
				flatten(e, root, t, es)
			}
		case interface{ Unwrap() error }:
			flatten(e.Unwrap(), root, t, es)
		default:
			path := root
			if path == "" {
				path = "config"
			}
			*es = append(*es, FieldError{Path: path, Msg: err.Error()})
		}
		return
	}
	inner := de.Unwrap()
	if _, ok := inner.(interface{ Unwrap() []error }); ok {
		flatten(inner, root, t, es)
		return
	}
	path := join(root, de.Name())
	var (
		ve *valueError
		pe *mapstructure.ParseError
		ue *mapstructure.UnconvertibleTypeError
	)
	switch {
	case errors.As(inner, &ve):
		*es = append(*es, FieldError{Path: path, Value: ve.value, Msg: ve.msg})
	case errors.As(inner, &pe):
		*es = append(*es, FieldError{Path: path, Value: pe.Value, Msg: wantType(pe.Expected.Type())})
	case errors.As(inner, &ue):
		*es = append(*es, FieldError{Path: path, Value: ue.Value, Msg: wantType(ue.Expected.Type())})
	case strings.HasPrefix(inner.Error(), "has invalid keys: "):
		for _, k := range strings.Split(strings.TrimPrefix(inner.Error(), "has invalid keys: "), ", ") {
			msg := "is not a config key (misspelt, or at the wrong indentation?)"
			if meant := meantKey(t, de.Name(), k); meant != "" {
				msg += "; did you mean " + meant + "?"
			} else if meant := nestedKey(t, de.Name(), k); meant != "" {
				msg += "; did you mean " + join(path, meant) + "?"
			}
			*es = append(*es, FieldError{Path: join(path, k), Msg: msg})
		}
	default:
		*es = append(*es, FieldError{Path: path, Msg: inner.Error()})
	}
}

// structAt is the struct type of the mapping at path ("groups[0].bond",
// as mapstructure names it) in a value of type t.
func structAt(t reflect.Type, path string) (reflect.Type, bool) {
	t = structOf(t)
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			continue
		}
		name, _, _ := strings.Cut(seg, "[")
		if name != "" {
			f, ok := fieldByKey(t, name)
			if !ok {
				return nil, false
			}
			t = f.Type
		}
		t = structOf(t)
	}
	return t, t != nil && t.Kind() == reflect.Struct
}

// structOf is t without pointers and lists.
func structOf(t reflect.Type) reflect.Type {
	for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice) {
		t = t.Elem()
	}
	return t
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	if t == nil || t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("mapstructure") == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// keysOf are the config keys of struct type t.
func keysOf(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if k := t.Field(i).Tag.Get("mapstructure"); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// meantKey is the key of the mapping at path nearest to the unknown key,
// "" when none is near.
func meantKey(t reflect.Type, path, key string) string {
	st, ok := structAt(t, path)
	if !ok {
		return ""
	}
	meant, _ := suggest.Nearest(key, keysOf(st))
	return meant
}

// nestedKey is the one mapping under the one at path (not a list's) that
// has the unknown key: "bond.miimon" for a miimon written in the group.
func nestedKey(t reflect.Type, path, key string) string {
	st, ok := structAt(t, path)
	if !ok {
		return ""
	}
	var found []string
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Struct || ft == reflect.TypeFor[time.Duration]() {
			continue
		}
		if _, ok := fieldByKey(ft, key); ok {
			found = append(found, f.Tag.Get("mapstructure")+"."+key)
		}
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// join appends a field path to root.
func join(root, path string) string {
	switch {
	case root == "":
		return path
	case path == "":
		return root
	case strings.HasPrefix(path, "["):
		return root + path
	}
	return root + "." + path
}

// wantType says what a field of type t takes.
func wantType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "is not a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "is not an integer"
	case reflect.Float32, reflect.Float64:
		return "is not a number"
	case reflect.String:
		return "is not a string"
	case reflect.Slice, reflect.Array:
		return "is not a list"
	case reflect.Struct, reflect.Map:
		return "is not a mapping (key: value lines)"
	}
	return "is not a " + t.String()
}
