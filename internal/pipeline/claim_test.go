package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/teardown"
)

// TestClaimedBond: an unmarked bond is vflag's only by the claim of a
// pending journal entry of this boot whose ifindex floor it is above, and
// only while it is as the create left it (down, no slaves). Such a bond is
// accepted by preflight, marked by its step and deleted by its undo; any
// other unmarked bond of that name is refused and left alone.
func TestClaimedBond(t *testing.T) {
	cases := []struct {
		name string
		// entry edits the pending entry's claim (nil: no entry at all).
		entry func(c *linkClaim, state *string)
		// after changes the bond after its create.
		after   func(t *testing.T, se *stepEnv)
		claimed bool
	}{
		{"pending entry of this boot, bond made after it", func(*linkClaim, *string) {}, nil, true},
		{"no entry", nil, nil, false},
		{"entry applied", func(_ *linkClaim, s *string) { *s = teardown.StateApplied }, nil, false},
		{"entry of another boot", func(c *linkClaim, _ *string) { c.Boot = "00000000-0000-0000-0000-000000000000" }, nil, false},
		{"entry without a claim (an older journal)", func(c *linkClaim, _ *string) { *c = linkClaim{} }, nil, false},
		{"bond made before the entry", func(c *linkClaim, _ *string) { c.After += 100 }, nil, false},
		{"bond up", func(*linkClaim, *string) {}, func(t *testing.T, se *stepEnv) {
			if err := se.k.SetLinkUp("bond0", true); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"bond with another alias", func(*linkClaim, *string) {}, func(t *testing.T, se *stepEnv) {
			if err := eswitch.SetAlias(se.fs, "bond0", "someone-else"); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := newStepEnv(t, nil)
			g := se.group()
			claim, err := se.claimNow()
			if err != nil {
				t.Fatal(err)
			}
			if claim.Boot == "" || claim.After == 0 {
				t.Fatalf("claim %+v: the simulated host gives no boot id or ifindex", claim)
			}
			// The kernel's create, without the alias (a run killed before its
			// second request).
			spec := bondSpec(g)
			spec.Alias = ""
			if err := se.k.AddBond(spec); err != nil {
				t.Fatal(err)
			}
			if tc.after != nil {
				tc.after(t, se)
			}
			state := teardown.StatePending
			dir := t.TempDir()
			if tc.entry != nil {
				tc.entry(&claim, &state)
				writeJournal(t, dir, teardown.Entry{Kind: bondKind{}.Name(), ID: bondKind{}.Name() + "/bond0", State: state, Run: "killed",
					Record: mustJSON(t, bondRecord{Name: "bond0", Alias: BondAlias(g.Name), linkClaim: claim})})
			}
			j, err := teardown.OpenJournal(dir)
			if err != nil {
				t.Fatal(err)
			}
			se.UseJournal(j)
			l, err := se.k.Link("bond0")
			if err != nil {
				t.Fatal(err)
			}
			if got := se.claimedBond(l); got != tc.claimed {
				t.Fatalf("claimedBond = %v, want %v (claim %+v, bond ifindex %d)", got, tc.claimed, claim, l.Index)
			}

			// preflight's check of the bond's name
			var refused []string
			se.checkBondFree(g, se.g, "groups[0]", func(path string, v any, format string, args ...any) { refused = append(refused, path) })
			if (len(refused) == 0) != tc.claimed {
				t.Errorf("preflight refused %v; want a refusal: %v", refused, !tc.claimed)
			}

			// the step: marks a claimed bond, refuses another
			step := bondKind{}.step(se.Env, g)
			ch, err := step.Check(context.Background())
			if !tc.claimed {
				if err == nil || !strings.Contains(err.Error(), "was not created by vflag") {
					t.Errorf("check of an unclaimed bond: %v, want the refusal", err)
				}
			} else {
				if err != nil || !ch.Needed || !strings.Contains(ch.Summary, "mark bond bond0 as vflag's") {
					t.Fatalf("check: %+v, %v; want the mark needed", ch, err)
				}
				if err := step.Apply(context.Background()); err != nil {
					t.Fatal(err)
				}
				if l, _ := se.k.Link("bond0"); l.Alias != BondAlias(g.Name) {
					t.Errorf("after the step bond0's alias is %q", l.Alias)
				}
				if err := eswitch.SetAlias(se.fs, "bond0", ""); err != nil { // unmarked again, for the undo
					t.Fatal(err)
				}
			}

			// the undo (down): deletes a claimed bond, leaves another alone
			if _, err := (bondKind{}).Undo(context.Background(), se.Env, bondRecord{Name: "bond0", Alias: BondAlias(g.Name), linkClaim: claim}); err != nil {
				t.Fatal(err)
			}
			_, err = se.k.Link("bond0")
			if deleted := gone(err); deleted != tc.claimed {
				t.Errorf("undo: bond0 deleted %v, want %v", deleted, tc.claimed)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeJournal writes a journal file holding entries into dir.
func writeJournal(t *testing.T, dir string, entries ...teardown.Entry) {
	t.Helper()
	for i := range entries {
		entries[i].Time = time.Now()
	}
	b, err := json.Marshal(struct {
		Version int              `json:"version"`
		Entries []teardown.Entry `json:"entries"`
	}{1, entries})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "journal.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
