package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// userDocs are the documents a user reads: the README and docs/*.md.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	paths, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(paths, "../README.md") {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

// history is what a record of how the project was built looks like: an
// issue or a session, a "stop" of the work, a commit hash.
var history = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bissue[s]? #?[0-9]+`),
	regexp.MustCompile(`(?i)\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|[0-9]+(st|nd|rd|th)|this|last|next) stop\b`),
	regexp.MustCompile(`(?i)\bsessions?\b`),
	regexp.MustCompile(`\b[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b`),
}

// TestUserDocsCarryNoHistory: the README and docs/ speak of the project as
// it is; how it got there is in the commits and CHANGELOG.md, which speaks
// of releases and commits (no issues, sessions or stops either).
func TestUserDocsCarryNoHistory(t *testing.T) {
	docs := userDocs(t)
	changelog, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	docs["../CHANGELOG.md"] = string(changelog)
	for path, text := range docs {
		for i, line := range strings.Split(text, "\n") {
			for _, re := range history {
				if re == history[3] && path == "../CHANGELOG.md" {
					continue // commits are what the changelog names
				}
				for _, m := range re.FindAllString(line, -1) {
					if re == history[3] && (len(m) < 7 || len(m) > 40) {
						continue // not a commit hash
					}
					t.Errorf("%s:%d: %q reads as development history: %s", path, i+1, m, line)
				}
			}
		}
	}
}

var (
	mdLinkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdNameRE  = regexp.MustCompile(`\b[A-Z][A-Z0-9_-]*\.md\b`)
	codeFence = regexp.MustCompile("(?s)```.*?```")
)

// TestUserDocsLinksResolve: every relative link of the README and docs/
// names a file of the repository and, with #anchor, a heading of it; every
// document named like DESIGN.md exists (a user cannot follow one that is
// not in the repository).
func TestUserDocsLinksResolve(t *testing.T) {
	for path, text := range userDocs(t) {
		prose := codeFence.ReplaceAllString(text, "")
		for _, m := range mdLinkRE.FindAllStringSubmatch(prose, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(link, "#")
			target := path
			if file != "" {
				target = filepath.Join(filepath.Dir(path), file)
			}
			b, err := os.ReadFile(target)
			if err != nil {
				if fi, serr := os.Stat(target); serr == nil && fi.IsDir() && anchor == "" {
					continue
				}
				t.Errorf("%s: link %s: %v", path, link, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !Anchors(string(b))[anchor] {
				t.Errorf("%s: link %s: no heading %q in %s", path, link, anchor, target)
			}
		}
		for _, name := range mdNameRE.FindAllString(text, -1) {
			if !exists(name) {
				t.Errorf("%s names %s, which is not in the repository", path, name)
			}
		}
	}
}

// exists tells whether a document named like README.md is at the
// repository's root or in docs/.
func exists(name string) bool {
	for _, dir := range []string{"..", "."} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
