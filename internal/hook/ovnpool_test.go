package hook

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/testbed"
)

// poolMeta is a domain's OVN metadata element with the given entries, as
// libvirt writes it in <metadata>.
func poolMeta(entries ...string) string {
	return `<metadata><vflag-ovn:ovn xmlns:vflag-ovn="https://vflag.dev/xmlns/vflag-ovn/1">` + strings.Join(entries, "") + `</vflag-ovn:ovn></metadata>`
}

func poolEntry(mac, lsp string) string {
	return `<vflag-ovn:interface mac="` + mac + `" ovn_port="` + lsp + `"/>`
}

// poolDomain is a domain's XML at "start begin" with the given metadata,
// holding the pool VF (VF 1 of ens1f0np0) through its interface with MAC
// mac: libvirt formats an allocated pool interface as type='hostdev'
// with the VF's address.
func poolDomain(name, uuid, meta, mac, function string) string {
	return `<domain type='kvm'><name>` + name + `</name><uuid>` + uuid + `</uuid>` + meta + `<devices>
    <interface type='hostdev' managed='yes'>
      <mac address='` + mac + `'/>
      <source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='` + function + `'/></source>
    </interface>
  </devices></domain>`
}

// optsXML is one hook event of domain name with the given XML and config.
func (b *bed) optsXML(cfg *config.Config, name, op, sub, doc string) Options {
	return Options{StateDir: b.state, Domain: name, Op: op, SubOp: sub, XML: strings.NewReader(doc),
		Config: func() (*config.Config, error) { return cfg, nil },
		Host: func(*config.Config) (*host.Host, error) {
			return host.Open(host.Options{SimDir: b.simDir, SimSpec: cfg.Sim, OVSDB: cfg.OVSDB, Libvirt: cfg.Libvirt})
		}}
}

// newOVNPoolBed is the OVN chassis of newOVNBed (VF 1's Interface with
// someone else's keys) whose hook config has a pool of VF 1 and binds VF
// 0 to lsp-cfg (vfs[0].ovn_port).
func newOVNPoolBed(t *testing.T) (*bed, *config.Config, string) {
	b, prior := newOVNBed(t)
	text := strings.Replace(ovnConfig, `{pf: 0, vf: 0, mac: "52:54:00:10:00:00"}`, `{pf: 0, vf: 0, mac: "52:54:00:10:00:00", ovn_port: lsp-cfg}`, 1)
	text = strings.Replace(text, "sim:\n", "    network: {vfs: [{pf: 0, vf: 1}]}\nsim:\n", 1)
	cfg, err := config.Parse([]byte(testbed.PointConfig(text, b.srv.Endpoint(), "qemu:///none", b.srv.Netns())))
	if err != nil {
		t.Fatal(err)
	}
	return b, cfg, prior
}

// TestOVNPoolBind: a domain that took VF 1 from the pool of an OVN group
// is bound to the logical port its metadata names for the interface's
// MAC (iface-id, attached-mac the interface's MAC, vm-uuid the domain's
// UUID, iface-status), journaled in its journal; release puts the
// Interface's keys back exactly as before.
func TestOVNPoolBind(t *testing.T) {
	b, cfg, prior := newOVNPoolBed(t)
	doc := poolDomain("vm-p", vmAUUID, poolMeta(poolEntry("52:54:00:AA:00:09", "lsp-other"), poolEntry(domMAC, "sw0/lsp-pool")), domMAC, "0x3")
	ctx := context.Background()
	if err := Run(ctx, b.optsXML(cfg, "vm-p", "start", "begin", doc)); err != nil {
		t.Fatalf("start begin: %v", err)
	}
	want := `{attached-mac="` + domMAC + `", iface-id="sw0/lsp-pool", iface-status=active, other=keep, vflag-owner=lag0, vm-uuid="` + vmAUUID + `"}`
	if got := b.ifaceIDs(); got != want {
		t.Fatalf("after start begin: external_ids %s, want %s", got, want)
	}
	var kinds []string
	for _, e := range b.journal("vm-p") {
		kinds = append(kinds, e.Kind)
	}
	if !strings.Contains(strings.Join(kinds, " "), "ovn.bind") {
		t.Fatalf("the binding is not in the domain's journal: %v", kinds)
	}
	if err := Run(ctx, b.optsXML(cfg, "vm-p", "release", "end", doc)); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := b.ifaceIDs(); got != prior {
		t.Fatalf("after release: external_ids %s, want as before %s", got, prior)
	}
	if _, err := os.Stat(b.dir("vm-p")); !os.IsNotExist(err) {
		t.Errorf("hook journal directory left after release: %v", err)
	}
}

