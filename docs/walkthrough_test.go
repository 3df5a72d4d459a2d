package docs

import (
	"os"
	"strings"
	"testing"
)

// TestRealHostWalkthrough: the README leads to a walk-through of a real
// host that starts from examples/vflag.yaml (the example a package
// installs) and goes doctor, config, plan, up, status, validate and the
// boot units, in that order; and to what to do when the LAG is not active.
func TestRealHostWalkthrough(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"(docs/real-host.md)", "(docs/troubleshooting.md)"} {
		if !strings.Contains(string(readme), link) {
			t.Errorf("README does not link %s", link)
		}
	}
	text, err := os.ReadFile("real-host.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := ""
	inBlock := false
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			blocks += l + "\n"
		}
	}
	at := 0
	for _, step := range []string{"vflag doctor", "cp /usr/share/doc/vflag/examples/vflag.yaml /etc/vflag/vflag.yaml", "vflag doctor",
		"vflag plan", "vflag up", "vflag status", "vflag validate", "vflag install"} {
		i := strings.Index(blocks[at:], step)
		if i < 0 {
			t.Fatalf("real-host.md's commands lack %q after %q", step, blocks[:at])
		}
		at += i + len(step)
	}
	if _, err := os.Stat("../examples/vflag.yaml"); err != nil {
		t.Fatal(err)
	}
	ts, err := os.ReadFile("troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	if !Anchors(string(ts))["lag-not-active"] || !strings.Contains(string(readme), "hardware LAG not active") {
		t.Error("the README does not lead to troubleshooting.md's LAG not active")
	}
}
