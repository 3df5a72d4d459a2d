package eswitch

import (
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseAttrs: attributes as nla_parse reads them, and an error (not a
// panic, as nl.ParseRouteAttr's) on a length past the end.
func TestParseAttrs(t *testing.T) {
	attr := func(typ uint16, v string) syscall.NetlinkRouteAttr {
		return syscall.NetlinkRouteAttr{Attr: syscall.RtAttr{Len: uint16(4 + len(v)), Type: typ}, Value: []byte(v)}
	}
	tests := []struct {
		name    string
		b       []byte
		want    []syscall.NetlinkRouteAttr
		wantErr bool
	}{
		{"padded", []byte{5, 0, 1, 0, 'a', 0, 0, 0, 6, 0, 2, 0, 'b', 'c', 0, 0}, []syscall.NetlinkRouteAttr{attr(1, "a"), attr(2, "bc")}, false},
		{"the last without its padding", []byte{5, 0, 1, 0, 'a', 0, 0, 0, 5, 0, 2, 0, 'b'}, []syscall.NetlinkRouteAttr{attr(1, "a"), attr(2, "b")}, false},
		{"a short tail", []byte{4, 0, 1, 0, 9, 9}, []syscall.NetlinkRouteAttr{attr(1, "")}, false},
		{"empty", nil, nil, false},
		{"length past the end", []byte{9, 0, 1, 0, 'a'}, nil, true},
		{"length below the header", []byte{3, 0, 1, 0}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAttrs(tt.b)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
		})
	}
	for in, want := range map[string]string{"ovs-system\x00": "ovs-system", "flower": "flower", "a\x00b\x00": "a", "": ""} {
		if got := cString([]byte(in)); got != want {
			t.Errorf("cString(%q) = %q, want %q", in, got, want)
		}
	}
}
