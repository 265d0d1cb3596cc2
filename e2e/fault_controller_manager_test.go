//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Killing the kube-controller-manager leaves every other test on the
// shared cluster without controllers: the scenario is not a test of its
// own but a subtest of TestDestructiveFaults (destructive_test.go), which
// runs it after every other test.

// faultControllerManagerKilled: the local cluster's kube-controller-manager
// killed (SIGKILL), as a lost leader lease once made it exit under load;
// hack/cluster-up.sh says it restarts it and does, without recreating the
// cluster, and the controllers act again. The controller-manager runs
// without leader election. Whatever happens, the test leaves a
// controller-manager running. Run by TestDestructiveFaults.
func faultControllerManagerKilled(t *testing.T) {
	const name = "kube-controller-manager"
	dir := kwokClusterDir()
	c := localCluster{name: filepath.Base(dir), dir: dir}
	if _, err := cpPid(dir, name); err != nil {
		skipOrFail(t, "needs the local kwok cluster's %s pid file (set VLLMCTL_E2E_CLUSTER_DIR): %v", name, err)
	}
	if !ownCluster(c) {
		skipOrFail(t, "needs this checkout's local cluster (hack/cluster-up.sh restarts it), not %s", dir)
	}
	before, err := cpSnapshot(dir, name)
	require.NoError(t, err, "the controller-manager runs before the fault")
	assert.True(t, slices.Contains(before.args, "--leader-elect=false"), "%s runs without leader election: %q", name, before.args)
	t.Cleanup(func() {
		if pid, err := cpPid(dir, name); err == nil && cpAlive(pid, name) {
			return
		}
		pid, err := before.start(dir)
		if err != nil {
			t.Errorf("restore %s: %v", name, err)
			return
		}
		t.Logf("%s restored, pid %d", name, pid)
	})

	require.NoError(t, syscall.Kill(before.pid, syscall.SIGKILL))
	eventually(t, 10*time.Second, name+" exited", func(context.Context) (bool, error) {
		return !cpAlive(before.pid, name), nil
	})
	t.Logf("%s pid %d killed", name, before.pid)
	assert.Equal(t, []string{name}, deadComponents(dir), "only the controller-manager is down")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, "bash", filepath.Join("..", "hack", "cluster-up.sh"), c.name).CombinedOutput()
	require.NoError(t, err, "hack/cluster-up.sh %s:\n%s", c.name, out)
	t.Logf("hack/cluster-up.sh %s (%s):\n%s", c.name, time.Since(start).Round(100*time.Millisecond), out)
	assert.Contains(t, string(out), name+" is not running", "says what is down")
	assert.Contains(t, string(out), "restarted "+name, "says what it restarted")
	assert.NotContains(t, string(out), "recreating", "the cluster is not recreated")

	pid, err := cpPid(dir, name)
	require.NoError(t, err)
	require.True(t, cpAlive(pid, name), "%s pid %d runs", name, pid)
	assert.NotEqual(t, before.pid, pid, "a new %s", name)
	assert.Empty(t, deadComponents(dir), "every component runs")
	after, err := cpSnapshot(dir, name)
	require.NoError(t, err)
	assert.True(t, slices.Contains(after.args, "--leader-elect=false"), "still without leader election: %q", after.args)

	// The controllers act again: a new namespace gets its default
	// ServiceAccount from the controller-manager (newEnv waits for it).
	e := newEnv(t)
	t.Logf("namespace %s has its default ServiceAccount", e.namespace)
}
