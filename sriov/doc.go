// Package sriov is the PCI side of SR-IOV: a PF's VFs, their PCI addresses,
// host drivers and the PF's autoprobe setting, all through sysfs behind a
// sysfs.FS value (never a global path).
//
// Ordering constraints (DESIGN.md section 2, steps 1, 2, 4 and 8):
//
//	a. sriov_drivers_autoprobe is set before VFs are created: it applies at
//	   the next VF enable, and a VF that got a driver must be unbound again.
//	b. Changing a non-zero sriov_numvfs needs a write of 0 first (EBUSY
//	   otherwise); SetNumVFs does that.
//	c. VF creation is asynchronous: WaitVFs waits, with a short bounded poll,
//	   until every virtfnN link exists.
//	d. VFs are unbound before the eswitch leaves legacy mode and before LAG
//	   activation; a host driver is bound only after LAG is active.
package sriov
