// Package docs is vflag's documentation for operators (the Markdown files
// in this directory). The config reference's field table is read from
// configuration.md by gen-docs, which makes the vflag.yaml(5) man page of
// it, and by internal/config's tests, which hold it to the config's fields
// and defaults. The tests of this package hold troubleshooting.md to the
// checks doctor, status and validate report, and monitoring/ to the
// metrics status exports.
package docs

import (
	_ "embed"
	"fmt"
	"strings"
)

// Configuration is docs/configuration.md.
//
//go:embed configuration.md
var Configuration string

// Field is one row of the config reference: the field's path
// ("groups[].bond.mode"), its default ("-" when none), what changing it on
// a converged host costs (live, contained, disruptive, manual, none) and
// what it means. Default and Doc are Markdown.
type Field struct {
	Path, Default, Change, Doc string
}

// Changes are the costs a field's change column may name first.
var Changes = []string{"live", "contained", "disruptive", "manual", "none"}

// Fields reads the field table of configuration.md: the rows between the
// "<!-- fields" and "<!-- end fields -->" comments.
func Fields() ([]Field, error) {
	_, rest, ok := strings.Cut(Configuration, "\n<!-- fields")
	if !ok {
		return nil, fmt.Errorf("configuration.md: no <!-- fields ... --> comment before the field table")
	}
	table, _, ok := strings.Cut(rest, "\n<!-- end fields -->")
	if !ok {
		return nil, fmt.Errorf("configuration.md: no <!-- end fields --> after the field table")
	}
	lines := strings.Split(table, "\n")[1:] // the comment's own line
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "| field | default | change | meaning |") {
		return nil, fmt.Errorf("configuration.md: the field table does not start with | field | default | change | meaning |")
	}
	var out []Field
	for i, l := range lines[2:] {
		cells := Cells(l)
		if len(cells) != 4 {
			return nil, fmt.Errorf("configuration.md: field table row %d has %d cells, want 4: %s", i+1, len(cells), l)
		}
		path, ok := strings.CutPrefix(cells[0], "`")
		path, ok2 := strings.CutSuffix(path, "`")
		if !ok || !ok2 || path == "" {
			return nil, fmt.Errorf("configuration.md: field table row %d: the field %q is not in backquotes", i+1, cells[0])
		}
		out = append(out, Field{Path: path, Default: cells[1], Change: cells[2], Doc: cells[3]})
	}
	return out, nil
}

// Cells splits a Markdown table row into its cells, trimmed; "\|" is a
// pipe within a cell.
func Cells(row string) []string {
	row = strings.TrimSpace(row)
	if !strings.HasPrefix(row, "|") || !strings.HasSuffix(row, "|") || len(row) < 2 {
		return nil
	}
	row = row[1 : len(row)-1]
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}
