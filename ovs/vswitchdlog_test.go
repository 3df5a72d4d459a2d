package ovs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestFlowAPI: the last word of the log on the port counts (a restart logs
// every port again); other ports' lines and a missing log say nothing.
func TestFlowAPI(t *testing.T) {
	const assigned = "2026-11-26T00:02:42.142Z|00046|netdev_offload|INFO|bond0: Assigned flow API 'linux_tc'.\n"
	const none = "2026-11-26T00:03:13.653Z|00017|netdev_offload_tc|INFO|failed adding ingress qdisc required for offloading: Operation not supported\n" +
		"2026-11-26T00:03:13.654Z|00018|netdev_offload|INFO|bond0: No suitable flow API found.\n"
	const other = "2026-11-26T00:03:13.660Z|00019|netdev_offload|INFO|eth2: Assigned flow API 'linux_tc'.\n"
	for _, tc := range []struct {
		name, log string
		ok, known bool
	}{
		{"assigned", assigned, true, true},
		{"refused after a restart", assigned + none + other, false, true},
		{"assigned again", none + assigned, true, true},
		{"only other ports", other, false, false},
		{"a port whose name is a prefix", "x|netdev_offload|INFO|bond01: No suitable flow API found.\n", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ovs-vswitchd.log")
			if err := os.WriteFile(p, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			if ok, known, err := FlowAPI(p, "bond0"); ok != tc.ok || known != tc.known || err != nil {
				t.Errorf("FlowAPI = %v, %v, %v; want %v, %v, nil", ok, known, err, tc.ok, tc.known)
			}
		})
	}
	if _, known, err := FlowAPI(filepath.Join(t.TempDir(), "none.log"), "bond0"); known || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing log: known %v, err %v; want unknown and ErrNotExist", known, err)
	}
}
