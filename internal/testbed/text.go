package testbed

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// NormalizeXML drops the empty <metadata/> libvirt leaves after the last
// entry is removed, so a domain's XML compares equal to its baseline.
func NormalizeXML(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "<metadata/>" {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// DiffText lists, line by line, where two dumps differ ("- a" / "+ b").
func DiffText(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, "- "+x, "+ "+y)
		}
	}
	return strings.Join(out, "\n")
}

// LineDiff lists the lines of want that got lacks ("- ") and those of got
// that want lacks ("+ "), each as often as it is missing, at most n of each
// side: for states whose lines shift, where DiffText's line-by-line
// comparison shows every line after the first difference.
func LineDiff(want, got string, n int) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var out []string
	side := func(text, mark string, have, in map[string]int) {
		k := 0
		seen := map[string]bool{}
		for _, l := range strings.Split(text, "\n") {
			if have[l] < in[l] && !seen[l] {
				seen[l] = true
				if k++; k <= n {
					out = append(out, mark+l)
				}
			}
		}
		if k > n {
			out = append(out, fmt.Sprintf("  ... %d more", k-n))
		}
	}
	side(want, "- ", g, w)
	side(got, "+ ", w, g)
	return strings.Join(out, "\n")
}

// Seed is a test's seed for its random choices: the environment variable
// env when set (to replay a run), else the clock; it is logged with how to
// replay it.
func Seed(t TB, env string) uint64 {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv(env); s != "" {
		if _, err := fmt.Sscan(s, &seed); err != nil {
			t.Fatalf("%s: %v", env, err)
		}
	}
	t.Logf("seed %d (%s=%d replays it)", seed, env, seed)
	return uint64(seed)
}
