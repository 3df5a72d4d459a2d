package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/libvirtx/virttest"
)

// netPlanBed is a real libvirtd that sees fake VFs and records its network
// hook calls, and an Env whose libvirt it is.
type netPlanBed struct {
	d *virttest.Daemon
	e *Env
	c *libvirtx.Conn
}

// netPlanVFs are the VFs a row of TestNetworkPlanIsWhatApplyDoes writes:
// each row has its own bus (onBus), as libvirt refuses no address another
// network has, and the plan does.
var netPlanVFs = []string{"0000:71:00.2", "0000:71:00.3", "0000:71:00.4", "0000:71:00.5"}

const netPlanRows = 32

// onBus moves the text of a row's addresses (0000:71:...) to row i's bus.
func onBus(text string, i int) string {
	return strings.ReplaceAll(text, "0000:71:", fmt.Sprintf("0000:%02x:", 0x71+i))
}

// rowSpec is s (the addresses of netPlanVFs) for the row whose network is
// name ("plan<i>").
func rowSpec(s libvirtx.NetworkSpec, name string) libvirtx.NetworkSpec {
	var i int
	if _, err := fmt.Sscanf(name, "plan%d", &i); err != nil {
		panic("row network " + name)
	}
	s.Name = name
	s.PCIs = slices.Clone(s.PCIs)
	for j, a := range s.PCIs {
		s.PCIs[j] = onBus(a, i)
	}
	return s
}

func newNetPlanBed(t *testing.T) *netPlanBed {
	var vfs []string
	for i := range netPlanRows {
		for _, a := range netPlanVFs {
			vfs = append(vfs, onBus(a, i))
		}
	}
	d := virttest.Start(t, virttest.FakeVFs(vfs...), virttest.CaptureHooks("network"))
	cfg := &config.Config{}
	cfg.ApplyDefaults()
	h := host.New(nil, nil, "", d.URI())
	t.Cleanup(h.Close)
	c, err := h.Virt()
	if err != nil {
		t.Fatal(err)
	}
	return &netPlanBed{d: d, e: New(cfg, h, nil), c: c}
}

