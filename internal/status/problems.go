package status

// Problems beside Gather's. Boot failures: when vflag-pre.service or
// vflag.service failed in this boot (a PF that never appeared, a step that failed), every
// group gets a problem naming the unit and where its reason is (the
// journal), so the text output, the JSON and vflag_group_problems say so.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/vflag/vflag/teardown"
)

// The classes of the problems status finds itself. The others are named
// by the static check of vflag validate that failed (its Name): every
// problem line is "<class>: <reason>", and docs/troubleshooting.md has an
// entry for each class (make test holds it to this list).
const (
	ProblemJournal     = "journal"        // the journal cannot be read
	ProblemBoot        = "boot"           // a boot unit failed in this boot
	ProblemVFs         = "vfs"            // a PF's VFs cannot be listed
	ProblemDevlinkRate = "devlink rate"   // devlink's rate objects cannot be read
	ProblemDevlinkPort = "devlink port"   // devlink's ports cannot be read
	ProblemFlows       = "datapath flows" // ovs-vswitchd's datapath flows cannot be read
	ProblemNotUp       = "not up"         // never brought up, or brought down: the group's one problem
)

// problemLine is one problem: its class, then the reason.
func problemLine(class, format string, args ...any) string {
	return class + ": " + fmt.Sprintf(format, args...)
}

// bootUnits are the units `vflag install` and the package enable.
var bootUnits = []string{"vflag-pre.service", "vflag.service"}

// FailedBootUnits lists the boot units systemd reports failed, with their
// result ("vflag-pre.service (result exit-code)"): one `systemctl show` of
// both. Nothing without systemd or systemctl, or on a simulated host (it
// has no boot).
func FailedBootUnits(ctx context.Context, simulated bool) []string {
	if simulated {
		return nil
	}
	if fi, err := os.Stat("/run/systemd/system"); err != nil || !fi.IsDir() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	args := append([]string{"show", "-p", "Id", "-p", "ActiveState", "-p", "Result", "--"}, bootUnits...)
	b, err := exec.CommandContext(ctx, "systemctl", args...).Output()
	if err != nil {
		return nil
	}
	return failedUnits(string(b))
}

// failedUnits reads `systemctl show -p Id -p ActiveState -p Result` of
// several units: a block of NAME=VALUE lines per unit, the blocks
// separated by an empty line, each block's properties in systemd's order.
func failedUnits(out string) []string {
	var failed []string
	for _, block := range strings.Split(out, "\n\n") {
		props := map[string]string{}
		for _, l := range strings.Split(block, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				props[k] = v
			}
		}
		if props["ActiveState"] == "failed" && props["Id"] != "" {
			failed = append(failed, fmt.Sprintf("%s (result %s)", props["Id"], props["Result"]))
		}
	}
	return failed
}

// AddBootProblems gives every group a problem per failed boot unit.
func AddBootProblems(hs *HostStatus, failed []string) {
	for _, f := range failed {
		unit, _, _ := strings.Cut(f, " ")
		p := problemLine(ProblemBoot, "%s failed: the host was not brought up at boot (reason: journalctl -b -u %s)", f, unit)
		for i := range hs.Groups {
			hs.Groups[i].Problems = append(hs.Groups[i].Problems, p)
		}
	}
}

// AddJournalProblem gives every group a problem when the journal in
// stateDir cannot be read: down and a resuming up refuse to run on it, and
// what it records is unknown.
func AddJournalProblem(hs *HostStatus, stateDir string) {
	if _, err := teardown.OpenJournal(stateDir); err != nil {
		p := problemLine(ProblemJournal, "%v", err)
		for i := range hs.Groups {
			hs.Groups[i].Problems = append(hs.Groups[i].Problems, p)
		}
	}
}
