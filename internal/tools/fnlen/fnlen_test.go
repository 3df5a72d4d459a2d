package main

import "testing"

// TestNoLongProductFunction: no product function is over 100 lines
// (issue 24); a new one fails here with its name.
func TestNoLongProductFunction(t *testing.T) {
	long, err := Long("../../..", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range long {
		t.Errorf("%s %s: %d lines (split it along its concerns)", f.File, f.Name, f.Lines)
	}
}

// TestLongFindsOne: the measure sees a long function (so the test above
// can fail).
func TestLongFindsOne(t *testing.T) {
	long, err := Long("../../..", 60)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) == 0 {
		t.Fatal("no function over 60 lines found: the walk reads nothing")
	}
}
