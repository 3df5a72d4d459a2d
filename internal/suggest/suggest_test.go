package suggest

import "testing"

func TestNearest(t *testing.T) {
	keys := []string{"name", "eswitch", "pfs", "numvfs", "mtu", "bond", "vfs", "ovs", "network", "validate", "attachments", "rate_groups", "flow_steering_mode"}
	for _, tt := range []struct {
		s, want string
	}{
		{"numvf", "numvfs"}, {"NumVFs", ""}, {"nuvmfs", "numvfs"}, {"eswich", "eswitch"}, {"atachments", "attachments"},
		{"colour", ""}, {"x", ""}, {"vf", "vfs"}, {"numvfs", ""},
	} {
		got, ok := Nearest(tt.s, keys)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Nearest(%q) = %q, %v; want %q", tt.s, got, ok, tt.want)
		}
	}
	if got, _ := Nearest("ens1f1np2", []string{"ens1f0np0", "ens1f1np1", "eth0"}); got != "ens1f1np1" {
		t.Errorf("Nearest(ens1f1np2) = %q", got)
	}
	if got, ok := Nearest("cuont", []string{"count", "wait"}); got != "count" || !ok {
		t.Errorf("a swap is one edit: %q", got)
	}
	if got, ok := Nearest("0000:61:00.2", []string{"0000:61:00.0", "0000:61:00.1"}); ok {
		t.Errorf("two as near: none, got %q", got)
	}
}
