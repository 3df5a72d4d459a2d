package docs

// The check names and problem classes vflag can report, read from the
// source of the packages that report them, and troubleshooting.md held to
// them: every name has an entry in its check index, every entry and every
// "Detected by" names a check that exists, and every reason the offload
// check gives for a flow outside the hardware is in its reason table.
//
// A name is found where it is made: the second argument of doctor's add,
// the Name of a validate.Check (and the first argument of pass, failed,
// skip and notApplicable), the class of a status problem (problemLine),
// the reasons notInHWReasons appends (ovnFlowReasons' among them). Its expression is resolved through
// constants, variables, parameters (at every call site) and fmt.Sprintf
// formats; what depends on the host (a PF's netdev, a domain) becomes a
// wildcard, which the document writes as <placeholder>.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// wild stands for the part of a name that depends on the host.
const wild = "\x00"

// source is one parsed package.
type source struct {
	name   string
	fset   *token.FileSet
	files  []*ast.File
	consts map[string]ast.Expr // package-level constants and variables with one value
	funcs  map[string]*ast.FuncDecl
}

// sources are the packages names are resolved in, by package name.
type sources map[string]*source

func loadSources(t *testing.T, dirs ...string) sources {
	t.Helper()
	out := sources{}
	for _, dir := range dirs {
		fset := token.NewFileSet()
		matches, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil || len(matches) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		s := &source{fset: fset, consts: map[string]ast.Expr{}, funcs: map[string]*ast.FuncDecl{}}
		for _, m := range matches {
			if strings.HasSuffix(m, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, m, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			s.name = f.Name.Name
			s.files = append(s.files, f)
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					for _, sp := range d.Specs {
						if vs, ok := sp.(*ast.ValueSpec); ok {
							for i, n := range vs.Names {
								if i < len(vs.Values) {
									s.consts[n.Name] = vs.Values[i]
								}
							}
						}
					}
				case *ast.FuncDecl:
					s.funcs[d.Name.Name] = d
				}
			}
		}
		out[s.name] = s
	}
	return out
}

// resolver resolves expressions of one package to name patterns.
type resolver struct {
	all  sources
	src  *source
	errs []string
}

func (r *resolver) fail(n ast.Node, format string, args ...any) []string {
	r.errs = append(r.errs, fmt.Sprintf("%s: %s", r.src.fset.Position(n.Pos()), fmt.Sprintf(format, args...)))
	return nil
}

var verbRE = regexp.MustCompile(`%[-+# 0]*[0-9]*(\.[0-9]+)?[a-zA-Z]`)

// patterns resolves e to the names it can take, host-dependent parts as
// wild. depth bounds the chase through parameters.
func (r *resolver) patterns(e ast.Expr, depth int) []string {
	if depth > 8 {
		return r.fail(e, "name expression too deep to resolve")
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return []string{wild}
		}
		s, err := strconv.Unquote(e.Value)
		if err != nil {
			return r.fail(e, "%v", err)
		}
		return []string{s}
	case *ast.ParenExpr:
		return r.patterns(e.X, depth)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return r.fail(e, "operator %s in a name", e.Op)
		}
		var out []string
		for _, a := range r.patterns(e.X, depth) {
			for _, b := range r.patterns(e.Y, depth) {
				out = append(out, a+b)
			}
		}
		return out
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && isIdent(sel.X, "fmt") && sel.Sel.Name == "Sprintf" && len(e.Args) > 0 {
			var out []string
			for _, f := range r.patterns(e.Args[0], depth) {
				f = strings.ReplaceAll(verbRE.ReplaceAllString(f, wild), "%%", "%")
				out = append(out, f)
			}
			return out
		}
		return []string{wild} // a value read or computed at run time
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Obj == nil {
			if other, ok := r.all[x.Name]; ok {
				if v, ok := other.consts[e.Sel.Name]; ok {
					o := &resolver{all: r.all, src: other}
					out := o.patterns(v, depth+1)
					r.errs = append(r.errs, o.errs...)
					return out
				}
			}
		}
		return []string{wild} // a field: a PF's netdev, a domain, a tool
	case *ast.Ident:
		return r.ident(e, depth)
	case *ast.IndexExpr, *ast.SliceExpr, *ast.StarExpr:
		return []string{wild}
	}
	return r.fail(e, "cannot resolve a name from %T", e)
}

