package pipeline

import (
	"maps"
	"testing"
)

// bindIDs: iface-id and iface-status always; attached-mac only with the
// VF's MAC, vm-uuid only with the domain's UUID.
func TestBindIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    ovnBinding
		uuid string
		want map[string]string
	}{
		{"all", ovnBinding{LSP: "lsp1", MAC: "52:54:00:00:00:01", Domain: "vm1"}, "u-1",
			map[string]string{"iface-id": "lsp1", "iface-status": "active", "attached-mac": "52:54:00:00:00:01", "vm-uuid": "u-1"}},
		{"no domain", ovnBinding{LSP: "lsp1", MAC: "52:54:00:00:00:01"}, "",
			map[string]string{"iface-id": "lsp1", "iface-status": "active", "attached-mac": "52:54:00:00:00:01"}},
		{"no MAC", ovnBinding{LSP: "lsp1"}, "",
			map[string]string{"iface-id": "lsp1", "iface-status": "active"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bindIDs(tc.b, tc.uuid); !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