func (b *netPlanBed) virsh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := b.d.Virsh(args...)
	if err != nil {
		t.Fatalf("virsh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// redefine changes the persistent definition of a network with edit (on
// its XML text) and defines it again with virsh, as an operator would.
func (b *netPlanBed) redefine(t *testing.T, name string, edit func(string) string) {
	t.Helper()
	x := b.virsh(t, "net-dumpxml", "--inactive", name)
	y := edit(x)
	if y == x {
		t.Fatalf("redefine %s: the edit changed nothing in\n%s", name, x)
	}
	f := filepath.Join(t.TempDir(), "net.xml")
	if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	b.virsh(t, "net-define", f)
}

// port allocates a port of the network for domain (virsh net-port-create,
// as a domain start does).
func (b *netPlanBed) port(t *testing.T, network, domain string, n int) {
	t.Helper()
	doc := fmt.Sprintf("<networkport><uuid>aaaaaaaa-0000-0000-0000-%012d</uuid><owner><name>%s</name><uuid>11111111-2222-3333-4444-%012d</uuid></owner><mac address='52:54:00:ab:00:%02x'/></networkport>", n, domain, n, n)
	f := filepath.Join(t.TempDir(), "port.xml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	b.virsh(t, "net-port-create", network, f)
}

// seen is what libvirt shows of a network: its persistent definition (the
// running one of a transient network), whether it is active, persistent and
// autostarted, and its hook calls so far.
type seen struct {
	exists, active, persistent, autostart bool
	config                                string
	hooks                                 int
}

var netInfoRE = regexp.MustCompile(`(?m)^(Active|Persistent|Autostart):\s+(\S+)`)

func (b *netPlanBed) look(t *testing.T, name string) seen {
	t.Helper()
	var s seen
	info, err := b.d.Virsh("net-info", name)
	if err != nil {
		return s
	}
	s.exists = true
	for _, m := range netInfoRE.FindAllStringSubmatch(info, -1) {
		switch m[1] {
		case "Active":
			s.active = m[2] == "yes"
		case "Persistent":
			s.persistent = m[2] == "yes"
		case "Autostart":
			s.autostart = m[2] == "yes"
		}
	}
	if x, err := b.d.Virsh("net-dumpxml", "--inactive", name); err == nil {
		s.config = x
	}
	s.hooks = len(b.hookOps(t, name))
	return s
}

func (b *netPlanBed) hookOps(t *testing.T, name string) []string {
	t.Helper()
	ops, err := b.d.HookOps("network", name)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// did is what an EnsureNetwork call did, as libvirt shows it: "refused"
// (an error; then nothing may have changed), else the actions seen, in
// NetworkPlan.Actions' words and order: define (a network made, or its
// persistent definition changed), start, restart (the hook's stopped,
// then start), update portgroups (the hook's updated), autostart (turned
// on); "none" for none.
func (b *netPlanBed) did(t *testing.T, name string, before seen, err error) string {
	t.Helper()
	after := b.look(t, name)
	if err != nil {
		if after != before {
			t.Errorf("a refused EnsureNetwork changed the network: %+v -> %+v", before, after)
		}
		return "refused"
	}
	ops := b.hookOps(t, name)[before.hooks:]
	var acts []string
	if after.config != before.config || after.persistent != before.persistent {
		acts = append(acts, "define")
	}
	switch {
	case slices.Contains(ops, "stopped end") && slices.Contains(ops, "start begin"):
		acts = append(acts, "restart")
	case slices.Contains(ops, "start begin"):
		acts = append(acts, "start")
	}
	if slices.Contains(ops, "updated begin") {
		acts = append(acts, "update portgroups")
	}
	if after.autostart && !before.autostart {
		acts = append(acts, "autostart")
	}
	if len(acts) == 0 {
		return "none"
	}
	return strings.Join(acts, ", ")
}

// planned is the plan's verdict in did's words.
func planned(p libvirtx.NetworkPlan) string {
	switch {
	case p.Refused != nil:
		return "refused"
	case !p.Needed():
		return "none"
	}
	return strings.Join(p.Actions(), ", ")
}

func netSpec(name string, pcis []string, pgs ...libvirtx.NetworkPortgroup) libvirtx.NetworkSpec {
	return libvirtx.NetworkSpec{Name: name, Owner: "g", PCIs: pcis, Portgroups: pgs}
}

// TestNetworkPlanIsWhatApplyDoes: for each state libvirt's network may be
// in, the network step's check (what `vflag plan` shows, and whether up
// runs the step) and EnsureNetwork (what up does) come to the same
// verdict, on a real libvirtd: refused, nothing, or a change.
func TestNetworkPlanIsWhatApplyDoes(t *testing.T) {
	b := newNetPlanBed(t)
	pool := netPlanVFs[:2]
	pgA := libvirtx.NetworkPortgroup{Name: "a", Default: true, VLAN: 10}
	pgA10 := libvirtx.NetworkPortgroup{Name: "a", VLAN: 10}                // not the default
	pgA11 := libvirtx.NetworkPortgroup{Name: "a", Default: true, VLAN: 11} // other metadata
	made := func(s libvirtx.NetworkSpec) func(*testing.T, string) {
		return func(t *testing.T, n string) { b.ensure(t, rowSpec(s, n)) }
	}
	withPort := func(s libvirtx.NetworkSpec) func(*testing.T, string) {
		return func(t *testing.T, n string) { made(s)(t, n); b.port(t, n, "vm1", 1) }
	}
	then := func(first func(*testing.T, string), next ...func(*testing.T, string)) func(*testing.T, string) {
		return func(t *testing.T, n string) {
			first(t, n)
			for _, f := range next {
				f(t, n)
			}
		}
	}
	virsh := func(args ...string) func(*testing.T, string) {
		return func(t *testing.T, n string) { b.virsh(t, append(args, n)...) }
	}
	redefine := func(old, new string) func(*testing.T, string) {
		return func(t *testing.T, n string) {
			b.redefine(t, n, func(x string) string { return strings.Replace(x, old, new, 1) })
		}
	}
	restart := then(virsh("net-destroy"), virsh("net-start"))
	base := netSpec("", pool, pgA)
	tests := []struct {
		name  string
		setup func(t *testing.T, name string) // the network as it is (nil: none)
		want  libvirtx.NetworkSpec            // what the config wants (Name set by the test)
		// verdict is the plan's (planned); says are texts the step's
		// check shows.
		verdict string
		says    []string
	}{
		{"missing", nil, base, "define, start, autostart", []string{"define a hostdev pool of 2 VF(s), portgroups [a(default) vlan 10]; start, autostart"}},
		{"same", made(base), base, "none", []string{"2 VF(s), active, autostart"}},
		{"trunks in another order", made(netSpec("", pool, libvirtx.NetworkPortgroup{Name: "t", VLANMode: "trunk", Trunks: []int{10, 20}})),
			netSpec("", pool, libvirtx.NetworkPortgroup{Name: "t", VLANMode: "trunk", Trunks: []int{20, 10}}), "none", nil},
		{"stopped, autostart off", then(made(base), virsh("net-destroy"), virsh("net-autostart", "--disable")), base, "start, autostart", nil},
		{"autostart off", then(made(base), virsh("net-autostart", "--disable")), base, "autostart", []string{"autostart"}},
		{"stopped, pool differs", then(made(base), virsh("net-destroy")), netSpec("", netPlanVFs[1:3], pgA), "define, start",
			[]string{"pool + 0000:71:00.4, pool - 0000:71:00.2; define, start"}},
		{"pool differs", made(base), netSpec("", netPlanVFs[1:3], pgA), "define, restart", nil},
		{"libvirt's portgroups differ", made(base), netSpec("", pool, pgA10), "define, update portgroups",
			[]string{"portgroups [a(default) vlan 10] -> [a vlan 10]"}},
		// A group changed to switchdev: the VLAN leaves libvirt's <vlan>
		// (mlx5 refuses a VF VLAN through the PF); the metadata is the same.
		{"libvirt's <vlan> goes", made(netSpec("", pool, libvirtx.NetworkPortgroup{Name: "a", VLAN: 10, LibvirtVLAN: true})), netSpec("", pool, pgA10),
			"define, update portgroups", []string{"(libvirt <vlan>)"}},
		{"metadata differs", made(base), netSpec("", pool, pgA11), "define, restart", nil},
		{"ports held, same", withPort(base), base, "none", nil},
		{"ports held, pool grows", withPort(base), netSpec("", netPlanVFs[:3], pgA), "refused",
			[]string{"VF pool 0000:71:00.2 0000:71:00.3 -> 0000:71:00.2 0000:71:00.3 0000:71:00.4", "while domains hold its VFs (domain vm1 on 0000:71:00.2)"}},
		{"ports held, the held VF leaves", withPort(base), netSpec("", netPlanVFs[1:2], pgA), "refused",
			[]string{"VF 0000:71:00.2 held by domain vm1 would leave the pool"}},
		{"ports held, portgroups differ", withPort(base), netSpec("", pool, pgA10), "refused",
			[]string{"portgroups: a live update resets libvirt's VF usage counts"}},
		{"ports held, metadata differs", withPort(base), netSpec("", pool, pgA11), "refused",
			[]string{"vflag metadata: libvirt 9.0 has no live network metadata update"}},
		// The running network is right, the persistent definition is not.
		{"ports held, persistent pool differs alone", then(withPort(base), redefine("function='0x3'", "function='0x5'")), base, "define",
			[]string{"pool - 0000:71:00.5; define"}},
		{"persistent portgroups differ alone", then(made(base), redefine("<portgroup name='a' default='yes'", "<portgroup name='a'")), base, "define",
			[]string{"portgroups [a vlan 10] -> [a(default) vlan 10]; define"}},
		{"persistent metadata differs alone", then(made(base), redefine(`vlan="10"`, `vlan="12"`)), base, "define", nil},
		{"transient", then(made(base), virsh("net-undefine")), base, "define, autostart", nil},
		{"foreign", then(made(base), func(t *testing.T, n string) {
			b.redefine(t, n, func(x string) string {
				return regexp.MustCompile(`(?s)<metadata>.*</metadata>`).ReplaceAllString(x, "")
			})
		}, restart), base, "refused", []string{"exists and is not vflag's"}},
		{"another group's", made(libvirtx.NetworkSpec{Owner: "other", PCIs: pool}), base, "refused", []string{`belongs to vflag group "other", not "g"`}},
		// libvirt takes it, and hands the VF out from both networks.
		{"a VF in another network's pool", then(made(base), func(t *testing.T, n string) {
			f := filepath.Join(t.TempDir(), "other.xml")
			bus := rowSpec(base, n).PCIs[1][5:7] // the pool's second VF, 0000:BB:00.3
			doc := fmt.Sprintf("<network><name>other-%s</name><forward mode='hostdev' managed='yes'><address type='pci' domain='0x0000' bus='0x%s' slot='0x00' function='0x3'/></forward></network>", n, bus)
			if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			b.virsh(t, "net-define", f)
		}), base, "refused", []string{"refusing libvirt network", "VF 0000:71:00.3 is already in the pool of libvirt network other-plan"}},
		{"vflag's metadata without an owner", then(made(base), redefine(` owner="g"`, ` owner=""`), restart), base, "refused", nil},
	}
	if len(tests) > netPlanRows {
		t.Fatalf("%d rows, %d buses of fake VFs", len(tests), netPlanRows)
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprintf("plan%d", i)
			if tc.setup != nil {
				tc.setup(t, name)
			}
			spec := rowSpec(tc.want, name)
			// The step's check (what plan shows, whether up applies it) and
			// libvirtx's plan, which it shows.
			ch, checkErr := networkKind{}.step(b.e, spec).Check(context.Background())
			p, err := b.c.PlanNetwork(spec)
			if err != nil {
				t.Fatal(err)
			}
			verdict := planned(p)
			switch {
			case (checkErr != nil) != (p.Refused != nil):
				t.Errorf("the step's check: %v; the plan: refused %v", checkErr, p.Refused)
			case ch.Needed != p.Needed():
				t.Errorf("the step's check: needed %v (%q); the plan: %s", ch.Needed, ch.Summary, verdict)
			}
			for _, w := range tc.says {
				w = onBus(w, i)
				if !strings.Contains(ch.Summary+fmt.Sprint(checkErr), w) {
					t.Errorf("the step's check says %q (%v), want %q in it", ch.Summary, checkErr, w)
				}
			}
			before := b.look(t, name)
			_, applyErr := b.c.EnsureNetwork(spec)
			if did := b.did(t, name, before, applyErr); did != verdict {
				t.Errorf("the plan says %s (%q, %v); EnsureNetwork did %s (%v)", verdict, p.String(), p.Refused, did, applyErr)
			}
			if verdict != tc.verdict {
				t.Errorf("the plan says %s, want %s", verdict, tc.verdict)
			}
			// Applied, the network is what the spec wants: nothing more to do.
			if applyErr == nil {
				if p, err := b.c.PlanNetwork(spec); err != nil || p.Needed() || p.Refused != nil {
					t.Errorf("after EnsureNetwork the plan is %s (%q), %v; want none", planned(p), p.String(), err)
				}
			}
		})
	}
}

// ensure makes the network s with EnsureNetwork.
func (b *netPlanBed) ensure(t *testing.T, s libvirtx.NetworkSpec) {
	t.Helper()
	if _, err := b.c.EnsureNetwork(s); err != nil {
		t.Fatal(err)
	}
}
