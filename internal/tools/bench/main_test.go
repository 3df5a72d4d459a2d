package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestReportExitsOneOnAnyMiss: make bench exits 1 when any target is
// missed, a measured one (MISS) as an asserted one (FAIL), and 0 when every
// target is met; rows without a target never count.
func TestReportExitsOneOnAnyMiss(t *testing.T) {
	for _, c := range []struct {
		name string
		rows []row
		want int
		says string
	}{
		{"all met", []row{ratioRow("teardown", "down", 3050*time.Millisecond, 3*time.Second, 1.03), {section: "s", what: "report only", status: "report"}}, 0, ""},
		{"a ratio missed", []row{ratioRow("teardown", "down", 3100*time.Millisecond, 3*time.Second, 1.03)}, 1, "targets missed: teardown / down"},
		{"a no-op missed", []row{noopRow("no-op", "up", result{wall: 51 * time.Millisecond})}, 1, "targets missed: no-op / up"},
		{"an asserted target missed", []row{{section: "transitions", what: "VLAN", measured: "61 ms", target: "< 60 ms", status: "FAIL"}}, 1, "FAILED (asserted): transitions / VLAN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &bencher{}
			for _, r := range c.rows {
				b.add(r)
			}
			var out bytes.Buffer
			if got := b.report(&out); got != c.want {
				t.Errorf("exit %d, want %d\n%s", got, c.want, out.String())
			}
			if c.says != "" && !strings.Contains(out.String(), c.says) {
				t.Errorf("output does not say %q:\n%s", c.says, out.String())
			}
		})
	}
}
