package main

import (
	"github.com/spf13/cobra"
)

// addCompletionCommand adds cobra's own `completion` command to root, with
// one subcommand a shell: bash, zsh, fish and powershell (each with
// --no-descriptions). It is added here, not when the command runs, so that
// wrapArgs makes its argument errors usage errors as everywhere else; a
// missing or unknown shell is one (exit 2), as for `dependency`.
func addCompletionCommand(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.RunE = func(*cobra.Command, []string) error {
				return newUsageError("a subcommand is required: bash, zsh, fish or powershell")
			}
		}
	}
}
