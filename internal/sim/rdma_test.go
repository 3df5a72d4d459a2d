package sim

import (
	"strings"
	"syscall"
	"testing"
)

func rdmaSpec() *Spec {
	s := testSpec()
	s.NICs[0].RDMA = true
	return s
}

func TestRDMADevicesBondWithLAG(t *testing.T) {
	tests := []struct {
		name   string
		fault  bool
		lag    bool
		want   []string
		ndev   string
		pciDev string // device under PF0's infiniband/
	}{
		{name: "no LAG", want: []string{"mlx5_0", "mlx5_1"}, ndev: "p0", pciDev: "mlx5_0"},
		{name: "LAG active", lag: true, want: []string{"mlx5_bond_0"}, ndev: "bond0", pciDev: "mlx5_bond_0"},
		{name: "LAG active, did not bond", lag: true, fault: true, want: []string{"mlx5_0", "mlx5_1"}, ndev: "p0", pciDev: "mlx5_0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, rdmaSpec())
			if tc.lag {
				x.setupLAG(lagSetup{mode: "802.3ad"})
				x.settle()
			}
			x.ok(x.h.SetRDMABondFault("nic0", tc.fault))
			got := x.ls("/sys/class/infiniband")
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("devices %v, want %v", got, tc.want)
			}
			dev := "/sys/class/infiniband/" + tc.want[0]
			if l := x.readlink(dev + "/device"); l != "../../../0000:61:00.0" {
				t.Errorf("device link %q", l)
			}
			if got := x.ls("/sys/bus/pci/devices/0000:61:00.0/infiniband"); len(got) != 1 || got[0] != tc.pciDev {
				t.Errorf("PF0 infiniband/ %v", got)
			}
			if got := strings.TrimSpace(x.read(dev + "/ports/1/gid_attrs/ndevs/1")); got != tc.ndev {
				t.Errorf("ndev %q, want %q", got, tc.ndev)
			}
			if got := x.read(dev + "/ports/1/gid_attrs/types/0"); got != "IB/RoCE v1\n" {
				t.Errorf("type 0 %q", got)
			}
			if got := x.read(dev + "/ports/1/gid_attrs/types/1"); got != "RoCE v2\n" {
				t.Errorf("type 1 %q", got)
			}
			if got := x.read(dev + "/ports/1/gids/5"); got != zeroGID+"\n" {
				t.Errorf("empty slot %q", got)
			}
			x.readErr(dev+"/ports/1/gid_attrs/types/5", syscall.EINVAL)
			if g := x.read(dev + "/ports/1/gids/0"); !strings.HasPrefix(g, "fe80:0000:0000:0000:") || len(g) != 40 {
				t.Errorf("gid 0 %q", g)
			}
		})
	}
}

func TestLinkLocalGID(t *testing.T) {
	if got := linkLocalGID("00:02:c9:b6:7c:70"); got != "fe80:0000:0000:0000:0202:c9ff:feb6:7c70" {
		t.Fatal(got)
	}
}

func TestRDMACMConfigfsAndTC(t *testing.T) {
	x := newTH(t, rdmaSpec())
	mk := func(p string) error { return x.fs.(hostFS).Mkdir(p) }
	checkPathErr(t, mk("/sys/kernel/config/rdma_cm/mlx5_9"), syscall.ENODEV)
	x.ok(mk("/sys/kernel/config/rdma_cm/mlx5_0"))
	checkPathErr(t, mk("/sys/kernel/config/rdma_cm/mlx5_0"), syscall.EEXIST)
	mode := "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode"
	if got := x.read(mode); got != "RoCE v2\n" {
		t.Fatalf("default %q", got)
	}
	x.writeErr(mode, "v1", syscall.EINVAL)
	x.write(mode, "IB/RoCE v1\n")
	if got := x.read(mode); got != "IB/RoCE v1\n" {
		t.Fatalf("after write %q", got)
	}
	tcf := "/sys/class/infiniband/mlx5_0/tc/1/traffic_class"
	if got := x.read(tcf); got != "" {
		t.Fatalf("unset tclass %q", got)
	}
	x.write(tcf, "106")
	if got := x.read(tcf); got != "Global tclass=106\n" {
		t.Fatalf("tclass %q", got)
	}
	x.writeErr(tcf, "256", syscall.EINVAL)
	x.write(tcf, "tclass=-1")
	if got := x.read(tcf); got != "" {
		t.Fatalf("cleared tclass %q", got)
	}
	x.write("/sys/class/infiniband/mlx5_0/tc/1/ttl", "64")
	if got := x.read("/sys/class/infiniband/mlx5_0/tc/1/ttl"); got != "Global ttl=64\n" {
		t.Fatalf("ttl %q", got)
	}
}

func TestCountersAndBondTraffic(t *testing.T) {
	x := newTH(t, testSpec())
	x.setupLAG(lagSetup{mode: "active-backup"})
	x.settle()
	if _, err := x.h.Traffic("bond0", 100, 1000); err != nil {
		t.Fatal(err)
	}
	rx := func(n string) string {
		return strings.TrimSpace(x.read("/sys/class/net/" + n + "/statistics/rx_packets"))
	}
	if rx("p0") != "100" || rx("p1") != "0" || rx("bond0") != "100" {
		t.Fatalf("active-backup: p0 %s p1 %s bond0 %s", rx("p0"), rx("p1"), rx("bond0"))
	}
	x.ok(x.h.SetLinkUp("p0", false))
	x.h.Traffic("bond0", 50, 1000)
	if rx("p0") != "100" || rx("p1") != "50" {
		t.Fatalf("after failover: p0 %s p1 %s", rx("p0"), rx("p1"))
	}
	x.ok(x.h.AddCounters("p0", Counters{TxPackets: 7}))
	if got := strings.TrimSpace(x.read("/sys/class/net/p0/statistics/tx_packets")); got != "107" {
		t.Fatalf("tx_packets %s", got)
	}

	y := newTH(t, testSpec())
	y.setupLAG(lagSetup{mode: "802.3ad"})
	y.settle()
	y.h.Traffic("bond0", 101, 100)
	a := strings.TrimSpace(y.read("/sys/class/net/p0/statistics/tx_packets"))
	b := strings.TrimSpace(y.read("/sys/class/net/p1/statistics/tx_packets"))
	if a != "51" || b != "50" {
		t.Fatalf("802.3ad split %s/%s", a, b)
	}
}
