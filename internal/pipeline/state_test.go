package pipeline

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/testbed"
)

// missingLines are the lines of want that are not lines of text.
func missingLines(text string, want []string) []string {
	have := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		have[l] = true
	}
	var out []string
	for _, l := range want {
		if !have[l] {
			out = append(out, l)
		}
	}
	return out
}

// Lines of the state text (bed.state: testbed.Canonical of bed.world).
const (
	pf0Numvfs4  = "  pf 0000:61:00.0 port=0 netdev=ens1f0np0 driver=mlx5_core override=(null) mode=switchdev numvfs=4 ready=4/4 autoprobe=0 flow_steering_mode=smfs offset=2 stride=1"
	pf1Numvfs4  = "  pf 0000:61:00.1 port=1 netdev=ens1f1np1 driver=mlx5_core override=(null) mode=switchdev numvfs=4 ready=4/4 autoprobe=0 flow_steering_mode=smfs offset=9 stride=1"
	pf0Numvfs6  = "  pf 0000:61:00.0 port=0 netdev=ens1f0np0 driver=mlx5_core override=(null) mode=switchdev numvfs=6 ready=6/6 autoprobe=0 flow_steering_mode=smfs offset=2 stride=1"
	pf1Numvfs6  = "  pf 0000:61:00.1 port=1 netdev=ens1f1np1 driver=mlx5_core override=(null) mode=switchdev numvfs=6 ready=6/6 autoprobe=0 flow_steering_mode=smfs offset=9 stride=1"
	pf0VF5      = "    vf 5 0000:61:00.7 driver=- override=(null) mac=00:00:00:00:00:00 vlan=0 qos=0 trust=off spoofchk=off link-state=auto rate=0-0 netdev=- rep=rep[0000:61:00.7]"
	pf0VF5Port  = `  port "rep[0000:61:00.7]" tag=- owner="lag0" |interface "rep[0000:61:00.7]" type=""`
	lagHash     = "  lag state=active bond=bond0 type=switchdev port_sel_mode=hash flags=shared_fdb:on mapping=<runtime> hash=layer3+4"
	lagQueue    = "  lag state=active bond=bond0 type=switchdev port_sel_mode=queue_affinity flags=shared_fdb:on mapping=<runtime>"
	bondLACP    = "  bond0 mode=802.3ad miimon=100 lacp_rate=fast xmit_hash_policy=layer3+4 ad_select=stable min_links=0 updelay=0 downdelay=0 primary=- slaves=ens1f0np0,ens1f1np1 active_slave=<runtime>"
	bondAB      = "  bond0 mode=active-backup miimon=100 lacp_rate=slow xmit_hash_policy=layer2 ad_select=stable min_links=0 updelay=0 downdelay=0 primary=ens1f1np1 slaves=ens1f0np0,ens1f1np1 active_slave=<runtime>"
	bondLink    = `  bond0 bond master=- alias="vflag:lag0" admin=up oper=up mac=b8:ce:f6:84:01:02 mtu=%d hw-tc-offload=-`
	pf0Link     = `  ens1f0np0 pf 0000:61:00.0 master=bond0 alias="" admin=up oper=up mac=b8:ce:f6:84:01:02 mtu=%d hw-tc-offload=on`
	rep00Link   = `  rep[0000:61:00.2] rep pf0vf0 of 0000:61:00.0 master=- alias="" admin=up oper=up mac=<random> mtu=%d hw-tc-offload=on`
	rep00Port   = `  port "rep[0000:61:00.2]" tag=%d owner="lag0" |interface "rep[0000:61:00.2]" type=""%s`
	bondPort    = `  port "bond0" tag=- owner="lag0" |interface "bond0" type=""%s`
	offloadOnly = `other_config {hw-offload="true"}`
	maxIdle2000 = `other_config {hw-offload="true", max-idle="2000"}`
	pf1VF1Bound = "    vf 1 0000:61:01.3 driver=mlx5_core override=mlx5_core mac=52:54:00:10:01:01 vlan=0 qos=0 trust=off spoofchk=off link-state=auto rate=0-0 netdev=vfnd[0000:61:01.3] rep=rep[0000:61:01.3]"
	pf1VF1Free  = "    vf 1 0000:61:01.3 driver=- override=(null) mac=52:54:00:10:01:01 vlan=0 qos=0 trust=off spoofchk=off link-state=auto rate=0-0 netdev=- rep=rep[0000:61:01.3]"
	rateNode    = "    rate node tenant1 tx_share=0 tx_max=125000000"
	rateLeaf00  = "      rate leaf tx_share=1250000 tx_max=12500000 parent=tenant1"
)