// ident resolves an identifier: a constant or variable (every value it is
// given), a function's parameter (the argument at every call site), a
// range variable (wild).
func (r *resolver) ident(id *ast.Ident, depth int) []string {
	if id.Obj == nil {
		if v, ok := r.src.consts[id.Name]; ok {
			return r.patterns(v, depth+1)
		}
		return r.fail(id, "cannot resolve %s", id.Name)
	}
	switch d := id.Obj.Decl.(type) {
	case *ast.ValueSpec:
		for i, n := range d.Names {
			if n.Name == id.Name && i < len(d.Values) {
				return append(r.patterns(d.Values[i], depth+1), r.assigned(id.Obj, depth)...)
			}
		}
		if out := r.assigned(id.Obj, depth); len(out) > 0 {
			return out
		}
		return r.fail(id, "%s has no value", id.Name)
	case *ast.AssignStmt:
		var out []string
		for i, l := range d.Lhs {
			if li, ok := l.(*ast.Ident); ok && li.Name == id.Name && i < len(d.Rhs) && len(d.Lhs) == len(d.Rhs) {
				out = append(out, r.patterns(d.Rhs[i], depth+1)...)
			} else if ok && li.Name == id.Name {
				return []string{wild} // one of several results of a call
			}
		}
		return append(out, r.assigned(id.Obj, depth)...)
	case *ast.Field:
		return r.param(id, d, depth)
	case *ast.RangeStmt:
		return []string{wild}
	}
	return r.fail(id, "cannot resolve %s (%T)", id.Name, id.Obj.Decl)
}

// assigned resolves the later assignments (=) of obj.
//
//lint:ignore SA1019 the parser's objects resolve one package's names without type-checking its dependencies, which is all this needs
func (r *resolver) assigned(obj *ast.Object, depth int) []string {
	var out []string
	for _, f := range r.src.files {
		ast.Inspect(f, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || as.Tok != token.ASSIGN || len(as.Lhs) != len(as.Rhs) {
				return true
			}
			for i, l := range as.Lhs {
				if li, ok := l.(*ast.Ident); ok && li.Obj == obj {
					out = append(out, r.patterns(as.Rhs[i], depth+1)...)
				}
			}
			return true
		})
	}
	return out
}

// param resolves a parameter to the arguments of every call of its
// function: a declared function called by name, or a function literal
// assigned to a variable.
func (r *resolver) param(id *ast.Ident, field *ast.Field, depth int) []string {
	type owner struct {
		typ    *ast.FuncType
		name   string // a declared function or method
		method bool   // name is a method's
		//lint:ignore SA1019 as for assigned
		obj *ast.Object // a function literal's variable
	}
	var own *owner
	for _, f := range r.src.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if slices.Contains(n.Type.Params.List, field) {
					own = &owner{typ: n.Type, name: n.Name.Name, method: n.Recv != nil}
				}
			case *ast.AssignStmt:
				for i, rhs := range n.Rhs {
					if fl, ok := rhs.(*ast.FuncLit); ok && slices.Contains(fl.Type.Params.List, field) && i < len(n.Lhs) {
						if li, ok := n.Lhs[i].(*ast.Ident); ok {
							own = &owner{typ: fl.Type, obj: li.Obj}
						}
					}
				}
			}
			return own == nil
		})
	}
	if own == nil {
		return r.fail(id, "parameter %s of no function found", id.Name)
	}
	index := 0
	for _, fd := range own.typ.Params.List {
		if fd == field {
			for _, n := range fd.Names {
				if n.Name == id.Name {
					break
				}
				index++
			}
			break
		}
		index += max(len(fd.Names), 1)
	}
	var out []string
	calls := 0
	for _, f := range r.src.files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || index >= len(call.Args) {
				return true
			}
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				literal := own.obj != nil && fn.Obj == own.obj
				declared := own.obj == nil && !own.method && fn.Name == own.name && (fn.Obj == nil || fn.Obj.Kind == ast.Fun)
				if literal || declared {
					calls++
					out = append(out, r.patterns(call.Args[index], depth+1)...)
				}
			case *ast.SelectorExpr:
				if own.method && fn.Sel.Name == own.name {
					calls++
					out = append(out, r.patterns(call.Args[index], depth+1)...)
				}
			}
			return true
		})
	}
	if calls == 0 {
		return r.fail(id, "no call passes parameter %s", id.Name)
	}
	return out
}

