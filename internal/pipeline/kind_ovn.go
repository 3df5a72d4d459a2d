package pipeline

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vflag/vflag/internal/atomicfile"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/teardown"
)

// A group with an ovn section makes the host an OVN chassis (docs/ovn.md):
// its underlay is the tunnel's (kind_tunnel.go: the encap address on the
// bond or its VLAN interface), its bridge is the integration bridge
// (kind_ovs.go: created with ovs.BridgeSpec.Integration, or adopted; each
// representor's Interface with its binding, ovs.PortSpec.Bind), and this
// file's kind sets the Open_vSwitch row's external_ids that ovn-controller
// reads, after the bridge (ovn-controller would otherwise make br-int
// itself first). verify then waits for ovn-controller's ovn-installed on
// every bound representor.

// ovnIDKind sets one Open_vSwitch external_ids key of the chassis
// (system-id, hostname, ovn-remote, ovn-encap-type, ovn-encap-ip,
// ovn-set-local-ip, ovn-bridge, ovn-bridge-mappings). As ovsConfigKind
// does other_config's: one step per key, its record the prior value (nil:
// absent), which the undo puts back; keys vflag does not set are never
// touched.
//
//	ovs-vsctl set Open_vSwitch . external_ids:$key=$value
type ovnIDKind struct{}

type ovnIDRecord = rowKeyRecord

func (ovnIDKind) Name() string { return KindOVNExternalIDs }

// DependsOn: the bridge step may create the integration bridge the
// ovn-bridge key names.
func (ovnIDKind) DependsOn() []string { return []string{ovsBridgeKind{}.Name()} }

// KindOVNExternalIDs is the journal name of the chassis's external_ids.
const KindOVNExternalIDs = "ovn.external-ids"

// The Open_vSwitch external_ids keys of an OVN chassis
// (ovn-controller(8)).
const (
	OVNKeySystemID      = "system-id"
	OVNKeyHostname      = "hostname"
	OVNKeyRemote        = "ovn-remote"
	OVNKeyEncapType     = "ovn-encap-type"
	OVNKeyEncapIP       = "ovn-encap-ip"
	OVNKeySetLocalIP    = "ovn-set-local-ip"
	OVNKeyBridge        = "ovn-bridge"
	OVNKeyBridgeMapping = "ovn-bridge-mappings"
)

// SystemIDFile is the file of the state directory that keeps the chassis
// name vflag made (config ovn.system_id absent, Open vSwitch without one).
const SystemIDFile = "ovn-system-id"

func (k ovnIDKind) step(e *Env, key string, value rowValue, row *rowRead) teardown.Step {
	return rowKeyStep(e, k.Name(), row, key, value)
}

func (ovnIDKind) Undo(ctx context.Context, e *Env, r ovnIDRecord) (string, error) {
	return undoRowKey(ctx, e, externalIDsColumn, r)
}

// ovnSSLKind puts an ssl: remote's files in the Open_vSwitch database's
// SSL row, which ovn-controller reads for its Southbound connection (its
// command line naming none, as ovn-host's service runs it): the row made
// and referenced, or the one there updated; its record the prior files
// (nil: no row), which the undo puts back.
//
//	ovs-vsctl set-ssl $private_key $certificate $ca_cert
type ovnSSLKind struct{}

type ovnSSLRecord struct {
	Endpoint string        `json:"endpoint"`
	Value    ovs.SSLPaths  `json:"value"`
	Prior    *ovs.SSLPaths `json:"prior"` // nil: no SSL row
}

func (ovnSSLKind) Name() string        { return "ovn.ssl" }
func (ovnSSLKind) DependsOn() []string { return nil }

func (k ovnSSLKind) step(e *Env, want ovs.SSLPaths) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.Name(),
		Check: func(ctx context.Context) (teardown.Change, error) {
			c, err := e.h.OVS(ctx)
			if err != nil {
				return teardown.Change{}, err
			}
			cur, ok, err := c.SSL(ctx)
			if err != nil {
				return teardown.Change{}, err
			}
			if ok && cur == want {
				return teardown.Change{Summary: "SSL " + sslString(&want)}, nil
			}
			r := ovnSSLRecord{Endpoint: e.h.OVSDB, Value: want}
			if ok {
				r.Prior = &cur
			}
			return teardown.Change{Needed: true, Record: r,
				Summary: fmt.Sprintf("SSL %s -> %s", sslString(r.Prior), sslString(&want)),
				Revert:  fmt.Sprintf("SSL %s -> %s", sslString(&want), sslString(r.Prior))}, nil
		},
		Apply: func(ctx context.Context) error {
			c, err := e.h.OVS(ctx)
			if err != nil {
				return err
			}
			return c.SetSSL(ctx, &want)
		},
	}
}

