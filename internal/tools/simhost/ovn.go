package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"

	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/ovs/ovnsb/sbtest"
	"github.com/vflag/vflag/ovs/ovstest"
)

// startOVN runs what an ovn section needs around the simulated host, as an
// OVN deployment has it around a real one: an OVN central (Northbound and
// Southbound ovsdb-servers, ovn-northd) in a private directory, its
// Southbound also listening on the socket the config's ovn.remote names;
// in its Northbound the logical switch and the logical ports the config's
// ovn_port entries name (what the operator creates on a real deployment);
// and a real ovn-controller against the private Open vSwitch, in its
// network namespace, with br-int on the config's datapath. It returns the
// environment that points ovn-appctl, ovn-nbctl, ovn-sbctl and vflag's
// checks at them.
func startOVN(r testbed.TB, out io.Writer, srv *ovstest.Server, p plan) ([][2]string, error) {
	o := p.ovn
	if err := freeSocket(o.sock); err != nil {
		return nil, fmt.Errorf("%s.remote: %w", o.field, err)
	}
	central := sbtest.StartCentral(r)
	if err := central.SB.Listen("punix:" + o.sock); err != nil {
		return nil, fmt.Errorf("the Southbound on %s.remote unix:%s: %w", o.field, o.sock, err)
	}
	r.Cleanup(func() { _ = removeSocket(o.sock) })
	fmt.Fprintf(out, "simhost: OVN central in %s: Northbound %s, Southbound on unix:%s (%s.remote), ovn-northd\n", central.Dir(), central.NBEndpoint(), o.sock, o.field)
	if len(p.lsps) > 0 {
		if err := central.AddSwitch(o.logicals, p.lsps...); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "simhost: created in the Northbound logical switch %s with ports %s (the config's ovn_port entries; on a real deployment the operator creates them: ovn-nbctl ls-add %s, ovn-nbctl lsp-add %s PORT)\n",
			o.logicals, strings.Join(p.lsps, ", "), o.logicals, o.logicals)
	}
	if o.netdev {
		// ovn-controller makes br-int when it is missing, of the datapath
		// this key names (an operator's setting, which vflag leaves alone):
		// without the openvswitch module, the userspace one.
		if _, err := srv.Vsctl("set", "Open_vSwitch", ".", "external_ids:ovn-bridge-datapath-type=netdev"); err != nil {
			return nil, fmt.Errorf("set external_ids:ovn-bridge-datapath-type: %w", err)
		}
	}
	ctl := sbtest.StartController(r, srv)
	dp := ""
	if o.netdev {
		dp = ", br-int on the userspace datapath (external_ids:ovn-bridge-datapath-type=netdev)"
	}
	fmt.Fprintf(out, "simhost: ovn-controller runs against the private Open vSwitch (control socket in %s%s); it joins the Southbound once vflag up has set the chassis's external_ids\n", ctl.RunDir(), dp)
	return [][2]string{
		{"OVN_RUNDIR", ctl.RunDir()},
		{"OVN_NB_DB", central.NBEndpoint()},
		{"OVN_SB_DB", "unix:" + o.sock},
	}, nil
}

// freeSocket makes sure simhost may listen on path: nothing there, or a
// socket nobody answers on (left by a simhost that was killed), which it
// removes. A socket that answers, or any other file, is refused.
func freeSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket: name another path", path)
	}
	if c, err := net.Dial("unix", path); err == nil {
		_ = c.Close()
		return fmt.Errorf("%s answers: another Southbound (another simhost?) serves it: stop it or name another path", path)
	}
	return removeSocket(path)
}

func removeSocket(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		return os.Remove(path)
	}
	return nil
}
