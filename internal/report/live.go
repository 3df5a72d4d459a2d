package report

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/teardown"
)

// Live shows, on a terminal, one line of progress for the long steps
// running now (VFs created n/N with their rate, the LAG wait against its
// bound, ofports n/N), rewritten in place ("\r", erase line) at most every
// liveEvery, and kept below the lines of finished steps: an event line
// clears it, prints, and draws it again. Nothing of it reaches a pipe, a
// file or -o json (the caller decides).
type Live struct {
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

// NewLive is a progress line on w (a terminal).
func NewLive(w io.Writer) *Live { return &Live{w: w, lines: map[string]string{}} }

// Set updates (line "" clears) one key's progress.
func (l *Live) Set(key, line string) {
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

// Event prints a finished step's line above the progress line.
func (l *Live) Event(ev teardown.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	Progress(l.w, ev)
	l.draw()
}

// Done erases the progress line for good.
func (l *Live) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
}

// Above writes p (whole lines, e.g. a log line) above the progress line:
// the line is erased, p written, the line drawn again.
func (l *Live) Above(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	n, err := l.w.Write(p)
	l.draw()
	return n, err
}

func (l *Live) erase() {
	if l.shown {
		fmt.Fprint(l.w, "\r\033[K")
		l.shown = false
	}
}

func (l *Live) draw() {
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