// withTunnel makes the example's group a VXLAN overlay: the underlay on
// VLAN 30 of the bond at MTU 9100 with a route, pf 0 vf 0 (VLAN 100) on
// segment 5100, the untagged VFs on the default segment 5000.
func withTunnel(c *config.Config) {
	g := &c.Groups[0]
	g.Tunnel = &config.Tunnel{Type: config.TunnelVXLAN, Local: "192.0.2.11/24", UnderlayVLAN: 30, UnderlayMTU: 9100,
		Gateway: "192.0.2.254", Routes: []string{"198.51.100.0/24"}, Remotes: []string{"192.0.2.12", "198.51.100.7"}, VNI: 5000}
	g.VFs[0].VNI = 5100
}

// tunnelLines are withTunnel's lines: the underlay, the tunnel ports with
// their options and tags, the bond at the underlay's MTU (and not in the
// bridge: no bondPort line, checked by TestTunnelLayout). The untagged
// segment's ports (VNI 5000's tunnel port, an untagged representor) trunk
// only untagged frames and vfs[1]'s VLAN 200, not segment 5100's VLAN 100.
var tunnelLines = []string{
	"underlay:", "  bond0.30 vlan 30 on bond0", "  bond0.30 addrs 192.0.2.11/24", "  route 198.51.100.0/24 via 192.0.2.254 dev bond0.30",
	`  port "vx5000r0" tag=- owner="lag0" vlan_mode=trunk trunks=[0 200] |interface "vx5000r0" type="vxlan" options={dst_port="4789", key="5000", local_ip="192.0.2.11", remote_ip="192.0.2.12"}`,
	`  port "rep[0000:61:00.4]" tag=- owner="lag0" vlan_mode=trunk trunks=[0 200] |interface "rep[0000:61:00.4]" type=""`,
	`  port "vx5100r1" tag=100 owner="lag0" |interface "vx5100r1" type="vxlan" options={dst_port="4789", key="5100", local_ip="192.0.2.11", remote_ip="198.51.100.7"}`,
	fmt.Sprintf(bondLink, 9100), fmt.Sprintf(pf0Link, 9100), lagHash, fmt.Sprintf(rep00Port, 100, ""),
}

// stateCase is one config of the state table: the lines its state text
// must have.
type stateCase struct {
	name string
	cfg  bedConfig
	want []string // lines of the state text
}

