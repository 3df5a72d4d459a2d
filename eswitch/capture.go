package eswitch

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Capture is a packet socket on one netdev that sees the frames the host
// sends out of it ("tcpdump -i IF -Q out"): for a representor, what goes
// towards its VF.
type Capture struct {
	fd   int
	name string
}

// OpenCapture opens a capture of the frames sent out of netdev name
// (AF_PACKET, ETH_P_ALL, bound to its ifindex; outgoing frames only).
func OpenCapture(name string) (*Capture, error) {
	if err := ValidIfName(name); err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", name, err)
	}
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, fmt.Errorf("capture %s: socket: %w", name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("capture %s: bind: %w", name, err)
	}
	return &Capture{fd: fd, name: name}, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// ErrCaptureTimeout: no frame went out before the deadline.
var ErrCaptureTimeout = errors.New("no frame before the deadline")

// Next returns the next frame sent out of the netdev before deadline
// (frames it received are passed over).
func (c *Capture) Next(deadline time.Time) ([]byte, error) {
	buf := make([]byte, 65536)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, ErrCaptureTimeout
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return nil, fmt.Errorf("capture %s: %w", c.name, err)
		}
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, fmt.Errorf("capture %s: %w", c.name, err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			return append([]byte(nil), buf[:n]...), nil
		}
	}
}

// Close closes the socket.
func (c *Capture) Close() error { return unix.Close(c.fd) }
