package sim

import (
	"syscall"
	"testing"

	"github.com/vflag/vflag/eswitch"
)

// TestRateRules: the devlink-rate rules of rate.go, one case each, on a PF
// with 2 VFs in switchdev (leaves at ports 1 and 2) unless legacy.
func TestRateRules(t *testing.T) {
	dl := eswitch.Devlink{Bus: "pci", Device: pf0}
	const mb = eswitch.BytesPerMbit
	node := func(h *Host) error { return h.AddRateNode(dl, "t1", 0, 1000*mb) }
	tests := []struct {
		name   string
		legacy bool
		op     func(h *Host) error
		errno  syscall.Errno
		msg    string
	}{
		{"leaf rates", false, func(h *Host) error { return h.SetRateLeaf(dl, 1, 10*mb, 100*mb) }, 0, ""},
		{"tx_share above tx_max accepted", false, func(h *Host) error { return h.SetRateLeaf(dl, 1, 200*mb, 100*mb) }, 0, ""},
		{"not whole Mbit/s", false, func(h *Host) error { return h.SetRateLeaf(dl, 1, 0, 1000) }, syscall.EINVAL, "not in link speed units of 1Mbps"},
		{"unknown port", false, func(h *Host) error { return h.SetRateLeaf(dl, 3, 0, mb) }, syscall.ENODEV, ""},
		{"no leaf in legacy", true, func(h *Host) error { return h.SetRateLeaf(dl, 1, 0, mb) }, syscall.ENODEV, ""},
		{"node in legacy", true, node, syscall.EOPNOTSUPP, "only in switchdev"},
		{"node twice", false, func(h *Host) error { node(h); return node(h) }, syscall.EEXIST, ""},
		{"unknown parent", false, func(h *Host) error { return h.SetRateLeafParent(dl, 1, "t9") }, syscall.ENODEV, ""},
		{"parent", false, func(h *Host) error { node(h); return h.SetRateLeafParent(dl, 1, "t1") }, 0, ""},
		{"noparent without one", false, func(h *Host) error { return h.SetRateLeafParent(dl, 1, "") }, 0, ""},
		{"second parent, even the same", false, func(h *Host) error {
			node(h)
			h.SetRateLeafParent(dl, 1, "t1")
			return h.SetRateLeafParent(dl, 1, "t1")
		}, syscall.EBUSY, "already has parent"},
		{"delete a node with a child", false, func(h *Host) error {
			node(h)
			h.SetRateLeafParent(dl, 2, "t1")
			return h.DelRateNode(dl, "t1")
		}, syscall.EBUSY, "Node has children"},
		{"numvfs 0 in switchdev destroys every node (mlx5_eswitch_disable_sriov)", false, func(h *Host) error {
			node(h)
			h.SetRateLeafParent(dl, 2, "t1")
			if err := h.FS().WriteFile("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", []byte("0")); err != nil {
				return err
			}
			return h.DelRateNode(dl, "t1")
		}, syscall.ENODEV, `rate node "t1" not found`},
		{"delete unknown node", false, func(h *Host) error { return h.DelRateNode(dl, "t1") }, syscall.ENODEV, ""},
		{"mode change while a node exists", false, func(h *Host) error {
			node(h)
			return h.SetEswitchMode(dl, eswitch.ModeLegacy)
		}, syscall.EBUSY, "Rate node(s) exists."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			x.vfs(pf0, "2")
			if !tc.legacy {
				x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
			}
			x.settle()
			err := tc.op(x.h)
			if tc.errno == 0 {
				x.ok(err)
				return
			}
			checkErrno(t, err, tc.errno, tc.msg)
		})
	}
}

// TestRateLeafLifetime: a leaf is born with no limit and no parent when
// the VF port appears, shows in Rates, and a VF made again gets a fresh one.
func TestRateLeafLifetime(t *testing.T) {
	x := newTH(t, testSpec())
	dl := eswitch.Devlink{Bus: "pci", Device: pf0}
	x.vfs(pf0, "2")
	x.ok(x.mode(pf0, eswitch.ModeSwitchdev))
	x.settle()
	x.ok(x.h.SetRateLeaf(dl, 1, 0, eswitch.BytesPerMbit))
	rates, err := x.h.Rates()
	x.ok(err)
	if len(rates) != 2 || rates[0].PortIndex != 1 || rates[0].TxMax != eswitch.BytesPerMbit || rates[1].PortIndex != 2 {
		t.Fatalf("rates %+v", rates)
	}
	x.vfs(pf0, "0")
	if rates, _ := x.h.Rates(); len(rates) != 0 {
		t.Fatalf("leaves without VFs: %+v", rates)
	}
	x.vfs(pf0, "2")
	x.settle()
	if rates, _ := x.h.Rates(); len(rates) != 2 || rates[0].TxMax != 0 {
		t.Fatalf("a VF made again keeps its old leaf: %+v", rates)
	}
}
