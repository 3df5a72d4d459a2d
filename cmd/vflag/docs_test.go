package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// userDocs are the README and docs/*.md, by path.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range append(paths, "../../README.md") {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(p, "../../")] = string(b)
	}
	return out
}

// commandLines are the vflag command lines of a document: each line of a
// code block and each code span that runs vflag (vflag, bin/vflag,
// /usr/bin/vflag at a command's place), from that word on.
func commandLines(text string) (lines []string, where []int) {
	inBlock := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
			continue
		}
		var candidates []string
		if inBlock {
			candidates = []string{l}
		} else {
			for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(l, -1) {
				candidates = append(candidates, m[1])
			}
		}
		for _, c := range candidates {
			words := strings.Fields(c)
			for j, w := range words {
				if (w == "vflag" || strings.HasSuffix(w, "/vflag")) && commandPlace(words[:j]) {
					lines = append(lines, strings.Join(words[j:], " "))
					where = append(where, i+1)
				}
			}
		}
	}
	return lines, where
}

// commandPlace tells whether the word after before is a command: the
// first word, or after an operator, sudo or an environment assignment.
func commandPlace(before []string) bool {
	if len(before) == 0 {
		return true
	}
	last := before[len(before)-1]
	switch {
	case slices.Contains([]string{"|", "||", "&&", ";", "$(", "sudo", "exec", "then", "do"}, last):
		return true
	case strings.Contains(last, "=") && !strings.HasPrefix(last, "-"):
		return commandPlace(before[:len(before)-1])
	}
	return false
}

// endOfCommand tells whether a word ends the command line (an operator,
// a redirection, a comment).
func endOfCommand(w string) bool {
	return slices.Contains([]string{"|", "||", "&&", ";", ")"}, w) ||
		strings.HasSuffix(w, ":") || strings.HasSuffix(w, ",") || // output or prose: "vflag up: changed"
		strings.HasPrefix(w, "#") || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "2>")
}

// lookupFlag finds a flag of cmd (its own, inherited or persistent) by
// "--name" or "-x".
func lookupFlag(cmd *cobra.Command, word string) *pflag.Flag {
	name, _, _ := strings.Cut(word, "=")
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags(), cmd.PersistentFlags(), cmd.Root().PersistentFlags()} {
		if long, ok := strings.CutPrefix(name, "--"); ok {
			if f := fs.Lookup(long); f != nil {
				return f
			}
		} else if short, ok := strings.CutPrefix(name, "-"); ok && len(short) == 1 {
			if f := fs.ShorthandLookup(short); f != nil {
				return f
			}
		}
	}
	if name == "--help" || name == "-h" || name == "--version" {
		return &pflag.Flag{Name: "help", Value: boolValue{}}
	}
	return nil
}

type boolValue struct{}

func (boolValue) String() string   { return "false" }
func (boolValue) Set(string) error { return nil }
func (boolValue) Type() string     { return "bool" }

// checkLine resolves a vflag command line against the command tree and
// returns what in it the tree does not have.
func checkLine(root *cobra.Command, line string) []string {
	words := strings.Fields(line)[1:]
	cmd := root
	var bad []string
	args := false // a positional argument was seen: no subcommand follows
	for i := 0; i < len(words); i++ {
		w := strings.Trim(words[i], "[]\"'")
		switch {
		case endOfCommand(words[i]):
			return bad
		case w == "--":
			return bad // the rest is the command's arguments (hook qemu -- DOMAIN ...)
		case strings.HasPrefix(w, "-") && len(w) > 1 && !strings.HasPrefix(w, "-0") && !regexp.MustCompile(`^-[0-9]`).MatchString(w):
			f := lookupFlag(cmd, w)
			if f == nil {
				bad = append(bad, cmd.CommandPath()+" has no flag "+strings.SplitN(w, "=", 2)[0])
				continue
			}
			if f.Value.Type() != "bool" && !strings.Contains(w, "=") {
				i++ // its value
			}
		default:
			if !args && cmd.HasSubCommands() {
				// "roce show|gids|set": each alternative a command.
				alts := strings.Split(strings.ReplaceAll(w, `\|`, "|"), "|")
				var subs []*cobra.Command
				for _, alt := range alts {
					if sub, _, err := cmd.Find([]string{alt}); err == nil && sub != cmd {
						subs = append(subs, sub)
					}
				}
				if len(subs) == len(alts) {
					cmd = subs[0]
					continue
				}
				if !cmd.Runnable() {
					bad = append(bad, cmd.CommandPath()+" has no command "+w)
					return bad
				}
			}
			args = true
		}
	}
	return bad
}

