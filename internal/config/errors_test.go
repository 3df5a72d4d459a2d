package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vflag/vflag/internal/cfgdecode"
)

// exampleText is examples/vflag-sim.yaml (vflag example-config).
func exampleText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/vflag-sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseErrorsPointAtTheCause: each mistake of issue 26 item 3 in the
// example config gives exactly its root error: no follow-on errors of
// fields that depend on it, YAML's failing line, the field path and value
// of a type error, one error for an out-of-range VLAN, and a duration
// without a unit refused for every duration field.
func TestParseErrorsPointAtTheCause(t *testing.T) {
	const head = "invalid config:\n  "
	tests := []struct {
		name     string
		from, to string // the edit of the example config
		want     string // the whole error
	}{
		{"numvfs 0: not 6 VF index errors", "numvfs: 4 ", "numvfs: 0 ",
			head + `groups[0].numvfs: "0" must be between 1 and the PF's sriov_totalvfs`},
		{"numvfs above the VF-LAG limit", "numvfs: 4 ", "numvfs: 65 ",
			head + `groups[0].numvfs: "65" exceeds 64: a PF in VF-LAG has at most 64 VFs (mlx5 needs its firmware's NUM_OF_VFS, the PF's sriov_totalvfs, at 64 or less)`},
		{"misspelt eswitch: not legacy's errors", "eswitch: switchdev", "eswitch: swichdev",
			head + `groups[0].eswitch: "swichdev" must be switchdev or legacy`},
		{"one PF in switchdev: no pf index errors", "pfs: [ens1f0np0, ens1f1np1]", "pfs: [ens1f0np0]",
			head + `groups[0].pfs: "ens1f0np0" must name exactly the two ports of one NIC`},
		{"misspelt bond mode: no lacp_rate error", "mode: 802.3ad", "mode: 802.3da",
			head + `groups[0].bond.mode: "802.3da" must be active-backup, balance-xor or 802.3ad (the only modes that enter hardware LAG)`},
		{"bad VF MAC: not again at its attachment", `mac: "52:54:00:10:00:00"`, `mac: "52:54:00:10:00:0g"`,
			head + `groups[0].vfs[0].mac: "52:54:00:10:00:0g" is not a MAC address (want aa:bb:cc:dd:ee:ff)`},
		{"bad VF pf: not a missing MAC at its attachment", `{pf: 1, vf: 0, mac: "52:54:00:10:01:00"`, `{pf: 2, vf: 0, mac: "52:54:00:10:01:00"`,
			head + `groups[0].vfs[2].pf: "2" is not an index into pfs (0..1)`},
		{"bad VF vf: not a missing MAC at its attachment", `{pf: 1, vf: 0, mac: "52:54:00:10:01:00"`, `{pf: 1, vf: 9, mac: "52:54:00:10:01:00"`,
			head + `groups[0].vfs[2].vf: "9" is not a VF index (0..3, numvfs 4)`},
		{"VLAN 5000 once", "vlan: 200}", "vlan: 5000}",
			head + `groups[0].vfs[2].vlan: "5000" must be 0 (untagged) or 1-4094`},
		{"numvfs not a number", "numvfs: 4 ", "numvfs: eight ",
			head + `groups[0].numvfs: "eight" is not an integer`},
		{"numvfs a fraction", "numvfs: 4 ", "numvfs: 4.5 ",
			head + `groups[0].numvfs: "4.5" is not an integer`},
		{"hw_offload not a boolean", "hw_offload: true", "hw_offload: maybe",
			head + `groups[0].ovs.hw_offload: "maybe" is not a boolean (true or false)`},
		{"bond not a mapping", "    bond:\n      name: bond0\n      mode: 802.3ad                  # active-backup | balance-xor | 802.3ad\n      miimon: 100\n      lacp_rate: fast\n      xmit_hash_policy: layer3+4\n", "    bond: bond0\n",
			head + `groups[0].bond: "bond0" is not a mapping (key: value lines)`},
		{"unknown key", "lag_timeout: 30s", "lag_timout: 30s",
			head + `lag_timout: is not a config key (misspelt, or at the wrong indentation?); did you mean lag_timeout?`},
		{"unknown key in a group", "    numvfs: 4 ", "    numvf: 4 ",
			head + `groups[0].numvf: is not a config key (misspelt, or at the wrong indentation?); did you mean numvfs?`},
		{"a bond key in the group", "    numvfs: 4 ", "    numvfs: 4\n    miimon: 100 ",
			head + `groups[0].miimon: is not a config key (misspelt, or at the wrong indentation?); did you mean groups[0].bond.miimon?`},
		{"a key nothing is near", "    numvfs: 4 ", "    numvfs: 4\n    colour: blue ",
			head + `groups[0].colour: is not a config key (misspelt, or at the wrong indentation?)`},
		{"lag_timeout without a unit", "lag_timeout: 30s", "lag_timeout: 30",
			head + `lag_timeout: "30" is a duration without a unit: write "30s" (units ms, s, m, h)`},
		{"quoted lag_timeout without a unit", "lag_timeout: 30s", `lag_timeout: "30"`,
			head + `lag_timeout: "30" is a duration without a unit: write "30s" (units ms, s, m, h)`},
		{"fractional duration without a unit", "lag_timeout: 30s", "lag_timeout: 1.5",
			head + `lag_timeout: "1.5" is a duration without a unit: write "1.5s" (units ms, s, m, h)`},
		{"vf_timeout without a unit", "lag_timeout: 30s", "lag_timeout: 30s\nvf_timeout: 300",
			head + `vf_timeout: "300" is a duration without a unit: write "300s" (units ms, s, m, h)`},
		{"pf_wait without a unit", "lag_timeout: 30s", "lag_timeout: 30s\npf_wait: 60",
			head + `pf_wait: "60" is a duration without a unit: write "60s" (units ms, s, m, h)`},
		{"validate.duration without a unit", "    attachments:", "    validate: {duration: 10}\n    attachments:",
			head + `groups[0].validate.duration: "10" is a duration without a unit: write "10s" (units ms, s, m, h)`},
		{"validate.max_gap without a unit", "    attachments:", "    validate: {max_gap: 1}\n    attachments:",
			head + `groups[0].validate.max_gap: "1" is a duration without a unit: write "1s" (units ms, s, m, h)`},
		{"ovs_log relative", "lag_timeout: 30s", "lag_timeout: 30s\novs_log: ovs-vswitchd.log",
			head + `ovs_log: "ovs-vswitchd.log" must be an absolute, clean path to ovs-vswitchd's log (its --log-file)`},
		{"ovs_log not clean", "lag_timeout: 30s", "lag_timeout: 30s\novs_log: /var/log/../log/ovs.log",
			head + `ovs_log: "/var/log/../log/ovs.log" must be an absolute, clean path to ovs-vswitchd's log (its --log-file)`},
		{"not a duration", "lag_timeout: 30s", "lag_timeout: 30 seconds",
			head + `lag_timeout: "30 seconds" is not a duration (e.g. 30s, 500ms, 5m, 1m30s)`},
		{"indentation error on line 12", "    flow_steering_mode: smfs", "   flow_steering_mode: smfs",
			`YAML syntax error at line 12: did not find expected '-' indicator: "   flow_steering_mode: smfs         # set in legacy mode where the driver has it"`},
		{"tab on line 16", "      miimon: 100", "\tmiimon: 100",
			`YAML syntax error at line 16: found character that cannot start any token: "\tmiimon: 100"`},
		{"over-indented key on line 11", "    numvfs: 4 ", "      numvfs: 4 ",
			`YAML syntax error at line 11: did not find expected key: "      numvfs: 4                        # per PF; at most 64 under VF-LAG"`},
	}
	ex := exampleText(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(ex, tt.from) {
				t.Fatalf("example config lacks %q", tt.from)
			}
			_, err := Parse([]byte(strings.Replace(ex, tt.from, tt.to, 1)))
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Error() != tt.want {
				t.Fatalf("error:\n%s\nwant:\n%s", err, tt.want)
			}
		})
	}
}

