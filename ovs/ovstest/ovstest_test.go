package ovstest_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
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

// fatalTB is a TB whose Fatalf ends only the goroutine that calls it,
// recording the message.
type fatalTB struct {
	*testing.T
	msg chan string
}

func (f fatalTB) Fatalf(format string, args ...any) {
	f.msg <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// StartNetns runs ovs-vswitchd in the namespace named, deleting one of
// that name left over without a process, and refuses one a process is in.
func TestStartNetns(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("ovstest-named-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "netns", "exec", name, "ip", "link", "add", "stale0", "type", "veth", "peer", "name", "stale1").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	s := ovstest.StartNetns(t, name)
	if s.Netns() != "/run/netns/"+name || s.NetnsName() != name {
		t.Fatalf("namespace %s (%s), want %s", s.Netns(), s.NetnsName(), name)
	}
	if out, err := s.Exec("ip", "-br", "link"); err != nil || strings.Contains(out, "stale0") {
		t.Fatalf("the left-over namespace was not replaced: %v\n%s", err, out)
	}
	pids, err := exec.Command("ip", "netns", "pids", name).Output()
	if err != nil || len(strings.Fields(string(pids))) == 0 {
		t.Fatalf("no process in %s: %v", name, err)
	}

	f := fatalTB{T: t, msg: make(chan string, 1)}
	go func() { ovstest.StartNetns(f, name); f.msg <- "" }()
	want := "ovstest: network namespace " + name + " exists and processes run in it (pids " + strings.Join(strings.Fields(string(pids)), " ") + "): another ovs-vswitchd? Stop it, or name another namespace"
	if got := <-f.msg; got != want {
		t.Fatalf("second StartNetns:\n%s\nwant:\n%s", got, want)
	}
}
