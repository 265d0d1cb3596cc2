// Command vllmctl is a declarative rollout orchestrator for LLM inference
// services on Kubernetes. main only wires signals, runs the command tree and
// maps the returned error to the exit codes of the contract.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := NewRootCommand(ctx, DefaultStreams()).ExecuteContext(ctx)
	stop()
	os.Exit(ExitCode(os.Stderr, err))
}
