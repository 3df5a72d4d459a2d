package validate

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// LiveView prints, on a terminal, one line per tick rewritten in place:
// each slave's packet and bit rate.
func LiveView(w io.Writer) func(Tick) {
	return func(t Tick) {
		names := make([]string, 0, len(t.Rates))
		for n := range t.Rates {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			r := t.Rates[n]
			parts = append(parts, fmt.Sprintf("%s %8.0f pkt/s %10s", n, r.PacketsPerSec, formatRate(r.BitsPerSec)))
		}
		fmt.Fprintf(w, "\r\033[K[%5.1fs] %s", t.At.Seconds(), strings.Join(parts, " | "))
	}
}

func formatRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gb/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2f Mb/s", bps/1e6)
	}
	return fmt.Sprintf("%.1f kb/s", bps/1e3)
}

// Throttle calls fn at most once per period of the ticks' time (the live
// view of a finely sampled failover check).
func Throttle(fn func(Tick), period time.Duration) func(Tick) {
	var last time.Duration = -period
	return func(t Tick) {
		if t.At-last >= period {
			last = t.At
			fn(t)
		}
	}
}
