package pipeline

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sim"
	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs/ovstest"
)

func TestMain(m *testing.M) { ovstest.Main(m) }

// daemons are a real ovsdb-server/ovs-vswitchd and libvirtd (domain vm1).
type daemons struct {
	ovs  *ovstest.Server
	virt *virttest.Daemon
}

func startDaemons(t testing.TB) daemons {
	d := daemons{ovs: ovstest.Start(t), virt: virttest.Start(t)}
	d.virt.DefineDomain(t, "vm1")
	return d
}

// exampleConfig is the embedded example (vflag example-config).
func exampleConfig(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/vflag-sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bedConfig is a config of the bed's runs: a base config (the example,
// legacyVFs) and edits made on its parsed value, in order. An edited config
// gets the defaults and the validation of a parsed one, unless asIs: then
// the edits are what the Env is handed (configs no file parses to, e.g. the
// ones only preflight refuses).
type bedConfig struct {
	base  string
	edits []func(*config.Config)
	asIs  bool
}

// exampleBed is the example config.
func exampleBed(t testing.TB) bedConfig { return bedConfig{base: exampleConfig(t)} }

// with is c with more edits.
func (c bedConfig) with(edits ...func(*config.Config)) bedConfig {
	c.edits = append(slices.Clone(c.edits), edits...)
	return c
}

// bed is the package's test world: a simulated host made from a config's
// sim spec, with the host.Host on it and an empty journal directory; the
// config is pointed at the real OVS and libvirtd when the bed has them.
// stepEnv, convergeEnv and convergeBed are views on it.
type bed struct {
	t          *testing.T
	d          *daemons       // the real OVS and libvirtd (nil: none; the config's endpoints are the example's)
	cfg        *config.Config // the config the bed was made from
	sim        *sim.Host
	h          *host.Host // on sim, with cfg's OVSDB endpoint and libvirt URI
	journalDir string
}

func newBed(t *testing.T, d *daemons, bc bedConfig) *bed {
	t.Helper()
	b := &bed{t: t, d: d, journalDir: filepath.Join(t.TempDir(), "state")}
	b.cfg = b.config(bc)
	spec, err := sim.DecodeSpec(b.cfg.Sim)
	if err != nil {
		t.Fatal(err)
	}
	if b.sim, err = sim.Open(t.TempDir(), spec); err != nil {
		t.Fatal(err)
	}
	b.h = host.New(b.sim, b.sim.FS(), b.cfg.OVSDB, b.cfg.Libvirt)
	t.Cleanup(func() { b.h.Close(); b.sim.Close() })
	return b
}

// config is bc pointed at the bed's daemons (when it has them) and parsed,
// its edits made.
func (b *bed) config(bc bedConfig) *config.Config {
	b.t.Helper()
	text := bc.base
	if b.d != nil {
		text = testbed.PointConfig(text, b.d.ovs.Endpoint(), b.d.virt.URI(), b.d.ovs.Netns())
	}
	c, err := config.Parse([]byte(text))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, edit := range bc.edits {
		if edit != nil {
			edit(c)
		}
	}
	if bc.asIs {
		return c
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		b.t.Fatalf("edited config: %v", err)
	}
	return c
}

// world is the host's whole state: the simulated kernel without its log
// (the log is history, not state) and, with the daemons, OVSDB and vm1's
// XML, in testbed.World's sections. A VF netdev whose VF has no MAC set
// gets a random one from the driver at each probe (as mlx5 does): masked.
func (b *bed) world() string {
	b.t.Helper()
	lines := strings.Split(testbed.Kernel(b.sim.Dump()), "\n")
	for i, l := range lines {
		if vfNetdevRE.MatchString(l) {
			lines[i] = macRE.ReplaceAllString(l, "mac=<random>")
		}
	}
	kernel := strings.Join(lines, "\n")
	if b.d == nil {
		return kernel
	}
	return testbed.World(kernel, b.d.ovs.Dump(), b.d.virt.DomainXML(b.t, "vm1"))
}

var (
	vfNetdevRE = regexp.MustCompile(`^\s+eth\d+ vf `)
	macRE      = regexp.MustCompile(`mac=[0-9a-f:]{17}`)
)

// state is world as canonical text: the names and MACs the kernel picks
// made comparable (testbed.Canonical).
func (b *bed) state() string { return testbed.Canonical(b.world()) }

// dmesgCount counts the kernel log lines containing s.
func (b *bed) dmesgCount(s string) int {
	_, log, _ := strings.Cut(b.sim.Dump(), "dmesg:\n")
	return strings.Count(log, s)
}
