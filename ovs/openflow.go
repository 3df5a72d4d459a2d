package ovs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"time"
)

// OpenFlow 1.0 message types and the port numbers PacketOut uses.
const (
	ofVersion10    = 0x01
	ofHello        = 0
	ofError        = 1
	ofEchoRequest  = 2
	ofEchoReply    = 3
	ofPacketOut    = 13
	ofBarrierReq   = 18
	ofBarrierReply = 19
	ofppTable      = 0xfff9 // OFPP_TABLE: the packet goes through the flow table, from table 0
	ofNoBuffer     = 0xffffffff
)

// BridgeMgmtSocket is the OpenFlow management socket ovs-vswitchd opens
// for bridge in its run directory (<rundir>/<bridge>.mgmt, what
// "ovs-ofctl br-int" connects to).
func BridgeMgmtSocket(runDir, bridge string) string {
	return filepath.Join(runDir, bridge+".mgmt")
}

// PacketOut sends frame through bridge's OpenFlow tables as if it had come
// in on OpenFlow port inPort, over the bridge's management socket sock:
// "ovs-ofctl packet-out BRIDGE 'in_port=N packet=HEX actions=table'". It
// speaks OpenFlow 1.0 (hello, packet-out with output:TABLE, barrier) and
// returns once the switch has processed it (the barrier's reply), or with
// the switch's error.
func PacketOut(ctx context.Context, sock string, inPort int, frame []byte) error {
	if inPort <= 0 || inPort >= 0xff00 {
		return fmt.Errorf("openflow packet-out: in_port %d is not a port number", inPort)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("openflow packet-out: %w", err)
	}
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := c.SetDeadline(deadline); err != nil {
		return fmt.Errorf("openflow packet-out: %w", err)
	}
	// actions: one output action (type 0, length 8) to OFPP_TABLE
	body := make([]byte, 0, 16+len(frame))
	body = binary.BigEndian.AppendUint32(body, ofNoBuffer)
	body = binary.BigEndian.AppendUint16(body, uint16(inPort))
	body = binary.BigEndian.AppendUint16(body, 8)
	body = binary.BigEndian.AppendUint16(body, 0)
	body = binary.BigEndian.AppendUint16(body, 8)
	body = binary.BigEndian.AppendUint16(body, ofppTable)
	body = binary.BigEndian.AppendUint16(body, 0)
	body = append(body, frame...)
	for i, m := range [][]byte{ofMessage(ofHello, 1, nil), ofMessage(ofPacketOut, 2, body), ofMessage(ofBarrierReq, 3, nil)} {
		if _, err := c.Write(m); err != nil {
			return fmt.Errorf("openflow packet-out: write message %d: %w", i, err)
		}
	}
	for {
		typ, xid, payload, err := readOFMessage(c)
		if err != nil {
			return fmt.Errorf("openflow packet-out: %w", err)
		}
		switch typ {
		case ofError:
			if len(payload) >= 4 {
				return fmt.Errorf("openflow packet-out: the switch refused message %d: error type %d code %d", xid,
					binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:]))
			}
			return fmt.Errorf("openflow packet-out: the switch refused message %d", xid)
		case ofEchoRequest:
			if _, err := c.Write(ofMessage(ofEchoReply, xid, payload)); err != nil {
				return fmt.Errorf("openflow packet-out: echo reply: %w", err)
			}
		case ofBarrierReply:
			return nil
		}
	}
}

// ofMessage is an OpenFlow 1.0 message: the 8-byte header, then body.
func ofMessage(typ uint8, xid uint32, body []byte) []byte {
	m := make([]byte, 8, 8+len(body))
	m[0], m[1] = ofVersion10, typ
	binary.BigEndian.PutUint16(m[2:], uint16(8+len(body)))
	binary.BigEndian.PutUint32(m[4:], xid)
	return append(m, body...)
}

// readOFMessage reads one OpenFlow message: its type, xid and body.
func readOFMessage(r io.Reader) (typ uint8, xid uint32, body []byte, err error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	n := int(binary.BigEndian.Uint16(h[2:]))
	if n < 8 {
		return 0, 0, nil, errors.New("a message shorter than its header")
	}
	body = make([]byte, n-8)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, 0, nil, err
	}
	return h[1], binary.BigEndian.Uint32(h[4:]), body, nil
}
