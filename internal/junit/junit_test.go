package junit

import (
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	var d Suites
	d.Name = "vflag x"
	d.Add(Suite{Name: "a", Tests: 2, Failures: 1, Time: "0.500", Cases: []Case{
		{Name: "c1", Classname: "a", Time: "0.250", Failure: &Message{Message: "m", Text: "m <&> more"}},
		{Name: "c2", Classname: "a", Time: "0.250", SystemOut: "ok"},
	}})
	d.Add(Suite{Name: "b", Tests: 1, Skipped: 1, Time: "0.000", Cases: []Case{
		{Name: "c3", Classname: "b", Time: "0.000", Skipped: &Message{Message: "why"}},
	}})
	var b strings.Builder
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	want := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="vflag x" tests="3" failures="1" skipped="1">
  <testsuite name="a" tests="2" failures="1" skipped="0" time="0.500">
    <testcase name="c1" classname="a" time="0.250">
      <failure message="m">m &lt;&amp;&gt; more</failure>
    </testcase>
    <testcase name="c2" classname="a" time="0.250">
      <system-out>ok</system-out>
    </testcase>
  </testsuite>
  <testsuite name="b" tests="1" failures="0" skipped="1" time="0.000">
    <testcase name="c3" classname="b" time="0.000">
      <skipped message="why"></skipped>
    </testcase>
  </testsuite>
</testsuites>
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
