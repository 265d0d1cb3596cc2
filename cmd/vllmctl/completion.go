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
			c.RunE = requireSubcommand("bash, zsh, fish or powershell")
		}
	}
}

// requireSubcommand is the RunE of a command that only groups others
// (dependency, repo, registry, completion): run alone it is a usage error
// (exit 2) naming the subcommands.
func requireSubcommand(names string) func(*cobra.Command, []string) error {
	return func(*cobra.Command, []string) error {
		return newUsageError("a subcommand is required: %s", names)
	}
}
