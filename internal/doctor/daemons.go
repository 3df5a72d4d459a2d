package doctor

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/ovs"
)

// ProbeTimeout bounds each OVSDB or libvirt probe.
const ProbeTimeout = 5 * time.Second

// proc is one running process.
type proc struct {
	pid        int
	start      float64 // seconds after boot
	startKnown bool
}

// procs finds the processes whose comm is comm ("/proc/<pid>/comm"), with
// their start time after boot ("/proc/<pid>/stat" field 22, in clock ticks).
func (d *doctor) procs(comm string) []proc {
	names, err := d.env.Host.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		c, err := d.readHost(path.Join("/proc", n, "comm"))
		if err != nil || c != comm {
			continue
		}
		p := proc{pid: pid}
		if stat, err := d.readHost(path.Join("/proc", n, "stat")); err == nil {
			if i := strings.LastIndexByte(stat, ')'); i >= 0 {
				f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
				if len(f) > 19 {
					if t, err := strconv.ParseUint(f[19], 10, 64); err == nil {
						p.start, p.startKnown = float64(t)/float64(d.env.ClockTicks), true
					}
				}
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

func (d *doctor) daemons(gs []*groupState) {
	needOVS := switchdevGroups(gs)
	if needOVS {
		var endpoints []string
		for _, g := range gs {
			if g.Switchdev && !slices.Contains(endpoints, g.OVSDB) {
				endpoints = append(endpoints, g.OVSDB)
			}
		}
		ps := d.checkOVSRunning(endpoints)
		d.checkOVSVersion(ps)
		d.checkUpcalls()
	} else {
		d.add(AreaDaemons, "daemons/ovs-vswitchd", "", Skip, "no switchdev group: Open vSwitch is not used", "")
	}
	seenDB, seenVirt := map[string]bool{}, map[string]bool{}
	for _, g := range gs {
		if g.Switchdev && !seenDB[g.OVSDB] {
			seenDB[g.OVSDB] = true
			d.checkOVSDB(g.OVSDB)
		}
	}
	for _, g := range gs {
		if !seenVirt[g.Libvirt] {
			seenVirt[g.Libvirt] = true
			d.checkLibvirt(g.Libvirt)
		}
	}
	if len(gs) == 0 {
		// No NIC to check: still say whether the daemons are there.
		d.checkOVSDB(DefaultOVSDB)
		d.checkLibvirt(DefaultLibvirt)
	}
}

// checkOVSRunning judges the ovs-vswitchd that serves each of the
// config's OVSDB endpoints: for a unix: socket, the one whose pid its
// run directory's ovs-vswitchd.pid holds, running in vflag's network
// namespace (a simulated host's runs in the mirror namespace). Another
// ovs-vswitchd (a test's, a simulated host's on a real host) is not it.
// For tcp: and ssl: endpoints, which daemon serves them is not known here:
// every running ovs-vswitchd is reported. It returns the daemons judged.
func (d *doctor) checkOVSRunning(endpoints []string) []proc {
	const name = "daemons/ovs-vswitchd"
	installed := d.tool("ovs-vswitchd")
	all := d.procs("ovs-vswitchd")
	var local []string
	for _, ep := range endpoints {
		if strings.HasPrefix(ep, "unix:") {
			local = append(local, ep)
		}
	}
	if len(local) == 0 || len(all) == 0 {
		d.checkAnyOVSRunning(name, installed, all, endpoints)
		return all
	}
	var judged []proc
	for _, ep := range local {
		subject := ""
		if len(local) > 1 {
			subject = ep
		}
		pidFile := path.Join(ovs.RunDirOf(ep), "ovs-vswitchd.pid")
		pid, err := d.readPID(pidFile)
		i := slices.IndexFunc(all, func(p proc) bool { return p.pid == pid })
		others := d.describeProcs(all)
		fix := "start the ovs-vswitchd of this host's Open vSwitch (systemctl enable --now openvswitch-switch; RHEL: openvswitch), " +
			"or point ovsdb (VFLAG_OVSDB) at the OVSDB of the ovs-vswitchd you mean"
		switch {
		case err != nil:
			d.add(AreaDaemons, name, subject, Fail, fmt.Sprintf("no ovs-vswitchd serves %s (the config's ovsdb): %v; running: %s, with another run directory (not %s)",
				ep, err, others, ovs.RunDirOf(ep)), fix)
			continue
		case i < 0:
			d.add(AreaDaemons, name, subject, Fail, fmt.Sprintf("no ovs-vswitchd serves %s (the config's ovsdb): %s names pid %d, which is not running; running: %s",
				ep, pidFile, pid, others), fix)
			continue
		}
		p := all[i]
		judged = append(judged, p)
		detail := fmt.Sprintf("ovs-vswitchd pid %d serves %s (%s)%s", p.pid, ep, pidFile, p.started())
		ns, self := d.netns(p.pid), d.netns(0)
		switch {
		case ns == "" || self == "" || ns == self:
			d.add(AreaDaemons, name, subject, Pass, detail, "")
		case d.env.Simulated:
			d.add(AreaDaemons, name, subject, Pass, detail+fmt.Sprintf(", in network namespace %s (vflag's: %s), where the simulated host mirrors its netdevs (sim.mirror_netns)", ns, self), "")
		default:
			d.add(AreaDaemons, name, subject, Fail, detail+fmt.Sprintf(", but runs in another network namespace (%s; vflag's: %s): it cannot open this host's bond, PFs and representors", ns, self),
				"run this host's ovs-vswitchd in its own network namespace (systemctl restart openvswitch-switch), or point ovsdb (VFLAG_OVSDB) at the OVSDB of the one that is")
		}
	}
	return judged
}

// checkAnyOVSRunning reports whether any ovs-vswitchd runs: for OVSDB
// endpoints whose daemon cannot be found from here (tcp:, ssl:), and when
// none runs at all.
func (d *doctor) checkAnyOVSRunning(name string, installed bool, ps []proc, endpoints []string) {
	switch {
	case len(ps) > 0:
		d.add(AreaDaemons, name, "", Pass, fmt.Sprintf("ovs-vswitchd is running (%s); which one serves %s is not known here", d.describeProcs(ps), strings.Join(endpoints, ", ")), "")
	case !installed:
		d.add(AreaDaemons, name, "", Fail, "ovs-vswitchd is not installed and not running (no ovs-vswitchd in /proc)",
			"apt-get install openvswitch-switch (RHEL: dnf install openvswitch), then systemctl enable --now openvswitch-switch")
	default:
		d.add(AreaDaemons, name, "", Fail, "ovs-vswitchd is installed but not running (no ovs-vswitchd in /proc)",
			"systemctl enable --now openvswitch-switch (RHEL: openvswitch)")
	}
}

// readPID reads a pid file.
func (d *doctor) readPID(file string) (int, error) {
	s, err := d.readHost(file)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s holds %q", file, s)
	}
	return pid, nil
}

// netns is the network namespace of pid (0: this process), "" unknown.
func (d *doctor) netns(pid int) string {
	p := "/proc/self/ns/net"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/ns/net", pid)
	}
	ns, err := d.env.Host.Readlink(p)
	if err != nil {
		return ""
	}
	return ns
}

// started is ", started N s after boot" when known.
func (p proc) started() string {
	if !p.startKnown {
		return ""
	}
	return fmt.Sprintf(", started %.1f s after boot", p.start)
}

// describeProcs lists processes with their start, their OVSDB (the first
// argument of their command line that is an endpoint) and their network
// namespace where it differs from vflag's.
func (d *doctor) describeProcs(ps []proc) string {
	self := d.netns(0)
	var list []string
	for _, p := range ps {
		s := fmt.Sprintf("pid %d%s", p.pid, p.started())
		if cmdline, err := d.env.Host.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid)); err == nil {
			for _, arg := range strings.Split(string(cmdline), "\x00") {
				if strings.HasPrefix(arg, "unix:") || strings.HasPrefix(arg, "tcp:") || strings.HasPrefix(arg, "ssl:") {
					s += ", OVSDB " + arg
					break
				}
			}
		}
		if ns := d.netns(p.pid); ns != "" && self != "" && ns != self {
			s += ", network namespace " + ns
		}
		list = append(list, s)
	}
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, "; ")
}

var ovsVersionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\(Open vSwitch\)\s+(\d+\.\d+\.\d+)`) })

// ovsEarlyBoot is how long after boot Open vSwitch 3.1.0 counts 0 CPUs.
const ovsEarlyBoot = 10.0

const ovsDropIn = "keep it from starting in the first 10 s after boot: `systemctl edit ovs-vswitchd.service` with\n" +
	"[Service]\nExecStartPre=/bin/sh -c 'while [ $(cut -d. -f1 /proc/uptime) -lt 11 ]; do sleep 1; done'\n" +
	"or run an Open vSwitch release other than 3.1.0"

func (d *doctor) checkOVSVersion(ps []proc) {
	const name = "daemons/ovs-version"
	if !d.tool("ovs-vswitchd") {
		d.add(AreaDaemons, name, "", Skip, "ovs-vswitchd is not installed (see daemons/ovs-vswitchd)", "")
		return
	}
	out, err := d.output("ovs-vswitchd", "--version")
	if err != nil {
		d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("ovs-vswitchd --version: %v", firstLine(err.Error())), "reinstall Open vSwitch: apt-get install --reinstall openvswitch-switch")
		return
	}
	m := ovsVersionRE().FindStringSubmatch(out)
	if m == nil {
		d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("ovs-vswitchd --version printed %q: no version", firstLine(out)), "reinstall Open vSwitch: apt-get install --reinstall openvswitch-switch")
		return
	}
	v := m[1]
	d.ovsVersion = v
	if v != "3.1.0" {
		d.add(AreaDaemons, name, "", Pass, fmt.Sprintf("ovs-vswitchd --version: Open vSwitch %s (no known VF-LAG problem)", v), "")
		return
	}
	const bug = "Open vSwitch 3.1.0 counts 0 CPUs during the first 10 s after boot: an ovs-vswitchd started then runs no upcall handler in per-cpu dispatch " +
		"(its log says \"Overriding n-handler-threads to 0\") and the kernel datapath loses every upcall, so bridges look right in OVSDB and forward nothing new; only a restart repairs it"
	var late []string
	for _, p := range ps {
		switch {
		case !p.startKnown:
			d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("ovs-vswitchd --version: Open vSwitch 3.1.0 (running, its start time unknown). %s", bug), ovsDropIn)
			return
		case p.start < ovsEarlyBoot:
			d.add(AreaDaemons, name, "", Fail, fmt.Sprintf("ovs-vswitchd --version: Open vSwitch 3.1.0, and pid %d started %.1f s after boot: %s", p.pid, p.start, bug),
				"systemctl restart openvswitch-switch now (before vflag up: restarting under a working VF-LAG breaks it); "+ovsDropIn)
			return
		}
		late = append(late, fmt.Sprintf("pid %d started %.1f s after boot", p.pid, p.start))
	}
	if len(late) == 0 {
		d.add(AreaDaemons, name, "", Warn, fmt.Sprintf("ovs-vswitchd --version: Open vSwitch 3.1.0 (not running now). %s", bug), ovsDropIn)
		return
	}
	// Started after the first 10 s: this process is not affected; a start
	// at the next boot may be (the upcall check watches for it).
	d.add(AreaDaemons, name, "", Pass, fmt.Sprintf("ovs-vswitchd --version: Open vSwitch 3.1.0, not affected: %s (3.1.0 loses every upcall only when started in the first 10 s after boot)", strings.Join(late, "; ")), "")
}

func (d *doctor) checkUpcalls() {
	const name = "daemons/ovs-upcalls"
	st, err := eswitch.ReadDatapath(d.env.Kernel, eswitch.SystemDatapath)
	switch {
	case errors.Is(err, eswitch.ErrNotSupported):
		d.add(AreaDaemons, name, "", Skip, fmt.Sprintf("the kernel datapath %s cannot be read here (simulated host)", eswitch.SystemDatapath), "")
		return
	case errors.Is(err, eswitch.ErrNoDatapath):
		d.add(AreaDaemons, name, "", Skip, fmt.Sprintf("no kernel datapath %s yet (ovs-vswitchd creates it with the first bridge of datapath_type system): %v", eswitch.SystemDatapath, err), "")
		return
	case err != nil:
		d.add(AreaDaemons, name, "", Skip, fmt.Sprintf("kernel datapath %s: %v", eswitch.SystemDatapath, err), "")
		return
	}
	counts := fmt.Sprintf("%s: hit %d, missed %d, lost %d, %d flows, %s upcall dispatch", st.Name, st.Hit, st.Missed, st.Lost, st.Flows, st.Dispatch())
	if st.Missed > 0 && st.Lost >= st.Missed {
		fix := "systemctl restart openvswitch-switch (before vflag up: restarting under a working VF-LAG breaks it)"
		if d.ovsVersion == "3.1.0" {
			fix += "; with Open vSwitch 3.1.0, " + ovsDropIn
		}
		d.add(AreaDaemons, name, "", Fail, counts+": every upcall was lost, no ovs-vswitchd handler reads them (the condition `vflag validate` reports as ovs/datapath)", fix)
		return
	}
	d.add(AreaDaemons, name, "", Pass, counts, "")
}

func (d *doctor) probe(f func(context.Context, string) error, target string) error {
	ctx, cancel := context.WithTimeout(d.ctx, ProbeTimeout)
	defer cancel()
	return f(ctx, target)
}

func (d *doctor) checkOVSDB(endpoint string) {
	const name = "daemons/ovsdb"
	if err := d.probe(d.env.Probe.OVSDB, endpoint); err != nil {
		d.add(AreaDaemons, name, endpoint, Fail, fmt.Sprintf("OVSDB at %s does not answer: %v", endpoint, firstLine(err.Error())),
			"start Open vSwitch: systemctl enable --now openvswitch-switch (RHEL: openvswitch); if it listens elsewhere, set ovsdb: in the config "+
				"(`ovs-appctl -t ovsdb-server ovsdb-server/list-remotes` shows where)")
		return
	}
	d.add(AreaDaemons, name, endpoint, Pass, fmt.Sprintf("OVSDB at %s answers", endpoint), "")
}

func (d *doctor) checkLibvirt(uri string) {
	const name = "daemons/libvirt"
	if err := d.probe(d.env.Probe.Libvirt, uri); err != nil {
		running := "no libvirtd or virtqemud process"
		for _, c := range []string{"libvirtd", "virtqemud"} {
			if len(d.procs(c)) > 0 {
				running = c + " is running"
			}
		}
		d.add(AreaDaemons, name, uri, Fail, fmt.Sprintf("libvirt at %s does not answer (%s): %v", uri, running, firstLine(err.Error())),
			"apt-get install libvirt-daemon-system (RHEL: dnf install libvirt); systemctl enable --now libvirtd (modular daemons: virtqemud.socket); "+
				"if it runs elsewhere, set libvirt: in the config")
		return
	}
	d.add(AreaDaemons, name, uri, Pass, fmt.Sprintf("libvirt at %s answers", uri), "")
}
