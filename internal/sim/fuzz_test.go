package sim

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// kstrtou16Ref is lib/kstrtox.c's kstrtou16(s, 0, &v) written out as the
// C reads it: the string ends at its first NUL; an optional '+'; base 16
// after "0x" followed by a hex digit, 8 after a leading '0', else 10; at
// least one digit; one optional '\n'; nothing after.
func kstrtou16Ref(s string) (int, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimPrefix(s, "+")
	at := func(i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	lower := func(c byte) byte { return c | 0x20 }
	isXDigit := func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= lower(c) && lower(c) <= 'f' }
	base := uint64(10)
	if at(0) == '0' {
		base = 8
		if lower(at(1)) == 'x' && isXDigit(at(2)) {
			base = 16
			s = s[2:]
		}
	}
	var v uint64
	n := 0
	for ; n < len(s); n++ {
		c := s[n]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= lower(c) && lower(c) <= 'f':
			d = uint64(lower(c)-'a') + 10
		default:
			d = 99
		}
		if d >= base {
			break
		}
		v = v*base + d
		if v > 0xffff {
			return 0, false // ERANGE
		}
	}
	if n == 0 {
		return 0, false
	}
	rest := strings.TrimPrefix(s[n:], "\n")
	if rest != "" {
		return 0, false
	}
	return int(v), true
}

// FuzzParseKstrtou16: the simulated sysfs reads a u16 exactly as the
// kernel's kstrtou16 does (kstrtou16Ref), and what it reads it reads back
// from its decimal, hex and octal forms.
func FuzzParseKstrtou16(f *testing.F) {
	for _, s := range []string{"4", "4\n", "+4", "0x1b", "0X1B", "010", "0", "0xb", "", "\n", " 4", "4 ", "0b1", "0o7", "1_0", "-1",
		"65535", "65536", "4\n\n", "x", "0x", "0xg", "08", "++1", "+0x10\n", "00000000000000000000001", "4\x00", "99999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseKstrtou16(s)
		want, wantOK := kstrtou16Ref(s)
		if ok != wantOK || got != want {
			t.Fatalf("parseKstrtou16(%q) = %d, %v; the kernel reads %d, %v", s, got, ok, want, wantOK)
		}
		if !ok {
			return
		}
		for _, form := range []string{strconv.Itoa(got), "0x" + strconv.FormatInt(int64(got), 16), "0" + strconv.FormatInt(int64(got), 8), "+" + strconv.Itoa(got) + "\n"} {
			if v, ok := parseKstrtou16(form); !ok || v != got {
				t.Fatalf("parseKstrtou16(%q) = %d, %v; want %d", form, v, ok, got)
			}
		}
	})
}

// FuzzParseBondOpt: for every option the model writes, a value parseBondOpt
// accepts is in the option's table or its range, and reads the same
// written as a decimal; each table name (and "default") reads its value,
// whatever follows it after white space.
func FuzzParseBondOpt(f *testing.F) {
	for _, s := range []string{"802.3ad", "4", "4\n", " 4 ", "active-backup 1", "default", "fast\n", "100", "2147483647", "2147483648", "   ",
		"", "layer3+4", "1 2", "18446744073709551616", "maxval", "off", "x\ny", "\t3\v", strings.Repeat("a", 40)} {
		f.Add(s)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n, o := range bondOpts {
			if !o.raw && !yield(n) {
				return
			}
		}
	})
	f.Fuzz(func(t *testing.T, s string) {
		for _, name := range names {
			o := bondOpts[name]
			v, ok := parseBondOpt(o, s)
			if !ok {
				continue
			}
			inTable := slices.ContainsFunc(o.values, func(r optValue) bool { return r.value == v })
			var lo, hi uint64
			hasMax := false
			for _, r := range o.values {
				if r.min {
					lo = r.value
				}
				if r.max {
					hi, hasMax = r.value, true
				}
			}
			if !inTable && !(hasMax && lo <= v && v <= hi) {
				t.Fatalf("%s: parseBondOpt(%q) = %d: neither in the table nor in range", name, s, v)
			}
			if back, ok := parseBondOpt(o, strconv.FormatUint(v, 10)); !ok || back != v {
				t.Fatalf("%s: parseBondOpt(%q) = %d, but %d reads %d, %v", name, s, v, v, back, ok)
			}
		}
		tok, rest, _ := strings.Cut(strings.TrimLeft(s, " \t"), " ")
		for _, name := range names {
			o := bondOpts[name]
			for _, r := range o.values {
				if tok == r.name && !strings.Contains(tok, "\n") || tok == "default" && r.def && !strings.Contains(tok+rest, "\n") {
					if v, ok := parseBondOpt(o, tok+" "+rest); !ok || v != r.value {
						t.Fatalf("%s: parseBondOpt(%q) = %d, %v; want %s's %d", name, tok+" "+rest, v, ok, r.name, r.value)
					}
				}
			}
		}
	})
}