// Undo puts the prior SSL row back (drops the one vflag made).
func (ovnSSLKind) Undo(ctx context.Context, e *Env, r ovnSSLRecord) (string, error) {
	c, done, err := e.ovsAt(ctx, r.Endpoint)
	if err != nil {
		return "", err
	}
	defer done()
	if err := c.SetSSL(ctx, r.Prior); err != nil {
		return "", err
	}
	return "SSL -> " + sslString(r.Prior), nil
}

func sslString(p *ovs.SSLPaths) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("key %s cert %s ca %s", p.PrivateKey, p.Certificate, p.CACert)
}

// ovnChassis is the phase: with an ssl: remote the SSL row first (ovn-
// controller takes it when ovn-remote says ssl:), then one step per key,
// in one batch (each key is its own mutation of the row).
func (run *groupRun) ovnChassis(context.Context) ([]batch, error) {
	g := run.g
	o := g.OVN
	if o == nil {
		return nil, nil
	}
	e := run.e
	var out []batch
	if o.SSL != nil {
		out = append(out, batch{ovnSSLKind{}.step(e, ovs.SSLPaths{PrivateKey: o.SSL.PrivateKey, Certificate: o.SSL.Certificate, CACert: o.SSL.CACert})})
	}
	row := newRowRead(e, externalIDsColumn)
	s := []teardown.Step{ovnIDKind{}.step(e, OVNKeySystemID, e.systemID(o), row)}
	if h, err := os.Hostname(); err == nil && h != "" {
		s = append(s, ovnIDKind{}.step(e, OVNKeyHostname, fixed(h), row))
	}
	for _, kv := range [][2]string{
		{OVNKeyRemote, o.Remote},
		{OVNKeyEncapType, o.EncapTypeOf()},
		{OVNKeyEncapIP, o.Prefix().Addr().String()},
		// OVN 23.03 sets the tunnel ports' local_ip only with it: the
		// Geneve packets leave from the bond's address.
		{OVNKeySetLocalIP, "true"},
		{OVNKeyBridge, o.Bridge},
	} {
		s = append(s, ovnIDKind{}.step(e, kv[0], fixed(kv[1]), row))
	}
	if m := o.Mappings(); m != "" {
		s = append(s, ovnIDKind{}.step(e, OVNKeyBridgeMapping, fixed(m), row))
	}
	return append(out, s), nil
}

// stateDir is the directory of the run's journal, "" without one.
func (e *Env) stateDir() string {
	if e.journal == nil {
		return ""
	}
	return filepath.Dir(e.journal.Path())
}

// systemID is the chassis name's value: the config's; else the one Open
// vSwitch has (left as it is); else the one vflag made before (kept in
// the state directory); else a new one, which Apply keeps there first.
func (e *Env) systemID(o *config.OVN) rowValue {
	return func(cur string, ok bool, _ map[string]string) (string, string, func() error, string, error) {
		if o.SystemID != "" {
			return o.SystemID, "", nil, "", nil
		}
		if ok && cur != "" {
			return cur, "", nil, "", nil
		}
		dir := e.stateDir()
		if dir != "" {
			b, err := os.ReadFile(filepath.Join(dir, SystemIDFile))
			if err == nil && strings.TrimSpace(string(b)) != "" {
				return strings.TrimSpace(string(b)), " (kept in " + filepath.Join(dir, SystemIDFile) + ")", nil, "", nil
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", "", nil, "", fmt.Errorf("read the chassis name vflag made: %w", err)
			}
		}
		id := e.newSystemID()
		if dir == "" {
			return id, " (made now)", nil, "", nil
		}
		path := filepath.Join(dir, SystemIDFile)
		return id, " (made now, kept in " + path + ")", func() error {
			if _, err := os.Stat(path); err == nil {
				return fmt.Errorf("%s appeared since the check: run up again", path)
			}
			return atomicfile.WriteFile(path, []byte(id+"\n"), 0o644)
		}, "", nil
	}
}

var newIDMu sync.Mutex

// newSystemID is a random UUID (version 4), made once per run.
func (e *Env) newSystemID() string {
	newIDMu.Lock()
	defer newIDMu.Unlock()
	if e.madeSystemID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		e.madeSystemID = fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	return e.madeSystemID
}

// ovnBinding is a bound representor: its port, the logical port and the
// field that binds it.
type ovnBinding struct {
	Rep, LSP, MAC, Domain string
}

