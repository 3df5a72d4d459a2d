// Package bootgate keeps the domains that hold vflag's VFs from starting
// before `vflag up` has brought the VF-LAG up in the current boot.
//
// At boot libvirtd autostarts domains when it starts, and vflag.service
// runs after libvirtd (its attachments need libvirt): an autostarted domain
// would bind its VF to vfio-pci before the bond and the hardware LAG exist,
// against DESIGN.md step 8 (host drivers strictly after LAG). So:
//
//  1. `vflag up` (stage all) marks the state directory ready for this boot
//     (STATE_DIR/ready holds the kernel's boot id) once every step is in
//     place, then starts the domains deferred in this boot;
//  2. the qemu hook, for a domain holding one of vflag's VFs while the
//     state directory is not ready for this boot, refuses the start: an
//     autostarted domain is recorded as deferred (STATE_DIR/deferred/<domain>,
//     with the boot id), a domain started by hand is told to wait for up;
//  3. `vflag down` clears the mark first.
//
// Ordering: the hook records the deferral before it reads the mark again,
// and up writes the mark before it reads the deferrals, so at least one of
// them sees the other (a domain is never deferred and forgotten). A boot id
// from an earlier boot counts as absent: the marks need no clean-up at boot.
package bootgate
