package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Bonding options written through sysfs (/sys/class/net/<bond>/bonding/<opt>),
// as Linux 6.1's drivers/net/bonding/bond_options.c sets them:
// bonding_sysfs_store_option -> bond_opt_tryset_rtnl -> __bond_opt_set, which
// checks the option's dependencies first (bond_opt_check_deps: EACCES in an
// unsupported mode, ENOTEMPTY for a NOSLAVES option while the bond has
// slaves, EBUSY for an IFDOWN option while the bond is up), then parses the
// value (bond_opt_parse: a name from the option's table, "default", or a
// number that is a table value or within the table's minval-maxval range;
// else EINVAL), then calls the option's set function.

// optValue is one row of an option's value table (struct bond_opt_value).
type optValue struct {
	name     string
	value    uint64
	def      bool // BOND_VALFLAG_DEFAULT
	min, max bool // BOND_VALFLAG_MIN, BOND_VALFLAG_MAX
}

// bondOpt is one entry of bond_opts[] that the model writes.
type bondOpt struct {
	name     string
	noSlaves bool     // BOND_OPTFLAG_NOSLAVES
	ifDown   bool     // BOND_OPTFLAG_IFDOWN
	onlyIn   []string // the modes outside unsuppmodes; nil: every mode
	values   []optValue
	raw      bool // BOND_OPTFLAG_RAWVAL: the written string is the value, unparsed
	show     func(b *bondState) string
	// set applies a parsed value (the option's bond_option_*_set).
	set func(st *state, now int64, nd *netdev, v uint64) *opError
	// setRaw applies the written string of a raw option.
	setRaw func(st *state, now int64, nd *netdev, s string) *opError
}

// primarySlave is bond->primary_slave: the recorded primary while it is a
// slave of a bond whose mode uses a primary (bond_uses_primary: set at
// enslave and by a write of primary; a mode change needs the slaves
// released, which clears it).
func (b *bondState) primarySlave() string {
	if b.Primary == "" || !bondUsesPrimary(b.Mode) || !slices.Contains(b.Slaves, b.Primary) {
		return ""
	}
	return b.Primary
}

// bondUsesPrimary is bond_mode_uses_primary: active-backup, tlb, alb.
func bondUsesPrimary(mode string) bool {
	return mode == "active-backup" || mode == "balance-tlb" || mode == "balance-alb"
}

// The value tables of bond_options.c.
var (
	bondModeTbl = []optValue{ // bond_mode_tbl
		{name: "balance-rr", value: 0, def: true}, {name: "active-backup", value: 1}, {name: "balance-xor", value: 2},
		{name: "broadcast", value: 3}, {name: "802.3ad", value: 4}, {name: "balance-tlb", value: 5}, {name: "balance-alb", value: 6},
	}
	xmitHashTbl = []optValue{ // bond_xmit_hashtype_tbl
		{name: "layer2", value: 0, def: true}, {name: "layer3+4", value: 1}, {name: "layer2+3", value: 2},
		{name: "encap2+3", value: 3}, {name: "encap3+4", value: 4}, {name: "vlan+srcmac", value: 5},
	}
	lacpRateTbl = []optValue{{name: "slow", value: 0}, {name: "fast", value: 1}} // bond_lacp_rate_tbl: no default
	adSelectTbl = []optValue{                                                    // bond_ad_select_tbl
		{name: "stable", value: 0, def: true}, {name: "bandwidth", value: 1}, {name: "count", value: 2},
	}
	intMaxTbl = []optValue{{name: "off", value: 0, def: true}, {name: "maxval", value: math.MaxInt32, max: true}} // bond_intmax_tbl
)

func tblName(tbl []optValue, v uint64) string {
	for _, r := range tbl {
		if r.value == v {
			return r.name
		}
	}
	return ""
}

func tblValue(tbl []optValue, name string) uint64 {
	for _, r := range tbl {
		if r.name == name {
			return r.value
		}
	}
	return 0
}

// adSelect is the bond's ad_select ("" in older state files: stable).
func (b *bondState) adSelect() string {
	if b.AdSelect == "" {
		return "stable"
	}
	return b.AdSelect
}

