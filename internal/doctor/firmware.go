package doctor

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/vflag/vflag/eswitch"
)

// MaxVFsLAG is mlx5's limit on a switchdev PF's firmware VF count
// (eswitch.LAGMaxTotalVFs).
const MaxVFsLAG = eswitch.LAGMaxTotalVFs

func (d *doctor) firmware(g *groupState) {
	d.checkNumVFs(g)
	p := firstPCI(g)
	if p == nil {
		return // platform/sriov says why
	}
	d.checkMstconfig(g, p)
	d.checkDevlinkInfo(p)
}

func fwReset(a string) string { return eswitch.FirmwareReset(a) }

func (d *doctor) checkNumVFs(g *groupState) {
	const name = "firmware/numvfs"
	var known []*port
	for _, p := range g.Ports {
		if p.Err == nil && p.HasTotal && p.TotalErr == nil {
			known = append(known, p)
		}
	}
	if len(known) == 0 {
		d.add(AreaFirmware, name, "", Skip, "no port's sriov_totalvfs is readable (see platform/sriov)", "")
		return
	}
	var totals []string
	for _, p := range known {
		totals = append(totals, fmt.Sprintf("%s %d", p.name(), p.Total))
	}
	if g.Switchdev {
		var which, fixes []string
		for _, p := range known {
			if why := eswitch.TotalVFsProblem(p.name(), string(p.Addr), p.Driver, p.Total); why != "" {
				which = append(which, why)
				fixes = append(fixes, eswitch.FirmwareNumVFsFix(string(p.Addr)))
			}
		}
		if len(which) > 0 {
			d.add(AreaFirmware, name, "", Fail, strings.Join(which, "; "), strings.Join(fixes, "; "))
			return
		}
	}
	if g.NumVFs == 0 {
		d.add(AreaFirmware, name, "", Skip, fmt.Sprintf("no VF count asked (no config); sriov_totalvfs: %s", strings.Join(totals, ", ")), "")
		return
	}
	var over []string
	var fixes []string
	for _, p := range known {
		if g.NumVFs > p.Total {
			over = append(over, fmt.Sprintf("%s (%s) allows %d", p.name(), p.Addr, p.Total))
			fixes = append(fixes, fmt.Sprintf("mstconfig -d %s -y set SRIOV_EN=1 NUM_OF_VFS=%d", p.Addr, numVFsSetting(g, g.NumVFs)))
		}
	}
	if len(over) > 0 {
		first := firstPCI(g)
		d.add(AreaFirmware, name, "", Fail,
			fmt.Sprintf("the group asks numvfs %d per PF, above sriov_totalvfs: %s; the NIC firmware's NUM_OF_VFS caps sriov_totalvfs", g.NumVFs, strings.Join(over, "; ")),
			fmt.Sprintf("raise the firmware's VF count: %s (package mstflint), %s; or lower groups[].numvfs", strings.Join(dedupe(fixes), "; "), fwReset(string(first.Addr))))
		return
	}
	d.add(AreaFirmware, name, "", Pass, fmt.Sprintf("numvfs %d per PF fits sriov_totalvfs: %s", g.NumVFs, strings.Join(totals, ", ")), "")
}

// numVFsSetting is the NUM_OF_VFS a fix may ask for: n, and never above 64
// for a switchdev group (more leaves the PF without VF-LAG).
func numVFsSetting(g *groupState, n int) int {
	if g.Switchdev {
		return min(n, MaxVFsLAG)
	}
	return n
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mstValue is one row of `mstconfig -e -d DEV q`: default, current, next boot.
type mstValue struct{ Default, Current, Next string }

var (
	mstRow3 = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*\*?\s*([A-Z][A-Z0-9_]*(?:\[\d+\])?)\s+(\S+)\s+(\S+)\s+(\S+)\s*$`)
	})
	mstRow1 = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*\*?\s*([A-Z][A-Z0-9_]*(?:\[\d+\])?)\s+(\S+)\s*$`)
	})
)

