//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release/storage"
)

// Restarting the kube-apiserver disturbs every other test on the cluster:
// the scenario is not a test of its own but a subtest of
// TestDestructiveFaults (destructive_test.go), which runs it after every
// other test.

// restartAPIServer kills the local cluster's kube-apiserver and starts it
// again (hack/restart-apiserver.sh), returning once it is ready and the
// other components act again.
func restartAPIServer(t *testing.T, clusterDir string) {
	t.Helper()
	pidFile := filepath.Join(clusterDir, "pids", "kube-apiserver.pid")
	before, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "hack", "restart-apiserver.sh"))
	cmd.Env = append(os.Environ(), "VLLMCTL_CLUSTER_DIR="+clusterDir)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "restart-apiserver.sh:\n%s", out)
	t.Logf("kube-apiserver restarted in %s:\n%s", time.Since(start).Round(100*time.Millisecond), out)
	after, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	require.NotEqual(t, strings.TrimSpace(string(before)), strings.TrimSpace(string(after)), "a new kube-apiserver pid")
}

// faultAPIServerRestart: a kube-apiserver killed and restarted while a
// deploy waits neither loses nor misjudges the rollout. Run by
// TestDestructiveFaults.
func faultAPIServerRestart(t *testing.T) {
	kubeconfig := os.Getenv("VLLMCTL_E2E_KUBECONFIG")
	clusterDir := os.Getenv("VLLMCTL_E2E_CLUSTER_DIR")
	if clusterDir == "" {
		clusterDir = filepath.Join(filepath.Dir(kubeconfig), "kwok", "clusters", "vllmctl")
	}
	if _, err := os.Stat(filepath.Join(clusterDir, "pids", "kube-apiserver.pid")); err != nil {
		skipOrFail(t, "needs the local kwok cluster's kube-apiserver pid file (set VLLMCTL_E2E_CLUSTER_DIR): %v", err)
	}

	for _, tc := range []struct {
		name   string
		args   func(t *testing.T) []string
		code   int
		reason string
	}{
		{"slow but healthy", func(t *testing.T) []string {
			return append(readyDelay(t, 10*time.Second), "--set", "image.tag=v0.11.1")
		}, 0, ""},
		{"crash", func(*testing.T) []string { return []string{"--set", "image.tag=v0.9.1-crash"} }, 3, "CrashLoopBackOff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRelFixture(t)
			rev1 := f.rolloutInstall(t)

			// The cluster's controllers take a while to catch up after the
			// restart: a longer --timeout (the last one given wins).
			p := f.start(t, rolloutArgs(append(tc.args(t), "-o", "json", "--timeout", "4m")...)...)
			p.waitProgress(t, waitMarks...)
			require.NotContains(t, p.stderr.String(), relName+"#2 done", "the deploy still waits when the API server is killed")
			restartAPIServer(t, clusterDir)
			r := p.wait(t)
			t.Logf("deploy progress:\n%s", r.stderr)

			require.Equal(t, tc.code, r.code, "%s", r)
			assert.NotRegexp(t, `(?m)^[IWEF]\d{4} `, r.stderr, "no client-go (klog) lines among the progress")
			res := result(t, r)
			assert.Equal(t, 2, res.Revision)
			require.Len(t, res.ReplicaSets, 1)
			assert.NotEqual(t, rev1.ReplicaSets[0].PodTemplateHash, res.ReplicaSets[0].PodTemplateHash)
			if tc.code == 0 {
				assert.Equal(t, storage.StatusDeployed, res.Status)
				assert.Nil(t, res.Failure, "no false verdict")
				assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusDeployed}, statuses(f.history(t)))
				f.assertServing(t, res.ReplicaSets[0])
			} else {
				assert.Equal(t, storage.StatusFailed, res.Status)
				assert.Equal(t, 1, res.RolledBackTo)
				if assert.NotNil(t, res.Failure) {
					assert.Equal(t, tc.reason, res.Failure.Reason)
					assert.True(t, strings.HasPrefix(res.Failure.Pod, res.ReplicaSets[0].Name+"-"), "pod %q of the new ReplicaSet", res.Failure.Pod)
				}
				f.assertRolledBack(t, rev1, tc.reason)
				f.assertServing(t, rev1.ReplicaSets[0])
			}
			assert.Empty(t, pendingRecords(t, f), "no lock left behind")
		})
	}
}
