package main

import (
	"context"

	"github.com/spf13/cobra"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwokctlcmd "sigs.k8s.io/kwok/pkg/kwokctl/cmd"
)

func newKwokCommand(ctx context.Context, name string) *cobra.Command {
	if name == "kwokctl" {
		return kwokctlcmd.NewCommand(ctx)
	}
	return kwokcmd.NewCommand(ctx)
}
