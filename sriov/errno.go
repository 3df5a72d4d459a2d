package sriov

import "syscall"

// errNoDev is what unbind answers when the device is not bound to that driver.
var errNoDev = syscall.ENODEV