// bondOpts are the options the model writes, by sysfs file name.
var bondOpts = map[string]*bondOpt{
	"mode": {name: "mode", noSlaves: true, ifDown: true, values: bondModeTbl,
		show: func(b *bondState) string { return fmt.Sprintf("%s %d\n", b.Mode, bondModes[b.Mode]) },
		set: func(st *state, now int64, nd *netdev, v uint64) *opError { // bond_option_mode_set
			b := nd.Bond
			mode := tblName(bondModeTbl, v)
			if !bondModeUsesARP(mode) && b.Miimon == 0 {
				b.Miimon = bondDefaultMiimon // "set miimon to default value"
			}
			b.Mode = mode
			st.refreshBonds(now)
			// NOSLAVES: the bond has no slave, so no NIC's LAG is
			// eligible; re-evaluating keeps the LAG state consistent with
			// the new mode when slaves join again.
			st.lagEvalFor(now, nd.Name, "")
			return nil
		}},
	"xmit_hash_policy": {name: "xmit_hash_policy", values: xmitHashTbl,
		show: func(b *bondState) string {
			return fmt.Sprintf("%s %d\n", b.XmitHashPolicy, xmitPolicies[b.XmitHashPolicy])
		},
		set: func(_ *state, _ int64, nd *netdev, v uint64) *opError {
			nd.Bond.XmitHashPolicy = tblName(xmitHashTbl, v)
			return nil
		}},
	"lacp_rate": {name: "lacp_rate", ifDown: true, onlyIn: []string{"802.3ad"}, values: lacpRateTbl,
		show: func(b *bondState) string { return fmt.Sprintf("%s %d\n", b.LacpRate, lacpRates[b.LacpRate]) },
		set: func(_ *state, _ int64, nd *netdev, v uint64) *opError {
			nd.Bond.LacpRate = tblName(lacpRateTbl, v)
			return nil
		}},
	"ad_select": {name: "ad_select", ifDown: true, values: adSelectTbl, // no unsuppmodes in 6.1
		show: func(b *bondState) string {
			return fmt.Sprintf("%s %d\n", b.adSelect(), tblValue(adSelectTbl, b.adSelect()))
		},
		set: func(_ *state, _ int64, nd *netdev, v uint64) *opError {
			nd.Bond.AdSelect = tblName(adSelectTbl, v)
			return nil
		}},
	"primary": {name: "primary", raw: true, onlyIn: []string{"active-backup", "balance-tlb", "balance-alb"},
		show: func(b *bondState) string { // bonding_show_primary: the primary slave or nothing
			if p := b.primarySlave(); p != "" {
				return p + "\n"
			}
			return ""
		},
		setRaw: func(st *state, now int64, nd *netdev, s string) *opError { // bond_option_primary_set
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				s = s[:i]
			}
			if len(s) > 15 { // strscpy_pad into IFNAMSIZ
				s = s[:15]
			}
			nd.Bond.Primary = s
			if s != "" && !slices.Contains(nd.Bond.Slaves, s) {
				st.log(now, "", "%s: Recording %s as primary, but it has not been enslaved yet", nd.Name, s)
			}
			st.refreshBonds(now) // bond_select_active_slave
			return nil
		}},
	"miimon": {name: "miimon", values: intMaxTbl,
		show: func(b *bondState) string { return fmt.Sprintf("%d\n", b.Miimon) },
		set: func(_ *state, _ int64, nd *netdev, v uint64) *opError {
			nd.Bond.Miimon = int(v) // updelay/downdelay are kept as multiples of it
			return nil
		}},
	"min_links": {name: "min_links", values: intMaxTbl,
		show: func(b *bondState) string { return fmt.Sprintf("%d\n", b.MinLinks) },
		set: func(_ *state, _ int64, nd *netdev, v uint64) *opError {
			nd.Bond.MinLinks = int(v)
			return nil
		}},
	"updelay": {name: "updelay", values: intMaxTbl,
		show: func(b *bondState) string { return fmt.Sprintf("%d\n", b.UpDelay*b.Miimon) },
		set: func(st *state, now int64, nd *netdev, v uint64) *opError {
			return st.setDelay(now, nd, "up delay", int(v), &nd.Bond.UpDelay)
		}},
	"downdelay": {name: "downdelay", values: intMaxTbl,
		show: func(b *bondState) string { return fmt.Sprintf("%d\n", b.DownDelay*b.Miimon) },
		set: func(st *state, now int64, nd *netdev, v uint64) *opError {
			return st.setDelay(now, nd, "down delay", int(v), &nd.Bond.DownDelay)
		}},
}

// bondDefaultMiimon is BOND_DEFAULT_MIIMON.
const bondDefaultMiimon = 100

// bondModeUsesARP is bond_mode_uses_arp: every mode but 802.3ad, tlb and alb.
func bondModeUsesARP(mode string) bool {
	return mode != "802.3ad" && mode != "balance-tlb" && mode != "balance-alb"
}

