package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/docs"
)

// fieldPaths are the config's field paths as docs/configuration.md writes
// them ("groups[].bond.mode"), each with its value in c (the first element
// of a list).
func fieldPaths(v reflect.Value, path string, out map[string]reflect.Value, order *[]string) {
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			v = reflect.New(t.Elem())
		}
		fieldPaths(v.Elem(), path, out, order)
		return
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
	case t.Kind() == reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			tag := t.Field(i).Tag.Get("mapstructure")
			if tag == "" {
				continue
			}
			p := tag
			if path != "" {
				p = path + "." + tag
			}
			fieldPaths(v.Field(i), p, out, order)
		}
		return
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		elem := reflect.New(t.Elem()).Elem()
		if v.Len() > 0 {
			elem = v.Index(0)
		}
		fieldPaths(elem, path+"[]", out, order)
		return
	}
	out[path] = v
	*order = append(*order, path)
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// TestEveryFieldDocumented: docs/configuration.md's field table (also
// vflag.yaml(5)) lists every field of the config and no other, each with
// what changing it costs, and gives each default ApplyDefaults fills in.
func TestEveryFieldDocumented(t *testing.T) {
	fields, err := docs.Fields()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]docs.Field{}
	for _, f := range fields {
		if _, dup := documented[f.Path]; dup {
			t.Errorf("configuration.md documents %s twice", f.Path)
		}
		documented[f.Path] = f
		cost, _, _ := strings.Cut(f.Change, " ")
		if !slices.Contains(docs.Changes, strings.Trim(cost, ",;:")) {
			t.Errorf("configuration.md: %s: change %q does not start with one of %v", f.Path, f.Change, docs.Changes)
		}
	}
	// A config with one group holding one entry of every list and every
	// optional section, defaults applied.
	c := Config{Groups: []Group{{VFs: []VFConfig{{}}, RateGroups: []RateGroup{{}}, Attachments: []Attachment{{}},
		Network: &Network{VFs: []NetworkVF{{}}, Portgroups: []Portgroup{{}}}}}}
	c.ApplyDefaults()
	values := map[string]reflect.Value{}
	var order []string
	fieldPaths(reflect.ValueOf(c), "", values, &order)
	for _, p := range order {
		f, ok := documented[p]
		if !ok {
			t.Errorf("config field %s is not in docs/configuration.md's field table", p)
			continue
		}
		v := values[p]
		if v.IsZero() {
			continue
		}
		want := fmt.Sprint(v.Interface())
		if v.Kind() == reflect.Pointer {
			want = fmt.Sprint(v.Elem().Interface())
		}
		if !defaultMatches(f.Default, v, want) {
			t.Errorf("configuration.md: %s: default %s, but ApplyDefaults gives %s", p, f.Default, want)
		}
	}
	for _, f := range fields {
		if _, ok := values[f.Path]; !ok {
			t.Errorf("configuration.md documents %s, which is no config field", f.Path)
		}
	}
}

// defaultMatches tells whether a default cell's first code span is the
// value ApplyDefaults gives (durations compared as durations: 5m is 5m0s).
func defaultMatches(cell string, v reflect.Value, want string) bool {
	m := codeSpan.FindStringSubmatch(cell)
	if m == nil {
		return false
	}
	if d, ok := v.Interface().(time.Duration); ok {
		got, err := time.ParseDuration(m[1])
		return err == nil && got == d
	}
	return m[1] == want
}
