package sim

import (
	"fmt"
	"syscall"
)

// opError is a failure of the model: the errno the kernel returns and, where
// the kernel gives one, its message (netlink extack or the log line).
type opError struct {
	errno    syscall.Errno
	msg      string
	sentinel error // eswitch.ErrLinkNotFound or eswitch.ErrNotSupported, or nil
}

func fail(errno syscall.Errno, format string, args ...any) *opError {
	return &opError{errno: errno, msg: fmt.Sprintf(format, args...)}
}

func (e *opError) with(sentinel error) *opError {
	e.sentinel = sentinel
	return e
}

func (e *opError) Error() string {
	if e.msg == "" {
		return e.errno.Error()
	}
	return e.msg + ": " + e.errno.Error()
}

func (e *opError) Unwrap() []error {
	if e.sentinel != nil {
		return []error{e.errno, e.sentinel}
	}
	return []error{e.errno}
}
