package libvirtx

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePCI(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"0000:61:00.2", "0000:61:00.2", true},
		{"0000:AF:1F.7", "0000:af:1f.7", true},
		{"61:00.2", "0000:61:00.2", true},
		{" 0000:61:00.2 ", "0000:61:00.2", true},
		{"", "", false},
		{"0000:61:00", "", false},
		{"0000:61:00.8", "", false},  // function > 7
		{"0000:61:20.0", "", false},  // slot > 0x1f
		{"00000:61:00.0", "", false}, // domain too long
		{"0000:6g:00.0", "", false},
		{"0000-61-00.2", "", false},
		{"pci_0000_61_00_2", "", false},
	}
	for _, tt := range tests {
		got, err := parsePCI(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parsePCI(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"52:54:00:12:34:56", "52:54:00:12:34:56", true},
		{"52:54:00:AB:CD:EF", "52:54:00:ab:cd:ef", true},
		{"02:00:00:00:00:01", "02:00:00:00:00:01", true},
		{"", "", false},
		{"52:54:00:12:34", "", false},
		{"52:54:00:12:34:56:78", "", false},
		{"52-54-00-12-34-56", "", false},
		{"5254.0012.3456", "", false},
		{"01:00:5e:00:00:01", "", false}, // multicast
		{"ff:ff:ff:ff:ff:ff", "", false}, // broadcast
		{"00:00:00:00:00:00", "", false},
		{"52:54:00:12:34:5g", "", false},
	}
	for _, tt := range tests {
		got, err := parseMAC(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseMAC(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestInterfaceXML(t *testing.T) {
	x, err := interfaceXML("0000:61:1f.2", "52:54:00:00:00:01", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<interface type="hostdev" managed="yes">`,
		`<mac address="52:54:00:00:00:01">`,
		`<address type="pci" domain="0x0000" bus="0x61" slot="0x1f" function="0x2">`,
	} {
		if !strings.Contains(x, want) {
			t.Errorf("device XML lacks %s:\n%s", want, x)
		}
	}
	v, err := parseView("<domain type='qemu'><name>x</name><devices>" + x + "</devices></domain>")
	if err != nil {
		t.Fatal(err)
	}
	want := []iface{{pci: "0000:61:1f.2", mac: "52:54:00:00:00:01", managed: true, guestBus: -1}}
	if diff := cmp.Diff(want, v.ifaces, cmp.AllowUnexported(iface{}), cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".def"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("parsed interfaces (-want +got):\n%s", diff)
	}
}

func TestClaimsRoundTrip(t *testing.T) {
	cs := []claim{
		{PCI: "0000:61:00.3", MAC: "52:54:00:00:00:02", Owner: "lag0"},
		{PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag<&>0"},
	}
	content, err := marshalClaims(cs)
	if err != nil {
		t.Fatal(err)
	}
	// As libvirt stores it: the key as prefix, the namespace declared on
	// the element, next to another application's metadata.
	stored := strings.NewReplacer("<vflag>", `<vflag:vflag xmlns:vflag="`+MetadataNamespace+`">`,
		"</vflag>", "</vflag:vflag>", "<vf ", "<vflag:vf ", "</vf>", "</vflag:vf>").Replace(content)
	inner := `<other:x xmlns:other="https://example.org/x"><other:vf pci="0000:99:00.0" mac="52:54:00:99:99:99" owner="z"/></other:x>` + stored
	got, err := parseClaims(inner)
	if err != nil {
		t.Fatal(err)
	}
	want := []claim{cs[1], cs[0]} // sorted by PCI
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s\nstored: %s", diff, stored)
	}
	if got, err := parseClaims(""); err != nil || len(got) != 0 {
		t.Errorf("parseClaims(empty) = %v, %v", got, err)
	}
}

func TestValidate(t *testing.T) {
	good := Attachment{Domain: "vm1", PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0"}
	tests := []struct {
		name string
		mod  func(*Attachment)
		want string
	}{
		{"ok", func(*Attachment) {}, ""},
		{"no domain", func(a *Attachment) { a.Domain = " " }, "empty domain name"},
		{"bad pci", func(a *Attachment) { a.PCI = "0000:61:00" }, "invalid PCI address"},
		{"bad mac", func(a *Attachment) { a.MAC = "52:54:00" }, "invalid MAC address"},
		{"multicast mac", func(a *Attachment) { a.MAC = "03:00:00:00:00:01" }, "multicast"},
		{"no owner", func(a *Attachment) { a.Owner = "" }, "empty owner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := good
			tt.mod(&a)
			_, err := validate(a)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestActualPCI(t *testing.T) {
	tests := []struct {
		dom, bus, slot, fn string
		want               string
		ok                 bool
	}{
		{"0x0000", "0x61", "0x00", "0x2", "0000:61:00.2", true},
		{"0x0000", "0x3B", "0x1F", "0x7", "0000:3b:1f.7", true},
		{"0000", "61", "00", "2", "0000:61:00.2", true},          // no 0x
		{"", "0x61", "0x00", "0x2", "0000:61:00.2", true},        // no domain
		{"0x0000", "0x0061", "0x0", "0x2", "0000:61:00.2", true}, // wider spelling
		{"0x0000", "0x61", "0x20", "0x2", "", false},             // slot > 0x1f
		{"0x0000", "0x61", "0x00", "0x8", "", false},             // function > 7
		{"0x10000", "0x61", "0x00", "0x2", "", false},            // domain > 0xffff
		{"0x0000", "0x6g", "0x00", "0x2", "", false},
		{"0x0000", "0x61/..", "0x00", "0x2", "", false},
	}
	for _, tt := range tests {
		got, ok := actualPCI(tt.dom, tt.bus, tt.slot, tt.fn)
		if ok != tt.ok || got != tt.want {
			t.Errorf("actualPCI(%q, %q, %q, %q) = %q, %v; want %q, %v", tt.dom, tt.bus, tt.slot, tt.fn, got, ok, tt.want, tt.ok)
		}
	}
}
