package main

import (
	"fmt"

	"github.com/vflag/vflag/internal/apply"
	"github.com/vflag/vflag/internal/report"
)

// report prints the report of up, plan or down (internal/report) and
// turns the run's outcome into the command's error and exit code. An
// error before any step ran is failed's.
func (a *app) report(command string, res apply.Result) error {
	if !res.Ran {
		return a.failed(command, res.Err)
	}
	return a.printReport(report.Build(command, version, res.Events, res.JournalIDs, res.Err), res.Err)
}

// failed reports an error before any step ran: with -o json a report
// whose error is set (automation reads stdout), else the error alone.
func (a *app) failed(command string, err error) error {
	if a.v.GetString("output") == "json" {
		return a.printReport(report.Build(command, version, nil, nil, err), err)
	}
	return err
}

func (a *app) printReport(rep report.Report, runErr error) error {
	if a.v.GetString("output") == "json" {
		if err := rep.WriteJSON(a.stdout); err != nil {
			return err
		}
	} else {
		rep.WriteText(a.stdout)
	}
	switch {
	case runErr != nil && a.v.GetString("output") == "json":
		fmt.Fprintln(a.stderr, "vflag:", runErr)
		return exitError{code: 1}
	case runErr != nil:
		return runErr
	case rep.Changed && a.v.GetBool("detailed-exit-codes"):
		return exitError{code: 2}
	}
	return nil
}
