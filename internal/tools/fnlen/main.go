// Command fnlen lists the product functions longer than a limit (default
// 100 lines), longest first: issue 24's measure of a function that mixes
// concerns. Tests, the simulator, the test beds and internal/tools are left
// out. Run from the repository root: go run ./internal/tools/fnlen [-max N].
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
)

func main() {
	limit := flag.Int("max", 100, "longest allowed function, in lines")
	flag.Parse()
	long, err := Long(".", *limit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fnlen:", err)
		os.Exit(1)
	}
	sort.Slice(long, func(i, j int) bool { return long[i].Lines > long[j].Lines })
	for _, f := range long {
		fmt.Printf("%4d %s %s\n", f.Lines, f.File, f.Name)
	}
	if len(long) > 0 {
		os.Exit(1)
	}
}
