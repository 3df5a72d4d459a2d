package pipeline

import (
	"log/slog"
	"testing"

	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sysfs"
)

// TestUndoRegistryCoversEveryKind: every declared kind has an undoer and
// is unique, and every dependency names a declared kind. (A step of a kind
// without an undoer is refused when it runs: every cmd and pipeline test
// that runs up over a full config would fail.)
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
	if len(undo) != len(Kinds) {
		t.Errorf("%d undoers for %d kinds", len(undo), len(Kinds))
	}
}