// isCheck tells whether typ is validate.Check.
func isCheck(typ ast.Expr) bool {
	if sel, ok := typ.(*ast.SelectorExpr); ok && isIdent(sel.X, "validate") {
		typ = sel.Sel
	}
	return isIdent(typ, "Check")
}

// nameOf is the Name of a Check literal.
func nameOf(cl *ast.CompositeLit) []ast.Expr {
	for _, el := range cl.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Name") {
			return []ast.Expr{kv.Value}
		}
	}
	return nil
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// names walks every file of src and resolves the expressions sink picks.
func (r *resolver) names(sink func(n ast.Node) []ast.Expr) map[string]string {
	out := map[string]string{} // pattern -> where
	for _, f := range r.src.files {
		ast.Inspect(f, func(n ast.Node) bool {
			for _, e := range sink(n) {
				for _, p := range r.patterns(e, 0) {
					if strings.Trim(p, wild+" :/") == "" {
						r.fail(e, "a name with nothing fixed in it: %q", p)
						continue
					}
					if _, ok := out[p]; !ok {
						out[p] = r.src.fset.Position(e.Pos()).String()
					}
				}
			}
			return true
		})
	}
	return out
}

// codeNames are the names each tool reports, read from its source.
type codeNames struct {
	doctor, validate, status, reasons map[string]string
}

func readCodeNames(t *testing.T) codeNames {
	t.Helper()
	all := loadSources(t, "internal/doctor", "internal/validate", "internal/validaterun", "internal/status")
	var errs []string
	run := func(pkg string, sink func(ast.Node) []ast.Expr) map[string]string {
		r := &resolver{all: all, src: all[pkg]}
		if r.src == nil {
			t.Fatalf("package %s not loaded", pkg)
		}
		out := r.names(sink)
		errs = append(errs, r.errs...)
		return out
	}
	var cn codeNames
	cn.doctor = run("doctor", func(n ast.Node) []ast.Expr {
		// d.add(area, name, subject, status, detail, fix)
		if c, ok := n.(*ast.CallExpr); ok && len(c.Args) == 6 {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "add" {
				return c.Args[1:2]
			}
		}
		return nil
	})
	checkName := func(n ast.Node) []ast.Expr {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if isCheck(n.Type) {
				return nameOf(n)
			}
			// []Check{{Name: ...}}: the elements' type is elided.
			if at, ok := n.Type.(*ast.ArrayType); ok && isCheck(at.Elt) {
				var out []ast.Expr
				for _, el := range n.Elts {
					if cl, ok := el.(*ast.CompositeLit); ok && cl.Type == nil {
						out = append(out, nameOf(cl)...)
					}
				}
				return out
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && len(n.Args) > 0 && slices.Contains([]string{"pass", "failed", "skip", "notApplicable"}, id.Name) {
				return n.Args[:1]
			}
		}
		return nil
	}
	cn.validate = run("validate", checkName)
	for p, w := range run("validaterun", checkName) {
		cn.validate[p] = w
	}
	cn.status = run("status", func(n ast.Node) []ast.Expr {
		// problemLine(class, format, args...); a class that is a
		// check's Name is validate's.
		if c, ok := n.(*ast.CallExpr); ok && isIdent(c.Fun, "problemLine") && len(c.Args) > 0 {
			if sel, ok := c.Args[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "Name" {
				return nil
			}
			return c.Args[:1]
		}
		return nil
	})
	cn.reasons = map[string]string{}
	{
		r := &resolver{all: all, src: all["validate"]}
		// notInHWReasons and the functions whose reasons it appends
		// whole (out = append(out, f(...)...)).
		for _, name := range []string{"notInHWReasons", "ovnFlowReasons"} {
			fd := r.src.funcs[name]
			if fd == nil {
				t.Fatalf("validate has no %s", name)
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				// out = append(out, reason)
				if c, ok := n.(*ast.CallExpr); ok && isIdent(c.Fun, "append") && len(c.Args) > 1 && isIdent(c.Args[0], "out") && !c.Ellipsis.IsValid() {
					for _, a := range c.Args[1:] {
						for _, p := range r.patterns(a, 0) {
							cn.reasons[p] = r.src.fset.Position(a.Pos()).String()
						}
					}
				}
				return true
			})
		}
		errs = append(errs, r.errs...)
	}
	if len(errs) > 0 {
		t.Fatalf("names that cannot be read from the source (make them constants, literals or fmt.Sprintf formats, or teach this test):\n  %s", strings.Join(errs, "\n  "))
	}
	for tool, m := range map[string]map[string]string{"doctor": cn.doctor, "validate": cn.validate, "status": cn.status, "offload reasons": cn.reasons} {
		if len(m) == 0 {
			t.Fatalf("no %s names found in the source", tool)
		}
	}
	return cn
}

