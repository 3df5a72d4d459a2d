package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/vflag/vflag/internal/junit"
)

// ANSI colours of the text output.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[1;31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiGrey   = "\x1b[90m"
)

func statusColour(s Status) string {
	switch s {
	case Pass:
		return ansiGreen
	case Fail:
		return ansiRed
	case Warn:
		return ansiYellow
	default:
		return ansiGrey
	}
}

// WriteText prints the checks grouped by area, one line per check with its
// status word, the fix indented below every fail and warn, then the
// verdict. colour adds ANSI colours (for a terminal).
func (r *Report) WriteText(w io.Writer, colour bool) error {
	paint := func(code, s string) string {
		if !colour {
			return s
		}
		return code + s + ansiReset
	}
	groups := map[string]bool{}
	for _, c := range r.Checks {
		if c.Group != "" {
			groups[c.Group] = true
		}
	}
	width := 0
	for _, c := range r.Checks {
		if n := len(shortName(c)); n > width && n <= 28 {
			width = n
		}
	}
	var b strings.Builder
	for _, area := range Areas {
		first := true
		for _, c := range r.Checks {
			if c.Area != area {
				continue
			}
			if first {
				b.WriteString(paint(ansiBold, area) + "\n")
				first = false
			}
			name := shortName(c)
			if len(groups) > 1 && c.Group != "" {
				name += " [" + c.Group + "]"
			}
			word := fmt.Sprintf("%-4s", strings.ToUpper(string(c.Status)))
			first, rest, _ := strings.Cut(c.Detail, "\n")
			fmt.Fprintf(&b, "  %s  %-*s  %s\n", paint(statusColour(c.Status), word), width, name, first)
			for _, l := range strings.Split(rest, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					fmt.Fprintf(&b, "        %s\n", l)
				}
			}
			if c.Fix != "" && c.Status != Pass {
				for i, l := range strings.Split(strings.TrimRight(c.Fix, "\n"), "\n") {
					lead := "fix: "
					if i > 0 {
						lead = "     "
					}
					fmt.Fprintf(&b, "        %s%s\n", lead, l)
				}
			}
		}
	}
	verdict := paint(ansiGreen, "READY")
	if !r.Ready {
		verdict = paint(ansiRed, "NOT READY")
	}
	fmt.Fprintf(&b, "%s: %d failed, %s, %d passed, %d skipped\n", verdict, r.Count(Fail), plural(r.Count(Warn), "warning", "warnings"), r.Count(Pass), r.Count(Skip))
	if !r.Ready {
		b.WriteString("fix the failed checks above (each says how), then run vflag doctor again\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shortName drops the area prefix: "nic/eswitch p0" -> "eswitch p0".
func shortName(c Check) string {
	if s, ok := strings.CutPrefix(c.Name, c.Area+"/"); ok {
		return s
	}
	return c.Name
}

// WriteJSON prints {"checks":[{"name","status","detail","fix","area","group"}],"ready":bool}.
func (r *Report) WriteJSON(w io.Writer) error {
	out := *r
	if out.Checks == nil {
		out.Checks = []Check{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteJUnit writes the checks as JUnit XML (junitSuites).
func (r *Report) WriteJUnit(w io.Writer) error { return junit.Write(w, r.junitSuites()) }

// WriteJUnitFile writes the JUnit XML to path atomically (junit.WriteFile).
func (r *Report) WriteJUnitFile(path string) error { return junit.WriteFile(path, r.junitSuites()) }

// junitSuites are the checks as JUnit suites: one testsuite per area, one
// testcase per check; a fail is a failure (detail and fix), a skip is
// skipped, a warn passes with "WARN" and its fix in system-out.
func (r *Report) junitSuites() junit.Suites {
	out := junit.Suites{Name: "vflag doctor"}
	for _, area := range Areas {
		s := junit.Suite{Name: "vflag.doctor." + area, Time: "0.000"}
		for _, c := range r.Checks {
			if c.Area != area {
				continue
			}
			tc := junit.Case{Name: c.Name, Classname: s.Name, Time: "0.000"}
			switch c.Status {
			case Fail:
				tc.Failure = &junit.Message{Message: firstLine(c.Detail), Text: c.Detail + "\nfix: " + c.Fix}
				s.Failures++
			case Skip:
				tc.Skipped = &junit.Message{Message: firstLine(c.Detail)}
				s.Skipped++
			case Warn:
				tc.SystemOut = "WARN: " + c.Detail + "\nfix: " + c.Fix
			default:
				tc.SystemOut = c.Detail
			}
			s.Tests++
			s.Cases = append(s.Cases, tc)
		}
		if s.Tests > 0 {
			out.Add(s)
		}
	}
	return out
}
