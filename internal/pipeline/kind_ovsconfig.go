package pipeline

import (
	"context"
	"fmt"
	"strconv"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/teardown"
)

// ovsConfigKind sets one global Open_vSwitch other_config key that a
// group's ovs: section gives (tc-policy, max-idle), before the group's
// bridge step: tc-policy is read by ovs-vswitchd only when hw-offload is
// first enabled, so it is set only while hw-offload is not "true" yet;
// otherwise, as for hw-offload off (kind_hwoffload.go, ovs.Change's
// RestartRequired), a warning says that a restart of ovs-vswitchd is
// required and the key is left alone: vflag never restarts OVS. max-idle
// applies live. One step per key (the first group giving it: config
// validation makes every group agree); its record keeps the prior value,
// which the undo restores.
//
//	ovs-vsctl set Open_vSwitch . other_config:$key=$value
type ovsConfigKind struct{}

type ovsConfigRecord = rowKeyRecord

func (ovsConfigKind) Name() string        { return "ovs.other-config" }
func (ovsConfigKind) DependsOn() []string { return nil }

// The other_config keys vflag sets from a group's ovs: section.
const (
	OVSKeyTCPolicy = "tc-policy"
	OVSKeyMaxIdle  = "max-idle"
)

func (k ovsConfigKind) step(e *Env, key, value string, row *rowRead) teardown.Step {
	return rowKeyStep(e, k.Name(), row, key, func(cur string, ok bool, row map[string]string) (string, string, func() error, string, error) {
		if key == OVSKeyTCPolicy && (!ok || cur != value) && row[ovs.HWOffloadKey] == "true" {
			e.log.Warn("tc-policy differs but hw-offload is already on: changing it needs a restart of ovs-vswitchd; vflag never restarts OVS",
				"tc-policy", orDash(cur), "want", value)
			return value, "", nil, fmt.Sprintf("other_config:%s %s left alone: hw-offload is on, %s needs a restart of ovs-vswitchd", key, orDash(cur), value), nil
		}
		return value, "", nil, "", nil
	})
}

func (ovsConfigKind) Undo(ctx context.Context, e *Env, r ovsConfigRecord) (string, error) {
	return undoRowKey(ctx, e, otherConfigColumn, r)
}

// ovsConfig: the global other_config keys of the group's ovs: section,
// unless an earlier group of the config gives them (the same value).
func (run *groupRun) ovsConfig(context.Context) ([]batch, error) {
	g := run.g
	var s []teardown.Step
	row := newRowRead(run.e, otherConfigColumn)
	first := func(has func(o *config.OVSConfig) bool) bool {
		if run.e.cfg == nil {
			return true
		}
		for i := range run.e.cfg.Groups {
			og := &run.e.cfg.Groups[i]
			if og.Switchdev() && has(&og.OVS) {
				return og.Name == g.Name
			}
		}
		return true
	}
	if g.OVS.TCPolicy != "" && first(func(o *config.OVSConfig) bool { return o.TCPolicy != "" }) {
		s = append(s, ovsConfigKind{}.step(run.e, OVSKeyTCPolicy, g.OVS.TCPolicy, row))
	}
	if g.OVS.MaxIdle != 0 && first(func(o *config.OVSConfig) bool { return o.MaxIdle != 0 }) {
		s = append(s, ovsConfigKind{}.step(run.e, OVSKeyMaxIdle, strconv.Itoa(g.OVS.MaxIdle), row))
	}
	return one(s...), nil
}
