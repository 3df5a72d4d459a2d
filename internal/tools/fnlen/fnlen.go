package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// Func is one function over the limit.
type Func struct {
	File, Name string
	Lines      int
}

// skipped are the trees that are not product code.
var skipped = []string{"internal/tools", "internal/sim", "internal/testbed", "libvirtx/virttest", "ovs/ovstest", "ovs/model", "build", "e2e"}

// Long walks root for the non-test Go functions longer than limit lines.
func Long(root string, limit int) ([]Func, error) {
	fset := token.NewFileSet()
	var out []Func
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			for _, s := range skipped {
				if rel == s || strings.HasPrefix(rel, ".") && rel != "." {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > limit {
				out = append(out, Func{File: rel, Name: fd.Name.Name, Lines: n})
			}
		}
		return nil
	})
	return out, err
}
