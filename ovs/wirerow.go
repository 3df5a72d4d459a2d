package ovs

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// modelFromWire fills the model struct *dst (a generated type of ovs/model,
// its fields tagged `ovsdb:"column"`) from raw, one row of a select reply as
// ovsdb-server sends it: a JSON object whose values are in the OVSDB wire
// notation (RFC 7047 5.1): an atom (string, number, boolean, ["uuid", u]),
// a set (["set", [atoms]], or a set of one element as that atom) or a map
// (["map", [[key, value], ...]]). It gives the model modelFromRow gives for
// the same row decoded into libovsdb's Go notation, without that notation's
// maps, slices and boxed values in between: for the bench's bridge of 130
// ports the decode of a no-op's read was 5.3 ms of a fresh process's CPU
// (encoding/json into maps, then goNotation, then modelFromRow), most of it
// allocation; BenchmarkDecodeBridgeRows: 0.61 of the time, 0.45 of the
// bytes and 0.23 of the allocations. A column the model lacks is skipped;
// one the row lacks stays zero. TestModelFromRowMatchesLibovsdb holds it to libovsdb's CreateModel,
// FuzzModelFromWire to modelFromRow.
func modelFromWire(dst any, raw []byte) error {
	var d wireDecoder
	return d.model(dst, raw)
}

// model is modelFromWire on d's scratch space: one decoder for the rows of
// a reply allocates its scratch once.
func (d *wireDecoder) model(dst any, raw []byte) error {
	d.b, d.i = raw, 0
	rv := reflect.ValueOf(dst).Elem()
	fields := columnFields(rv.Type())
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek() == '}' {
		d.i++
		return d.end()
	}
	for {
		col, err := d.key()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		if i, ok := fields[string(col)]; ok { // no allocation for the lookup
			if err := d.field(rv.Field(i)); err != nil {
				return fmt.Errorf("column %s: %w", col, err)
			}
		} else if err := d.skip(0); err != nil {
			return fmt.Errorf("column %s: %w", col, err)
		}
		switch c := d.next(); c {
		case ',':
			continue
		case '}':
			return d.end()
		default:
			return d.errAt("',' or '}'")
		}
	}
}

// splitSelectResults reads the result of a transact request (RFC 7047
// 4.1.3): an array with one object per operation, {"rows": [row, ...]}
// for a select, {"error": e, "details": d} for one that failed. Each row
// is a part of raw.
func splitSelectResults(raw []byte) ([]selectResult, error) {
	d := wireDecoder{b: raw}
	if err := d.expect('['); err != nil {
		return nil, err
	}
	var out []selectResult
	if d.peek() == ']' {
		d.i++
		return out, d.end()
	}
	for {
		r, err := d.selectResult()
		if err != nil {
			return nil, fmt.Errorf("result %d: %w", len(out)+1, err)
		}
		out = append(out, r)
		switch d.next() {
		case ',':
			continue
		case ']':
			return out, d.end()
		}
		return nil, d.errAt("',' or ']'")
	}
}

// selectResult reads one operation's result object.
func (d *wireDecoder) selectResult() (selectResult, error) {
	var r selectResult
	if err := d.expect('{'); err != nil {
		return r, err
	}
	if d.peek() == '}' {
		d.i++
		return r, nil
	}
	for {
		k, err := d.key()
		if err != nil {
			return r, err
		}
		if err := d.expect(':'); err != nil {
			return r, err
		}
		switch string(k) {
		case "rows":
			r.Rows, err = d.rows()
		case "error":
			r.Error, err = d.optionalStr()
		case "details":
			r.Details, err = d.optionalStr()
		default:
			err = d.skip(0)
		}
		if err != nil {
			return r, fmt.Errorf("%s: %w", k, err)
		}
		switch d.next() {
		case ',':
			continue
		case '}':
			return r, nil
		}
		return r, d.errAt("',' or '}'")
	}
}

// optionalStr reads a string or null ("").
func (d *wireDecoder) optionalStr() (string, error) {
	if d.peek() == 'n' {
		return "", d.skip(0)
	}
	return d.str()
}

// rows reads an array of values (objects: modelFromWire refuses others),
// each kept as its text; null is no rows.
func (d *wireDecoder) rows() ([]json.RawMessage, error) {
	if d.peek() == 'n' {
		return nil, d.skip(0)
	}
	if err := d.expect('['); err != nil {
		return nil, err
	}
	var rows []json.RawMessage
	if d.peek() == ']' {
		d.i++
		return rows, nil
	}
	for {
		d.ws()
		start := d.i
		if err := d.skip(0); err != nil {
			return nil, err
		}
		rows = append(rows, d.b[start:d.i:d.i])
		switch d.next() {
		case ',':
			continue
		case ']':
			return rows, nil
		}
		return nil, d.errAt("',' or ']'")
	}
}

