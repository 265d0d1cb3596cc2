// Command vllmctl is a declarative rollout orchestrator for LLM inference
// services on Kubernetes. main only wires signals, runs the command tree and
// maps the returned error to its exit code (docs/exit-codes.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// gcTightenAfter is when a command that is still running gets GOGC=50.
const gcTightenAfter = 250 * time.Millisecond

// tightenGCLater sets GOGC=50 after the given time, unless GOGC is set in
// the environment (then it returns nil). The informers of a big rollout
// hold thousands of pods, and the heap may then grow to 1.5 times what is
// live instead of 2 times, for a little more GC work. Until then, short
// commands (list, diff, an up-to-date deploy) and a deploy's rendering run
// at the default: GOGC=50 would halve the 4 MB minimum heap goal and double
// the collections (15 instead of 8 in an up-to-date deploy, 13 ms more).
func tightenGCLater(lookupEnv func(string) (string, bool), after time.Duration) *time.Timer {
	if _, set := lookupEnv("GOGC"); set {
		return nil
	}
	return time.AfterFunc(after, func() { debug.SetGCPercent(50) })
}

func main() {
	// client-go logs through klog to stderr (e.g. a reflector's "watch
	// ended with error" while the API server restarts): stderr carries
	// vllmctl's progress only (plain lines or JSON lines), so drop them.
	// Helm's chart library logs through slog (e.g. one INFO line per
	// symbolic link it follows): errors reach the user as errors instead.
	discard := slog.New(slog.DiscardHandler)
	klog.SetSlogLogger(discard)
	slog.SetDefault(discard)
	tightenGCLater(os.LookupEnv, gcTightenAfter)
	// SIGHUP (the terminal or the SSH session went away) ends a command
	// as SIGTERM and SIGINT do: cleanly, lock released, instead of killing
	// it with its pending record left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// A closed pipe on stdout or stderr (vllmctl deploy | head) fails the
	// writes (EPIPE) instead of killing the process, by Go's default for
	// fds 1 and 2, mid-rollout with its pending record and lock left
	// behind: the command reaches its outcome (a failed rollout is still
	// rolled back) and exits with its code, or 1 for the failed write.
	// Notify rather than Ignore: programs vllmctl runs (gates, plugins)
	// start with SIGPIPE at its default.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	stopProfile := startProfile(os.Getenv("VLLMCTL_CPUPROFILE"))
	root := NewRootCommand(ctx, DefaultStreams())
	err := Execute(ctx, root)
	stopProfile()
	signalled := ctx.Err() // before stop(), which cancels ctx too
	stop()
	// The error leaves through the command's stderr writer, redacted as
	// its other output.
	code := exitCode(root.ErrOrStderr(), signalled, err)
	_ = FlushStreams(root) // nothing to report a failed write to
	os.Exit(code)
}

// exitCode prints err and returns its exit code (ExitCode), except that
// when a signal ended the command's context (ctxErr is not nil) an error
// that would be 6 (the cluster refused) or 1 (internal) is 130: what
// failed was cut short by the interrupt, whatever its error says. The
// codes of an outcome stand: 2, 3, 4, 5, and diff's 1 for changes found.
func exitCode(stderr io.Writer, ctxErr, err error) int {
	code := ExitCode(stderr, err)
	var changes silentError
	if ctxErr != nil && (code == ExitClusterErr || code == ExitInternal) && !errors.As(err, &changes) {
		return exitInterrupted
	}
	return code
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