// ovnBindings are the group's bound representors that exist, by VF.
func (run *groupRun) ovnBindings() map[VFKey]ovnBinding {
	g := run.g
	if g.OVN == nil {
		return nil
	}
	out := map[VFKey]ovnBinding{}
	for _, p := range g.OVNPorts("") {
		k := VFKey{p.VF.PF, p.VF.VF}
		if rep, ok := run.reps[k]; ok && rep != "" {
			out[k] = ovnBinding{Rep: rep, LSP: p.LSP, MAC: p.MAC, Domain: p.Domain}
		}
	}
	return out
}

// ovnBind is the Interface external_ids of VF k's representor in an OVN
// group, given the group's bindings (ovnBindings, read once for all its
// VFs): its binding (ovs.PortSpec.Bind), an empty map for a VF that none
// binds (its keys removed), nil outside OVN (left alone).
func (run *groupRun) ovnBind(bindings map[VFKey]ovnBinding, k VFKey) map[string]string {
	if run.g.OVN == nil {
		return nil
	}
	b, ok := bindings[k]
	if !ok {
		if _, held := run.poolPorts[k]; held {
			// A pool VF a domain's port holds: the qemu hook bound it to
			// the logical port the domain names (journaled per domain).
			return nil
		}
		return map[string]string{}
	}
	u := ""
	if b.Domain != "" {
		u = run.domUUID[b.Domain]
	}
	return bindIDs(b, u)
}

// bindIDs is a binding's Interface external_ids: iface-id, iface-status,
// attached-mac where the config gives the VF's MAC (ovn-controller binds
// by iface-id alone; a driver whose VF MACs vflag cannot set, as
// netdevsim's, binds without it) and vm-uuid where the domain has one.
//
//	ovs-vsctl set Interface $rep external_ids:iface-id=$lsp external_ids:iface-status=active \
//	    [external_ids:attached-mac=$mac] [external_ids:vm-uuid=$uuid]
func bindIDs(b ovnBinding, vmUUID string) map[string]string {
	out := map[string]string{ovs.IfaceIDKey: b.LSP, "iface-status": "active"}
	if b.MAC != "" {
		out["attached-mac"] = b.MAC
	}
	if vmUUID != "" {
		out["vm-uuid"] = vmUUID
	}
	return out
}

// readDomainUUIDs reads the UUID of each domain an ovn_port attachment
// names (Interface external_ids:vm-uuid). A domain libvirt does not know
// yet has none (the attach step refuses it); libvirt unreachable is
// logged and the bindings go without vm-uuid.
func (run *groupRun) readDomainUUIDs() {
	run.domUUID = map[string]string{}
	g := run.g
	if g.OVN == nil {
		return
	}
	var names []string
	for _, p := range g.OVNPorts("") {
		if p.Domain != "" {
			names = append(names, p.Domain)
		}
	}
	if len(names) == 0 {
		return
	}
	c, err := run.e.h.Virt()
	if err != nil {
		run.e.log.Warn("libvirt unreachable: OVN bindings without vm-uuid", "group", g.Name, "err", err)
		return
	}
	for _, n := range names {
		if d, err := c.Domain(n); err == nil && d.Exists {
			run.domUUID[n] = d.UUID
		}
	}
}

