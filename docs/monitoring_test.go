package docs

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/vflag/vflag/internal/status"
)

var metricRE = regexp.MustCompile(`\bvflag_[a-z0-9_]+\b`)

// exported are the metric families vflag status -o prometheus writes.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range status.MetricNames() {
		out[n] = true
	}
	if len(out) == 0 {
		t.Fatal("status exports no metric")
	}
	return out
}

// balanced checks a PromQL expression's brackets and quotes.
func balanced(expr string) bool {
	var stack []rune
	quote := rune(0)
	for _, r := range expr {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '(' || r == '{' || r == '[':
			stack = append(stack, r)
		case r == ')' || r == '}' || r == ']':
			open := map[rune]rune{')': '(', '}': '{', ']': '['}[r]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return quote == 0 && len(stack) == 0
}

type grafanaTarget struct {
	RefID      string          `json:"refId"`
	Expr       string          `json:"expr"`
	Datasource json.RawMessage `json:"datasource"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	GridPos    *struct{ H, W int }
	Datasource json.RawMessage `json:"datasource"`
	Targets    []grafanaTarget `json:"targets"`
}

type grafanaDashboard struct {
	Title         string         `json:"title"`
	UID           string         `json:"uid"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// TestGrafanaDashboard loads monitoring/vflag-dashboard.json as Grafana
// would read it: every panel has its queries against the dashboard's data
// source variable, every variable it uses is defined, every metric it
// names is one vflag status exports, and every exported metric is shown.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("monitoring/vflag-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	var d grafanaDashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("vflag-dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion == 0 || len(d.Panels) == 0 {
		t.Fatalf("vflag-dashboard.json: title %q uid %q schemaVersion %d, %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	vars := map[string]bool{}
	var exprs []string
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" {
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Errorf("variable %s: query: %v", v.Name, err)
			}
			exprs = append(exprs, q.Query)
		}
	}
	if !vars["datasource"] {
		t.Error("vflag-dashboard.json has no datasource variable: it would be bound to one Grafana's data source")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: wants a title, a gridPos and targets", p.ID, p.Title)
		}
		if !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q: data source %s, want ${datasource}", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			if tg.RefID == "" || tg.Expr == "" {
				t.Errorf("panel %q: a target without refId or expr", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	metrics := exported(t)
	shown := map[string]bool{}
	for _, e := range exprs {
		if !balanced(e) {
			t.Errorf("query %q: unbalanced brackets or quotes", e)
		}
		for _, v := range regexp.MustCompile(`\$([a-z_]+)`).FindAllStringSubmatch(e, -1) {
			if !vars[v[1]] {
				t.Errorf("query %q uses $%s, which the dashboard does not define", e, v[1])
			}
		}
		for _, m := range metricRE.FindAllString(e, -1) {
			shown[m] = true
			if !metrics[m] {
				t.Errorf("query %q: %s is no metric vflag status exports", e, m)
			}
		}
	}
	for m := range metrics {
		if !shown[m] {
			t.Errorf("vflag status exports %s, which no panel of the dashboard shows", m)
		}
	}
}

// TestAlertRules loads monitoring/vflag-alerts.yml as Prometheus's rule
// files: every rule names metrics vflag status exports, has a severity, a
// summary and a runbook_url naming a heading of troubleshooting.md, and is
// in monitoring.md's alert table (and the table names no other).
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile("monitoring/vflag-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("vflag-alerts.yml: %v", err)
	}
	ts, err := os.ReadFile("troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := Anchors(string(ts))
	metrics := exported(t)
	var alerts []string
	counted := false
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || r.Expr == "" || !balanced(r.Expr) {
				t.Errorf("rule %q: expr %q", r.Alert, r.Expr)
			}
			if !slices.Contains([]string{"critical", "warning"}, r.Labels["severity"]) {
				t.Errorf("rule %s: severity %q (critical or warning)", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("rule %s: no summary", r.Alert)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], "docs/troubleshooting.md#")
			if !ok || !anchors[anchor] {
				t.Errorf("rule %s: runbook_url %q names no heading of docs/troubleshooting.md", r.Alert, r.Annotations["runbook_url"])
			}
			for _, m := range metricRE.FindAllString(r.Expr, -1) {
				if !metrics[m] {
					t.Errorf("rule %s: %s is no metric vflag status exports", r.Alert, m)
				}
			}
			counted = counted || strings.Contains(r.Expr, "vflag_group_problems")
		}
	}
	if !counted {
		t.Error("no rule fires on vflag_group_problems, the problems status counts")
	}
	md, err := os.ReadFile("monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	table := tableColumn(string(md), "| alert |")
	for _, a := range alerts {
		if !slices.Contains(table, a) {
			t.Errorf("monitoring.md's alert table lacks %s", a)
		}
	}
	for _, a := range table {
		if !slices.Contains(alerts, a) {
			t.Errorf("monitoring.md's alert table names %s, which vflag-alerts.yml has not", a)
		}
	}
}

// TestMetricsTable: monitoring.md's metrics table lists every metric vflag
// status exports, and no other.
func TestMetricsTable(t *testing.T) {
	md, err := os.ReadFile("monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, cell := range tableColumn(string(md), "| metric |") {
		for _, m := range metricRE.FindAllString(cell, -1) {
			listed[m] = true
		}
	}
	metrics := exported(t)
	for m := range metrics {
		if !listed[m] {
			t.Errorf("monitoring.md's metrics table lacks %s", m)
		}
	}
	for m := range listed {
		if !metrics[m] {
			t.Errorf("monitoring.md's metrics table lists %s, which vflag status does not export", m)
		}
	}
}

// tableColumn is the first column of the Markdown table whose header row
// starts with header, backquotes dropped.
func tableColumn(text, header string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, header) {
			continue
		}
		for _, row := range lines[i+2:] {
			cells := Cells(row)
			if cells == nil {
				break
			}
			out = append(out, strings.Trim(cells[0], "`"))
		}
	}
	return out
}
