package ovnsb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vflag/vflag/ovs/ovnsb"
	"github.com/vflag/vflag/ovs/ovnsb/sbtest"
)

func TestMain(m *testing.M) { sbtest.Main(m) }

func ptr[T any](v T) *T { return &v }

// Read over each connection method finds every chassis with its encaps and
// the bindings of the ports asked for (no others): bound here and up, bound
// elsewhere, unbound, and one the Southbound does not have.
func TestReadEachRemote(t *testing.T) {
	t.Parallel()
	s := sbtest.Start(t)
	s.AddChassis("chassis-a", "geneve", "192.0.2.1")
	s.AddChassis("chassis-b", "geneve", "192.0.2.2")
	for _, p := range []string{"vm1-eth0", "vm2-eth0", "vm3-eth0", "other"} {
		s.AddPort(p)
	}
	s.Bind("vm1-eth0", "chassis-a", true)
	s.Bind("vm2-eth0", "chassis-b", false)
	s.Bind("other", "chassis-b", true)
	want := &ovnsb.Snapshot{
		Chassis: []ovnsb.Chassis{
			{Name: "chassis-a", Hostname: "chassis-a.example", Encaps: []ovnsb.Encap{{Type: "geneve", IP: "192.0.2.1"}}},
			{Name: "chassis-b", Hostname: "chassis-b.example", Encaps: []ovnsb.Encap{{Type: "geneve", IP: "192.0.2.2"}}},
		},
		Bindings: map[string]ovnsb.Binding{
			"vm1-eth0": {LogicalPort: "vm1-eth0", Chassis: "chassis-a", Up: ptr(true)},
			"vm2-eth0": {LogicalPort: "vm2-eth0", Chassis: "chassis-b", Up: ptr(false)},
			"vm3-eth0": {LogicalPort: "vm3-eth0", Up: ptr(false)}, // as ovn-northd makes it
		},
	}
	for _, tc := range []struct {
		name, remote string
		tls          *ovnsb.TLS
	}{
		{"unix", s.Endpoint(), nil},
		{"tcp", s.TCP(), nil},
		{"ssl", s.SSL(), s.TLS()},
		{"a list, the first one down", "tcp:127.0.0.1:1," + s.TCP(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			got, err := ovnsb.Read(ctx, tc.remote, tc.tls, []string{"vm1-eth0", "vm2-eth0", "vm3-eth0", "absent"})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("snapshot (-want +got):\n%s", d)
			}
		})
	}
}

