// Package apply runs `vflag up`, `vflag plan` and `vflag down` on an
// opened pipeline.Env: it takes the state directory's lock, opens the
// journal, runs the pipeline's preflight and steps through a
// teardown.Runner, and, after up, marks the boot gate ready and starts the
// domains the qemu hook deferred. It returns the runner's events for the
// caller to render (internal/report); flags, output and exit codes are
// cmd/vflag's.
//
// Ordering constraints:
//
//   - up waits for the PFs (bounded by pf_wait) before it takes the lock: at
//     boot the driver may probe them after udev started, and a vflag
//     waiting for hardware must not hold off another vflag.
//   - the lock comes before the journal is opened (up, down, sim reset):
//     the journal is read and written by one vflag at a time. plan takes no
//     lock: it only reads.
//   - the journal's entries are read before up runs: a step recorded there
//     is a change, any other an add (the report's action).
//   - Options.BeforeSteps runs after the lock, the journal and the
//     preflight, right before the first step: from then on an interrupt
//     means "finish the step, then roll back".
//   - down marks the boot gate not ready (the qemu hook then refuses
//     domains holding VFs) after taking the lock and before it opens the
//     journal and undoes anything.
//   - up marks the gate ready and starts the deferred domains only after
//     every step of a full-stage run succeeded (or succeeded degraded), never
//     for plan or --stage pre.
package apply
