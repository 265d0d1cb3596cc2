//go:build e2e

package e2e

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

// faultControllerStalled: kube-controller-manager killed mid-deploy. The
// upgrade's Deployment is never observed: the deploy reports verdict
// ControllerStalled after --controller-stall-timeout (10 s here), well
// before --timeout (5m), naming the Deployment and asking whether
// kube-controller-manager runs; exit 3 or 4 (its rollback needs the
// controller too). The controller-manager is started again afterwards,
// also when the test fails, and the next deploy works. Run by
// TestDestructiveFaults.
func faultControllerStalled(t *testing.T) {
	dir := kwokClusterDir()
	kcm, err := cpSnapshot(dir, "kube-controller-manager")
	if err != nil {
		skipOrFail(t, "needs the local kwok cluster's kube-controller-manager pid file (set VLLMCTL_E2E_CLUSTER_DIR): %v", err)
	}
	f := newRelFixture(t)
	f.faultInstall(t)

	unlock := lockCluster(t, dir)
	var once sync.Once
	restart := func() {
		once.Do(func() {
			if pid, err := cpPid(dir, kcm.name); err == nil && pid != kcm.pid && cpAlive(pid, kcm.name) {
				return // somebody else started it again
			}
			pid, err := kcm.start(dir)
			if err != nil {
				t.Errorf("start kube-controller-manager again: %v", err)
				return
			}
			t.Logf("kube-controller-manager started again, pid %d, at %s", pid, time.Now().Format("15:04:05.000"))
		})
		unlock()
	}
	t.Cleanup(restart)
	require.NoError(t, syscall.Kill(kcm.pid, syscall.SIGKILL))
	for deadline := time.Now().Add(5 * time.Second); cpAlive(kcm.pid, kcm.name) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	require.False(t, cpAlive(kcm.pid, kcm.name), "kube-controller-manager pid %d killed", kcm.pid)
	t.Logf("kube-controller-manager pid %d killed at %s", kcm.pid, time.Now().Format("15:04:05.000"))

	began := time.Now()
	r := f.run(t, faultDeployArgs("--set", "greeting=stalled", "--set", "readyDelay=2s",
		"--controller-stall-timeout", "10s", "--rollback-timeout", "30s", "--timeout", "5m", "-o", "json")...)
	took := time.Since(began)
	restart()
	t.Logf("FAULT kube-controller-manager killed: exit %d after %s\n%s", r.code, took.Round(time.Second), r.stderr)

	require.Contains(t, []int{3, 4}, r.code, "a failed rollout: %s", r)
	assert.Less(t, took, 2*time.Minute, "reported well before --timeout")
	res := result(t, r)
	require.NotNil(t, res.Failure, "the failure is recorded")
	assert.Equal(t, rollout.VerdictControllerStalled, res.Failure.Verdict)
	assert.Equal(t, "deployment/"+relName, res.Failure.Object)
	assert.Contains(t, res.Failure.Message, "is kube-controller-manager running?")
	assert.Contains(t, r.stderr, "is kube-controller-manager running?")

	// The controller-manager back (its leader lease taken again), the
	// release deploys again.
	f.assertNextDeploy(t)
}
