//go:build vflag_gendocs

package main

// `vflag gen-docs DIR` (hidden): man pages and shell completions generated
// from the command tree, for the packages (make package builds a vflag
// with the tag vflag_gendocs to run it). The shipped binary leaves it out:
// cobra's doc package brings blackfriday, whose init every run would pay.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/vflag/vflag/docs"
)

func (a *app) genDocsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs DIR",
		Short:  "Write man pages (DIR/man/man1 from the command tree, DIR/man/man5/vflag.yaml.5 from docs/configuration.md) and bash, zsh and fish completions (DIR/completions)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			man := filepath.Join(args[0], "man", "man1")
			man5 := filepath.Join(args[0], "man", "man5")
			comp := filepath.Join(args[0], "completions")
			for _, d := range []string{man, man5, comp} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			// SOURCE_DATE_EPOCH, when set, fixes the date in the pages (reproducible builds).
			hdr := &doc.GenManHeader{Title: "VFLAG", Section: "1", Source: "vflag", Manual: "vflag manual"}
			if err := doc.GenManTree(root, hdr, man); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			date := time.Now()
			if epoch, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
				date = time.Unix(epoch, 0)
			}
			page, err := docs.ConfigManPage(date)
			if err != nil {
				return fmt.Errorf("vflag.yaml(5): %w", err)
			}
			if err := os.WriteFile(filepath.Join(man5, "vflag.yaml.5"), []byte(page), 0o644); err != nil {
				return err
			}
			gens := map[string]func(string) error{
				"vflag.bash": func(p string) error { return root.GenBashCompletionFileV2(p, true) },
				"vflag.zsh":  root.GenZshCompletionFile,
				"vflag.fish": func(p string) error { return root.GenFishCompletionFile(p, true) },
			}
			for name, gen := range gens {
				if err := gen(filepath.Join(comp, name)); err != nil {
					return fmt.Errorf("completion %s: %w", name, err)
				}
			}
			return nil
		},
	}
}