// TestOVNPoolRefusals: a pool VF of an OVN group whose domain does not
// name a usable logical port for its interface is refused at start with
// the domain, the interface's MAC and the metadata's place named, before
// any change (the VF's MAC and its Interface as they were, no journal);
// malformed metadata does not stop a domain that takes no such VF.
func TestOVNPoolRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, meta string
		pci        string // the VF's function (0x3: VF 1, the pool's)
		want       []string
	}{
		{"no metadata", "", "0x3", []string{"refusing to start domain vm-p", "interface " + domMAC + " takes VF 1 of ens1f0np0", "pool vflag-lag0", "names no logical switch port"}},
		{"no entry for the MAC", poolMeta(poolEntry("52:54:00:aa:00:09", "lsp-x")), "0x3", []string{"interface " + domMAC, "names no logical switch port"}},
		{"malformed entry", poolMeta(poolEntry(domMAC, "lsp-pool"), poolEntry("zz", "lsp-y")), "0x3",
			[]string{`/domain/metadata/vflag-ovn:ovn/interface[2]/@mac: "zz" is not a unicast MAC address`}},
		{"not a port name", poolMeta(poolEntry(domMAC, "lsp pool")), "0x3",
			[]string{`/domain/metadata/vflag-ovn:ovn/interface[@mac='` + domMAC + `']/@ovn_port: "lsp pool" is not a logical switch port name`}},
		{"a control character", poolMeta(poolEntry(domMAC, "lsp&#10;x")), "0x3", []string{`"lsp\nx" is not a logical switch port name`}},
		{"bound by the config", poolMeta(poolEntry(domMAC, "lsp-cfg")), "0x3",
			[]string{`@ovn_port: "lsp-cfg" is bound by the config at groups[0].vfs[0].ovn_port`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, cfg, prior := newOVNPoolBed(t)
			err := Run(context.Background(), b.optsXML(cfg, "vm-p", "start", "begin", poolDomain("vm-p", vmAUUID, tc.meta, domMAC, tc.pci)))
			if err == nil {
				t.Fatal("started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
			if got := b.ifaceIDs(); got != prior {
				t.Errorf("refused, yet external_ids %s, was %s", got, prior)
			}
			if got := b.vfMAC(); got != priorMAC {
				t.Errorf("refused, yet VF MAC %s, was %s", got, priorMAC)
			}
			if _, err := os.Stat(b.dir("vm-p")); !os.IsNotExist(err) {
				t.Errorf("refused, yet a journal directory: %v", err)
			}
		})
	}
	t.Run("malformed metadata, no pool VF", func(t *testing.T) {
		b, _ := newOVNBed(t) // VF 1 is vm-a's attachment, bound to lsp-a
		doc := poolDomain("vm-a", vmAUUID, poolMeta(poolEntry("zz", "")), domMAC, "0x3")
		if err := Run(context.Background(), b.optsXML(b.cfg, "vm-a", "start", "begin", doc)); err != nil {
			t.Fatalf("refused: %v", err)
		}
		if got := b.ifaceIDs(); !strings.Contains(got, "iface-id=lsp-a") {
			t.Fatalf("external_ids %s: not bound to the attachment's lsp-a", got)
		}
	})
}

// TestOVNPoolPortTaken: a logical port another interface of br-int is
// bound to already (another domain naming the same port) is refused,
// naming that interface; release undoes what prepare did before it.
func TestOVNPoolPortTaken(t *testing.T) {
	b, cfg, prior := newOVNPoolBed(t)
	h := b.host()
	other := representor(t, h, 0)
	h.Close()
	b.srv.MustVsctl("set", "Interface", other, "external_ids:iface-id=lsp-pool", "external_ids:vm-uuid=u-1")
	doc := poolDomain("vm-p", vmAUUID, poolMeta(poolEntry(domMAC, "lsp-pool")), domMAC, "0x3")
	ctx := context.Background()
	err := Run(ctx, b.optsXML(cfg, "vm-p", "start", "begin", doc))
	if err == nil || !strings.Contains(err.Error(), "logical switch port lsp-pool is bound already, to interface "+other) {
		t.Fatalf("start begin: %v, want a refusal naming %s", err, other)
	}
	if err := Run(ctx, b.optsXML(cfg, "vm-p", "release", "end", doc)); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := b.ifaceIDs(); got != prior {
		t.Fatalf("after release: external_ids %s, want %s", got, prior)
	}
	if got := b.vfMAC(); got != priorMAC {
		t.Errorf("after release: VF MAC %s, want %s", got, priorMAC)
	}
}

// representor is the representor of VF vf of ens1f0np0.
func representor(t *testing.T, h *host.Host, vf int) string {
	t.Helper()
	pf, err := eswitch.ResolvePF(h.Kernel, h.FS, "ens1f0np0")
	if err != nil {
		t.Fatal(err)
	}
	reps, err := eswitch.Representors(h.Kernel, h.FS, pf)
	if err != nil || reps[vf] == "" {
		t.Fatalf("representors: %v %v", reps, err)
	}
	return reps[vf]
}