// docsRoot is the command tree as a user meets it: with the help and
// completion commands cobra adds when it runs.
func docsRoot() *cobra.Command {
	a := &app{v: newViper(), stdout: io.Discard, stderr: io.Discard}
	root := a.rootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// TestDocsCommandLines: every vflag command line of the README and docs/
// names commands and flags the command tree has (the tree --help and the
// man pages are generated from).
func TestDocsCommandLines(t *testing.T) {
	root := docsRoot()
	n := 0
	for path, text := range userDocs(t) {
		lines, where := commandLines(text)
		for i, l := range lines {
			n++
			for _, b := range checkLine(root, l) {
				t.Errorf("%s:%d: %s: %s", path, where[i], l, b)
			}
		}
	}
	if n < 50 {
		t.Fatalf("found only %d vflag command lines in the documents", n)
	}
}

// defaultRE finds a flag's default as the documents write it:
// "`--lock-wait` (default `2m`" or "`--lock-wait`, default `2m`".
var defaultRE = regexp.MustCompile("`(--[a-z0-9-]+)[^`]*`,?\\s+\\(?default\\s+`?([^`),;]+)`?")

// TestDocsFlagDefaults: every default the README and docs/ give a flag is
// the command tree's (its default value, or the default its help names),
// and every flag they name on its own (`--name`) is one of vflag's.
func TestDocsFlagDefaults(t *testing.T) {
	root := docsRoot()
	flags := map[string][]*pflag.Flag{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = append(flags[f.Name], f) })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = append(flags[f.Name], f) })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	// Flags of other programs the documents name on their own.
	foreign := []string{"--log-file", "--check", "--diff", "--no-wait", "--collector.textfile.directory"}
	cobras := []string{"--help", "--version"} // cobra adds them when a command runs
	n := 0
	for path, text := range userDocs(t) {
		prose := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, "")
		for _, m := range defaultRE.FindAllStringSubmatch(prose, -1) {
			n++
			name, doc := strings.TrimPrefix(m[1], "--"), strings.TrimSpace(m[2])
			fs := flags[name]
			if len(fs) == 0 {
				t.Errorf("%s: %q gives a default to --%s, which no command has", path, m[0], name)
				continue
			}
			if !slices.ContainsFunc(fs, func(f *pflag.Flag) bool { return sameDefault(f, doc) }) {
				t.Errorf("%s: %q: --%s's default is %q (%s)", path, m[0], name, fs[0].DefValue, fs[0].Usage)
			}
		}
		for _, m := range regexp.MustCompile("`(--[a-z][a-z0-9.-]*)`").FindAllStringSubmatch(prose, -1) {
			if len(flags[strings.TrimPrefix(m[1], "--")]) == 0 && !slices.Contains(foreign, m[1]) && !slices.Contains(cobras, m[1]) {
				t.Errorf("%s: names %s, which no vflag command has", path, m[1])
			}
		}
	}
	if n < 3 {
		t.Fatalf("found only %d flag defaults in the documents", n)
	}
}

// sameDefault tells whether doc is f's default: its value (durations
// compared as durations), or the default its help text gives.
func sameDefault(f *pflag.Flag, doc string) bool {
	if f.DefValue == doc {
		return true
	}
	if f.Value.Type() == "duration" {
		a, err1 := time.ParseDuration(f.DefValue)
		b, err2 := time.ParseDuration(doc)
		if err1 == nil && err2 == nil && a == b {
			return true
		}
	}
	return regexp.MustCompile(`\(default[: ][^)]*\b` + regexp.QuoteMeta(doc) + `\b`).MatchString(f.Usage)
}
