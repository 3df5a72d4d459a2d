package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"net"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vflag/vflag/eswitch"
)

// TestRandomOperations visits the operations in a random order (fixed seed)
// and checks the model's invariants after each one, through the same
// interfaces vflag uses.
func TestRandomOperations(t *testing.T) {
	total := map[string]int{}
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for k, v := range randomRun(t, seed, 200) {
				total[k] += v
			}
		})
	}
	// The invariants must not hold vacuously.
	if total["lag active"] == 0 || total["pf0 switchdev"] == 0 || total["vf netdev"] == 0 {
		t.Errorf("the runs never reached an active LAG, switchdev or a VF netdev: %v", total)
	}
}

func randomSpec() *Spec {
	return &Spec{
		NICs: []NICSpec{
			{Name: "nic0", TotalVFs: 64, PFs: []PFSpec{{PCI: "0000:61:00.0", Netdev: "p0"}, {PCI: "0000:61:00.1", Netdev: "p1"}}},
			{Name: "nic1", TotalVFs: 3, PFs: []PFSpec{{PCI: "0000:81:00.0", Netdev: "q0"}}},
		},
		Latency: Latency{VFCreate: time.Millisecond, ModeChange: time.Millisecond, LAGActivation: 5 * time.Millisecond},
	}
}

