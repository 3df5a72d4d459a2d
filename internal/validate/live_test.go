package validate

import (
	"strings"
	"testing"
	"time"
)

func TestLiveView(t *testing.T) {
	var b strings.Builder
	LiveView(&b)(Tick{At: 1500 * time.Millisecond, Rates: map[string]Rate{
		"p1": {PacketsPerSec: 10, BitsPerSec: 2.5e9},
		"p0": {PacketsPerSec: 1000, BitsPerSec: 3e6},
	}})
	want := "\r\x1b[K[  1.5s] p0     1000 pkt/s  3.00 Mb/s | p1       10 pkt/s  2.50 Gb/s"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestThrottle(t *testing.T) {
	var seen []time.Duration
	f := Throttle(func(t Tick) { seen = append(seen, t.At) }, time.Second)
	for _, at := range []time.Duration{0, 300 * time.Millisecond, time.Second, 1900 * time.Millisecond, 2 * time.Second} {
		f(Tick{At: at})
	}
	if got, want := len(seen), 3; got != want || seen[1] != time.Second || seen[2] != 2*time.Second {
		t.Errorf("throttled ticks %v, want 0s 1s 2s", seen)
	}
}
