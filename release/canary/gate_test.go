//go:build unix

package canary

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release/storage"
)

// processAlive reports whether pid is a live process: a zombie (killed,
// not yet reaped by whoever inherited it) is not.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err)
	}
	// pid (comm) S ...: the state follows the last ')'.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// childPid reads the pid a gate printed with `echo $!` as its first line,
// and makes sure the child does not outlive the test.
func childPid(t *testing.T, g *storage.GateResult) int {
	t.Helper()
	require.NotNil(t, g)
	require.NotEmpty(t, g.OutputTail)
	pid, err := strconv.Atoi(g.OutputTail[0])
	require.NoError(t, err, "first output line: %q", g.OutputTail[0])
	require.Positive(t, pid)
	t.Cleanup(func() {
		if processAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// assertGone waits until pid has died: the gate sent SIGKILL before it
// returned; the kernel finishes the exit on its own time.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	assert.Eventually(t, func() bool { return !processAlive(pid) }, 5*time.Second, 10*time.Millisecond,
		"the gate's background child %d outlives it", pid)
}

func TestRunGateBackgroundChildren(t *testing.T) {
	env := GateEnv{Release: "chat", Namespace: "ml", Revision: 3, Pods: []string{"a"}, Service: "chat"}

	t.Run("a background child and exit 0 pass at once, and the child is killed", func(t *testing.T) {
		start := time.Now()
		g, err := RunGate(context.Background(), `sleep 300 & echo $!; echo started; exit 0`, env, time.Minute)
		pid := childPid(t, g)
		require.NoError(t, err)
		assert.True(t, g.Passed(), "%+v", g)
		assert.Equal(t, 0, g.ExitCode)
		assert.False(t, g.TimedOut)
		assert.Equal(t, "started", g.OutputTail[len(g.OutputTail)-1])
		assert.Less(t, time.Since(start), 5*time.Second)
		assertGone(t, pid)
	})

	t.Run("a background child and exit 1 fail with exit code 1, and the child is killed", func(t *testing.T) {
		start := time.Now()
		g, err := RunGate(context.Background(), `sleep 300 & echo $!; echo "HTTP 503"; exit 1`, env, time.Minute)
		pid := childPid(t, g)
		require.NoError(t, err)
		assert.False(t, g.Passed())
		assert.Equal(t, 1, g.ExitCode)
		assert.False(t, g.TimedOut)
		assert.Equal(t, "HTTP 503", g.OutputTail[len(g.OutputTail)-1])
		assert.Less(t, time.Since(start), 5*time.Second)
		assertGone(t, pid)
	})

	t.Run("the timeout still kills the shell and its children", func(t *testing.T) {
		start := time.Now()
		g, err := RunGate(context.Background(), `sleep 300 & echo $!; sleep 300; echo never`, env, 300*time.Millisecond)
		pid := childPid(t, g)
		require.NoError(t, err)
		assert.True(t, g.TimedOut)
		assert.Equal(t, -1, g.ExitCode)
		assert.False(t, g.Passed())
		assert.Less(t, time.Since(start), 10*time.Second)
		assertGone(t, pid)
	})

	t.Run("a child that left the process group holds the output no longer than the drain delay", func(t *testing.T) {
		if _, err := exec.LookPath("setsid"); err != nil {
			t.Skip("no setsid")
		}
		// The shell exits once the child has its own session (and group).
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := fmt.Sprintf(`setsid sh -c 'touch "$0"; exec sleep 300' %q & echo $!; while [ ! -e %q ]; do sleep 0.01; done; exit 0`, ready, ready)
		start := time.Now()
		g, err := RunGate(context.Background(), cmd, env, time.Minute)
		childPid(t, g) // killed by the cleanup: it left the gate's group
		require.NoError(t, err)
		assert.True(t, g.Passed(), "%+v", g)
		assert.Less(t, time.Since(start), gateDrainDelay+5*time.Second)
	})
}
