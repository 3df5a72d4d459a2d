// Package report is what `vflag up`, `vflag plan` and `vflag down` print:
// the report of a run's steps (text, or JSON with a changed field for
// automation), the one-line-per-step progress on a terminal and the live
// progress line kept below it. It only renders: it takes the runner's
// events and writes to the writers it is given; the exit codes and the
// choice of output are cmd/vflag's.
package report