func randomRun(t *testing.T, seed int64, steps int) map[string]int {
	x := newTH(t, randomSpec())
	rng := rand.New(rand.NewSource(seed))
	pfs := []string{"0000:61:00.0", "0000:61:00.1", "0000:81:00.0"}
	pick := func(list []string) string {
		if len(list) == 0 {
			return "none"
		}
		return list[rng.Intn(len(list))]
	}
	vfAddrs := func() []string {
		var out []string
		for _, pf := range pfs {
			for _, n := range x.ls("/sys/bus/pci/devices/" + pf) {
				if strings.HasPrefix(n, "virtfn") {
					out = append(out, strings.TrimPrefix(x.readlink("/sys/bus/pci/devices/"+pf+"/"+n), "../"))
				}
			}
		}
		return out
	}
	linkNames := func() []string {
		ls, err := x.h.Links()
		x.ok(err)
		var out []string
		for _, l := range ls {
			out = append(out, l.Name)
		}
		return out
	}
	ops := []struct {
		name string
		do   func() (string, error)
	}{
		{"numvfs", func() (string, error) {
			pf := pick(pfs)
			n := pick([]string{"0", "0", "0", "1", "1", "2", "2", "3", "3", "64"})
			return pf + " " + n, x.fs.WriteFile("/sys/bus/pci/devices/"+pf+"/sriov_numvfs", []byte(n))
		}},
		{"autoprobe", func() (string, error) {
			pf, v := pick(pfs), pick([]string{"0", "1"})
			return pf + " " + v, x.fs.WriteFile("/sys/bus/pci/devices/"+pf+"/sriov_drivers_autoprobe", []byte(v))
		}},
		{"mode", func() (string, error) {
			pf, m := pick(pfs), pick([]string{"legacy", "switchdev"})
			return pf + " " + m, x.h.SetEswitchMode(dl(pf), m)
		}},
		{"bind", func() (string, error) {
			vf, drv := pick(vfAddrs()), pick([]string{"mlx5_core", "vfio-pci"})
			if drv == "vfio-pci" {
				_ = x.fs.WriteFile("/sys/bus/pci/devices/"+vf+"/driver_override", []byte(drv))
			}
			return vf + " " + drv, x.fs.WriteFile("/sys/bus/pci/drivers/"+drv+"/bind", []byte(vf))
		}},
		{"unbind", func() (string, error) {
			vf, drv := pick(vfAddrs()), pick([]string{"mlx5_core", "vfio-pci"})
			return vf + " " + drv, x.fs.WriteFile("/sys/bus/pci/drivers/"+drv+"/unbind", []byte(vf))
		}},
		{"probe", func() (string, error) {
			vf := pick(vfAddrs())
			_ = x.fs.WriteFile("/sys/bus/pci/devices/"+vf+"/driver_override", []byte(pick([]string{"", "vfio-pci"})))
			return vf, x.fs.WriteFile("/sys/bus/pci/drivers_probe", []byte(vf))
		}},
		{"addbond", func() (string, error) {
			name, mode := pick([]string{"bond0", "bond1"}), pick([]string{"802.3ad", "active-backup", "balance-xor", "balance-rr"})
			return name + " " + mode, x.h.AddBond(eswitch.BondSpec{Name: name, Mode: mode, Miimon: 100})
		}},
		{"delbond", func() (string, error) {
			name := pick([]string{"bond0", "bond1"})
			return name, x.h.DeleteLink(name)
		}},
		{"master", func() (string, error) {
			s, m := pick(linkNames()), pick([]string{"bond0", "bond1", "", ""})
			if rng.Intn(2) == 0 {
				_ = x.h.SetLinkUp(s, false)
			}
			return s + " " + m, x.h.SetMaster(s, m)
		}},
		{"enslave both PFs", func() (string, error) {
			b := pick([]string{"bond0", "bond1"})
			for _, p := range []string{"p0", "p1"} {
				_ = x.h.SetLinkUp(p, false)
				if err := x.h.SetMaster(p, b); err != nil {
					return b, err
				}
			}
			return b, nil
		}},
		{"pipeline", func() (string, error) {
			// vflag's order, so that runs reach an active LAG now and then.
			for _, vf := range vfAddrs() {
				if strings.HasPrefix(vf, "0000:61:") {
					for _, drv := range []string{"mlx5_core", "vfio-pci"} {
						_ = x.fs.WriteFile("/sys/bus/pci/drivers/"+drv+"/unbind", []byte(vf))
					}
				}
			}
			for _, pf := range pfs[:2] {
				if err := x.h.SetEswitchMode(dl(pf), eswitch.ModeSwitchdev); err != nil {
					return "", err
				}
			}
			b := pick([]string{"bond0", "bond1"})
			_ = x.h.AddBond(eswitch.BondSpec{Name: b, Mode: pick([]string{"802.3ad", "active-backup", "balance-xor"})})
			for _, p := range []string{"p0", "p1"} {
				_ = x.h.SetLinkUp(p, false)
				if err := x.h.SetMaster(p, b); err != nil {
					return b, err
				}
			}
			return b, nil
		}},
		{"up", func() (string, error) {
			s, up := pick(linkNames()), rng.Intn(2) == 0
			return fmt.Sprint(s, " ", up), x.h.SetLinkUp(s, up)
		}},
		{"vfmac", func() (string, error) {
			pf, vf := pick([]string{"p0", "p1", "q0", "lo"}), rng.Intn(4)
			mac := net.HardwareAddr{byte(rng.Intn(4)), 0x54, 0, 0, 0, byte(vf)}
			return fmt.Sprint(pf, vf, mac), x.h.SetVFMAC(pf, vf, mac)
		}},
		{"vfvlan", func() (string, error) {
			pf, vf, vlan := pick([]string{"p0", "p1", "q0"}), rng.Intn(4), rng.Intn(3)
			return fmt.Sprint(pf, vf, vlan), x.h.SetVFVlan(pf, vf, vlan)
		}},
		{"feature", func() (string, error) {
			s := pick(linkNames())
			return s, x.h.SetFeature(s, "hw-tc-offload", rng.Intn(2) == 0)
		}},
		{"time", func() (string, error) {
			d := time.Duration(rng.Intn(8)) * time.Millisecond
			x.clk.Advance(d)
			return d.String(), nil
		}},
		{"reopen", func() (string, error) {
			x.ok(x.h.Close())
			h, err := open(x.dir, nil, x.clk.Now, x.clk.Sleep)
			x.ok(err)
			x.h, x.fs = h, h.FS()
			return "", nil
		}},
	}
	t.Cleanup(func() { x.h.Close() })
	var history []string
	seen := map[string]int{}
	for i := range steps {
		op := ops[rng.Intn(len(ops))]
		arg, err := op.do()
		history = append(history, fmt.Sprintf("%d %s %s: %v", i, op.name, arg, err))
		if err != nil {
			var errno syscall.Errno
			var pe *fs.PathError
			if !errors.As(err, &errno) && !errors.As(err, &pe) {
				t.Fatalf("%s: error %v carries no errno", history[len(history)-1], err)
			}
		}
		seen["lag "+strings.TrimSpace(x.read(lagDir+"state"))]++
		if m, _ := x.h.EswitchMode(dl(pfs[0])); m == eswitch.ModeSwitchdev {
			seen["pf0 switchdev"]++
		}
		if err == nil {
			seen["ok "+op.name]++
		}
		for _, l := range linkNames() {
			if strings.HasPrefix(l, "eth") && x.exists("/sys/class/net/"+l+"/device/physfn") {
				seen["vf netdev"]++
				break
			}
		}
		if msg := checkInvariants(x); msg != "" {
			t.Fatalf("after:\n%s\ninvariant broken: %s\n%s", strings.Join(history[max(0, len(history)-15):], "\n"), msg, x.h.Dump())
		}
	}
	t.Logf("coverage: %v", seen)
	return seen
}

