package validate

import (
	"errors"

	"github.com/vflag/vflag/eswitch"
)

// SharedBlockName is the name of the shared tc block check.
const SharedBlockName = "tc/shared-block"

// SharedBlockCheck judges whether bond and its PFs are on the bond's shared
// tc ingress block (eswitch.SharedBlock): a PF off the block gets none of
// ovs-vswitchd's rules, so what arrives on it is not offloaded. hwOffload
// false: skip (ovs-vswitchd uses no tc then). The check's Data is the
// eswitch.SharedBlock, with the rules and how many are in hardware.
func SharedBlockCheck(k eswitch.Kernel, bond string, pfs []string, hwOffload bool) (Check, *eswitch.SharedBlock) {
	if !hwOffload {
		return skip(SharedBlockName, "hw-offload is not wanted by the config: ovs-vswitchd puts no rules in tc"), nil
	}
	s, err := eswitch.ReadSharedBlock(k, bond, pfs)
	switch {
	case errors.Is(err, eswitch.ErrNotSupported):
		return skip(SharedBlockName, "this host's kernel interface has no tc"), nil
	case err != nil:
		return failed(SharedBlockName, "%v", err), nil
	}
	var c Check
	if s.OK {
		c = pass(SharedBlockName, "%s", s)
	} else {
		c = failed(SharedBlockName, "%s\ntraffic arriving on a PF off the block meets none of ovs-vswitchd's rules and is not offloaded (lost after an OVS restart or a deleted qdisc); `vflag up` binds them again", s)
	}
	c.Data = s
	return c, &s
}
