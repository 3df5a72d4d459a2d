// Command fleetbed keeps the real daemons a fleet test needs running for a
// shell script: one private ovsdb-server + ovs-vswitchd (ovs/ovstest, own
// network namespace) and one private libvirtd (libvirtx/virttest, own mount
// namespace), with persistent domains defined. Several simulated hosts
// (vflag --sim) share them: each gets its own domains, bridge and bond names.
//
//	fleetbed -env FILE -domain vm-hv1 -domain vm-hv2
//
// Once the daemons answer it writes FILE, shell assignments a script can
// source:
//
//	FLEETBED_OVSDB=unix:/tmp/.../db.sock     OVSDB endpoint (config key ovsdb)
//	FLEETBED_LIBVIRT=qemu+unix:///system?... libvirt URI (config key libvirt)
//	FLEETBED_NETNS=/run/netns/ovstest-...    ovs-vswitchd's namespace (sim.mirror_netns)
//
// and then waits. SIGTERM, SIGINT or SIGHUP, or the death of its parent
// (the script), stops the daemons, removes their files and exits 0.
// examples/ansible/test/run.sh (make ansible-test) uses it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs/ovstest"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	envFile := flag.String("env", "", "write the daemons' endpoints here (shell assignments) once they answer")
	verbose := flag.Bool("v", false, "show the daemons' logs")
	var domains list
	flag.Var(&domains, "domain", "define this persistent domain (repeatable)")
	flag.Parse()
	if *envFile == "" {
		fmt.Fprintln(os.Stderr, "fleetbed: -env FILE is required")
		os.Exit(2)
	}
	// Stop with the script that started us, even when it is killed
	// without running its trap.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "fleetbed: prctl: %v\n", err)
		os.Exit(1)
	}
	if os.Getppid() == 1 {
		os.Exit(1) // the parent is already gone
	}

	r := &testbed.Runner{Verbose: *verbose}
	srv := ovstest.Start(r)
	virt := virttest.Start(r)
	for _, d := range domains {
		virt.DefineDomain(r, d)
	}
	env := fmt.Sprintf("FLEETBED_OVSDB=%s\nFLEETBED_LIBVIRT=%s\nFLEETBED_NETNS=%s\n",
		shellQuote(srv.Endpoint()), shellQuote(virt.URI()), shellQuote(srv.Netns()))
	tmp := *envFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(env), 0o600); err != nil {
		r.Fatalf("fleetbed: %v", err)
	}
	if err := os.Rename(tmp, *envFile); err != nil {
		r.Fatalf("fleetbed: %v", err)
	}
	r.Cleanup(func() { _ = os.Remove(*envFile) })
	<-sigs
	r.Close()
	if r.Failed() {
		os.Exit(1)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
