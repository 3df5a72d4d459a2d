package ovs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vflag/vflag/ovs"
)

// formatFlow prints a flow as lib/dpctl.c format_dpif_flow does.
func formatFlow(f ovs.DPFlow) string {
	var b strings.Builder
	if f.UFID != "" {
		b.WriteString("ufid:" + f.UFID + ", ")
	}
	fmt.Fprintf(&b, "%s, packets:%d, bytes:%d, used:%s", f.Match, f.Packets, f.Bytes, f.Used)
	if f.Offloaded != "" {
		b.WriteString(", offloaded:" + f.Offloaded)
	}
	if f.DP != "" {
		b.WriteString(", dp:" + f.DP)
	}
	b.WriteString(", actions:" + f.Actions)
	return b.String()
}

// FuzzParseDumpFlows: whatever dpctl/dump-flows prints, ParseDumpFlows does
// not panic; a flow it reads, printed again as dpctl prints it, reads the
// same.
func FuzzParseDumpFlows(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "dump-flows-m.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	for _, s := range []string{
		"",
		"flow-dump from pmd on cpu core: 3\n",
		"in_port(2),eth_type(0x0800), packets:0, bytes:0, used:never, actions:drop\n",
		"ufid:x, recirc_id(0),in_port(eth2), packets:1, bytes:2, used:0.1s, flags:S., dp:tc, actions:bond0, dp-extra-info:miniflow_bits(4,1)\n",
		"recirc_id(0), packets:-1, bytes:0, used:never, actions:drop\n",
		"no actions here\n",
		"x, packets:99999999999999999999, actions:1\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		flows, err := ovs.ParseDumpFlows(out)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "dpctl/dump-flows line ") {
				t.Fatalf("ParseDumpFlows(%q): %v", out, err)
			}
			return
		}
		for _, fl := range flows {
			line := formatFlow(fl)
			back, err := ovs.ParseDumpFlows(line)
			if err != nil || len(back) != 1 || back[0] != fl {
				t.Fatalf("ParseDumpFlows(%q) read %+v; printed again as %q it reads %+v, %v", out, fl, line, back, err)
			}
		}
	})
}
