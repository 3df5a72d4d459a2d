package libvirtx

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ovnMeta is an OVN metadata element as libvirt writes it into a domain's
// <metadata>, with the given entries.
func ovnMeta(entries ...string) string {
	return `<vflag-ovn:ovn xmlns:vflag-ovn="https://vflag.dev/xmlns/vflag-ovn/1">` + strings.Join(entries, "") + `</vflag-ovn:ovn>`
}

// TestParseOVNMetadata: the entries are read by MAC (lower case), beside
// vflag's claims and other tools' elements; every malformed piece is a
// problem naming its XPath and value, and the entry it spoils is not read.
func TestParseOVNMetadata(t *testing.T) {
	const claims = `<vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1"><vflag:vf pci="0000:61:00.2" mac="52:54:00:10:00:00" owner="lag0"/></vflag:vflag>`
	const other = `<app:x xmlns:app="https://example.org/app"><app:interface mac="zz" ovn_port=""/></app:x>`
	e := func(mac, port string) string {
		return `<vflag-ovn:interface mac="` + mac + `" ovn_port="` + port + `"/>`
	}
	tests := []struct {
		name     string
		inner    string
		ports    map[string]string
		problems []string
	}{
		{"none", claims + other, nil, nil},
		{"two entries beside others", claims + ovnMeta(e("52:54:00:30:00:01", "vm3-eth0"), e("52:54:00:30:00:02", "sw0/vm3:1")) + other,
			map[string]string{"52:54:00:30:00:01": "vm3-eth0", "52:54:00:30:00:02": "sw0/vm3:1"}, nil},
		{"children without a prefix, as virsh metadata --set leaves them", `<vflag-ovn:ovn xmlns:vflag-ovn="https://vflag.dev/xmlns/vflag-ovn/1"><interface mac="52:54:00:30:00:01" ovn_port="vm3-eth0"/></vflag-ovn:ovn>`,
			map[string]string{"52:54:00:30:00:01": "vm3-eth0"}, nil},
		{"upper-case MAC", ovnMeta(e("52:54:00:AB:00:01", "p")), map[string]string{"52:54:00:ab:00:01": "p"}, nil},
		{"missing mac", ovnMeta(`<vflag-ovn:interface ovn_port="p"/>`), nil,
			[]string{`/domain/metadata/vflag-ovn:ovn/interface[1]/@mac: "" is missing`}},
		{"bad mac", ovnMeta(e("52:54:00:30:00:01", "a"), e("01:00:5e:00:00:01", "b")), map[string]string{"52:54:00:30:00:01": "a"},
			[]string{`/domain/metadata/vflag-ovn:ovn/interface[2]/@mac: "01:00:5e:00:00:01" is not a unicast MAC address`}},
		{"missing ovn_port", ovnMeta(`<vflag-ovn:interface mac="52:54:00:30:00:01"/>`), nil,
			[]string{`/domain/metadata/vflag-ovn:ovn/interface[1]/@ovn_port: "" is missing`}},
		{"MAC twice", ovnMeta(e("52:54:00:30:00:01", "a"), e("52:54:00:30:00:01", "b")), map[string]string{"52:54:00:30:00:01": "a"},
			[]string{`/domain/metadata/vflag-ovn:ovn/interface[2]/@mac: "52:54:00:30:00:01" is already bound at /domain/metadata/vflag-ovn:ovn/interface[1]/@mac`}},
		{"port twice", ovnMeta(e("52:54:00:30:00:01", "a"), e("52:54:00:30:00:02", "a")), map[string]string{"52:54:00:30:00:01": "a"},
			[]string{`/domain/metadata/vflag-ovn:ovn/interface[2]/@ovn_port: "a" is already used at /domain/metadata/vflag-ovn:ovn/interface[1]/@ovn_port`}},
		{"unknown child", ovnMeta(`<vflag-ovn:interfce mac="52:54:00:30:00:01" ovn_port="a"/>`), nil,
			[]string{`/domain/metadata/vflag-ovn:ovn/interfce: "interfce" is not an <interface mac=... ovn_port=...> entry`}},
		{"wrong root", `<vflag-ovn:ports xmlns:vflag-ovn="https://vflag.dev/xmlns/vflag-ovn/1"/>`, nil,
			[]string{`/domain/metadata/vflag-ovn:ports: "ports" is not vflag's OVN element`}},
		{"two elements", ovnMeta(e("52:54:00:30:00:01", "a")) + ovnMeta(e("52:54:00:30:00:02", "b")), map[string]string{"52:54:00:30:00:01": "a"},
			[]string{`/domain/metadata/vflag-ovn:ovn: "ovn" is a second element`}},
		{"broken XML of ours", `<vflag-ovn:ovn xmlns:vflag-ovn="https://vflag.dev/xmlns/vflag-ovn/1"><vflag-ovn:interface`, nil,
			[]string{`/domain/metadata: XML syntax error`}},
		{"broken XML of another's", `<app:x xmlns:app="https://example.org/app"><`, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ports, problems := ParseOVNMetadata(tt.inner)
			if diff := cmp.Diff(tt.ports, ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if len(problems) != len(tt.problems) {
				t.Fatalf("problems %q, want %q", problems, tt.problems)
			}
			for i, want := range tt.problems {
				if !strings.HasPrefix(problems[i], want) {
					t.Errorf("problem %d: %q, want it to start with %q", i, problems[i], want)
				}
			}
		})
	}
}

// TestParseHookDomainOVN: the hook's parse carries the domain's OVN
// metadata, from the XML libvirt passes at "start begin".
func TestParseHookDomainOVN(t *testing.T) {
	doc := strings.Replace(string(domainXML(poolIfaceStarted)), "</metadata>",
		ovnMeta(`<vflag-ovn:interface mac="52:54:00:10:00:07" ovn_port="vm1-eth1"/><vflag-ovn:interface mac="x" ovn_port="y"/>`)+"</metadata>", 1)
	d, err := ParseHookDomain([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"52:54:00:10:00:07": "vm1-eth1"}, d.OVNPorts); diff != "" {
		t.Errorf("OVNPorts (-want +got):\n%s", diff)
	}
	if len(d.OVNProblems) != 1 || !strings.Contains(d.OVNProblems[0], `interface[2]/@mac: "x"`) {
		t.Errorf("OVNProblems %q", d.OVNProblems)
	}
}
