// Command simhost runs, for any vflag config, the real daemons the
// simulated host (vflag --sim) needs, as `make demo` does for the example:
// a private ovsdb-server + ovs-vswitchd in the network namespace the
// config's sim.mirror_netns names (there vflag mirrors the simulated
// netdevs, so ovs-vswitchd can open them), and a private libvirtd with
// every domain the config's attachments name, defined and shut off, which
// sees the sim NICs' VF addresses as SR-IOV VFs (for VF pools). For a
// config with an ovn section (ovn.go), also a real OVN: a central
// (Northbound, Southbound on the unix socket ovn.remote names,
// ovn-northd) with the config's logical ports, and ovn-controller against
// the private Open vSwitch.
//
//	make simhost CONFIG=my.yaml    # or: simhost -config my.yaml [-sim DIR] [-env FILE]
//
// It checks the config first and says what to change: a sim section, its
// mirror_netns (/run/netns/NAME), datapath_type netdev where the kernel
// has no openvswitch module, and an ovn.remote it can serve (unix:PATH).
// Once the daemons answer it prints the environment vflag needs and
// writes it to -env FILE (default vflag-simhost.env next to the config):
//
//	export VFLAG_CONFIG=/abs/my.yaml
//	export VFLAG_SIM=/tmp/vflag-simhost-.../sim     the simulated host (--sim)
//	export VFLAG_OVSDB=unix:/tmp/ovst.../db.sock    OVSDB endpoint (config key ovsdb)
//	export VFLAG_LIBVIRT=qemu+unix:///system?socket=...
//	export OVN_RUNDIR=... OVN_NB_DB=... OVN_SB_DB=...  with an ovn section
//
// and waits. In another shell, `. vflag-simhost.env` and bin/vflag runs
// against them. Ctrl-C (SIGINT), SIGTERM or SIGHUP stops the daemons,
// deletes the namespace and the env file, and, unless -sim DIR was given,
// the simulated host.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs/ovstest"
)

func main() {
	cfgPath := flag.String("config", "", "the vflag config (required)")
	simDir := flag.String("sim", "", "keep the simulated host in this directory (default: a fresh one, removed at the end)")
	envFile := flag.String("env", "", "write the environment here (default: vflag-simhost.env next to the config)")
	verbose := flag.Bool("v", false, "show the daemons' logs")
	flag.Parse()
	if *cfgPath == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: simhost -config FILE [-sim DIR] [-env FILE] [-v]")
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals()...)
	r := &testbed.Runner{Verbose: *verbose}
	err := serve(r, os.Stdout, *cfgPath, *simDir, *envFile, sigs)
	r.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "simhost: %v\n", err)
		os.Exit(1)
	}
	if r.Failed() {
		os.Exit(1)
	}
}

// stopSignals are the signals that stop simhost as Ctrl-C does: SIGINT,
// SIGTERM (what make passes on to its recipe: `kill MAKE_PID`) and SIGHUP,
// unless it is ignored (nohup): then the terminal's hangup leaves it
// running, as nohup asks. (Notify on an ignored SIGHUP would undo that.)
func stopSignals() []os.Signal {
	sigs := []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// plan is what a config asks of the simulated host's daemons.
type plan struct {
	config  string   // absolute path
	netns   string   // name under /run/netns
	domains []string // sorted, unique
	vfs     []string // every VF address the sim section's NICs can have
	// lsps are the logical ports the config's ovn_port entries name:
	// simhost creates them in its OVN central's Northbound.
	lsps []string
	// ovn is the config's ovn section as simhost serves it; nil without.
	ovn *ovnPlan
}

// ovnPlan is what an ovn section asks of simhost: an OVN central whose
// Southbound listens on the unix socket ovn.remote names, and an
// ovn-controller against the private Open vSwitch.
type ovnPlan struct {
	field    string // "groups[N].ovn"
	sock     string // the path of ovn.remote's unix:PATH
	netdev   bool   // br-int on the userspace datapath (ovs.datapath_type netdev)
	logicals string // the logical switch simhost creates the lsps in
}

// simhostSBSocket is the Southbound socket simhost proposes for a config
// whose ovn.remote it cannot serve.
const simhostSBSocket = "/tmp/vflag-simhost-ovnsb.sock"

// systemRunDirs are the machine's own Open vSwitch and OVN run
// directories: simhost never puts a socket there.
var systemRunDirs = []string{"/run/ovn", "/var/run/ovn", "/run/openvswitch", "/var/run/openvswitch"}

// ovnProblems says what of group i's ovn section simhost cannot serve as
// written: its Southbound runs on this machine, served on the unix socket
// ovn.remote names (ovn-controller runs in the network namespace of the
// private ovs-vswitchd, where the machine's loopback addresses do not
// reach).
func ovnProblems(i int, o *config.OVN) (sock string, problems []string) {
	field := fmt.Sprintf("groups[%d].ovn", i)
	path, ok := strings.CutPrefix(strings.TrimSpace(o.Remote), "unix:")
	if !ok || strings.Contains(o.Remote, ",") {
		fix := fmt.Sprintf("set `remote: unix:%s` under %s", simhostSBSocket, field)
		if o.SSL != nil {
			fix += " and remove its ssl"
		}
		return "", []string{fmt.Sprintf("%s.remote: %s: simhost runs the OVN Southbound on this machine and serves it on the unix socket ovn.remote names (ovn-controller runs in the private ovs-vswitchd's network namespace, which reaches no address of this one): %s", field, o.Remote, fix)}
	}
	path = filepath.Clean(path)
	for _, d := range systemRunDirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return path, []string{fmt.Sprintf("%s.remote: %s is in %s, the machine's own run directory (a real OVN or Open vSwitch uses it): name a socket elsewhere, such as unix:%s", field, o.Remote, d, simhostSBSocket)}
		}
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		problems = append(problems, fmt.Sprintf("%s.remote: %s: its directory %s does not exist (simhost makes the socket, not the directory)", field, o.Remote, filepath.Dir(path)))
	}
	return path, problems
}