// docPattern is a name or reason as the document writes it: one
// <placeholder> for each part that depends on the host (each wildcard of
// the code's pattern); a reason may stop short of the code's text.
type docPattern struct {
	text  string
	where string
	re    *regexp.Regexp
}

var placeholderRE = regexp.MustCompile(`<[^<>]+>`)

func newDocPattern(text, where string, prefix bool) docPattern {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range placeholderRE.FindAllStringIndex(text, -1) {
		b.WriteString(regexp.QuoteMeta(text[last:m[0]]))
		b.WriteString(wild) // one host-dependent part of the code's name
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(text[last:]))
	if !prefix {
		b.WriteString("$")
	}
	return docPattern{text: text, where: where, re: regexp.MustCompile("(?s)" + b.String())}
}

// matches tells whether the document's pattern covers the code's.
func (d docPattern) matches(code string) bool { return d.re.MatchString(code) }

func show(code string) string { return strings.ReplaceAll(code, wild, "<*>") }

// troubleshooting is what the check index, the Detected-by lines and the
// reason table of troubleshooting.md say.
type troubleshooting struct {
	index    map[string][]docPattern // tool -> the index's rows
	detected map[string][]docPattern // tool -> the Detected-by lines' names
	reasons  []docPattern
	anchors  map[string]bool
	links    []docPattern // "(#anchor)" links of the index, as text, where
}

var codeSpanRE = regexp.MustCompile("`([^`]+)`")

func readTroubleshooting(t *testing.T, text string) troubleshooting {
	t.Helper()
	ts := troubleshooting{index: map[string][]docPattern{}, detected: map[string][]docPattern{}, anchors: Anchors(text)}
	lines := strings.Split(text, "\n")
	section := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		where := fmt.Sprintf("troubleshooting.md:%d", i+1)
		switch {
		case strings.HasPrefix(l, "## "):
			section = strings.TrimPrefix(l, "## ")
		case strings.HasPrefix(l, "**Detected by**:"):
			para := l
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				i++
				para += " " + lines[i]
			}
			for _, m := range codeSpanRE.FindAllStringSubmatch(para, -1) {
				tool, name, ok := strings.Cut(m[1], " ")
				if !ok || !slices.Contains([]string{"doctor", "status", "validate"}, tool) {
					t.Errorf("%s: %q in Detected by is not \"<doctor|status|validate> <check>\"", where, m[1])
					continue
				}
				ts.detected[tool] = append(ts.detected[tool], newDocPattern(name, where+" ("+section+")", false))
			}
		case strings.HasPrefix(l, "| reason |"):
			for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
				cells := Cells(lines[i])
				m := codeSpanRE.FindStringSubmatch(cells[0])
				if m == nil {
					t.Errorf("troubleshooting.md:%d: reason %q not in backquotes", i+1, cells[0])
					continue
				}
				ts.reasons = append(ts.reasons, newDocPattern(m[1], fmt.Sprintf("troubleshooting.md:%d", i+1), true))
			}
		case strings.HasPrefix(l, "| check | reported by | entry |"):
			for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
				where := fmt.Sprintf("troubleshooting.md:%d", i+1)
				cells := Cells(lines[i])
				if len(cells) != 3 {
					t.Errorf("%s: want 3 cells: %s", where, lines[i])
					continue
				}
				m := codeSpanRE.FindStringSubmatch(cells[0])
				if m == nil {
					t.Errorf("%s: check %q not in backquotes", where, cells[0])
					continue
				}
				for _, tool := range strings.Split(cells[1], ", ") {
					ts.index[tool] = append(ts.index[tool], newDocPattern(m[1], where, false))
				}
				links := linkRE.FindAllStringSubmatch(cells[2], -1)
				if len(links) == 0 {
					t.Errorf("%s: %s has no entry link", where, m[1])
				}
				for _, l := range links {
					ts.links = append(ts.links, docPattern{text: l[1], where: where})
				}
			}
		}
	}
	if len(ts.index) == 0 || len(ts.reasons) == 0 || len(ts.detected) == 0 {
		t.Fatalf("troubleshooting.md: no check index (| check | reported by | entry |), reason table (| reason |) or Detected by lines")
	}
	return ts
}

