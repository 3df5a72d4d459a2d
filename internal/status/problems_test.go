package status

import (
	"slices"
	"testing"
)

// TestFailedUnits reads one `systemctl show` of both boot units: blocks
// separated by an empty line, properties in systemd's order (not -p's).
func TestFailedUnits(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []string
	}{
		{"both fine", "Result=success\nId=vflag-pre.service\nActiveState=inactive\n\nResult=success\nId=vflag.service\nActiveState=active\n", nil},
		{"the second failed", "Result=success\nId=vflag-pre.service\nActiveState=active\n\nResult=exit-code\nId=vflag.service\nActiveState=failed\n",
			[]string{"vflag.service (result exit-code)"}},
		{"both failed", "Id=vflag-pre.service\nActiveState=failed\nResult=timeout\n\nId=vflag.service\nActiveState=failed\nResult=exit-code\n",
			[]string{"vflag-pre.service (result timeout)", "vflag.service (result exit-code)"}},
		{"a unit not loaded", "Result=success\nId=vflag-pre.service\nActiveState=inactive\n\nResult=success\nId=vflag.service\nActiveState=inactive\n", nil},
		{"empty", "", nil},
	} {
		if got := failedUnits(tc.out); !slices.Equal(got, tc.want) {
			t.Errorf("%s: failedUnits = %q, want %q", tc.name, got, tc.want)
		}
	}
}
