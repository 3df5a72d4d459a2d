// Package validate holds the checks of `vflag validate`: static checks of
// a provisioned VF-LAG group (eswitch modes, bond, hardware LAG, OVS ports,
// hw-offload and the kernel datapath's upcalls, libvirt attachments, RDMA
// devices, RoCE mode, GIDs), the
// traffic, failover and RDMA traffic checks, and the RoCE settings of
// `vflag roce`. It reads the host through eswitch.Kernel and sysfs.FS, so it
// runs the same on a real host and on the simulated one; OVS and libvirt
// facts are handed in by the caller. It knows nothing of viper or cobra.
package validate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vflag/vflag/internal/junit"
)

// Verdict is a check's outcome.
type Verdict string

// Pass and Fail are judgements. Skip is a check that applies to this
// group's config (or was asked for by a flag) and could not run here: it
// fails the run unless --allow-skip. NA (not applicable) is a check the
// config does not call for (no RoCE configured and no RDMA device,
// hw-offload off, a userspace datapath): reported, never failing the run.
const (
	Pass Verdict = "pass"
	Fail Verdict = "fail"
	Skip Verdict = "skip" // applies, could not run here (never a guessed pass)
	NA   Verdict = "n/a"  // does not apply to this config
)

// Check is one verdict.
type Check struct {
	Name     string        `json:"name"`
	Verdict  Verdict       `json:"verdict"`
	Detail   string        `json:"detail"`
	Data     any           `json:"data,omitempty"` // structured facts (GID table, shares, bandwidth)
	Duration time.Duration `json:"duration_ns,omitempty"`
}

func pass(name, format string, args ...any) Check {
	return Check{Name: name, Verdict: Pass, Detail: fmt.Sprintf(format, args...)}
}

func failed(name, format string, args ...any) Check {
	return Check{Name: name, Verdict: Fail, Detail: fmt.Sprintf(format, args...)}
}

func skip(name, format string, args ...any) Check {
	return Check{Name: name, Verdict: Skip, Detail: fmt.Sprintf(format, args...)}
}

func notApplicable(name, format string, args ...any) Check {
	return Check{Name: name, Verdict: NA, Detail: fmt.Sprintf(format, args...)}
}

// GroupReport is every check of one group.
type GroupReport struct {
	Group  string  `json:"group"`
	Kind   string  `json:"kind,omitempty"` // "bond" for vflag validate --bond (Group is the bond); "" a config group
	Checks []Check `json:"checks"`
}

// Report is `vflag validate`'s result.
type Report struct {
	Groups  []GroupReport `json:"groups"`
	Passed  int           `json:"passed"`
	Failed  int           `json:"failed"`
	Skipped int           `json:"skipped"`
	// NotApplicable counts the n/a checks (never failing the run).
	NotApplicable int `json:"not_applicable"`
	// OK is true only when no check failed or was skipped (with AllowSkip:
	// none failed); n/a checks do not count.
	OK        bool `json:"ok"`
	AllowSkip bool `json:"allow_skip,omitempty"`
}

// Tally counts the verdicts and sets OK.
func (r *Report) Tally() {
	r.Passed, r.Failed, r.Skipped, r.NotApplicable = 0, 0, 0, 0
	for _, g := range r.Groups {
		for _, c := range g.Checks {
			switch c.Verdict {
			case Pass:
				r.Passed++
			case Fail:
				r.Failed++
			case NA:
				r.NotApplicable++
			default: // Skip, and anything unknown: never a silent pass
				r.Skipped++
			}
		}
	}
	r.OK = r.Failed == 0 && (r.Skipped == 0 || r.AllowSkip)
}

// WriteText prints one line per check, details indented below when they
// span several lines.
func (r *Report) WriteText(w io.Writer) {
	for _, g := range r.Groups {
		kind := g.Kind
		if kind == "" {
			kind = "group"
		}
		fmt.Fprintf(w, "%s %s\n", kind, g.Group)
		for _, c := range g.Checks {
			first, rest, _ := strings.Cut(c.Detail, "\n")
			fmt.Fprintf(w, "  %-4s  %-36s %s\n", strings.ToUpper(string(c.Verdict)), c.Name, first)
			if rest != "" {
				for _, l := range strings.Split(rest, "\n") {
					fmt.Fprintf(w, "        %s\n", l)
				}
			}
		}
	}
	verdict := "OK"
	if !r.OK {
		verdict = "NOT OK"
	}
	allow := ""
	if r.Skipped > 0 && r.AllowSkip && r.Failed == 0 {
		allow = " (skips allowed: --allow-skip)"
	}
	fmt.Fprintf(w, "%s: %d passed, %d failed, %d skipped, %d n/a%s\n", verdict, r.Passed, r.Failed, r.Skipped, r.NotApplicable, allow)
}

// WriteJSON prints the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteJUnit writes the report as JUnit XML (junitSuites).
func (r *Report) WriteJUnit(w io.Writer) error { return junit.Write(w, r.junitSuites()) }

// WriteJUnitFile writes the JUnit XML to path atomically (junit.WriteFile).
func (r *Report) WriteJUnitFile(path string) error { return junit.WriteFile(path, r.junitSuites()) }

// junitSuites are the report as JUnit suites: one testsuite per group, one
// testcase per check.
func (r *Report) junitSuites() junit.Suites {
	out := junit.Suites{Name: "vflag validate"}
	for _, g := range r.Groups {
		s := junit.Suite{Name: "vflag.validate." + g.Group}
		var total time.Duration
		for _, c := range g.Checks {
			total += c.Duration
			tc := junit.Case{Name: c.Name, Classname: "vflag.validate." + g.Group, Time: secs(c.Duration)}
			first, _, _ := strings.Cut(c.Detail, "\n")
			switch c.Verdict {
			case Fail:
				tc.Failure = &junit.Message{Message: first, Text: c.Detail}
				s.Failures++
			case Skip:
				tc.Skipped = &junit.Message{Message: first}
				s.Skipped++
			case NA:
				// JUnit has no "not applicable": a skipped testcase whose
				// message says so.
				tc.Skipped = &junit.Message{Message: "n/a: " + first}
				s.Skipped++
			default:
				tc.SystemOut = c.Detail
			}
			s.Tests++
			s.Cases = append(s.Cases, tc)
		}
		s.Time = secs(total)
		out.Add(s)
	}
	return out
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
