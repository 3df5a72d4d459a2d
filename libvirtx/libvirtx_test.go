package libvirtx_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/libvirtx/virttest"
)

// env is one private libvirtd shared by the subtests of a top-level test;
// each subtest works on domains of its own.
type env struct {
	d *virttest.Daemon
	c *libvirtx.Conn
}

func newEnv(t *testing.T) *env {
	d := virttest.Start(t)
	c, err := libvirtx.Open(d.URI())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return &env{d: d, c: c}
}

// domain defines a fresh shut-off domain and returns its name and the
// canonical persistent XML as the baseline.
func (e *env) domain(t *testing.T, name string) (string, string) {
	t.Helper()
	e.d.DefineDomain(t, name)
	return name, canon(e.d.DomainXML(t, name))
}

var emptyMetadata = regexp.MustCompile(`\n\s*<metadata/>`)

// canon canonicalizes a domain XML for a baseline comparison: removing the
// last metadata element leaves an empty <metadata/> behind (libvirt 9.0),
// which means the same as none.
func canon(x string) string {
	return emptyMetadata.ReplaceAllString(x, "")
}

func (e *env) xml(t *testing.T, name string) string {
	t.Helper()
	return e.d.DomainXML(t, name)
}

// hostdevIfaces lists "pci mac" of the <interface type='hostdev'> in a
// domain XML, parsed independently of the package under test.
func hostdevIfaces(t *testing.T, x string) []string {
	t.Helper()
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range dom.Devices.Interfaces {
		if i.Source == nil || i.Source.Hostdev == nil || i.Source.Hostdev.PCI == nil {
			continue
		}
		a := i.Source.Hostdev.PCI.Address
		out = append(out, fmt.Sprintf("%04x:%02x:%02x.%x %s", *a.Domain, *a.Bus, *a.Slot, *a.Function, i.MAC.Address))
	}
	return out
}