var linkRE = regexp.MustCompile(`\]\(#([^)]+)\)`)

// TestTroubleshootingCoversEveryCheck: every check name and problem class
// doctor, status and validate can report, and every reason the offload
// check gives, has an entry in troubleshooting.md; every entry names one
// that exists.
func TestTroubleshootingCoversEveryCheck(t *testing.T) {
	cn := readCodeNames(t)
	text, err := os.ReadFile("troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	ts := readTroubleshooting(t, string(text))
	code := map[string]map[string]string{"doctor": cn.doctor, "validate": cn.validate, "status": cn.status}

	for tool, names := range code {
		for _, name := range sortedKeys(names) {
			if !slices.ContainsFunc(ts.index[tool], func(d docPattern) bool { return d.matches(name) }) {
				t.Errorf("%s reports %q (%s), which troubleshooting.md's check index does not list for %s", tool, show(name), names[name], tool)
			}
		}
	}
	for tool, rows := range ts.index {
		names, ok := code[tool]
		if !ok {
			t.Errorf("troubleshooting.md: check index names tool %q (doctor, status or validate)", tool)
			continue
		}
		for _, d := range rows {
			if !anyMatch(d, names) {
				t.Errorf("%s: %s reports no check %q", d.where, tool, d.text)
			}
		}
	}
	for tool, refs := range ts.detected {
		names := code[tool]
		if tool == "status" { // status names a failing static check as validate does
			names = merged(cn.status, cn.validate)
		}
		for _, d := range refs {
			if !anyMatch(d, names) {
				t.Errorf("%s: Detected by names %q, which %s does not report", d.where, tool+" "+d.text, tool)
			}
		}
	}
	for _, name := range sortedKeys(cn.reasons) {
		if !slices.ContainsFunc(ts.reasons, func(d docPattern) bool { return d.matches(name) }) {
			t.Errorf("the offload check gives the reason %q (%s), which troubleshooting.md's reason table does not list", show(name), cn.reasons[name])
		}
	}
	for _, d := range ts.reasons {
		if !anyMatch(d, cn.reasons) {
			t.Errorf("%s: the offload check gives no reason %q", d.where, d.text)
		}
	}
	for _, l := range ts.links {
		if !ts.anchors[l.text] {
			t.Errorf("%s: link to #%s, which is no heading of troubleshooting.md", l.where, l.text)
		}
	}
}

func anyMatch(d docPattern, names map[string]string) bool {
	for n := range names {
		if d.matches(n) {
			return true
		}
	}
	return false
}

func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Anchors are the link targets of a Markdown document's headings, as the
// forge makes them: lower case, punctuation but '-' and '_' dropped,
// spaces as '-'.
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestOVNTrafficReasons: every reason the OVN traffic check begins its
// detail with (internal/validate's Reason* constants) has a row in
// troubleshooting.md's table of them, and every row is such a reason.
func TestOVNTrafficReasons(t *testing.T) {
	src := loadSources(t, "internal/validate")["validate"]
	code := map[string]bool{}
	for name, e := range src.consts {
		if lit, ok := e.(*ast.BasicLit); ok && strings.HasPrefix(name, "Reason") && lit.Kind == token.STRING {
			v, _ := strconv.Unquote(lit.Value)
			code[v] = true
		}
	}
	b, err := os.ReadFile("troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]bool{}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "| the detail begins with |") {
			continue
		}
		for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
			if m := codeSpanRE.FindStringSubmatch(Cells(lines[i])[0]); m != nil {
				doc[m[1]] = true
			}
		}
	}
	if len(code) == 0 {
		t.Fatal("internal/validate has no Reason* constants")
	}
	for r := range code {
		if !doc[r] {
			t.Errorf("the OVN traffic check's reason %q has no row in troubleshooting.md", r)
		}
	}
	for r := range doc {
		if !code[r] {
			t.Errorf("troubleshooting.md lists the OVN traffic reason %q, which the check does not give", r)
		}
	}
}
