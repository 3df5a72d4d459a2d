package hook

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/sriov"
)

// recordFS records the paths read through it.
type recordFS struct {
	sysfs.FS
	mu    sync.Mutex
	reads []string // "op path"
}

func (r *recordFS) note(op, p string) {
	r.mu.Lock()
	r.reads = append(r.reads, op+" "+p)
	r.mu.Unlock()
}

func (r *recordFS) ReadFile(p string) ([]byte, error) { r.note("read", p); return r.FS.ReadFile(p) }
func (r *recordFS) ReadDir(p string) ([]string, error) {
	r.note("readdir", p)
	return r.FS.ReadDir(p)
}
func (r *recordFS) Readlink(p string) (string, error) {
	r.note("readlink", p)
	return r.FS.Readlink(p)
}

// recordedHost opens the bed's host with its sysfs reads recorded in rec.
func (b *bed) recordedHost(rec *recordFS) func(*config.Config) (*host.Host, error) {
	return func(*config.Config) (*host.Host, error) {
		h, err := host.Open(host.Options{SimDir: b.simDir, SimSpec: b.cfg.Sim, OVSDB: b.cfg.OVSDB, Libvirt: b.cfg.Libvirt})
		if err != nil {
			return nil, err
		}
		rec.FS = h.FS
		h.FS, h.PCI.FS = rec, rec
		return h, nil
	}
}

// listed are the reads that list the VFs of the bed's PFs: a read of a PF's
// directory, or of a virtfn link of ens1f0np0 (0000:61:00.0) other than
// the one given.
func listed(reads []string, virtfn string) []string {
	var bad []string
	for _, r := range reads {
		for _, pf := range []string{"0000:61:00.0", "0000:61:00.1"} {
			dir := "/sys/bus/pci/devices/" + pf
			if r == "readdir "+dir || strings.HasPrefix(r, "readlink "+dir+"/virtfn") && r != "readlink /sys/bus/pci/devices/0000:61:00.0/"+virtfn {
				bad = append(bad, r)
			}
		}
	}
	return bad
}

// TestPrepareReadsOnlyItsVF: prepare finds the domain's VF through its
// physfn link and the one virtfn link of its index, without listing the
// VFs of the group's PFs.
func TestPrepareReadsOnlyItsVF(t *testing.T) {
	b := newBed(t)
	rec := &recordFS{}
	o := b.opts("prepare", "begin")
	o.Host = b.recordedHost(rec)
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if got := b.vfMAC(); got != domMAC {
		t.Fatalf("VF MAC after prepare = %s, want %s", got, domMAC)
	}
	if bad := listed(rec.reads, "virtfn1"); len(bad) > 0 || !slices.Contains(rec.reads, "readlink /sys/bus/pci/devices/0000:61:00.3/physfn") {
		t.Fatalf("prepare listed VFs (%q); reads: %q", bad, rec.reads)
	}
	if err := Run(context.Background(), b.opts("release", "end")); err != nil {
		t.Fatal(err)
	}
	b.assertReleased()
}

// TestVFIndex: the index comes from the PF's offset and stride and is
// checked against its virtfn link; where they disagree, the PF's VFs are
// listed.
func TestVFIndex(t *testing.T) {
	const pf, vf1, other = "0000:61:00.0", "0000:61:00.3", "0000:62:00.1"
	tests := []struct {
		name, offset, stride string
		vf                   sriov.Addr
		want                 int
		ok                   bool
	}{
		{"offset and stride", "2", "1", vf1, 1, true},
		{"wrong offset: listed", "1", "1", vf1, 1, true},
		{"no stride: listed", "2", "", vf1, 1, true},
		{"not a VF of the PF", "2", "1", other, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "sys/bus/pci/devices", pf)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			files := map[string]string{"sriov_offset": tc.offset + "\n", "sriov_stride": tc.stride + "\n"}
			for name, s := range files {
				if strings.TrimSpace(s) == "" {
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for i, v := range []string{"0000:61:00.2", vf1} {
				if err := os.Symlink("../"+v, filepath.Join(dir, "virtfn"+string(rune('0'+i)))); err != nil {
					t.Fatal(err)
				}
			}
			f := sysfs.Dir(root)
			got, ok := vfIndex(&host.Host{FS: f, PCI: sriov.Host{FS: f}}, eswitch.PF{Dev: sriov.PCIDevice(pf)}, pf, tc.vf)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("vfIndex(%s) = %d, %v; want %d, %v", tc.vf, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestNetworkHookReadsOnlyItsVF: the network hook finds a port's VF as the
// qemu hook finds a domain's (vfAt): through its physfn link and the one
// virtfn link of its index, without listing the VFs of the group's PFs; and
// it puts the portgroup's VLAN on the VF's representor port.
func TestNetworkHookReadsOnlyItsVF(t *testing.T) {
	b := newBed(t)
	cfg := *b.cfg
	cfg.Groups = slices.Clone(cfg.Groups)
	cfg.Groups[0].Network = &config.Network{Portgroups: []config.Portgroup{{Name: "t", VLAN: 300, Default: true}}}
	// VF 0 of ens1f0np0 (its representor's port is on the bridge) in a
	// port of the group's pool, as libvirt hands it to the hook.
	net, err := libvirtx.NetworkXML(libvirtx.NetworkSpec{Name: cfg.Groups[0].NetworkName(), Owner: "lag0", PCIs: []string{"0000:61:00.2"},
		Portgroups: []libvirtx.NetworkPortgroup{{Name: "t", VLAN: 300, Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	data := "<hookData>" + net + `<networkport><uuid>aaaaaaaa-0000-0000-0000-000000000001</uuid>
  <owner><name>vm-a</name><uuid>11111111-2222-3333-4444-555555555555</uuid></owner>
  <mac address='52:54:00:aa:00:01'/><group>t</group>
  <plug type='hostdev-pci' managed='yes'><address domain='0x0000' bus='0x61' slot='0x00' function='0x2'/></plug>
</networkport></hookData>`
	rec := &recordFS{}
	o := NetworkOptions{Network: cfg.Groups[0].NetworkName(), Op: "port-created", SubOp: "begin", XML: strings.NewReader(data),
		Config: func() (*config.Config, error) { return &cfg, nil },
		Host:   b.recordedHost(rec)}
	if err := RunNetwork(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if bad := listed(rec.reads, "virtfn0"); len(bad) > 0 || !slices.Contains(rec.reads, "readlink /sys/bus/pci/devices/0000:61:00.2/physfn") {
		t.Fatalf("the network hook listed VFs (%q); reads: %q", bad, rec.reads)
	}
	h := b.host()
	defer h.Close()
	pf, err := eswitch.ResolvePF(h.Kernel, h.FS, "ens1f0np0")
	if err != nil {
		t.Fatal(err)
	}
	reps, err := eswitch.Representors(h.Kernel, h.FS, pf)
	if err != nil {
		t.Fatal(err)
	}
	if tag := strings.TrimSpace(b.srv.MustVsctl("get", "Port", reps[0], "tag")); tag != "300" {
		t.Errorf("representor %s's port tag after port-created = %s, want the portgroup's 300", reps[0], tag)
	}
}
