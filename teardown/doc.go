// Package teardown is vflag's change engine: the Step contract, the
// write-ahead journal, the state-directory lock and the Runner that applies
// steps, rolls them back on failure and undoes them on `vflag down`.
//
// # The step contract
//
// A Step changes one thing on the host, named by a stable ID
// ("eswitch.mode/pci/0000:61:00.0") and a Kind ("eswitch.mode").
//
//   - Check only reads. It reports whether the host differs from the target
//     (Change.Needed), a human summary, and a Record: a JSON-marshalable value
//     holding the target and the prior state, everything an Undoer needs to
//     put the host back without the config.
//   - Apply is idempotent: it converges the host to the target and writes
//     nothing when the host is already there.
//   - The Undoer registered for the Kind restores the prior state from the
//     Record alone. It is repeatable and tolerant: a resource that is already
//     gone, or a change that never happened (the entry was journaled but the
//     process died before Apply wrote anything), is success. It must never
//     touch what the Record does not say vflag changed.
//
// This is the contract CNI plugins have for DEL: undo may be called more
// than once, after a partial apply, or for something already cleaned up.
//
// # Ordering constraints
//
//  1. Write-ahead: an entry is persisted as "pending", with the prior state
//     captured by Check, before Apply runs; it is marked "applied" (and
//     persisted again) only after Apply returned. A crash at any point leaves
//     a journal from which Down can restore the host: a pending entry is
//     undone like an applied one, because its Apply may have half-happened.
//  2. Every journal mutation that journals a change is durable before it
//     returns: the journal is written to a temp file in the same directory,
//     fsynced, renamed over journal.json, and the directory is fsynced. A
//     removal of undone entries, and an entry's mark as applied, skip the
//     directory's fsync and are written behind, by a goroutine, while the
//     next undo or step runs: a crash may bring the journal from before
//     back (whole, never a torn file), undo is repeatable and a pending
//     entry is treated as an applied one; the next durable write includes
//     and makes them durable, the file never goes back to an older state,
//     and Journal.Flush (Down, and apply.Up and the hook at a run's end,
//     before the lock is released) waits for them and reports a failed
//     write. An empty journal removes the file. A corrupt journal is an
//     error, never an empty journal.
//  3. The first capture wins for down: when a step must be applied again
//     (resume after a kill, a config change, or drift after an earlier run)
//     its existing entry keeps its original Record, the state from before
//     vflag ever touched the host, and its position in the journal. The run
//     keeps its own capture beside it for its rollback (Entry.Open: what it
//     found before its change, and the entry as it was before the run).
//  4. Undo runs in exact reverse of journal order (an entry the Runner's
//     Moot names moot is undone by a later entry's undo instead: a PF's
//     representors go with its return to legacy). The caller
//     (internal/pipeline, run by internal/apply) passes steps to the Runner
//     in the pipeline order of DESIGN.md §2, so
//     reverse order detaches from domains before OVS rows are removed, deletes
//     the bond before the eswitch goes back to legacy, sets numvfs to 0 only
//     after that, and restores legacy settings last.
//  5. Steps passed to one Runner.Do call must be independent of each other
//     (for example VF creation on the two PFs of a NIC). They are checked and
//     applied concurrently; their pending entries are written in one journal
//     write, in argument order, before any of them applies.
//  6. A host that already matches the target produces no journal write at
//     all: a converged re-run leaves journal.json (and its mtime) untouched.
//  7. Only one vflag changes a host at a time: AcquireLock takes an
//     exclusive, non-blocking flock on <stateDir>/lock and fails fast when
//     another process holds it.
//
// # Failure handling
//
// A rollback returns the host to the state it had before the run, not to
// the state before the first up (that is down's). Every entry a run
// creates, changes again or removes is open (Entry.Open) until the run
// ends (Journal.Settle, which the caller calls once the run succeeded): it
// keeps what the run found before its change (Runner.Prior, the captures a
// plan pass took before any write; else the forward Check's while the run
// had written nothing the step depends on) and the entry as it was. A prune
// (Prune) marks its entries removed instead of dropping them.
//
// When a Check or Apply of a Do call fails (or the caller's own step, Fail;
// or an interrupt cancels the run), the Runner waits for the other steps of
// that call, then (unless NoRollback) rolls back every open entry in
// reverse, pending ones included:
//
//   - an entry the run created is undone from its record and leaves the
//     journal;
//   - one it changed again is undone from the run's capture and becomes
//     the entry it was before the run;
//   - what an undo cannot put back is done again by Redo after the undos:
//     an entry without a capture (Change.Rollback RollbackRedo: the undo of
//     a bond's record deletes the bond, one whose options changed is put
//     back by setting them again), one the run removed, and what a change
//     destroyed beside its own object (RollbackUndoRedo: a numvfs change
//     makes every VF again).
//
// Entries of runs that ended stay as they are. An entry whose undo or redo
// fails stays open, and so do those a rollback cut short (Abort: a second
// interrupt) or never started (NoRollback, a kill): the next rollback, of a
// later run that fails, finishes them, so that the host returns to the
// state before the first run that did not end; a later run that succeeds
// ends them. Down undoes every entry in reverse from its record, open ones
// and removed ones too (an undo is repeatable), best-effort: a failed undo
// keeps its entry for a later Down and the others continue. Both are
// repeatable; an empty or missing journal is success.
package teardown
