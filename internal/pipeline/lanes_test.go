package pipeline

import (
	"encoding/json"
	"testing"

	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/teardown"
)

// TestSharedThing: the OVS kinds share the Open_vSwitch row, an
// attachment shares its domain (of its libvirt), the rest nothing; and
// only an eswitch mode change is started together.
func TestSharedThing(t *testing.T) {
	attach := func(uri, domain string) teardown.Entry {
		raw, err := json.Marshal(attachRecord{URI: uri, Attachment: libvirtx.Record{Domain: domain, PCI: "0000:61:00.2"}})
		if err != nil {
			t.Fatal(err)
		}
		return teardown.Entry{Kind: attachKind{}.Name(), ID: "a/" + domain, Record: raw}
	}
	kind := func(k string) teardown.Entry { return teardown.Entry{Kind: k, ID: k, Record: json.RawMessage(`{}`)} }
	row := sharedThing(kind(ovsBridgeKind{}.Name()))
	for _, k := range []string{ovsConfigKind{}.Name(), hwOffloadKind{}.Name()} {
		if got := sharedThing(kind(k)); got != row || row == "" {
			t.Errorf("%s shares %q, the bridge %q: want the same Open_vSwitch row", k, got, row)
		}
	}
	vm1, vm2 := sharedThing(attach("qemu:///system", "vm1")), sharedThing(attach("qemu:///system", "vm2"))
	other := sharedThing(attach("qemu+ssh://h2/system", "vm1"))
	if vm1 == "" || vm1 == vm2 || vm1 == other || vm1 == row {
		t.Errorf("attachments share vm1 %q, vm2 %q, vm1 elsewhere %q (the OVS row %q): want one thing per domain", vm1, vm2, other, row)
	}
	if again := sharedThing(attach("qemu:///system", "vm1")); again != vm1 {
		t.Errorf("two attachments to vm1 share %q and %q", vm1, again)
	}
	for _, k := range []string{numVFsKind{}.Name(), modeKind{}.Name(), bondKind{}.Name(), tcBlockKind{}.Name()} {
		if got := sharedThing(kind(k)); got != "" {
			t.Errorf("%s shares %q, want nothing", k, got)
		}
	}
	for _, k := range []string{numVFsKind{}.Name(), bondKind{}.Name(), ovsBridgeKind{}.Name(), attachKind{}.Name()} {
		if slowTogether(kind(k)) {
			t.Errorf("%s is started together, want only the eswitch mode change", k)
		}
	}
	if !slowTogether(kind(modeKind{}.Name())) {
		t.Error("the eswitch mode change is not started together")
	}
}
