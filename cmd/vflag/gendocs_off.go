//go:build !vflag_gendocs

package main

import "github.com/spf13/cobra"

// genDocsCommand: none without the tag vflag_gendocs (gendocs.go).
func (a *app) genDocsCommand() *cobra.Command { return nil }