// wireAtom is one atom of the wire notation.
type wireAtom struct {
	kind byte // 's' string, 'u' UUID, 'n' number, 'b' boolean
	s    string
	raw  []byte // a number's text
	b    bool
}

func (a wireAtom) String() string {
	switch a.kind {
	case 'u':
		return "uuid " + a.s
	case 'n':
		return string(a.raw)
	case 'b':
		return strconv.FormatBool(a.b)
	}
	return strconv.Quote(a.s)
}

// wireDecoder reads one JSON value after another from b. atoms and pairs
// are scratch space reused from column to column (a column's atoms are
// copied into the field before the next column is read).
type wireDecoder struct {
	b     []byte
	i     int
	atoms []wireAtom
	pairs []wireAtom // a map's: key, value, key, value, ...
}

func (d *wireDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek is the next non-space byte (0 at the end), not consumed.
func (d *wireDecoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// next consumes the next non-space byte (0 at the end).
func (d *wireDecoder) next() byte {
	c := d.peek()
	if c != 0 {
		d.i++
	}
	return c
}

func (d *wireDecoder) expect(c byte) error {
	if d.next() != c {
		return d.errAt(strconv.QuoteRune(rune(c)))
	}
	return nil
}

// end: nothing but space may follow the row.
func (d *wireDecoder) end() error {
	if d.ws(); d.i < len(d.b) {
		return d.errAt("the end of the row")
	}
	return nil
}

func (d *wireDecoder) errAt(want string) error {
	if d.i >= len(d.b) {
		return fmt.Errorf("row JSON: want %s, found the end", want)
	}
	return fmt.Errorf("row JSON: want %s at offset %d, found %q", want, d.i, d.b[d.i])
}

// field stores the column value that starts here in f, converting it as
// setField does: a set of zero or one element into a pointer (optional
// column) or a scalar, a set or a single atom into a slice, a map into a
// map, a UUID into a string, a number into an int or a float64.
func (d *wireDecoder) field(f reflect.Value) error {
	t := f.Type()
	if t.Kind() == reflect.Map {
		return d.mapField(f)
	}
	atoms, err := d.setOrAtom()
	if err != nil {
		return err
	}
	switch t.Kind() {
	case reflect.Pointer:
		switch len(atoms) {
		case 0:
			f.SetZero()
			return nil
		case 1:
			p := reflect.New(t.Elem())
			if err := setWireScalar(p.Elem(), atoms[0]); err != nil {
				return err
			}
			f.Set(p)
			return nil
		}
		return fmt.Errorf("%d values for an optional %s", len(atoms), t.Elem())
	case reflect.Slice:
		sl := reflect.MakeSlice(t, len(atoms), len(atoms))
		for i, a := range atoms {
			if err := setWireScalar(sl.Index(i), a); err != nil {
				return err
			}
		}
		f.Set(sl)
		return nil
	}
	if len(atoms) != 1 {
		return fmt.Errorf("a set of %d values is not a %s", len(atoms), t)
	}
	return setWireScalar(f, atoms[0])
}

// setOrAtom reads a set (["set", [...]]) or a single atom, into d.atoms.
func (d *wireDecoder) setOrAtom() ([]wireAtom, error) {
	d.atoms = d.atoms[:0]
	if d.peek() != '[' {
		a, err := d.scalar()
		if err != nil {
			return nil, err
		}
		d.atoms = append(d.atoms, a)
		return d.atoms, nil
	}
	d.i++
	tag, err := d.str()
	if err != nil {
		return nil, err
	}
	if err := d.expect(','); err != nil {
		return nil, err
	}
	switch tag {
	case "uuid", "named-uuid":
		u, err := d.str()
		if err != nil {
			return nil, err
		}
		d.atoms = append(d.atoms, wireAtom{kind: 'u', s: u})
	case "set":
		if err := d.expect('['); err != nil {
			return nil, err
		}
		if d.peek() == ']' {
			d.i++
			break
		}
		for {
			a, err := d.atom()
			if err != nil {
				return nil, fmt.Errorf("set element: %w", err)
			}
			d.atoms = append(d.atoms, a)
			if c := d.next(); c == ']' {
				break
			} else if c != ',' {
				return nil, d.errAt("',' or ']' in a set")
			}
		}
	case "map":
		return nil, fmt.Errorf("a map is not a set or an atom")
	default:
		return nil, fmt.Errorf("unknown type %q", tag)
	}
	if err := d.expect(']'); err != nil {
		return nil, err
	}
	return d.atoms, nil
}

// mapField reads ["map", [[k, v], ...]] into the map field f.
func (d *wireDecoder) mapField(f reflect.Value) error {
	t := f.Type()
	if d.next() != '[' {
		return fmt.Errorf("not a map")
	}
	if tag, err := d.str(); err != nil {
		return err
	} else if tag != "map" {
		return fmt.Errorf("%q is not a map", tag)
	}
	if err := d.expect(','); err != nil {
		return err
	}
	if err := d.expect('['); err != nil {
		return err
	}
	pairs := d.pairs[:0]
	defer func() { d.pairs = pairs[:0] }()
	if d.peek() == ']' {
		d.i++
	} else {
		for {
			if err := d.expect('['); err != nil {
				return fmt.Errorf("map pair: %w", err)
			}
			k, err := d.atom()
			if err != nil {
				return fmt.Errorf("map key: %w", err)
			}
			if err := d.expect(','); err != nil {
				return fmt.Errorf("map pair: %w", err)
			}
			v, err := d.atom()
			if err != nil {
				return fmt.Errorf("map value: %w", err)
			}
			if err := d.expect(']'); err != nil {
				return fmt.Errorf("map pair: %w", err)
			}
			pairs = append(pairs, k, v)
			if c := d.next(); c == ']' {
				break
			} else if c != ',' {
				return d.errAt("',' or ']' in a map")
			}
		}
	}
	if err := d.expect(']'); err != nil {
		return err
	}
	mv := reflect.MakeMapWithSize(t, len(pairs)/2)
	kv, vv := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
	for i := 0; i < len(pairs); i += 2 {
		if err := setWireScalar(kv, pairs[i]); err != nil {
			return fmt.Errorf("key: %w", err)
		}
		if err := setWireScalar(vv, pairs[i+1]); err != nil {
			return fmt.Errorf("value: %w", err)
		}
		mv.SetMapIndex(kv, vv)
	}
	f.Set(mv)
	return nil
}

// atom reads an element of a set or a map: a scalar or a UUID.
func (d *wireDecoder) atom() (wireAtom, error) {
	if d.peek() != '[' {
		return d.scalar()
	}
	d.i++
	tag, err := d.str()
	if err != nil {
		return wireAtom{}, err
	}
	if tag != "uuid" && tag != "named-uuid" {
		return wireAtom{}, fmt.Errorf("[%q, ...] is not an atom", tag)
	}
	if err := d.expect(','); err != nil {
		return wireAtom{}, err
	}
	u, err := d.str()
	if err != nil {
		return wireAtom{}, err
	}
	if err := d.expect(']'); err != nil {
		return wireAtom{}, err
	}
	return wireAtom{kind: 'u', s: u}, nil
}

// scalar reads a string, a number or a boolean.
func (d *wireDecoder) scalar() (wireAtom, error) {
	switch c := d.peek(); {
	case c == '"':
		s, err := d.str()
		return wireAtom{kind: 's', s: s}, err
	case c == 't' || c == 'f':
		for _, lit := range []string{"true", "false"} {
			if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
				d.i += len(lit)
				return wireAtom{kind: 'b', b: lit == "true"}, nil
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		start := d.i
		for d.i < len(d.b) && isNumberByte(d.b[d.i]) {
			d.i++
		}
		raw := d.b[start:d.i]
		if _, err := strconv.ParseFloat(string(raw), 64); err != nil || !validJSONNumber(raw) {
			return wireAtom{}, fmt.Errorf("row JSON: bad number %q", raw)
		}
		return wireAtom{kind: 'n', raw: raw}, nil
	}
	return wireAtom{}, d.errAt("a string, a number or a boolean")
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// validJSONNumber checks the grammar of RFC 8259 section 6 (ParseFloat
// also takes "+1", "1.", ".5", "0x1p3", "Inf").
func validJSONNumber(s []byte) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}

// key reads an object's key: the bytes between the quotes where it has no
// escape (and is valid UTF-8), else the decoded string's.
func (d *wireDecoder) key() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.errAt("a string")
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return d.b[start:j], nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			s, err := d.str()
			return []byte(s), err
		}
	}
	return nil, fmt.Errorf("row JSON: unterminated string")
}

