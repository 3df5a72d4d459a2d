package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/sim"
)

// ---- (8) several NICs: the groups run side by side ----
//
// A host with n dual-port ConnectX cards, each its own switchdev group
// (bond, bridge, a VF of each attached to vm1), at hardware latencies. The
// groups run side by side, so the bound of the whole run is one NIC's
// (upBound, downBound: every card does its slow steps at the same time),
// and the rows hold the run to it.

// multi is a scenario of nics cards with numvfs VFs per PF.
func (b *bencher) multi(nics, numvfs int, lat sim.Latency) *scenario {
	dir := b.r.TempDir()
	s := &scenario{b: b, switchdev: true, numvfs: numvfs, lat: lat, dir: dir, nics: nics,
		cfg: filepath.Join(dir, "vflag.yaml"), simDir: filepath.Join(dir, "sim"), state: filepath.Join(dir, "state")}
	s.writeConfig(s.multiConfig())
	return s
}

// multiConfig is the config of a multi scenario: group lag<i> on card
// cx6lx-<i> (PCI 0000:6<i+1>:00.x, total_vfs 64: VF-LAG's most), bridge
// br-lag<i> (br-lag for the first), vm1 attached to VF 0 of each group's
// first PF.
func (s *scenario) multiConfig() string {
	var c strings.Builder
	fmt.Fprintf(&c, "ovsdb: %s\nlibvirt: %s\nlag_timeout: 60s\nvf_timeout: 10m\ngroups:\n", s.b.srv.Endpoint(), s.b.virt.URI())
	for i := range s.nics {
		br := "br-lag"
		if i > 0 {
			br = fmt.Sprintf("br-lag%d", i)
		}
		fmt.Fprintf(&c, `  - name: lag%d
    eswitch: switchdev
    pfs: [ens%df0np0, ens%df1np1]
    numvfs: %d
    flow_steering_mode: smfs
    bond: {name: bond%d, mode: 802.3ad, miimon: 100, lacp_rate: fast, xmit_hash_policy: layer3+4}
    ovs: {bridge: %s, hw_offload: true, datapath_type: netdev}
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:1%d:00:00"}
      - {pf: 1, vf: 0, mac: "52:54:00:1%d:01:00"}
    attachments:
      - {domain: vm1, pf: 0, vf: 0}
`, i, i+1, i+1, s.numvfs, i, br, i, i)
	}
	fmt.Fprintf(&c, "sim:\n  mirror_netns: %s\n  nics:\n", s.b.srv.Netns())
	for i := range s.nics {
		fmt.Fprintf(&c, `    - name: cx6lx-%d
      total_vfs: %d
      pfs:
        - {pci: "0000:6%d:00.0", netdev: ens%df0np0}
        - {pci: "0000:6%d:00.1", netdev: ens%df1np1}
`, i, eswitch.LAGMaxTotalVFs, i+1, i+1, i+1, i+1)
	}
	fmt.Fprintf(&c, "  latency:\n    vf_create: %s\n    mode_change: %s\n    lag_activation: %s\n", s.lat.VFCreate, s.lat.ModeChange, s.lat.LAGActivation)
	return c.String()
}

// severalNICs: up of 2 NICs x 2 x 64 and 4 NICs x 2 x 32 against one NIC's
// bound, down of 2 NICs (median of 5) against one NIC's, the no-op up and
// status of 2 NICs, and the peak RSS of 4 NICs beside one NIC's.
func (b *bencher) severalNICs() {
	const section = "several NICs"
	two := b.multi(2, 64, b.hw)
	progress("several NICs: up 2 NICs x 2 x 64 switchdev, hardware latencies")
	_, p := two.timedUp()
	b.add(judgeExtra(section, "up 2 NICs x 2 x 64 switchdev, hardware latencies (bound: one NIC's)", p, two.upBound(), up2Starts))
	b.quiesceOVS("up 2 NICs")
	noop, np, fp := two.noopWithFloor("up")
	b.add(judgeFloor(section, fmt.Sprintf("up 2 NICs x 2 x 64 (converged, median of %d)", floorRounds), noop, np, fp.String(), noop2Factor, true))
	b.add(two.statusRow(section, fmt.Sprintf("status 2 NICs x 2 x 64 (median of %d)", floorRounds), noop2Factor))
	dp, _ := two.timedDowns(5)
	b.add(judgeExtra(section, "down 2 NICs x 2 x 64 (median of 5; bound: one NIC's)", dp, two.downBound(), down2Starts))
	b.settleOVS()

	four := b.multi(4, 32, b.hw)
	progress("several NICs: up 4 NICs x 2 x 32 switchdev, hardware latencies")
	up4, p4 := four.timedUp()
	b.add(judgeExtra(section, "up 4 NICs x 2 x 32 switchdev, hardware latencies (bound: one NIC's)", p4, four.upBound(), up4Starts))
	b.quiesceOVS("up 4 NICs")
	four.vflag("down")
	b.settleOVS()
	one := b.multi(1, 32, sim.Latency{})
	up1 := one.vflag("up")
	b.quiesceOVS("up 1 NIC")
	one.vflag("down")
	b.settleOVS()
	b.add(row{section: "memory", what: "up 4 NICs x 2 x 32 switchdev: peak RSS (beside: 1 NIC x 2 x 32)",
		measured: fmt.Sprintf("%.1f MiB (1 NIC: %.1f MiB)", float64(up4.maxRSS)/1024, float64(up1.maxRSS)/1024), status: "report"})
}
