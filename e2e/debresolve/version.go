package main

import (
	"fmt"
	"regexp"
	"strings"
)

// compareVersions orders two Debian versions as dpkg does
// (`dpkg --compare-versions a lt b`): epoch numerically, then the upstream
// version and the Debian revision by dpkg's verrevcmp, where '~' sorts
// before everything, even the end of the string, and letters before other
// characters. It returns -1, 0 or 1.
func compareVersions(a, b string) int {
	ea, ua, ra := splitVersion(a)
	eb, ub, rb := splitVersion(b)
	if c := compareNumbers(ea, eb); c != 0 {
		return c
	}
	if c := verrevcmp(ua, ub); c != 0 {
		return c
	}
	return verrevcmp(ra, rb)
}

// splitVersion splits [epoch:]upstream[-revision]; the epoch defaults to 0,
// the revision to "" (dpkg's parseversion).
func splitVersion(v string) (epoch, upstream, revision string) {
	epoch = "0"
	if i := strings.IndexByte(v, ':'); i >= 0 {
		epoch, v = v[:i], v[i+1:]
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

// upstreamOf is the version without its epoch and Debian revision.
func upstreamOf(v string) string {
	_, u, _ := splitVersion(v)
	return u
}

func compareNumbers(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// order is dpkg's weight of one character of a non-digit run: '~' before
// the end of the string (0), letters by their code, anything else after
// all letters.
func order(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return 0
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		return int(c)
	case c == '~':
		return -1
	default:
		return int(c) + 256
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// verrevcmp compares alternating non-digit and digit runs, as dpkg does.
func verrevcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		for (i < len(a) && !isDigit(a[i])) || (j < len(b) && !isDigit(b[j])) {
			ac, bc := 0, 0
			if i < len(a) {
				ac = order(a[i])
			}
			if j < len(b) {
				bc = order(b[j])
			}
			if ac != bc {
				if ac < bc {
					return -1
				}
				return 1
			}
			i++
			j++
		}
		si := i
		for i < len(a) && isDigit(a[i]) {
			i++
		}
		sj := j
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		if c := compareNumbers(a[si:i], b[sj:j]); c != 0 {
			return c
		}
	}
	return 0
}

// relation is one "name (op version)" of a Depends field, or a stage's own
// rule written the same way.
type relation struct {
	name    string
	op      string // "", "<<", "<=", "=", ">=", ">>"
	version string
	// why says who asks for it: "linux-headers-X 1.2-3" or the stage rule.
	why string
}

func (r relation) String() string {
	if r.op == "" {
		return r.name
	}
	return fmt.Sprintf("%s (%s %s)", r.name, r.op, r.version)
}

// satisfiedBy reports whether version v of r.name meets r (Debian policy
// 7.1; the obsolete "<" and ">" mean "<=" and ">=").
func (r relation) satisfiedBy(v string) bool {
	c := compareVersions(v, r.version)
	switch r.op {
	case "":
		return true
	case "<<":
		return c < 0
	case "<=", "<":
		return c <= 0
	case "=":
		return c == 0
	case ">=", ">":
		return c >= 0
	case ">>":
		return c > 0
	}
	return false
}

var relationRE = regexp.MustCompile(`^([a-z0-9][a-z0-9.+-]*)(?::[a-z0-9-]+)?\s*(?:\(\s*(<<|<=|=|>=|>>|<|>)\s*([^\s)]+)\s*\))?\s*(?:\[[^\]]*\])?\s*(?:<[^>]*>\s*)*$`)

// parseDepends reads a Depends or Pre-Depends field into its groups of
// alternatives ("a (>= 1) | b" is one group of two).
func parseDepends(field, why string) ([][]relation, error) {
	var groups [][]relation
	for _, g := range strings.Split(field, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		var alts []relation
		for _, a := range strings.Split(g, "|") {
			m := relationRE.FindStringSubmatch(strings.TrimSpace(a))
			if m == nil {
				return nil, fmt.Errorf("cannot read the relation %q", strings.TrimSpace(a))
			}
			alts = append(alts, relation{name: m[1], op: m[2], version: m[3], why: why})
		}
		groups = append(groups, alts)
	}
	return groups, nil
}
