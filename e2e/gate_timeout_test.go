//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release/storage"
)

// A canary gate that exits 0 but leaves a background
// child (a `kubectl port-forward … &` in a smoke test) passes, at once,
// and the child does not outlive the gate.
func TestCanaryGateBackgroundChild(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	f.canaryInstall(t)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	gate := fmt.Sprintf(`sleep 300 & echo $! > %q; echo started; exit 0`, pidFile)
	start := time.Now()
	r := f.run(t, canaryArgs("--set", "image.tag=v0.11.1", "--canary", "1", "--canary-hold", "1s", "--canary-gate", gate, "-o", "json")...)
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the gate ran: %s", r)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	require.Equal(t, 0, r.code, "%s", r)
	assert.NotContains(t, r.stderr, "WaitDelay")
	res := result(t, r)
	require.NotNil(t, res.Canary)
	require.NotNil(t, res.Canary.Gate)
	assert.Equal(t, 0, res.Canary.Gate.ExitCode)
	assert.Less(t, res.Canary.Gate.DurationSeconds, 5.0, "the gate passed when its shell exited")
	assert.Equal(t, storage.CanaryPromoted, res.Canary.Outcome)
	assert.Less(t, time.Since(start), 2*time.Minute)
	// The child is dead once vllmctl has exited (a zombie until whoever
	// inherited it reaps it counts as dead).
	assert.Eventually(t, func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return os.IsNotExist(err)
		}
		i := strings.LastIndexByte(string(stat), ')')
		return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
	}, 10*time.Second, 50*time.Millisecond, "the gate's background child %d outlives it", pid)
}

// A deploy of the built-in chart given no --timeout
// follows the startup probe's budget (30m, plus 1m) and warns about
// nothing; a --timeout chosen shorter warns; wait and rollback follow the
// budget too.
func TestDeployTimeoutFollowsStartupBudget(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.run(t, append([]string{"deploy", relName, "vllm", "--progress", "plain"}, reconcileValues...)...)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "preflight: timeout: 31m0s, following the startup probe's budget (no --timeout given)\n")
	assert.NotContains(t, r.stderr, "is shorter than the startup probe's budget")

	r = f.deployVLLM(t, "--set", "podAnnotations.e2e=two") // --timeout 2m
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "preflight: warning: deployment/chat container server: --timeout 2m0s is shorter than the startup probe's budget of 30m0s")
	assert.NotContains(t, r.stderr, "following the startup probe's budget")

	r = f.run(t, "wait", relName)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "timeout 31m0s, following the startup probe's budget (no --timeout given)\n")

	r = f.run(t, "rollback", relName, "--progress", "plain")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "rollback: timeout: 31m0s, following the startup probe's budget (no --timeout given)\n")
}
