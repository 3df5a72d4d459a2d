package pipeline

import (
	"fmt"
	"time"
)

// progressEvery is how often a wait without events of its own (the LAG)
// reports its elapsed time.
const progressEvery = 250 * time.Millisecond

// progress reports a live line for a long step under key (Env.Progress; a
// terminal renders it, nothing else does). An empty line clears the key.
func (e *Env) progress(key, format string, args ...any) {
	if e.Progress == nil {
		return
	}
	line := ""
	if format != "" {
		line = fmt.Sprintf(format, args...)
	}
	e.Progress(key, line)
}

// ticking reports line(elapsed) under key every progressEvery until stop,
// which clears it.
func (e *Env) ticking(key string, line func(elapsed time.Duration) string) (stop func()) {
	if e.Progress == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			e.Progress(key, line(time.Since(start)))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		e.Progress(key, "")
	}
}

// vfCreationLine is the VF creation progress line: "VFs 23/64 on X (12/s, about 3s left)".
func vfCreationLine(dev string, have, want int, elapsed time.Duration) string {
	line := fmt.Sprintf("%s: VFs %d/%d", dev, have, want)
	if have > 0 && elapsed > 0 {
		rate := float64(have) / elapsed.Seconds()
		left := time.Duration(float64(want-have) / rate * float64(time.Second))
		line += fmt.Sprintf(" (%.0f/s, about %s left)", rate, left.Round(100*time.Millisecond))
	}
	return line
}
