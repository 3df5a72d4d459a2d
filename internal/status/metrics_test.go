package status

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/status/statustest"
)

// TestWriteStatusPrometheusEscapes: label values are escaped as the format
// wants, and families without samples are left out.
func TestWriteStatusPrometheusEscapes(t *testing.T) {
	hs := HostStatus{Groups: []GroupStatus{{Name: "g", Eswitch: "legacy", VFs: []VFStatus{{PF: "p", Index: 2, PCI: "0000:01:00.2", Domain: "a\"b\\c\nd"}}}}}
	var b strings.Builder
	if err := WritePrometheus(&b, hs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := `vflag_vf_info{group="g",pf="p",vf="2",pci="0000:01:00.2",driver="",mac="",representor="",ovs_port="",domain="a\"b\\c\nd"} 1`
	if !strings.Contains(out, want+"\n") {
		t.Errorf("want line %s in\n%s", want, out)
	}
	if strings.Contains(out, "vflag_lag_active") || strings.Contains(out, "vflag_pf_up") {
		t.Errorf("families without samples printed:\n%s", out)
	}
	fams := statustest.CheckExposition(t, out)
	if fams["vflag_vfs_attached"] != 1 {
		t.Errorf("families: %v", fams)
	}
}

// TestStatusPrometheusDatapath: a group whose bridge runs on the kernel
// datapath exports its upcall counters; one that lost every upcall can be
// told apart (lost == upcalls > 0), and the exposition stays valid.
func TestStatusPrometheusDatapath(t *testing.T) {
	dead := eswitch.DatapathStats{Name: "ovs-system", Missed: 13, Lost: 13, PerCPUDispatch: true}
	hs := HostStatus{Groups: []GroupStatus{
		{Name: "lag0", Eswitch: "switchdev", Bridge: "br-vf", HWOffload: "true", Datapath: &dead},
		{Name: "lag1", Eswitch: "switchdev", Bridge: "br-user", HWOffload: "true"}, // netdev datapath: no series
	}}
	var b strings.Builder
	if err := WritePrometheus(&b, hs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`vflag_ovs_datapath_upcalls{group="lag0",bridge="br-vf",datapath="ovs-system"} 13`,
		`vflag_ovs_datapath_upcalls_lost{group="lag0",bridge="br-vf",datapath="ovs-system"} 13`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("want line %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, `datapath_upcalls{group="lag1"`) {
		t.Errorf("series for a bridge without a kernel datapath:\n%s", out)
	}
	fams := statustest.CheckExposition(t, out)
	if fams["vflag_ovs_datapath_upcalls_lost"] != 1 {
		t.Errorf("families: %v", fams)
	}
	var text strings.Builder
	WriteText(&text, hs)
	if want := "  ovs datapath ovs-system hit 0 missed 13 lost 13 flows 0 upcall dispatch per-cpu\n"; !strings.Contains(text.String(), want) {
		t.Errorf("status text lacks %q:\n%s", want, text.String())
	}
}

// TestEveryFamilyIsWritten: each metric family a status can fill is in the
// output order (vflag_network_vfs and vflag_network_active were filled and
// never written).
func TestEveryFamilyIsWritten(t *testing.T) {
	m := newMetricFamilies()
	written := map[uintptr]bool{}
	for _, f := range m.ordered() {
		p := reflect.ValueOf(f).Pointer()
		if written[p] {
			t.Errorf("family %s written twice", f.name)
		}
		written[p] = true
	}
	v := reflect.ValueOf(m).Elem()
	famType := reflect.TypeOf(&metricFamily{})
	for i := 0; i < v.NumField(); i++ {
		if fv := v.Field(i); fv.Type() == famType && !written[fv.Pointer()] {
			t.Errorf("family of field %s is never written", v.Type().Field(i).Name)
		}
	}
}

// TestStatusPrometheusOVN: a group with an ovn section exports its
// chassis's registration and its ports by state; a group without one
// has no such series.
func TestStatusPrometheusOVN(t *testing.T) {
	hs := HostStatus{Groups: []GroupStatus{
		{Name: "ovn0", Eswitch: "switchdev", Bridge: "br-int", OVN: &OVNStatus{Chassis: "hv1", Registered: true, Ports: 3, Bound: 2, Installed: 1}},
		{Name: "lag1", Eswitch: "switchdev", Bridge: "br-vf"},
	}}
	var b strings.Builder
	if err := WritePrometheus(&b, hs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`vflag_ovn_chassis_registered{group="ovn0",chassis="hv1"} 1`,
		`vflag_ovn_ports{group="ovn0",chassis="hv1",state="configured"} 3`,
		`vflag_ovn_ports{group="ovn0",chassis="hv1",state="bound"} 2`,
		`vflag_ovn_ports{group="ovn0",chassis="hv1",state="installed"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("want line %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, `vflag_ovn_chassis_registered{group="lag1"`) {
		t.Errorf("an OVN series for a group without ovn:\n%s", out)
	}
	statustest.CheckExposition(t, out)
}
