package eswitch

import (
	"fmt"
	"strings"
)

// SharedBlock is a VF-LAG bond's shared tc ingress block as the kernel
// shows it. With hw-offload, ovs-vswitchd puts its rules for the bond port
// in the block whose index is the bond's ifindex, and binds each member of
// the bond to that block (lib/netdev-linux.c netdev_linux_get_block_id,
// netdev_linux_update_lag), so that traffic arriving on either uplink
// meets the rules, and each uplink's driver takes them into its hardware.
// A member whose ingress qdisc is not on the block gets none of them: what
// arrives on it is not offloaded.
type SharedBlock struct {
	Bond  string `json:"bond"`
	Block uint32 `json:"block"` // the bond's ifindex
	// Members are the bond and its PFs, in that order.
	Members []BlockMember `json:"members"`
	// OK: every member is on the block.
	OK bool `json:"ok"`
	// Rules is the number of filters in the block; InHW how many of them
	// some device holds in hardware; AllPFs how many every PF of the bond
	// holds (in_hw_count >= the number of PFs: 2 under VF-LAG).
	Rules  int `json:"rules"`
	InHW   int `json:"in_hw"`
	AllPFs int `json:"in_hw_all_pfs"`
	// RulesErr is why the rules could not be read ("" when they were).
	RulesErr string `json:"rules_error,omitempty"`
}

// BlockMember is one device that should be on the block.
type BlockMember struct {
	Netdev  string  `json:"netdev"`
	Ingress Ingress `json:"ingress"`
	OK      bool    `json:"ok"`
}

// Missing names the members not on the block, with what they have.
func (s SharedBlock) Missing() []string {
	var out []string
	for _, m := range s.Members {
		if !m.OK {
			out = append(out, fmt.Sprintf("%s (%s)", m.Netdev, m.Ingress))
		}
	}
	return out
}

// String is one line: "bond0, p0, p1 on ingress_block 12; 3 rules, 3 in
// hardware (3 on every PF)" or what is missing.
func (s SharedBlock) String() string {
	var b strings.Builder
	if s.OK {
		names := make([]string, len(s.Members))
		for i, m := range s.Members {
			names[i] = m.Netdev
		}
		fmt.Fprintf(&b, "%s on ingress_block %d", strings.Join(names, ", "), s.Block)
	} else {
		fmt.Fprintf(&b, "not on %s's ingress_block %d: %s", s.Bond, s.Block, strings.Join(s.Missing(), ", "))
	}
	if s.RulesErr != "" {
		fmt.Fprintf(&b, "; rules unreadable: %s", s.RulesErr)
	} else {
		fmt.Fprintf(&b, "; %d rules, %d in hardware (%d in every PF)", s.Rules, s.InHW, s.AllPFs)
	}
	return b.String()
}

// ReadSharedBlock reads bond's shared block and whether bond and pfs are on
// it ("ip link show $bond" for the index, "tc qdisc show dev $x ingress"
// for each, "tc -s filter show block $index"). ErrNotSupported when k has
// no TC.
func ReadSharedBlock(k Kernel, bond string, pfs []string) (SharedBlock, error) {
	t, err := AsTC(k)
	if err != nil {
		return SharedBlock{}, err
	}
	l, err := k.Link(bond)
	if err != nil {
		return SharedBlock{}, fmt.Errorf("shared block of %s: %w", bond, err)
	}
	s := SharedBlock{Bond: bond, Block: uint32(l.Index), OK: true}
	for _, n := range append([]string{bond}, pfs...) {
		in, err := t.Ingress(n)
		if err != nil {
			return SharedBlock{}, fmt.Errorf("shared block of %s: %w", bond, err)
		}
		m := BlockMember{Netdev: n, Ingress: in, OK: in.Present && in.Block == s.Block}
		s.OK = s.OK && m.OK
		s.Members = append(s.Members, m)
	}
	fs, err := t.BlockFilters(s.Block)
	switch {
	case err != nil && !s.anyOn():
		// No device holds the block: it does not exist, so it has no rules.
	case err != nil:
		s.RulesErr = err.Error()
	}
	for _, f := range fs {
		s.Rules++
		if f.InHW {
			s.InHW++
		}
		if f.InHW && len(pfs) > 0 && int(f.InHWCount) >= len(pfs) {
			s.AllPFs++
		}
	}
	return s, nil
}

func (s SharedBlock) anyOn() bool {
	for _, m := range s.Members {
		if m.OK {
			return true
		}
	}
	return false
}
