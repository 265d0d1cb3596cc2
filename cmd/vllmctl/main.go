// Command vllmctl is a declarative rollout orchestrator for LLM inference
// services on Kubernetes. main only wires signals, runs the command tree and
// maps the returned error to the exit codes of the contract.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"k8s.io/klog/v2"
)

func main() {
	// client-go logs through klog to stderr (e.g. a reflector's "watch
	// ended with error" while the API server restarts): stderr carries
	// vllmctl's progress only (plain lines or JSON lines), so drop them.
	// Helm's chart library logs through slog (e.g. one INFO line per
	// symbolic link it follows): errors reach the user as errors instead.
	discard := slog.New(slog.DiscardHandler)
	klog.SetSlogLogger(discard)
	slog.SetDefault(discard)
	// Half the Go default, unless GOGC says otherwise: the informers of a
	// big rollout hold thousands of pods, and the heap may then grow to 1.5
	// times what is live instead of 2 times, for a little more GC work.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(50)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startProfile(os.Getenv("VLLMCTL_CPUPROFILE"))
	err := Execute(ctx, NewRootCommand(ctx, DefaultStreams()))
	stopProfile()
	stop()
	os.Exit(ExitCode(os.Stderr, err))
}

// startProfile writes a CPU profile of the run to path.PID
// (VLLMCTL_CPUPROFILE=path, for `go tool pprof`), when set; the returned
// func ends it.
func startProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid()))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
