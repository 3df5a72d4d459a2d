// Package hook is the libvirt qemu hook (/etc/libvirt/hooks/qemu.d/vflag,
// `vflag hook qemu`). libvirt runs it at every domain lifecycle event with
// the domain XML on stdin. It must never call back into libvirt (libvirtd
// waits for the hook: a call from it deadlocks), must be fast, must never
// fail a domain vflag does not manage, and must refuse (an error: non-zero
// exit, message on stderr) to start a domain whose managed VF is not ready.
//
// Which VFs are vflag's: the VFs of the PFs of the config's groups
// (pipeline.ResolveGroup) and of the PFs in the main journal (read-only and
// without its lock: up may hold it).
//
// What the hook changes for a domain goes through a teardown.Runner on the
// domain's own journal, STATE_DIR/hook/<pathsafe.Component(domain)>/journal.json,
// under that directory's lock, with the pipeline's kinds: the VF MAC is a
// sriov.vfmac step (Env.VFMACStep), a representor port the hook adds to the
// group's bridge an ovs.port step (Env.PortStep). So it is write-ahead like
// up: a hook killed between journaling and applying leaves a pending entry
// that release undoes. Release ("release end") is down of that journal, with
// the undo registry of pipeline.Env.Undoers; it needs no config. The
// directory is removed when its journal is empty.
//
// Prepare runs with NoRollback: on a refusal its changes stay journaled and
// libvirt's "release end", which libvirt runs after an aborted start, undoes
// them (the behaviour of the hook before the journal).
//
// Setting the PF and the representor up is a direct action, outside the
// journal: release never sets them down, since the PF serves other VFs and
// the representor's state is the host's, not the domain's.
//
// Compatibility: vflag releases before the per-domain journal kept the
// hook's changes in STATE_DIR/hook/<domain>.json (oldState). When that file
// exists, prepare and release first adopt its records into the domain's
// journal as the equivalent sriov.vfmac and ovs.port entries (journaled,
// then the file removed), then go on as usual.
package hook
