package main

import (
	"github.com/spf13/cobra"
)

func newCompletionCommand(g *GlobalOptions) *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh|fish",
		Short:     "Print a shell completion script",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(g.Streams.Out, true)
			case "zsh":
				return root.GenZshCompletion(g.Streams.Out)
			case "fish":
				return root.GenFishCompletion(g.Streams.Out, true)
			}
			return newUsageError("completion: unknown shell %q (want bash, zsh or fish)", args[0])
		},
	}
}
