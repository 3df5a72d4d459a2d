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

// TestPrepareReadsOnlyItsVF: prepare finds the domain's VF through its
// physfn link and the one virtfn link of its index, without listing the
// VFs of the group's PFs.
func TestPrepareReadsOnlyItsVF(t *testing.T) {
	b := newBed(t)
	rec := &recordFS{}
	o := b.opts("prepare", "begin")
	o.Host = func(*config.Config) (*host.Host, error) {
		h, err := host.Open(host.Options{SimDir: b.simDir, SimSpec: b.cfg.Sim, OVSDB: b.cfg.OVSDB, Libvirt: b.cfg.Libvirt})
		if err != nil {
			return nil, err
		}
		rec.FS = h.FS
		h.FS, h.PCI.FS = rec, rec
		return h, nil
	}
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if got := b.vfMAC(); got != domMAC {
		t.Fatalf("VF MAC after prepare = %s, want %s", got, domMAC)
	}
	var bad []string
	for _, r := range rec.reads {
		for _, pf := range []string{"0000:61:00.0", "0000:61:00.1"} {
			dir := "/sys/bus/pci/devices/" + pf
			if r == "readdir "+dir || strings.HasPrefix(r, "readlink "+dir+"/virtfn") && r != "readlink "+dir+"/virtfn1" {
				bad = append(bad, r)
			}
		}
	}
	if len(bad) > 0 || !slices.Contains(rec.reads, "readlink /sys/bus/pci/devices/0000:61:00.3/physfn") {
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
			p := &preparer{h: &host.Host{FS: f, PCI: sriov.Host{FS: f}}}
			got, ok := p.vfIndex(eswitch.PF{Dev: sriov.PCIDevice(pf)}, pf, tc.vf)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("vfIndex(%s) = %d, %v; want %d, %v", tc.vf, got, ok, tc.want, tc.ok)
			}
		})
	}
}
