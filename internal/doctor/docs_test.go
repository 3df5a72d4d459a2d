package doctor

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestOutputNamesOnlyDocumentsThatExist: what doctor prints (details and
// fixes) on a ready host and on kernels of every version class names no
// document a user cannot open: DESIGN.md and KERNEL-FACTS.md were not in
// the repository. A document it names is at the repository's root or in
// docs/.
func TestOutputNamesOnlyDocumentsThatExist(t *testing.T) {
	doc := regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9_-]*\.md\b`)
	for _, rel := range []string{"6.1.0-18-amd64", "6.12.3", "5.19.0", "5.15.0-91-generic"} {
		r := newReady(t)
		r.machine.file("/proc/sys/kernel/osrelease", rel+"\n")
		rep := Run(t.Context(), r.env, Target{Groups: []Group{lagGroup()}, StateDir: r.stateDir})
		for _, c := range rep.Checks {
			for _, name := range doc.FindAllString(c.Detail+" "+c.Fix, -1) {
				found := false
				for _, dir := range []string{"../..", "../../docs"} {
					if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
						found = true
					}
				}
				if !found {
					t.Errorf("kernel %s: %s names %s, which is not in the repository: %s", rel, c.Name, name, c.Detail)
				}
			}
		}
	}
}