// str reads a JSON string.
func (d *wireDecoder) str() (string, error) {
	if d.peek() != '"' {
		return "", d.errAt("a string")
	}
	d.i++
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := string(d.b[start:d.i])
			d.i++
			return s, nil
		case c == '\\':
			return d.strEscaped(start)
		case c < 0x20:
			return "", fmt.Errorf("row JSON: control character in a string at offset %d", d.i)
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				return d.strEscaped(start) // invalid UTF-8 becomes U+FFFD, as encoding/json does
			}
			d.i += size
		default:
			d.i++
		}
	}
	return "", fmt.Errorf("row JSON: unterminated string")
}

// strEscaped finishes a string with escapes or invalid UTF-8, begun at
// start, as encoding/json decodes it.
func (d *wireDecoder) strEscaped(start int) (string, error) {
	buf := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(buf), nil
		case c < 0x20:
			return "", fmt.Errorf("row JSON: control character in a string at offset %d", d.i)
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", fmt.Errorf("row JSON: unterminated string")
			}
			e := d.b[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", fmt.Errorf("row JSON: bad \\u escape at offset %d", d.i)
				}
				if utf16.IsSurrogate(r) {
					// A pair decodes to one rune; a lone surrogate to U+FFFD.
					save := d.i
					if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
						d.i += 2
						if r2, ok := d.hex4(); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								buf = utf8.AppendRune(buf, dec)
								continue
							}
						}
					}
					d.i = save
					r = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", fmt.Errorf("row JSON: bad escape \\%c", e)
			}
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
			} else {
				buf = append(buf, d.b[d.i:d.i+size]...)
			}
			d.i += size
		default:
			buf = append(buf, c)
			d.i++
		}
	}
	return "", fmt.Errorf("row JSON: unterminated string")
}

