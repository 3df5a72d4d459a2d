package host

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNetdevHint: the hint a lasting wait for ovs-vswitchd gives names where
// the ports' netdevs are: the simulated host's mirror namespace, or that it
// has none.
func TestNetdevHint(t *testing.T) {
	ns := fmt.Sprintf("hosttest-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	nic := map[string]any{"pfs": []any{map[string]any{"pci": "0000:61:00.0", "netdev": "p0"}}}
	for _, tt := range []struct {
		name string
		sim  map[string]any
		want string
	}{
		{"real host", nil, "a port's netdev must exist in ovs-vswitchd's network namespace; its error column says why it could not open one"},
		{"sim without mirror_netns", map[string]any{"nics": []any{nic}},
			"the config's sim section has no mirror_netns: the simulated netdevs exist in no network namespace, so no ovs-vswitchd can open them (README: Try it on the simulated host)"},
		{"sim with mirror_netns", map[string]any{"nics": []any{nic}, "mirror_netns": "/run/netns/" + ns},
			"the simulated netdevs are mirrored into /run/netns/" + ns + " (sim.mirror_netns): ovs-vswitchd must run in that namespace (README: Try it on the simulated host)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{}
			if tt.sim != nil {
				o.SimDir, o.SimSpec = filepath.Join(t.TempDir(), "sim"), tt.sim
			}
			h, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if got := h.netdevHint(); got != tt.want {
				t.Errorf("hint:\n%s\nwant:\n%s", got, tt.want)
			}
			if !strings.Contains(tt.want, "README") && tt.sim != nil {
				t.Error("a simulated host's hint points to the README")
			}
		})
	}
}