// parseMstconfig reads `mstconfig -e -d DEV q` (columns Default, Current,
// Next Boot; a leading '*' marks a changed value) or, without -e, one value.
func parseMstconfig(out string) map[string]mstValue {
	m := map[string]mstValue{}
	in := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "Configurations:") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if r := mstRow3().FindStringSubmatch(l); r != nil {
			m[r[1]] = mstValue{r[2], r[3], r[4]}
		} else if r := mstRow1().FindStringSubmatch(l); r != nil {
			m[r[1]] = mstValue{r[2], r[2], r[2]}
		}
	}
	return m
}

// mstNumber reads "True(1)", "ETH(2)", "8": the number, or -1.
func mstNumber(v string) int {
	if i := strings.LastIndexByte(v, '('); i >= 0 && strings.HasSuffix(v, ")") {
		v = v[i+1 : len(v)-1]
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		switch strings.ToLower(v) {
		case "true":
			return 1
		case "false":
			return 0
		}
		return -1
	}
	return n
}

func (d *doctor) checkMstconfig(g *groupState, p *port) {
	const name = "firmware/mstconfig"
	a := string(p.Addr)
	if d.env.Simulated {
		d.add(AreaFirmware, name, a, Skip, "simulated NIC (--sim): mstconfig cannot query it", "")
		return
	}
	if p.Driver != "mlx5_core" {
		d.add(AreaFirmware, name, a, Skip, fmt.Sprintf("%s is not a ConnectX PF (driver %s): mstconfig reads NVIDIA/Mellanox NICs only", a, orDash(p.Driver)), "")
		return
	}
	if !d.tool("mstconfig") {
		d.add(AreaFirmware, name, a, Skip, "mstconfig is not installed, so the firmware's SRIOV_EN, NUM_OF_VFS, LINK_TYPE_P1/P2 and LAG_RESOURCE_ALLOCATION are not checked",
			"apt-get install mstflint (RHEL: dnf install mstflint), then run vflag doctor again")
		return
	}
	out, err := d.output("mstconfig", "-e", "-d", a, "q")
	if err != nil {
		d.add(AreaFirmware, name, a, Warn, fmt.Sprintf("mstconfig -e -d %s q: %v", a, err),
			fmt.Sprintf("run it as root on a ConnectX PF to read the firmware settings: mstconfig -d %s q", a))
		return
	}
	cfg := parseMstconfig(out)
	if len(cfg) == 0 {
		d.add(AreaFirmware, name, a, Warn, fmt.Sprintf("mstconfig -e -d %s q printed no configuration", a), fmt.Sprintf("check by hand: mstconfig -d %s q", a))
		return
	}
	var read, problems, set []string
	show := func(k string) (mstValue, bool) {
		v, ok := cfg[k]
		if ok {
			if v.Next != v.Current {
				read = append(read, fmt.Sprintf("%s %s (next boot %s)", k, v.Current, v.Next))
			} else {
				read = append(read, fmt.Sprintf("%s %s", k, v.Current))
			}
		}
		return v, ok
	}
	if v, ok := show("SRIOV_EN"); ok && mstNumber(v.Current) != 1 {
		problems = append(problems, "SR-IOV is off in the firmware")
		set = append(set, "SRIOV_EN=1")
	} else if !ok {
		problems = append(problems, "no SRIOV_EN setting")
	}
	want := g.NumVFs
	resetOnly := false // the next boot's NUM_OF_VFS is right already
	if v, ok := show("NUM_OF_VFS"); ok && g.Switchdev && mstNumber(v.Current) > MaxVFsLAG {
		if n := mstNumber(v.Next); n <= MaxVFsLAG && n >= max(want, 1) {
			problems = append(problems, fmt.Sprintf("NUM_OF_VFS %s is above %d (mlx5 never activates VF-LAG on such a PF); %s is set for the next boot", v.Current, MaxVFsLAG, v.Next))
			resetOnly = true
		} else {
			problems = append(problems, fmt.Sprintf("NUM_OF_VFS %s is above %d: mlx5 never activates VF-LAG on such a PF", v.Current, MaxVFsLAG))
			set = append(set, fmt.Sprintf("NUM_OF_VFS=%d", MaxVFsLAG))
		}
	} else if ok && want > 0 && mstNumber(v.Current) < want {
		problems = append(problems, fmt.Sprintf("NUM_OF_VFS %s is below the group's numvfs %d", v.Current, want))
		set = append(set, fmt.Sprintf("NUM_OF_VFS=%d", numVFsSetting(g, want)))
	} else if ok && mstNumber(v.Current) <= 0 {
		problems = append(problems, "NUM_OF_VFS is 0")
		set = append(set, fmt.Sprintf("NUM_OF_VFS=%d", numVFsSetting(g, vfsWanted(g))))
	}
	for _, k := range []string{"LINK_TYPE_P1", "LINK_TYPE_P2"} {
		if v, ok := show(k); ok && mstNumber(v.Current) != 2 && !strings.HasPrefix(strings.ToUpper(v.Current), "ETH") {
			problems = append(problems, fmt.Sprintf("%s is %s, not Ethernet", k, v.Current))
			set = append(set, k+"=ETH")
		}
	}
	if _, ok := show("LAG_RESOURCE_ALLOCATION"); ok {
		read[len(read)-1] += " (1 is needed only for a multiport eswitch)"
	}
	detail := fmt.Sprintf("mstconfig -e -d %s q: %s", a, strings.Join(read, ", "))
	if len(problems) == 0 {
		d.add(AreaFirmware, name, a, Pass, detail, "")
		return
	}
	fix := "check the firmware settings: mstconfig -d " + a + " q"
	if resetOnly {
		fix = strings.TrimPrefix(fwReset(a), "then ")
	}
	if len(set) > 0 {
		fix = fmt.Sprintf("mstconfig -d %s -y set %s (one setting for both ports of the NIC), %s", a, strings.Join(set, " "), fwReset(a))
	}
	d.add(AreaFirmware, name, a, Fail, detail+": "+strings.Join(problems, "; "), fix)
}

