package eswitch

import (
	"encoding/binary"
	"fmt"
	"syscall"
)

// parseAttrs splits netlink attributes (struct nlattr: u16 length with the
// 4-byte header, u16 type, the value, padding to 4 bytes) as the kernel's
// nla_parse reads them: the last attribute may lack its padding, and a
// tail shorter than a header is ignored. A length shorter than the header
// or past the end is an error. (nl.ParseRouteAttr slices past the end,
// and panics, on a last attribute without its padding.)
func parseAttrs(b []byte) ([]syscall.NetlinkRouteAttr, error) {
	var attrs []syscall.NetlinkRouteAttr
	for len(b) >= syscall.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		if n < syscall.SizeofRtAttr || n > len(b) {
			return nil, fmt.Errorf("netlink attribute of %d bytes in %d: %w", n, len(b), syscall.EINVAL)
		}
		attrs = append(attrs, syscall.NetlinkRouteAttr{
			Attr:  syscall.RtAttr{Len: uint16(n), Type: binary.NativeEndian.Uint16(b[2:4])},
			Value: b[syscall.SizeofRtAttr:n],
		})
		b = b[min((n+syscall.RTA_ALIGNTO-1)&^(syscall.RTA_ALIGNTO-1), len(b)):]
	}
	return attrs, nil
}

// cString is a NUL-terminated string attribute's value: up to the first
// NUL, all of it without one. (nl.BytesToString panics without one.)
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
