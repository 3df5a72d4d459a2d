package validaterun

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// readVswitchdLog takes the refusals of dpif_netlink, the distinct
// "flow_put:" refusals of the tc layer (at ERR level, the 7.2 bed's lines,
// or DBG as later Open vSwitch logs them) and the tc flow API lines;
// another module's "flow_put:" is not the tc layer's.
func TestReadVswitchdLog(t *testing.T) {
	log := `2026-11-29T11:20:53.037Z|00083|netdev_offload|INFO|eth2: Assigned flow API 'linux_tc'.
2026-11-29T11:28:09.806Z|00005|netdev_offload_tc(handler2)|ERR|flow_put: recirc_id sharing not supported
2026-11-29T11:28:09.817Z|00006|dpif_netlink(handler2)|DBG|failed to offload flow: Operation not supported: eth4
2026-11-29T11:28:09.993Z|00008|netdev_offload_tc(handler1)|ERR|flow_put: recirc_id sharing not supported
2026-11-29T11:28:10.001Z|00009|bridge|ERR|flow_put: not the tc layer
2026-11-29T11:28:10.003Z|00011|netdev_offload_tc(handler1)|DBG|flow_put: recirc_id sharing not supported
2026-11-29T11:28:10.004Z|00012|netdev_offload_tc(handler1)|ERR|flow_put: failed to get ifindex for eth9: No such device
2026-11-29T11:28:10.002Z|00010|netdev_offload|INFO|bond0: No suitable flow API found for netdev
`
	path := filepath.Join(t.TempDir(), "ovs-vswitchd.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	refusals, api, tc, err := readVswitchdLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(refusals, []string{"failed to offload flow: Operation not supported: eth4"}) {
		t.Errorf("refusals %q", refusals)
	}
	if !slices.Equal(tc, []string{"flow_put: recirc_id sharing not supported", "flow_put: failed to get ifindex for eth9: No such device"}) {
		t.Errorf("tc refusals %q", tc)
	}
	if on, said := api["eth2"]; !said || !on {
		t.Errorf("flow API %v", api)
	}
}