// check reads the config and says, for what the simulated host cannot run
// as written, what to change. hasOVSModule tells whether the kernel has the
// openvswitch module (the system datapath).
func check(path string, hasOVSModule bool) (plan, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return plan{}, err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return plan{}, fmt.Errorf("read config: %w", err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return plan{}, fmt.Errorf("config %s: %w", path, err)
	}
	spec, err := sim.DecodeSpec(cfg.Sim)
	if err != nil {
		return plan{}, fmt.Errorf("config %s: %w", path, err)
	}
	var problems []string
	netns := ""
	switch {
	case spec == nil:
		problems = append(problems, "it has no sim section: the simulated host is made from it (docs/simulated-host.md; examples/vflag-simhost.yaml has one)")
	case spec.MirrorNetns == "":
		problems = append(problems, "sim.mirror_netns is not set: add `mirror_netns: /run/netns/vflag-sim` under sim: (vflag mirrors the simulated netdevs into that network namespace, and simhost runs ovs-vswitchd there)")
	default:
		name, ok := strings.CutPrefix(spec.MirrorNetns, "/run/netns/")
		if !ok || name == "" || strings.Contains(name, "/") {
			problems = append(problems, fmt.Sprintf("sim.mirror_netns: %q: simhost makes the namespace, so it must be /run/netns/NAME (as `ip netns add NAME` makes it)", spec.MirrorNetns))
		}
		netns = name
	}
	var domains, lsps []string
	var ovn *ovnPlan
	for i, g := range cfg.Groups {
		if g.Switchdev() && g.OVS.DatapathType != "netdev" && !hasOVSModule {
			dt := g.OVS.DatapathType
			if dt == "" {
				dt = "system (the default)"
			}
			problems = append(problems, fmt.Sprintf("groups[%d].ovs.datapath_type: %s needs the kernel's openvswitch module, which this kernel has not loaded: set `datapath_type: netdev` (the userspace datapath) under groups[%d].ovs", i, dt, i))
		}
		if spec != nil {
			if missing := unansweredHops(g.Tunnel, spec.SwitchPeers); len(missing) > 0 {
				problems = append(problems, fmt.Sprintf("groups[%d].tunnel: the simulated switch answers ARP/ND only for the hosts sim.switch_peers lists, and validate fails tunnel/neigh/<remote> for a next hop nobody answers: add `switch_peers: [%s]` under sim: (the remote endpoints on the underlay's subnet, and the gateway of those behind it)", i, strings.Join(missing, ", ")))
			}
		}
		for _, d := range g.AttachmentDomains() {
			if !slices.Contains(domains, d) {
				domains = append(domains, d)
			}
		}
		for _, port := range g.OVNPorts("") {
			lsps = append(lsps, port.LSP)
		}
		if g.OVN != nil {
			sock, ps := ovnProblems(i, g.OVN)
			problems = append(problems, ps...)
			// config.Validate allows one ovn section.
			ovn = &ovnPlan{field: fmt.Sprintf("groups[%d].ovn", i), sock: sock, netdev: g.OVS.DatapathType == "netdev", logicals: "ls-" + g.Name}
		}
	}
	slices.Sort(domains)
	var vfs []string
	if spec != nil {
		if vfs, err = spec.VFAddrs(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return plan{}, fmt.Errorf("config %s cannot run on the simulated host as written:\n  %s", path, strings.Join(problems, "\n  "))
	}
	return plan{config: abs, netns: netns, domains: domains, vfs: vfs, lsps: lsps, ovn: ovn}, nil
}

// unansweredHops are the next hops of a tunnel's remotes (the remote on
// the local prefix, else the gateway) that peers, the simulated switch's
// hosts, lack; none without a tunnel or with remote_ip=flow.
func unansweredHops(t *config.Tunnel, peers []string) []string {
	if t == nil || t.Flow() {
		return nil
	}
	local := t.Prefix()
	var out []string
	for _, r := range t.Remotes {
		a, err := netip.ParseAddr(r)
		if err != nil {
			continue
		}
		hop := a.String()
		if !local.Contains(a) {
			if t.Gateway == "" {
				continue // no route: validate says so
			}
			hop = t.Gateway
		}
		if g, err := netip.ParseAddr(hop); err == nil {
			hop = g.String()
		}
		if !slices.Contains(peers, hop) && !slices.Contains(out, hop) {
			out = append(out, hop)
		}
	}
	return out
}

func hasOVSModule() bool {
	_, err := os.Stat("/sys/module/openvswitch")
	return err == nil
}

func serve(r *testbed.Runner, out io.Writer, cfgPath, simDir, envFile string, sigs <-chan os.Signal) error {
	envFile, _, err := start(r, out, cfgPath, simDir, envFile)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "simhost: ready. In another shell: . %s; then bin/vflag plan, up, status, validate, down. Ctrl-C here stops the daemons\n", envFile)
	<-sigs
	fmt.Fprintln(out, "simhost: stopping the daemons")
	if r.Failed() {
		return errors.New("a daemon failed (run with -v for its log)")
	}
	return nil
}

