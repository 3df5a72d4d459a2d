package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/report"
	"github.com/vflag/vflag/internal/status"
)

// noLibvirtdConfig is a legacy group on the simulated NIC of a host without
// libvirtd (a DPDK or container host, or a libvirt host in maintenance):
// the config's libvirt URI names a socket nobody listens on, and no OVS.
func noLibvirtdConfig(dir string, numvfs int) string {
	return fmt.Sprintf(`
ovsdb: unix:%s/no-db.sock
libvirt: qemu+unix:///system?socket=%s/no-libvirt-sock
groups:
  - name: leg0
    eswitch: legacy
    pfs: [ens1f0np0]
    numvfs: %d
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:20:00:00"}
sim:
  nics:
    - name: cx6lx
      total_vfs: 8
      pfs:
        - {pci: "0000:61:00.0", netdev: ens1f0np0}
        - {pci: "0000:61:00.1", netdev: ens1f1np1}
  latency:
    vf_create: 1ms
`, dir, dir, numvfs)
}

// TestDownWithoutLibvirtd (issue 37): on a host without libvirtd, down of
// a legacy group whose VFs nobody holds succeeds without --force (the gate
// asks the kernel); a VF bound to vfio-pci whose group a process holds
// (a DPDK application) makes down and a numvfs change refuse, naming the
// pid and the command, plan names it on the numvfs step and status on the
// VF; once the process is gone, down goes through without --force.
func TestDownWithoutLibvirtd(t *testing.T) {
	dir := t.TempDir()
	b := &bed{t: t, simDir: filepath.Join(dir, "sim"), state: filepath.Join(dir, "state"), config: filepath.Join(dir, "vflag.yaml")}
	b.useConfig(noLibvirtdConfig(dir, 2))
	b.mustVflag(0, "up")
	b.mustVflag(0, "down")
	if got := b.simDump(); !strings.Contains(got, "numvfs=0") || strings.Contains(got, "numvfs=2") {
		t.Fatalf("down left VFs:\n%s", got)
	}

	b.mustVflag(0, "up")
	const vf = "0000:61:00.3" // VF 1, not in the config: a DPDK application's
	h := b.openSim(t)
	f := h.FS()
	// In this order: an override written after the probe finds the VF
	// already on mlx5_core (the probe binds the NIC's own driver).
	for _, w := range [][2]string{{"/sys/bus/pci/devices/" + vf + "/driver_override", "vfio-pci"}, {"/sys/bus/pci/drivers_probe", vf}} {
		if err := f.WriteFile(w[0], []byte(w[1])); err != nil {
			t.Fatal(err)
		}
	}
	g, err := h.IOMMUGroup(vf)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := h.Spawn("dpdk-testpmd", "-a", vf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(pid, fmt.Sprintf("/dev/vfio/%d", g)); err != nil {
		t.Fatal(err)
	}
	h.Close()
	held := fmt.Sprintf("VF %s is held by pid %d (dpdk-testpmd) through /dev/vfio/%d", vf, pid, g)

	before := b.simDump()
	_, errs, code := b.vflag("down")
	if code != 1 || !strings.Contains(errs, "refusing to remove VFs in use: "+held) {
		t.Fatalf("down with the VF held: exit %d\n%s\nwant a refusal naming %q", code, errs, held)
	}
	b.useConfig(noLibvirtdConfig(dir, 3))
	_, errs, code = b.vflag("up")
	if code != 1 || !strings.Contains(errs, "refusing a disruptive change") || !strings.Contains(errs, "would break: "+held) {
		t.Fatalf("up with numvfs 2 -> 3 and the VF held: exit %d\n%s\nwant a refusal naming %q", code, errs, held)
	}
	if b.simDump() != before {
		t.Fatal("a refused run changed the host")
	}
	out := b.mustVflag(0, "plan", "-o", "json")
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	named := false
	for _, s := range rep.Steps {
		if s.ID == "sriov.numvfs/pci/0000:61:00.0" {
			named = s.Disruptive && strings.Join(s.Holders, "|") == held
		}
	}
	if !named {
		t.Errorf("plan -o json does not name the holder on the numvfs step:\n%s", out)
	}
	if text := b.mustVflag(0, "plan"); !strings.Contains(text, "[disruptive; in use: "+held+"]") {
		t.Errorf("plan does not name the holder:\n%s", text)
	}
	b.useConfig(noLibvirtdConfig(dir, 2))
	if text := b.statusAny(); !strings.Contains(text, fmt.Sprintf("held by pid %d (dpdk-testpmd) through /dev/vfio/%d", pid, g)) {
		t.Errorf("status does not show the VF's holder:\n%s", text)
	}
	if tree := b.statusAny("--tree"); !strings.Contains(tree, fmt.Sprintf("held by pid %d (dpdk-testpmd) through /dev/vfio/%d", pid, g)) {
		t.Errorf("status --tree does not show the VF's holder:\n%s", tree)
	}
	var hs status.HostStatus
	if err := json.Unmarshal([]byte(b.statusAny("-o", "json")), &hs); err != nil {
		t.Fatal(err)
	}
	for _, v := range hs.Groups[0].VFs {
		if v.PCI == vf && (len(v.Holders) != 1 || v.Holders[0].PID != pid || v.Holders[0].Command != "dpdk-testpmd") {
			t.Errorf("status -o json: VF %s holders %+v", vf, v.Holders)
		}
	}

	h = b.openSim(t)
	if err := h.Exit(pid); err != nil {
		t.Fatal(err)
	}
	h.Close()
	b.mustVflag(0, "down")
	if got := b.simDump(); strings.Contains(got, "numvfs=2") {
		t.Fatalf("down left VFs:\n%s", got)
	}
}
