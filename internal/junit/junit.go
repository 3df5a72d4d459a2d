// Package junit writes JUnit XML, the report format CI systems read: one
// testsuites document of testsuites of testcases. vflag doctor and vflag
// validate --junit build their suites and write them here; which check is
// a failure or skipped is theirs.
package junit

import (
	"bytes"
	"encoding/xml"
	"io"

	"github.com/vflag/vflag/internal/atomicfile"
)

// Suites is the document: its counts are the sums of its suites'.
type Suites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []Suite  `xml:"testsuite"`
}

// Suite is one testsuite; Time is in seconds ("1.250").
type Suite struct {
	Name     string `xml:"name,attr"`
	Tests    int    `xml:"tests,attr"`
	Failures int    `xml:"failures,attr"`
	Skipped  int    `xml:"skipped,attr"`
	Time     string `xml:"time,attr"`
	Cases    []Case `xml:"testcase"`
}

// Case is one testcase: passed, or with a Failure or Skipped message.
type Case struct {
	Name      string   `xml:"name,attr"`
	Classname string   `xml:"classname,attr"`
	Time      string   `xml:"time,attr"`
	Failure   *Message `xml:"failure,omitempty"`
	Skipped   *Message `xml:"skipped,omitempty"`
	SystemOut string   `xml:"system-out,omitempty"`
}

// Message is a failure's or a skip's message attribute and text.
type Message struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// Add appends s and adds its counts to the document's.
func (d *Suites) Add(s Suite) {
	d.Tests += s.Tests
	d.Failures += s.Failures
	d.Skipped += s.Skipped
	d.Suites = append(d.Suites, s)
}

// Write writes the document: the XML header, the indented document, a
// final newline.
func Write(w io.Writer, d Suites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(d); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteFile writes the document to path atomically: a temp file in the
// same directory, fsync, rename, fsync of the directory.
func WriteFile(path string, d Suites) error {
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o644)
}