// No ports asked for: the chassis alone, no binding read.
func TestReadNoPorts(t *testing.T) {
	t.Parallel()
	s := sbtest.Start(t)
	s.AddChassis("chassis-a", "vxlan", "2001:db8::1")
	s.AddPort("vm1-eth0")
	got, err := ovnsb.Read(context.Background(), s.Endpoint(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Bindings) != 0 || len(got.Chassis) != 1 || got.Chassis[0].Encaps[0] != (ovnsb.Encap{Type: "vxlan", IP: "2001:db8::1"}) {
		t.Errorf("got %+v", got)
	}
}

// An ssl: remote without the files, or whose server a foreign CA signed,
// is refused with the reason.
func TestReadSSLRefusals(t *testing.T) {
	t.Parallel()
	s, other := sbtest.Start(t), sbtest.Start(t)
	foreignCA := other.TLS()
	foreignCA.PrivateKey, foreignCA.Certificate = s.TLS().PrivateKey, s.TLS().Certificate
	for _, tc := range []struct {
		name string
		tls  *ovnsb.TLS
		want string
	}{
		{"no files", nil, "needs a private key, a certificate and a CA certificate"},
		{"no CA", &ovnsb.TLS{PrivateKey: s.TLS().PrivateKey, Certificate: s.TLS().Certificate}, "needs a private key"},
		{"another CA", foreignCA, "not signed by CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := ovnsb.Read(ctx, s.SSL(), tc.tls, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	for _, tc := range []struct {
		remote string
		want   []string
		err    string
	}{
		{remote: "unix:/run/ovn/ovnsb_db.sock", want: []string{"unix:/run/ovn/ovnsb_db.sock"}},
		{remote: "tcp:10.0.0.1:6642, ssl:[2001:db8::1]:6642", want: []string{"tcp:10.0.0.1:6642", "ssl:[2001:db8::1]:6642"}},
		{remote: "tcp:10.0.0.1", err: "has no HOST:PORT"},
		{remote: "ssl:10.0.0.1:", err: "has no HOST:PORT"},
		{remote: "ptcp:6642", err: `connection method "ptcp" is not unix, tcp or ssl`},
		{remote: "10.0.0.1:6642", err: `connection method "10.0.0.1"`},
		{remote: "", err: "an empty connection method"},
		{remote: "unix:", err: "is not unix:PATH"},
	} {
		got, err := ovnsb.Endpoints(tc.remote)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Endpoints(%q) = %v, %v; want an error saying %q", tc.remote, got, err, tc.err)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("Endpoints(%q) = %v, %v; want %v", tc.remote, got, err, tc.want)
		}
	}
}

// A Central's ovn-northd writes the Port_Bindings of the logical ports
// created in its Northbound (AddSwitch returns once it has), unbound and
// not up, as Read finds them; the Southbound also answers on a socket
// added with Listen.
func TestCentralNorthdWritesBindings(t *testing.T) {
	t.Parallel()
	c := sbtest.StartCentral(t)
	if err := c.AddSwitch("ls0", "p1", "p2"); err != nil {
		t.Fatal(err)
	}
	sock := t.TempDir() + "/sb.sock"
	if err := c.SB.Listen("punix:" + sock); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := ovnsb.Read(ctx, "unix:"+sock, nil, []string{"p1", "p2", "p3"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ovnsb.Binding{"p1": {LogicalPort: "p1", Up: ptr(false)}, "p2": {LogicalPort: "p2", Up: ptr(false)}}
	if d := cmp.Diff(want, got.Bindings); d != "" {
		t.Errorf("bindings (-want +got):\n%s", d)
	}
}

// A binding's addresses (the mac column) are read; LogicalFlowsByCookie
// finds a logical flow by the first 32 bits of its UUID (the cookie
// ovn-controller gives its OpenFlow flows) with its stage, and nothing
// for a cookie no flow has.
func TestBindingMACAndLogicalFlows(t *testing.T) {
	t.Parallel()
	s := sbtest.Start(t)
	s.AddPort("vm1-eth0")
	s.MustSbctl("set", "Port_Binding", "vm1-eth0", `mac="02:00:00:00:00:01 10.10.0.1"`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := ovnsb.Read(ctx, s.Endpoint(), nil, []string{"vm1-eth0"})
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Bindings["vm1-eth0"].MAC; len(m) != 1 || m[0] != "02:00:00:00:00:01 10.10.0.1" {
		t.Errorf("mac %q", m)
	}
	uuid := strings.TrimSpace(s.MustSbctl("create", "Logical_Flow", "pipeline=egress", "table_id=4", "priority=2001",
		`match="outport == \"vm1-eth0\" && ip4"`, `actions="drop;"`, "external_ids:stage-name=ls_out_acl"))
	s.MustSbctl("create", "Logical_Flow", "pipeline=ingress", "table_id=0", "priority=50", `match="1"`, `actions="next;"`)
	lfs, err := ovnsb.LogicalFlowsByCookie(ctx, s.TCP(), nil, []string{strings.ToUpper(uuid[:8]), "00000000"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]ovnsb.LogicalFlow{uuid[:8]: {{UUID: uuid, Pipeline: "egress", Table: 4, Stage: "ls_out_acl",
		Match: `outport == "vm1-eth0" && ip4`, Actions: "drop;"}}}
	if d := cmp.Diff(want, lfs); d != "" {
		t.Errorf("logical flows (-want +got):\n%s", d)
	}
}
