package testbed

import (
	"regexp"
	"sort"
	"strings"
)

var (
	vfLineRE      = regexp.MustCompile(`^\s+vf \d+ (\S+) .*netdev=(\S*) rep=(\S*)`)
	ethNameRE     = regexp.MustCompile(`\beth\d+\b`)
	uuidishRE     = regexp.MustCompile(`mac=[0-9a-f:]{17}`)
	activeSlaveRE = regexp.MustCompile(`active_slave=\S+`)
	lagMappingRE  = regexp.MustCompile(`mapping=\S+`)
)

// Canonical is a state dump (the simulated host's sim.Host.Dump, OVSDB's,
// domain XML, under "== " headers) with kernel-assigned names replaced by
// names derived from the VF's PCI address (they depend on the order
// netdevs appeared, not on the state), the random MACs of VF netdevs and
// representors masked, and name-sorted sections sorted again after the
// renaming.
func Canonical(dump string) string {
	names := map[string]string{}
	for _, l := range strings.Split(dump, "\n") {
		if m := vfLineRE.FindStringSubmatch(l); m != nil {
			if m[2] != "" && m[2] != "-" {
				names[m[2]] = "vfnd[" + m[1] + "]"
			}
			if m[3] != "" && m[3] != "-" {
				names[m[3]] = "rep[" + m[1] + "]"
			}
		}
	}
	dump = ethNameRE.ReplaceAllStringFunc(dump, func(s string) string {
		if n, ok := names[s]; ok {
			return n
		}
		return s
	})
	// Which slave of an active-backup bond is active (and so the LAG's port
	// mapping) is runtime state the kernel decides (the first enslaved, or
	// the last one standing), not what a config sets: masked. A primary
	// the config sets shows in primary=.
	dump = activeSlaveRE.ReplaceAllString(dump, "active_slave=<runtime>")
	dump = lagMappingRE.ReplaceAllString(dump, "mapping=<runtime>")
	var out []string
	var block []string // lines sorted within a section
	flush := func() {
		sort.Strings(block)
		out = append(out, block...)
		block = nil
	}
	section := ""
	for _, l := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(l, "links:") || strings.HasPrefix(l, "bonds:") || strings.HasPrefix(l, "== ") || strings.HasPrefix(l, "bridge ") || strings.HasPrefix(l, "other_config") || strings.HasPrefix(l, "nic "):
			flush()
			section = strings.Fields(l)[0]
			out = append(out, l)
		case section == "links:" && strings.HasPrefix(l, "  "):
			if strings.HasPrefix(l, "  vfnd[") || strings.HasPrefix(l, "  rep[") {
				l = uuidishRE.ReplaceAllString(l, "mac=<random>")
			}
			block = append(block, l)
		case section == "bridge" && strings.HasPrefix(l, "    interface"):
			block[len(block)-1] += " |" + strings.TrimSpace(l)
		case section == "bridge" && strings.HasPrefix(l, "  port"):
			block = append(block, l)
		default:
			flush()
			out = append(out, l)
		}
	}
	flush()
	return strings.Join(out, "\n")
}
