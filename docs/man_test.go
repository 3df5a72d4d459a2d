package docs

import (
	"strings"
	"testing"
	"time"
)

// TestConfigManPage: vflag.yaml(5) has every field of configuration.md's
// table with its default and change, as man(7) entries.
func TestConfigManPage(t *testing.T) {
	page, err := ConfigManPage(time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	fields, err := Fields()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(page, ".TH \"VFLAG.YAML\" \"5\"") || !strings.Contains(page, "\n.SH FIELDS\n") {
		t.Fatalf("vflag.yaml(5) header:\n%.300s", page)
	}
	for _, f := range fields {
		entry := ".TP\n.B " + roffText(f.Path) + "\nDefault: " + roffInline(f.Default) + ". Change: " + roffInline(f.Change) + ".\n"
		if !strings.Contains(page, entry) {
			t.Errorf("vflag.yaml(5) lacks %q", entry)
		}
	}
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "'") || (strings.HasPrefix(l, ".") && !strings.HasPrefix(l, ".TH") && !strings.HasPrefix(l, ".SH") &&
			!strings.HasPrefix(l, ".TP") && !strings.HasPrefix(l, ".B") && !strings.HasPrefix(l, ".PP") && !strings.HasPrefix(l, ".br") &&
			!strings.HasPrefix(l, ".nf") && !strings.HasPrefix(l, ".fi")) {
			t.Errorf("vflag.yaml(5) line %d is an unknown request: %s", i+1, l)
		}
	}
}