// attachForeign attaches, with virsh and not through vflag, a hostdev
// interface to the persistent definition.
func (e *env) attachForeign(t *testing.T, name, pci, mac string) {
	t.Helper()
	var dom, bus, slot, fn uint
	if _, err := fmt.Sscanf(pci, "%x:%x:%x.%x", &dom, &bus, &slot, &fn); err != nil {
		t.Fatal(err)
	}
	dev := fmt.Sprintf(`<interface type='hostdev' managed='yes'>
  <mac address='%s'/>
  <source><address type='pci' domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/></source>
</interface>`, mac, dom, bus, slot, fn)
	f := filepath.Join(t.TempDir(), "dev.xml")
	if err := os.WriteFile(f, []byte(dev), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Virsh("attach-device", name, f, "--config"); err != nil {
		t.Fatal(err)
	}
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func TestLibvirtd(t *testing.T) {
	started := time.Now()
	e := newEnv(t)
	t.Cleanup(func() { t.Logf("daemon plus subtests: %v", time.Since(started).Round(time.Millisecond)) })

	t.Run("AttachIdempotentDetach", func(t *testing.T) {
		t.Parallel()
		name, base := e.domain(t, "vm-basic")
		a := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0"}

		needed, why, err := e.c.Plan(a)
		if err != nil || !needed {
			t.Fatalf("Plan before attach = %v, %q, %v; want needed", needed, why, err)
		}
		if canon(e.xml(t, name)) != base {
			t.Fatal("Plan changed the domain")
		}
		rec, changed, err := e.c.Attach(a)
		if err != nil || !changed {
			t.Fatalf("Attach = %v, %v", changed, err)
		}
		want := libvirtx.Record{Domain: name, PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0"}
		if diff := cmp.Diff(want, rec); diff != "" {
			t.Errorf("record (-want +got):\n%s", diff)
		}
		x := e.xml(t, name)
		if got := hostdevIfaces(t, x); !cmp.Equal(got, []string{"0000:61:00.2 52:54:00:00:00:01"}) {
			t.Errorf("interfaces after attach = %q", got)
		}
		if !strings.Contains(x, libvirtx.MetadataNamespace) || !strings.Contains(x, `owner="lag0"`) {
			t.Errorf("no ownership metadata after attach:\n%s", x)
		}
		if !strings.Contains(x, "<interface type='hostdev' managed='yes'>") {
			t.Errorf("interface is not managed hostdev:\n%s", x)
		}
		st, err := e.c.Domain(name)
		if err != nil {
			t.Fatal(err)
		}
		wantSt := libvirtx.DomainState{Name: name, Exists: true, Persistent: true, Interfaces: []libvirtx.HostdevIface{
			{PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Managed: true, Owned: true, InConfig: true},
		}, Machine: "pc-i440fx-7.2"}
		if diff := cmp.Diff(wantSt, st); diff != "" {
			t.Errorf("Domain (-want +got):\n%s", diff)
		}

		// Again: no change, no duplicate (libvirt itself would duplicate it).
		needed, why, err = e.c.Plan(a)
		if err != nil || needed || !strings.Contains(why, "already attached") {
			t.Errorf("Plan after attach = %v, %q, %v; want not needed", needed, why, err)
		}
		a2 := a
		a2.PCI, a2.MAC = "61:00.2", "52:54:00:00:00:01" // same VF, other spelling
		rec2, changed, err := e.c.Attach(a2)
		if err != nil || changed {
			t.Fatalf("second Attach = %v, %v; want no change", changed, err)
		}
		if rec2 != rec {
			t.Errorf("second record %+v, first %+v", rec2, rec)
		}
		if x2 := e.xml(t, name); x2 != x {
			t.Errorf("second Attach changed the XML:\n%s", cmp.Diff(x, x2))
		}

		// The record survives a journal round trip.
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var fromJournal libvirtx.Record
		if err := json.Unmarshal(b, &fromJournal); err != nil {
			t.Fatal(err)
		}
		if string(b) != `{"domain":"vm-basic","pci":"0000:61:00.2","mac":"52:54:00:00:00:01","live":false,"owner":"lag0"}` {
			t.Errorf("record JSON = %s", b)
		}
		for i := 0; i < 2; i++ {
			if err := e.c.Detach(fromJournal); err != nil {
				t.Fatalf("Detach #%d: %v", i+1, err)
			}
			if diff := cmp.Diff(base, canon(e.xml(t, name))); diff != "" {
				t.Errorf("after Detach #%d, XML differs from baseline (-base +got):\n%s", i+1, diff)
			}
		}
		st, err = e.c.Domain(name)
		if err != nil || len(st.Interfaces) != 0 {
			t.Errorf("Domain after detach = %+v, %v", st, err)
		}
	})

	t.Run("LiveRequestedOnInactiveDomain", func(t *testing.T) {
		t.Parallel()
		name, base := e.domain(t, "vm-live")
		a := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.3", MAC: "52:54:00:00:00:02", Live: true, Owner: "lag0"}
		needed, why, err := e.c.Plan(a)
		if err != nil || !needed || !strings.Contains(why, "not running") {
			t.Errorf("Plan = %v, %q, %v", needed, why, err)
		}
		rec, changed, err := e.c.Attach(a)
		if err != nil || !changed {
			t.Fatalf("Attach = %v, %v", changed, err)
		}
		if rec.Live {
			t.Error("record says live, but the domain does not run")
		}
		st, err := e.c.Domain(name)
		if err != nil || st.Active || len(st.Interfaces) != 1 || !st.Interfaces[0].InConfig || st.Interfaces[0].InLive {
			t.Errorf("Domain = %+v, %v", st, err)
		}
		if _, changed, err := e.c.Attach(a); err != nil || changed {
			t.Errorf("re-Attach = %v, %v", changed, err)
		}
		if err := e.c.Detach(rec); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(base, canon(e.xml(t, name))); diff != "" {
			t.Errorf("after Detach (-base +got):\n%s", diff)
		}
	})

	t.Run("ForeignSamePCIRefusedAndSurvives", func(t *testing.T) {
		t.Parallel()
		name, _ := e.domain(t, "vm-foreign-same")
		e.attachForeign(t, name, "0000:61:00.4", "52:54:00:aa:00:04")
		before := e.xml(t, name)
		for _, mac := range []string{"52:54:00:00:00:04", "52:54:00:aa:00:04"} { // other MAC, and even the same
			a := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.4", MAC: mac, Owner: "lag0"}
			_, _, err := e.c.Plan(a)
			mustContain(t, err, "0000:61:00.4", name, "did not attach")
			_, changed, err := e.c.Attach(a)
			mustContain(t, err, "libvirt: attach 0000:61:00.4 to vm-foreign-same", "did not attach")
			t.Logf("expected refusal: %v", err)
			if changed {
				t.Error("changed = true on refusal")
			}
			if after := e.xml(t, name); after != before {
				t.Errorf("refused Attach changed the XML:\n%s", cmp.Diff(before, after))
			}
		}
		// A record naming the foreign device does not remove it either.
		err := e.c.Detach(libvirtx.Record{Domain: name, PCI: "0000:61:00.4", MAC: "52:54:00:aa:00:04", Owner: "lag0"})
		mustContain(t, err, "not vflag's")
		if after := e.xml(t, name); after != before {
			t.Errorf("Detach touched a foreign interface:\n%s", cmp.Diff(before, after))
		}
		st, err := e.c.Domain(name)
		if err != nil || len(st.Interfaces) != 1 || st.Interfaces[0].Owned {
			t.Errorf("Domain = %+v, %v; want one foreign interface", st, err)
		}
	})

	t.Run("ForeignPlainHostdevRefused", func(t *testing.T) {
		t.Parallel()
		name, _ := e.domain(t, "vm-plain-hostdev")
		dev := `<hostdev mode='subsystem' type='pci' managed='yes'>
  <source><address domain='0x0000' bus='0x64' slot='0x00' function='0x2'/></source>
</hostdev>`
		f := filepath.Join(t.TempDir(), "hostdev.xml")
		if err := os.WriteFile(f, []byte(dev), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := e.d.Virsh("attach-device", name, f, "--config"); err != nil {
			t.Fatal(err)
		}
		before := e.xml(t, name)
		_, changed, err := e.c.Attach(libvirtx.Attachment{Domain: name, PCI: "0000:64:00.2", MAC: "52:54:00:00:04:02", Owner: "lag0"})
		mustContain(t, err, "0000:64:00.2", name, "<hostdev>")
		if changed {
			t.Error("changed = true on refusal")
		}
		if after := e.xml(t, name); after != before {
			t.Errorf("refused Attach changed the XML:\n%s", cmp.Diff(before, after))
		}
	})

	t.Run("ForeignOtherPCISurvivesDetach", func(t *testing.T) {
		t.Parallel()
		name, _ := e.domain(t, "vm-foreign-other")
		e.attachForeign(t, name, "0000:61:00.5", "52:54:00:aa:00:05")
		// Another application's metadata must survive too.
		if _, err := e.d.Virsh("metadata", name, "https://example.org/other", "--config", "--key", "other", "--set", `<other v="1"/>`); err != nil {
			t.Fatal(err)
		}
		base := canon(e.xml(t, name))
		a := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.6", MAC: "52:54:00:00:00:06", Owner: "lag1"}
		rec, changed, err := e.c.Attach(a)
		if err != nil || !changed {
			t.Fatalf("Attach = %v, %v", changed, err)
		}
		if got := hostdevIfaces(t, e.xml(t, name)); len(got) != 2 {
			t.Errorf("interfaces = %q, want foreign plus vflag's", got)
		}
		if err := e.c.Detach(rec); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(base, canon(e.xml(t, name))); diff != "" {
			t.Errorf("after Detach (-base +got):\n%s", diff)
		}
	})

	t.Run("TwoVFsOneDomain", func(t *testing.T) {
		t.Parallel()
		name, base := e.domain(t, "vm-two")
		a := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.2", MAC: "52:54:00:00:01:01", Owner: "lag0"}
		b := libvirtx.Attachment{Domain: name, PCI: "0000:62:00.2", MAC: "52:54:00:00:01:02", Owner: "lag1"}
		ra, _, err := e.c.Attach(a)
		if err != nil {
			t.Fatal(err)
		}
		rb, _, err := e.c.Attach(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.Detach(ra); err != nil {
			t.Fatal(err)
		}
		st, err := e.c.Domain(name)
		if err != nil {
			t.Fatal(err)
		}
		want := []libvirtx.HostdevIface{{PCI: "0000:62:00.2", MAC: "52:54:00:00:01:02", Managed: true, Owned: true, InConfig: true}}
		if diff := cmp.Diff(want, st.Interfaces); diff != "" {
			t.Errorf("after detaching the first (-want +got):\n%s", diff)
		}
		if _, changed, err := e.c.Attach(b); err != nil || changed {
			t.Errorf("re-Attach of the second = %v, %v", changed, err)
		}
		if err := e.c.Detach(rb); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(base, canon(e.xml(t, name))); diff != "" {
			t.Errorf("after Detach (-base +got):\n%s", diff)
		}
	})

	t.Run("OwnedWithOtherMACOrGroup", func(t *testing.T) {
		t.Parallel()
		name, _ := e.domain(t, "vm-conflict")
		a := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.7", MAC: "52:54:00:00:00:07", Owner: "lag0"}
		rec, _, err := e.c.Attach(a)
		if err != nil {
			t.Fatal(err)
		}
		before := e.xml(t, name)
		otherMAC, otherGroup := a, a
		otherMAC.MAC = "52:54:00:00:00:77"
		otherGroup.Owner = "lag9"
		_, _, err = e.c.Attach(otherMAC)
		mustContain(t, err, "52:54:00:00:00:07", "52:54:00:00:00:77")
		_, _, err = e.c.Attach(otherGroup)
		mustContain(t, err, `"lag0"`, `"lag9"`)
		wrongRec := rec
		wrongRec.Owner = "lag9"
		mustContain(t, e.c.Detach(wrongRec), "left in place")
		if after := e.xml(t, name); after != before {
			t.Errorf("refused calls changed the XML:\n%s", cmp.Diff(before, after))
		}
		if err := e.c.Detach(rec); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("MissingDomain", func(t *testing.T) {
		t.Parallel()
		a := libvirtx.Attachment{Domain: "no-such-vm", PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0"}
		_, changed, err := e.c.Attach(a)
		mustContain(t, err, "libvirt: attach 0000:61:00.2 to no-such-vm", "domain not found")
		t.Logf("expected error: %v", err)
		var lerr libvirt.Error
		if !errors.As(err, &lerr) || lerr.Code != libvirt.ERR_NO_DOMAIN {
			t.Errorf("error %v does not wrap a libvirt.Error with ERR_NO_DOMAIN", err)
		}
		if changed {
			t.Error("changed = true")
		}
		_, _, err = e.c.Plan(a)
		mustContain(t, err, "no-such-vm", "domain not found")
		if err := e.c.Detach(libvirtx.Record{Domain: "no-such-vm", PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0"}); err != nil {
			t.Errorf("Detach from a missing domain: %v", err)
		}
		st, err := e.c.Domain("no-such-vm")
		if err != nil || st.Exists || st.Name != "no-such-vm" {
			t.Errorf("Domain = %+v, %v", st, err)
		}
		if ok, err := e.c.Exists("no-such-vm"); err != nil || ok {
			t.Errorf("Exists(no-such-vm) = %v, %v; want false, nil", ok, err)
		}
		name, _ := e.domain(t, "vm-exists")
		if ok, err := e.c.Exists(name); err != nil || !ok {
			t.Errorf("Exists(%s) = %v, %v; want true, nil", name, ok, err)
		}
	})

	// Prefetch's reads answer Exists, Domain and Plan until the connection
	// writes a domain: a change another client makes meanwhile is not
	// seen, one through the connection is (and everything after it).
	t.Run("PrefetchSharedUntilOwnWrite", func(t *testing.T) {
		t.Parallel()
		c, err := libvirtx.Open(e.d.URI()) // its own: the others' writes would drop its reads
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		libvirtx.SetSharedMaxAge(c, time.Hour) // a loaded machine must not age the reads out
		name, _ := e.domain(t, "vm-shared")
		c.Prefetch(name, "no-such-vm-shared")
		libvirtx.WaitPrefetch(c) // the reads are done before the domain changes (else they may see it)
		e.attachForeign(t, name, "0000:61:00.7", "52:54:00:00:00:77")

		if st, err := c.Domain(name); err != nil || !st.Exists || len(st.Interfaces) != 0 {
			t.Errorf("Domain after Prefetch = %+v, %v; want the domain as read before the foreign attach (no interface)", st, err)
		}
		if ok, err := c.Exists("no-such-vm-shared"); err != nil || ok {
			t.Errorf("Exists(no-such-vm-shared) after Prefetch = %v, %v; want false, nil", ok, err)
		}
		_, _, err = c.Plan(libvirtx.Attachment{Domain: "no-such-vm-shared", PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0"})
		mustContain(t, err, "no-such-vm-shared", "domain not found")
		var lerr libvirt.Error
		if !errors.As(err, &lerr) || lerr.Code != libvirt.ERR_NO_DOMAIN {
			t.Errorf("Plan of a prefetched missing domain: %v does not wrap ERR_NO_DOMAIN", err)
		}

		a := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0"}
		if needed, why, err := c.Plan(a); err != nil || !needed {
			t.Fatalf("Plan = %v, %q, %v; want needed", needed, why, err)
		}
		if _, changed, err := c.Attach(a); err != nil || !changed {
			t.Fatalf("Attach = %v, %v", changed, err)
		}
		st, err := c.Domain(name)
		if err != nil || len(st.Interfaces) != 2 {
			t.Errorf("Domain after the connection's own Attach = %+v, %v; want both interfaces (read afresh)", st, err)
		}
		if needed, _, err := c.Plan(a); err != nil || needed {
			t.Errorf("Plan after Attach = %v, %v; want converged", needed, err)
		}

		// Aged out: a read older than the bound answers nothing.
		other, _ := e.domain(t, "vm-shared-aged")
		libvirtx.SetSharedMaxAge(c, time.Nanosecond)
		c.Prefetch(other)
		libvirtx.WaitPrefetch(c)
		e.attachForeign(t, other, "0000:61:00.7", "52:54:00:00:00:78")
		if st, err := c.Domain(other); err != nil || len(st.Interfaces) != 1 {
			t.Errorf("Domain after its prefetch aged out = %+v, %v; want the foreign interface (read afresh)", st, err)
		}
	})

	t.Run("HoldingDomainsInactive", func(t *testing.T) {
		t.Parallel()
		name, _ := e.domain(t, "vm-holding")
		rec, _, err := e.c.Attach(libvirtx.Attachment{Domain: name, PCI: "0000:63:00.2", MAC: "52:54:00:00:03:02", Owner: "lag0"})
		if err != nil {
			t.Fatal(err)
		}
		e.attachForeign(t, name, "0000:63:00.3", "52:54:00:aa:03:03")
		got, err := e.c.HoldingDomains([]string{"0000:63:00.2", "0000:63:00.3", "0000:99:00.0"})
		if err != nil || len(got) != 0 {
			t.Errorf("HoldingDomains = %v, %v; want empty (domain shut off)", got, err)
		}
		if got, err := e.c.HoldingDomains(nil); err != nil || len(got) != 0 {
			t.Errorf("HoldingDomains(nil) = %v, %v", got, err)
		}
		_, err = e.c.HoldingDomains([]string{"0000:63:00"})
		mustContain(t, err, "invalid PCI address")
		if err := e.c.Detach(rec); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("BadInputRejected", func(t *testing.T) {
		t.Parallel()
		name, base := e.domain(t, "vm-bad")
		good := libvirtx.Attachment{Domain: name, PCI: "0000:61:00.2", MAC: "52:54:00:00:00:01", Owner: "lag0"}
		tests := []struct {
			name string
			mod  func(*libvirtx.Attachment)
			want string
		}{
			{"short pci", func(a *libvirtx.Attachment) { a.PCI = "0000:61:00" }, "invalid PCI address"},
			{"function 8", func(a *libvirtx.Attachment) { a.PCI = "0000:61:00.8" }, "invalid PCI address"},
			{"xml in pci", func(a *libvirtx.Attachment) { a.PCI = "0000:61:00.2'/><x a='" }, "invalid PCI address"},
			{"empty pci", func(a *libvirtx.Attachment) { a.PCI = "" }, "invalid PCI address"},
			{"short mac", func(a *libvirtx.Attachment) { a.MAC = "52:54:00:00:01" }, "invalid MAC address"},
			{"dashed mac", func(a *libvirtx.Attachment) { a.MAC = "52-54-00-00-00-01" }, "invalid MAC address"},
			{"multicast mac", func(a *libvirtx.Attachment) { a.MAC = "01:00:5e:00:00:01" }, "multicast"},
			{"zero mac", func(a *libvirtx.Attachment) { a.MAC = "00:00:00:00:00:00" }, "all zero"},
			{"xml in mac", func(a *libvirtx.Attachment) { a.MAC = "52:54:00:00:00:01'/>" }, "invalid MAC address"},
			{"no owner", func(a *libvirtx.Attachment) { a.Owner = "" }, "empty owner"},
		}
		for _, tt := range tests {
			a := good
			tt.mod(&a)
			_, changed, err := e.c.Attach(a)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "libvirt: attach ") || changed {
				t.Errorf("%s: Attach = %v, %v; want error containing %q", tt.name, changed, err, tt.want)
			}
			if _, _, err := e.c.Plan(a); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: Plan error = %v, want %q", tt.name, err, tt.want)
			}
		}
		if err := e.c.Detach(libvirtx.Record{Domain: name, PCI: "bogus"}); err == nil {
			t.Error("Detach with a bad PCI address succeeded")
		}
		if diff := cmp.Diff(base, canon(e.xml(t, name))); diff != "" {
			t.Errorf("rejected calls changed the domain (-base +got):\n%s", diff)
		}
	})

	t.Run("RunningDomain", func(t *testing.T) {
		// LIVE attach needs VFIO and a real VF; here it must fail, and
		// Attach must then roll back its CONFIG attach.
		t.Parallel()
		name, base := e.domain(t, "vm-running")
		e.d.StartDomain(t, name)
		st, err := e.c.Domain(name)
		if err != nil || !st.Active {
			t.Fatalf("Domain = %+v, %v; want active", st, err)
		}
		if got, err := e.c.HoldingDomains([]string{"0000:61:00.2"}); err != nil || len(got) != 0 {
			t.Errorf("HoldingDomains = %v, %v; want empty", got, err)
		}

		// Live requested, config absent: LIVE fails, CONFIG rolled back.
		live := libvirtx.Attachment{Domain: name, PCI: "0000:61:01.2", MAC: "52:54:00:00:02:02", Live: true, Owner: "lag0"}
		needed, why, err := e.c.Plan(live)
		if err != nil || !needed || !strings.Contains(why, "persistent and live") {
			t.Errorf("Plan = %v, %q, %v", needed, why, err)
		}
		_, changed, err := e.c.Attach(live)
		mustContain(t, err, "libvirt: attach 0000:61:01.2 to vm-running: live")
		t.Logf("expected live attach failure: %v", err)
		if changed {
			t.Error("changed = true after a failed attach")
		}
		if strings.Contains(err.Error(), "rollback failed") {
			t.Errorf("rollback failed: %v", err)
		}
		if diff := cmp.Diff(base, canon(e.xml(t, name))); diff != "" {
			t.Errorf("failed live attach left the persistent XML changed (-base +got):\n%s", diff)
		}
		st, err = e.c.Domain(name)
		if err != nil || len(st.Interfaces) != 0 {
			t.Errorf("Domain after failed attach = %+v, %v", st, err)
		}
		liveXML, err := e.d.Virsh("dumpxml", name)
		if err != nil || strings.Contains(liveXML, libvirtx.MetadataNamespace) {
			t.Errorf("live metadata not rolled back (%v):\n%s", err, liveXML)
		}

		// Config only on a running domain.
		cfg := live
		cfg.Live = false
		rec, changed, err := e.c.Attach(cfg)
		if err != nil || !changed || rec.Live {
			t.Fatalf("config-only Attach = %+v, %v, %v", rec, changed, err)
		}
		st, err = e.c.Domain(name)
		want := []libvirtx.HostdevIface{{PCI: "0000:61:01.2", MAC: "52:54:00:00:02:02", Managed: true, Owned: true, InConfig: true}}
		if err != nil || !cmp.Equal(want, st.Interfaces) {
			t.Errorf("Domain = %+v, %v; want %+v", st, err, want)
		}
		// Now only live is missing; it fails, and the existing CONFIG
		// attachment (not made by this call) stays.
		needed, why, err = e.c.Plan(live)
		if err != nil || !needed || !strings.Contains(why, "live (already in the persistent definition)") {
			t.Errorf("Plan = %v, %q, %v", needed, why, err)
		}
		withCfg := e.xml(t, name)
		if _, _, err := e.c.Attach(live); err == nil {
			t.Error("live attach without VFIO succeeded")
		}
		if after := e.xml(t, name); after != withCfg {
			t.Errorf("failed live attach touched the existing persistent attachment:\n%s", cmp.Diff(withCfg, after))
		}
		// Detach with Live set: nothing live to remove, config removed.
		rec.Live = true
		if err := e.c.Detach(rec); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(base, canon(e.xml(t, name))); diff != "" {
			t.Errorf("after Detach (-base +got):\n%s", diff)
		}
	})

	t.Run("Teaming", func(t *testing.T) {
		t.Parallel()
		testTeaming(t, e)
	})
}

func TestOpenBadURI(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nothing-here")
	uri := "qemu+unix:///system?socket=" + sock
	_, err := libvirtx.Open(uri)
	mustContain(t, err, "libvirt: connect to "+uri)
}
