// Package suggest finds the name a misspelt one was meant to be: a config
// key, a PF's netdev.
package suggest

import (
	"slices"
	"strings"
)

// Nearest returns the candidate closest to s, compared without case by
// edit distance (an insertion, a deletion, a substitution or two adjacent
// letters swapped is one edit), when it is close enough to be meant: one
// edit for names of up to 5 letters, two for longer ones. None when
// several are as close (which was meant is a guess), or when s is itself
// a candidate.
func Nearest(s string, candidates []string) (string, bool) {
	best, bestD, tie := "", -1, false
	for _, c := range slices.Compact(slices.Sorted(slices.Values(candidates))) {
		d := distance(strings.ToLower(s), strings.ToLower(c))
		switch {
		case d == 0:
			return "", false
		case bestD < 0 || d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD:
			tie = true
		}
	}
	limit := 1
	if len([]rune(s)) > 5 {
		limit = 2
	}
	if bestD < 0 || bestD > limit || tie {
		return "", false
	}
	return best, true
}

// distance is the optimal string alignment distance of a and b.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
