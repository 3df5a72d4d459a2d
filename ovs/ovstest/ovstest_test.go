package ovstest_test

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/ovs/ovstest"
)

func TestMain(m *testing.M) { ovstest.Main(m) }

// Two servers side by side (separate namespaces), each with a bridge of the
// same name; Dump shows bridges, ports, interfaces and other_config.
func TestStartTwoInstances(t *testing.T) {
	t.Parallel()
	a, b := ovstest.Start(t), ovstest.Start(t)
	if a.Netns() == b.Netns() || a.Endpoint() == b.Endpoint() {
		t.Fatalf("instances share a namespace or endpoint: %s %s", a.Netns(), b.Netns())
	}
	for _, s := range []*ovstest.Server{a, b} {
		s.MustVsctl("add-br", "br0", "--", "set", "Bridge", "br0", "datapath_type=netdev", "external_ids:vflag-owner=g",
			"--", "set", "Open_vSwitch", ".", "other_config:hw-offload=true")
		s.AddVeth("v0", "v0p")
		s.MustVsctl("add-port", "br0", "v0", "tag=7")
	}
	want := `other_config {hw-offload="true"}
bridge "br0" datapath_type="netdev" owner="g"
  port "br0" tag=- owner=""
    interface "br0" type="internal"
  port "v0" tag=7 owner=""
    interface "v0" type=""
`
	for _, s := range []*ovstest.Server{a, b} {
		if got := s.Dump(); got != want {
			t.Errorf("Dump():\n%s\nwant:\n%s", got, want)
		}
		out := s.MustVsctl("get", "Interface", "v0", "ofport")
		if strings.TrimSpace(out) == "-1" || strings.TrimSpace(out) == "[]" {
			t.Errorf("v0 ofport = %s, want a real port", out)
		}
	}
}

func TestEmptyDump(t *testing.T) {
	t.Parallel()
	s := ovstest.Start(t)
	if got, want := s.Dump(), "other_config {}\n"; got != want {
		t.Errorf("Dump() = %q, want %q", got, want)
	}
}
