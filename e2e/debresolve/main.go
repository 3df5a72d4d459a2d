// Command debresolve picks the Debian package versions of one stage of
// the e2e test bed (e2e/build.sh) the way the packages' own dependencies
// allow: each package at a version that satisfies every relation the
// stage's other packages declare on it (Depends, compared as dpkg does),
// never by equality with the kernel image's version where Debian does not
// ask for it (linux-headers-X Depends: linux-kbuild-6.1 (>= V): a kbuild
// rebuilt as V+1 serves the headers of V).
//
// It reads the output of `apt-cache show PKG...` on stdin.
//
//	debresolve -stage kernel -names   the packages to show next (build.sh
//	                                  repeats until the list stops growing)
//	debresolve -stage kernel          the resolution, one "key value" line
//	                                  each: abi, version, series, then
//	                                  "pkg NAME VERSION" per package
//
// When the archive cannot satisfy the stage, it exits 1 with one line on
// stderr naming the package, the relation and who needs it, and the
// versions the archive offers.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "debresolve: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("debresolve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stageName := fs.String("stage", "", "the stage: "+strings.Join(stageNames(), ", "))
	listNames := fs.Bool("names", false, "print the package names the stage needs to see")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, ok := stages[*stageName]
	if !ok {
		return fmt.Errorf("-stage %q: not a stage (%s)", *stageName, strings.Join(stageNames(), ", "))
	}
	idx, err := readIndex(stdin)
	if err != nil {
		return fmt.Errorf("read apt-cache show output: %w", err)
	}
	if *listNames {
		for _, n := range names(st, idx) {
			fmt.Fprintln(stdout, n)
		}
		return nil
	}
	res, err := resolveStage(st, idx)
	if err != nil {
		return fmt.Errorf("stage %s (%s) cannot be built from the archive: %w", st.name, st.about, err)
	}
	for _, s := range res.skipped {
		fmt.Fprintf(stderr, "debresolve: stage %s: skipped kernel %s\n", st.name, s)
	}
	fmt.Fprint(stdout, render(res))
	return nil
}

// render is the shell-readable answer; every name and version in it
// matched nameRE and versionRE when it was read.
func render(res result) string {
	var b strings.Builder
	if res.plan.abi != "" {
		fmt.Fprintf(&b, "abi %s\nversion %s\nseries %s\n", res.plan.abi, res.plan.version, res.plan.series)
	}
	for _, p := range res.picks {
		fmt.Fprintf(&b, "pkg %s %s\n", p.name, p.version)
	}
	return b.String()
}

func stageNames() []string {
	var ns []string
	for n := range stages {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
