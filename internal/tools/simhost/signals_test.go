package main

import (
	"os"
	"os/signal"
	"slices"
	"syscall"
	"testing"
)

// TestStopSignalsUnderNohup: SIGTERM (what make passes on) and SIGINT stop
// simhost; SIGHUP does too, unless the process was started with it ignored
// (nohup make simhost ... &): then a closed terminal leaves it running.
func TestStopSignalsUnderNohup(t *testing.T) {
	if got := stopSignals(); !slices.Equal(got, []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}) {
		t.Errorf("without nohup: %v", got)
	}
	signal.Ignore(syscall.SIGHUP)
	defer signal.Reset(syscall.SIGHUP)
	if got := stopSignals(); slices.Contains(got, os.Signal(syscall.SIGHUP)) || !slices.Contains(got, os.Signal(syscall.SIGTERM)) {
		t.Errorf("under nohup (SIGHUP ignored): %v, want SIGTERM and SIGINT only", got)
	}
}