// stateCases are the configs of TestUpStateTable (cases[0] is base, the
// example); TestRollbackRestoresRun runs their transitions too.
func stateCases(example bedConfig) []stateCase {
	// base's lines, with the mtu and pf 0 vf 0's VLAN; each config changes
	// some of them.
	baseLines := func(mtu, vlan int) []string {
		req := "" // the OVS interfaces' mtu_request
		if mtu != 1500 {
			req = fmt.Sprintf(" mtu_request=%d", mtu)
		}
		return []string{pf0Numvfs4, pf1Numvfs4, lagHash, bondLACP, fmt.Sprintf(bondLink, mtu), fmt.Sprintf(pf0Link, mtu), fmt.Sprintf(rep00Link, mtu),
			fmt.Sprintf(rep00Port, vlan, req), fmt.Sprintf(bondPort, req), offloadOnly, pf1VF1Bound}
	}
	return []stateCase{
		{"base", example, baseLines(1500, 100)},
		{"vlan", example.with(vfSet(0, 0, func(v *config.VFConfig) { v.VLAN = 300 })), baseLines(1500, 300)},
		{"mtu", example.with(groupMTU(9000)), baseLines(9000, 100)},
		{"numvfs", example.with(numVFs(6)), []string{pf0Numvfs6, pf1Numvfs6, pf0VF5, pf0VF5Port, lagHash, fmt.Sprintf(rep00Port, 100, ""), pf1VF1Bound}},
		{"max-idle", example.with(ovsOther("", 2000)), []string{maxIdle2000, pf0Numvfs4, bondLACP}},
		{"active-backup", example.with(activeBackup, bondSet(func(b *config.Bond) { b.Primary = "ens1f1np1" })), []string{bondAB, lagQueue, offloadOnly}},
		{"host driver dropped", example.with(vfSet(1, 1, func(v *config.VFConfig) { v.Driver = "" })), []string{pf1VF1Free, bondLACP}},
		{"rates", example.with(rateGroups(config.RateGroup{Name: "tenant1", TxMax: 1000}),
			vfSet(0, 0, func(v *config.VFConfig) { v.TxMax, v.TxShare, v.RateGroup = 100, 10, "tenant1" })), []string{rateNode, rateLeaf00, pf0Numvfs4}},
		{"tunnel", example.with(withTunnel), tunnelLines},
	}
}

// TestUpStateTable is the pipeline's own state table of DESIGN.md section
// 2a, beside cmd/vflag's black-box TestConvergeTransitions: each config
// has lines its state text must have; its fresh state (up on a clean
// host; down then gives the baseline) is recorded. Then one host visits
// the configs in random order (logged seed), every config twice, then
// each config followed by base (every setting removed again), each up
// from whatever the one before left: after every up the host's whole
// state equals that config's fresh state and has its lines, and a second
// up changes nothing.
func TestUpStateTable(t *testing.T) {
	d := startDaemons(t)
	example := exampleBed(t)
	cases := stateCases(example)
	fresh := make([]string, len(cases))
	for i, tc := range cases {
		b := newConvergeBed(t, &d, tc.cfg)
		baseline := b.state()
		b.up(tc.cfg, false)
		fresh[i] = b.state()
		if miss := missingLines(fresh[i], tc.want); len(miss) > 0 {
			t.Errorf("(clean) -> %s: the state lacks\n%s\nstate:\n%s", tc.name, strings.Join(miss, "\n"), fresh[i])
		}
		b.down()
		if got := b.state(); got != baseline {
			t.Fatalf("%s: down after a fresh up does not give the baseline:\n%s", tc.name, testbed.DiffText(baseline, got))
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	seed := time.Now().UnixNano()
	if s := os.Getenv("VFLAG_CONVERGE_SEED"); s != "" {
		if _, err := fmt.Sscan(s, &seed); err != nil {
			t.Fatalf("VFLAG_CONVERGE_SEED: %v", err)
		}
	}
	t.Logf("seed %d (VFLAG_CONVERGE_SEED=%d reproduces the order)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	order := append(rng.Perm(len(cases)), rng.Perm(len(cases))...)
	for _, i := range rng.Perm(len(cases)) {
		order = append(order, i, 0) // cases[0] is base
	}
	b := newConvergeBed(t, &d, example)
	prev := "(clean)"
	for _, i := range order {
		tc := cases[i]
		evs := b.up(tc.cfg, false)
		got := b.state()
		if miss := missingLines(got, tc.want); len(miss) > 0 {
			t.Errorf("%s -> %s: the state lacks\n%s", prev, tc.name, strings.Join(miss, "\n"))
		}
		if got != fresh[i] {
			t.Fatalf("%s -> %s: the host differs from %s's fresh state (changed %v):\n%s", prev, tc.name, tc.name, changed(evs), testbed.DiffText(fresh[i], got))
		}
		if again := changed(b.up(tc.cfg, false)); len(again) != 0 {
			t.Fatalf("%s -> %s: a second up changed %v", prev, tc.name, again)
		}
		prev = tc.name
	}
	b.down()
}
