package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// stanza is one version of one binary package as `apt-cache show` prints it.
type stanza struct {
	name, version string
	depends       [][]relation // Pre-Depends and Depends
}

// index holds every version the archive offers of each package of a dump.
type index map[string][]stanza

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]*$`)
	versionRE = regexp.MustCompile(`^(?:[0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
)

// readIndex parses the output of `apt-cache show PKG...` (every version of
// every package named, from every source; a version offered by two
// sources is kept once).
func readIndex(r io.Reader) (index, error) {
	idx := index{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	fields := map[string]string{}
	var last string
	line := 0
	flush := func() error {
		defer func() { fields = map[string]string{}; last = "" }()
		name, version := fields["Package"], fields["Version"]
		if name == "" && version == "" {
			return nil
		}
		if !nameRE.MatchString(name) || !versionRE.MatchString(version) {
			return fmt.Errorf("line %d: a stanza with Package %q Version %q", line, name, version)
		}
		for _, s := range idx[name] {
			if s.version == version {
				return nil
			}
		}
		st := stanza{name: name, version: version}
		for _, f := range []string{"Pre-Depends", "Depends"} {
			g, err := parseDepends(fields[f], name+" "+version)
			if err != nil {
				return fmt.Errorf("%s %s %s: %w", name, version, f, err)
			}
			st.depends = append(st.depends, g...)
		}
		idx[name] = append(idx[name], st)
		return nil
	}
	for sc.Scan() {
		line++
		l := sc.Text()
		switch {
		case strings.TrimSpace(l) == "":
			if err := flush(); err != nil {
				return nil, err
			}
		case l[0] == ' ' || l[0] == '\t':
			if last != "" {
				fields[last] += " " + strings.TrimSpace(l)
			}
		default:
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				return nil, fmt.Errorf("line %d: not a field: %q", line, l)
			}
			last = k
			fields[k] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	for _, vs := range idx {
		sort.Slice(vs, func(i, j int) bool { return compareVersions(vs[i].version, vs[j].version) > 0 })
	}
	return idx, nil
}

// offered lists the versions of name, newest first.
func (idx index) offered(name string) []string {
	var vs []string
	for _, s := range idx[name] {
		vs = append(vs, s.version)
	}
	return vs
}

func (idx index) stanza(name, version string) stanza {
	for _, s := range idx[name] {
		if s.version == version {
			return s
		}
	}
	return stanza{}
}

// want is one package of a stage: the relations the stage itself puts on
// it, and the version it takes when that one satisfies every relation
// (the kernel image's own version, for the packages built with it).
type want struct {
	name   string
	rules  []relation
	prefer string
	// sameUpstream: only versions with this upstream version (the source a
	// module is built from must be the kernel's release).
	sameUpstream string
}

// pick is one resolved package.
type pick struct{ name, version string }

// unsatisfiable is the error of a stage the archive cannot satisfy.
type unsatisfiable struct {
	pkg     string
	rules   []relation
	offered []string
}

func (e *unsatisfiable) Error() string {
	var rs []string
	for _, r := range e.rules {
		rs = append(rs, fmt.Sprintf("%s, needed by %s", r, r.why))
	}
	offers := "no version at all"
	if len(e.offered) > 0 {
		offers = strings.Join(e.offered, ", ")
	}
	if len(rs) == 0 {
		return fmt.Sprintf("%s: the archive offers %s", e.pkg, offers)
	}
	return fmt.Sprintf("%s: no version satisfies %s; the archive offers %s", e.pkg, strings.Join(rs, "; "), offers)
}

// resolve takes each wanted package, in order, at the version that
// satisfies the stage's rules and every relation that the packages picked
// before it declare on it (a group of alternatives counts only when it
// names this package alone): the preferred version when it does, the
// newest one otherwise. It then checks every relation among the picked
// packages, so a package picked first is held to what later ones need.
func resolve(idx index, wants []want) ([]pick, error) {
	var picks []pick
	chosen := map[string]string{}
	for _, w := range wants {
		rules := append([]relation(nil), w.rules...)
		for _, p := range picks {
			rules = append(rules, soleRelationsOn(idx.stanza(p.name, p.version), w.name)...)
		}
		var fit []string
		for _, v := range idx.offered(w.name) {
			if w.sameUpstream != "" && upstreamOf(v) != w.sameUpstream {
				continue
			}
			if satisfiesAll(v, rules) {
				fit = append(fit, v)
			}
		}
		if len(fit) == 0 {
			if w.sameUpstream != "" {
				rules = append(rules, relation{name: w.name, op: "upstream", version: w.sameUpstream, why: "the stage (the kernel's release)"})
			}
			return nil, &unsatisfiable{pkg: w.name, rules: rules, offered: idx.offered(w.name)}
		}
		v := fit[0]
		for _, f := range fit {
			if f == w.prefer {
				v = f
			}
		}
		picks = append(picks, pick{w.name, v})
		chosen[w.name] = v
	}
	for _, p := range picks {
		for name, v := range chosen {
			for _, r := range soleRelationsOn(idx.stanza(p.name, p.version), name) {
				if !r.satisfiedBy(v) {
					return nil, fmt.Errorf("%s: %s, needed by %s, is not met by %s, the version the packages picked before it allow; the archive offers %s",
						name, r, r.why, v, strings.Join(idx.offered(name), ", "))
				}
			}
		}
	}
	return picks, nil
}

func satisfiesAll(v string, rules []relation) bool {
	for _, r := range rules {
		if !r.satisfiedBy(v) {
			return false
		}
	}
	return true
}

// soleRelationsOn lists s's relations on name that are not one of several
// alternatives.
func soleRelationsOn(s stanza, name string) []relation {
	var out []relation
	for _, g := range s.depends {
		if len(g) == 1 && g[0].name == name {
			out = append(out, g[0])
		}
	}
	return out
}
