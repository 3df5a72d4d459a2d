package main

import (
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// TestFirmwareNumVFsAbove64 is mlx5's NUM_OF_VFS rule (issue 36,
// KERNEL-FACTS §5): on the example's simulated switchdev NIC with
// sriov_totalvfs 127, doctor fails the group and up refuses it before any
// write, both naming each PF, its sriov_totalvfs and the fix (mstconfig
// NUM_OF_VFS=64, then a firmware reset); the same NIC with sriov_totalvfs
// 64 converges with the LAG active. Without preflight's check, up would
// build the bond, wait for a LAG that never comes, and roll back.
func TestFirmwareNumVFsAbove64(t *testing.T) {
	d := startDaemons(t)
	t.Run("127", func(t *testing.T) {
		b := newBed(t, d, strings.Replace(exampleConfig, "total_vfs: 8", "total_vfs: 127", 1))
		b.initSim()
		base := b.dump()
		out, _, code := b.vflag("doctor")
		if code != 1 {
			t.Fatalf("doctor: exit %d, want 1\n%s", code, out)
		}
		for _, want := range []string{
			"ens1f0np0 (0000:61:00.0) has sriov_totalvfs 127", "ens1f1np1 (0000:61:00.1) has sriov_totalvfs 127",
			"mstconfig -d 0000:61:00.0 -y set NUM_OF_VFS=64", "mstfwreset -d 0000:61:00.0 -y reset",
			"mstconfig -d 0000:61:00.1 -y set NUM_OF_VFS=64", "mstfwreset -d 0000:61:00.1 -y reset",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor does not say %q:\n%s", want, out)
			}
		}
		_, errs, code := b.vflag("up")
		if code != 1 {
			t.Fatalf("up: exit %d, want 1\n%s", code, errs)
		}
		for _, want := range []string{
			"preflight failed",
			`groups[0].pfs[0]: "ens1f0np0" ens1f0np0 (0000:61:00.0) has sriov_totalvfs 127`,
			`groups[0].pfs[1]: "ens1f1np1" ens1f1np1 (0000:61:00.1) has sriov_totalvfs 127`,
			"fix: mstconfig -d 0000:61:00.0 -y set NUM_OF_VFS=64, then reset the firmware: mstfwreset -d 0000:61:00.0 -y reset",
		} {
			if !strings.Contains(errs, want) {
				t.Errorf("up does not say %q:\n%s", want, errs)
			}
		}
		if got := b.dump(); got != base {
			t.Fatalf("up wrote to the host:\n%s", testbed.DiffText(base, got))
		}
	})
	t.Run("64", func(t *testing.T) {
		b := newBed(t, d, strings.Replace(exampleConfig, "total_vfs: 8", "total_vfs: 64", 1))
		if out := b.mustVflag(0, "doctor"); !strings.Contains(out, "numvfs 4 per PF fits sriov_totalvfs: ens1f0np0 64, ens1f1np1 64") {
			t.Errorf("doctor does not pass the VF count:\n%s", out)
		}
		rep := b.upJSON(2)
		lag := ""
		for _, s := range rep.Steps {
			if s.Kind == "lag.wait" {
				lag = s.Summary
			}
		}
		if !strings.HasPrefix(lag, "hardware LAG active") {
			t.Fatalf("up's LAG wait: %q", lag)
		}
		b.mustVflag(0, "status")
		b.mustVflag(0, "down")
	})
}
