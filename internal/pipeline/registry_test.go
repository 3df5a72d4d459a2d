package pipeline

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sysfs"
)

// TestUndoRegistryCoversEveryKind: every kind the phase table makes has an
// undoer, every declared kind is unique, and every dependency names a
// declared kind.
func TestUndoRegistryCoversEveryKind(t *testing.T) {
	e := New(nil, host.New(nil, sysfs.Dir(t.TempDir()), "", ""), slog.New(slog.DiscardHandler))
	undo := e.Undoers()
	declared := map[string]bool{}
	for _, k := range Kinds {
		if declared[k.Name] {
			t.Errorf("kind %s declared twice", k.Name)
		}
		declared[k.Name] = true
		if undo[k.Name] == nil {
			t.Errorf("kind %s has no undoer", k.Name)
		}
	}
	for _, k := range Kinds {
		for _, d := range k.DependsOn {
			if !declared[d] {
				t.Errorf("kind %s depends on undeclared kind %s", k.Name, d)
			}
		}
	}
	for _, p := range phases {
		for _, k := range p.kinds {
			if undo[k] == nil {
				t.Errorf("phase %s (%s) makes kind %s, which has no undoer", p.num, p.name, k)
			}
		}
		if len(p.kinds) == 0 && !strings.Contains(p.name, "wait") && p.name != "verify" {
			t.Errorf("phase %s (%s) declares no kind and is no barrier", p.num, p.name)
		}
	}
	if len(undo) != len(Kinds) {
		t.Errorf("%d undoers for %d kinds", len(undo), len(Kinds))
	}
}
