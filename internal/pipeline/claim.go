package pipeline

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// bootIDPath is where the kernel gives this boot's id.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// linkClaim is what the journal entry of a link vflag creates (the bond,
// a tunnel's VLAN interface) records of the host when the entry is
// written, before the link's RTM_NEWLINK. Linux makes the link without
// the alias that request carries (rtnl_create_link reads no IFLA_IFALIAS;
// measured on 6.1 and 6.18): the alias, vflag's ownership mark, takes a
// second request. A crash between the two leaves an unmarked link that
// only the journal knows, and the claim is its proof: a link of the
// entry's name, in the same boot, with an ifindex above every ifindex the
// host had when the entry was written (the kernel hands ifindexes out in
// increasing order, net->ifindex), unmarked and still as the create left
// it, was made after the entry was written: it is vflag's. Journals of
// earlier versions have no claim: their links are vflag's by the alias
// alone.
type linkClaim struct {
	Boot string `json:"boot,omitempty"`
	// After is the highest ifindex on the host when the entry was written.
	After int `json:"after_ifindex,omitempty"`
}

// claimNow is the claim of a link about to be created: this boot and the
// highest ifindex now. A boot id that cannot be read gives no claim (the
// alias alone then marks the link).
func (e *Env) claimNow() (linkClaim, error) {
	boot := e.bootID()
	if boot == "" {
		return linkClaim{}, nil
	}
	links, err := e.k.Links()
	if err != nil {
		return linkClaim{}, err
	}
	c := linkClaim{Boot: boot}
	for _, l := range links {
		c.After = max(c.After, l.Index)
	}
	return c, nil
}

// bootID is the kernel's id of this boot ("" when unreadable).
func (e *Env) bootID() string {
	b, err := e.fs.ReadFile(bootIDPath)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// UseJournal gives the run this host's journal, whose pending entries'
// claims (linkClaim) make an unmarked link vflag's: preflight, the steps
// and the undos ask it. Without it only the alias marks a link.
func (e *Env) UseJournal(j *teardown.Journal) { e.journal = j }

// claimed tells whether an unmarked link l (as the create left it: fresh,
// the caller checks the rest) is the one a pending entry of kind named
// name in the journal was about to create. The claim is read from the
// entry's record and from the open run's capture (an entry that existed
// before that run keeps its first record: a reboot emptied the host since).
func (e *Env) claimed(kind, name string, l eswitch.Link, fresh bool) bool {
	if e.journal == nil || l.Alias != "" || !fresh {
		return false
	}
	var claims []linkClaim
	for _, en := range e.journal.Entries() {
		if en.Kind != kind || en.State != teardown.StatePending {
			continue
		}
		raws := []json.RawMessage{en.Record}
		if en.Open != nil && en.Open.Capture != nil {
			raws = append(raws, en.Open.Capture)
		}
		for _, raw := range raws {
			var r struct {
				Name string `json:"name"`
				linkClaim
			}
			if json.Unmarshal(raw, &r) == nil && r.Name == name && r.Boot != "" {
				claims = append(claims, r.linkClaim)
			}
		}
	}
	if len(claims) == 0 {
		return false
	}
	boot := e.bootID()
	return slices.ContainsFunc(claims, func(c linkClaim) bool { return c.Boot == boot && l.Index > c.After })
}

// markLink sets a claimed link's alias, as the interrupted create would
// have ("ip link set $name alias $alias").
func (e *Env) markLink(name, alias string) error {
	return eswitch.SetAlias(e.fs, name, alias)
}
