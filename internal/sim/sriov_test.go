package sim

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	pf := func(pci, nd string) PFSpec { return PFSpec{PCI: pci, Netdev: nd} }
	tests := []struct {
		name string
		spec *Spec
		want string // substring of the error; "" for success
	}{
		{"nil", nil, "no NICs"},
		{"no nics", &Spec{}, "no NICs"},
		{"ok", testSpec(), ""},
		{"one pf", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:03:00.0", "ens1")}}}}, ""},
		{"no pfs", &Spec{NICs: []NICSpec{{Name: "a"}}}, "1 or 2 PFs"},
		{"three pfs", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:03:00.0", "a"), pf("0000:03:00.1", "b"), pf("0000:03:00.2", "c")}}}}, "1 or 2 PFs"},
		{"bad pci", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("61:00.0", "p0")}}}}, "bad PCI address"},
		{"bad function", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:00.8", "p0")}}}}, "bad PCI address"},
		{"bad device", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:20.0", "p0")}}}}, "device number"},
		{"pfs on two slots", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:00.0", "p0"), pf("0000:62:00.0", "p1")}}}}, "same dddd:bb:dd"},
		{"same pf twice", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:00.0", "p0"), pf("0000:61:00.0", "p1")}}}}, "both PFs"},
		{"bad netdev", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:00.0", "a/b")}}}}, "bad interface name"},
		{"long netdev", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:00.0", "abcdefghijklmnop")}}}}, "bad interface name"},
		{"netdev lo", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:00.0", "lo")}}}}, "loopback"},
		{"dup netdev", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:00.0", "p0"), pf("0000:61:00.1", "p0")}}}}, "already"},
		{"bad mac", &Spec{NICs: []NICSpec{{PFs: []PFSpec{{PCI: "0000:61:00.0", Netdev: "p0", MAC: "01:00:00:00:00:01"}}}}}, "unicast"},
		{"bad switch id", &Spec{NICs: []NICSpec{{SwitchID: "abc", PFs: []PFSpec{pf("0000:61:00.0", "p0")}}}}, "16 hex"},
		{"bad nic name", &Spec{NICs: []NICSpec{{Name: "a b", PFs: []PFSpec{pf("0000:61:00.0", "p0")}}}}, "name"},
		{"dup nic name", &Spec{NICs: []NICSpec{{Name: "a", PFs: []PFSpec{pf("0000:61:00.0", "p0")}}, {Name: "a", PFs: []PFSpec{pf("0000:81:00.0", "q0")}}}}, "duplicate"},
		{"negative vfs", &Spec{NICs: []NICSpec{{TotalVFs: -1, PFs: []PFSpec{pf("0000:61:00.0", "p0")}}}}, "negative"},
		{"vfs past bus ff", &Spec{NICs: []NICSpec{{TotalVFs: 300, PFs: []PFSpec{pf("0000:ff:00.0", "p0")}}}}, "past bus ff"},
		{"vf collides with other nic", &Spec{NICs: []NICSpec{
			{Name: "a", PFs: []PFSpec{pf("0000:61:00.0", "p0"), pf("0000:61:00.1", "p1")}},
			{Name: "b", PFs: []PFSpec{pf("0000:61:01.0", "q0")}},
		}}, "collides"},
		{"negative latency", &Spec{NICs: []NICSpec{{PFs: []PFSpec{pf("0000:61:00.0", "p0")}}}, Latency: Latency{VFCreate: -1}}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(t.TempDir(), tc.spec)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	x := newTH(t, testSpec())
	if got := x.read("/sys/bus/pci/devices/0000:61:00.0/sriov_totalvfs"); got != "8\n" {
		t.Errorf("sriov_totalvfs = %q", got)
	}
	id := x.read("/sys/class/net/p0/phys_switch_id")
	if len(id) != 17 || strings.ToLower(id) != id {
		t.Errorf("phys_switch_id = %q, want 16 lowercase hex digits", id)
	}
	if got := x.read("/sys/class/net/p1/phys_switch_id"); got != id {
		t.Errorf("PF1 switch id %q, PF0 %q: a NIC's PFs share it", got, id)
	}
	if got := x.readlink("/sys/bus/pci/devices/0000:61:00.0/driver"); got != "../../../bus/pci/drivers/mlx5_core" {
		t.Errorf("driver link %q", got)
	}
}

func TestVFAddresses(t *testing.T) {
	tests := []struct {
		name      string
		total     int
		pf        int
		vf        int
		want      string
		wantOff   string
		wantTotal string
	}{
		{"pf0 vf0", 8, 0, 0, "0000:61:00.2", "2\n", "8\n"},
		{"pf0 vf5 crosses device", 8, 0, 5, "0000:61:00.7", "2\n", "8\n"},
		{"pf0 vf6", 8, 0, 6, "0000:61:01.0", "2\n", "8\n"},
		{"pf0 last", 8, 0, 7, "0000:61:01.1", "2\n", "8\n"},
		{"pf1 vf0 after pf0's last", 8, 1, 0, "0000:61:01.2", "9\n", "8\n"},
		{"pf1 vf0 with 127", 127, 1, 0, "0000:61:10.1", "128\n", "127\n"},
		{"pf1 carries into next bus", 128, 1, 126, "0000:62:00.0", "129\n", "128\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec()
			s.NICs[0].TotalVFs = tc.total
			x := newTH(t, s)
			pf := fmt.Sprintf("0000:61:00.%d", tc.pf)
			x.write("/sys/bus/pci/devices/"+pf+"/sriov_drivers_autoprobe", "0")
			x.write("/sys/bus/pci/devices/"+pf+"/sriov_numvfs", fmt.Sprint(tc.vf+1))
			x.settle()
			if got := x.readlink(fmt.Sprintf("/sys/bus/pci/devices/%s/virtfn%d", pf, tc.vf)); got != "../"+tc.want {
				t.Errorf("virtfn%d -> %q, want ../%s", tc.vf, got, tc.want)
			}
			if got := x.readlink("/sys/bus/pci/devices/" + tc.want + "/physfn"); got != "../"+pf {
				t.Errorf("physfn -> %q", got)
			}
			if got := x.read("/sys/bus/pci/devices/" + pf + "/sriov_offset"); got != tc.wantOff {
				t.Errorf("sriov_offset %q, want %q", got, tc.wantOff)
			}
			if got := x.read("/sys/bus/pci/devices/" + pf + "/sriov_stride"); got != "1\n" {
				t.Errorf("sriov_stride %q", got)
			}
			if got := x.read("/sys/bus/pci/devices/" + tc.want + "/device"); got != "0x101e\n" {
				t.Errorf("VF device id %q", got)
			}
			if got := x.read("/sys/bus/pci/devices/" + pf + "/sriov_vf_device"); got != "101e\n" {
				t.Errorf("sriov_vf_device %q", got)
			}
			// Through the physfn link, as tools do.
			if got := x.read("/sys/bus/pci/devices/" + tc.want + "/physfn/sriov_totalvfs"); got != tc.wantTotal {
				t.Errorf("physfn/sriov_totalvfs %q", got)
			}
		})
	}
}

func TestNumVFsRules(t *testing.T) {
	const p = "/sys/bus/pci/devices/0000:61:00.0/"
	type step struct {
		write string
		errno syscall.Errno // 0: success
		want  string        // sriov_numvfs afterwards
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"above totalvfs is ERANGE", []step{{"9", syscall.ERANGE, "0\n"}}},
		{"not a number is EINVAL", []step{{"four", syscall.EINVAL, "0\n"}, {"-1", syscall.EINVAL, "0\n"}, {"70000", syscall.EINVAL, "0\n"}}},
		{"hex and newline accepted", []step{{"0x4\n", 0, "4\n"}}},
		{"enable", []step{{"4", 0, "4\n"}}},
		{"same value is a no-op", []step{{"4", 0, "4\n"}, {"4\n", 0, "4\n"}}},
		{"non-zero to non-zero is EBUSY", []step{{"4", 0, "4\n"}, {"2", syscall.EBUSY, "4\n"}, {"8", syscall.EBUSY, "4\n"}}},
		{"zero first, then another count", []step{{"4", 0, "4\n"}, {"0", 0, "0\n"}, {"2", 0, "2\n"}}},
		{"zero when zero", []step{{"0", 0, "0\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			for _, s := range tc.steps {
				if s.errno == 0 {
					x.write(p+"sriov_numvfs", s.write)
				} else {
					x.writeErr(p+"sriov_numvfs", s.write, s.errno)
				}
				if got := x.read(p + "sriov_numvfs"); got != s.want {
					t.Fatalf("after writing %q: sriov_numvfs %q, want %q", s.write, got, s.want)
				}
			}
		})
	}
	t.Run("EBUSY is logged", func(t *testing.T) {
		x := newTH(t, testSpec())
		x.write(p+"sriov_numvfs", "4")
		x.writeErr(p+"sriov_numvfs", "2", syscall.EBUSY)
		if d := x.h.Dump(); !strings.Contains(d, "4 VFs already enabled. Disable before enabling 2 VFs") {
			t.Errorf("dmesg lacks the EBUSY message:\n%s", d)
		}
	})
}

func TestVFCreationIsAsynchronous(t *testing.T) {
	x := newTH(t, testSpec())
	const p = "/sys/bus/pci/devices/0000:61:00.0/"
	x.write(p+"sriov_drivers_autoprobe", "0")
	x.write(p+"sriov_numvfs", "3")
	// The write returns at once; nothing exists yet.
	if x.exists(p + "virtfn0") {
		t.Fatal("virtfn0 exists right after the write")
	}
	if got := x.ls("/sys/bus/pci/devices"); !cmp.Equal(got, []string{"0000:61:00.0", "0000:61:00.1"}) {
		t.Fatalf("devices %v", got)
	}
	for i := range 3 {
		x.clk.Advance(latVF - time.Nanosecond)
		if x.exists(fmt.Sprintf("%svirtfn%d", p, i)) {
			t.Fatalf("virtfn%d exists before %v", i, latVF*time.Duration(i+1))
		}
		x.clk.Advance(time.Nanosecond)
		if !x.exists(fmt.Sprintf("%svirtfn%d", p, i)) {
			t.Fatalf("virtfn%d missing at %v", i, latVF*time.Duration(i+1))
		}
		if x.exists(fmt.Sprintf("%svirtfn%d", p, i+1)) {
			t.Fatalf("virtfn%d early", i+1)
		}
	}
	want := []string{"0000:61:00.0", "0000:61:00.1", "0000:61:00.2", "0000:61:00.3", "0000:61:00.4"}
	if got := x.ls("/sys/bus/pci/devices"); !cmp.Equal(got, want) {
		t.Fatalf("devices %v, want %v", got, want)
	}
}

func TestAutoprobe(t *testing.T) {
	const p = "/sys/bus/pci/devices/0000:61:00.0/"
	tests := []struct {
		autoprobe  string
		wantDriver bool
	}{{"1", true}, {"0", false}, {"y\n", true}, {"off", false}}
	for _, tc := range tests {
		t.Run(tc.autoprobe, func(t *testing.T) {
			x := newTH(t, testSpec())
			if got := x.read(p + "sriov_drivers_autoprobe"); got != "1\n" {
				t.Fatalf("default autoprobe %q", got)
			}
			x.write(p+"sriov_drivers_autoprobe", tc.autoprobe)
			x.write(p+"sriov_numvfs", "2")
			x.settle()
			vf := "/sys/bus/pci/devices/0000:61:00.2/"
			if got := x.exists(vf + "driver"); got != tc.wantDriver {
				t.Fatalf("driver link exists=%v, want %v", got, tc.wantDriver)
			}
			if got := x.exists(vf + "net"); got != tc.wantDriver {
				t.Fatalf("net dir exists=%v, want %v", got, tc.wantDriver)
			}
			if !tc.wantDriver {
				return
			}
			if got := x.readlink(vf + "driver"); got != "../../../bus/pci/drivers/mlx5_core" {
				t.Errorf("driver -> %q", got)
			}
			names := x.ls(vf + "net")
			if len(names) != 1 || !strings.HasPrefix(names[0], "eth") {
				t.Fatalf("VF net dir %v, want one eth<N>", names)
			}
			if got := x.readlink("/sys/class/net/" + names[0] + "/device"); got != "../../../0000:61:00.2" {
				t.Errorf("VF netdev device -> %q", got)
			}
			x.readErr("/sys/class/net/"+names[0]+"/phys_port_name", syscall.EOPNOTSUPP)
			x.readErr("/sys/class/net/"+names[0]+"/phys_switch_id", syscall.EOPNOTSUPP)
		})
	}
	t.Run("bad value", func(t *testing.T) {
		x := newTH(t, testSpec())
		x.writeErr(p+"sriov_drivers_autoprobe", "maybe", syscall.EINVAL)
		x.writeErr(p+"sriov_drivers_autoprobe", "", syscall.EINVAL)
	})
}

func TestZeroRemovesEveryVF(t *testing.T) {
	x := newTH(t, testSpec())
	const p = "/sys/bus/pci/devices/0000:61:00.0/"
	x.write(p+"sriov_numvfs", "3") // autoprobe: all bound to mlx5_core
	x.settle()
	// VF 0 to vfio-pci, as libvirt would.
	x.write("/sys/bus/pci/drivers/mlx5_core/unbind", "0000:61:00.2")
	x.write("/sys/bus/pci/devices/0000:61:00.2/driver_override", "vfio-pci")
	x.write("/sys/bus/pci/drivers_probe", "0000:61:00.2")
	if got := x.readlink("/sys/bus/pci/devices/0000:61:00.2/driver"); !strings.HasSuffix(got, "/vfio-pci") {
		t.Fatalf("driver %q", got)
	}
	x.write(p+"sriov_numvfs", "0")
	if got := x.ls("/sys/bus/pci/devices"); !cmp.Equal(got, []string{"0000:61:00.0", "0000:61:00.1"}) {
		t.Fatalf("devices after 0: %v", got)
	}
	if got := x.ls("/sys/bus/pci/drivers/vfio-pci"); !cmp.Equal(got, []string{"bind", "unbind"}) {
		t.Fatalf("vfio-pci still holds %v", got)
	}
	if got := x.ls("/sys/class/net"); !cmp.Equal(got, []string{"lo", "p0", "p1"}) {
		t.Fatalf("netdevs after 0: %v", got)
	}
	for _, n := range x.ls(p) {
		if strings.HasPrefix(n, "virtfn") {
			t.Fatalf("%s left", n)
		}
	}
}

func TestBindUnbind(t *testing.T) {
	const vf = "0000:61:00.2"
	const drv = "/sys/bus/pci/drivers/"
	type step struct {
		path, data string
		errno      syscall.Errno
	}
	tests := []struct {
		name       string
		steps      []step
		wantDriver string // "" unbound
	}{
		{"unknown device", []step{{drv + "mlx5_core/bind", "0000:99:00.0", syscall.ENODEV}}, ""},
		{"vfio-pci without override does not match", []step{{drv + "vfio-pci/bind", vf, syscall.ENODEV}}, ""},
		{"mlx5_core matches by id", []step{{drv + "mlx5_core/bind", vf + "\n", 0}}, "mlx5_core"},
		{"already bound is EBUSY", []step{{drv + "mlx5_core/bind", vf, 0}, {drv + "mlx5_core/bind", vf, syscall.EBUSY}}, "mlx5_core"},
		{"override to vfio-pci then bind", []step{
			{"/sys/bus/pci/devices/" + vf + "/driver_override", "vfio-pci\n", 0},
			{drv + "mlx5_core/bind", vf, syscall.ENODEV},
			{drv + "vfio-pci/bind", vf, 0},
		}, "vfio-pci"},
		{"override then drivers_probe", []step{
			{"/sys/bus/pci/devices/" + vf + "/driver_override", "vfio-pci", 0},
			{"/sys/bus/pci/drivers_probe", vf, 0},
		}, "vfio-pci"},
		{"drivers_probe without override", []step{{"/sys/bus/pci/drivers_probe", vf, 0}}, "mlx5_core"},
		{"drivers_probe with unknown override binds nothing", []step{
			{"/sys/bus/pci/devices/" + vf + "/driver_override", "igbvf", 0},
			{"/sys/bus/pci/drivers_probe", vf, 0},
		}, ""},
		{"drivers_probe of unknown device", []step{{"/sys/bus/pci/drivers_probe", "0000:99:00.0", syscall.ENODEV}}, ""},
		{"unbind not bound", []step{{drv + "mlx5_core/unbind", vf, syscall.ENODEV}}, ""},
		{"unbind from the wrong driver", []step{{drv + "mlx5_core/bind", vf, 0}, {drv + "vfio-pci/unbind", vf, syscall.ENODEV}}, "mlx5_core"},
		{"unbind", []step{{drv + "mlx5_core/bind", vf, 0}, {drv + "mlx5_core/unbind", vf, 0}}, ""},
		{"PF is bound", []step{{drv + "mlx5_core/bind", "0000:61:00.0", syscall.EBUSY}}, ""},
		{"bind is write-only", []step{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTH(t, testSpec())
			x.write("/sys/bus/pci/devices/0000:61:00.0/sriov_drivers_autoprobe", "0")
			x.write("/sys/bus/pci/devices/0000:61:00.0/sriov_numvfs", "2")
			x.settle()
			for _, s := range tc.steps {
				if s.errno == 0 {
					x.write(s.path, s.data)
				} else {
					x.writeErr(s.path, s.data, s.errno)
				}
			}
			link, err := x.fs.Readlink("/sys/bus/pci/devices/" + vf + "/driver")
			got := ""
			if err == nil {
				got = link[strings.LastIndex(link, "/")+1:]
			}
			if got != tc.wantDriver {
				t.Fatalf("driver %q, want %q", got, tc.wantDriver)
			}
			hasNet := x.exists("/sys/bus/pci/devices/" + vf + "/net")
			if hasNet != (tc.wantDriver == "mlx5_core") {
				t.Fatalf("VF net dir exists=%v with driver %q", hasNet, tc.wantDriver)
			}
			if tc.wantDriver != "" {
				if got := x.ls(drv + tc.wantDriver); !contains(got, vf) {
					t.Fatalf("%s lists %v", tc.wantDriver, got)
				}
			}
			x.readErr(drv+"mlx5_core/bind", syscall.EACCES)
		})
	}
}

func TestDriverOverride(t *testing.T) {
	x := newTH(t, testSpec())
	x.write("/sys/bus/pci/devices/0000:61:00.0/sriov_numvfs", "1")
	x.settle()
	p := "/sys/bus/pci/devices/0000:61:00.2/driver_override"
	if got := x.read(p); got != "(null)\n" {
		t.Fatalf("unset override reads %q", got)
	}
	x.write(p, "vfio-pci\nrest")
	if got := x.read(p); got != "vfio-pci\n" {
		t.Fatalf("override %q", got)
	}
	x.write(p, "\n")
	if got := x.read(p); got != "(null)\n" {
		t.Fatalf("cleared override reads %q", got)
	}
	x.writeErr(p, strings.Repeat("x", 5000), syscall.EINVAL)
}

func TestPFUnbindNotModelled(t *testing.T) {
	x := newTH(t, testSpec())
	x.writeErr("/sys/bus/pci/drivers/mlx5_core/unbind", "0000:61:00.0", syscall.EPERM)
	x.writeErr("/sys/bus/pci/drivers/vfio-pci/unbind", "0000:61:00.0", syscall.ENODEV)
}

// The lookup fast paths (virtfn<i>, driver, and the other entries made
// without the netdev and VF scans) resolve exactly as the PCI function's
// directory lists them.
func TestPCIDirFastMatchesDir(t *testing.T) {
	x := newTH(t, testSpec())
	x.write("/sys/bus/pci/devices/"+pf0+"/sriov_numvfs", "3")
	x.clk.Advance(time.Second)
	x.write("/sys/bus/pci/drivers/mlx5_core/unbind", "0000:61:00.3")
	x.ok(x.h.view(func(st *state, now int64) error {
		tr := tree{st, now}
		for _, d := range st.pciDevs(now) {
			dir, fast := tr.pciDir(d), tr.pciDirFast(d)
			names := []string{"driver", "virtfn0", "virtfn2", "virtfn3", "virtfn01", "physfn", "nope"}
			for name := range dir.kids() {
				names = append(names, name)
			}
			for _, name := range names {
				want, got := dir.kids()[name], fast.lookup(name)
				if (want == nil) != (got == nil) || want != nil && (want.isLink() != got.isLink() || want.target != got.target) {
					t.Errorf("%s %s: fast lookup %+v, directory %+v", d.addr(), name, got, want)
				}
			}
		}
		return nil
	}))
}
