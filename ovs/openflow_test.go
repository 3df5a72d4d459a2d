package ovs

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSwitch answers one connection on sock as ovs-vswitchd would: its
// hello, an echo request before the barrier's reply (or refuse: an error
// for the packet-out); got receives the packet-out's body.
func fakeSwitch(t *testing.T, sock string, refuse bool, got chan<- []byte) {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(ofMessage(ofHello, 7, nil))
		for {
			typ, xid, body, err := readOFMessage(c)
			if err != nil {
				close(got)
				return
			}
			switch typ {
			case ofPacketOut:
				got <- body
				if refuse {
					_, _ = c.Write(ofMessage(ofError, xid, []byte{0, 1, 0, 4}))
				}
			case ofBarrierReq:
				if refuse {
					continue
				}
				_, _ = c.Write(ofMessage(ofEchoRequest, 99, []byte("ping")))
				if typ, _, body, err := readOFMessage(c); err != nil || typ != ofEchoReply || string(body) != "ping" {
					t.Errorf("echo reply: type %d body %q err %v", typ, body, err)
				}
				_, _ = c.Write(ofMessage(ofBarrierReply, xid, nil))
			}
		}
	}()
}

// PacketOut sends the frame with its in_port and one output:TABLE action,
// answers the switch's echo, returns at the barrier's reply; a refusal is
// an error naming the switch's error type and code.
func TestPacketOut(t *testing.T) {
	dir := t.TempDir()
	frame := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 0x08, 0x00}
	got := make(chan []byte, 1)
	fakeSwitch(t, filepath.Join(dir, "br-int.mgmt"), false, got)
	if err := PacketOut(context.Background(), BridgeMgmtSocket(dir, "br-int"), 5, frame); err != nil {
		t.Fatal(err)
	}
	body := <-got
	want := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	want = append(want, 0, 5, 0, 8, 0, 0, 0, 8, 0xff, 0xf9, 0, 0)
	want = append(want, frame...)
	if !bytes.Equal(body, want) {
		t.Errorf("packet-out body\n got % x\nwant % x", body, want)
	}

	got = make(chan []byte, 1)
	fakeSwitch(t, filepath.Join(dir, "br-x.mgmt"), true, got)
	err := PacketOut(context.Background(), BridgeMgmtSocket(dir, "br-x"), 5, frame)
	if err == nil || !strings.Contains(err.Error(), "refused message 2: error type 1 code 4") {
		t.Errorf("refused: %v", err)
	}
	if err := PacketOut(context.Background(), BridgeMgmtSocket(dir, "br-x"), 0xff00, frame); err == nil || !strings.Contains(err.Error(), "in_port 65280") {
		t.Errorf("in_port out of range: %v", err)
	}
}
