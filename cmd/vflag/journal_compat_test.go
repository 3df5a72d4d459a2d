package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/testbed"
)

// journalFixtureDir keeps journals written by released versions of vflag
// (DESIGN.md section 3; its README.md says how each was captured). They are
// never edited: a change of the journal format adds fixtures.
const journalFixtureDir = "../../internal/pipeline/testdata/journals"

// fixtureKinds are the step kinds a complete up journals for each kind of
// fixture, named by the last dash-separated word of the fixture's name
// (v0.1.0-demo-switchdev.json: switchdev). A fixture lacking one fails: it
// would not prove that down still undoes that kind. (On the simulated host
// up journals no sriov.unbind, as VFs created with autoprobe off have no
// driver, and no eswitch.tc-offload, as switchdev turns hw-tc-offload on.)
var fixtureKinds = map[string][]string{
	"switchdev": {"sriov.autoprobe", "devlink.param", "sriov.numvfs", "sriov.vfmac", "eswitch.mode",
		"bond.create", "bond.enslave", "link.up", "sriov.bind", "reps.up", "ovs.bridge", "libvirt.attach"},
	"legacy": {"sriov.autoprobe", "sriov.numvfs", "sriov.vfmac", "link.up", "libvirt.attach"},
}

// fixtureEntry is the part of a journal entry the test reads.
type fixtureEntry struct {
	Kind   string          `json:"kind"`
	ID     string          `json:"id"`
	Record json.RawMessage `json:"record"`
}

func decodeFixtureEntries(t *testing.T, what string, data []byte) []fixtureEntry {
	t.Helper()
	var j struct {
		Version int            `json:"version"`
		Entries []fixtureEntry `json:"entries"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return j.Entries
}

// TestJournalCompat: down still undoes the journals that earlier versions
// wrote. For each fixture: a fresh simulated host is brought by up (with the
// fixture's config) into the state the fixture's version left it in; the
// journal is then replaced by the fixture, and down without a config must
// return the host (kernel, OVSDB, domain XML) to its baseline and leave no
// journal.
func TestJournalCompat(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join(journalFixtureDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) < 2 {
		t.Fatalf("%s: %d journal fixtures, want at least 2", journalFixtureDir, len(fixtures))
	}
	d := startDaemons(t)
	defined := map[string]bool{"vm1": true}
	for _, fixture := range fixtures {
		name := strings.TrimSuffix(filepath.Base(fixture), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(fixture)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := os.ReadFile(filepath.Join(journalFixtureDir, name+".config.yaml"))
			if err != nil {
				t.Fatalf("the config that wrote the fixture: %v", err)
			}
			if strings.Contains(string(raw), "/tmp/") {
				t.Fatal("the fixture names a temp path: run-specific strings must be placeholders")
			}
			entries := decodeFixtureEntries(t, fixture, raw)

			// Every kind it should exercise.
			profile := name[strings.LastIndex(name, "-")+1:]
			want, ok := fixtureKinds[profile]
			if !ok {
				t.Fatalf("fixture kind %q unknown: name the fixture ...-switchdev or ...-legacy, or add its kinds to fixtureKinds", profile)
			}
			have := map[string]bool{}
			for _, e := range entries {
				have[e.Kind] = true
			}
			for _, k := range want {
				if !have[k] {
					t.Errorf("the fixture has no %s entry", k)
				}
			}
			if t.Failed() {
				t.FailNow()
			}

			// The domains its attachments name, defined (shut off) as the harness defines vm1.
			var domains []string
			for _, e := range entries {
				if e.Kind != "libvirt.attach" {
					continue
				}
				var r struct {
					Attachment struct {
						Domain string `json:"domain"`
					} `json:"attachment"`
				}
				if err := json.Unmarshal(e.Record, &r); err != nil || r.Attachment.Domain == "" {
					t.Fatalf("entry %s: no domain in its record (%v)", e.ID, err)
				}
				if !slices.Contains(domains, r.Attachment.Domain) {
					domains = append(domains, r.Attachment.Domain)
				}
				if !defined[r.Attachment.Domain] {
					d.virt.DefineDomain(t, r.Attachment.Domain)
					defined[r.Attachment.Domain] = true
				}
			}
			fill := strings.NewReplacer("@OVSDB@", d.ovs.Endpoint(), "@LIBVIRT@", d.virt.URI(), "@NETNS@", d.ovs.Netns())

			b := newBed(t, d, "")
			if err := os.WriteFile(b.config, []byte(fill.Replace(string(tmpl))), 0o600); err != nil {
				t.Fatal(err)
			}
			dump := func() string {
				s := b.dump()
				for _, dom := range domains {
					if dom != "vm1" { // in b.dump already
						s += "\n== " + dom + "\n" + testbed.NormalizeXML(b.virt.DomainXML(t, dom))
					}
				}
				return s
			}
			b.initSim()
			base := dump()

			// The host as the fixture's version left it.
			b.mustVflag(2, "up", "--detailed-exit-codes")
			journal := filepath.Join(b.state, "journal.json")
			cur, err := os.ReadFile(journal)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(journal, []byte(fill.Replace(string(raw))), 0o600); err != nil {
				t.Fatal(err)
			}

			// down from the fixture alone.
			b.config = filepath.Join(t.TempDir(), "missing.yaml")
			out, errs, code := b.vflag("down")
			if code != 0 {
				t.Fatalf("down from the fixture: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
			}
			if _, err := os.Stat(journal); !errors.Is(err, fs.ErrNotExist) {
				if n := len(b.journalEntries()); n != 0 {
					t.Errorf("down left %d journal entries", n)
				}
			}
			if got := dump(); got != base {
				t.Errorf("down from the fixture did not return to the baseline:\n%s", testbed.DiffText(base, got))
				// A host that this version's up leaves differently from the
				// fixture's version is a reason too: name the difference.
				ids := func(es []fixtureEntry) []string {
					var s []string
					for _, e := range es {
						s = append(s, e.ID)
					}
					return s
				}
				now, old := ids(decodeFixtureEntries(t, "this run's journal", cur)), ids(entries)
				for _, id := range now {
					if !slices.Contains(old, id) {
						t.Logf("this version's up journals %s, the fixture does not", id)
					}
				}
				t.Logf("down:\n%s%s", out, errs)
			}
		})
	}
}