// skipStr passes over a JSON string (d.b[d.i] is its quote), checking it
// as str does, without making it.
func (d *wireDecoder) skipStr() error {
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return nil
		case c == '\\':
			_, err := d.str() // the rare case: decode it
			return err
		case c < 0x20:
			return fmt.Errorf("row JSON: control character in a string at offset %d", j)
		}
	}
	return fmt.Errorf("row JSON: unterminated string")
}

// hex4 reads the 4 hex digits of a \u escape.
func (d *wireDecoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	d.i += 4
	return rune(v), true
}

// skip passes over any JSON value (a column the model does not have).
func (d *wireDecoder) skip(depth int) error {
	if depth > 10000 { // encoding/json's bound
		return fmt.Errorf("row JSON: nested too deep")
	}
	switch c := d.peek(); c {
	case '"':
		return d.skipStr()
	case '[', '{':
		d.i++
		closing := byte(']')
		if c == '{' {
			closing = '}'
		}
		if d.peek() == closing {
			d.i++
			return nil
		}
		for {
			if c == '{' {
				if d.peek() != '"' {
					return d.errAt("a string")
				}
				if err := d.skipStr(); err != nil {
					return err
				}
				if err := d.expect(':'); err != nil {
					return err
				}
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			switch d.next() {
			case ',':
			case closing:
				return nil
			default:
				return d.errAt("',' or " + strconv.QuoteRune(rune(closing)))
			}
		}
	case 'n':
		if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
			d.i += 4
			return nil
		}
		return d.errAt("a value")
	}
	_, err := d.scalar()
	return err
}

// setWireScalar stores one atom in f (string, int, float64 or bool kind),
// as setScalar does for its Go-notation value.
func setWireScalar(f reflect.Value, a wireAtom) error {
	switch f.Kind() {
	case reflect.String:
		if a.kind == 's' || a.kind == 'u' {
			f.SetString(a.s)
			return nil
		}
	case reflect.Int:
		// Through a float64, as libovsdb and encoding/json read numbers.
		if a.kind == 'n' {
			if x, err := strconv.ParseFloat(string(a.raw), 64); err == nil && x == float64(int64(x)) {
				f.SetInt(int64(x))
				return nil
			}
		}
	case reflect.Float64:
		if a.kind == 'n' {
			if x, err := strconv.ParseFloat(string(a.raw), 64); err == nil {
				f.SetFloat(x)
				return nil
			}
		}
	case reflect.Bool:
		if a.kind == 'b' {
			f.SetBool(a.b)
			return nil
		}
	}
	return fmt.Errorf("%v is not a %s", a, f.Type())
}
