package sim

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocRulesTableNamesRealTests: every test the package documentation's
// table of mlx5 rules names exists in the repository (a renamed or
// removed test leaves the table wrong).
func TestDocRulesTableNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(doc), "# The mlx5 rules vflag depends on")
	end := strings.Index(string(doc), "# What is not modelled")
	if start < 0 || end < start {
		t.Fatal("doc.go has no table of mlx5 rules")
	}
	named := regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9]*`).FindAllString(string(doc[start:end]), -1)
	if len(named) < 15 {
		t.Fatalf("the table names %d tests", len(named))
	}
	defined := map[string]bool{}
	funcRE := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9]+)\(`)
	err = filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range funcRE.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range named {
		if !defined[n] {
			t.Errorf("doc.go's table names %s, which no _test.go defines", n)
		}
	}
}
