package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/teardown"
)

// liveLine shows, on a terminal, one line of progress for the long steps
// running now (VFs created n/N with their rate, the LAG wait against its
// bound, ofports n/N), rewritten in place ("\r", erase line) at most every
// liveEvery, and kept below the lines of finished steps: an event line
// clears it, prints, and draws it again. Nothing of it reaches a pipe, a
// file or -o json (the caller decides).
type liveLine struct {
	mu    sync.Mutex
	w     io.Writer
	keys  []string // in the order they appeared
	lines map[string]string
	shown bool
	last  time.Time
}

const (
	liveEvery = 100 * time.Millisecond
	liveWidth = 160 // the line is cut here: a wrapped line cannot be rewritten
)

func newLiveLine(w io.Writer) *liveLine { return &liveLine{w: w, lines: map[string]string{}} }

// set updates (line "" clears) one key's progress.
func (l *liveLine) set(key, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.lines[key]; !ok && line != "" {
		l.keys = append(l.keys, key)
	}
	if line == "" {
		delete(l.lines, key)
		for i, k := range l.keys {
			if k == key {
				l.keys = append(l.keys[:i], l.keys[i+1:]...)
				break
			}
		}
	} else {
		l.lines[key] = line
	}
	if line == "" || time.Since(l.last) >= liveEvery {
		l.draw()
	}
}

// event prints a finished step's line above the progress line.
func (l *liveLine) event(ev teardown.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	printProgress(l.w, ev)
	l.draw()
}

// done erases the progress line for good.
func (l *liveLine) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
}

func (l *liveLine) erase() {
	if l.shown {
		fmt.Fprint(l.w, "\r\033[K")
		l.shown = false
	}
}

func (l *liveLine) draw() {
	parts := make([]string, 0, len(l.keys))
	for _, k := range l.keys {
		parts = append(parts, l.lines[k])
	}
	s := strings.Join(parts, " | ")
	if len(s) > liveWidth {
		s = s[:liveWidth-3] + "..."
	}
	l.last = time.Now()
	if s == "" {
		l.erase()
		return
	}
	fmt.Fprint(l.w, "\r\033[K"+s)
	l.shown = true
}

// logWriter is stderr for the log: while a progress line is drawn, a log
// line goes above it (the line is erased, the log written, the line drawn
// again), not after its partial text.
type logWriter struct{ a *app }

func (w logWriter) Write(p []byte) (int, error) {
	if l := w.a.live; l != nil {
		return l.above(p)
	}
	return w.a.stderr.Write(p)
}

// above writes p (whole lines) above the progress line.
func (l *liveLine) above(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	n, err := l.w.Write(p)
	l.draw()
	return n, err
}
