package main

import (
	"strings"
	"testing"
)

// TestXmitHashPolicyReachesTheNIC (issue 36, rule 5): mlx5 takes the bond's
// xmit_hash_policy into its LAG's hash port selection only when the PFs
// are enslaved. A change of the policy in the config re-forms the bond:
// plan marks it disruptive and says why, and after up the NIC's LAG uses
// the new policy (the simulated NIC's hash=, which no kernel file shows).
func TestXmitHashPolicyReachesTheNIC(t *testing.T) {
	d := startDaemons(t)
	b := newBed(t, d, "")
	b.upJSON(2)
	if !strings.Contains(b.simDump(), "hash=layer3+4\n") {
		t.Fatalf("the LAG's hash after up:\n%s", b.simDump())
	}
	b.point(strings.Replace(exampleConfig, "xmit_hash_policy: layer3+4", "xmit_hash_policy: layer2+3", 1))
	plan := b.mustVflag(2, "plan", "--detailed-exit-codes")
	for _, want := range []string{"xmit_hash_policy layer3+4 -> layer2+3", "mlx5 takes xmit_hash_policy into its LAG only when the PFs are enslaved", "disruptive"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan does not say %q:\n%s", want, plan)
		}
	}
	b.upJSON(2)
	if !strings.Contains(b.simDump(), "hash=layer2+3\n") {
		t.Fatalf("the NIC kept the old policy:\n%s", b.simDump())
	}
	b.mustVflag(0, "down")
}
