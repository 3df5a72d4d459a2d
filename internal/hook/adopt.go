package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/teardown"
)

// oldStatePath is the state file of vflag releases before the per-domain
// journal (the directory's path plus ".json").
func oldStatePath(dir string) string { return dir + ".json" }

// oldState is the hook's state file of vflag releases before the
// per-domain journal: what the hook changed for one domain.
type oldState struct {
	Domain string     `json:"domain"`
	VFs    []oldVFRec `json:"vfs"`
}

type oldVFRec struct {
	PCI string `json:"pci"`
	PF  string `json:"pf"` // PF netdev
	VF  int    `json:"vf"`
	// MACSet: the hook changed the VF's MAC; PriorMAC is the one before.
	MACSet   bool   `json:"mac_set,omitempty"`
	PriorMAC string `json:"prior_mac,omitempty"`
	// Port: a representor port the hook added to a bridge.
	Port *ovs.Record `json:"port,omitempty"`
	// Endpoint is the OVSDB endpoint of Port.
	Endpoint string `json:"endpoint,omitempty"`
}

// adoptOldState journals the records of an old-format state file as the
// equivalent entries (write-ahead, through the runner: the changes are
// already on the host, so nothing is applied), then removes the file. A
// crash in between adopts again: the journal keeps its first capture.
func adoptOldState(ctx context.Context, o Options, dir string, j *teardown.Journal) error {
	path := oldStatePath(dir)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st oldState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("hook state %s: %w", path, err)
	}
	sort.SliceStable(st.VFs, func(a, b int) bool { return st.VFs[a].PCI < st.VFs[b].PCI })
	// Per VF the MAC before the port, as prepare journals them: down undoes
	// the port first.
	var steps []teardown.Step
	for _, v := range st.VFs {
		if v.MACSet {
			steps = append(steps, pipeline.AdoptVFMAC(v.PF, v.VF, v.PriorMAC))
		}
		if v.Port != nil && len(v.Port.Ports) > 0 {
			steps = append(steps, pipeline.AdoptPort(v.Endpoint, *v.Port))
		}
	}
	r := &teardown.Runner{Journal: j, Undo: pipeline.New(nil, host.New(nil, nil, "", ""), o.Log).Undoers(), Log: o.Log, NoRollback: true, NoOpen: true}
	for _, s := range steps {
		if err := r.Do(ctx, s); err != nil {
			return fmt.Errorf("adopt hook state %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	o.Log.Info("hook: adopted old-format state file into the domain's journal", "file", path, "journal", j.Path(), "entries", len(steps))
	return nil
}
