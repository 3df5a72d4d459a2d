package sim

import "testing"

func TestKstrtou16(t *testing.T) {
	for in, want := range map[string]int{"4": 4, "4\n": 4, "+4": 4, "0x1b": 27, "010": 8, "0": 0, "0xb": 11,
		"4\x00": 4, "0x10\n\x00junk": 16} { // the C string ends at the NUL (FuzzParseKstrtou16)
		if got, ok := parseKstrtou16(in); !ok || got != want {
			t.Errorf("%q: %d %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "\n", " 4", "4 ", "0b1", "0o7", "1_0", "-1", "65536", "4\n\n", "x"} {
		if got, ok := parseKstrtou16(in); ok {
			t.Errorf("%q accepted as %d", in, got)
		}
	}
}