// TestSyntaxErrorLine: the error is a *cfgdecode.SyntaxError with the line.
func TestSyntaxErrorLine(t *testing.T) {
	_, err := Parse([]byte(strings.Replace(exampleText(t), "    flow_steering_mode: smfs", "   flow_steering_mode: smfs", 1)))
	var se *cfgdecode.SyntaxError
	if !errors.As(err, &se) || se.Line != 12 {
		t.Fatalf("err %v (%T), want a SyntaxError at line 12", err, err)
	}
}

// TestParseDurations: durations with units and a bare 0 (the default) are read.
func TestParseDurations(t *testing.T) {
	ex := exampleText(t)
	for _, tt := range []struct {
		value string
		want  time.Duration
	}{
		{"30s", 30 * time.Second},
		{"1m30s", 90 * time.Second},
		{"500ms", 500 * time.Millisecond},
		{"0", 30 * time.Second},
		{`"0"`, 30 * time.Second},
		{"0s", 30 * time.Second},
	} {
		c, err := Parse([]byte(strings.Replace(ex, "lag_timeout: 30s", "lag_timeout: "+tt.value, 1)))
		if err != nil {
			t.Fatalf("%s: %v", tt.value, err)
		}
		if c.LAGTimeout != tt.want {
			t.Errorf("lag_timeout: %s read as %v, want %v", tt.value, c.LAGTimeout, tt.want)
		}
	}
}