// setDelay is _bond_option_delay_set: the delay is kept in miimon intervals.
func (st *state) setDelay(now int64, nd *netdev, what string, ms int, target *int) *opError {
	miimon := nd.Bond.Miimon
	if miimon == 0 {
		st.log(now, "", "%s: Unable to set %s as MII monitoring is disabled", nd.Name, what)
		return fail(syscall.EPERM, "Unable to set %s as MII monitoring is disabled", what)
	}
	if ms%miimon != 0 {
		st.log(now, "", "%s: %s (%d) is not a multiple of miimon (%d), value rounded to %d ms", nd.Name, what, ms, miimon, ms/miimon*miimon)
	}
	*target = ms / miimon
	return nil
}

// parseBondOpt is bond_opt_parse for a value written through sysfs.
func parseBondOpt(o *bondOpt, s string) (uint64, bool) {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	numeric := true
	for _, r := range s {
		if !(r >= '0' && r <= '9' || isCSpace(r)) {
			numeric = false
			break
		}
	}
	if numeric {
		// sscanf("%llu"): nothing but spaces leaves the value ULLONG_MAX,
		// which no table holds and no range admits.
		f := strings.FieldsFunc(s, isCSpace)
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		for _, r := range o.values {
			if r.value == v {
				return v, true
			}
		}
		// bond_opt_check_range: needs a maxval; a missing minval is 0.
		var lo, hi *optValue
		for i := range o.values {
			if o.values[i].min && lo == nil {
				lo = &o.values[i]
			}
			if o.values[i].max && hi == nil {
				hi = &o.values[i]
			}
		}
		if hi == nil || lo != nil && v < lo.value || v > hi.value {
			return 0, false
		}
		return v, true
	}
	tok := strings.FieldsFunc(s, isCSpace)[0] // sscanf("%32s")
	if len(tok) > 32 {
		tok = tok[:32]
	}
	for _, r := range o.values {
		if tok == "default" && r.def || tok == r.name {
			return r.value, true
		}
	}
	return 0, false
}

// isCSpace is the C locale's isspace.
func isCSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r'
}

// setBondOption is a write to /sys/class/net/<bond>/bonding/<name>
// (__bond_opt_set). changed also reports a kernel log line written for a
// refusal.
func (st *state) setBondOption(now int64, nd *netdev, name, data string) (bool, *opError) {
	o := bondOpts[name]
	b := nd.Bond
	// bond_opt_check_deps, in its order.
	if o.onlyIn != nil && !slices.Contains(o.onlyIn, b.Mode) {
		st.log(now, "", "%s: option %s: mode dependency failed, not supported in mode %s(%d)", nd.Name, o.name, b.Mode, bondModes[b.Mode])
		return true, fail(syscall.EACCES, "option %s: mode dependency failed, not supported in mode %s(%d)", o.name, b.Mode, bondModes[b.Mode])
	}
	if o.noSlaves && len(b.Slaves) > 0 {
		st.log(now, "", "%s: option %s: unable to set because the bond device has slaves", nd.Name, o.name)
		return true, fail(syscall.ENOTEMPTY, "option %s: unable to set because the bond device has slaves", o.name)
	}
	if o.ifDown && nd.AdminUp {
		st.log(now, "", "%s: option %s: unable to set because the bond device is up", nd.Name, o.name)
		return true, fail(syscall.EBUSY, "option %s: unable to set because the bond device is up", o.name)
	}
	if o.raw {
		before, logs := b.options(), len(st.Dmesg)
		if e := o.setRaw(st, now, nd, data); e != nil {
			return len(st.Dmesg) != logs, e
		}
		return b.options() != before || len(st.Dmesg) != logs, nil
	}
	v, ok := parseBondOpt(o, data)
	if !ok {
		shown, _, _ := strings.Cut(data, "\n")
		st.log(now, "", "%s: option %s: invalid value (%s)", nd.Name, o.name, shown)
		for _, r := range o.values {
			if r.max {
				st.log(now, "", "%s: option %s: allowed values 0 - %d", nd.Name, o.name, r.value)
			}
		}
		return true, fail(syscall.EINVAL, "option %s: invalid value (%s)", o.name, shown)
	}
	before, logs := b.options(), len(st.Dmesg)
	if e := o.set(st, now, nd, v); e != nil {
		return len(st.Dmesg) != logs, e
	}
	return b.options() != before || len(st.Dmesg) != logs, nil
}

// bondOptions are a bond's settable options, comparable.
type bondOptions struct {
	mode, lacpRate, xmitHashPolicy, adSelect string
	miimon, minLinks, upDelay, downDelay     int
	activeSlave, primary                     string
}

func (b *bondState) options() bondOptions {
	return bondOptions{b.Mode, b.LacpRate, b.XmitHashPolicy, b.adSelect(), b.Miimon, b.MinLinks, b.UpDelay, b.DownDelay, b.ActiveSlave, b.Primary}
}
