package testbed

import "strings"

// Kernel is a simulated host's dump (sim.Host.Dump) without its kernel
// log: the log is history, not state.
func Kernel(simDump string) string {
	k, _, _ := strings.Cut(simDump, "dmesg:\n")
	return k
}

// World is a host's whole state as one text, in the "== " sections
// Canonical reads: the simulated kernel (Kernel), OVSDB's dump and vm1's
// persistent XML (NormalizeXML).
func World(kernel, ovsdb, vm1XML string) string {
	return "== kernel\n" + kernel + "\n== ovsdb\n" + ovsdb + "\n== vm1\n" + NormalizeXML(vm1XML)
}
