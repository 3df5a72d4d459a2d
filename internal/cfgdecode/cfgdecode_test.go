package cfgdecode

import (
	"testing"
	"time"
)

type inner struct {
	Wait  time.Duration `mapstructure:"wait"`
	Count int           `mapstructure:"count"`
}

type outer struct {
	Items []inner  `mapstructure:"items"`
	Inner inner    `mapstructure:"inner"`
	On    bool     `mapstructure:"on"`
	Names []string `mapstructure:"names"`
}

// TestDecodeErrors: each error names the path (under root) and the value.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // "" = accepted
	}{
		{"durations with units", "items: [{wait: 2ms}, {wait: 1m30s}]\ninner: {wait: 0}", ""},
		{"a list from a string", "names: a,b", ""},
		{"int duration", "inner: {wait: 30}", `invalid config:
  sim.inner.wait: "30" is a duration without a unit: write "30s" (units ms, s, m, h)`},
		{"string duration", `items: [{wait: 2ms}, {wait: "2"}]`, `invalid config:
  sim.items[1].wait: "2" is a duration without a unit: write "2s" (units ms, s, m, h)`},
		{"float duration", "inner: {wait: 0.5}", `invalid config:
  sim.inner.wait: "0.5" is a duration without a unit: write "0.5s" (units ms, s, m, h)`},
		{"not a duration", "inner: {wait: soon}", `invalid config:
  sim.inner.wait: "soon" is not a duration (e.g. 30s, 500ms, 5m, 1m30s)`},
		{"not an integer", "inner: {count: many}", `invalid config:
  sim.inner.count: "many" is not an integer`},
		{"a fraction", "inner: {count: 1.5}", `invalid config:
  sim.inner.count: "1.5" is not an integer`},
		{"not a boolean", "on: perhaps", `invalid config:
  sim.on: "perhaps" is not a boolean (true or false)`},
		{"not a mapping", "inner: 5", `invalid config:
  sim.inner: "5" is not a mapping (key: value lines)`},
		{"unknown keys, every one", "inner: {wiat: 1s, cuont: 2}\nitems: [{x: 1}]", `invalid config:
  sim.items[0].x: is not a config key (misspelt, or at the wrong indentation?)
  sim.inner.cuont: is not a config key (misspelt, or at the wrong indentation?); did you mean count?
  sim.inner.wiat: is not a config key (misspelt, or at the wrong indentation?); did you mean wait?`},
		// Keys that are not names: mapstructure panicked on them (found by
		// FuzzParse in internal/config).
		{"a number key", "items: [{wait: 1s, 1: x}]", `invalid config:
  sim.items[0]: has a key that is not a name: 1 (int)`},
		{"a null key", "inner:\n  ~: 1\n  count: 2", `invalid config:
  sim.inner: has a key that is not a name: null`},
		{"keys of every kind", "inner: {true: 2, 1.5: 3, count: 1}", `invalid config:
  sim.inner: has a key that is not a name: 1.5 (float64)
  sim.inner: has a key that is not a name: true (bool)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := YAML([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var o outer
			err = Decode(raw, &o, "sim")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.want != "" && err == nil:
				t.Fatal("accepted")
			case tt.want != "" && err.Error() != tt.want:
				t.Fatalf("error:\n%s\nwant:\n%s", err, tt.want)
			}
		})
	}
}

// TestYAMLSyntaxLine: a syntax error names the line that breaks the
// document, not the start of its enclosing block as yaml.v3 does.
func TestYAMLSyntaxLine(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"under-indented key in a list item", "a: 1\nlist:\n  - x: 1\n    y: 2\n   z: 3\n",
			`YAML syntax error at line 5: did not find expected '-' indicator: "   z: 3"`},
		{"unclosed flow list: the line that opens it", "a: [1, 2\nb: 3\n",
			`YAML syntax error at line 1: did not find expected ',' or ']': "a: [1, 2"`},
		{"duplicate key: yaml's own lines", "a: 1\nb: 2\na: 3\n",
			"yaml: unmarshal errors:\n  line 3: mapping key \"a\" already defined at line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := YAML([]byte(tt.yaml))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}