func checkInvariants(x *th) string {
	ports, err := x.h.Ports()
	if err != nil {
		return err.Error()
	}
	links, err := x.h.Links()
	if err != nil {
		return err.Error()
	}
	byName := map[string]eswitch.Link{}
	var names []string
	for _, l := range links {
		byName[l.Name] = l
		names = append(names, l.Name)
	}
	sort.Strings(names)
	if got := x.ls("/sys/class/net"); !cmp.Equal(got, names) {
		return fmt.Sprintf("/sys/class/net %v, Links %v", got, names)
	}
	pcivf := map[string]int{}
	for _, p := range ports {
		if p.Flavour == eswitch.FlavourPCIVF {
			pcivf[p.Devlink.Device]++
			if _, ok := byName[p.Netdev]; !ok {
				return fmt.Sprintf("port %+v netdev missing", p)
			}
		}
	}
	for _, pf := range []string{"0000:61:00.0", "0000:61:00.1", "0000:81:00.0"} {
		dev := "/sys/bus/pci/devices/" + pf + "/"
		mode, err := x.h.EswitchMode(dl(pf))
		if err != nil {
			return err.Error()
		}
		numvfs, _ := x.fs.ReadFile(dev + "sriov_numvfs")
		total, _ := x.fs.ReadFile(dev + "sriov_totalvfs")
		var n, tot int
		fmt.Sscan(string(numvfs), &n)
		fmt.Sscan(string(total), &tot)
		if n > tot {
			return fmt.Sprintf("%s numvfs %d > total %d", pf, n, tot)
		}
		var virtfns []string
		for _, e := range x.ls(dev) {
			if strings.HasPrefix(e, "virtfn") {
				virtfns = append(virtfns, e)
			}
		}
		if len(virtfns) > n {
			return fmt.Sprintf("%s: %d virtfn links, numvfs %d", pf, len(virtfns), n)
		}
		// A sample of VFs: a VF netdev exists iff bound to mlx5_core.
		for i := 0; i < len(virtfns) && i < 3; i++ {
			e := virtfns[(i*7+len(virtfns)/2)%len(virtfns)]
			vf := "/sys/bus/pci/devices/" + strings.TrimPrefix(x.readlink(dev+e), "../") + "/"
			drv, _ := x.fs.Readlink(vf + "driver")
			_, err := x.fs.ReadDir(vf + "net")
			if hasNet := err == nil; hasNet != strings.HasSuffix(drv, "/mlx5_core") {
				return fmt.Sprintf("%s: driver %q but net dir %v", vf, drv, hasNet)
			}
		}
		// Representors exist iff switchdev, one per existing VF, each a
		// child of the PF and the netdev of a pcivf port.
		reps := len(x.ls(dev+"net")) - 1
		if mode == eswitch.ModeSwitchdev && reps != len(virtfns) || mode == eswitch.ModeLegacy && reps != 0 {
			return fmt.Sprintf("%s in %s: %d representors, %d VFs", pf, mode, reps, len(virtfns))
		}
		if pcivf[pf] != reps {
			return fmt.Sprintf("%s: %d pcivf ports, %d representors", pf, pcivf[pf], reps)
		}
	}
	for _, p := range ports {
		if p.Flavour != eswitch.FlavourPCIVF {
			continue
		}
		if got, _ := x.fs.Readlink("/sys/class/net/" + p.Netdev + "/device"); got != "../../../"+p.Devlink.Device {
			return fmt.Sprintf("representor %s of %s has device %q", p.Netdev, p.Devlink.Device, got)
		}
	}
	// Masters are bonds that list their slaves.
	for _, l := range links {
		if l.Master == "" {
			continue
		}
		m, ok := byName[l.Master]
		if !ok || m.Kind != "bond" {
			return fmt.Sprintf("%s has master %q which is no bond", l.Name, l.Master)
		}
		slaves := x.read("/sys/class/net/" + l.Master + "/bonding/slaves")
		if !contains(strings.Fields(slaves), l.Name) {
			return fmt.Sprintf("%s not among %s's slaves %q", l.Name, l.Master, slaves)
		}
	}
	// LAG active implies the eligibility rule.
	if st := strings.TrimSpace(x.read(lagDir + "state")); st == "active" {
		p0, p1 := byName["p0"], byName["p1"]
		if p0.Master == "" || p0.Master != p1.Master {
			return "LAG active without both PFs in one bond"
		}
		slaves := strings.Fields(x.read("/sys/class/net/" + p0.Master + "/bonding/slaves"))
		if len(slaves) != 2 {
			return fmt.Sprintf("LAG active with slaves %v", slaves)
		}
		mode := strings.Fields(x.read("/sys/class/net/" + p0.Master + "/bonding/mode"))[0]
		if !lagBondModes[mode] {
			return "LAG active in bond mode " + mode
		}
		for _, pf := range []string{"0000:61:00.0", "0000:61:00.1"} {
			if m, _ := x.h.EswitchMode(dl(pf)); m != eswitch.ModeSwitchdev {
				return "LAG active with " + pf + " in " + m
			}
			var n int
			fmt.Sscan(x.read("/sys/bus/pci/devices/"+pf+"/sriov_totalvfs"), &n)
			if n > lagMaxVFs {
				return fmt.Sprintf("LAG active with sriov_totalvfs %d on %s", n, pf)
			}
		}
		if _, err := x.fs.ReadFile(lagDir + "type"); err != nil {
			return "active LAG type: " + err.Error()
		}
	} else if _, err := x.fs.ReadFile(lagDir + "type"); !errors.Is(err, syscall.EINVAL) {
		return fmt.Sprintf("inactive LAG type: %v", err)
	}
	if a, b := x.h.Dump(), x.h.Dump(); a != b {
		return "Dump is not deterministic"
	}
	return ""
}
