package testbed

import "testing"

func TestKernelWorld(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"kernel drops the log", Kernel("links:\n  bond0 bond\ndmesg:\n  bond0: Enslaving\n"), "links:\n  bond0 bond\n"},
		{"kernel without a log", Kernel("links:\n"), "links:\n"},
		{"world in Canonical's sections, the XML normalized",
			World("links:\n", "bridge br0\n", "<domain>\n  <metadata/>\n</domain>"),
			"== kernel\nlinks:\n\n== ovsdb\nbridge br0\n\n== vm1\n<domain>\n</domain>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
