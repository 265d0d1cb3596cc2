package canary

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// gateTailLines is how many of the gate command's last output lines a
// failure diagnosis holds.
const gateTailLines = 20

// gateOutputLimit bounds the gate's output kept in memory.
const gateOutputLimit = 64 << 10

// GateEnv is what a canary's gate command finds in its environment.
type GateEnv struct {
	Release, Namespace string
	Revision           int
	Pods               []string
	Service            string
}

func (e GateEnv) vars() []string {
	return []string{
		"VLLMCTL_RELEASE=" + e.Release,
		"VLLMCTL_NAMESPACE=" + e.Namespace,
		fmt.Sprintf("VLLMCTL_REVISION=%d", e.Revision),
		"VLLMCTL_CANARY_PODS=" + strings.Join(e.Pods, " "),
		"VLLMCTL_SERVICE=" + e.Service,
	}
}

// gateDrainDelay is how long, once the shell has exited and its process
// group is killed, the gate's output is still read: what the shell wrote
// is in the pipe already; only a child that left the group (setsid) can
// hold the pipe open longer, and its output is not waited for.
const gateDrainDelay = time.Second

// RunGate runs the canary's gate command with sh -c, once, within timeout. The verdict is
// the shell's exit status: once the shell exits, its process group is
// killed (a background child, such as `kubectl port-forward … &`, never
// outlives the gate) and the output is read for at most gateDrainDelay
// more. The process group is killed as well when the timeout passes or
// ctx ends (Ctrl-C). stdout and stderr are kept (the last
// gateOutputLimit bytes), never printed: the last lines go into the
// result.
func RunGate(ctx context.Context, command string, env GateEnv, timeout time.Duration) (*storage.GateResult, error) {
	return runGateWith(ctx, "canary gate", command, env.vars(), timeout)
}

// RunGateCommand runs a gate command as the canary's gate runs (see RunGate):
// sh -c command, once, within timeout, with vars (NAME=value) added to
// the environment; its process group never outlives it. The verdict is
// the result's ExitCode (-1 with TimedOut when the timeout passed); the
// error reports a gate that could not run or was interrupted (ctx ended).
// `vllmctl fleet deploy` runs its gate between waves with it.
func RunGateCommand(ctx context.Context, command string, vars []string, timeout time.Duration) (*storage.GateResult, error) {
	return runGateWith(ctx, "gate", command, vars, timeout)
}

func runGateWith(ctx context.Context, what, command string, vars []string, timeout time.Duration) (*storage.GateResult, error) {
	gctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(gctx, "/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), vars...)
	out := &tailBuffer{limit: gateOutputLimit}
	err := runShell(cmd, out)
	res := &storage.GateResult{Command: command, DurationSeconds: time.Since(start).Seconds(), OutputTail: out.lines(gateTailLines)}
	var exit *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success():
		// Pipes still held open by a background child after a clean exit
		// are no failure of the gate.
		res.ExitCode = 0
	case ctx.Err() != nil:
		res.ExitCode = -1
		return res, fmt.Errorf("%s %q: interrupted: %w", what, command, ctx.Err())
	case errors.Is(gctx.Err(), context.DeadlineExceeded):
		res.ExitCode, res.TimedOut = -1, true
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	default:
		return res, fmt.Errorf("%s %q: %w", what, command, err)
	}
	return res, nil
}

// runShell runs cmd in a process group of its own with stdout and stderr
// going to out through a pipe vllmctl owns, so that Wait returns when the
// shell exits, whoever else holds the pipe. Then the group is killed and
// the pipe read until its end or for gateDrainDelay, whichever comes
// first. The error is Wait's.
func runShell(cmd *exec.Cmd, out io.Writer) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("gate output pipe: %w", err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	setProcessGroup(cmd)
	// When the context ends, Cancel kills the group; a shell that still
	// has not exited WaitDelay later is killed on its own.
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Start()
	w.Close() // the children hold the write end now
	if err != nil {
		return err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, r)
	}()
	err = cmd.Wait()
	killProcessGroup(cmd)
	drain := time.NewTimer(gateDrainDelay)
	defer drain.Stop()
	select {
	case <-copied:
	case <-drain.C:
		// A child outside the group still holds the pipe: stop reading.
		if r.SetReadDeadline(time.Now()) == nil {
			<-copied
		}
	}
	return err
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// lines returns the last n non-empty lines, sanitised (termout.SanitizeLine):
// the gate's output is untrusted text bound for the record and terminals.
func (b *tailBuffer) lines(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range bytes.Split(b.buf, []byte("\n")) {
		if s := strings.TrimRight(string(l), "\r"); strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return termout.SanitizeLines(out)
}
