package pipeline

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/vflag/vflag/ovs"
)

// hwOffloadKind keeps the hw-offload value from before vflag when the
// bridge whose ovs.bridge entry recorded it is pruned (the config renamed
// the bridge) while a bridge of vflag's still wants hw-offload: no step
// makes it; the prune replaces the bridge's entry with it, and down (or
// the prune of the last group wanting hw-offload) restores the value.
//
//	ovs-vsctl set Open_vSwitch . other_config:hw-offload=$prior
type hwOffloadKind struct{}

type hwOffloadRecord struct {
	Endpoint string  `json:"endpoint"`
	Prior    *string `json:"prior"` // nil: the key was absent
}

func (hwOffloadKind) Name() string { return "ovs.hw-offload" }
func (hwOffloadKind) DependsOn() []string {
	return []string{ovsBridgeKind{}.Name(), ovsConfigKind{}.Name()}
}

func (k hwOffloadKind) id(endpoint string) string { return k.Name() + "/" + endpoint }

func (hwOffloadKind) Undo(ctx context.Context, e *Env, r hwOffloadRecord) (string, error) {
	c, done, err := e.ovsAt(ctx, r.Endpoint)
	if err != nil {
		return "", err
	}
	defer done()
	if err := c.Undo(ctx, ovs.Record{Owner: "vflag", HWOffloadSet: true, PriorHWOffload: r.Prior}); err != nil {
		return "", err
	}
	return fmt.Sprintf("hw-offload -> %s", orDash(deref(r.Prior))), nil
}

// recordJSON encodes a journal record (plain structs of strings and
// numbers: an error here is a programming error, returned, never a panic).
func recordJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode journal record %T: %w", v, err)
	}
	return b, nil
}