// devlinkInfo is `devlink -j dev info DEV`.
type devlinkInfo struct {
	Info map[string]struct {
		Driver   string `json:"driver"`
		Versions struct {
			Fixed   map[string]string `json:"fixed"`
			Running map[string]string `json:"running"`
			Stored  map[string]string `json:"stored"`
		} `json:"versions"`
	} `json:"info"`
}

func fwVersion(m map[string]string) string {
	if v := m["fw.version"]; v != "" {
		return v
	}
	return m["fw"]
}

func (d *doctor) checkDevlinkInfo(p *port) {
	const name = "firmware/devlink-info"
	dev := "pci/" + string(p.Addr)
	if d.env.Simulated {
		d.add(AreaFirmware, name, string(p.Addr), Skip, "simulated NIC (--sim): `devlink dev info` cannot query it", "")
		return
	}
	if !d.tool("devlink") {
		d.add(AreaFirmware, name, string(p.Addr), Skip, "devlink (iproute2) is not installed: driver and firmware versions not read",
			"apt-get install iproute2 (RHEL: dnf install iproute)")
		return
	}
	out, err := d.output("devlink", "-j", "dev", "info", dev)
	if err != nil {
		d.add(AreaFirmware, name, string(p.Addr), Skip, fmt.Sprintf("devlink dev info %s: %v (a PF without a devlink instance: see nic/eswitch)", dev, firstLine(err.Error())), "")
		return
	}
	var info devlinkInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || len(info.Info) == 0 {
		d.add(AreaFirmware, name, string(p.Addr), Skip, fmt.Sprintf("devlink dev info %s: unreadable output", dev), "")
		return
	}
	for _, in := range info.Info {
		run, stored := fwVersion(in.Versions.Running), fwVersion(in.Versions.Stored)
		detail := fmt.Sprintf("devlink dev info %s: driver %s, firmware %s running", dev, orDash(in.Driver), orDash(run))
		if psid := in.Versions.Fixed["fw.psid"]; psid != "" {
			detail += ", PSID " + psid
		}
		if stored != "" && run != "" && stored != run {
			d.add(AreaFirmware, name, string(p.Addr), Warn, fmt.Sprintf("%s; firmware %s is flashed but not running", detail, stored),
				fmt.Sprintf("load the flashed firmware: mlxfwreset -d %s -y reset, or reboot", p.Addr))
			return
		}
		d.add(AreaFirmware, name, string(p.Addr), Pass, detail, "")
		return
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
