package main

import (
	"math/rand"
	"os/exec"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"6.1.192-2", "6.1.192-3", -1},
		{"6.1.192-3", "6.1.176-1", 1},
		{"6.1.192-2", "6.1.192-2", 0},
		{"1.0~rc1-1", "1.0-1", -1},
		{"1.0", "1.0-0", 0},
		{"1:1.0", "2.0", 1},
		{"7.2.13+deb14", "7.2.13", 1},
		{"0.120+deb8u2", "0.120", 1},
		{"1.0a", "1.0+", -1},
		{"1.01", "1.1", 0},
		{"2.0~~", "2.0~", -1},
		{"10.0", "9.9", 1},
	} {
		if got := compareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := compareVersions(tc.b, tc.a); got != -tc.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

// TestCompareVersionsAgreesWithDpkg: random versions built from the
// characters that decide the order, compared by dpkg itself.
func TestCompareVersionsAgreesWithDpkg(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Fatalf("dpkg is on every Debian machine the bed builds on: %v", err)
	}
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	parts := []string{"0", "1", "9", "10", "01", "a", "b", "Z", "~", "+", ".", "~~", "deb", "192"}
	gen := func() string {
		v := []string{"", "1:", "2:"}[rng.Intn(3)] + []string{"1", "6", "10"}[rng.Intn(3)]
		for i := rng.Intn(5); i > 0; i-- {
			v += parts[rng.Intn(len(parts))]
		}
		if rng.Intn(2) == 0 {
			v += "-" + []string{"1", "2", "1~bpo", "0+deb12u1"}[rng.Intn(4)]
		}
		return v
	}
	for i := 0; i < 200; i++ {
		a, b := gen(), gen()
		want := 0
		if exec.Command(dpkg, "--compare-versions", a, "lt", b).Run() == nil {
			want = -1
		} else if exec.Command(dpkg, "--compare-versions", a, "gt", b).Run() == nil {
			want = 1
		}
		if got := compareVersions(a, b); got != want {
			t.Errorf("compareVersions(%q, %q) = %d, dpkg says %d", a, b, got, want)
		}
	}
}