// waitOVNInstalled waits, at most the group's install_timeout, until
// ovn-controller has set external_ids:ovn-installed=true on the Interface
// of every bound representor (its flows for the logical port are in); it
// returns a problem line per port still without it, with what the local
// database shows of why.
func (e *Env) waitOVNInstalled(ctx context.Context, c *ovs.Client, g Group, bound []ovnBinding) []string {
	if g.OVN == nil || len(bound) == 0 {
		return nil
	}
	sort.Slice(bound, func(i, j int) bool { return bound[i].Rep < bound[j].Rep })
	names := make([]string, len(bound))
	for i, b := range bound {
		names[i] = b.Rep
	}
	timeout := g.OVN.InstallTimeout
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poll := e.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	key, start := "ovn-installed/"+g.Name, time.Now()
	defer e.progress(key, "")
	for {
		ids, err := c.InterfaceIDs(ctx, names)
		if err != nil {
			return []string{fmt.Sprintf("ovn-installed: %v", err)}
		}
		var pending []ovnBinding
		for _, b := range bound {
			if ids[b.Rep][ovs.OVNInstalledKey] != ovs.OVNInstalledValue {
				pending = append(pending, b)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		e.progress(key, "%s: ovn-installed %d/%d (waiting %s of %s for ovn-controller)", g.Name, len(bound)-len(pending), len(bound),
			time.Since(start).Round(100*time.Millisecond), timeout)
		select {
		case <-wctx.Done():
			return e.notInstalled(ctx, c, g, pending, ids, timeout)
		case <-time.After(poll):
		}
	}
}

// notInstalled names each port without ovn-installed and why, as far as
// this host's database tells: its binding changed under vflag, the
// chassis settings ovn-controller needs are missing, or (what only the
// Southbound shows) no such logical port, bound to another chassis, or
// ovn-controller not running or not connected.
func (e *Env) notInstalled(ctx context.Context, c *ovs.Client, g Group, pending []ovnBinding, ids map[string]map[string]string, timeout time.Duration) []string {
	root, _ := c.ExternalIDs(ctx)
	var out []string
	for _, b := range pending {
		why := fmt.Sprintf("no logical port %s in the Southbound, or it is bound to another chassis (ovn-sbctl find Port_Binding logical_port=%s), or ovn-controller is not running or not connected to %s (ovn-appctl -t ovn-controller connection-status)", b.LSP, b.LSP, g.OVN.Remote)
		switch have := ids[b.Rep][ovs.IfaceIDKey]; {
		case ids[b.Rep] == nil:
			why = "its Interface is gone"
		case have != b.LSP:
			why = fmt.Sprintf("its iface-id is %q, not %s", have, b.LSP)
		case root[OVNKeyRemote] == "" || root[OVNKeySystemID] == "":
			why = "the chassis has no external_ids:ovn-remote or system-id"
		}
		out = append(out, fmt.Sprintf("port %s (ovn_port %s) not ovn-installed after %s: %s", b.Rep, b.LSP, timeout, why))
	}
	return out
}

// preflightOVN checks an OVN group's chassis against the host before any
// write: a system_id that differs from the one Open vSwitch has while an
// ovn-controller has registered it (the host is an OVN chassis already:
// external_ids:ovn-remote set, or ovn-controller running) is refused, as
// changing it under a running controller breaks the chassis.
func (e *Env) preflightOVN(ctx context.Context, add func(string, any, string, ...any)) {
	for gi := range e.cfg.Groups {
		g := &e.cfg.Groups[gi]
		if g.OVN == nil || g.OVN.SystemID == "" || !g.Switchdev() {
			continue
		}
		c, err := e.h.OVS(ctx)
		if err != nil {
			return
		}
		ids, err := c.ExternalIDs(ctx)
		if err != nil {
			add(fmt.Sprintf("groups[%d].ovn.system_id", gi), g.OVN.SystemID, "cannot read Open_vSwitch external_ids: %v", err)
			continue
		}
		cur := ids[OVNKeySystemID]
		if cur == "" || cur == g.OVN.SystemID {
			continue
		}
		running := 0
		if systemOVSDB(e.h.OVSDB) { // ovn-host's ovn-controller talks to the system's database
			running = ovnControllerPID()
		}
		if ids[OVNKeyRemote] == "" && running == 0 {
			continue // a system-id no chassis uses (ovs-ctl made it): replaced
		}
		who := "the host is an OVN chassis already (external_ids:ovn-remote " + ids[OVNKeyRemote] + ")"
		if running != 0 {
			who = fmt.Sprintf("ovn-controller (pid %d) runs with it", running)
		}
		add(fmt.Sprintf("groups[%d].ovn.system_id", gi), g.OVN.SystemID,
			"differs from the chassis name Open vSwitch has, %s, and %s: changing it under a running ovn-controller breaks the chassis (leave system_id out to keep %s, or stop ovn-controller, ovn-sbctl chassis-del %s, then up)",
			cur, who, cur, cur)
	}
}

// systemOVSDB tells whether endpoint is the system's Open vSwitch
// database, the one ovn-host's ovn-controller connects to (not a private
// one: a test's, the simulated host's).
func systemOVSDB(endpoint string) bool {
	switch endpoint {
	case "unix:/var/run/openvswitch/db.sock", "unix:/run/openvswitch/db.sock":
		return true
	}
	return false
}

// ovnControllerPIDFile is where ovn-host's ovn-controller keeps its pid.
var ovnControllerPIDFile = "/var/run/ovn/ovn-controller.pid"

// ovnControllerPID is the pid of a running ovn-controller, 0 when none
// (no pidfile, or its process is gone).
func ovnControllerPID() int {
	b, err := os.ReadFile(ovnControllerPIDFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0
	}
	return pid
}
