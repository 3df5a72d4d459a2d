package main

// logWriter is stderr for the log: while a progress line is drawn, a log
// line goes above it (the line is erased, the log written, the line drawn
// again), not after its partial text.
type logWriter struct{ a *app }

func (w logWriter) Write(p []byte) (int, error) {
	if l := w.a.live; l != nil {
		return l.Above(p)
	}
	return w.a.stderr.Write(p)
}
