// Package statustest holds test helpers for `vflag status` output, shared
// by internal/status's tests and cmd/vflag's end-to-end tests. Only tests
// import it.
package statustest

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
)

// CheckExposition parses the output as node_exporter's textfile collector
// does and checks that each family has HELP and TYPE gauge; it returns the
// number of samples per family.
func CheckExposition(t testing.TB, out string) map[string]int {
	t.Helper()
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		t.Fatalf("not valid exposition format: %v\n%s", err, out)
	}
	n := map[string]int{}
	for name, mf := range mfs {
		if mf.GetHelp() == "" || mf.GetType().String() != "GAUGE" {
			t.Errorf("%s: help %q type %s", name, mf.GetHelp(), mf.GetType())
		}
		if !strings.Contains(out, "# TYPE "+name+" gauge\n") {
			t.Errorf("%s: no TYPE line", name)
		}
		n[name] = len(mf.GetMetric())
	}
	if len(n) == 0 {
		t.Fatal("no metric families")
	}
	return n
}