// start checks the config, starts the daemons it needs (stopped by tb's
// cleanups), writes the environment for vflag to envFile ("": next to the
// config) and returns that file and the environment.
func start(r testbed.TB, out io.Writer, cfgPath, simDir, envFile string) (string, [][2]string, error) {
	p, err := check(cfgPath, hasOVSModule())
	if err != nil {
		return "", nil, err
	}
	if envFile == "" {
		envFile = filepath.Join(filepath.Dir(p.config), "vflag-simhost.env")
	}
	owned := simDir == ""
	if owned {
		d, err := os.MkdirTemp("", "vflag-simhost-")
		if err != nil {
			return "", nil, err
		}
		r.Cleanup(func() { _ = os.RemoveAll(d) })
		simDir = filepath.Join(d, "sim")
	} else if simDir, err = filepath.Abs(simDir); err != nil {
		return "", nil, err
	}

	fmt.Fprintf(out, "simhost: starting ovsdb-server and ovs-vswitchd in network namespace %s (sim.mirror_netns), libvirtd\n", p.netns)
	srv := ovstest.StartNetns(r, p.netns)
	// libvirt defines a VF pool (hostdev network) only on addresses it sees
	// as SR-IOV VFs (/sys/bus/pci/devices/<pci>/physfn): the simulated VFs,
	// as the tests give them to it.
	virt := virttest.Start(r, virttest.FakeVFs(p.vfs...))
	for _, d := range p.domains {
		virt.DefineDomain(r, d)
	}
	if len(p.domains) > 0 {
		fmt.Fprintf(out, "simhost: libvirtd has domain(s) %s (the config's attachments), defined and shut off\n", strings.Join(p.domains, ", "))
	}
	var ovnEnv [][2]string
	if p.ovn != nil {
		if ovnEnv, err = startOVN(r, out, srv, p); err != nil {
			return "", nil, err
		}
	}
	env := [][2]string{
		{"VFLAG_CONFIG", p.config},
		{"VFLAG_SIM", simDir},
		{"VFLAG_OVSDB", srv.Endpoint()},
		{"VFLAG_LIBVIRT", virt.URI()},
	}
	env = append(env, ovnEnv...)
	var b strings.Builder
	b.WriteString("# vflag on the simulated host (internal/tools/simhost); valid while simhost runs\n")
	for _, kv := range env {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	tmp := envFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return "", nil, err
	}
	if err := os.Rename(tmp, envFile); err != nil {
		return "", nil, err
	}
	r.Cleanup(func() { _ = os.Remove(envFile) })

	fmt.Fprintf(out, "simhost: the simulated host is %s: the first vflag command makes it from the config's sim section", simDir)
	if owned {
		fmt.Fprint(out, " (removed when simhost stops)")
	} else {
		fmt.Fprint(out, " (kept: run vflag down before simhost stops, its OVSDB and libvirtd go with it)")
	}
	fmt.Fprintf(out, "\nsimhost: the environment for vflag, also in %s:\n%s", envFile, b.String())
	return envFile, env, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
